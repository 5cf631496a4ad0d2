"""The remedies figures as drawn (`lipnorm.results.figures.remedies`): panels, bands, error
bars and their values on small synthetic runs tables, the single-depth layout, and the
MAD figure without layer 0."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.container import ErrorbarContainer
from scipy import stats

from lipnorm import registry
from lipnorm.results.figures.remedies import (
    DEPTH_GAP,
    MODEL_OFFSET,
    consecutive_segments,
    depth_positions,
    remedies_accuracy,
    remedies_mad,
)
from lipnorm.results.remedies import remedy_label

ARMS = {"none": {}, "batchnorm": {"norm": "batchnorm"}, "pairnorm": {"norm": "pairnorm"},
        "dgn": {"norm": "dgn"}, "dropedge": {"dropedge": 0.3}, "residual": {"residual": True},
        "initial-residual": {"initial_residual": 0.1}}
LABELS = ["nothing", "BatchNorm", "PairNorm", "DGN", "DropEdge", "residual", "initial residual"]
DEPTHS = [1, 2, 3, 5, 10, 15]  # runs of consecutive depths: [1, 2, 3], [5], [10], [15]
SEEDS = (0, 1, 2)


def runs_table(arms=ARMS, depths=DEPTHS, seeds=SEEDS, datasets=("cora",)) -> pd.DataFrame:
    """One run per remedy, dataset, attention norm, depth and seed, with an accuracy that
    differs by all of them."""
    rng = np.random.default_rng(3)
    rows = []
    for remedy, arm in arms.items():
        for dataset in datasets:
            for norm in ("none", "lip"):
                for depth in depths:
                    for seed in seeds:
                        rows.append({
                            "norm": "none", "dropedge": 0.0, "residual": False, "initial_residual": 0.0, **arm,
                            "dataset": dataset, "architecture": "gat", "attention_norm": norm, "depth": depth,
                            "seed": seed, "status": "ok", "metric": "accuracy", "test_metric": 0.5,
                            "best_val_val": 0.5, "best_val_test": round(float(rng.uniform(0.3, 0.8)), 4),
                            "run_dir": f"{remedy}/{dataset}/{norm}/{depth}/{seed}"})
    return pd.DataFrame(rows)


def t_interval(values) -> tuple[float, float, float]:
    values = np.asarray(values, dtype=float)
    half = stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    return values.mean(), values.mean() - half, values.mean() + half


def accuracy(runs, remedy, norm, depth) -> list[float]:
    arm = ARMS[remedy]
    cell = runs[(runs["attention_norm"] == norm) & (runs["depth"] == depth)]
    for column, off in (("norm", "none"), ("dropedge", 0.0), ("residual", False), ("initial_residual", 0.0)):
        cell = cell[cell[column] == arm.get(column, off)]
    return (cell.sort_values("seed")["best_val_test"] * 100).tolist()


def errorbars(ax) -> list[ErrorbarContainer]:
    return [c for c in ax.containers if isinstance(c, ErrorbarContainer)]


def bands(ax) -> list[PolyCollection]:
    return [c for c in ax.collections if isinstance(c, PolyCollection)]


def test_depth_positions_space_categories_evenly_with_a_gap_where_depths_were_skipped():
    full = [*range(1, 11), 15, 20, 25, 30]
    positions = depth_positions(full)
    assert list(positions) == full
    steps = np.diff(list(positions.values()))
    assert steps.tolist() == [1.0] * 9 + [1.0 + DEPTH_GAP] * 4
    assert consecutive_segments([30, 1, 2, 3, 5, 10, 9]) == [[1, 2, 3], [5], [9, 10], [30]]


def test_accuracy_panels_bands_bars_and_paired_differences():
    runs = runs_table()
    fig = remedies_accuracy(runs)
    try:
        # Per remedy an accuracy panel and, under it, its difference panel.
        assert len(fig.axes) == 2 * len(ARMS)
        accuracy_axes, difference_axes = fig.axes[0::2], fig.axes[1::2]
        assert [ax.get_title() for ax in accuracy_axes] == LABELS
        assert all(ax.get_shared_y_axes().joined(accuracy_axes[0], ax) for ax in accuracy_axes)
        assert all(ax.get_shared_y_axes().joined(difference_axes[0], ax) for ax in difference_axes)
        assert not accuracy_axes[0].get_shared_y_axes().joined(accuracy_axes[0], difference_axes[0])
        positions = depth_positions(DEPTHS)
        below = difference_axes[0]
        assert [t.get_text() for t in below.get_xticklabels()] == [str(d) for d in DEPTHS]
        assert list(below.get_xticks()) == list(positions.values())
        colours = {registry.AXIS_COLOURS[n]: n for n in ("none", "lip")}
        for remedy, ax, below in zip(ARMS, accuracy_axes, difference_axes):
            # One band per model over depths 1-3; error bars at 5, 10 and 15 (no run neighbours).
            assert len(bands(ax)) == 2
            assert len(errorbars(ax)) == 2 * 3
            for band in bands(ax):
                norm = colours[plt.matplotlib.colors.to_hex(band.get_facecolor()[0])]
                expected = [t_interval(accuracy(runs, remedy, norm, d)) for d in (1, 2, 3)]
                vertices = band.get_paths()[0].vertices
                assert min(vertices[:, 1]) == pytest.approx(min(lo for _, lo, _ in expected))
                assert max(vertices[:, 1]) == pytest.approx(max(hi for _, _, hi in expected))
            lines = {colours[line.get_color()]: line for line in ax.get_lines()
                     if line.get_color() in colours and len(line.get_xdata()) == 3}
            for norm, line in lines.items():
                assert line.get_ydata() == pytest.approx(
                    [t_interval(accuracy(runs, remedy, norm, d))[0] for d in (1, 2, 3)])
            # Under it: the paired difference at every depth, with its interval, and the zero line.
            (difference,) = errorbars(below)
            points, _, (bars,) = difference.lines
            assert points.get_xdata().tolist() == list(positions.values())
            expected = [t_interval(np.subtract(accuracy(runs, remedy, "lip", d), accuracy(runs, remedy, "none", d)))
                        for d in DEPTHS]
            assert points.get_ydata() == pytest.approx([m for m, _, _ in expected])
            segments = bars.get_segments()
            assert [s[:, 1].min() for s in segments] == pytest.approx([lo for _, lo, _ in expected])
            assert [s[:, 1].max() for s in segments] == pytest.approx([hi for _, _, hi in expected])
            assert any(list(line.get_ydata()) == [0, 0] for line in below.get_lines())
        # The isolated points of GAT and GAT-Lip are drawn either side of their depth.
        xs = sorted(x for c in errorbars(accuracy_axes[0]) for x in c.lines[0].get_xdata())
        assert xs[0] < positions[5] < xs[1]
        note = fig._supxlabel.get_text().replace("\n", " ")
        assert "95 % Student-t intervals of the mean over n = 3 seeds" in note
        assert "(n = 3 pairs)" in note
        assert [t.get_text() for t in fig.legends[0].get_texts()][:3] == ["GAT", "GAT-Lip", "GAT-Lip − GAT, paired"]
    finally:
        plt.close(fig)


def test_accuracy_with_one_seed_draws_points_without_intervals_and_says_n():
    runs = runs_table(arms={"none": {}, "pairnorm": {"norm": "pairnorm"}}, depths=[2, 4], seeds=(0,))
    fig = remedies_accuracy(runs)
    try:
        assert len(fig.axes) == 4
        assert all(len(bands(ax)) == 0 for ax in fig.axes)
        assert "n = 1 seeds" in fig._supxlabel.get_text().replace("\n", " ")
    finally:
        plt.close(fig)


def test_a_single_depth_draws_dot_and_interval_marks_side_by_side_and_the_difference():
    arms = {"pairnorm": {"norm": "pairnorm"}, "residual": {"residual": True}}
    runs = runs_table(arms=arms, depths=[20], datasets=("cora", "citeseer"))
    fig = remedies_accuracy(runs)
    try:
        assert len(fig.axes) == 2 * 2  # per dataset: accuracy and paired difference
        ax, side = fig.axes[0], fig.axes[1]
        assert ax.get_title() == "Cora, 20 layers"
        assert fig.axes[2].get_title() == "CiteSeer, 20 layers"
        # The remedies name the ticks of the lowest row (the datasets share x).
        assert [t.get_text() for t in fig.axes[2].get_xticklabels()] == ["PairNorm", "residual"]
        marks = errorbars(ax)
        assert len(marks) == 2  # GAT and GAT-Lip, each at both remedies
        gat, lip = (c.lines[0].get_xdata() for c in marks)
        assert all(g < r < g_next for g, r, g_next in zip(gat, lip, [*gat[1:], np.inf]))
        (difference,) = errorbars(side)
        assert difference.lines[0].get_xdata().tolist() == [0, 1]
        expected = np.mean(np.subtract(accuracy(runs[runs["dataset"] == "cora"], "residual", "lip", 20),
                                       accuracy(runs[runs["dataset"] == "cora"], "residual", "none", 20)))
        assert difference.lines[0].get_ydata()[1] == pytest.approx(expected)
        assert any(list(line.get_ydata()) == [0, 0] for line in side.get_lines())
        assert "95 % Student-t intervals" in fig._supxlabel.get_text().replace("\n", " ")
    finally:
        plt.close(fig)


def test_mad_draws_two_lines_per_remedy_without_layer_0_within_the_data():
    arms = {"none": {}, "batchnorm": {"norm": "batchnorm"}, "dgn": {"norm": "dgn"}}
    runs = runs_table(arms=arms, depths=[2, 6], seeds=(0, 1))
    rows = []
    for run in runs.itertuples():
        for layer in range(run.depth + 1):
            for epoch in (0, 9):
                # Layer 0 (the input, features missing): ~1e-10; hidden layers 0.01-1.
                value = 1e-10 if layer == 0 else (0.5 if run.attention_norm == "lip" else 0.5 / 2 ** layer)
                rows.append((run.run_dir, epoch, layer, "mean_average_distance", value * (1 + run.seed / 10)))
    layerstats = pd.DataFrame(rows, columns=["run_dir", "epoch", "layer", "metric", "value"])
    fig = remedies_mad(runs, layerstats)
    try:
        assert [ax.get_title() for ax in fig.axes] == [remedy_label(r) for r in arms]
        assert fig.subfigs[0]._suptitle.get_text() == "Cora, 6 layers"
        for ax in fig.axes:
            lines = [line for line in ax.get_lines() if len(line.get_xdata())]
            assert len(lines) == 2
            assert all(list(line.get_xdata()) == [1, 2, 3, 4, 5, 6] for line in lines)
            gat = next(line for line in lines if line.get_color() == registry.AXIS_COLOURS["none"])
            expected = [np.exp(np.mean(np.log([0.5 / 2 ** layer, 0.5 / 2 ** layer * 1.1]))) for layer in range(1, 7)]
            np.testing.assert_allclose(gat.get_ydata(), expected, rtol=1e-12)
            assert ax.get_yscale() == "log"
            low, high = ax.get_ylim()
            assert 0.5 / 2 ** 6 / 2 < low < 0.5 / 2 ** 6 and 0.55 < high < 1.0
        assert "layer 0, the input, left out" in fig._supxlabel.get_text().replace("\n", " ")
    finally:
        plt.close(fig)


def test_published_stars_diverged_crosses_and_the_legend_above_the_panels(tmp_path):
    """On the synthetic remedies experiment (tests.synthetic_runs.write_remedies): the
    published GAT result of a remedy is a star at its depth, the cell and the pair with a
    diverged seed are crosses on the lower edge (no mean, no difference), and the legend
    lies inside the figure, above every panel."""
    from matplotlib.collections import PathCollection
    from matplotlib.colors import to_hex
    from tests.synthetic_runs import REMEDY_ARMS, REMEDY_DIVERGED, REMEDY_GRID, write_remedies

    from lipnorm.results.aggregate import aggregate_runs
    from lipnorm.results.remedies import PUBLISHED

    records = write_remedies(tmp_path)
    runs = aggregate_runs([r["run_dir"] for r in records])["runs"]
    fig = remedies_accuracy(runs)
    try:
        datasets = ["cora", "citeseer"]
        assert [block._suptitle.get_text() for block in fig.subfigs] == ["Cora", "CiteSeer"]
        panels = {(dataset, remedy): (block.axes[2 * k], block.axes[2 * k + 1])
                  for dataset, block in zip(datasets, fig.subfigs) for k, remedy in enumerate(REMEDY_ARMS)}
        positions = depth_positions(REMEDY_GRID["depth"])
        diverged = REMEDY_DIVERGED[:3]  # dataset, attention norm, remedy
        for (dataset, remedy), (ax, below) in panels.items():
            marks = [c for c in ax.collections if isinstance(c, PathCollection)]
            stars = [c for c in marks if to_hex(c.get_facecolor()[0]) == "#000000"]
            published = PUBLISHED.get((remedy, dataset))
            if published is None or published.depth not in positions:
                assert stars == []
            else:
                (star,) = stars
                assert star.get_offsets().tolist() == [[positions[published.depth], published.accuracy]]
            crosses = [c for c in marks if c not in stars]
            lost = [c for c in below.collections if isinstance(c, PathCollection)]
            if (dataset, remedy) == (diverged[0], diverged[2]):
                (cross,) = crosses
                assert to_hex(cross.get_facecolor()[0]) == registry.AXIS_COLOURS[diverged[1]]
                assert cross.get_offsets()[0, 0] == pytest.approx(positions[REMEDY_DIVERGED[3]] + MODEL_OFFSET)
                (pair,) = lost
                assert pair.get_offsets()[0, 0] == positions[REMEDY_DIVERGED[3]]
                (difference,) = errorbars(below)
                assert difference.lines[0].get_xdata().tolist() == [positions[2]]  # depth 4 has none
            else:
                assert crosses == [] and lost == []
        assert [t.get_text() for t in fig.legends[0].get_texts()] == [
            "GAT", "GAT-Lip", "GAT-Lip − GAT, paired", "published GAT", "diverged"]
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        box, page = fig.legends[0].get_window_extent(renderer), fig.bbox
        assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1
        assert box.y0 >= max(ax.get_tightbbox(renderer).y1 for ax in fig.axes)
    finally:
        plt.close(fig)
