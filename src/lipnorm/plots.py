"""Figures of an experiment's aggregate, as `<stem>.pdf` and `<stem>.png`.

Sized for a two-column paper (one column is COLUMN_WIDTH inches, fonts 7-8 pt); one
colour per model in every figure (`lipnorm.registry.model_colour`, or a spare where two
models of a figure would share one: `figure_palette`; `PALETTE` is every model's own,
computed on access so that a plugin's models have theirs). Bands are mean ± sample std over seeds
(seaborn's `errorbar="sd"`); on a log axis seaborn takes them in log space, i.e.
geometric mean and std. A setting in which any seed diverged is not drawn as a point
(its mean would average only the survivors) but as a × on the panel's lower edge
(in the layer-statistics figures, which have no setting axis, it is named in a footnote).
"""

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
from matplotlib.cm import ScalarMappable  # noqa: E402
from matplotlib.colors import LogNorm, to_hex  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter  # noqa: E402

from lipnorm.aggregate import (  # noqa: E402
    label,
    load_table,
    ordered,
    runs_of_valid_cells,
    seed_cells,
)
from lipnorm import experiments, registry, remedies  # noqa: E402
from lipnorm.analysis import (  # noqa: E402
    DEFAULT_RECIPE,
    DRAWN_AS_COMPLEMENT,
    LAYER_METRICS,
    NORM_FLOOR,
    diagnose_grid,
    gradient_ratios,
    last_epoch_stats,
    layer_gradient_norms,
    recipe_label,
    recipes,
)
from lipnorm.io import atomic_path  # noqa: E402


def __getattr__(name: str):
    if name == "PALETTE":
        return registry.palette("model")
    if name == "FIGURES":  # experiment -> its figure stems, as registered (lipnorm.experiments)
        return experiments.figures()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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


def _styled(plot: Callable[..., Figure]) -> Callable[..., Figure]:
    """Run a plotting function inside the paper style (fonts are fixed at creation)."""

    @functools.wraps(plot)
    def wrapper(*args, **kwargs) -> Figure:
        with sns.axes_style("whitegrid"), plt.rc_context(STYLE):
            return plot(*args, **kwargs)

    return wrapper


def _figure(nrows: int, ncols: int, **subplots) -> tuple[Figure, np.ndarray]:
    width = COLUMN_WIDTH if ncols <= 2 else TEXT_WIDTH
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(width, PANEL_HEIGHT * nrows + 0.4), squeeze=False,
        layout="constrained", **subplots,
    )
    return fig, axes


