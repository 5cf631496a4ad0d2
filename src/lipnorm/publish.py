"""Publishing a finished results tree into the repository (`docs/results/`), with small
aggregates from which its tables and `summary.md` are regenerated: a test renders them
again from the committed files, so published numbers cannot drift from the code.

`publish(results_root, out_dir)` writes, for each experiment folder under the root
(names in EXPERIMENTS; other folders such as `bench/` are not experiments),
`out_dir/<experiment>/` with:

- the experiment's tables (`<stem>.tex`, TABLES) and figures (`<stem>.pdf|png`,
  FIGURES), copied;
- `runs.csv`: one row per run, the columns RUN_COLUMNS (the settings that identify a
  cell, the seed, status, metric name and test metric), sorted by RUN_KEYS;
- gradients: `gradient_ratios.csv`, RUN_KEYS and `grad_ratio` (per run, the median
  over logged epochs of max/min attention-layer gradient norm, `plots.gradient_ratios`);
- lipschitz: `probe.csv` (`model, s, kind, estimate`, from `lipnorm probe`);

and `out_dir/summary.md`, the numbers of every experiment, rendered from those files
only. Before anything is written, every copied table must equal the table rendered
from the small `runs.csv`: a table older than its aggregate is refused.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from lipnorm.aggregate import (
    DATASET_LABELS,
    EXPERIMENTS,
    MODEL_LABELS,
    label,
    load_table,
    ordered,
    seed_cells,
)
from lipnorm.io import atomic_dir
from lipnorm.plots import FIGURES, gradient_ratios
from lipnorm.tables import (
    BUILDERS,
    EMPTY,
    TABLES,
    best_depths,
    cell_texts,
    classic_table,
    format_cell,
    number_text,
    render,
)

CELL_SETTINGS = ("dataset", "missing_rate", "model", "depth", "alpha")
RUN_KEYS = (*CELL_SETTINGS, "seed")
RUN_COLUMNS = (*RUN_KEYS, "status", "metric", "test_metric")
PROBE_COLUMNS = ("model", "s", "kind", "estimate")
SUMMARY = "summary.md"
RUNS_FILE = "runs.csv"
RATIOS_FILE = "gradient_ratios.csv"
PROBE_FILE = "probe.csv"
LATEX_PM = "$\\pm$"
MISSING = "–"  # a combination without runs


def publish(results_root: str | os.PathLike, out_dir: str | os.PathLike) -> list[Path]:
    """Write `out_dir` (replacing it, atomically) from the results tree; returns its files."""
    root, out = Path(results_root), Path(out_dir)
    if not root.is_dir():
        raise ValueError(f"results root {root} is not a folder; give the folder holding "
                         f"the experiment folders ({', '.join(EXPERIMENTS)})")
    experiments = [e for e in EXPERIMENTS if (root / e).is_dir()]
    if not experiments:
        raise ValueError(f"results root {root} holds no experiment folder; expected one of "
                         f"{', '.join(EXPERIMENTS)}")
    if out.resolve() == root.resolve() or out.resolve() in root.resolve().parents:
        raise ValueError(f"--out {out} holds the results root {root}; replacing it would "
                         "delete the results: publish into another folder")
    with atomic_dir(out) as tmp:
        for experiment in experiments:
            _publish_experiment(experiment, root / experiment, tmp / experiment)
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


def _publish_experiment(experiment: str, source: Path, target: Path) -> None:
    target.mkdir()
    aggregate_dir = source / "aggregate"
    wanted = [Path("tables") / f"{stem}.tex" for stem in TABLES[experiment]] + [
        Path("figures") / f"{stem}.{fmt}" for stem in FIGURES[experiment] for fmt in ("pdf", "png")
    ]
    missing = [str(source / name) for name in wanted if not (source / name).is_file()]
    if missing:
        raise ValueError(f"{experiment}: missing {', '.join(missing)}; finish the workflow first")
    for name in wanted:
        shutil.copyfile(source / name, target / name.name)
    if experiment == "lipschitz":
        probe = load_table(aggregate_dir, "probe")[list(PROBE_COLUMNS)]
        _write_csv(probe.sort_values(["model", "kind", "s"]), target / PROBE_FILE)
        return
    runs = load_table(aggregate_dir, "runs")
    # Each cell's seeds must be runs of one setting, or dropping the other settings
    # would merge settings; seed_cells raises naming the runs and the settings that differ.
    seed_cells(runs, list(CELL_SETTINGS))
    _write_csv(runs[list(RUN_COLUMNS)].sort_values(list(RUN_KEYS)), target / RUNS_FILE)
    if experiment == "gradients":
        ratios = gradient_ratios(load_table(aggregate_dir, "gradnorms"))
        per_run = runs[list(RUN_KEYS)].assign(grad_ratio=runs["run_dir"].map(ratios).to_numpy())
        _write_csv(per_run.sort_values(list(RUN_KEYS)), target / RATIOS_FILE)


def _write_csv(frame: pd.DataFrame, path: Path) -> None:
    frame.to_csv(path, index=False)


def _read_csv(path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    """A stored small aggregate, with exactly `columns` (floats read back exactly)."""
    if not path.is_file():
        raise ValueError(f"{path} does not exist; `lipnorm publish` writes it")
    frame = pd.read_csv(path, float_precision="round_trip")
    if tuple(frame.columns) != columns:
        raise ValueError(f"{path} has columns {list(frame.columns)}; expected {list(columns)}")
    return frame


def read_runs(folder: str | os.PathLike) -> pd.DataFrame:
    """A published experiment's `runs.csv`, as a `runs` table the tables code accepts."""
    runs = _read_csv(Path(folder) / RUNS_FILE, RUN_COLUMNS)
    runs.attrs["settings"] = list(RUN_KEYS)
    return runs


