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
  two accuracies the remedies tables read, `best_val_val` and `best_val_test`;

and `out_dir/summary.md`, the numbers of every experiment, rendered from those files
only (each experiment's `section`, `lipnorm.results.sections`). Before anything is written, every copied table must
equal the table rendered from the small aggregates: a table older than its aggregate is
refused.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from lipnorm import experiments, registry
from lipnorm.experiments import diagnose
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
    keys = list(diagnose.RUN_KEYS)
    tables = {}
    for name, (file, columns) in diagnose.STORED_TABLES.items():
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
    rendered in memory from its small aggregates; keys are paths relative to `out_dir`."""
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
        summary += ["", f"## {entry.name}: {entry.title}", "", *section(folder, runs), *_media(entry)]
    texts[SUMMARY] = "\n".join(summary) + "\n"
    return texts


def _media(entry: Experiment) -> list[str]:
    """Links to the tables and the figures (as images) of the experiment."""
    lines = []
    if entry.tables:
        links = ", ".join(f"[`{s}.tex`]({entry.name}/{s}.tex)" for s in entry.table_stems)
        lines += ["", f"LaTeX: {links}."]
    for stem in entry.figure_stems:
        lines += ["", f"![{stem}]({entry.name}/{stem}.png)"]
    return lines
