"""The remedies experiment's outputs from synthetic run directories: its two tables
(cell by cell against a selection computed here from the values the runs were written
with) and its two figures (panels, lines and their data)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.collections import PathCollection
from matplotlib.colors import to_hex
from synthetic_runs import REMEDY_ARMS, REMEDY_DIVERGED, REMEDY_GRID, layer_stat, write_remedies
from test_tables import parse_tabular

from lipnorm import plots, registry
from lipnorm.aggregate import aggregate_runs, write_aggregate
from lipnorm.remedies import PUBLISHED, remedy_label
from lipnorm.tables import (
    TABLES,
    remedies_comparison,
    remedies_selection,
    remedies_table,
    render,
    write_tables,
)

DATASETS = {"cora": "Cora", "citeseer": "CiteSeer"}
MODELS = {"none": "GAT", "lip": "GAT-Lip"}


@pytest.fixture(scope="module")
def remedies_runs(tmp_path_factory):
    records = write_remedies(tmp_path_factory.mktemp("remedies"))
    return records, aggregate_runs([r["run_dir"] for r in records])


def selected(records, dataset, attention_norm, remedy):
    """(depth, val mean, test mean, test std, test-chosen depth, its test mean), % over
    seeds: the depth of the best mean validation metric (the shallower on a tie) among
    the depths where no seed diverged."""
    candidates = []
    for depth in REMEDY_GRID["depth"]:
        runs = [r for r in records if (r["dataset"], r["attention_norm"], r["remedy"], r["depth"])
                == (dataset, attention_norm, remedy, depth)]
        if any(r["status"] == "diverged" for r in runs):
            continue
        val = np.mean([r["val_metric"] for r in runs]) * 100
        test = np.array([r["test_metric"] for r in runs]) * 100
        candidates.append((depth, val, test.mean(), test.std(ddof=1)))
    by_val = max(candidates, key=lambda c: (c[1], -c[0]))
    by_test = max(candidates, key=lambda c: (c[2], -c[0]))
    return (*by_val, by_test[0], by_test[2])


def test_remedies_writes_its_stems(remedies_runs, tmp_path):
    records, _ = remedies_runs
    write_aggregate([r["run_dir"] for r in records], tmp_path / "aggregate")
    written = write_tables("remedies", tmp_path / "aggregate", tmp_path / "tables")
    assert [p.name for p in written] == ["remedies_table.tex", "remedies_selection_table.tex"]
    assert TABLES["remedies"] == ["remedies_table", "remedies_selection_table"]


def test_comparison_table_cells_and_bold(remedies_runs):
    records, tables = remedies_runs
    text, bold = remedies_comparison(tables["runs"])
    assert list(text.index) == [remedy_label(r) for r in REMEDY_ARMS] + ["SNR (best published)"]
    assert list(text.columns) == [(DATASETS[d], s) for d in DATASETS
                                  for s in ("Published GAT", "GAT", "GAT-Lip")]
    for dataset in DATASETS:
        means = {}
        for remedy in REMEDY_ARMS:
            for attention_norm, model in MODELS.items():
                depth, _, mean, std, *_ = selected(records, dataset, attention_norm, remedy)
                means[remedy_label(remedy), model] = mean
                assert text.loc[remedy_label(remedy), (DATASETS[dataset], model)] == \
                    f"{mean:.1f} ± {std:.1f} / {depth}"
            published = PUBLISHED.get((remedy, dataset))
            assert text.loc[remedy_label(remedy), (DATASETS[dataset], "Published GAT")] == (
                "–" if published is None else f"{published.accuracy:.1f} / {published.depth}")
        best = max(means, key=means.get)
        for (row, model) in means:
            i, j = list(text.index).index(row), list(text.columns).index((DATASETS[dataset], model))
            assert bold[i, j] == ((row, model) == best)
    assert not bold[:, [0, 3]].any() and not bold[-1].any()
    assert text.loc["SNR (best published)", ("Cora", "Published GAT")] == "77.0 ± 0.9 / 9"

    # As LaTeX: the same cells with $\pm$, no result as --, bold as \textbf.
    head, body = parse_tabular(render(*remedies_table(tables["runs"])))
    assert head[0] == ["Dataset", "\\multicolumn{3}{c}{Cora}", "\\multicolumn{3}{c}{CiteSeer}"]
    assert head[1][1:] == ["Published GAT", "GAT", "GAT-Lip"] * 2
    for row, values in zip(body, text.itertuples()):
        assert row[0] == values[0]
        for printed, cell, is_bold in zip(row[1:], values[1:], bold[list(text.index).index(values[0])]):
            expected = "--" if cell == "–" else cell.replace(" ± ", " $\\pm$ ")
            assert printed == (f"\\textbf{{{expected}}}" if is_bold else expected)


def test_selection_table_sets_the_test_chosen_depth_beside(remedies_runs):
    records, tables = remedies_runs
    text = remedies_selection(tables["runs"])
    expected_index = [(DATASETS[d], MODELS[n], remedy_label(r)) for d in DATASETS for n in MODELS
                      for r in REMEDY_ARMS]
    assert list(text.index) == expected_index
    optimistic = 0
    for (dataset, norm, remedy) in [(d, n, r) for d in DATASETS for n in MODELS for r in REMEDY_ARMS]:
        depth, val, test, std, test_depth, test_best = selected(records, dataset, norm, remedy)
        row = text.loc[(DATASETS[dataset], MODELS[norm], remedy_label(remedy))]
        assert list(row) == [str(depth), f"{val:.1f}", f"{test:.1f} ± {std:.1f}", str(test_depth),
                             f"{test_best:.1f}", f"{test_best - test:.1f}"]
        optimistic += test_depth != depth
    assert optimistic > 0  # the synthetic runs make the two choices differ somewhere
    # The diverged seed removes depth 4 from its cell's candidates.
    dataset, norm, remedy, depth, _ = REMEDY_DIVERGED
    row = text.loc[(DATASETS[dataset], MODELS[norm], remedy_label(remedy))]
    assert row.iloc[0] == row.iloc[3] == "2"


def test_tables_without_the_newer_remedy_settings_read_them_as_off(remedies_runs):
    """Runs written before `initial_residual` and `dropedge` existed have no such columns."""
    _, tables = remedies_runs
    runs = tables["runs"]
    older = runs[runs["initial_residual"].eq(0) & runs["dropedge"].eq(0)]
    assert set(older["norm"]) == {"none", "pairnorm"}
    stripped = older.drop(columns=["initial_residual", "dropedge", "residual"])
    for build in (remedies_comparison, lambda r: (remedies_selection(r), None)):
        expected, stripped_text = build(older)[0], build(stripped)[0]
        assert stripped_text.equals(expected)
    assert list(remedies_selection(stripped).index.get_level_values(2).unique()) == ["nothing", "PairNorm"]


def test_a_cell_mixing_two_settings_is_refused(remedies_runs):
    _, tables = remedies_runs
    runs = tables["runs"]
    mixed = runs.assign(lr=np.where(runs["seed"] == 0, 0.005, 0.01))
    twice = mixed.assign(seed=0)
    with pytest.raises(ValueError, match="differ in lr"):
        remedies_selection(twice)


def lines_of(ax):
    """Seaborn's mean lines (the ones with data), by (colour, line style)."""
    return {(to_hex(line.get_color()), line.get_linestyle()): line for line in ax.lines
            if len(line.get_xdata())}


