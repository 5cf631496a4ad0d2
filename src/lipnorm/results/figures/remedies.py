"""The remedies experiment's figures: accuracy against depth per remedy, GAT and GAT-Lip
side by side with the paired difference GAT-Lip − GAT under them (`remedies_accuracy`),
and the hidden layers' MAD at the deepest depth (`remedies_mad`).

Every interval drawn here is a 95 % Student-t interval of a mean over seeds
(`remedies.student_t_interval`), and each figure says so, with its number of seeds.
"""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from lipnorm import registry
from lipnorm.results import remedies
from lipnorm.results.aggregate import label, ordered, runs_of_valid_cells
from lipnorm.results.analysis import LAYER_METRICS, last_epoch_stats
from lipnorm.results.figures.layerstats import floored_stats, stats_of
from lipnorm.results.figures.style import (
    COLUMN_WIDTH,
    DEPTH_LABEL,
    PANEL_HEIGHT,
    STYLE,
    TEXT_WIDTH,
    figure_legend,
    metric_name,
    paper_style,
    where,
)


# Line style and marker per attention norm: GAT solid circles, GAT-Lip dashed squares.
ATTENTION_NORM_DASHES = {"none": "", "lip": (4, 1.5)}
ATTENTION_NORM_STYLES = {"none": "-", "lip": "--"}
ATTENTION_NORM_MARKERS = {"none": "o", "lip": "s"}
PUBLISHED_MARKER = "*"
PUBLISHED_COLOUR = "#000000"
DIFFERENCE_COLOUR = "#333333"  # the paired difference's points and bars
ZERO_COLOUR = "0.5"
BAND_ALPHA = 0.2
CAPSIZE = 1.5

FACET_COLUMNS = 4  # facets per row of a dataset's block, then wrapped
DIFFERENCE_HEIGHT = 0.8  # inches: the paired difference's panel under each accuracy panel
BLOCK_TITLE_HEIGHT = 0.3  # inches: a dataset block's title
DEPTH_GAP = 0.5  # extra room on the depth axis between depths that are not consecutive
MODEL_OFFSET = 0.12  # depth-axis units: GAT left, GAT-Lip right of the depth, so bars never overlap
SINGLE_OFFSET = 0.15  # single-depth layout: GAT and GAT-Lip either side of the remedy
DENSE_TICKS = 10  # more depth ticks than this: smaller tick labels (depths 1-30: 14 ticks)
DENSE_TICK_SIZE = 5.5


def remedy_colours(names) -> dict[str, str]:
    """One colour per remedy (`remedies.remedy_order`): registry.SPARE_COLOURS in the order of
    `remedies.REMEDIES`, so a remedy keeps its colour in every figure; others after."""
    names = remedies.remedy_order(names)
    others = [n for n in names if n not in remedies.REMEDIES]
    slots = {n: i for i, n in enumerate([*remedies.REMEDIES, *others])}
    spare = registry.SPARE_COLOURS
    return {n: spare[slots[n] % len(spare)] for n in names}


