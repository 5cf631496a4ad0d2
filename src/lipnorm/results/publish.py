"""Publishing a finished results tree into the repository (`docs/results/`), with small
aggregates from which its tables and `summary.md` are regenerated: a test renders them
again from the committed files, so published numbers cannot drift from the code.

What is published of an experiment, and how its section of `summary.md` reads, is
declared by the experiment (`lipnorm.experiments`). `publish(results_root, out_dir)`
writes, for each experiment folder under the root (registered names; other folders such
as `bench/` are not experiments), `out_dir/<experiment>/` with:

- the experiment's tables (`<stem>.tex`) and figures (`<stem>.pdf|png`), copied;
- `runs.csv` (an experiment with training runs): one row per run, the experiment's
  `run_columns` (by default `experiments.RUN_COLUMNS`: the settings that identify a
  cell, the seed, status, metric name and test metric), sorted by its `run_keys`;
- `environment.csv` (where its runs recorded their compiled kernels, `summary.json`
  `kernels`): one row per distinct CPU, build (compiler, version, flags, resolved
  target), mode and path each kernel family took, with its count of runs
  (`write_environment`);
- the files its `store` writes:
  - gradients: `gradient_ratios.csv`, RUN_KEYS and `grad_ratio` (per run, the median
    over logged epochs of max/min attention-layer gradient norm,
    `analysis.gradient_ratios`; `store_gradient_ratios`);
  - lipschitz (no runs): `probe.csv` (`model, s, kind, estimate`, from `lipnorm probe`;
    `store_probe`);
  - diagnose (`runs.csv` with the settings that tell the grid, the α study and the
    authors' recipe apart, and the accuracies the diagnose table reads: `best_val_test`,
    `final_train`): two restrictions of the aggregate tables the diagnose table is built
    from, each row keyed by the diagnose `run_keys` (`store_diagnose`):
    `layerstats.csv` (`epoch, layer, metric, value`: the five `analysis.LAYER_METRICS`
    of each run's last attention layer, layer = depth, at its last logged epoch, i.e.
    one row per run and metric) and `gradnorms.csv` (`epoch, layer, kind, group,
    grad_norm`: each attention layer's gradient norm, group `all`, at the first logged
    epoch whose max/min ratio is defined, i.e. `depth` rows per run). They are exactly
    the rows of `layerstats` and `gradnorms` the table reads, so `diagnose_table`
    itself renders again from them (`read_stored`); for ~70 runs of depth <= 30 they
    take ~30 kB and ~95 kB;
- remedies: `runs.csv` holds the model axes, the settings a remedy is read from
  (`remedies.remedy_of`, filled with their off value where a run predates them:
  `remedies.with_remedy_settings`, its `prepare_runs`); heads, hidden, epochs; and the
  two accuracies the remedies tables read, `best_val_val` and `best_val_test`; and
  `layerstats.csv` (`store_remedies`; where the aggregate has layer statistics), the rows
  the MAD figure (`figures.remedies.remedies_mad`) reads: the `mean_average_distance` of
  each hidden layer (layer >= 1) of each run at its dataset's deepest depth, at the run's
  last logged epoch, keyed by the remedies `run_keys` (~70 runs x 30 layers: ~270 kB), so
  that the MAD figure is drawn again from a published folder (`merge`). Folders
  published before it have none: their MAD figure cannot be redrawn;

and `out_dir/summary.md`, the numbers of every experiment, rendered from those files
only (each experiment's `section`, `lipnorm.results.sections`). Before anything is written, every copied table must
equal the table rendered from the small aggregates: a table older than its aggregate is
refused.

`merge(parts, out_dir)` (`lipnorm publish --merge PART ... --out OUT_DIR`) joins published
folders into one, experiment by experiment (those present in any part): the runs.csv
files are concatenated (a run, by the experiment's `run_keys`, found in two parts is kept
once where its rows are equal and refused, naming the run and both parts, where they
differ), the stored files keyed by the run keys likewise (each run's rows from the part
its runs.csv row was kept from; a stored file that some part lacks is left out),
`environment.csv` rows summed per identical environment (a run published in two parts
counts in each), and `<experiment>/parts.csv` (PARTS_FILE: `part`, the folder relative to
OUT_DIR's parent; `runs`, its runs.csv rows; `kept`, those it added, not in an earlier
part) lists the parts, where more than one was given (a single part's own parts.csv is
kept). Tables and `summary.md` are rendered from the merged stored data (`regenerate`),
and so is every figure whose inputs are stored in every part; a figure whose inputs are
not is left out, and the summary says which and why (`_media`). OUT_DIR may be one of
the parts (`--merge X --out X`: X's figures drawn again from its stored data); it is
replaced atomically. An experiment without runs (lipschitz) is merged only where its
parts hold the same files, copied with its figures.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from lipnorm import experiments, registry
from lipnorm.experiments import diagnose
from lipnorm.experiments import remedies as remedies_experiment
from lipnorm.experiments.gradients import RATIOS_FILE
from lipnorm.experiments.lipschitz import PROBE_COLUMNS, PROBE_FILE
from lipnorm.experiments.registry import RUN_KEYS, Experiment, Output
from lipnorm.io import atomic_dir
from lipnorm.results.aggregate import load_table, seed_cells
from lipnorm.results.analysis import LAYER_METRICS, gradient_ratios, gradient_ratios_by_epoch
from lipnorm.results.tables.diagnose import DIAGNOSE_STATS
from lipnorm.results.tables.latex import render


SUMMARY = "summary.md"
RUNS_FILE = "runs.csv"
ENVIRONMENT_FILE = "environment.csv"
PARTS_FILE = "parts.csv"
MAD_METRIC = "mean_average_distance"


def _published(root: Path) -> list[Experiment]:
    """The registered experiments with a folder under `root`, in the registry's order."""
    return [experiments.experiment(name) for name in experiments.names() if (root / name).is_dir()]