def _legend(fig: Figure, models: list[str], diverged: bool, marker: str | None = "o",
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


def _metric_name(runs: pd.DataFrame) -> str:
    names = {"accuracy": "accuracy", "ogb-accuracy": "accuracy", "micro-f1": "micro-F1"}
    return " / ".join(sorted({names[m] for m in runs["metric"]}))


def _depth_axis(ax) -> None:
    """Depth grids are roughly even (1, 2, 5, 10, ..., 30): linear, integer ticks."""
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _hue_lines(ax, kept: pd.DataFrame, diverged: pd.DataFrame, x: str, y: str, hue: str,
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


def _model_lines(ax, kept: pd.DataFrame, diverged: pd.DataFrame, x: str, y: str,
                 models: list[str]) -> None:
    """Mean ± std over seeds per model; diverged settings as × on the lower edge."""
    _hue_lines(ax, kept, diverged, x, y, "model", registry.figure_palette(models))


def _accuracy_panels(runs: pd.DataFrame, rows: str, columns: str, x: str,
                     titles: Callable[[object, object], str]) -> Figure:
    """A grid of accuracy-vs-`x` panels, one per value of `rows` × `columns`."""
    kept, diverged = runs_of_valid_cells(runs, [rows, columns, "model", x])
    kept = kept.assign(accuracy=kept["test_metric"] * 100.0)
    models = ordered("model", runs["model"])
    row_values = _ordered_values(runs, rows)
    column_values = _ordered_values(runs, columns)
    x_label = DEPTH_LABEL if x == "depth" else "$\\alpha$"
    fig, axes = _figure(len(row_values), len(column_values))
    for i, row_value in enumerate(row_values):
        for j, column_value in enumerate(column_values):
            ax = axes[i, j]
            if x == "depth":
                _depth_axis(ax)
            else:
                ax.set_xscale("log")
            here = {rows: row_value, columns: column_value}
            _model_lines(ax, _where(kept, here), _where(diverged, here), x, "accuracy", models)
            ax.set_title(titles(row_value, column_value))
            ax.set_xlabel(x_label if i == len(row_values) - 1 else "")
            ax.set_ylabel(f"Test {_metric_name(runs)} (%)" if j == 0 else "")
    _legend(fig, models, not diverged.empty)
    return fig


def _ordered_values(frame: pd.DataFrame, column: str) -> list:
    if column in ("model", "dataset"):
        return ordered(column, frame[column])
    return sorted(frame[column].unique())


def _where(frame: pd.DataFrame, equal: dict) -> pd.DataFrame:
    mask = np.ones(len(frame), dtype=bool)
    for column, value in equal.items():
        mask &= (frame[column] == value).to_numpy()
    return frame.loc[mask]


@_styled
def accuracy_vs_depth(runs: pd.DataFrame) -> Figure:
    """Test accuracy vs depth per model; columns: datasets, rows: missing rates."""
    return _accuracy_panels(
        runs, "missing_rate", "dataset", "depth",
        lambda rate, dataset: f"{label('dataset', dataset)}, {rate:g}% missing",
    )


@_styled
def accuracy_vs_alpha(runs: pd.DataFrame) -> Figure:
    """Test accuracy vs α (log axis) per model; columns: depths, rows: datasets."""
    if (runs["alpha"] <= 0).any():
        raise ValueError(f"alpha values {sorted(runs['alpha'].unique())} must be > 0 for a log axis")
    return _accuracy_panels(
        runs, "dataset", "depth", "alpha",
        lambda dataset, depth: f"{label('dataset', dataset)}, {depth} layers",
    )


def _spaced_ticks(values: pd.Index, most: int = 5) -> tuple[np.ndarray, list[str]]:
    """Heatmap tick positions (cell centres) and labels for at most `most` evenly spaced values."""
    picked = np.unique(np.linspace(0, len(values) - 1, min(most, len(values))).round().astype(int))
    return picked + 0.5, [str(values[i]) for i in picked]


@_styled
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
            matrix = (_where(norms, here).groupby(["layer", "epoch"])["grad_norm"].median()
                      .unstack("epoch"))
            if not matrix.empty:
                sns.heatmap(matrix.where(matrix > 0), ax=ax, norm=colour, cmap=CMAP, cbar=False,
                            xticklabels=False, yticklabels=False)
                # A few evenly spaced labels: one per epoch or layer overlaps in a small panel.
                ax.set_xticks(*_spaced_ticks(matrix.columns), rotation=0)
                if j == 0:
                    ax.set_yticks(*_spaced_ticks(matrix.index), rotation=0)
            cell = _where(cells, here)
            if cell["n_diverged"].sum():
                ax.text(0.98, 0.02, f"{cell['n_diverged'].sum()}/{cell['n'].sum()} diverged",
                        transform=ax.transAxes, ha="right", va="bottom", color="white")
            ax.set_title(f"{label('model', model)}, {label('dataset', dataset)}" if i == 0 else "")
            ax.set_xlabel("Epoch" if i == len(depths) - 1 else "")
            ax.set_ylabel(f"Layer (L={depth})" if j == 0 else "")
    fig.colorbar(ScalarMappable(norm=colour, cmap=CMAP), cax=fig.add_subplot(grid[:, -1]),
                 label="Gradient norm")
    return fig


@_styled
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
    fig, axes = _figure(1, len(datasets))
    for ax, dataset in zip(axes[0], datasets):
        _depth_axis(ax)
        ax.set_yscale("log")  # before plotting: seaborn then averages in log space
        here = {"dataset": dataset}
        _model_lines(ax, _where(kept, here), _where(diverged, here), "depth", "grad_ratio", models)
        ax.set_title(label("dataset", dataset))
        ax.set_xlabel(DEPTH_LABEL)
        ax.set_ylabel("Max/min layer gradient norm" if ax is axes[0, 0] else "")
    _legend(fig, models, not diverged.empty)
    return fig


@_styled
def training_curves(runs: pd.DataFrame, epochs: pd.DataFrame) -> Figure:
    """Training loss (top) and validation metric (bottom) per epoch at each dataset's
    largest depth, mean ± std over the seeds that did not diverge; one column per dataset."""
    seed_cells(runs, ["dataset", "depth", "model"])  # each model: seeds of one setting
    datasets = ordered("dataset", runs["dataset"])
    models = ordered("model", runs["model"])
    names = ("Training loss", f"Validation {_metric_name(runs)} (%)")
    fig, axes = _figure(2, len(datasets))
    for j, dataset in enumerate(datasets):
        depth = runs.loc[runs["dataset"] == dataset, "depth"].max()
        chosen = _where(runs, {"dataset": dataset, "depth": depth})
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
    _legend(fig, models, diverged=False)
    return fig


@_styled
def lipschitz_probe(probe: pd.DataFrame) -> Figure:
    """Empirical Lipschitz estimate vs input scale (log-log) per model; one panel per
    kind of input."""
    kinds = sorted(probe["kind"].unique())
    models = ordered("model", probe["model"])
    fig, axes = _figure(1, len(kinds))
    for ax, kind in zip(axes[0], kinds):
        ax.set_xscale("log")
        ax.set_yscale("log")
        sns.lineplot(data=_where(probe, {"kind": kind}), x="s", y="estimate", hue="model",
                     hue_order=models, palette=registry.figure_palette(models), errorbar="sd", marker="o", ax=ax,
                     legend=False)
        # A panel spanning about one decade would otherwise label every minor tick.
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_title(f"{kind} inputs")
        ax.set_xlabel("Input scale $s$")
        ax.set_ylabel("Lipschitz estimate" if ax is axes[0, 0] else "")
    _legend(fig, models, diverged=False)
    return fig


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


@_styled
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
            panel = _where(medians, {"family": family, "heads": heads, "hidden": hidden, "depth": depth})
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
    fig.legend(handles, implementations, loc="outside upper center",
               ncols=min(len(implementations), 5), frameon=False)
    return fig


# --- diagnose: per-layer representation statistics (layerstats) --------------------

# Floor of 1 - entropy: entropies are computed from float32 attention, so 1 - entropy
# below ~1e-7 is rounding (an exact 0 is common), not a measured distance.
COMPLEMENT_FLOOR = 1e-7
# Line style per feature-dropout rate, largest rate first (solid, dashed, ...).
DROPOUT_DASHES = ("", (4, 1.5), (1, 1.5), (4, 1.5, 1, 1.5))
DROPOUT_STYLES = ("-", "--", ":", "-.")


def _stats_of(runs: pd.DataFrame, layerstats: pd.DataFrame, settings: list[str]) -> pd.DataFrame:
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


def _floored(stats: pd.DataFrame) -> pd.DataFrame:
    """Values as drawn: the entropy as 1 - entropy (at least COMPLEMENT_FLOOR), then
    every value floored at NORM_FLOOR: an exact 0 (e.g. the energy of identical representations, or uniform
    attention) would otherwise vanish from a log axis."""
    complement = stats["metric"].isin(DRAWN_AS_COMPLEMENT)
    values = stats["value"].where(~complement, (1.0 - stats["value"]).clip(lower=COMPLEMENT_FLOOR))
    return stats.assign(value=values.clip(lower=NORM_FLOOR))


def _metric_axis(ax, metric: str) -> None:
    """Log y (set before plotting, so that seaborn averages in log space)."""
    ax.set_yscale("log")


def _diverged_footnote(fig: Figure, diverged: pd.DataFrame,
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
    stats = _stats_of(kept, layerstats, by)
    stats = _floored(select(stats))
    metrics = _metrics_present(stats)
    models = ordered("model", grid["model"])
    dropouts = sorted(grid["feat_drop"].unique(), reverse=True)
    dashes = _dropout_styles(dropouts)
    depths = sorted(grid["depth"].unique())
    fig, axes = _figure(len(metrics), len(depths), sharey="row")
    for i, metric in enumerate(metrics):
        for j, depth in enumerate(depths):
            ax = axes[i, j]
            _metric_axis(ax, metric)
            _depth_axis(ax)
            ax.xaxis.set_major_locator(MaxNLocator(nbins=5, integer=True))  # narrow panels
            panel = _where(stats, {"metric": metric, "depth": depth})
            if not panel.empty:
                sns.lineplot(data=panel, x=x, y="value", hue="model", hue_order=models,
                             palette=registry.figure_palette(models), style="feat_drop", style_order=dropouts,
                             dashes=dashes, errorbar="sd", ax=ax, legend=False)
            ax.set_title(title(depth) if i == 0 else "")
            ax.set_xlabel(("Layer" if x == "layer" else "Epoch") if i == len(metrics) - 1 else "")
            ax.set_ylabel(LAYER_METRICS[metric] if j == 0 else "")
    _legend(fig, models, diverged=False, marker=None, extra=_dropout_legend(dropouts),
            ncols=4 if len(depths) > 2 else 3)
    _diverged_footnote(fig, diverged, lambda row: (
        f"L={row['depth']} {label('model', row['model'])}, dropout {row['feat_drop']:g}"))
    return fig


@_styled
def layerstats_by_layer(runs: pd.DataFrame, layerstats: pd.DataFrame) -> Figure:
    """Each layer statistic against the layer (1 = first attention layer) at each run's
    last logged epoch: rows of panels per metric (energy, MAD, Rayleigh quotient,
    1 − attention entropy and output norm, on log axes), columns per depth, colour per model,
    line style per feature-dropout rate. Only the diagnose grid (this pipeline's recipe,
    α = 1). Bands: mean ± std over seeds, in log space on log axes (geometric); a value
    below NORM_FLOOR (an energy of exactly 0) is drawn at NORM_FLOOR."""
    return _model_dropout_panels(runs, layerstats, "layer", last_epoch_stats,
                                 lambda depth: f"{depth} layers")


@_styled
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


@_styled
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
    stats = _floored(last_epoch_stats(_stats_of(kept, layerstats, by)))
    other = runs.loc[(recipes(runs) != DEFAULT_RECIPE) & runs["depth"].isin(study["depth"])
                     & (runs["status"] == "ok")]
    other_stats = _floored(last_epoch_stats(_stats_of(other, layerstats, ["depth"])))
    metrics = _metrics_present(stats)
    alphas = sorted(study["alpha"].unique())
    colours = alpha_colours(alphas)
    depths = sorted(study["depth"].unique())
    fig, axes = _figure(len(depths), len(metrics))
    for i, depth in enumerate(depths):
        for j, metric in enumerate(metrics):
            ax = axes[i, j]
            _metric_axis(ax, metric)
            ax.xaxis.set_major_locator(MaxNLocator(nbins=4, integer=True))  # narrow panels
            panel = _where(stats, {"metric": metric, "depth": depth})
            if not panel.empty:
                sns.lineplot(data=panel, x="layer", y="value", hue="alpha", hue_order=alphas,
                             palette=colours, errorbar="sd", ax=ax, legend=False)
            theirs = _where(other_stats, {"metric": metric, "depth": depth})
            if not theirs.empty:
                sns.lineplot(data=theirs, x="layer", y="value", color=RECIPE_COLOUR,
                             linestyle="-.", errorbar="sd", ax=ax, legend=False)
            ax.set_title(LAYER_METRICS[metric] if i == 0 else "")
            cells = _where(study, {"depth": depth})
            model_names = ", ".join(label("model", m) for m in ordered("model", cells["model"]))
            dropouts = ", ".join(f"{d:g}" for d in sorted(cells["feat_drop"].unique()))
            ax.set_ylabel(f"{model_names}, L={depth}\n(dropout {dropouts})" if j == 0 else "")
            ax.set_xlabel("Layer" if i == len(depths) - 1 else "")
    handles = [Line2D([], [], color=colours[a]) for a in alphas]
    labels = [f"$\\alpha$ = {a:g}" for a in alphas]
    for _, row in other.drop_duplicates(["model", "heads", "hidden", "epochs"]).iterrows():
        handles.append(Line2D([], [], color=RECIPE_COLOUR, linestyle="-."))
        labels.append(recipe_label(row))
    fig.legend(handles, labels, loc="outside upper center", ncols=min(len(labels), 4),
               frameon=False)
    _diverged_footnote(fig, diverged, lambda row: (
        f"L={row['depth']} {label('model', row['model'])}, $\\alpha$ = {row['alpha']:g}"))
    return fig


# --- remedies -----------------------------------------------------------------------

# Line style per attention norm: GAT solid, GAT-Lip dashed.
ATTENTION_NORM_DASHES = {"none": "", "lip": (4, 1.5)}
ATTENTION_NORM_STYLES = {"none": "-", "lip": "--"}
PUBLISHED_MARKER = "*"
PUBLISHED_COLOUR = "#000000"


def remedy_colours(names) -> dict[str, str]:
    """One colour per remedy (`remedies.remedy_order`): registry.SPARE_COLOURS in the order of
    `remedies.REMEDIES`, so a remedy keeps its colour in every figure; others after."""
    names = remedies.remedy_order(names)
    others = [n for n in names if n not in remedies.REMEDIES]
    slots = {n: i for i, n in enumerate([*remedies.REMEDIES, *others])}
    spare = registry.SPARE_COLOURS
    return {n: spare[slots[n] % len(spare)] for n in names}


def _attention_norm_legend(runs: pd.DataFrame, colours: dict | None) -> list[tuple[Line2D, str]]:
    """Handles naming GAT / GAT-Lip by their line style (and colour, if `colours`)."""
    return [(Line2D([], [], color="black" if colours is None else colours[norm],
                    linestyle=ATTENTION_NORM_STYLES[norm]), remedies.model_label(runs, norm))
            for norm in registry.ATTENTION_NORMS if norm in set(runs["attention_norm"])]


FACET_COLUMNS = 4  # remedies_accuracy: facets per row of a dataset's block, then wrapped
FACET_DEPTH_TICKS = 4  # at most ~this many depth ticks on a facet (depths 1-30 in ~1.5 inches)


def facet_grid(count: int, columns: int = FACET_COLUMNS) -> tuple[int, int]:
    """(rows, columns) of a grid of `count` facets, at most `columns` per row, wrapping."""
    if count < 1 or columns < 1:
        raise ValueError(f"a facet grid needs at least one facet and one column (got {count}, {columns})")
    ncols = min(count, columns)
    return -(-count // ncols), ncols


@_styled
def remedies_accuracy(runs: pd.DataFrame) -> Figure:
    """Test accuracy at the best-validation epoch (`best_val_test`, %) against depth: one
    block of facets per dataset (titled with it), one facet per remedy
    (`remedies.remedy_label`, `remedies.remedy_order`) in a grid of up to FACET_COLUMNS columns,
    wrapping. In each, GAT and GAT-Lip as two lines (colour `registry.AXIS_COLOURS`, line
    style ATTENTION_NORM_DASHES), mean over seeds with a band of ± one std; a setting
    with a diverged seed is a × on the lower edge. The
    published GAT result of the remedy (`remedies.PUBLISHED`) is a black star at its
    reported depth. The facets of a dataset share their axes (datasets differ in their
    accuracy range). The legend is the figure's, above the facets, in space the
    constrained layout reserves for it (never clipped)."""
    runs = remedies.with_remedies(runs)
    by = ["dataset", "remedy", "attention_norm", "depth"]
    kept, diverged = runs_of_valid_cells(runs, by)
    kept = kept.assign(accuracy=kept["best_val_test"] * 100.0)
    names = remedies.remedy_order(runs["remedy"])
    datasets = ordered("dataset", runs["dataset"])
    colours = {n: registry.AXIS_COLOURS[n] for n in registry.ATTENTION_NORMS
               if n in set(runs["attention_norm"])}
    dashes = {n: ATTENTION_NORM_DASHES[n] for n in colours}
    nrows, ncols = facet_grid(len(names))
    block_height = PANEL_HEIGHT * nrows + 0.3  # the facets and the dataset's title
    fig = plt.figure(figsize=(COLUMN_WIDTH if ncols <= 2 else TEXT_WIDTH, block_height * len(datasets) + 0.4),
                     layout="constrained")
    blocks = fig.subfigures(len(datasets), 1, squeeze=False)[:, 0]
    published = False
    for block, dataset in zip(blocks, datasets):
        block.suptitle(label("dataset", dataset), fontsize=STYLE["axes.titlesize"], fontweight="bold")
        grid = block.add_gridspec(nrows, ncols)
        # Axes shared within a block only: axes shared across subfigures redraw the whole
        # figure at every change of limits (matplotlib's Axis._set_lim), minutes for 14 facets.
        first = None
        for k, remedy in enumerate(names):
            row, column = divmod(k, ncols)
            ax = block.add_subplot(grid[row, column], sharex=first, sharey=first)
            if first is None:
                first = ax
                # Round steps (depths 1-30: 0, 10, 20, 30), integers on short grids.
                ax.xaxis.set_major_locator(MaxNLocator(nbins=FACET_DEPTH_TICKS, integer=True,
                                                       steps=[1, 2, 5, 10]))
            here = {"dataset": dataset, "remedy": remedy}
            _hue_lines(ax, _where(kept, here), _where(diverged, here), "depth", "accuracy",
                       "attention_norm", colours, dashes)
            entry = remedies.PUBLISHED.get((remedy, dataset))
            if entry is not None:
                ax.scatter([entry.depth], [entry.accuracy], marker=PUBLISHED_MARKER, s=30,
                           color=PUBLISHED_COLOUR, zorder=4)
                published = True
            ax.set_title(remedies.remedy_label(remedy))
            # The depth label under the lowest facet of each column (the last row may be short).
            ax.set_xlabel(DEPTH_LABEL if k + ncols >= len(names) else "")
            ax.set_ylabel(f"Test {_metric_name(runs)} (%)" if column == 0 else "")
    handles = _attention_norm_legend(runs, colours)
    if published:
        handles.append((Line2D([], [], color=PUBLISHED_COLOUR, marker=PUBLISHED_MARKER,
                               markersize=6, linestyle="none"), "published GAT"))  # as drawn (s=30)
    if not diverged.empty:
        handles.append((Line2D([], [], color="black", marker="x", linestyle="none"), "diverged"))
    fig.legend([h for h, _ in handles], [t for _, t in handles], loc="outside upper center",
               ncols=min(len(handles), 4), frameon=False)
    return fig


@_styled
def remedies_mad(runs: pd.DataFrame, layerstats: pd.DataFrame) -> Figure:
    """The mean average distance (`mean_average_distance`) of each attention layer at
    each run's last recorded epoch, against the layer, at each dataset's deepest depth:
    one panel per dataset, one line per remedy (colour, `remedy_colours`) × attention
    norm (line style: GAT solid, GAT-Lip dashed). Log y axis: lines are geometric means
    over seeds, bands ± one std in log space; a value below NORM_FLOOR is drawn there.
    A setting with a diverged seed is not drawn (named in a footnote)."""
    runs = remedies.with_remedies(runs)
    datasets = ordered("dataset", runs["dataset"])
    deepest = runs["depth"] == runs.groupby("dataset")["depth"].transform("max")
    deep = runs.loc[deepest]
    deep.attrs = runs.attrs
    by = ["dataset", "depth", "remedy", "attention_norm"]
    kept, diverged = runs_of_valid_cells(deep, by)
    stats = _stats_of(kept, layerstats.loc[layerstats["metric"] == "mean_average_distance"], by)
    stats = _floored(last_epoch_stats(stats))
    names = remedies.remedy_order(runs["remedy"])
    colours = remedy_colours(names)
    norms = [n for n in registry.ATTENTION_NORMS if n in set(runs["attention_norm"])]
    fig, axes = _figure(1, len(datasets), sharey=True)
    for ax, dataset in zip(axes[0], datasets):
        ax.set_yscale("log")  # before plotting: seaborn then averages in log space
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        panel = _where(stats, {"dataset": dataset})
        if not panel.empty:
            sns.lineplot(data=panel, x="layer", y="value", hue="remedy", hue_order=names,
                         palette=colours, style="attention_norm", style_order=norms,
                         dashes=ATTENTION_NORM_DASHES, errorbar="sd", ax=ax, legend=False)
        depth = int(deep.loc[deep["dataset"] == dataset, "depth"].iloc[0])
        ax.set_title(f"{label('dataset', dataset)}, {depth} layers")
        ax.set_xlabel("Layer")
        ax.set_ylabel(f"{LAYER_METRICS['mean_average_distance']}, last epoch" if ax is axes[0, 0] else "")
    handles = [(Line2D([], [], color=colours[n]), remedies.remedy_label(n)) for n in names]
    handles += _attention_norm_legend(runs, None)
    fig.legend([h for h, _ in handles], [t for _, t in handles], loc="outside upper center",
               ncols=3, frameon=False)
    _diverged_footnote(fig, diverged, lambda row: (
        f"{label('dataset', row['dataset'])} {remedies.remedy_label(row['remedy'])}, "
        f"{remedies.model_label(runs, row['attention_norm'])}"))
    return fig


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


def write_figures(
    experiment: str, aggregate_dir: str | os.PathLike, out_dir: str | os.PathLike
) -> list[Path]:
    """Write the PDF and PNG of each figure the experiment registers
    (`lipnorm.experiments`), drawn from the aggregate tables it names."""
    entry = experiments.experiment(experiment)
    load = functools.cache(functools.partial(load_table, aggregate_dir))
    written = []
    for output in entry.figures:
        written += save_figure(experiments.build(output, load), Path(out_dir) / output.stem)
    return written
