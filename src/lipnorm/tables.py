"""LaTeX tables (booktabs) of an experiment's aggregate, one `<stem>.tex` per table.

Cells read `mean $\\pm$ std (n=N)`: the test metric ×100 over N seeds, std the sample
std (ddof=1); with one seed the cell is `mean (n=1)` (no spread to report). A cell in
which any seed diverged reads `diverged (k/N)` and takes no part in the averages or
the bold: the mean of the survivors alone would flatter the setting. Bold marks the
best mean of the question the table asks (see each builder).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from lipnorm.aggregate import EXPERIMENTS, label, load_table, ordered, seed_cells
from lipnorm.io import atomic_path

TABLES: dict[str, list[str]] = {
    "depth": ["depth_accuracy_table", "missing_features_table"],
    "gradients": [],
    "alpha": ["alpha_table"],
    "transformer": ["transformer_table"],
    "lipschitz": [],
    "classic": ["classic_table"],
}

# Veličković et al. (2018), Graph Attention Networks, Table 2: mean ± std test
# accuracy (%) of GAT over 100 runs.
PUBLISHED_CLASSIC = {"cora": (83.0, 0.7, 100), "citeseer": (72.5, 0.7, 100), "pubmed": (79.0, 0.3, 100)}

EMPTY = "--"  # a combination without runs (renders as an en dash)
BOLD = "textbf:--rwrap;"
# Printed names of the row and column levels, already LaTeX.
NAMES = {
    "missing_rate": "Missing rate (\\%)",
    "dataset": "Dataset",
    "model": "Model",
    "depth": "Layers",
    "alpha": "$\\alpha$",
}


def format_cell(mean: float, std: float, n: int, n_diverged: int = 0) -> str:
    """The text of one table cell (see the module docstring)."""
    if n_diverged:
        return f"diverged ({n_diverged}/{n})"
    if n == 1:
        return f"{mean:.1f} (n=1)"
    return f"{mean:.1f} $\\pm$ {std:.1f} (n={n})"


def number_text(value: Any) -> Any:
    """Index values as printed: 0.5 stays 0.5, 100.0 becomes 100."""
    return f"{value:g}" if isinstance(value, (int, float, np.number)) else value


def render(text: pd.DataFrame, bold: np.ndarray) -> str:
    """A booktabs tabular of the string frame `text`, bold where `bold` is True.

    Index and column names are written as LaTeX already; index values are escaped.
    """
    styler = text.style.apply(lambda _: np.where(bold, BOLD, ""), axis=None)
    for axis in (0, 1):
        styler = styler.format_index(number_text, escape="latex", axis=axis)
    return styler.to_latex(
        hrules=True,
        column_format="l" * text.index.nlevels + "r" * text.shape[1],
        multirow_align="naive",
        multicol_align="c",
    )


def _with_labels(cells: pd.DataFrame) -> pd.DataFrame:
    """Model and dataset names replaced by their printed labels, in the paper's order."""
    cells = cells.copy()
    for kind in ("model", "dataset"):
        if kind in cells.columns:
            names = ordered(kind, cells[kind])
            cells[kind] = pd.Categorical(
                [label(kind, n) for n in cells[kind]], categories=[label(kind, n) for n in names]
            )
    return cells


def cell_texts(cells: pd.DataFrame) -> list[str]:
    """`format_cell` of each row of seed cells (`mean, std, n, n_diverged`)."""
    return [
        format_cell(m, s, n, d)
        for m, s, n, d in cells[["mean", "std", "n", "n_diverged"]].itertuples(index=False)
    ]


def _grid(cells: pd.DataFrame, rows: list[str], columns: list[str]):
    """Pivot cells into (text, means) frames with the printed level names."""
    cells = _with_labels(cells)
    cells["text"] = cell_texts(cells)
    text = cells.pivot(index=rows, columns=columns, values="text").fillna(EMPTY)
    means = cells.pivot(index=rows, columns=columns, values="mean").astype(float)
    for frame in (text, means):
        frame.index = frame.index.set_names([NAMES[r] for r in rows])
        frame.columns = frame.columns.set_names([NAMES[c] for c in columns])
    return text, means


def _best_per_column(means: pd.DataFrame, within: list[str]) -> np.ndarray:
    """True at the highest mean of each column inside each block of rows `within`."""
    block_max = means.groupby(level=within, dropna=False, observed=True).transform("max")
    return (means.notna() & means.eq(block_max)).to_numpy()


