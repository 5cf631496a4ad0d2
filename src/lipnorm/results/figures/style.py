"""The paper style of every figure (sizes, fonts, `paper_style`), the helpers the
figures share (panels, model lines and legend, depth axis) and `save_figure`. The only
place that selects matplotlib's backend (Agg: files only)."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Callable

import matplotlib

matplotlib.use("Agg")  # files only; no display needed

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from lipnorm import registry
from lipnorm.io import atomic_path
from lipnorm.results.aggregate import label, ordered


COLUMN_WIDTH = 3.3  # inches, one column of a two-column paper
TEXT_WIDTH = 6.9  # inches, both columns
PANEL_HEIGHT = 1.5  # inches
STYLE = {
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "lines.linewidth": 1.0,
    "lines.markersize": 3,
    "pdf.fonttype": 42,  # embed TrueType so the PDF text stays editable
}
DEPTH_LABEL = "Depth (layers)"
CMAP = "viridis"
PNG_DPI = 200  # the PDF is the vector original; the PNG serves the HTML report


def paper_style(plot: Callable[..., Figure]) -> Callable[..., Figure]:
    """Run a plotting function inside the paper style (fonts are fixed at creation)."""

    @functools.wraps(plot)
    def wrapper(*args, **kwargs) -> Figure:
        with sns.axes_style("whitegrid"), plt.rc_context(STYLE):
            return plot(*args, **kwargs)

    return wrapper


def panel_figure(nrows: int, ncols: int, **subplots) -> tuple[Figure, np.ndarray]:
    width = COLUMN_WIDTH if ncols <= 2 else TEXT_WIDTH
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(width, PANEL_HEIGHT * nrows + 0.4), squeeze=False,
        layout="constrained", **subplots,
    )
    return fig, axes


def model_legend(fig: Figure, models: list[str], diverged: bool, marker: str | None = "o",
            extra: tuple[tuple[Line2D, str], ...] = (), ncols: int = 4) -> None:
    """One legend for the figure, naming the models as the paper does (then the
    `extra` handles, e.g. line styles)."""
    colours = registry.figure_palette(models)
    handles = [Line2D([], [], color=colours[m], marker=marker) for m in models]
    labels = [label("model", m) for m in models]
    if diverged:
        handles.append(Line2D([], [], color="black", marker="x", linestyle="none"))
        labels.append("diverged")
    handles += [handle for handle, _ in extra]
    labels += [text for _, text in extra]
    fig.legend(handles, labels, loc="outside upper center", ncols=min(len(labels), ncols),
               frameon=False)


def metric_name(runs: pd.DataFrame) -> str:
    names = {"accuracy": "accuracy", "ogb-accuracy": "accuracy", "micro-f1": "micro-F1"}
    return " / ".join(sorted({names[m] for m in runs["metric"]}))


def depth_axis(ax) -> None:
    """Depth grids are roughly even (1, 2, 5, 10, ..., 30): linear, integer ticks."""
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def hue_lines(ax, kept: pd.DataFrame, diverged: pd.DataFrame, x: str, y: str, hue: str,
               colours: dict, dashes: dict | None = None) -> None:
    """Mean ± std over seeds per value of `hue` (in the order of `colours`; line styles
    `dashes` if given); diverged settings as × on the lower edge."""
    order = list(colours)
    if not kept.empty:
        styles = {} if dashes is None else {"style": hue, "style_order": order, "dashes": dashes}
        sns.lineplot(data=kept, x=x, y=y, hue=hue, hue_order=order, palette=colours,
                     errorbar="sd", marker="o", ax=ax, legend=False, **styles)
    for value, cells in diverged.groupby(hue):
        ax.scatter(cells[x], np.full(len(cells), 0.03), marker="x", color=colours[value],
                   transform=ax.get_xaxis_transform(), clip_on=False, zorder=3)


def model_lines(ax, kept: pd.DataFrame, diverged: pd.DataFrame, x: str, y: str,
                 models: list[str]) -> None:
    """Mean ± std over seeds per model; diverged settings as × on the lower edge."""
    hue_lines(ax, kept, diverged, x, y, "model", registry.figure_palette(models))


def ordered_values(frame: pd.DataFrame, column: str) -> list:
    if column in ("model", "dataset"):
        return ordered(column, frame[column])
    return sorted(frame[column].unique())


def where(frame: pd.DataFrame, equal: dict) -> pd.DataFrame:
    mask = np.ones(len(frame), dtype=bool)
    for column, value in equal.items():
        mask &= (frame[column] == value).to_numpy()
    return frame.loc[mask]


def save_figure(fig: Figure, stem: str | os.PathLike) -> list[Path]:
    """Write `<stem>.pdf` and `<stem>.png` atomically, then close the figure."""
    written = []
    try:
        for fmt in ("pdf", "png"):
            path = Path(f"{stem}.{fmt}")
            with atomic_path(path) as tmp:
                fig.savefig(tmp, format=fmt, dpi=PNG_DPI)
            written.append(path)
    finally:
        plt.close(fig)
    return written