def regenerate(out_dir: str | os.PathLike) -> dict[str, str]:
    """Every table (`<experiment>/<stem>.tex`) and `summary.md` of a published folder,
    rendered in memory from its small aggregates; keys are paths relative to `out_dir`."""
    out = Path(out_dir)
    experiments = [e for e in EXPERIMENTS if (out / e).is_dir()]
    if not experiments:
        raise ValueError(f"{out} holds no published experiment folder ({', '.join(EXPERIMENTS)})")
    texts: dict[str, str] = {}
    summary = [
        "# Published results",
        "",
        "Written by `lipnorm publish` from the small aggregates in this folder "
        f"(`<experiment>/{RUNS_FILE}`, `gradients/{RATIOS_FILE}`, `lipschitz/{PROBE_FILE}`); "
        "`tests/test_publish.py` renders this file and every table again from them and "
        "fails when anything differs. Accuracy cells are the test metric ×100, mean ± "
        "sample std over n seeds; `diverged (k/n)` when k of the n seeds diverged (no mean: "
        "the survivors alone would flatter the setting).",
    ]
    for experiment in experiments:
        folder = out / experiment
        runs = None if experiment == "lipschitz" else read_runs(folder)
        for stem in TABLES[experiment]:
            texts[f"{experiment}/{stem}.tex"] = render(*BUILDERS[stem](runs))
        title, section = SECTIONS[experiment]
        summary += ["", f"## {experiment}: {title}", "", *section(folder, runs), *_media(experiment)]
    texts[SUMMARY] = "\n".join(summary) + "\n"
    return texts


def _media(experiment: str) -> list[str]:
    """Links to the tables and the figures (as images) of the experiment."""
    lines = []
    if TABLES[experiment]:
        links = ", ".join(f"[`{s}.tex`]({experiment}/{s}.tex)" for s in TABLES[experiment])
        lines += ["", f"LaTeX: {links}."]
    for stem in FIGURES[experiment]:
        lines += ["", f"![{stem}]({experiment}/{stem}.png)"]
    return lines


# --- markdown ---------------------------------------------------------------------

def _table(frame: pd.DataFrame) -> list[str]:
    """A GitHub pipe table of the string frame (its index is not printed)."""
    lines = ["| " + " | ".join(map(str, frame.columns)) + " |",
             "|" + "|".join("---" for _ in frame.columns) + "|"]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in frame.itertuples(index=False)]
    return lines


def _cell(mean: float, std: float, n: int, n_diverged: int) -> str:
    return format_cell(mean, std, n, n_diverged).replace(LATEX_PM, "±")


