"""Every figure keeps its texts on the canvas: each figure builder (`lipnorm.results.figures`,
`lipnorm.bench.figure`), drawn with 1 to 10 legend entries of the longest labels there
are (models, α values, remedies, benchmark implementations), has every legend text,
title, axis label and drawn tick label inside the figure's bounding box."""

from __future__ import annotations

import itertools

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.text import Text
from tests.synthetic_runs import REMEDY_OFF, write_grid, write_run

from lipnorm import registry
from lipnorm.bench.figure import BENCH_PALETTE, epoch_time_vs_edges
from lipnorm.results.aggregate import aggregate_runs, label
from lipnorm.results.figures.accuracy import accuracy_vs_alpha, accuracy_vs_depth
from lipnorm.results.figures.layerstats import alpha_layerstats, layerstats_by_epoch, layerstats_by_layer
from lipnorm.results.figures.probe import lipschitz_probe
from lipnorm.results.figures.remedies import remedies_accuracy, remedies_mad
from lipnorm.results.figures.training import gradient_heatmaps, gradient_ratio, training_curves

# 1 to 10 entries, at the counts where a legend's layout changes (one entry; a row of a
# few; a wrapped second row; the most long labels): every count from 1 to 10 took ~4 min.
ENTRIES = (1, 3, 6, 10)
# The ten models of the longest labels ("GAT-Lip+BatchNorm", ...), longest first.
MODELS = sorted(registry.model_names(), key=lambda m: -len(label("model", m)))[:10]
ALPHAS = [0.25, 0.5, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0]
REMEDY_ARMS = {
    "none": {}, "batchnorm": {"norm": "batchnorm"}, "pairnorm": {"norm": "pairnorm"}, "dgn": {"norm": "dgn"},
    "dropedge": {"dropedge": 0.3}, "residual": {"residual": True}, "initial-residual": {"initial_residual": 0.1},
    "pairnorm+dropedge": {"norm": "pairnorm", "dropedge": 0.3},
    "batchnorm+initial-residual": {"norm": "batchnorm", "initial_residual": 0.1},
    "dgn+residual": {"norm": "dgn", "residual": True},
}
IMPLEMENTATIONS = list(BENCH_PALETTE)  # 9: the benchmark's every implementation


@pytest.fixture(scope="module")
def grid_tables(tmp_path_factory):
    """Accuracy, gradient and training runs: MODELS x 2 datasets x depths 2, 4 x α 1, 4, seeds 0, 1
    (one diverged: the legend's "diverged" entry)."""
    records = write_grid(
        tmp_path_factory.mktemp("grid"),
        {"model": MODELS, "dataset": ["cora", "citeseer"], "depth": [2, 4], "alpha": [1.0, 4.0]},
        diverged={(MODELS[0], "cora", 4, 1.0, 1)}, seeds=(0, 1),
    )
    return aggregate_runs([r["run_dir"] for r in records])


@pytest.fixture(scope="module")
def diagnose_tables(tmp_path_factory):
    """The diagnose grid of MODELS (two dropouts, depths 2 and 6) and GAT-Lip at ALPHAS."""
    root = tmp_path_factory.mktemp("diagnose")
    records = write_grid(root / "grid", {"model": MODELS, "depth": [2, 6], "feat_drop": [0.6, 0.0]},
                         seeds=(0,), recipe="lipnorm")
    records += write_grid(root / "alpha", {"alpha": ALPHAS}, seeds=(0,), model="gat-lip", depth=6,
                          feat_drop=0.0, recipe="lipnorm")
    return aggregate_runs([r["run_dir"] for r in records])


@pytest.fixture(scope="module")
def remedy_tables(tmp_path_factory):
    """Every remedy of REMEDY_ARMS, GAT and GAT-Lip, 2 datasets, depths 2 and 4, one seed."""
    root = tmp_path_factory.mktemp("remedies")
    records = []
    for remedy, arm in REMEDY_ARMS.items():
        for dataset, attention_norm, depth in itertools.product(["cora", "citeseer"], ["none", "lip"], [2, 4]):
            settings = {**REMEDY_OFF, **arm, "dataset": dataset, "architecture": "gat",
                        "attention_norm": attention_norm, "depth": depth, "missing_rate": 100}
            norm = settings["norm"]
            settings["model"] = "-".join(
                ["gat", *(["lip"] if attention_norm == "lip" else []), *([norm] if norm != "none" else [])])
            records.append(write_run(root / remedy / f"{dataset}_{attention_norm}_L{depth}", test_metric=0.6,
                                     val_metric=0.5 + 0.01 * depth, **settings))
    return aggregate_runs([r["run_dir"] for r in records]), list(REMEDY_ARMS)


def of_models(tables: dict, models: list[str]) -> dict:
    runs = tables["runs"].loc[tables["runs"]["model"].isin(models)]
    return {name: table.loc[table["run_dir"].isin(runs["run_dir"])] for name, table in tables.items()}


def probe_table(n: int) -> pd.DataFrame:
    return pd.DataFrame(
        [(m, s, k, s ** (i / 10) * (2 if k == "adversarial" else 1))
         for i, m in enumerate(MODELS[:n]) for s in (1, 10, 100) for k in ("random", "adversarial")],
        columns=["model", "s", "kind", "estimate"],
    )


