"""The remedies experiment's outputs from synthetic run directories: its three tables
(cell by cell against depth choices and paired differences computed here from the
values the runs were written with) and its two figures written by `lipnorm plots`
(what they draw: test_remedies_figures.py)."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from tests.synthetic_runs import REMEDY_ARMS, REMEDY_DIVERGED, REMEDY_GRID, write_remedies
from tests.results.test_tables import parse_tabular

from lipnorm.results.aggregate import aggregate_runs, write_aggregate
from lipnorm.results.figures import write_figures
from lipnorm.results.remedies import PUBLISHED, REMEDIES, remedy_label
from lipnorm.results.tables import TABLES, write_tables
from lipnorm.results.tables.latex import render
from lipnorm.results.tables.remedies import (
    difference_text,
    remedies_best,
    remedies_best_table,
    remedies_comparison,
    remedies_paired,
    remedies_paired_table,
    remedies_selection,
    remedies_selection_table,
    remedies_table,
)

DATASETS = {"cora": "Cora", "citeseer": "CiteSeer"}
MODELS = {"none": "GAT", "lip": "GAT-Lip"}
T_975_DF1 = 12.706204736174707  # Student t, 0.975 quantile, 1 degree of freedom (two seeds)


@pytest.fixture(scope="module")
def remedies_runs(tmp_path_factory):
    records = write_remedies(tmp_path_factory.mktemp("remedies"))
    return records, aggregate_runs([r["run_dir"] for r in records])


def cell_runs(records, dataset, attention_norm, remedy, depth):
    return [r for r in records if (r["dataset"], r["attention_norm"], r["remedy"], r["depth"])
            == (dataset, attention_norm, remedy, depth)]


def cell_stats(records, dataset, attention_norm, remedy, depth):
    """(mean validation metric, test metrics) %, over seeds; None where a seed diverged
    (no candidate for any rule)."""
    runs = cell_runs(records, dataset, attention_norm, remedy, depth)
    if any(r["status"] == "diverged" for r in runs):
        return None
    return np.mean([r["val_metric"] for r in runs]) * 100, np.array([r["test_metric"] for r in runs]) * 100


def selected(records, dataset, attention_norm, remedy, rule="validation"):
    """(depth, val mean, test mean, test std) %, over seeds, at the depth `rule` chooses
    among the depths where no seed diverged: validation, the best mean validation
    metric; literature, the best mean test metric (the shallower on a tie)."""
    candidates = []
    for depth in REMEDY_GRID["depth"]:
        stats = cell_stats(records, dataset, attention_norm, remedy, depth)
        if stats is not None:
            val, test = stats
            candidates.append((depth, val, test.mean(), test.std(ddof=1)))
    column = {"validation": 1, "literature": 2}[rule]
    return max(candidates, key=lambda c: (c[column], -c[0]))


def paired(records, dataset, remedy, depth_gat, depth_lip):
    """(mean, lo, hi) of GAT-Lip − GAT by seed, points, with the 95 % Student-t interval
    (two seeds: t_{0.975,1})."""
    by_seed = {norm: {r["seed"]: r["test_metric"] * 100 for r in cell_runs(records, dataset, norm, remedy, depth)}
               for norm, depth in (("none", depth_gat), ("lip", depth_lip))}
    differences = np.array([by_seed["lip"][s] - by_seed["none"][s] for s in sorted(by_seed["none"])])
    half = T_975_DF1 * differences.std(ddof=1) / np.sqrt(len(differences))
    return differences.mean(), differences.mean() - half, differences.mean() + half


def difference(mean, lo, hi):
    def signed(points):  # one decimal with its sign, two within 0.05 of 0; no -0.00
        if abs(points) < 0.05:
            return f"{round(points, 2) + 0.0:+.2f}"
        return f"{round(points, 1) + 0.0:+.1f}"

    return f"{signed(mean)} [{signed(lo)}, {signed(hi)}]"


@pytest.mark.parametrize(("args", "expected"), [
    ((3, 0, 2.0, -0.4841, 4.4841), "+2.0 [-0.5, +4.5]"),
    ((3, 0, -0.04, -0.21, 0.13), "-0.04 [-0.2, +0.1]"),  # within 0.05 of 0: two decimals
    ((3, 0, -0.001, -0.21, 0.13), "+0.00 [-0.2, +0.1]"),  # no -0.00
    ((5, 0, -0.6, -1.19, -0.01), "-0.6 [-1.2, -0.01]"),  # excludes 0, and says so
    ((1, 0, -1.25, math.nan, math.nan), "-1.2 (n=1)"),  # one pair: no interval
    ((2, 0, 1.0, 0.0, 2.0, 1), "+1.0 [+0.00, +2.0]"),
    ((2, 0, 1.0, 0.0, 2.0, 1, True), "+1.0 [+0.00, +2.0] (n=2)"),  # a seed was left unpaired
    ((2, 1, math.nan, math.nan, math.nan), "diverged (1/2)"),
    ((0, 0, math.nan, math.nan, math.nan, 3), "–"),
])
def test_difference_text(args, expected):
    assert difference_text(*args) == expected


def verdict(lo, hi):
    return "above 0" if lo > 0 else "below 0" if hi < 0 else "holds 0"


def test_remedies_writes_its_stems(remedies_runs, tmp_path):
    records, _ = remedies_runs
    write_aggregate([r["run_dir"] for r in records], tmp_path / "aggregate")
    written = write_tables("remedies", tmp_path / "aggregate", tmp_path / "tables")
    stems = ["remedies_table", "remedies_selection_table", "remedies_paired_table", "remedies_best_table"]
    assert [p.name for p in written] == [f"{stem}.tex" for stem in stems]
    assert TABLES["remedies"] == stems


def test_comparison_table_reads_against_the_paper_by_the_literatures_rule(remedies_runs):
    records, tables = remedies_runs
    text, bold = remedies_comparison(tables["runs"])
    assert list(text.index) == [remedy_label(r) for r in REMEDY_ARMS] + ["SNR (best published)"]
    heads = ("Published GAT (acc / #L)", "Ours GAT (acc ± sd / #L)", "Ours GAT-Lip (acc ± sd / #L)")
    assert list(text.columns) == [(DATASETS[d], s) for d in DATASETS for s in heads]
    for dataset in DATASETS:
        means = {}
        for remedy in REMEDY_ARMS:
            for attention_norm, model in MODELS.items():
                depth, _, mean, std = selected(records, dataset, attention_norm, remedy, "literature")
                means[remedy_label(remedy), model] = mean
                assert text.loc[remedy_label(remedy), (DATASETS[dataset], f"Ours {model} (acc ± sd / #L)")] == \
                    f"{mean:.1f} ± {std:.1f} / {depth}"
            published = PUBLISHED.get((remedy, dataset))
            assert text.loc[remedy_label(remedy), (DATASETS[dataset], heads[0])] == (
                "–" if published is None else f"{published.accuracy:.1f} / {published.depth}")
        best = max(means, key=means.get)
        for (row, model) in means:
            i = list(text.index).index(row)
            j = list(text.columns).index((DATASETS[dataset], f"Ours {model} (acc ± sd / #L)"))
            assert bold[i, j] == ((row, model) == best)
    assert not bold[:, [0, 3]].any() and not bold[-1].any()
    assert text.loc["SNR (best published)", ("Cora", heads[0])] == "77.0 ± 0.9 / 9"

    # As LaTeX: the same cells with $\pm$, no result as --, bold as \textbf; heads in LaTeX.
    head, body = parse_tabular(render(*remedies_table(tables["runs"])))
    assert head[0] == ["Dataset", "\\multicolumn{3}{c}{Cora}", "\\multicolumn{3}{c}{CiteSeer}"]
    assert head[1][1:] == ["Published GAT (acc / \\#L)", "Ours GAT (acc $\\pm$ sd / \\#L)",
                           "Ours GAT-Lip (acc $\\pm$ sd / \\#L)"] * 2
    for row, values in zip(body, text.itertuples()):
        assert row[0] == values[0]
        for printed, cell, is_bold in zip(row[1:], values[1:], bold[list(text.index).index(values[0])]):
            expected = "--" if cell == "–" else cell.replace(" ± ", " $\\pm$ ")
            assert printed == (f"\\textbf{{{expected}}}" if is_bold else expected)


DIFFERENCE_HEAD = "Δ GAT-Lip − GAT (points) [95 % interval]"


def test_selection_table_is_our_rule_with_the_paired_difference(remedies_runs):
    records, tables = remedies_runs
    text = remedies_selection(tables["runs"])
    assert list(text.index) == [(DATASETS[d], remedy_label(r)) for d in DATASETS for r in REMEDY_ARMS]
    assert list(text.columns) == ["GAT (acc ± sd / #L)", "GAT-Lip (acc ± sd / #L)", "Seeds paired",
                                  DIFFERENCE_HEAD, "Interval (uncorrected)"]
    disagree = 0
    for dataset, remedy in [(d, r) for d in DATASETS for r in REMEDY_ARMS]:
        row = text.loc[(DATASETS[dataset], remedy_label(remedy))]
        depths = {}
        for norm, model in MODELS.items():
            depth, _, mean, std = selected(records, dataset, norm, remedy)
            depths[norm] = depth
            assert row[f"{model} (acc ± sd / #L)"] == f"{mean:.1f} ± {std:.1f} / {depth}"
            disagree += depth != selected(records, dataset, norm, remedy, "literature")[0]
        mean, lo, hi = paired(records, dataset, remedy, depths["none"], depths["lip"])
        assert list(row.iloc[2:]) == ["2", difference(mean, lo, hi), verdict(lo, hi)]
    assert disagree > 0  # the synthetic runs make the two rules differ somewhere
    # The diverged seed removes depth 4 from its cell's candidates.
    dataset, norm, remedy, depth, _ = REMEDY_DIVERGED
    assert text.loc[(DATASETS[dataset], remedy_label(remedy)), f"{MODELS[norm]} (acc ± sd / #L)"].endswith("/ 2")

    head, body = parse_tabular(render(*remedies_selection_table(tables["runs"])))
    assert head[0][2:] == ["GAT (acc $\\pm$ sd / \\#L)", "GAT-Lip (acc $\\pm$ sd / \\#L)", "Seeds paired",
                           "$\\Delta$ GAT-Lip $-$ GAT (points) [95 \\% interval]", "Interval (uncorrected)"]
    assert [row[2:] for row in body] == [[cell.replace(" ± ", " $\\pm$ ") for cell in cells]
                                         for cells in text.itertuples(index=False)]


def test_best_table_is_the_configuration_of_the_best_validation_over_the_whole_grid(remedies_runs):
    """Per dataset and model, over every remedy and depth without a diverged seed: the
    best mean validation accuracy, its test accuracy, the count searched, SNR's cell."""
    records, tables = remedies_runs
    text = remedies_best(tables["runs"])
    assert list(text.index) == [(DATASETS[d], model) for d in DATASETS for model in MODELS.values()]
    assert list(text.columns) == ["Configuration (remedy / #L)", "Validation (%)", "Test (acc ± sd)", "Searched",
                                  "Published best, SNR (acc ± sd / #L)"]
    for dataset in DATASETS:
        snr = PUBLISHED[("snr", dataset)]
        for norm, model in MODELS.items():
            candidates = [
                (stats[0], -depth, -REMEDIES.index(remedy), remedy, depth, stats[1])
                for remedy in REMEDY_ARMS for depth in REMEDY_GRID["depth"]
                if (stats := cell_stats(records, dataset, norm, remedy, depth)) is not None
            ]
            val, _, _, remedy, depth, test = max(candidates, key=lambda c: c[:3])
            assert list(text.loc[(DATASETS[dataset], model)]) == [
                f"{remedy_label(remedy)} / {depth}", f"{val:.1f}", f"{test.mean():.1f} ± {test.std(ddof=1):.1f}",
                str(len(candidates)), f"{snr.accuracy:.1f} ± {snr.std:.1f} / {snr.depth}",
            ]
    head, body = parse_tabular(render(*remedies_best_table(tables["runs"])))
    assert head[0][2:] == ["Configuration (remedy / \\#L)", "Validation (\\%)", "Test (acc $\\pm$ sd)", "Searched",
                           "Published best, SNR (acc $\\pm$ sd / \\#L)"]
    assert [row[2:] for row in body] == [[cell.replace(" ± ", " $\\pm$ ") for cell in cells]
                                         for cells in text.itertuples(index=False)]