def points(ax):
    """The scatter markers of a panel (published stars, diverged crosses), not the bands."""
    return [c for c in ax.collections if isinstance(c, PathCollection)]


def test_remedies_accuracy_panels_lines_published_star_and_diverged_cross(remedies_runs):
    records, tables = remedies_runs
    fig = plots.remedies_accuracy(tables["runs"])
    axes = np.array(fig.axes).reshape(len(REMEDY_ARMS), len(DATASETS))
    assert [ax.get_title() for ax in axes.flat] == [
        f"{remedy_label(r)}, {DATASETS[d]}" for r in REMEDY_ARMS for d in DATASETS]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["GAT", "GAT-Lip", "published GAT", "diverged"]
    styles = {"none": "-", "lip": "--"}
    for (remedy, dataset), ax in zip([(r, d) for r in REMEDY_ARMS for d in DATASETS], axes.flat):
        lines = lines_of(ax)
        assert len(lines) == 2
        for norm in MODELS:
            cell = (dataset, norm, remedy)
            depths = [d for d in REMEDY_GRID["depth"] if (*cell, d) != REMEDY_DIVERGED[:4]]
            means = [np.mean([r["test_metric"] for r in records if (r["dataset"], r["attention_norm"],
                              r["remedy"], r["depth"]) == (*cell, d)]) * 100 for d in depths]
            line = lines[registry.AXIS_COLOURS[norm], styles[norm]]
            assert list(line.get_xdata()) == depths
            assert line.get_ydata() == pytest.approx(means)
        stars = [c for c in points(ax) if to_hex(c.get_facecolor()[0]) == "#000000"]
        published = PUBLISHED.get((remedy, dataset))
        if published is None:
            assert stars == []
        else:
            (star,) = stars
            assert star.get_offsets().tolist() == [[published.depth, published.accuracy]]
    dataset, norm, remedy, depth, _ = REMEDY_DIVERGED
    panel = axes[list(REMEDY_ARMS).index(remedy), list(DATASETS).index(dataset)]
    (cross,) = [c for c in points(panel) if to_hex(c.get_facecolor()[0]) == registry.AXIS_COLOURS[norm]]
    assert sum(len(points(ax)) for ax in axes.flat) == 1 + sum(
        (r, d) in PUBLISHED for r in REMEDY_ARMS for d in DATASETS)
    assert cross.get_offsets()[:, 0].tolist() == [depth]
    plt.close(fig)


