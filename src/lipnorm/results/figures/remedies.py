"""The remedies experiment's figures: accuracy against depth per remedy, GAT and GAT-Lip
side by side (with the published numbers), and the last layer's MAD."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from lipnorm import registry
from lipnorm.results import remedies
from lipnorm.results.aggregate import label, ordered, runs_of_valid_cells
from lipnorm.results.analysis import LAYER_METRICS, last_epoch_stats
from lipnorm.results.figures.layerstats import diverged_footnote, floored_stats, stats_of
from lipnorm.results.figures.style import (
    COLUMN_WIDTH,
    DEPTH_LABEL,
    PANEL_HEIGHT,
    STYLE,
    TEXT_WIDTH,
    figure_legend,
    hue_lines,
    metric_name,
    panel_figure,
    paper_style,
    where,
)


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


@paper_style
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
            hue_lines(ax, where(kept, here), where(diverged, here), "depth", "accuracy",
                       "attention_norm", colours, dashes)
            entry = remedies.PUBLISHED.get((remedy, dataset))
            if entry is not None:
                ax.scatter([entry.depth], [entry.accuracy], marker=PUBLISHED_MARKER, s=30,
                           color=PUBLISHED_COLOUR, zorder=4)
                published = True
            ax.set_title(remedies.remedy_label(remedy))
            # The depth label under the lowest facet of each column (the last row may be short).
            ax.set_xlabel(DEPTH_LABEL if k + ncols >= len(names) else "")
            ax.set_ylabel(f"Test {metric_name(runs)} (%)" if column == 0 else "")
    handles = _attention_norm_legend(runs, colours)
    if published:
        handles.append((Line2D([], [], color=PUBLISHED_COLOUR, marker=PUBLISHED_MARKER,
                               markersize=6, linestyle="none"), "published GAT"))  # as drawn (s=30)
    if not diverged.empty:
        handles.append((Line2D([], [], color="black", marker="x", linestyle="none"), "diverged"))
    figure_legend(fig, [h for h, _ in handles], [t for _, t in handles])
    return fig


@paper_style
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
    stats = stats_of(kept, layerstats.loc[layerstats["metric"] == "mean_average_distance"], by)
    stats = floored_stats(last_epoch_stats(stats))
    names = remedies.remedy_order(runs["remedy"])
    colours = remedy_colours(names)
    norms = [n for n in registry.ATTENTION_NORMS if n in set(runs["attention_norm"])]
    fig, axes = panel_figure(1, len(datasets), sharey=True)
    for ax, dataset in zip(axes[0], datasets):
        ax.set_yscale("log")  # before plotting: seaborn then averages in log space
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        panel = where(stats, {"dataset": dataset})
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
    figure_legend(fig, [h for h, _ in handles], [t for _, t in handles], most_columns=3)
    diverged_footnote(fig, diverged, lambda row: (
        f"{label('dataset', row['dataset'])} {remedies.remedy_label(row['remedy'])}, "
        f"{remedies.model_label(runs, row['attention_norm'])}"))
    return fig
