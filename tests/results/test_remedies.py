"""The remedies experiment's analysis: remedy names from settings, the depth each rule
chooses (the literature's by test accuracy, ours by validation accuracy), the paired
differences GAT-Lip − GAT with their Student-t intervals, and the table beside the
published numbers."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from lipnorm.results import remedies


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
    assert row["test_best_std"] == pytest.approx(pd.Series([80.0, 82.0]).std())
    assert row["test_best_n"] == 2


def test_a_tie_in_validation_takes_the_shallower_depth():
    rows = [("cora", "none", "none", 0.0, False, 0.0, depth, 0, "ok", 0.5, test)
            for depth, test in ((10, 0.9), (5, 0.1))]
    runs = runs_frame(rows)
    chosen = remedies.select_depths(runs.assign(remedy=remedies.remedy_of(runs)))
    assert chosen["depth"].tolist() == [5]


def two_rules_runs():
    """GAT and GAT-Lip on Cora without remedy, seeds 0-2, where the rules disagree.

    GAT, depth 2: val 60/62/64 (mean 62), test 50/52/57 (mean 53, sd 3.6056);
         depth 5: val 58/60/62 (mean 60), test 70/74/72 (mean 72, sd 2).
      Ours (validation) picks 2 (test 53); the literature's (test) picks 5 (test 72).
    GAT-Lip, depth 2: val 50/50/50, test 60/60/63 (mean 61);
             depth 5: val 70/72/71 (mean 71), test 66/70/71 (mean 69, sd 2.6458).
      Both rules pick 5.
    """
    values = {
        ("none", 2): ([0.60, 0.62, 0.64], [0.50, 0.52, 0.57]),
        ("none", 5): ([0.58, 0.60, 0.62], [0.70, 0.74, 0.72]),
        ("lip", 2): ([0.50, 0.50, 0.50], [0.60, 0.60, 0.63]),
        ("lip", 5): ([0.70, 0.72, 0.71], [0.66, 0.70, 0.71]),
    }
    rows = [("cora", norm, "none", 0.0, False, 0.0, depth, seed, "ok", val[seed], test[seed])
            for (norm, depth), (val, test) in values.items() for seed in range(3)]
    return runs_frame(rows)


def test_the_two_rules_choose_different_depths_and_report_their_test_accuracy():
    runs = two_rules_runs()
    chosen = remedies.select_depths(runs.assign(remedy=remedies.remedy_of(runs)))
    ours = remedies.at_chosen_depths(chosen, "validation").set_index("attention_norm")
    literature = remedies.at_chosen_depths(chosen, "literature").set_index("attention_norm")
    assert list(ours.columns) == list(literature.columns) == ["dataset", "remedy", "depth", "test_mean",
                                                             "test_std", "n"]
    assert (ours.loc["none", "depth"], literature.loc["none", "depth"]) == (2, 5)
    assert ours.loc["none", "test_mean"] == pytest.approx(53.0)
    assert ours.loc["none", "test_std"] == pytest.approx(math.sqrt(13.0))  # deviations -3, -1, 4
    assert literature.loc["none", "test_mean"] == pytest.approx(72.0)
    assert literature.loc["none", "test_std"] == pytest.approx(2.0)  # deviations -2, 2, 0
    assert (ours.loc["lip", "depth"], literature.loc["lip", "depth"]) == (5, 5)
    assert ours.loc["lip", "test_mean"] == literature.loc["lip", "test_mean"] == pytest.approx(69.0)
    assert ours.loc["lip", "test_std"] == pytest.approx(math.sqrt(7.0))  # deviations -3, 1, 2
    assert (ours["n"] == 3).all() and (literature["n"] == 3).all()
    assert remedies.RULES["literature"] == "literature's rule (optimistic: chosen on the test set)"
    with pytest.raises(ValueError, match="unknown depth rule 'best'; known: literature, validation"):
        remedies.at_chosen_depths(chosen, "best")


def test_comparison_table_reports_the_literatures_rule_by_default():
    table = remedies.comparison_table(two_rules_runs()).iloc[0]
    assert table["cora: ours GAT"] == "72.0 ± 2.0 / 5"
    assert table["cora: ours GAT-Lip"] == f"69.0 ± {math.sqrt(7.0):.1f} / 5"
    ours = remedies.comparison_table(two_rules_runs(), rule="validation").iloc[0]
    assert ours["cora: ours GAT"] == f"53.0 ± {math.sqrt(13.0):.1f} / 2"


def test_the_best_configuration_by_validation_searches_every_remedy_and_depth():
    """Per dataset and model, over (remedy, depth): the best mean validation accuracy wins
    whatever its test accuracy; a depth with a diverged seed is no candidate; a tie goes
    to the shallower depth, then to the remedy first in REMEDIES."""
    def cell(norm, remedy_settings, depth, vals, tests, status=("ok", "ok")):
        return [("cora", norm, *remedy_settings, depth, seed, status[seed], vals[seed], tests[seed]) for seed in range(2)]

    none, batchnorm, residual = ("none", 0.0, False, 0.0), ("batchnorm", 0.0, False, 0.0), ("none", 0.0, True, 0.0)
    rows = [
        # GAT: BatchNorm at depth 5 wins on validation (mean 75) with test 60/66 (63 ± 4.24);
        # the residual at 8 has the best test (90) but a lower validation (74); nothing at
        # depth 2 would win (val 90) but a seed diverged.
        *cell("none", batchnorm, 5, [0.74, 0.76], [0.60, 0.66]),
        *cell("none", residual, 8, [0.73, 0.75], [0.90, 0.90]),
        *cell("none", none, 2, [0.90, 0.90], [0.5, math.nan], ("ok", "diverged")),
        *cell("none", none, 4, [0.50, 0.50], [0.5, 0.5]),
        # GAT-Lip: a three-way tie at 70: residual / 4, BatchNorm / 4, BatchNorm / 6 ->
        # depth 4, then BatchNorm (before the residual in REMEDIES).
        *cell("lip", residual, 4, [0.70, 0.70], [0.71, 0.73]),
        *cell("lip", batchnorm, 6, [0.70, 0.70], [0.99, 0.99]),
        *cell("lip", batchnorm, 4, [0.70, 0.70], [0.61, 0.65]),
    ]
    best = remedies.best_by_validation(runs_frame(rows)).set_index("attention_norm")
    assert list(best.columns) == ["dataset", "remedy", "depth", "val_mean", "test_mean", "test_std", "n", "candidates"]
    gat, lip = best.loc["none"], best.loc["lip"]
    assert (gat["remedy"], gat["depth"], gat["n"], gat["candidates"]) == ("batchnorm", 5, 2, 3)
    assert gat["val_mean"] == pytest.approx(75.0)
    assert gat["test_mean"] == pytest.approx(63.0)
    assert gat["test_std"] == pytest.approx(math.sqrt(18.0))  # deviations -3, 3
    assert (lip["remedy"], lip["depth"], lip["candidates"]) == ("batchnorm", 4, 3)
    assert lip["test_mean"] == pytest.approx(63.0)


# --- paired differences ---------------------------------------------------------------

T_975 = {1: 12.706204736174707, 2: 4.302652729749464, 4: 2.7764451051977987, 29: 2.045229642132703}


@pytest.mark.parametrize("df", sorted(T_975))
def test_t_quantile_matches_the_tables(df):
    assert remedies.t_quantile(0.975, df) == pytest.approx(T_975[df], rel=1e-12)
    assert remedies.t_quantile(0.025, df) == pytest.approx(-T_975[df], rel=1e-12)
    assert remedies.t_quantile(0.5, df) == pytest.approx(0.0, abs=1e-15)


@pytest.mark.parametrize(("probability", "df", "message"), [
    (1.0, 2, "probability 1.0 must lie in \\(0, 1\\)"),
    (0.975, 0, "0 degrees of freedom; at least 1"),
])
def test_t_quantile_refuses_what_has_no_quantile(probability, df, message):
    with pytest.raises(ValueError, match=message):
        remedies.t_quantile(probability, df)


def test_student_t_interval_by_hand():
    # Differences 1, 3, 2: mean 2, sd 1 (deviations -1, 1, 0: sum of squares 2, over n-1 = 2),
    # half-width t_{0.975,2} * 1 / sqrt(3) = 4.302652729749464 / 1.7320508075688772 = 2.484137711750...
    mean, sd, lo, hi = remedies.student_t_interval([1.0, 3.0, 2.0])
    assert (mean, sd) == (pytest.approx(2.0), pytest.approx(1.0))
    assert lo == pytest.approx(2.0 - 2.4841377117503, rel=1e-12)
    assert hi == pytest.approx(2.0 + 2.4841377117503, rel=1e-12)
    # 90 %: t_{0.95,2} = 2.919985580355516, half-width 1.685854...
    _, _, lo, hi = remedies.student_t_interval([1.0, 3.0, 2.0], confidence=0.90)
    assert (lo, hi) == (pytest.approx(2.0 - 1.6858545), pytest.approx(2.0 + 1.6858545))
    one = remedies.student_t_interval([4.0])
    assert one[0] == 4.0 and all(math.isnan(v) for v in one[1:])
    assert all(math.isnan(v) for v in remedies.student_t_interval([]))
    with pytest.raises(ValueError, match="confidence 95 must lie in \\(0, 1\\)"):
        remedies.student_t_interval([1.0, 2.0], confidence=95)


@pytest.mark.parametrize(("lo", "hi", "expected"), [
    (0.5, 4.0, "above 0"),
    (-4.0, -0.5, "below 0"),
    (-0.5, 4.0, "holds 0"),
    (0.0, 4.0, "holds 0"),  # touching 0 is not above it
    (math.nan, math.nan, "holds 0"),  # one pair: no interval
])
def test_verdict_words(lo, hi, expected):
    assert remedies.verdict(lo, hi) == expected


def paired_runs():
    """Cora without remedy, test accuracy per (attention norm, depth): seed -> accuracy.

    Depth 2: GAT-Lip - GAT = 1, 3, 2 on seeds 0-2; GAT's seed 3 has no GAT-Lip partner.
    Depth 4: 10, 11, 12 (above 0). Depth 6: -10, -11, -12 (below 0).
    Depth 8: GAT-Lip's seed 1 diverged. Depth 10: one pair only.
    """
    tests = {
        ("none", 2): {0: 0.50, 1: 0.60, 2: 0.70, 3: 0.40}, ("lip", 2): {0: 0.51, 1: 0.63, 2: 0.72},
        ("none", 4): {0: 0.50, 1: 0.50, 2: 0.50}, ("lip", 4): {0: 0.60, 1: 0.61, 2: 0.62},
        ("none", 6): {0: 0.60, 1: 0.61, 2: 0.62}, ("lip", 6): {0: 0.50, 1: 0.50, 2: 0.50},
        ("none", 8): {0: 0.50, 1: 0.50}, ("lip", 8): {0: 0.60, 1: math.nan},
        ("none", 10): {0: 0.50}, ("lip", 10): {0: 0.55},
    }
    rows = [("cora", norm, "none", 0.0, False, 0.0, depth, seed,
             "diverged" if math.isnan(test) else "ok", 0.5, test)
            for (norm, depth), by_seed in tests.items() for seed, test in by_seed.items()]
    return runs_frame(rows)


def test_paired_differences_by_hand():
    table = remedies.paired_differences(paired_runs()).set_index("depth")
    assert list(table.columns) == ["dataset", "remedy", "n", "n_unpaired", "n_diverged", "mean", "sd", "lo",
                                   "hi", "verdict"]
    assert list(table.index) == [2, 4, 6, 8, 10]
    two = table.loc[2]
    # Seed 3 of GAT has no partner: left out, and counted.
    assert (two["n"], two["n_unpaired"], two["n_diverged"]) == (3, 1, 0)
    assert (two["mean"], two["sd"]) == (pytest.approx(2.0), pytest.approx(1.0))
    assert (two["lo"], two["hi"]) == (pytest.approx(-0.4841377117503), pytest.approx(4.4841377117503))
    assert two["verdict"] == "holds 0"
    assert table.loc[4, "mean"] == pytest.approx(11.0)
    assert (table.loc[4, "lo"], table.loc[4, "hi"]) == (pytest.approx(8.5158622882497), pytest.approx(13.4841377117503))
    assert table.loc[4, "verdict"] == "above 0"
    assert table.loc[6, "mean"] == pytest.approx(-11.0) and table.loc[6, "verdict"] == "below 0"
    # A pair with a diverged run: no difference at that depth (not the survivors' alone).
    eight = table.loc[8]
    assert (eight["n"], eight["n_diverged"], eight["verdict"]) == (2, 1, "diverged")
    assert math.isnan(eight["mean"]) and math.isnan(eight["lo"])
    ten = table.loc[10]
    assert (ten["n"], ten["mean"]) == (1, pytest.approx(5.0))
    assert math.isnan(ten["lo"]) and ten["verdict"] == "holds 0"


def test_paired_difference_at_each_models_chosen_depth():
    # Ours picks GAT at 2 (test 50, 52, 57) and GAT-Lip at 5 (66, 70, 71): differences
    # 16, 18, 14: mean 16, sd 2, half-width 4.302652729749464 * 2 / sqrt(3) = 4.968275...
    (row,) = remedies.paired_at_chosen_depths(two_rules_runs()).to_dict("records")
    assert (row["depth_gat"], row["depth_lip"], row["n"], row["n_unpaired"]) == (2, 5, 3, 0)
    assert (row["mean"], row["sd"]) == (pytest.approx(16.0), pytest.approx(2.0))
    assert (row["lo"], row["hi"]) == (pytest.approx(16.0 - 4.9682754235006), pytest.approx(16.0 + 4.9682754235006))
    assert row["verdict"] == "above 0"
    # The literature's rule picks 5 for both: differences -4, -4, -1: mean -3.
    (row,) = remedies.paired_at_chosen_depths(two_rules_runs(), rule="literature").to_dict("records")
    assert (row["depth_gat"], row["depth_lip"], row["mean"]) == (5, 5, pytest.approx(-3.0))
    assert row["verdict"] == "holds 0"


def test_paired_at_chosen_depths_drops_an_unpaired_seed():
    runs = two_rules_runs()
    runs = runs[~((runs["attention_norm"] == "lip") & (runs["seed"] == 2))]
    (row,) = remedies.paired_at_chosen_depths(runs).to_dict("records")
    # GAT-Lip seeds 0, 1 only (depth 5 still: val 70, 72): differences 16, 18.
    assert (row["depth_lip"], row["n"], row["n_unpaired"]) == (5, 2, 1)
    assert row["mean"] == pytest.approx(17.0)


def test_a_seed_twice_in_one_arm_is_refused():
    runs = paired_runs()
    twice = pd.concat([runs, runs.iloc[[0]]])
    with pytest.raises(ValueError, match="seed 0 occurs twice among the runs of GAT at cora, none, depth 2"):
        remedies.paired_differences(twice)


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