def publish(results_root: str | os.PathLike, out_dir: str | os.PathLike) -> list[Path]:
    """Write `out_dir` (replacing it, atomically) from the results tree; returns its files."""
    root, out = Path(results_root), Path(out_dir)
    known = ", ".join(experiments.names())
    if not root.is_dir():
        raise ValueError(f"results root {root} is not a folder; give the folder holding "
                         f"the experiment folders ({known})")
    found = _published(root)
    if not found:
        raise ValueError(f"results root {root} holds no experiment folder; expected one of {known}")
    if out.resolve() == root.resolve() or out.resolve() in root.resolve().parents:
        raise ValueError(f"--out {out} holds the results root {root}; replacing it would "
                         "delete the results: publish into another folder")
    with atomic_dir(out) as tmp:
        for entry in found:
            _publish_experiment(entry, root / entry.name, tmp / entry.name)
        texts = regenerate(tmp)
        (tmp / SUMMARY).write_text(texts[SUMMARY])
        stale = [name for name, text in texts.items() if (tmp / name).read_text() != text]
        if stale:
            raise ValueError(
                f"{', '.join(stale)} under {root} differ from the tables the current code "
                "renders from its aggregate: rerun the workflow (`lipnorm tables`) first"
            )
        files = sorted(path.relative_to(tmp) for path in tmp.rglob("*") if path.is_file())
    return [out / name for name in files]


