"""The diagnose experiment's figures: per-layer representation statistics (Dirichlet
energy, MAD, attention entropy, ...) by layer, by epoch, and against α."""

from __future__ import annotations

import textwrap
from typing import Callable

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from lipnorm import registry
from lipnorm.results.aggregate import label, ordered, runs_of_valid_cells
from lipnorm.results.analysis import (
    DEFAULT_RECIPE,
    DRAWN_AS_COMPLEMENT,
    LAYER_METRICS,
    NORM_FLOOR,
    diagnose_grid,
    last_epoch_stats,
    recipe_label,
    recipes,
)
from lipnorm.results.figures.style import (
    CMAP,
    depth_axis,
    figure_legend,
    model_legend,
    panel_figure,
    paper_style,
    where,
)


# Floor of 1 - entropy: entropies are computed from float32 attention, so 1 - entropy
# below ~1e-7 is rounding (an exact 0 is common), not a measured distance.
COMPLEMENT_FLOOR = 1e-7
# Line style per feature-dropout rate, largest rate first (solid, dashed, ...).
DROPOUT_DASHES = ("", (4, 1.5), (1, 1.5), (4, 1.5, 1, 1.5))
DROPOUT_STYLES = ("-", "--", ":", "-.")


def stats_of(runs: pd.DataFrame, layerstats: pd.DataFrame, settings: list[str]) -> pd.DataFrame:
    """`layerstats` rows (run_dir, epoch, layer, metric, value) of `runs`, with the
    `settings` columns taken from `runs`; a finished run without statistics is an error."""
    stats = layerstats.loc[layerstats["run_dir"].isin(runs["run_dir"]),
                           ["run_dir", "epoch", "layer", "metric", "value"]]
    without = sorted(set(runs.loc[runs["status"] == "ok", "run_dir"]) - set(stats["run_dir"]))
    if without:
        raise ValueError(f"no layer statistics (layerstats) for runs {without}; were they "
                         "trained with layer_stats off?")
    return stats.merge(runs[["run_dir", *settings]], on="run_dir", how="inner")


def _metrics_present(stats: pd.DataFrame) -> list[str]:
    metrics = [m for m in LAYER_METRICS if m in set(stats["metric"])]
    if not metrics:
        raise ValueError(f"no known layer statistics to draw (metrics "
                         f"{sorted(stats['metric'].unique())}; known: {', '.join(LAYER_METRICS)})")
    return metrics


def floored_stats(stats: pd.DataFrame) -> pd.DataFrame:
    """Values as drawn: the entropy as 1 - entropy (at least COMPLEMENT_FLOOR), then
    every value floored at NORM_FLOOR: an exact 0 (e.g. the energy of identical representations, or uniform
    attention) would otherwise vanish from a log axis."""
    complement = stats["metric"].isin(DRAWN_AS_COMPLEMENT)
    values = stats["value"].where(~complement, (1.0 - stats["value"]).clip(lower=COMPLEMENT_FLOOR))
    return stats.assign(value=values.clip(lower=NORM_FLOOR))


def _metric_axis(ax, metric: str) -> None:
    """Log y (set before plotting, so that seaborn averages in log space)."""
    ax.set_yscale("log")


def diverged_footnote(fig: Figure, diverged: pd.DataFrame,
                       name: Callable[[pd.Series], str]) -> None:
    """Name, under the panels, the seed cells left out because a seed diverged."""
    if diverged.empty:
        return
    cells = "; ".join(f"{name(row)} ({row['n_diverged']}/{row['n']})"
                      for _, row in diverged.iterrows())
    text = textwrap.fill(f"Not drawn, a seed diverged: {cells}",
                         width=int(fig.get_figwidth() * 20))  # ~20 characters per inch at 6 pt
    fig.supxlabel(text, fontsize=6, color="0.3")


def _dropout_styles(dropouts: list) -> dict:
    if len(dropouts) > len(DROPOUT_DASHES):
        raise ValueError(f"{len(dropouts)} feature-dropout rates {dropouts}; at most "
                         f"{len(DROPOUT_DASHES)} line styles")
    return dict(zip(dropouts, DROPOUT_DASHES))


