"""The one Markdown table renderer: GitHub pipe tables (`markdown`) of the same cells as
the LaTeX tables, as plain text (`markdown_cell`); `lipnorm publish` writes them into
its `summary.md`, `lipnorm bench` into its own.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from lipnorm.results.tables.cells import EMPTY


MARKDOWN_EMPTY = "–"  # EMPTY as plain text; the remedies tables' texts use it too
# Superscripts of a power of ten, as the README prints them (10⁻⁷).
SUPERSCRIPTS = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def markdown_cell(text: str) -> str:
    """A cell as Markdown: the LaTeX of this module's cells as plain text (`$\\pm$` as
    `±`, EMPTY as MARKDOWN_EMPTY, `number_cell`'s `$1.2 \\times 10^{-7}$` as
    `1.2 × 10⁻⁷`); any other text as it is."""
    if text == EMPTY:
        return MARKDOWN_EMPTY
    power = re.fullmatch(r"\$(\S+) \\times 10\^\{(-?\d+)\}\$", text)
    if power:
        return f"{power[1]} × 10{power[2].translate(SUPERSCRIPTS)}"
    return text.replace("$\\pm$", "±")


def markdown(text: pd.DataFrame, bold: np.ndarray | None = None, index: bool = False) -> list[str]:
    """The lines of a GitHub pipe table of the string frame `text`: its column names as
    the header, each cell through `markdown_cell`, `**bold**` where `bold` is True;
    with `index`, the index levels first (headed by their names), never bold."""
    cells = text.map(lambda cell: markdown_cell(str(cell)))
    if bold is not None:
        cells = cells.where(~np.asarray(bold, dtype=bool), "**" + cells + "**")
    if index:
        cells = cells.reset_index()
    lines = ["| " + " | ".join(map(str, cells.columns)) + " |",
             "|" + "|".join("---" for _ in cells.columns) + "|"]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in cells.itertuples(index=False)]
    return lines