def _cell_texts(cells: pd.DataFrame) -> list[str]:
    return [text.replace(LATEX_PM, "±") for text in cell_texts(cells)]


def _paper_order(column: pd.Series) -> pd.Series:
    """Sort key: datasets and models in the paper's order, anything else by value."""
    order = {"dataset": list(DATASET_LABELS), "model": list(MODEL_LABELS)}.get(column.name)
    return column.map(order.index) if order else column


def _by_model(cells: pd.DataFrame, rows: list[str], names: list[str], bold: bool) -> list[str]:
    """A table of `cells["text"]`: rows `rows` (headed `names`), one column per model in
    the paper's order; with `bold`, the best mean of each row is bold."""
    cells = cells.copy()
    if bold:
        marked = cells["mean"].eq(cells.groupby(rows)["mean"].transform("max"))
        cells.loc[marked, "text"] = "**" + cells.loc[marked, "text"] + "**"
    models = ordered("model", cells["model"])
    grid = cells.pivot(index=rows, columns="model", values="text").reindex(columns=models)
    grid = grid.fillna(MISSING).reset_index().sort_values(rows, key=_paper_order)
    for row in rows:
        grid[row] = [label(row, v) if row == "dataset" else number_text(v) for v in grid[row]]
    grid.columns = [*names, *(label("model", m) for m in models)]
    return _table(grid)


def _metric(runs: pd.DataFrame) -> str:
    return " / ".join(sorted(runs["metric"].unique()))


def _counts(runs: pd.DataFrame) -> str:
    diverged = int((runs["status"] == "diverged").sum())
    seeds = ", ".join(str(s) for s in sorted(runs["seed"].unique()))
    return f"{len(runs)} runs ({diverged} diverged), seeds {seeds}."


def _blocks(cells: pd.DataFrame, keys: list[str]):
    """(key values, rows) per combination of `keys`, datasets and models in the paper's order."""
    combos = cells[keys].drop_duplicates()
    combos = combos.sort_values(keys, key=_paper_order)
    for combo in combos.itertuples(index=False):
        mask = np.logical_and.reduce([(cells[k] == v).to_numpy() for k, v in zip(keys, combo)])
        yield combo, cells.loc[mask]


# --- sections ---------------------------------------------------------------------

def _accuracy_by_depth(runs: pd.DataFrame) -> list[str]:
    """Per dataset and missing rate: depth (rows) × model; bold: the best model per depth."""
    cells = seed_cells(runs, ["dataset", "missing_rate", "model", "depth"])
    cells["text"] = _cell_texts(cells)
    lines = [f"Test {_metric(runs)} (%) per depth. {_counts(runs)} Bold: the best model at each depth."]
    for (dataset, rate), block in _blocks(cells, ["dataset", "missing_rate"]):
        lines += ["", f"### {label('dataset', dataset)}, {number_text(rate)}% missing features", ""]
        lines += _by_model(block, ["depth"], ["Layers"], bold=True)
    return lines


def _depth_section(folder: Path, runs: pd.DataFrame) -> list[str]:
    best = best_depths(runs)
    best["text"] = [
        text if depth == EMPTY else f"{text} at L={depth}"
        for text, depth in zip(_cell_texts(best), best["depth"])
    ]
    return [
        *_accuracy_by_depth(runs),
        "",
        "### Best depth per model",
        "",
        "The depth with the best mean (the smallest on a tie; depths with a diverged seed "
        "are not candidates). Bold: the best model per dataset and missing rate.",
        "",
        *_by_model(best, ["dataset", "missing_rate"], ["Dataset", "Missing rate (%)"], bold=True),
    ]