def _dropout_legend(dropouts: list) -> tuple[tuple[Line2D, str], ...]:
    return tuple(
        (Line2D([], [], color="black", linestyle=style), f"dropout {rate:g}")
        for rate, style in zip(dropouts, DROPOUT_STYLES)
    )


def _model_dropout_panels(runs: pd.DataFrame, layerstats: pd.DataFrame, x: str,
                          select: Callable[[pd.DataFrame], pd.DataFrame],
                          title: Callable[[int], str]) -> Figure:
    """Layer statistics vs `x` of the diagnose grid: rows of panels per metric, columns
    per depth; colour: model, line style: feature dropout; `select` picks the rows of
    the statistics to draw. Mean ± std over the seeds of settings in which no seed
    diverged (the others are named in a footnote)."""
    grid = diagnose_grid(runs)
    if grid.empty:
        raise ValueError("no runs of this pipeline's recipe at alpha 1 (the diagnose grid)")
    by = ["depth", "model", "feat_drop"]
    kept, diverged = runs_of_valid_cells(grid, by)
    stats = stats_of(kept, layerstats, by)
    stats = floored_stats(select(stats))
    metrics = _metrics_present(stats)
    models = ordered("model", grid["model"])
    dropouts = sorted(grid["feat_drop"].unique(), reverse=True)
    dashes = _dropout_styles(dropouts)
    depths = sorted(grid["depth"].unique())
    fig, axes = panel_figure(len(metrics), len(depths), sharey="row")
    for i, metric in enumerate(metrics):
        for j, depth in enumerate(depths):
            ax = axes[i, j]
            _metric_axis(ax, metric)
            depth_axis(ax)
            ax.xaxis.set_major_locator(MaxNLocator(nbins=5, integer=True))  # narrow panels
            panel = where(stats, {"metric": metric, "depth": depth})
            if not panel.empty:
                sns.lineplot(data=panel, x=x, y="value", hue="model", hue_order=models,
                             palette=registry.figure_palette(models), style="feat_drop", style_order=dropouts,
                             dashes=dashes, errorbar="sd", ax=ax, legend=False)
            ax.set_title(title(depth) if i == 0 else "")
            ax.set_xlabel(("Layer" if x == "layer" else "Epoch") if i == len(metrics) - 1 else "")
            ax.set_ylabel(LAYER_METRICS[metric] if j == 0 else "")
    model_legend(fig, models, diverged=False, marker=None, extra=_dropout_legend(dropouts),
            ncols=4 if len(depths) > 2 else 3)
    diverged_footnote(fig, diverged, lambda row: (
        f"L={row['depth']} {label('model', row['model'])}, dropout {row['feat_drop']:g}"))
    return fig


@paper_style
def layerstats_by_layer(runs: pd.DataFrame, layerstats: pd.DataFrame) -> Figure:
    """Each layer statistic against the layer (1 = first attention layer) at each run's
    last logged epoch: rows of panels per metric (energy, MAD, Rayleigh quotient,
    1 − attention entropy and output norm, on log axes), columns per depth, colour per model,
    line style per feature-dropout rate. Only the diagnose grid (this pipeline's recipe,
    α = 1). Bands: mean ± std over seeds, in log space on log axes (geometric); a value
    below NORM_FLOOR (an energy of exactly 0) is drawn at NORM_FLOOR."""
    return _model_dropout_panels(runs, layerstats, "layer", last_epoch_stats,
                                 lambda depth: f"{depth} layers")


@paper_style
def layerstats_by_epoch(runs: pd.DataFrame, layerstats: pd.DataFrame) -> Figure:
    """The layer statistics of each run's deepest attention layer (layer = depth)
    against the epoch: panels, colours, line styles, bands and floor as in
    `layerstats_by_layer`."""
    return _model_dropout_panels(runs, layerstats, "epoch",
                                 lambda stats: stats.loc[stats["layer"] == stats["depth"]],
                                 lambda depth: f"Layer {depth} of {depth}")