def test_remedies_mad_draws_each_remedy_and_attention_norm_at_the_deepest_depth(remedies_runs):
    records, tables = remedies_runs
    fig = plots.remedies_mad(tables["runs"], tables["layerstats"])
    axes = fig.axes
    deepest = max(REMEDY_GRID["depth"])
    assert [ax.get_title() for ax in axes] == [f"{DATASETS[d]}, {deepest} layers" for d in DATASETS]
    assert all(ax.get_yscale() == "log" for ax in axes)
    colours = plots.remedy_colours(list(REMEDY_ARMS))
    assert len(set(colours.values())) == len(REMEDY_ARMS)
    for dataset, ax in zip(DATASETS, axes):
        lines = lines_of(ax)
        drawn = [(r, n) for r in REMEDY_ARMS for n in MODELS
                 if (dataset, n, r, deepest) != REMEDY_DIVERGED[:4]]
        assert len(lines) == len(drawn)
        for remedy, norm in drawn:
            runs = [r for r in records if (r["dataset"], r["attention_norm"], r["remedy"], r["depth"])
                    == (dataset, norm, remedy, deepest)]
            # The last epoch (epochs - 1) of each run; the geometric mean over seeds.
            expected = [np.exp(np.mean([np.log(layer_stat("mean_average_distance", layer=layer,
                                                          epoch=r["epochs"] - 1, **r))
                                        for r in runs])) for layer in range(1, deepest + 1)]
            line = lines[colours[remedy], {"none": "-", "lip": "--"}[norm]]
            assert list(line.get_xdata()) == list(range(1, deepest + 1))
            np.testing.assert_allclose(line.get_ydata(), expected, rtol=1e-12)
    assert "Not drawn, a seed diverged: CiteSeer DropEdge, GAT-Lip (1/2)" in fig._supxlabel.get_text()
    plt.close(fig)


def test_write_figures_of_remedies(remedies_runs, tmp_path):
    _, tables = remedies_runs
    agg = tmp_path / "aggregate"
    agg.mkdir()
    for name in ("runs", "layerstats"):
        tables[name].to_parquet(agg / f"{name}.parquet")
    written = plots.write_figures("remedies", agg, tmp_path / "figures")
    assert [p.name for p in written] == [f"{s}.{ext}" for s in ("remedies_accuracy", "remedies_mad")
                                         for ext in ("pdf", "png")]
    assert plt.get_fignums() == []
