"""The paper style of every figure (sizes, fonts, `paper_style`), the helpers the
figures share (panels, model lines and legend, depth axis) and `save_figure`. The only
place that selects matplotlib's backend (Agg: files only)."""

from __future__ import annotations

import functools
import os
import textwrap
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


LEGEND_MARGIN = 0.05  # inches a figure legend keeps free at each side of the figure


def paper_style(plot: Callable[..., Figure]) -> Callable[..., Figure]:
    """Run a plotting function inside the paper style (fonts are fixed at creation), then
    wrap the panels' titles and axis labels that are longer than their panel
    (`fit_panel_texts`): with the legends of `figure_legend`, no text leaves the canvas."""

    @functools.wraps(plot)
    def wrapper(*args, **kwargs) -> Figure:
        with sns.axes_style("whitegrid"), plt.rc_context(STYLE):
            fig = plot(*args, **kwargs)
            fit_panel_texts(fig)
            return fig

    return wrapper


def figure_legend(fig: Figure, handles: list, labels: list[str], most_columns: int = 4) -> None:
    """The figure's legend above its panels (in space the constrained layout reserves),
    in as many columns (at most `most_columns`) as fit the figure's width, its labels
    wrapped where even one column does not fit; the figure grows by the legend's height
    beyond one row, so the panels keep theirs whatever the number of entries."""
    renderer = fig.canvas.get_renderer()
    room = fig.bbox.width - 2 * LEGEND_MARGIN * fig.dpi

    def place(texts: list[str], ncols: int, shown: list = handles):
        return fig.legend(shown, texts, loc="outside upper center", ncols=ncols, frameon=False)

    one_row = place(labels[:1], 1, handles[:1])
    row_height = one_row.get_window_extent(renderer).height
    one_row.remove()
    longest = max(len(text) for text in labels)
    # Fewer columns first, then narrower labels: the first layout that fits the width.
    layouts = [(labels, ncols) for ncols in range(min(len(labels), most_columns), 0, -1)]
    layouts += [([textwrap.fill(text, width) for text in labels], 1) for width in range(longest - 1, 3, -1)]
    for texts, ncols in layouts:
        legend = place(texts, ncols)
        box = legend.get_window_extent(renderer)
        if box.width <= room:
            break
        legend.remove()
    else:
        legend = place(*layouts[-1])
        box = legend.get_window_extent(renderer)
    fig.set_figheight(fig.get_figheight() + max(0.0, box.height - row_height) / fig.dpi)


def fit_panel_texts(fig: Figure) -> None:
    """Wrap each panel's title and x label to the width of its cell of the grid, and its
    y label to the cell's height, where they are longer (such a text would cross its
    neighbour's, or the canvas's edge)."""
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        spec = ax.get_subplotspec()
        if spec is None:
            continue
        grid = spec.get_gridspec()
        nrows, ncols = grid.get_geometry()
        widths = np.asarray(grid.get_width_ratios() or [1] * ncols, dtype=float)
        heights = np.asarray(grid.get_height_ratios() or [1] * nrows, dtype=float)
        box = ax.figure.bbox  # the (sub)figure holding the grid, in pixels
        width = box.width * widths[spec.colspan.start:spec.colspan.stop].sum() / widths.sum()
        height = box.height * heights[spec.rowspan.start:spec.rowspan.stop].sum() / heights.sum()
        for text, room in ((ax.title, width), (ax.xaxis.label, width), (ax.yaxis.label, height)):
            _wrap_to(text, room, renderer)


def _wrap_to(text, room: float, renderer) -> None:
    """Wrap `text` (a matplotlib Text) at spaces, then anywhere, until it is at most
    `room` pixels long (its extent along its own direction)."""
    content = text.get_text()
    vertical = text.get_rotation() % 180 == 90

    def length() -> float:
        box = text.get_window_extent(renderer)
        return box.height if vertical else box.width

    if not content or length() <= room:
        return
    for width in range(max(len(line) for line in content.split("\n")) - 1, 3, -1):
        text.set_text("\n".join(textwrap.fill(line, width) for line in content.split("\n")))
        if length() <= room:
            return


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
    figure_legend(fig, handles, labels, ncols)


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
    """Write `<stem>.pdf` and `<stem>.png` atomically, then close the figure. The PDF has
    no creation date, so the same figure drawn again gives the same bytes (a published
    folder redrawn in place, `lipnorm publish --merge X --out X`, changes only what moved)."""
    written = []
    try:
        for fmt in ("pdf", "png"):
            path = Path(f"{stem}.{fmt}")
            with atomic_path(path) as tmp:
                fig.savefig(tmp, format=fmt, dpi=PNG_DPI,
                            metadata={"CreationDate": None} if fmt == "pdf" else None)
            written.append(path)
    finally:
        plt.close(fig)
    return written
