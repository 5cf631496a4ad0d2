"""The LaTeX renderer: a (text, bold) frame as a booktabs tabular (`render`), and the
plain-text cells and heads of the remedies tables as LaTeX (`latex_texts`, `latex_head`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from lipnorm.results.tables.cells import EMPTY, number_text
from lipnorm.results.tables.markdown import MARKDOWN_EMPTY


BOLD = "textbf:--rwrap;"


def render(text: pd.DataFrame, bold: np.ndarray) -> str:
    """A booktabs tabular of the string frame `text`, bold where `bold` is True.

    Index and column names are written as LaTeX already; index values are escaped,
    except the row labels of a frame whose `attrs["latex_rows"]` is true (a builder
    whose row labels are LaTeX already, e.g. `$\\alpha$`) and the column labels of a
    frame whose `attrs["latex_columns"]` is true (e.g. `latex_head`'s).
    """
    styler = text.style.apply(lambda _: np.where(bold, BOLD, ""), axis=None)
    for axis in (0, 1):
        escape = None if text.attrs.get(("latex_rows", "latex_columns")[axis]) else "latex"
        styler = styler.format_index(number_text, escape=escape, axis=axis)
    return styler.to_latex(
        hrules=True,
        column_format="l" * text.index.nlevels + "r" * text.shape[1],
        multirow_align="naive",
        multicol_align="c",
    )


# Plain text of the remedies' heads -> LaTeX: specials escaped first, then the symbols.
LATEX_HEAD_SPECIALS = {"\\": "\\textbackslash{}", "#": "\\#", "%": "\\%", "&": "\\&", "_": "\\_"}
LATEX_HEAD_SYMBOLS = {"±": "$\\pm$", "Δ": "$\\Delta$", "−": "$-$"}


def latex_head(head: Any) -> Any:
    """A plain-text column head as LaTeX (`#` as `\\#`, `±` as `$\\pm$`, `Δ` as
    `$\\Delta$`, `−` as `$-$`, ...); a tuple head part by part; anything else as it is."""
    if isinstance(head, tuple):
        return tuple(latex_head(part) for part in head)
    if not isinstance(head, str):
        return head
    text = "".join(LATEX_HEAD_SPECIALS.get(char, char) for char in head)
    for symbol, latex in LATEX_HEAD_SYMBOLS.items():
        text = text.replace(symbol, latex)
    return text


def latex_texts(text: pd.DataFrame) -> pd.DataFrame:
    """Plain cells and heads as LaTeX (`markdown_cell` the other way): `±` as `$\\pm$`,
    MARKDOWN_EMPTY (no result) as EMPTY; heads through `latex_head`, which `render` then
    leaves unescaped (`attrs["latex_columns"]`)."""
    latex = text.map(lambda cell: EMPTY if cell == MARKDOWN_EMPTY else cell.replace(" ± ", " $\\pm$ "))
    latex.columns = latex.columns.map(latex_head)
    latex.attrs["latex_columns"] = True
    return latex