def bench_table(n: int) -> pd.DataFrame:
    rows = []
    for impl in IMPLEMENTATIONS[:n]:
        family = "gt" if impl.startswith(("gt", "pyg-transformer")) else "gat"
        for depth, edges, r in itertools.product((2, 10), (10_000, 100_000, 1_000_000), range(3)):
            rows.append(("csbm", family, 8, 8, depth, impl, edges, r, depth * edges / 1e6 * (1 + r / 10)))
    return pd.DataFrame(rows, columns=["dataset", "family", "heads", "hidden", "depth",
                                       "implementation", "edges", "round", "value"])


def draw(figure: str, n: int, request) -> plt.Figure:
    """Figure `figure` drawn with `n` legend entries (of models, α values, remedies or
    implementations; capped at how many there are)."""
    if figure == "epoch_time_vs_edges":
        return epoch_time_vs_edges(bench_table(min(n, len(IMPLEMENTATIONS))))
    if figure == "lipschitz_probe":
        return lipschitz_probe(probe_table(n))
    if figure.startswith("remedies"):
        tables, names = request.getfixturevalue("remedy_tables")
        runs = tables["runs"].loc[tables["runs"]["run_dir"].str.contains(
            "|".join(f"/{name}/" for name in names[:n]), regex=True)]
        if figure == "remedies_accuracy":
            return remedies_accuracy(runs)
        return remedies_mad(runs, tables["layerstats"])
    if figure in ("layerstats_by_layer", "layerstats_by_epoch", "alpha_layerstats"):
        tables = request.getfixturevalue("diagnose_tables")
        runs = tables["runs"]
        if figure == "alpha_layerstats":
            runs = runs.loc[runs["alpha"].isin([1.0, *ALPHAS[:n]])]
            return alpha_layerstats(runs, tables["layerstats"])
        runs = runs.loc[runs["model"].isin(MODELS[:n])]
        return globals()[figure](runs, tables["layerstats"])
    tables = of_models(request.getfixturevalue("grid_tables"), MODELS[:n])
    runs = tables["runs"]
    if figure == "accuracy_vs_depth":
        return accuracy_vs_depth(runs.loc[runs["alpha"] == 1.0])
    if figure == "accuracy_vs_alpha":
        return accuracy_vs_alpha(runs)
    single = runs.loc[runs["alpha"] == 1.0]
    if figure == "training_curves":
        return training_curves(single, tables["epochs"])
    return globals()[figure](single, tables["gradnorms"])


FIGURE_NAMES = (
    "accuracy_vs_depth", "accuracy_vs_alpha", "gradient_heatmaps", "gradient_ratio", "training_curves",
    "lipschitz_probe", "layerstats_by_layer", "layerstats_by_epoch", "alpha_layerstats",
    "remedies_accuracy", "remedies_mad", "epoch_time_vs_edges",
)


def test_every_figure_builder_is_checked():
    """A new figure (registered by an experiment) joins FIGURE_NAMES, so it is checked too."""
    from lipnorm import experiments

    builders = {
        output.builder.rsplit(":", 1)[-1]
        for name in experiments.figures() for output in experiments.experiment(name).figures
    }
    assert builders | {"epoch_time_vs_edges"} == set(FIGURE_NAMES)


def texts_outside(fig: plt.Figure) -> list[str]:
    """Every visible, non-empty text of `fig` (legends, figure texts, titles, axis labels,
    texts in axes) and every axis's drawn tick labels whose window extent is not inside
    the figure's bounding box (1 pixel of tolerance), named with its box."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    canvas = fig.bbox
    outside = []

    def check(name: str, box) -> None:
        if (box.x0 < canvas.x0 - 1 or box.y0 < canvas.y0 - 1 or box.x1 > canvas.x1 + 1
                or box.y1 > canvas.y1 + 1):
            outside.append(f"{name}: {box.bounds} outside {canvas.bounds}")

    for text in fig.findobj(Text):
        if text.get_visible() and text.get_text() and not _is_tick_label(text):
            check(repr(text.get_text()), text.get_window_extent(renderer))
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            # The tick labels drawn (those within the view), with the axis label.
            box = axis.get_tightbbox(renderer)
            if box is not None:
                check(f"{axis.axis_name} axis of panel {ax.get_title()!r}", box)
    return outside


def _is_tick_label(text: Text) -> bool:
    """Tick labels are checked per axis (only the drawn ones have a position)."""
    return any(text in (tick.label1, tick.label2)
               for ax in text.figure.axes for axis in (ax.xaxis, ax.yaxis)
               for tick in (*axis.majorTicks, *axis.minorTicks))


@pytest.mark.parametrize("entries", ENTRIES)
@pytest.mark.parametrize("figure", FIGURE_NAMES)
def test_no_text_leaves_the_canvas(figure, entries, request):
    fig = draw(figure, entries, request)
    try:
        assert texts_outside(fig) == []
        # The panels keep a usable size (the figure grows with its legend, not the axes shrink).
        assert min(ax.get_position().height * fig.get_figheight() for ax in fig.axes) > 0.3
    finally:
        plt.close(fig)