def _publish_experiment(entry: Experiment, source: Path, target: Path) -> None:
    target.mkdir()
    aggregate_dir = source / "aggregate"
    wanted = [Path("tables") / f"{stem}.tex" for stem in entry.table_stems] + [
        Path("figures") / f"{stem}.{fmt}" for stem in entry.figure_stems for fmt in ("pdf", "png")
    ]
    missing = [str(source / name) for name in wanted if not (source / name).is_file()]
    if missing:
        raise ValueError(f"{entry.name}: missing {', '.join(missing)}; finish the workflow first")
    for name in wanted:
        shutil.copyfile(source / name, target / name.name)
    runs = None
    if entry.trains:
        runs = load_table(aggregate_dir, "runs")
        if entry.prepare_runs is not None:
            runs = registry.resolve(entry.prepare_runs)(runs)
        keys, columns = list(entry.run_keys), list(entry.run_columns)
        absent = [c for c in columns if c not in runs.columns]
        if absent:
            raise ValueError(f"{aggregate_dir / 'runs.parquet'} has no column {', '.join(absent)}; "
                             f"publishing {entry.name} needs {', '.join(columns)}")
        # Each cell's seeds must be runs of one setting, or dropping the other settings
        # would merge settings; seed_cells raises naming the runs and the settings that differ.
        seed_cells(runs, keys[:-1])
        _write_csv(runs[columns].sort_values(keys), target / RUNS_FILE)
        write_environment(runs, target)
    if entry.store is not None:
        registry.resolve(entry.store)(aggregate_dir, runs, target)


def write_environment(runs: pd.DataFrame, target: Path) -> Path | None:
    """`target/environment.csv`: what ran the runs' compiled kernels (their `kernels`
    record, `lipnorm.kernels.record`, flattened by the aggregate), one row per distinct
    combination with its count of runs, the library's machine-local path left out; None
    (and no file) where no run recorded one (runs that predate the record)."""
    columns = sorted(c for c in runs.columns if c.startswith("kernels_") and c != "kernels_library")
    recorded = runs[runs[columns].notna().any(axis=1)] if columns else runs.iloc[:0]
    if recorded.empty:
        return None
    table = recorded[columns].fillna("").astype(str).value_counts(sort=False).rename("runs").reset_index()
    path = target / ENVIRONMENT_FILE
    _write_csv(table.sort_values(columns), path)
    return path


def store_gradient_ratios(aggregate_dir: Path, runs: pd.DataFrame, target: Path) -> None:
    """gradients: `gradient_ratios.csv`, RUN_KEYS and each run's `grad_ratio`."""
    ratios = gradient_ratios(load_table(aggregate_dir, "gradnorms"))
    per_run = runs[list(RUN_KEYS)].assign(grad_ratio=runs["run_dir"].map(ratios).to_numpy())
    _write_csv(per_run.sort_values(list(RUN_KEYS)), target / RATIOS_FILE)


def store_probe(aggregate_dir: Path, runs: None, target: Path) -> None:
    """lipschitz: `probe.csv`, `lipnorm probe`'s table."""
    probe = load_table(aggregate_dir, "probe")[list(PROBE_COLUMNS)]
    _write_csv(probe.sort_values(["model", "kind", "s"]), target / PROBE_FILE)


def store_diagnose(aggregate_dir: Path, runs: pd.DataFrame, target: Path) -> None:
    """diagnose: the rows of `layerstats` and `gradnorms` the diagnose table reads
    (`last_layer_stats`, `first_epoch_gradnorms`), keyed by its run keys."""
    keys = list(diagnose.RUN_KEYS)
    reduced = {
        "layerstats": last_layer_stats(runs, load_table(aggregate_dir, "layerstats")),
        "gradnorms": first_epoch_gradnorms(load_table(aggregate_dir, "gradnorms")),
    }
    for name, rows in reduced.items():
        file, stored = diagnose.STORED_TABLES[name]
        rows = rows.merge(runs[["run_dir", *keys]], on="run_dir", how="inner", validate="many_to_one")
        order = [*keys, "layer", "metric"] if name == "layerstats" else [*keys, "layer"]
        _write_csv(rows[list(stored)].sort_values(order), target / file)


def store_remedies(aggregate_dir: Path, runs: pd.DataFrame, target: Path) -> None:
    """remedies: `layerstats.csv`, the rows `remedies_mad` reads (`mad_rows`), keyed by
    the remedies run keys; nothing where the aggregate has no layer statistics (runs
    trained with layer_stats off)."""
    if not (Path(aggregate_dir) / "layerstats.parquet").is_file():
        return
    keys = list(remedies_experiment.RUN_KEYS)
    file, stored = remedies_experiment.STORED_TABLES["layerstats"]
    rows = mad_rows(runs, load_table(aggregate_dir, "layerstats"))
    rows = rows.merge(runs[["run_dir", *keys]], on="run_dir", how="inner", validate="many_to_one")
    _write_csv(rows[list(stored)].sort_values([*keys, "layer"]), target / file)