def test_paired_table_holds_the_difference_at_every_depth(remedies_runs):
    records, tables = remedies_runs
    text = remedies_paired(tables["runs"])
    assert list(text.index) == [(DATASETS[d], remedy_label(r)) for d in DATASETS for r in REMEDY_ARMS]
    assert list(text.columns) == REMEDY_GRID["depth"] and text.columns.name == "Layers"
    for dataset, remedy, depth in [(d, r, L) for d in DATASETS for r in REMEDY_ARMS for L in REMEDY_GRID["depth"]]:
        printed = text.loc[(DATASETS[dataset], remedy_label(remedy)), depth]
        if (dataset, remedy, depth) == (REMEDY_DIVERGED[0], REMEDY_DIVERGED[2], REMEDY_DIVERGED[3]):
            assert printed == "diverged (1/2)"
        else:
            assert printed == difference(*paired(records, dataset, remedy, depth, depth))
    head, body = parse_tabular(render(*remedies_paired_table(tables["runs"])))
    assert head[0] == ["", "Layers", "2", "4"]
    assert body[0][:2] == ["Cora", "nothing"] and body[0][2:] == list(text.iloc[0])


def test_tables_without_the_newer_remedy_settings_read_them_as_off(remedies_runs):
    """Runs written before `initial_residual` and `dropedge` existed have no such columns."""
    _, tables = remedies_runs
    runs = tables["runs"]
    older = runs[runs["initial_residual"].eq(0) & runs["dropedge"].eq(0)]
    assert set(older["norm"]) == {"none", "pairnorm"}
    stripped = older.drop(columns=["initial_residual", "dropedge", "residual"])
    for build in (remedies_comparison, lambda r: (remedies_selection(r), None),
                  lambda r: (remedies_paired(r), None)):
        expected, stripped_text = build(older)[0], build(stripped)[0]
        assert stripped_text.equals(expected)
    assert list(remedies_selection(stripped).index.get_level_values(1).unique()) == ["nothing", "PairNorm"]


def test_a_cell_mixing_two_settings_is_refused(remedies_runs):
    _, tables = remedies_runs
    runs = tables["runs"]
    mixed = runs.assign(lr=np.where(runs["seed"] == 0, 0.005, 0.01))
    twice = mixed.assign(seed=0)
    for build in (remedies_selection, remedies_paired):
        with pytest.raises(ValueError, match="differ in lr"):
            build(twice)


def test_write_figures_of_remedies(remedies_runs, tmp_path):
    _, tables = remedies_runs
    agg = tmp_path / "aggregate"
    agg.mkdir()
    for name in ("runs", "layerstats"):
        tables[name].to_parquet(agg / f"{name}.parquet")
    written = write_figures("remedies", agg, tmp_path / "figures")
    assert [p.name for p in written] == [f"{s}.{ext}" for s in ("remedies_accuracy", "remedies_mad")
                                         for ext in ("pdf", "png")]
    assert plt.get_fignums() == []