def alpha_colours(alphas: list) -> dict:
    """One colour per α, light to dark in the order of α (viridis without its yellow)."""
    cmap = plt.get_cmap(CMAP)
    return {a: to_hex(cmap(x)) for a, x in zip(alphas, np.linspace(0.0, 0.8, len(alphas)))}


RECIPE_COLOUR = "#000000"  # the authors' recipe in the α figure


@paper_style
def alpha_layerstats(runs: pd.DataFrame, layerstats: pd.DataFrame) -> Figure:
    """The α study: GAT-Lip's layer statistics against the layer at the last logged
    epoch, one colour per α (the α = 1 runs of the grid at the same depth and feature
    dropout included); one column per metric, one row per depth of the study. The
    runs of another recipe (the authors') at a depth of the study are drawn in black
    over them. Bands, log axes and floor as in `layerstats_by_layer`."""
    lipnorm = runs.loc[recipes(runs) == DEFAULT_RECIPE]
    varied = lipnorm.loc[lipnorm["alpha"] != 1]
    if varied.empty:
        raise ValueError("no runs of this pipeline's recipe with alpha != 1 (the alpha study)")
    study = lipnorm.merge(varied[["model", "depth", "feat_drop"]].drop_duplicates(),
                          on=["model", "depth", "feat_drop"])
    study.attrs = runs.attrs
    by = ["model", "depth", "feat_drop", "alpha"]
    kept, diverged = runs_of_valid_cells(study, by)
    stats = floored_stats(last_epoch_stats(stats_of(kept, layerstats, by)))
    other = runs.loc[(recipes(runs) != DEFAULT_RECIPE) & runs["depth"].isin(study["depth"])
                     & (runs["status"] == "ok")]
    other_stats = floored_stats(last_epoch_stats(stats_of(other, layerstats, ["depth"])))
    metrics = _metrics_present(stats)
    alphas = sorted(study["alpha"].unique())
    colours = alpha_colours(alphas)
    depths = sorted(study["depth"].unique())
    fig, axes = panel_figure(len(depths), len(metrics))
    for i, depth in enumerate(depths):
        for j, metric in enumerate(metrics):
            ax = axes[i, j]
            _metric_axis(ax, metric)
            ax.xaxis.set_major_locator(MaxNLocator(nbins=4, integer=True))  # narrow panels
            panel = where(stats, {"metric": metric, "depth": depth})
            if not panel.empty:
                sns.lineplot(data=panel, x="layer", y="value", hue="alpha", hue_order=alphas,
                             palette=colours, errorbar="sd", ax=ax, legend=False)
            theirs = where(other_stats, {"metric": metric, "depth": depth})
            if not theirs.empty:
                sns.lineplot(data=theirs, x="layer", y="value", color=RECIPE_COLOUR,
                             linestyle="-.", errorbar="sd", ax=ax, legend=False)
            ax.set_title(LAYER_METRICS[metric] if i == 0 else "")
            cells = where(study, {"depth": depth})
            model_names = ", ".join(label("model", m) for m in ordered("model", cells["model"]))
            dropouts = ", ".join(f"{d:g}" for d in sorted(cells["feat_drop"].unique()))
            ax.set_ylabel(f"{model_names}, L={depth}\n(dropout {dropouts})" if j == 0 else "")
            ax.set_xlabel("Layer" if i == len(depths) - 1 else "")
    handles = [Line2D([], [], color=colours[a]) for a in alphas]
    labels = [f"$\\alpha$ = {a:g}" for a in alphas]
    for _, row in other.drop_duplicates(["model", "heads", "hidden", "epochs"]).iterrows():
        handles.append(Line2D([], [], color=RECIPE_COLOUR, linestyle="-."))
        labels.append(recipe_label(row))
    figure_legend(fig, handles, labels)
    diverged_footnote(fig, diverged, lambda row: (
        f"L={row['depth']} {label('model', row['model'])}, $\\alpha$ = {row['alpha']:g}"))
    return fig