def mad_rows(runs: pd.DataFrame, layerstats: pd.DataFrame) -> pd.DataFrame:
    """The `layerstats` rows (`run_dir, epoch, layer, metric, value`) the remedies MAD
    figure reads: `mean_average_distance` of the hidden layers (layer >= 1) of the runs at
    their dataset's deepest depth, at each run's last epoch with a MAD row. A merge keeps
    this complete: a part with runs at the merged deepest depth has it as its own deepest."""
    deepest = runs.loc[runs["depth"] == runs.groupby("dataset")["depth"].transform("max"), "run_dir"]
    stats = layerstats.loc[layerstats["run_dir"].isin(deepest) & (layerstats["metric"] == MAD_METRIC),
                           ["run_dir", "epoch", "layer", "metric", "value"]]
    last = stats.groupby("run_dir")["epoch"].transform("max")
    return stats.loc[(stats["epoch"] == last) & (stats["layer"] >= 1)]


def last_layer_stats(runs: pd.DataFrame, layerstats: pd.DataFrame) -> pd.DataFrame:
    """The `layerstats` rows (`run_dir, epoch, layer, metric, value`) of LAYER_METRICS at
    each run's last attention layer (layer = depth) at its last logged epoch: the epoch
    the diagnose table reads (the last one with a table metric, DIAGNOSE_STATS; else the
    last one), so that the table renders from these rows as from all of them."""
    stats = layerstats.loc[layerstats["run_dir"].isin(runs["run_dir"])
                           & layerstats["metric"].isin(list(LAYER_METRICS)),
                           ["run_dir", "epoch", "layer", "metric", "value"]]
    in_table = stats.loc[stats["metric"].isin(list(DIAGNOSE_STATS))]
    last = (in_table.groupby("run_dir")["epoch"].max()
            .combine_first(stats.groupby("run_dir")["epoch"].max()))
    depth = runs.set_index("run_dir")["depth"]
    at = stats["epoch"].eq(stats["run_dir"].map(last)) & stats["layer"].eq(stats["run_dir"].map(depth))
    return stats.loc[at]


def first_epoch_gradnorms(gradnorms: pd.DataFrame) -> pd.DataFrame:
    """The `gradnorms` rows (`run_dir, epoch, layer, kind, group, grad_norm`) of the
    attention layers (group `all`) at each run's first logged epoch whose max/min ratio
    (`analysis.gradient_ratios_by_epoch`) is not NaN: the ratio the diagnose table reads."""
    rows = gradnorms.loc[(gradnorms["kind"] == "attention") & (gradnorms["group"] == "all"),
                         ["run_dir", "epoch", "layer", "kind", "group", "grad_norm"]]
    ratios = gradient_ratios_by_epoch(rows).dropna().reset_index()
    first = ratios.groupby("run_dir")["epoch"].min()
    return rows.loc[rows["epoch"].eq(rows["run_dir"].map(first))]


def _write_csv(frame: pd.DataFrame, path: Path) -> None:
    frame.to_csv(path, index=False)


