"""Accuracy figures: test accuracy against depth or α, per model (the depth,
transformer and alpha experiments)."""

from __future__ import annotations

from typing import Callable

import pandas as pd
from matplotlib.figure import Figure

from lipnorm.results.aggregate import label, ordered, runs_of_valid_cells
from lipnorm.results.figures.style import (
    DEPTH_LABEL,
    depth_axis,
    metric_name,
    model_legend,
    model_lines,
    ordered_values,
    panel_figure,
    paper_style,
    where,
)


def _accuracy_panels(runs: pd.DataFrame, rows: str, columns: str, x: str,
                     titles: Callable[[object, object], str]) -> Figure:
    """A grid of accuracy-vs-`x` panels, one per value of `rows` × `columns`."""
    kept, diverged = runs_of_valid_cells(runs, [rows, columns, "model", x])
    kept = kept.assign(accuracy=kept["test_metric"] * 100.0)
    models = ordered("model", runs["model"])
    row_values = ordered_values(runs, rows)
    column_values = ordered_values(runs, columns)
    x_label = DEPTH_LABEL if x == "depth" else "$\\alpha$"
    fig, axes = panel_figure(len(row_values), len(column_values))
    for i, row_value in enumerate(row_values):
        for j, column_value in enumerate(column_values):
            ax = axes[i, j]
            if x == "depth":
                depth_axis(ax)
            else:
                ax.set_xscale("log")
            here = {rows: row_value, columns: column_value}
            model_lines(ax, where(kept, here), where(diverged, here), x, "accuracy", models)
            ax.set_title(titles(row_value, column_value))
            ax.set_xlabel(x_label if i == len(row_values) - 1 else "")
            ax.set_ylabel(f"Test {metric_name(runs)} (%)" if j == 0 else "")
    model_legend(fig, models, not diverged.empty)
    return fig


@paper_style
def accuracy_vs_depth(runs: pd.DataFrame) -> Figure:
    """Test accuracy vs depth per model; columns: datasets, rows: missing rates."""
    return _accuracy_panels(
        runs, "missing_rate", "dataset", "depth",
        lambda rate, dataset: f"{label('dataset', dataset)}, {rate:g}% missing",
    )


@paper_style
def accuracy_vs_alpha(runs: pd.DataFrame) -> Figure:
    """Test accuracy vs α (log axis) per model; columns: depths, rows: datasets."""
    if (runs["alpha"] <= 0).any():
        raise ValueError(f"alpha values {sorted(runs['alpha'].unique())} must be > 0 for a log axis")
    return _accuracy_panels(
        runs, "dataset", "depth", "alpha",
        lambda dataset, depth: f"{label('dataset', dataset)}, {depth} layers",
    )
