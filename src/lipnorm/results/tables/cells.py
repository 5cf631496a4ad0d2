"""The cells of every table: `mean $\\pm$ std (n=N)`, the test metric ×100 over N seeds,
std the sample std (ddof=1); with one seed `mean (n=1)` (no spread to report). A cell in
which any seed diverged reads `diverged (k/N)` and takes no part in the averages or the
bold: the mean of the survivors alone would flatter the setting. The diagnose table's
per-layer statistics read as `number_cell` (plain, or scientific when tiny or huge).
Cells and level names are LaTeX; `markdown.markdown_cell` prints them as plain text.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from lipnorm.results.aggregate import label, ordered


EMPTY = "--"  # a combination without runs (renders as an en dash)


# Printed names of the row and column levels, already LaTeX.
NAMES = {
    "missing_rate": "Missing rate (\\%)",
    "dataset": "Dataset",
    "model": "Model",
    "architecture": "Architecture",
    "attention_norm": "Attention norm",
    "norm": "Normalisation",
    "depth": "Layers",
    "alpha": "$\\alpha$",
    "feat_drop": "Feature dropout",
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


def with_labels(cells: pd.DataFrame) -> pd.DataFrame:
    """Model, dataset and model-axis names replaced by their printed labels, in the
    registry's order."""
    cells = cells.copy()
    for kind in ("model", "dataset", "architecture", "attention_norm", "norm"):
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


def grid(cells: pd.DataFrame, rows: list[str], columns: list[str]):
    """Pivot cells into (text, means) frames with the printed level names."""
    cells = with_labels(cells)
    cells["text"] = cell_texts(cells)
    text = cells.pivot(index=rows, columns=columns, values="text").fillna(EMPTY)
    means = cells.pivot(index=rows, columns=columns, values="mean").astype(float)
    for frame in (text, means):
        frame.index = frame.index.set_names([NAMES[r] for r in rows])
        frame.columns = frame.columns.set_names([NAMES[c] for c in columns])
    return text, means


def best_per_column(means: pd.DataFrame, within: list[str]) -> np.ndarray:
    """True at the highest mean of each column inside each block of rows `within`."""
    block_max = means.groupby(level=within, dropna=False, observed=True).transform("max")
    return (means.notna() & means.eq(block_max)).to_numpy()


def number_cell(value: float) -> str:
    """A diagnostic as printed: 3 significant digits from 0.01 to 1000, else LaTeX
    scientific notation with 2 (`$1.2 \\times 10^{-7}$`); `0` for 0, EMPTY for NaN."""
    if not np.isfinite(value):
        return EMPTY
    if value == 0:
        return "0"
    if 0.01 <= abs(value) < 1000:
        return f"{value:.3g}"
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"${mantissa} \\times 10^{{{int(exponent)}}}$"