def read_csv(path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    """A stored small aggregate, with exactly `columns` (floats read back exactly)."""
    if not path.is_file():
        raise ValueError(f"{path} does not exist; `lipnorm publish` writes it")
    frame = pd.read_csv(path, float_precision="round_trip")
    if tuple(frame.columns) != columns:
        raise ValueError(f"{path} has columns {list(frame.columns)}; expected {list(columns)}")
    return frame


def read_runs(folder: str | os.PathLike, experiment: str | None = None) -> pd.DataFrame:
    """A published experiment's `runs.csv`, as a `runs` table the tables code accepts
    (`experiment` defaults to the folder's name). Its `run_dir` names the run's line of
    `runs.csv` (`<experiment>/runs.csv:<line>`), the key the stored aggregates join on."""
    folder = Path(folder)
    entry = experiments.experiment(experiment or folder.name)
    runs = read_csv(folder / RUNS_FILE, entry.run_columns)
    runs["run_dir"] = [f"{entry.name}/{RUNS_FILE}:{line}" for line in range(2, len(runs) + 2)]
    runs.attrs["settings"] = list(entry.run_keys)
    return runs


def load_diagnose(folder: Path, runs: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """diagnose: the stored `layerstats.csv` and `gradnorms.csv` as the aggregate tables
    of the same names: their rows, with the `run_dir` of their run in `runs` (`read_runs`)."""
    return _load_keyed(folder, runs, diagnose.RUN_KEYS, diagnose.STORED_TABLES)


def load_remedies(folder: Path, runs: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """remedies: the stored `layerstats.csv` (`store_remedies`) as the aggregate table
    `layerstats`, where the folder has one (folders published before it have none)."""
    present = {name: spec for name, spec in remedies_experiment.STORED_TABLES.items()
               if (Path(folder) / spec[0]).is_file()}
    return _load_keyed(folder, runs, remedies_experiment.RUN_KEYS, present)


def _load_keyed(folder: Path, runs: pd.DataFrame, run_keys, stored_tables) -> dict[str, pd.DataFrame]:
    """Each stored table (name -> (file, columns)) with the `run_dir` of its run in
    `runs`, joined on `run_keys`; a row of no run is refused."""
    keys = list(run_keys)
    tables = {}
    for name, (file, columns) in stored_tables.items():
        stored = read_csv(folder / file, columns)
        joined = stored.merge(runs[[*keys, "run_dir"]], on=keys, how="left",
                              validate="many_to_one")
        orphans = joined["run_dir"].isna()
        if orphans.any():
            count, line = int(orphans.sum()), int(np.flatnonzero(orphans)[0]) + 2
            raise ValueError(f"{folder / file}: {count} row{'s' * (count > 1)} (the first on "
                             f"line {line}) of no run of {folder / RUNS_FILE}; publish again")
        tables[name] = joined.drop(columns=keys)
    return tables


def read_stored(folder: str | os.PathLike, experiment: str | None = None) -> dict[str, pd.DataFrame]:
    """A published experiment's small aggregates as the aggregate tables its builders
    take: `runs`, and those its `load_stored` reads (diagnose: the restrictions
    `layerstats` and `gradnorms`, the rows the diagnose table reads)."""
    folder = Path(folder)
    entry = experiments.experiment(experiment or folder.name)
    runs = read_runs(folder, entry.name)
    tables = {"runs": runs}
    if entry.load_stored is not None:
        tables.update(registry.resolve(entry.load_stored)(folder, runs))
    return tables


def _render_table(output: Output, stored: dict[str, pd.DataFrame] | None) -> str:
    absent = [name for name in output.inputs if stored is None or name not in stored]
    if absent:
        raise ValueError(f"table {output.stem} is built from {', '.join(output.inputs)}, but "
                         f"`lipnorm publish` stores no {', '.join(absent)} for it")
    return render(*experiments.build(output, stored.get))


def regenerate(out_dir: str | os.PathLike) -> dict[str, str]:
    """Every table (`<experiment>/<stem>.tex`) and `summary.md` of a published folder,
    rendered in memory from its small aggregates; keys are paths relative to `out_dir`.

    The header names the stored files: those of every experiment `named_in_every_summary`,
    and those of each published experiment that its folder holds (remedies' layerstats.csv
    is absent from folders published before it was stored). Each section ends with the
    parts a merged folder was made of (`parts.csv`) and its tables and figures (`_media`)."""
    out = Path(out_dir)
    found = _published(out)
    if not found:
        raise ValueError(f"{out} holds no published experiment folder ({', '.join(experiments.names())})")
    texts: dict[str, str] = {}
    present = {entry.name for entry in found}
    stored_files = [f"<experiment>/{RUNS_FILE}"] + [
        f"{name}/{file}" for name in experiments.names()
        for entry in [experiments.experiment(name)]
        if entry.named_in_every_summary or name in present
        for file in entry.stored_files
        if entry.named_in_every_summary or (out / name / file).is_file()
    ]
    summary = [
        "# Published results",
        "",
        "Written by `lipnorm publish` from the small aggregates in this folder "
        f"({', '.join(f'`{name}`' for name in stored_files)}); "
        "`tests/test_publish.py` renders this file and every table again from them and "
        "fails when anything differs. Accuracy cells are the test metric ×100, mean ± "
        "sample std over n seeds; `diverged (k/n)` when k of the n seeds diverged (no mean: "
        "the survivors alone would flatter the setting).",
    ]
    for entry in found:
        folder = out / entry.name
        stored = read_stored(folder, entry.name) if entry.trains else None
        runs = None if stored is None else stored["runs"]
        for output in entry.tables:
            texts[f"{entry.name}/{output.stem}.tex"] = _render_table(output, stored)
        section = registry.resolve(entry.section)
        summary += ["", f"## {entry.name}: {entry.title}", "", *section(folder, runs),
                    *_parts_lines(entry, folder), *_media(entry, folder, stored)]
    texts[SUMMARY] = "\n".join(summary) + "\n"
    return texts


def _parts_lines(entry: Experiment, folder: Path) -> list[str]:
    """Where the folder was merged from several parts (`parts.csv`): which, and how many
    runs each gave."""
    if not (folder / PARTS_FILE).is_file():
        return []
    parts = read_csv(folder / PARTS_FILE, PARTS_COLUMNS)
    listed = "; ".join(f"`{row.part}` ({row.runs} runs, {row.kept} kept)" for row in parts.itertuples())
    return ["", f"Merged by `lipnorm publish --merge` from {len(parts)} published part{'s' * (len(parts) != 1)} "
                f"([`parts.csv`]({entry.name}/{PARTS_FILE}); kept: the runs not in an earlier part): {listed}."]


def _media(entry: Experiment, folder: Path | None = None,
           stored: dict[str, pd.DataFrame] | None = None) -> list[str]:
    """Links to the tables and the figures (as images) of the experiment: the figures its
    folder holds (all of them where no `folder` is given); a figure it lacks is named,
    with why (`merge` draws a figure only from stored data that hold all it reads:
    `_not_drawn`)."""
    lines = []
    if entry.tables:
        links = ", ".join(f"[`{s}.tex`]({entry.name}/{s}.tex)" for s in entry.table_stems)
        lines += ["", f"LaTeX: {links}."]
    absent = []
    for output in entry.figures:
        if folder is None or (folder / f"{output.stem}.png").is_file():
            lines += ["", f"![{output.stem}]({entry.name}/{output.stem}.png)"]
        else:
            absent.append(output)
    for output in absent:
        why = _not_drawn(entry, output, stored) or "its file is missing; publish again"
        lines += ["", f"Figure `{output.stem}` is not in this folder: {why}."]
    return lines


# --- merging published folders -----------------------------------------------------

PARTS_COLUMNS = ("part", "runs", "kept")
# Experiment -> its figures drawn from stored tables besides runs: those whose stored
# restriction holds every row the figure reads (remedies' layerstats.csv is the MAD
# figure's). diagnose's layerstats.csv and gradnorms.csv hold the rows its table reads,
# not its figures': drawn from them, its figures would show a part of their data.
DRAWN_FROM_STORED = {"remedies": ("remedies_mad",)}


def _not_drawn(entry: Experiment, output: Output, stored: dict[str, pd.DataFrame] | None) -> str | None:
    """Why `merge` cannot draw `output` from the stored tables `stored` (None: it can)."""
    inputs = " and ".join(f"`{name}`" for name in output.inputs)
    missing = [name for name in output.inputs if stored is None or name not in stored]
    if missing:
        return (f"it is drawn from {inputs}, and this folder stores no "
                f"{' and no '.join(f'`{name}`' for name in missing)} (an experiment that stores none, or "
                "a part published before `lipnorm publish` stored it), so it cannot be drawn again "
                "from the published data")
    partial = [name for name in output.inputs
               if name != "runs" and output.stem not in DRAWN_FROM_STORED.get(entry.name, ())]
    if partial:
        return (f"it is drawn from {inputs}, and the stored {' and '.join(f'`{name}`' for name in partial)} "
                "holds only the rows the tables read, so it cannot be drawn again from the published data")
    return None


def merge(parts, out_dir: str | os.PathLike) -> list[Path]:
    """Write `out_dir` (replacing it, atomically) from the published folders `parts` (see
    the module docstring); returns its files. `out_dir` may be one of the parts."""
    parts, out = [Path(part) for part in parts], Path(out_dir)
    if not parts:
        raise ValueError("merge: give at least one published folder")
    seen: dict[Path, Path] = {}
    for part in parts:
        if not part.is_dir() or not _published(part):
            raise ValueError(f"merge: {part} is not a published folder (one holding experiment folders: "
                             f"{', '.join(experiments.names())})")
        if part.resolve() in seen:
            raise ValueError(f"merge: {part} is given twice (as {seen[part.resolve()]})")
        seen[part.resolve()] = part
        if out.resolve() in part.resolve().parents:
            raise ValueError(f"merge: --out {out} holds the part {part}; replacing it would delete "
                             "the part: merge into another folder (or into the part itself)")
    found = [experiments.experiment(name) for name in experiments.names()
             if any((part / name).is_dir() for part in parts)]
    with atomic_dir(out) as tmp:
        for entry in found:
            holders = [part for part in parts if (part / entry.name).is_dir()]
            _merge_experiment(entry, holders, tmp / entry.name, out, several=len(parts) > 1)
        texts = regenerate(tmp)
        for name, text in texts.items():
            (tmp / name).write_text(text)
        files = sorted(path.relative_to(tmp) for path in tmp.rglob("*") if path.is_file())
    return [out / name for name in files]


def _part_name(part: Path, out: Path) -> str:
    """A part as parts.csv names it: relative to the merged folder's parent."""
    return Path(os.path.relpath(part.resolve(), out.resolve().parent)).as_posix()


def _merge_experiment(entry: Experiment, holders: list[Path], target: Path, out: Path,
                      several: bool) -> None:
    target.mkdir()
    sources = [part / entry.name for part in holders]
    if not entry.trains:
        _merge_identical(entry, holders, target)
        return
    frames = [read_csv(source / RUNS_FILE, entry.run_columns) for source in sources]
    runs, kept = _union_runs(entry, holders, frames)
    _write_csv(runs, target / RUNS_FILE)
    for file in entry.stored_files:
        if all((source / file).is_file() for source in sources):
            _merge_keyed_file(entry, holders, sources, kept, file, target)
    _merge_environments(sources, target)
    if several:
        table = pd.DataFrame([(_part_name(part, out), len(frame), int(k.sum()))
                              for part, frame, k in zip(holders, frames, kept)], columns=list(PARTS_COLUMNS))
        _write_csv(table, target / PARTS_FILE)
    elif (sources[0] / PARTS_FILE).is_file():
        shutil.copyfile(sources[0] / PARTS_FILE, target / PARTS_FILE)
    stored = read_stored(target, entry.name)
    for output in entry.figures:
        if _not_drawn(entry, output, stored) is None:
            from lipnorm.results.figures.style import save_figure  # matplotlib only when drawing

            save_figure(experiments.build(output, stored.get), target / output.stem)


def _run_text(entry: Experiment, row: pd.Series) -> str:
    return ", ".join(f"{key}={row[key]}" for key in entry.run_keys)


def _union_runs(entry: Experiment, holders: list[Path], frames: list[pd.DataFrame]):
    """The runs of every part, each run once, sorted by the run keys; and per part, a mask
    of its rows kept (those of no earlier part). A run in two parts with different rows
    is refused."""
    keys = list(entry.run_keys)
    tagged = pd.concat([frame.assign(_part=i, _row=np.arange(len(frame))) for i, frame in enumerate(frames)],
                       ignore_index=True)
    repeated = tagged.duplicated(keys, keep="first")
    if repeated.any():
        values = [c for c in entry.run_columns if c not in keys]
        firsts = tagged.loc[~repeated].set_index(keys)
        for _, row in tagged.loc[repeated].iterrows():
            first = firsts.loc[tuple(row[keys])]
            differ = [c for c in values if not (first[c] == row[c] or (pd.isna(first[c]) and pd.isna(row[c])))]
            if differ:
                column = differ[0]
                raise ValueError(
                    f"merge: {entry.name} run ({_run_text(entry, row)}) is in {holders[int(first['_part'])]} "
                    f"and {holders[int(row['_part'])]} with different values ({column}: {first[column]!r} "
                    f"and {row[column]!r}); merge parts whose common runs agree"
                )
    union = tagged.loc[~repeated]
    kept = [np.isin(np.arange(len(frame)), union.loc[union["_part"] == i, "_row"]) for i, frame in enumerate(frames)]
    union = union.drop(columns=["_part", "_row"]).sort_values(keys, ignore_index=True)
    return union[list(entry.run_columns)], kept


def _merge_keyed_file(entry: Experiment, holders, sources, kept, file: str, target: Path) -> None:
    """A stored file of every part: keyed by the run keys (its first columns), each run's
    rows from the part its run was kept from; otherwise the parts' files must be equal."""
    keys = list(entry.run_keys)
    tables = [pd.read_csv(source / file, float_precision="round_trip") for source in sources]
    if any(list(table.columns[:len(keys)]) != keys for table in tables):
        _require_equal(entry, holders, file)
        shutil.copyfile(sources[0] / file, target / file)
        return
    runs = [read_csv(source / RUNS_FILE, entry.run_columns) for source in sources]
    rows = [table.merge(run.loc[mask, keys], on=keys, how="inner")
            for table, run, mask in zip(tables, runs, kept)]
    merged = pd.concat(rows, ignore_index=True)
    order = [*keys, *(c for c in ("layer", "metric") if c in merged.columns)]
    _write_csv(merged[list(tables[0].columns)].sort_values(order, kind="stable"), target / file)


def _require_equal(entry: Experiment, holders: list[Path], file: str) -> None:
    first = (holders[0] / entry.name / file).read_bytes()
    for part in holders[1:]:
        if (part / entry.name / file).read_bytes() != first:
            raise ValueError(f"merge: {entry.name}/{file} differs between {holders[0]} and {part}, "
                             "and has no run keys to join it by")


def _merge_identical(entry: Experiment, holders: list[Path], target: Path) -> None:
    """An experiment without runs: the parts' stored files must be equal; copied, with
    the figures of the first part."""
    for file in entry.stored_files:
        _require_equal(entry, holders, file)
        shutil.copyfile(holders[0] / entry.name / file, target / file)
    for stem in entry.figure_stems:
        for fmt in ("pdf", "png"):
            if (holders[0] / entry.name / f"{stem}.{fmt}").is_file():
                shutil.copyfile(holders[0] / entry.name / f"{stem}.{fmt}", target / f"{stem}.{fmt}")


def _merge_environments(sources: list[Path], target: Path) -> None:
    """environment.csv of the parts that have one: the count of runs summed per identical
    environment row (columns one part lacks read as empty)."""
    tables = [pd.read_csv(source / ENVIRONMENT_FILE, dtype=str, keep_default_na=False)
              for source in sources if (source / ENVIRONMENT_FILE).is_file()]
    if not tables:
        return
    table = pd.concat(tables, ignore_index=True).fillna("")
    columns = sorted(c for c in table.columns if c != "runs")
    table["runs"] = table["runs"].astype(int)
    summed = table.groupby(columns, sort=True, as_index=False)["runs"].sum()
    _write_csv(summed[[*columns, "runs"]].sort_values(columns), target / ENVIRONMENT_FILE)
