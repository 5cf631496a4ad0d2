"""The remedies experiment's analysis: remedy names from settings, the best depth chosen by
validation (not test) accuracy, and the table beside the published numbers."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from lipnorm import remedies


def runs_frame(rows):
    columns = ["dataset", "attention_norm", "norm", "dropedge", "residual", "initial_residual", "depth", "seed",
               "status", "best_val_val", "best_val_test"]
    return pd.DataFrame(rows, columns=columns)


@pytest.mark.parametrize(("settings", "expected"), [
    ({"norm": "none"}, "none"),
    ({"norm": "batchnorm"}, "batchnorm"),
    ({"norm": "dgn", "dropedge": 0.0}, "dgn"),
    ({"norm": "none", "dropedge": 0.3}, "dropedge"),
    ({"norm": "none", "residual": True}, "residual"),
    ({"norm": "none", "initial_residual": 0.1}, "initial-residual"),
    ({"norm": "pairnorm", "residual": True}, "pairnorm+residual"),
    ({}, "none"),  # settings a run directory predates are off
])
def test_remedy_of_reads_the_settings(settings, expected):
    assert remedies.remedy_of(pd.DataFrame([settings])).tolist() == [expected]


def test_remedy_labels_join_the_parts():
    assert remedies.remedy_label("initial-residual") == "initial residual"
    assert remedies.remedy_label("pairnorm+residual") == "PairNorm + residual"
    assert remedies.remedy_label("mynorm") == "mynorm"


def test_the_depth_is_chosen_by_validation_and_its_test_accuracy_reported():
    # Depth 2: val 0.70/0.72 (mean 71), test 0.60/0.64; depth 5: val 0.69/0.71 (70), test
    # 0.80/0.82 (81): validation picks 2 (test 62), test would pick 5 (81).
    rows = [
        ("cora", "lip", "none", 0.0, False, 0.0, 2, 0, "ok", 0.70, 0.60),
        ("cora", "lip", "none", 0.0, False, 0.0, 2, 1, "ok", 0.72, 0.64),
        ("cora", "lip", "none", 0.0, False, 0.0, 5, 0, "ok", 0.69, 0.80),
        ("cora", "lip", "none", 0.0, False, 0.0, 5, 1, "ok", 0.71, 0.82),
        # Depth 10 would win on validation, but a seed diverged: not a candidate.
        ("cora", "lip", "none", 0.0, False, 0.0, 10, 0, "ok", 0.90, 0.90),
        ("cora", "lip", "none", 0.0, False, 0.0, 10, 1, "diverged", math.nan, math.nan),
    ]
    runs = runs_frame(rows)
    chosen = remedies.select_depths(runs.assign(remedy=remedies.remedy_of(runs)))
    assert len(chosen) == 1
    row = chosen.iloc[0]
    assert (row["depth"], row["test_depth"], row["depths"], row["n"]) == (2, 5, 2, 2)
    assert row["val_mean"] == pytest.approx(71.0)
    assert row["test_mean"] == pytest.approx(62.0)
    assert row["test_std"] == pytest.approx(pd.Series([60.0, 64.0]).std())
    assert row["test_best_mean"] == pytest.approx(81.0)


def test_a_tie_in_validation_takes_the_shallower_depth():
    rows = [("cora", "none", "none", 0.0, False, 0.0, depth, 0, "ok", 0.5, test)
            for depth, test in ((10, 0.9), (5, 0.1))]
    runs = runs_frame(rows)
    chosen = remedies.select_depths(runs.assign(remedy=remedies.remedy_of(runs)))
    assert chosen["depth"].tolist() == [5]


def test_comparison_table_sets_ours_beside_the_published_numbers():
    rows = []
    for attention_norm, val, test in (("none", 0.70, 0.71), ("lip", 0.75, 0.74)):
        for seed, shift in ((0, 0.0), (1, 0.02)):
            rows.append(("cora", attention_norm, "pairnorm", 0.0, False, 0.0, 10, seed, "ok", val, test + shift))
            rows.append(("cora", attention_norm, "none", 0.3, False, 0.0, 5, seed, "ok", val, test + shift))
    table = remedies.comparison_table(runs_frame(rows))
    assert list(table.columns) == ["remedy", "cora: published GAT", "cora: ours GAT", "cora: ours GAT-Lip"]
    assert table["remedy"].tolist() == ["PairNorm", "DropEdge", "SNR (best published)"]
    pairnorm = table.iloc[0]
    assert pairnorm["cora: published GAT"] == "68.8 / 8"
    std = pd.Series([71.0, 73.0]).std()
    assert pairnorm["cora: ours GAT"] == f"72.0 ± {std:.1f} / 10"
    assert pairnorm["cora: ours GAT-Lip"] == f"75.0 ± {std:.1f} / 10"
    assert table.iloc[1]["cora: published GAT"] == "67.2 / 6"
    assert table.iloc[2]["cora: published GAT"] == "77.0 ± 0.9 / 9" and table.iloc[2]["cora: ours GAT"] == "–"


def test_published_numbers_are_the_issues_table():
    table = {key: (entry.accuracy, entry.depth) for key, entry in remedies.PUBLISHED.items()}
    assert table[("none", "cora")] == (50.1, 2) and table[("dgn", "citeseer")] == (54.5, 5)
    assert table[("residual", "citeseer")] == (57.9, 4) and remedies.PUBLISHED[("residual", "citeseer")].std == 2.8
    assert {remedy for remedy, _ in remedies.PUBLISHED} == {*remedies.REMEDIES[:-1], "snr"}