def facet_grid(count: int, columns: int = FACET_COLUMNS) -> tuple[int, int]:
    """(rows, columns) of a grid of `count` facets, at most `columns` per row, wrapping."""
    if count < 1 or columns < 1:
        raise ValueError(f"a facet grid needs at least one facet and one column (got {count}, {columns})")
    ncols = min(count, columns)
    return -(-count // ncols), ncols


def depth_positions(depths) -> dict[int, float]:
    """The x position of each depth on the accuracy figure's depth axis: evenly spaced
    categories (consecutive depths 1 apart), with DEPTH_GAP more between two depths that
    are not consecutive (10 -> 15), so the deep tail (15, 20, 25, 30) takes no more room
    than four shallow depths and a reader sees where depths were skipped."""
    positions, x, previous = {}, 0.0, None
    for depth in sorted({int(d) for d in depths}):
        if previous is not None:
            x += 1.0 if depth == previous + 1 else 1.0 + DEPTH_GAP
        positions[depth] = x
        previous = depth
    return positions


def consecutive_segments(depths) -> list[list[int]]:
    """`depths` (sorted, distinct) split into runs of consecutive integers: a line joins
    the points of one run only, never two depths with an unrun depth between them."""
    segments: list[list[int]] = []
    for depth in sorted({int(d) for d in depths}):
        if segments and depth == segments[-1][-1] + 1:
            segments[-1].append(depth)
        else:
            segments.append([depth])
    return segments


def interval_cells(kept: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Per cell of `by`: `n` seeds, `mean`, `lo`, `hi` of the test accuracy at the
    best-validation epoch (`best_val_test`, %), the 95 % Student-t interval of the mean
    (`remedies.student_t_interval`; NaN bounds for one seed)."""
    rows = []
    for key, cell in kept.groupby(by, sort=True):
        mean, _, lo, hi = remedies.student_t_interval(cell["best_val_test"].to_numpy(dtype=float) * 100.0)
        rows.append({**dict(zip(by, key if isinstance(key, tuple) else (key,))),
                     "n": len(cell), "mean": mean, "lo": lo, "hi": hi})
    return pd.DataFrame(rows, columns=[*by, "n", "mean", "lo", "hi"])


def _count_text(counts, what: str) -> str:
    """"n = 5 seeds", or "n = 3–5 seeds" where the cells differ."""
    counts = sorted({int(c) for c in counts})
    if not counts:
        return f"no {what}"
    n = str(counts[0]) if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"
    return f"n = {n} {what}"


def _note(fig: Figure, text: str) -> None:
    """A text line under the panels (in space the constrained layout reserves)."""
    fig.supxlabel(textwrap.fill(text, width=int(fig.get_figwidth() * 20)), fontsize=6, color="0.2")


def _mark_diverged(ax, xs, colour) -> None:
    """× on the panel's lower edge at `xs`: a cell or pair with a diverged seed (no mean)."""
    if len(xs):
        ax.scatter(list(xs), np.full(len(xs), 0.03), marker="x", color=colour,
                   transform=ax.get_xaxis_transform(), clip_on=False, zorder=3)


def _interval_marks(ax, xs, cells: pd.DataFrame, colour, marker, linestyle, band: bool) -> None:
    """Points at their means; over a run of consecutive depths a line and (`band`) a band
    of the interval, an isolated point with error bars instead."""
    xs = np.asarray(xs, dtype=float)
    mean, lo, hi = (cells[c].to_numpy(dtype=float) for c in ("mean", "lo", "hi"))
    if band and len(xs) > 1:
        ax.plot(xs, mean, color=colour, marker=marker, linestyle=linestyle, markersize=2.5, zorder=3)
        if not np.isnan(lo).all():
            ax.fill_between(xs, lo, hi, color=colour, alpha=BAND_ALPHA, linewidth=0, zorder=2)
        return
    ax.errorbar(xs, mean, yerr=_error(mean, lo, hi), color=colour, marker=marker, linestyle="none",
                markersize=2.5, capsize=CAPSIZE, elinewidth=0.8, zorder=3)


def _error(mean, lo, hi) -> np.ndarray | None:
    """errorbar's yerr (2 x n) of the interval [lo, hi]; None where no point has one."""
    if np.isnan(lo).all():
        return None
    return np.vstack([mean - lo, hi - mean])


def _model_colours(runs: pd.DataFrame) -> dict[str, str]:
    return {n: registry.AXIS_COLOURS[n] for n in registry.ATTENTION_NORMS if n in set(runs["attention_norm"])}


def _legend(fig: Figure, runs: pd.DataFrame, colours: dict, published: bool, difference: bool,
            diverged: bool, lines: bool) -> None:
    handles = [(Line2D([], [], color=colour, marker=ATTENTION_NORM_MARKERS[norm], markersize=3,
                       linestyle=ATTENTION_NORM_STYLES[norm] if lines else "none"),
                remedies.model_label(runs, norm)) for norm, colour in colours.items()]
    if difference:
        handles.append((Line2D([], [], color=DIFFERENCE_COLOUR, marker="D", markersize=2.5, linestyle="none"),
                        f"{remedies.model_label(runs, 'lip')} − {remedies.model_label(runs, 'none')}, paired"))
    if published:
        handles.append((Line2D([], [], color=PUBLISHED_COLOUR, marker=PUBLISHED_MARKER,
                               markersize=6, linestyle="none"), "published GAT"))
    if diverged:
        handles.append((Line2D([], [], color="black", marker="x", linestyle="none"), "diverged"))
    figure_legend(fig, [h for h, _ in handles], [t for _, t in handles])


def _paired_by_cell(runs: pd.DataFrame) -> pd.DataFrame:
    """`remedies.paired_differences` of the runs that have both arms (none and lip)."""
    if not {"none", "lip"} <= set(runs["attention_norm"]):
        return pd.DataFrame(columns=["dataset", "remedy", "depth", *remedies.PAIRED_COLUMNS])
    return remedies.paired_differences(runs)


@paper_style
def remedies_accuracy(runs: pd.DataFrame) -> Figure:
    """Test accuracy at the best-validation epoch (`best_val_test`, %) against depth, and
    LipschitzNorm's paired effect: one block per dataset (titled with it), small multiples
    of one panel per remedy (`remedies.remedy_order`: nothing, BatchNorm, PairNorm, DGN,
    DropEdge, residual, initial residual, then any other) in rows of up to FACET_COLUMNS.

    - Accuracy panel: GAT and GAT-Lip (colour `registry.AXIS_COLOURS`, GAT solid circles,
      GAT-Lip dashed squares, drawn MODEL_OFFSET either side of their depth so that bars
      never overlap), the mean over seeds with the 95 % Student-t interval of the mean: a
      band over a run of consecutive depths, error bars at a depth whose neighbours were
      not run. A line joins consecutive depths only (no line across 10 -> 15: it would
      pretend to interpolate depths never run). A cell with a diverged seed has no mean:
      a × on the lower edge. The published GAT result of the remedy (`remedies.PUBLISHED`)
      is a black star at its depth, where that depth is on the axis.
    - Under it, the paired difference GAT-Lip − GAT per depth (same seed and depth,
      `remedies.paired_differences`, points) as a point with its 95 % Student-t interval
      as error bars, and the zero line.

    Depth axis (`depth_positions`): every depth of the data is a tick, evenly spaced, with
    a wider step where depths were skipped. A linear axis would give depths 15-30 half the
    width and crowd 1-10 into the rest; a log2 axis still crowds 5-10. Accuracy panels of a
    dataset share their y axis, and so do its difference panels (datasets differ in their
    accuracy range). A text line under the panels states what bands and bars are, with the
    number of seeds.

    With a single depth in the data (e.g. a depth-20 study) a depth axis has nothing to
    show: per dataset, one panel with the remedies along x, GAT and GAT-Lip as
    dot-and-interval marks SINGLE_OFFSET either side of each remedy, and beside it a
    panel of the paired difference per remedy with the zero line (`_single_depth`).
    """
    runs = remedies.with_remedies(runs)
    if runs["depth"].nunique() == 1:
        return _single_depth(runs)
    kept, diverged, cells, paired, names, datasets, colours, offsets = _panel_data(
        runs, ["dataset", "remedy", "attention_norm", "depth"], MODEL_OFFSET
    )
    positions = depth_positions(runs["depth"])
    nrows, ncols = facet_grid(len(names))
    block_height = (PANEL_HEIGHT + DIFFERENCE_HEIGHT) * nrows + BLOCK_TITLE_HEIGHT
    fig = plt.figure(figsize=(COLUMN_WIDTH if ncols <= 2 else TEXT_WIDTH, block_height * len(datasets) + 0.6),
                     layout="constrained")
    blocks = fig.subfigures(len(datasets), 1, squeeze=False)[:, 0]
    published = False
    ticks = list(positions.values())
    tick_size = DENSE_TICK_SIZE if len(ticks) > DENSE_TICKS else STYLE["xtick.labelsize"]
    for block, dataset in zip(blocks, datasets):
        block.suptitle(label("dataset", dataset), fontsize=STYLE["axes.titlesize"], fontweight="bold")
        grid = block.add_gridspec(2 * nrows, ncols, height_ratios=[PANEL_HEIGHT, DIFFERENCE_HEIGHT] * nrows)
        # Axes shared within a block only: axes shared across subfigures redraw the whole
        # figure at every change of limits (matplotlib's Axis._set_lim), minutes for 14 facets.
        first = first_difference = None
        for k, remedy in enumerate(names):
            row, column = divmod(k, ncols)
            ax = block.add_subplot(grid[2 * row, column], sharex=first, sharey=first)
            below = block.add_subplot(grid[2 * row + 1, column], sharex=ax, sharey=first_difference)
            if first is None:
                first, first_difference = ax, below
                ax.set_xticks(ticks, [str(d) for d in positions])
                ax.set_xlim(ticks[0] - 0.5, ticks[-1] + 0.5)
            here = {"dataset": dataset, "remedy": remedy}
            for norm, colour in colours.items():
                model = where(cells, {**here, "attention_norm": norm}).sort_values("depth")
                by_depth = model.set_index("depth")
                for segment in consecutive_segments(model["depth"]):
                    xs = [positions[d] + offsets[norm] for d in segment]
                    _interval_marks(ax, xs, by_depth.loc[segment], colour, ATTENTION_NORM_MARKERS[norm],
                                    ATTENTION_NORM_STYLES[norm], band=True)
                lost = where(diverged, {**here, "attention_norm": norm})
                _mark_diverged(ax, [positions[int(d)] + offsets[norm] for d in lost["depth"]], colour)
            entry = remedies.PUBLISHED.get((remedy, dataset))
            if entry is not None and entry.depth in positions:
                ax.scatter([positions[entry.depth]], [entry.accuracy], marker=PUBLISHED_MARKER, s=30,
                           color=PUBLISHED_COLOUR, zorder=4)
                published = True
            differences = where(paired, here)
            _difference_marks(below, [positions[int(d)] for d in differences["depth"]], differences)
            ax.set_title(remedies.remedy_label(remedy))
            ax.tick_params(axis="x", labelbottom=False)
            below.tick_params(axis="x", labelsize=tick_size)
            # The depth label under the lowest panel of each column (the last row may be short).
            below.set_xlabel(DEPTH_LABEL if k + ncols >= len(names) else "")
            ax.set_ylabel(f"Test {metric_name(runs)} (%)" if column == 0 else "")
            below.set_ylabel("Δ (points)" if column == 0 else "")
        _within_percent(first)
    _legend(fig, runs, colours, published, not paired.empty, not diverged.empty, lines=True)
    pairs = paired.loc[paired["verdict"] != remedies.DIVERGED, "n"]
    _note(fig, "Bands (error bars at a depth without run neighbours) and the bars of Δ: 95 % Student-t "
               f"intervals of the mean over {_count_text(cells['n'], 'seeds')}; "
               + (f"Δ = {remedies.model_label(runs, 'lip')} − {remedies.model_label(runs, 'none')}, "
                  f"paired by seed and depth ({_count_text(pairs, 'pairs')}), percentage points."
                  if not paired.empty else "no paired difference (one model only)."))
    return fig


def _within_percent(ax) -> None:
    """Accuracy limits within [0, 100] %: an interval of few seeds may reach past them."""
    low, high = ax.get_ylim()
    ax.set_ylim(max(low, 0.0), min(high, 100.0))


def _difference_marks(ax, xs, differences: pd.DataFrame) -> None:
    """The paired differences (points with their interval as error bars) and the zero
    line; a depth whose pair diverged is a × on the lower edge."""
    ax.axhline(0.0, color=ZERO_COLOUR, linewidth=0.8, zorder=1)
    ok = (differences["verdict"] != remedies.DIVERGED).to_numpy()
    xs = np.asarray(xs, dtype=float)
    if ok.any():
        rows = differences.loc[ok]
        mean, lo, hi = (rows[c].to_numpy(dtype=float) for c in ("mean", "lo", "hi"))
        ax.errorbar(xs[ok], mean, yerr=_error(mean, lo, hi), color=DIFFERENCE_COLOUR, marker="D",
                    markersize=2.5, linestyle="none", capsize=CAPSIZE, elinewidth=0.8, zorder=3)
    _mark_diverged(ax, xs[~ok], DIFFERENCE_COLOUR)


def _panel_data(runs: pd.DataFrame, by: list[str], offset: float):
    """What both layouts of `remedies_accuracy` draw from: the runs of cells without a
    diverged seed and those with one, the cells' intervals over `by`, the paired
    differences, the remedies and datasets in order, the model colours, and each model's
    x offset (GAT-Lip `offset` to the right of GAT; none with one model)."""
    kept, diverged = runs_of_valid_cells(runs, by)
    colours = _model_colours(runs)
    offsets = {"none": -offset, "lip": offset} if len(colours) > 1 else {n: 0.0 for n in colours}
    return (kept, diverged, interval_cells(kept, by), _paired_by_cell(runs), remedies.remedy_order(runs["remedy"]),
            ordered("dataset", runs["dataset"]), colours, offsets)


def _single_depth(runs: pd.DataFrame) -> Figure:
    """`remedies_accuracy` of runs of one depth: per dataset, the remedies along x, GAT and
    GAT-Lip as dot-and-interval marks either side of each, and the paired difference."""
    depth = int(runs["depth"].iloc[0])
    kept, diverged, cells, paired, names, datasets, colours, offsets = _panel_data(
        runs, ["dataset", "remedy", "attention_norm"], SINGLE_OFFSET
    )
    index = {name: i for i, name in enumerate(names)}
    width = COLUMN_WIDTH if len(names) <= 3 else TEXT_WIDTH
    fig, axes = plt.subplots(len(datasets), 2, figsize=(width, (PANEL_HEIGHT + 0.5) * len(datasets) + 0.6),
                             squeeze=False, layout="constrained", width_ratios=[2, 1], sharex=True)
    published = False
    for (ax, side), dataset in zip(axes, datasets):
        for norm, colour in colours.items():
            model = where(cells, {"dataset": dataset, "attention_norm": norm})
            model = model.assign(_x=model["remedy"].map(index)).sort_values("_x")
            _interval_marks(ax, model["_x"] + offsets[norm], model, colour, ATTENTION_NORM_MARKERS[norm],
                            "none", band=False)
            lost = where(diverged, {"dataset": dataset, "attention_norm": norm})
            _mark_diverged(ax, [index[r] + offsets[norm] for r in lost["remedy"]], colour)
        for remedy in names:
            entry = remedies.PUBLISHED.get((remedy, dataset))
            if entry is not None and entry.depth == depth:
                ax.scatter([index[remedy]], [entry.accuracy], marker=PUBLISHED_MARKER, s=30,
                           color=PUBLISHED_COLOUR, zorder=4)
                published = True
        differences = where(paired, {"dataset": dataset})
        _difference_marks(side, [index[r] for r in differences["remedy"]], differences)
        for a in (ax, side):
            a.set_xticks(range(len(names)), [remedies.remedy_label(n) for n in names], rotation=30, ha="right")
            a.set_xlim(-0.5, len(names) - 0.5)
        ax.set_title(f"{label('dataset', dataset)}, {depth} layers")
        side.set_title(f"{remedies.model_label(runs, 'lip')} − {remedies.model_label(runs, 'none')}"
                       if len(colours) > 1 else "paired difference")
        ax.set_ylabel(f"Test {metric_name(runs)} (%)")
        side.set_ylabel("Δ (points)")
        _within_percent(ax)
    _legend(fig, runs, colours, published, not paired.empty, not diverged.empty, lines=False)
    pairs = paired.loc[paired["verdict"] != remedies.DIVERGED, "n"]
    _note(fig, f"Error bars: 95 % Student-t intervals of the mean over {_count_text(cells['n'], 'seeds')}"
               + (f"; Δ paired by seed ({_count_text(pairs, 'pairs')}), percentage points."
                  if not paired.empty else "."))
    return fig


MAD = "mean_average_distance"
LOG_MARGIN = 1.25  # y limits of the MAD panels: the plotted range, this factor beyond each end


@paper_style
def remedies_mad(runs: pd.DataFrame, layerstats: pd.DataFrame) -> Figure:
    """The mean average distance (MAD, `mean_average_distance`) of each hidden layer's
    output at each run's last logged epoch, against the layer, at each dataset's deepest
    depth: one block per dataset ("Cora, 30 layers"), one panel per remedy
    (`remedies.remedy_order`, rows of up to FACET_COLUMNS), in each two lines, GAT and
    GAT-Lip (colour `registry.AXIS_COLOURS`, GAT solid, GAT-Lip dashed).

    Log y axis: a line is the geometric mean over seeds, its band ± one std of the log
    values (the band is descriptive, not an interval; the text under the panels says so);
    a value below NORM_FLOOR is drawn there. Layer 0, the input, is left out: with all
    features missing its rows are nearly identical, and its MAD of ~1e-10 stretched the log
    axis over ten decades and flattened every hidden layer. The panels of a dataset share
    their y axis, whose limits are the plotted range (LOG_MARGIN beyond it). A setting with
    a diverged seed is not drawn (named in a footnote)."""
    runs = remedies.with_remedies(runs)
    datasets = ordered("dataset", runs["dataset"])
    deepest = runs["depth"] == runs.groupby("dataset")["depth"].transform("max")
    deep = runs.loc[deepest]
    deep.attrs = runs.attrs
    by = ["dataset", "depth", "remedy", "attention_norm"]
    kept, diverged = runs_of_valid_cells(deep, by)
    stats = stats_of(kept, layerstats.loc[layerstats["metric"] == MAD], by)
    stats = floored_stats(last_epoch_stats(stats))
    stats = stats.loc[stats["layer"] >= 1]
    names = remedies.remedy_order(runs["remedy"])
    colours = _model_colours(runs)
    nrows, ncols = facet_grid(len(names))
    fig = plt.figure(figsize=(COLUMN_WIDTH if ncols <= 2 else TEXT_WIDTH,
                              (PANEL_HEIGHT * nrows + BLOCK_TITLE_HEIGHT) * len(datasets) + 0.5),
                     layout="constrained")
    blocks = fig.subfigures(len(datasets), 1, squeeze=False)[:, 0]
    seeds = []
    for block, dataset in zip(blocks, datasets):
        depth = int(deep.loc[deep["dataset"] == dataset, "depth"].iloc[0])
        block.suptitle(f"{label('dataset', dataset)}, {depth} layers", fontsize=STYLE["axes.titlesize"],
                       fontweight="bold")
        grid = block.add_gridspec(nrows, ncols)
        first, low, high = None, np.inf, -np.inf
        for k, remedy in enumerate(names):
            row, column = divmod(k, ncols)
            ax = block.add_subplot(grid[row, column], sharex=first, sharey=first)
            if first is None:
                first = ax
                ax.set_yscale("log")
                ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=5))
            for norm, colour in colours.items():
                panel = where(stats, {"dataset": dataset, "remedy": remedy, "attention_norm": norm})
                if panel.empty:
                    continue
                logs = np.log(panel["value"].to_numpy(dtype=float))
                per_layer = panel.assign(log=logs).groupby("layer")["log"]
                mean, sd, n = per_layer.mean(), per_layer.std(ddof=1).fillna(0.0), per_layer.count()
                seeds += list(n)
                layers = mean.index.to_numpy()
                ax.plot(layers, np.exp(mean), color=colour, linestyle=ATTENTION_NORM_STYLES[norm], zorder=3)
                ax.fill_between(layers, np.exp(mean - sd), np.exp(mean + sd), color=colour,
                                alpha=BAND_ALPHA, linewidth=0, zorder=2)
                low, high = min(low, np.exp(mean - sd).min()), max(high, np.exp(mean + sd).max())
            ax.set_title(remedies.remedy_label(remedy))
            ax.set_xlabel("Layer" if k + ncols >= len(names) else "")
            ax.set_ylabel(f"{LAYER_METRICS[MAD]}, last epoch" if column == 0 else "")
        if first is not None and np.isfinite(low):
            first.set_ylim(low / LOG_MARGIN, high * LOG_MARGIN)
            first.set_xlim(stats["layer"].min() - 0.5 if not stats.empty else 0.5, depth + 0.5)
    handles = [(Line2D([], [], color=colour, linestyle=ATTENTION_NORM_STYLES[norm]),
                remedies.model_label(runs, norm)) for norm, colour in colours.items()]
    figure_legend(fig, [h for h, _ in handles], [t for _, t in handles])
    note = (f"Lines: geometric mean over {_count_text(seeds, 'seeds')}; bands: ± one std of the log "
            "values. Hidden layers 1 to the last (layer 0, the input, left out).")
    lost = ""
    if not diverged.empty:
        lost = " Not drawn, a seed diverged: " + "; ".join(
            f"{remedies.remedy_label(row['remedy'])}, {remedies.model_label(runs, row['attention_norm'])} "
            f"({label('dataset', row['dataset'])}, {row['n_diverged']}/{row['n']})"
            for _, row in diverged.iterrows())
    _note(fig, note + lost)
    return fig
