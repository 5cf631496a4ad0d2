"""Training figures of the gradients experiment: per-layer gradient norms, their
max/min ratio, and the training curves."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.cm import ScalarMappable
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure

from lipnorm import registry
from lipnorm.results.aggregate import label, ordered, runs_of_valid_cells, seed_cells
from lipnorm.results.analysis import gradient_ratios, layer_gradient_norms
from lipnorm.results.figures.style import (
    CMAP,
    COLUMN_WIDTH,
    DEPTH_LABEL,
    PANEL_HEIGHT,
    TEXT_WIDTH,
    depth_axis,
    metric_name,
    model_legend,
    model_lines,
    panel_figure,
    paper_style,
    where,
)


def _spaced_ticks(values: pd.Index, most: int = 5) -> tuple[np.ndarray, list[str]]:
    """Heatmap tick positions (cell centres) and labels for at most `most` evenly spaced values."""
    picked = np.unique(np.linspace(0, len(values) - 1, min(most, len(values))).round().astype(int))
    return picked + 0.5, [str(values[i]) for i in picked]


@paper_style
def gradient_heatmaps(runs: pd.DataFrame, gradnorms: pd.DataFrame) -> Figure:
    """Per-layer gradient norm (layer × epoch; log colours shared by all panels), the
    median over the seeds that did not diverge. Rows: depths; columns: dataset × model."""
    cells = seed_cells(runs, ["dataset", "depth", "model"])
    ok = runs.loc[runs["status"] == "ok"]
    norms = layer_gradient_norms(gradnorms[gradnorms["run_dir"].isin(ok["run_dir"])],
                         ("input", "attention", "output"))
    norms = norms.merge(ok[["run_dir", "dataset", "depth", "model"]], on="run_dir")
    positive = norms["grad_norm"][np.isfinite(norms["grad_norm"]) & (norms["grad_norm"] > 0)]
    if positive.empty:
        raise ValueError("no positive finite gradient norms of group 'all' to draw")
    colour = LogNorm(vmin=positive.min(), vmax=positive.max())
    columns = [(d, m) for d in ordered("dataset", runs["dataset"])
               for m in ordered("model", runs["model"])]
    depths = sorted(runs["depth"].unique())

    fig = plt.figure(figsize=(COLUMN_WIDTH if len(columns) <= 2 else TEXT_WIDTH,
                              PANEL_HEIGHT * len(depths) + 0.3), layout="constrained")
    grid = fig.add_gridspec(len(depths), len(columns) + 1,
                            width_ratios=[1] * len(columns) + [0.06])
    for i, depth in enumerate(depths):
        for j, (dataset, model) in enumerate(columns):
            ax = fig.add_subplot(grid[i, j])
            here = {"dataset": dataset, "depth": depth, "model": model}
            matrix = (where(norms, here).groupby(["layer", "epoch"])["grad_norm"].median()
                      .unstack("epoch"))
            if not matrix.empty:
                sns.heatmap(matrix.where(matrix > 0), ax=ax, norm=colour, cmap=CMAP, cbar=False,
                            xticklabels=False, yticklabels=False)
                # A few evenly spaced labels: one per epoch or layer overlaps in a small panel.
                ax.set_xticks(*_spaced_ticks(matrix.columns), rotation=0)
                if j == 0:
                    ax.set_yticks(*_spaced_ticks(matrix.index), rotation=0)
            cell = where(cells, here)
            if cell["n_diverged"].sum():
                ax.text(0.98, 0.02, f"{cell['n_diverged'].sum()}/{cell['n'].sum()} diverged",
                        transform=ax.transAxes, ha="right", va="bottom", color="white")
            ax.set_title(f"{label('model', model)}, {label('dataset', dataset)}" if i == 0 else "")
            ax.set_xlabel("Epoch" if i == len(depths) - 1 else "")
            ax.set_ylabel(f"Layer (L={depth})" if j == 0 else "")
    fig.colorbar(ScalarMappable(norm=colour, cmap=CMAP), cax=fig.add_subplot(grid[:, -1]),
                 label="Gradient norm")
    return fig


@paper_style
def gradient_ratio(runs: pd.DataFrame, gradnorms: pd.DataFrame) -> Figure:
    """Max/min layer gradient-norm ratio vs depth per model (log y), one panel per dataset."""
    ratios = gradient_ratios(gradnorms)
    without = sorted(set(runs["run_dir"]) - set(ratios.index))
    if without:
        raise ValueError(f"no attention-layer gradient norms (group 'all') for runs {without}")
    runs = runs.assign(grad_ratio=runs["run_dir"].map(ratios))
    kept, diverged = runs_of_valid_cells(runs, ["dataset", "model", "depth"])
    models = ordered("model", runs["model"])
    datasets = ordered("dataset", runs["dataset"])
    fig, axes = panel_figure(1, len(datasets))
    for ax, dataset in zip(axes[0], datasets):
        depth_axis(ax)
        ax.set_yscale("log")  # before plotting: seaborn then averages in log space
        here = {"dataset": dataset}
        model_lines(ax, where(kept, here), where(diverged, here), "depth", "grad_ratio", models)
        ax.set_title(label("dataset", dataset))
        ax.set_xlabel(DEPTH_LABEL)
        ax.set_ylabel("Max/min layer gradient norm" if ax is axes[0, 0] else "")
    model_legend(fig, models, not diverged.empty)
    return fig


@paper_style
def training_curves(runs: pd.DataFrame, epochs: pd.DataFrame) -> Figure:
    """Training loss (top) and validation metric (bottom) per epoch at each dataset's
    largest depth, mean ± std over the seeds that did not diverge; one column per dataset."""
    seed_cells(runs, ["dataset", "depth", "model"])  # each model: seeds of one setting
    datasets = ordered("dataset", runs["dataset"])
    models = ordered("model", runs["model"])
    names = ("Training loss", f"Validation {metric_name(runs)} (%)")
    fig, axes = panel_figure(2, len(datasets))
    for j, dataset in enumerate(datasets):
        depth = runs.loc[runs["dataset"] == dataset, "depth"].max()
        chosen = where(runs, {"dataset": dataset, "depth": depth})
        ok = chosen.loc[chosen["status"] == "ok", "run_dir"]
        curves = epochs[epochs["run_dir"].isin(ok)]
        curves = curves.assign(val_percent=curves["val_metric"] * 100.0)
        diverged = len(chosen) - len(ok)
        note = f" ({diverged}/{len(chosen)} diverged)" if diverged else ""
        for i, column in enumerate(("train_loss", "val_percent")):
            ax = axes[i, j]
            sns.lineplot(data=curves, x="epoch", y=column, hue="model", hue_order=models,
                         palette=registry.figure_palette(models), errorbar="sd", ax=ax, legend=False)
            ax.set_title(f"{label('dataset', dataset)}, L={depth}{note}" if i == 0 else "")
            ax.set_ylabel(names[i] if j == 0 else "")
            ax.set_xlabel("Epoch" if i == 1 else "")
    model_legend(fig, models, diverged=False)
    return fig
