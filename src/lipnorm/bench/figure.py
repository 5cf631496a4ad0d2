"""`lipnorm bench`'s figure: median training-step time against edges, one line per
implementation, in the benchmark's own palette."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from lipnorm import registry
from lipnorm.results.figures.style import (
    PANEL_HEIGHT,
    TEXT_WIDTH,
    figure_legend,
    paper_style,
    save_figure,
    where,
)


# `lipnorm bench` implementations: ours in the model palette, the references in grey tones.
BENCH_PALETTE = {
    "gat": registry.model_colour("gat"),
    "gat-lip": registry.model_colour("gat-lip"),
    "gat-lip-official": "#fbafe4",
    "dgl-gat": "#029e73",
    "pyg-gat": "#949494",
    "gt": registry.model_colour("gt"),
    "gt-lip": registry.model_colour("gt-lip"),
    "gt-lip-official": "#56b4e9",
    "pyg-transformer": "#000000",
}


def _plain_log_axis(axis) -> None:
    """Log ticks at 1, 2, 5 x 10^k, written as plain numbers; no minor labels (a panel
    spanning under a decade would otherwise label every minor tick)."""
    axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_formatter(NullFormatter())


@paper_style
def epoch_time_vs_edges(times: pd.DataFrame) -> Figure:
    """`lipnorm bench`: median training-step time vs edges (csbm graphs), one line per
    implementation; a row per (family, width), a column per depth. `times` has the
    bench's step_seconds rows (family, heads, hidden, depth, implementation, edges, value)."""
    medians = (
        times[times["dataset"] == "csbm"]
        .groupby(["family", "heads", "hidden", "depth", "implementation", "edges"])["value"].median()
        .reset_index()
    )
    rows = sorted(medians.groupby(["family", "heads", "hidden"]).groups)
    depths = sorted(medians["depth"].unique())
    fig, axes = plt.subplots(
        len(rows), len(depths), figsize=(TEXT_WIDTH, PANEL_HEIGHT * len(rows) + 0.6),
        squeeze=False, sharex=True, layout="constrained",
    )
    for i, (family, heads, hidden) in enumerate(rows):
        for j, depth in enumerate(depths):
            ax = axes[i][j]
            ax.set_title(f"{family.upper()}, depth {depth}, {heads} × {hidden}")
            panel = where(medians, {"family": family, "heads": heads, "hidden": hidden, "depth": depth})
            ax.set_xscale("log")
            if panel.empty:
                ax.text(0.5, 0.5, "over the work budget", ha="center", va="center",
                        transform=ax.transAxes, color="0.4")
                ax.set_yticks([])
                ax.grid(False)
            else:
                for impl, line in panel.groupby("implementation"):
                    ax.plot(line["edges"], line["value"], marker="o", color=BENCH_PALETTE[impl])
                ax.set_yscale("log")
                _plain_log_axis(ax.yaxis)
            ax.set_ylabel("Seconds per epoch" if j == 0 else "")
            ax.set_xlabel("Edges" if i == len(rows) - 1 else "")
    implementations = [name for name in BENCH_PALETTE if name in set(medians["implementation"])]
    handles = [Line2D([], [], color=BENCH_PALETTE[name], marker="o") for name in implementations]
    figure_legend(fig, handles, implementations, most_columns=5)
    return fig


def write_figure(times: pd.DataFrame, folder: Path) -> list[Path]:
    """`epoch_time_vs_edges.{pdf,png}` in `folder`."""
    return save_figure(epoch_time_vs_edges(times), folder / "epoch_time_vs_edges")