def _gradients_section(folder: Path, runs: pd.DataFrame) -> list[str]:
    ratios = _read_csv(folder / RATIOS_FILE, (*RUN_KEYS, "grad_ratio"))
    runs = runs.merge(ratios, on=list(RUN_KEYS), how="left", validate="one_to_one")
    cells = seed_cells(runs, ["dataset", "model", "depth"])
    # The figure's log axis averages in log space: the geometric mean over seeds.
    geometric = runs.groupby(["dataset", "model", "depth"])["grad_ratio"].apply(
        lambda r: float(np.exp(np.log(r).mean()))
    )
    cells = cells.merge(geometric.reset_index(), on=["dataset", "model", "depth"])
    cells["text"] = [
        f"{ratio:#.3g} (n={n})" if valid else _cell(np.nan, np.nan, n, k)
        for ratio, n, k, valid in cells[["grad_ratio", "n", "n_diverged", "valid"]].itertuples(index=False)
    ]
    lines = [
        "Max/min over attention layers of the layer's gradient norm, median over logged "
        "epochs per run, geometric mean over seeds (1 = every layer gets the same gradient; "
        f"large = vanishing or exploding gradients). {_counts(runs)}"
    ]
    for (dataset,), block in _blocks(cells, ["dataset"]):
        lines += ["", f"### {label('dataset', dataset)}", ""]
        lines += _by_model(block, ["depth"], ["Layers"], bold=False)
    return lines


def _alpha_section(folder: Path, runs: pd.DataFrame) -> list[str]:
    cells = seed_cells(runs, ["dataset", "model", "depth", "alpha"])
    lines = [f"Test {_metric(runs)} (%) per LipschitzNorm scale α. {_counts(runs)} "
             "Rank 1 = best mean; diverged settings are not ranked."]
    for (dataset, model, depth), block in _blocks(cells, ["dataset", "model", "depth"]):
        block = block.sort_values("alpha")
        rank = block["mean"].rank(ascending=False, method="min")
        rows = pd.DataFrame({
            "α": [number_text(a) for a in block["alpha"]],
            "Test (%)": _cell_texts(block),
            "Rank": [MISSING if np.isnan(r) else str(int(r)) for r in rank],
        })
        at_one = block["alpha"] == 1
        ranked = int(rank.notna().sum())
        if not at_one.any():
            verdict = "α = 1 was not run."
        elif rank[at_one].isna().all():
            verdict = "α = 1 diverged."
        else:
            verdict = f"α = 1 ranks {int(rank[at_one].iloc[0])} of {ranked}."
        lines += ["", f"### {label('dataset', dataset)}, {label('model', model)}, {depth} layers",
                  "", *_table(rows), "", verdict]
    return lines


def _transformer_section(folder: Path, runs: pd.DataFrame) -> list[str]:
    return _accuracy_by_depth(runs)


def _lipschitz_section(folder: Path, runs: None) -> list[str]:
    probe = _read_csv(folder / PROBE_FILE, PROBE_COLUMNS)
    lines = ["Empirical Lipschitz constant (Jacobian spectral norm) of one attention layer "
             "at inputs scaled by s; with LipschitzNorm it should not grow with s."]
    for kind in sorted(probe["kind"].unique()):
        here = probe[probe["kind"] == kind]
        models = ordered("model", here["model"])
        grid = here.pivot(index="model", columns="s", values="estimate").reindex(models)
        text = grid.map(lambda v: f"{v:.4g}")
        text.columns = [f"s = {number_text(s)}" for s in grid.columns]
        text.insert(0, "Model", [label("model", m) for m in models])
        lines += ["", f"### {kind} inputs", "", *_table(text)]
    return lines


def _classic_section(folder: Path, runs: pd.DataFrame) -> list[str]:
    text, _ = classic_table(runs)
    text = text.map(lambda cell: MISSING if cell == EMPTY else cell.replace(LATEX_PM, "±"))
    return [
        f"Classic two-layer GAT, test {_metric(runs)} (%). {_counts(runs)} Published: "
        "Veličković et al. (2018), Table 2.",
        "",
        *_table(text.reset_index()),
    ]


# Each section renders from the experiment's folder and its runs (None for lipschitz).
SECTIONS: dict[str, tuple[str, Callable[[Path, pd.DataFrame | None], list[str]]]] = {
    "depth": ("accuracy vs depth", _depth_section),
    "gradients": ("gradient norm ratio across layers", _gradients_section),
    "alpha": ("sensitivity to the LipschitzNorm scale α", _alpha_section),
    "transformer": ("graph transformer with and without LipschitzNorm", _transformer_section),
    "lipschitz": ("empirical Lipschitz constant", _lipschitz_section),
    "classic": ("classic GAT next to the published numbers", _classic_section),
}