def depth_table(runs: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """Accuracy by missing rate × dataset × model (rows) and depth (columns).

    Bold: the best model at each depth, per dataset and missing rate.
    """
    rows = ["missing_rate", "dataset", "model"]
    text, means = _grid(seed_cells(runs, [*rows, "depth"]), rows, ["depth"])
    return text, _best_per_column(means, [NAMES["missing_rate"], NAMES["dataset"]])


def best_depths(runs: pd.DataFrame) -> pd.DataFrame:
    """Per missing rate × dataset × model, the seed cell of the depth with the best mean
    (the smallest such depth on a tie); depths with a diverged seed are not candidates.

    Columns: `missing_rate, dataset, model, mean, std, n, n_diverged, depth` (`depth` as
    text; EMPTY, with the counts of all depths, when every depth diverged).
    """
    keys = ["missing_rate", "dataset", "model"]
    cells = seed_cells(runs, [*keys, "depth"])
    best_rows = []
    for key, group in cells.groupby(keys, sort=True, dropna=False):
        valid = group[group["valid"]].sort_values(["mean", "depth"], ascending=[False, True])
        if valid.empty:
            best = {"mean": np.nan, "std": np.nan, "n": group["n"].sum(),
                    "n_diverged": group["n_diverged"].sum(), "depth": EMPTY}
        else:
            top = valid.iloc[0]
            best = {"mean": top["mean"], "std": top["std"], "n": top["n"], "n_diverged": 0,
                    "depth": str(int(top["depth"]))}
        best_rows.append({**dict(zip(keys, key)), **best})
    return pd.DataFrame(best_rows)


def missing_features_table(runs: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """The paper's missing-features table: per missing rate (rows, every rate present)
    and model, for each dataset the best accuracy over depths (`Acc`) and the depth
    reaching it (`#L`, see `best_depths`). Bold: the best model per dataset and missing rate.
    """
    best_cells = _with_labels(best_depths(runs))
    best_cells["text"] = cell_texts(best_cells)
    rows = ["missing_rate", "model"]
    acc, depth, means = (
        best_cells.pivot(index=rows, columns="dataset", values=v) for v in ("text", "depth", "mean")
    )
    text = pd.concat(
        {d: pd.concat({"Acc": acc[d], "#L": depth[d]}, axis=1) for d in acc.columns}, axis=1
    ).fillna(EMPTY)
    text.index = text.index.set_names([NAMES[r] for r in rows])
    text.columns = text.columns.set_names([NAMES["dataset"], None])
    bold = np.zeros(text.shape, dtype=bool)
    bold[:, 0::2] = _best_per_column(means.astype(float), [rows[0]])  # columns: Acc, #L per dataset
    return text, bold


def alpha_table(runs: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """Accuracy by dataset × model × depth (rows) and α (columns).

    Bold: the best α in each row.
    """
    rows = ["dataset", "model", "depth"]
    text, means = _grid(seed_cells(runs, [*rows, "alpha"]), rows, ["alpha"])
    row_max = means.max(axis=1)
    return text, (means.notna() & means.eq(row_max, axis=0)).to_numpy()


def classic_table(runs: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """The classic GAT (model `gat-classic`) next to Veličković et al. (2018), per
    dataset. Nothing is bold: the columns are not competitors."""
    classic = runs[runs["model"] == "gat-classic"]
    if classic.empty:
        raise ValueError(
            f"classic table: no runs of model 'gat-classic' (models: {sorted(runs['model'].unique())})"
        )
    cells = seed_cells(classic, ["dataset"])
    cells["published"] = [
        format_cell(*PUBLISHED_CLASSIC[name]) if name in PUBLISHED_CLASSIC else EMPTY
        for name in cells["dataset"]
    ]
    cells = _with_labels(cells).sort_values("dataset")
    text = pd.DataFrame(
        {"This pipeline": cell_texts(cells), "Published": cells["published"].to_list()},
        index=pd.Index(cells["dataset"].astype(str), name=NAMES["dataset"]),
    )
    return text, np.zeros(text.shape, dtype=bool)


BUILDERS: dict[str, Callable[[pd.DataFrame], tuple[pd.DataFrame, np.ndarray]]] = {
    "depth_accuracy_table": depth_table,
    "missing_features_table": missing_features_table,
    "alpha_table": alpha_table,
    "transformer_table": depth_table,
    "classic_table": classic_table,
}


def write_tables(
    experiment: str, aggregate_dir: str | os.PathLike, out_dir: str | os.PathLike
) -> list[Path]:
    """Write `<out_dir>/<stem>.tex` for each stem in TABLES[experiment]."""
    if experiment not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {experiment!r}; known: {', '.join(EXPERIMENTS)}")
    written = []
    if TABLES[experiment]:
        runs = load_table(aggregate_dir, "runs")
        for stem in TABLES[experiment]:
            text, bold = BUILDERS[stem](runs)
            path = Path(out_dir) / f"{stem}.tex"
            with atomic_path(path) as tmp:
                tmp.write_text(render(text, bold))
            written.append(path)
    return written
