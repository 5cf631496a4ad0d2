"""Figures of an experiment's aggregate, as `<stem>.pdf` and `<stem>.png`.

Sized for a two-column paper (one column is COLUMN_WIDTH inches, fonts 7-8 pt); one
colour per model in every figure (PALETTE). Bands are mean ± sample std over seeds
(seaborn's `errorbar="sd"`); on a log axis seaborn takes them in log space, i.e.
geometric mean and std. A setting in which any seed diverged is not drawn as a point
(its mean would average only the survivors) but as a × on the panel's lower edge.
"""

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
from matplotlib.cm import ScalarMappable  # noqa: E402
from matplotlib.colors import LogNorm  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter  # noqa: E402

from lipnorm.aggregate import (  # noqa: E402
    EXPERIMENTS,
    label,
    load_table,
    ordered,
    runs_of_valid_cells,
    seed_cells,
)
from lipnorm.io import atomic_path  # noqa: E402

FIGURES: dict[str, list[str]] = {
    "depth": ["depth_accuracy"],
    "gradients": ["gradient_heatmaps", "gradient_ratio", "training_curves"],
    "alpha": ["alpha_accuracy"],
    "transformer": ["transformer_accuracy"],
    "lipschitz": ["lipschitz_probe"],
    "classic": [],
}

# seaborn's colour-blind palette; a Lipschitz variant sits next to its baseline.
PALETTE = {
    "gat": "#0173b2",
    "gat-lip": "#de8f05",
    "gat-pairnorm": "#029e73",
    "gat-lip-pairnorm": "#d55e00",
    "gt": "#cc78bc",
    "gt-lip": "#ca9161",
    "gat-classic": "#949494",
}
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
# Norms below float32's smallest normal number are rounding noise, not a measurement;
# flooring them keeps the max/min ratio finite.
NORM_FLOOR = float(np.finfo(np.float32).tiny)
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


def _figure(nrows: int, ncols: int) -> tuple[Figure, np.ndarray]:
    width = COLUMN_WIDTH if ncols <= 2 else TEXT_WIDTH
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(width, PANEL_HEIGHT * nrows + 0.4), squeeze=False,
        layout="constrained",
    )
    return fig, axes


def _legend(fig: Figure, models: list[str], diverged: bool) -> None:
    """One legend for the figure, naming the models as the paper does."""
    handles = [Line2D([], [], color=PALETTE[m], marker="o") for m in models]
    labels = [label("model", m) for m in models]
    if diverged:
        handles.append(Line2D([], [], color="black", marker="x", linestyle="none"))
        labels.append("diverged")
    fig.legend(handles, labels, loc="outside upper center", ncols=min(len(labels), 4),
               frameon=False)


def _metric_name(runs: pd.DataFrame) -> str:
    names = {"accuracy": "accuracy", "ogb-accuracy": "accuracy", "micro-f1": "micro-F1"}
    return " / ".join(sorted({names[m] for m in runs["metric"]}))


def _depth_axis(ax) -> None:
    """Depth grids are roughly even (1, 2, 5, 10, ..., 30): linear, integer ticks."""
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _model_lines(ax, kept: pd.DataFrame, diverged: pd.DataFrame, x: str, y: str,
                 models: list[str]) -> None:
    """Mean ± std over seeds per model; diverged settings as × on the lower edge."""
    if not kept.empty:
        sns.lineplot(data=kept, x=x, y=y, hue="model", hue_order=models, palette=PALETTE,
                     errorbar="sd", marker="o", ax=ax, legend=False)
    for model, cells in diverged.groupby("model"):
        ax.scatter(cells[x], np.full(len(cells), 0.03), marker="x", color=PALETTE[model],
                   transform=ax.get_xaxis_transform(), clip_on=False, zorder=3)


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


def _layer_norms(gradnorms: pd.DataFrame, kinds: tuple[str, ...]) -> pd.DataFrame:
    """Norm of all of a layer's parameters per run and epoch (group `all`; the
    `kinds` parts of one layer index combine as the root of the sum of squares)."""
    rows = gradnorms[(gradnorms["group"] == "all") & gradnorms["kind"].isin(kinds)]
    squared = rows.assign(sq=rows["grad_norm"].astype(float) ** 2)
    norms = squared.groupby(["run_dir", "epoch", "layer"], as_index=False)["sq"].sum()
    return norms.assign(grad_norm=np.sqrt(norms.pop("sq")))


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
    norms = _layer_norms(gradnorms[gradnorms["run_dir"].isin(ok["run_dir"])],
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


def gradient_ratios(gradnorms: pd.DataFrame) -> pd.Series:
    """Per run: the median over logged epochs of max/min over attention layers of the
    layer's gradient norm (group `all`); norms are floored at NORM_FLOOR."""
    norms = _layer_norms(gradnorms, ("attention",))
    floored = norms["grad_norm"].clip(lower=NORM_FLOOR)
    per_epoch = floored.groupby([norms["run_dir"], norms["epoch"]])
    ratio = per_epoch.max() / per_epoch.min()
    return ratio.groupby(level="run_dir").median().rename("grad_ratio")


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
                         palette=PALETTE, errorbar="sd", ax=ax, legend=False)
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
                     hue_order=models, palette=PALETTE, errorbar="sd", marker="o", ax=ax,
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
    "gat": PALETTE["gat"],
    "gat-lip": PALETTE["gat-lip"],
    "gat-lip-official": "#fbafe4",
    "dgl-gat": "#029e73",
    "pyg-gat": "#949494",
    "gt": PALETTE["gt"],
    "gt-lip": PALETTE["gt-lip"],
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


def _builders(load: Callable[[str], pd.DataFrame]) -> dict[str, Callable[[], Figure]]:
    return {
        "depth_accuracy": lambda: accuracy_vs_depth(load("runs")),
        "transformer_accuracy": lambda: accuracy_vs_depth(load("runs")),
        "gradient_heatmaps": lambda: gradient_heatmaps(load("runs"), load("gradnorms")),
        "gradient_ratio": lambda: gradient_ratio(load("runs"), load("gradnorms")),
        "training_curves": lambda: training_curves(load("runs"), load("epochs")),
        "alpha_accuracy": lambda: accuracy_vs_alpha(load("runs")),
        "lipschitz_probe": lambda: lipschitz_probe(load("probe")),
    }


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
    """Write the PDF and PNG of each stem in FIGURES[experiment]."""
    if experiment not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {experiment!r}; known: {', '.join(EXPERIMENTS)}")
    builders = _builders(functools.cache(functools.partial(load_table, aggregate_dir)))
    written = []
    for stem in FIGURES[experiment]:
        written += save_figure(builders[stem](), Path(out_dir) / stem)
    return written
