"""`lipnorm.results.compare`: the exact sign-flip test against hand enumerations, the
t-interval against scipy, Holm against a hand-computed family, the pairing rules, the
input checks, and the published literature grid's figures quoted in issue 49."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from lipnorm.results import compare
from lipnorm.results.compare import (
    HELPS, HURTS, NO_EFFECT, PRIMARY_DEPTHS, chance_summary, compare_arms, holm, min_sign_flip_p,
    primary_analysis, primary_depths, sign_flip_test, t_interval, t_test_p, verdict,
)

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "docs" / "results"


# --- the exact sign-flip test ------------------------------------------------------------

def test_sign_flip_matches_the_eight_assignments_written_out():
    # values 1, 2, 3: observed |sum| 6. The 8 sign assignments and their |sums|:
    # +++ 6, ++- 0, +-+ 2, +-- 4, -++ 4, -+- 2, --+ 0, --- 6 -> 2 of 8 reach 6.
    assert sign_flip_test([1.0, 2.0, 3.0]) == pytest.approx(2 / 8)
    # values 1, 2, -3: observed |sum| 0: every assignment reaches it.
    assert sign_flip_test([1.0, 2.0, -3.0]) == 1.0
    # values 1, -2, 4: observed |sum| 3; the |sums| of the 8 assignments, by enumeration:
    sums = [abs(s1 * 1 + s2 * -2 + s3 * 4) for s1 in (1, -1) for s2 in (1, -1) for s3 in (1, -1)]
    assert sorted(sums) == [1, 1, 3, 3, 5, 5, 7, 7]
    assert sign_flip_test([1.0, -2.0, 4.0]) == pytest.approx(6 / 8)


def test_sign_flip_matches_a_brute_force_enumeration():
    rng = np.random.default_rng(0)
    for n in (2, 4, 7):
        values = rng.normal(0.3, 1.0, n)
        observed = abs(values.mean())
        brute = np.mean([abs((np.array(signs) * values).mean()) >= observed - 1e-12
                         for signs in np.array(np.meshgrid(*[[1, -1]] * n)).T.reshape(-1, n)])
        assert sign_flip_test(values) == pytest.approx(brute)


def test_sign_flip_counts_ties_from_rounding_as_ties():
    # 0.1 + 0.2 and 0.3 differ in float; the assignment (0.1, 0.2, -0.3) against
    # (-0.1, -0.2, 0.3) must tie with the observed 0 exactly.
    assert sign_flip_test([0.1, 0.2, -0.3]) == 1.0


def test_sign_flip_enumerates_past_one_chunk():
    values = np.arange(1.0, 19.0)  # 18 values: 2^18 assignments, two bits past a chunk
    assert sign_flip_test(values) == pytest.approx(2 / 2 ** 18)


@pytest.mark.parametrize("n, expected", [(2, 0.5), (3, 0.25), (5, 0.0625), (10, 0.001953125)])
def test_the_minimum_attainable_p_value_is_two_over_two_to_the_n(n, expected):
    assert min_sign_flip_p(n) == expected
    # reached when every difference has the same sign
    assert sign_flip_test(np.linspace(1.0, 2.0, n)) == pytest.approx(expected)


def test_five_seeds_can_never_pass_holm_over_fourteen_pairs_and_ten_can():
    best_five = min_sign_flip_p(5)
    assert best_five > 0.05  # not even uncorrected
    assert holm([best_five] * 14).min() == pytest.approx(0.875)  # 14 × 0.0625
    best_ten = min_sign_flip_p(10)
    assert 14 * best_ten == pytest.approx(0.02734375)
    assert holm([best_ten] + [0.5] * 13)[0] <= 0.05
    # but only when all 10 seeds agree in sign: the next attainable p, 4/1024, fails
    # the first Holm step 0.05 / 14
    assert 4 / 1024 > 0.05 / 14


def test_sign_flip_refuses_bad_inputs():
    with pytest.raises(ValueError, match="at least 2 seeds"):
        sign_flip_test([1.0])
    with pytest.raises(ValueError, match="finite"):
        sign_flip_test([1.0, np.nan])
    with pytest.raises(ValueError, match="exact enumeration stops"):
        sign_flip_test(np.ones(compare.MAX_EXACT_SEEDS + 1))


# --- the t-interval, the t-test and Holm -------------------------------------------------

def test_t_interval_equals_scipy():
    values = [0.5, -0.2, 1.3, 0.9, 0.1, 2.0]
    mean, sd, lo, hi = t_interval(values, 0.95)
    expected = stats.t.interval(0.95, len(values) - 1, loc=np.mean(values), scale=stats.sem(values))
    assert (lo, hi) == pytest.approx(expected)
    assert mean == pytest.approx(np.mean(values))
    assert sd == pytest.approx(np.std(values, ddof=1))
    _, _, lo90, hi90 = t_interval(values, 0.90)
    assert lo < lo90 < hi90 < hi
    assert t_test_p(values) == pytest.approx(stats.ttest_1samp(values, 0).pvalue)
    assert t_test_p([2.0, 2.0 + 1e-15, 2.0]) == 0.0 and t_test_p([0.0, 0.0]) == 1.0
    with pytest.raises(ValueError, match="at least 2 seeds"):
        t_interval([1.0])
    with pytest.raises(ValueError, match="confidence"):
        t_interval([1.0, 2.0], 95)


def test_holm_against_a_hand_computed_family():
    # sorted p: 0.01, 0.02, 0.03, 0.04 with m = 4:
    #   4 × 0.01 = 0.04; 3 × 0.02 = 0.06; 2 × 0.03 = 0.06; 1 × 0.04 = 0.04 -> max so far 0.06
    p = [0.03, 0.01, 0.04, 0.02]
    assert holm(p) == pytest.approx([0.06, 0.04, 0.06, 0.06])
    # capped at 1, monotone, NaN left out of m
    assert holm([0.5, 0.6, np.nan]) == pytest.approx([1.0, 1.0, np.nan], nan_ok=True)
    assert holm([0.001, 0.2]) == pytest.approx([0.002, 0.2])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm([1.5])


def test_holm_over_a_family_with_tests_not_yet_run():
    # m = 6 with two p-values given: the four absent count as p = 1, ranked last:
    #   6 × 0.001 = 0.006; 5 × 0.02 = 0.1
    assert holm([0.02, 0.001], family_size=6) == pytest.approx([0.1, 0.006])
    # the same as writing the absent tests out at p = 1
    assert holm([0.02, 0.001], family_size=6) == pytest.approx(holm([0.02, 0.001, 1, 1, 1, 1])[:2])
    with pytest.raises(ValueError, match="family_size 1 is below the 2 p-values given"):
        holm([0.02, 0.001], family_size=1)


def test_verdict_reads_the_adjusted_p_and_the_sign():
    assert verdict(1.0, 0.01) == HELPS
    assert verdict(-1.0, 0.05) == HURTS
    assert verdict(1.0, 0.06) == NO_EFFECT
    assert verdict(1.0, float("nan")) == NO_EFFECT


# --- pairing -----------------------------------------------------------------------------

def grid(differences: dict, base: float = 0.5) -> pd.DataFrame:
    """Runs of arms "A" and "B": `differences` maps (seed, depth) -> B − A."""
    rows = []
    for (seed, depth), delta in differences.items():
        rows.append({"arm": "A", "seed": seed, "depth": depth, "acc": base + 0.01 * seed})
        rows.append({"arm": "B", "seed": seed, "depth": depth, "acc": base + 0.01 * seed + delta})
    return pd.DataFrame(rows)


def test_pairs_seed_with_seed_at_the_same_block_and_averages_over_blocks():
    runs = grid({(0, 1): 1.0, (0, 2): 3.0, (1, 1): 2.0, (1, 2): 2.0, (2, 1): -1.0, (2, 2): 5.0})
    result = compare_arms(runs, "arm", "A", "B", "acc")
    per_seed = result.per_seed.set_index("seed")["difference"]
    assert per_seed.to_dict() == pytest.approx({0: 2.0, 1: 2.0, 2: 2.0})
    test = result.tests.iloc[0]
    assert (test["n_seeds"], test["n_pairs"], test["n_unpaired"], test["n_absent"]) == (3, 6, 0, 0)
    assert test["p_exact"] == pytest.approx(2 / 8)
    assert test["mean"] == pytest.approx(2.0) and test["sd"] == pytest.approx(0.0)
    blocks = result.per_block.set_index("block")
    assert blocks.loc[1, "mean"] == pytest.approx(2 / 3) and blocks.loc[2, "mean"] == pytest.approx(10 / 3)
    # scale multiplies every difference
    scaled = compare_arms(runs, "arm", "A", "B", "acc", scale=100.0)
    assert scaled.tests.iloc[0]["mean"] == pytest.approx(200.0)


def test_a_pair_missing_in_one_arm_is_left_out_and_counted():
    runs = grid({(s, d): 1.0 + s for s in range(3) for d in (1, 2, 3)})
    # seed 0 loses B at depth 2, seed 1 loses A at depth 3; seed 2 has no depth 1 at all
    drop = (((runs["arm"] == "B") & (runs["seed"] == 0) & (runs["depth"] == 2))
            | ((runs["arm"] == "A") & (runs["seed"] == 1) & (runs["depth"] == 3))
            | ((runs["seed"] == 2) & (runs["depth"] == 1)))
    result = compare_arms(runs[~drop], "arm", "A", "B", "acc", blocks=[1, 2, 3])
    test = result.tests.iloc[0]
    assert (test["n_pairs"], test["n_unpaired"], test["n_absent"]) == (6, 2, 1)
    assert result.per_seed.set_index("seed")["n_blocks"].to_dict() == {0: 2, 1: 2, 2: 2}
    # a NaN metric is an absent run
    runs = grid({(s, 1): 1.0 for s in range(3)})
    runs.loc[(runs["arm"] == "A") & (runs["seed"] == 0), "acc"] = np.nan
    test = compare_arms(runs, "arm", "A", "B", "acc").tests.iloc[0]
    assert (test["n_seeds"], test["n_unpaired"]) == (2, 1)


def test_fixed_blocks_ignore_others_and_may_depend_on_the_group():
    runs = pd.concat([grid({(s, d): (1.0 if d <= 2 else 4.0) for s in range(3) for d in (1, 2, 3, 4)})
                      .assign(kind=kind) for kind in ("plain", "skip")])
    result = compare_arms(runs, "arm", "A", "B", "acc", groups=["kind"],
                          blocks=lambda g: [1, 2, 3, 4] if g["kind"] == "plain" else [3, 4])
    means = result.tests.set_index("kind")["mean"]
    assert means["plain"] == pytest.approx(2.5) and means["skip"] == pytest.approx(4.0)
    only_low = compare_arms(runs, "arm", "A", "B", "acc", groups=["kind"], blocks=[1, 2])
    assert only_low.tests["mean"].tolist() == pytest.approx([1.0, 1.0])
    # a fixed block nobody ran is absent for every seed
    test = compare_arms(runs, "arm", "A", "B", "acc", groups=["kind"], blocks=[1, 99]).tests.iloc[0]
    assert (test["n_pairs"], test["n_absent"]) == (3, 3)


def test_groups_form_the_family_holm_adjusts_over():
    rows = []
    for g, shift in (("x", 1.0), ("y", 0.0), ("z", -1.0)):
        rows.append(grid({(s, 1): shift + 0.1 * s for s in range(6)}).assign(g=g))
    result = compare_arms(pd.concat(rows), "arm", "A", "B", "acc", groups=["g"])
    tests = result.tests.set_index("g")
    assert tests["p_holm"].tolist() == pytest.approx(holm(tests["p_exact"]).tolist())
    assert tests.loc["x", "p_exact"] == pytest.approx(2 / 64)
    assert tests.loc["x", "p_holm"] == pytest.approx(3 * 2 / 64)
    assert tests.loc["x", "verdict"] == NO_EFFECT  # 0.094 > 0.05 after Holm over 3
    assert (tests["min_p"] == 2 / 64).all()
    alone = compare_arms(pd.concat(rows), "arm", "A", "B", "acc", groups=["g"], alpha=0.1)
    assert alone.tests.set_index("g").loc[["x", "z"], "verdict"].tolist() == [HELPS, HURTS]


def test_match_columns_pair_within_a_setting():
    a = grid({(s, 1): 1.0 for s in range(3)}).assign(split=0)
    b = grid({(s, 1): 3.0 for s in range(3)}).assign(split=1)
    result = compare_arms(pd.concat([a, b]), "arm", "A", "B", "acc", match=["split"])
    assert result.tests.iloc[0]["mean"] == pytest.approx(2.0)
    assert result.per_seed["n_blocks"].tolist() == [2, 2, 2]
    with pytest.raises(ValueError, match="several runs"):
        compare_arms(pd.concat([a, b]), "arm", "A", "B", "acc")


def test_chance_summary_counts_the_intervals_excluding_zero():
    per_block = pd.DataFrame({"lo": [0.1, -1.0, -2.0, np.nan], "hi": [1.0, 1.0, -0.5, np.nan]})
    summary = chance_summary(per_block)
    assert summary == {"intervals": 3, "excluding": 2, "above": 1, "below": 1,
                       "expected": pytest.approx(0.15)}


@pytest.mark.parametrize("call, message", [
    (dict(axis="nope"), "unknown axis column 'nope'"),
    (dict(metric="nope"), "unknown metric column 'nope'"),
    (dict(groups=["nope"]), "unknown group column 'nope'"),
    (dict(block="nope"), "unknown block column 'nope'"),
    (dict(b="C"), "arm B 'C' is absent from column 'arm'"),
    (dict(b="A"), "both 'A'"),
    (dict(groups=["seed"]), "distinct columns"),
    (dict(confidence=95), "confidence"),
])
def test_bad_inputs_are_named(call, message):
    runs = grid({(s, 1): 1.0 for s in range(3)})
    arguments = {"axis": "arm", "a": "A", "b": "B", "metric": "acc", **call}
    with pytest.raises(ValueError, match=message):
        compare_arms(runs, **arguments)


def test_fewer_than_two_seeds_and_an_arm_absent_from_a_group_are_refused():
    runs = grid({(0, 1): 1.0, (0, 2): 1.0})
    with pytest.raises(ValueError, match="1 seed"):
        compare_arms(runs, "arm", "A", "B", "acc")
    two = pd.concat([grid({(s, 1): 1.0 for s in range(3)}).assign(g="x"),
                     grid({(s, 1): 1.0 for s in range(3)}).assign(g="y")])
    two = two[~((two["g"] == "y") & (two["arm"] == "B"))]
    with pytest.raises(ValueError, match="arm B 'B' has no run in g='y'"):
        compare_arms(two, "arm", "A", "B", "acc", groups=["g"])


# --- the published literature grid (issue 49's figures) ---------------------------------

def literature_runs() -> pd.DataFrame:
    """Cora's and CiteSeer's literature grid, the three published folders of each merged."""
    parts = [RESULTS / f"literature-{dataset}{part}" / "remedies" / "runs.csv"
             for dataset in ("cora", "citeseer") for part in ("", "-more", "-deep")]
    missing = [str(p.relative_to(REPO)) for p in parts if not p.is_file()]
    if missing:
        pytest.skip(f"published runs absent: {missing}")
    return pd.concat([pd.read_csv(p) for p in parts], ignore_index=True)


@pytest.fixture(scope="module")
def literature():
    from lipnorm.results.remedies import remedy_of

    runs = literature_runs()
    return runs.assign(remedy=remedy_of(runs))


def test_the_published_grid_is_the_whole_depth_grid_with_five_seeds(literature):
    assert sorted(literature["depth"].unique()) == list(PRIMARY_DEPTHS)
    assert sorted(literature["seed"].unique()) == [0, 1, 2, 3, 4]
    assert len(literature) == 2 * 7 * 2 * 14 * 5


def test_issue_49_figures_over_the_fourteen_depths(literature):
    """Issue 49: per seed the mean over the 14 depths of GAT-Lip − GAT; BatchNorm +10.7
    [+7.5, +13.9] on Cora and +6.6 [+5.3, +8.0] on CiteSeer, Holm p 0.010 and 0.002;
    PairNorm +5.2 and +2.4, Holm p 0.14 and 0.08; every other arm within ±1.2. The
    issue's Holm p-values are those of the t-test (`p_t_holm`); the exact test's cannot go
    under 0.0625 with 5 seeds, so after Holm nothing passes."""
    result = compare_arms(literature, "attention_norm", "none", "lip", "best_val_test",
                          groups=["dataset", "remedy"], blocks=PRIMARY_DEPTHS, scale=100.0)
    tests = result.tests.set_index(["dataset", "remedy"])
    assert len(tests) == 14 and (tests["n_pairs"] == 70).all() and (tests["n_unpaired"] == 0).all()
    bn_cora, bn_citeseer = tests.loc[("cora", "batchnorm")], tests.loc[("citeseer", "batchnorm")]
    assert [round(bn_cora[c], 1) for c in ("mean", "lo", "hi")] == [10.7, 7.5, 13.9]
    assert [round(bn_citeseer[c], 1) for c in ("mean", "lo", "hi")] == [6.6, 5.3, 8.0]
    assert round(bn_cora["p_t_holm"], 3) == 0.010 and round(bn_citeseer["p_t_holm"], 3) == 0.002
    pn_cora, pn_citeseer = tests.loc[("cora", "pairnorm")], tests.loc[("citeseer", "pairnorm")]
    assert round(pn_cora["mean"], 1) == 5.2 and round(pn_citeseer["mean"], 1) == 2.4
    assert round(pn_cora["p_t_holm"], 2) == 0.14 and round(pn_citeseer["p_t_holm"], 2) == 0.08
    others = tests.drop(index=[("cora", "batchnorm"), ("citeseer", "batchnorm"),
                               ("cora", "pairnorm"), ("citeseer", "pairnorm")])
    assert others["mean"].abs().max() <= 1.2
    # the exact test: 5 seeds all of one sign reach 0.0625 at best; Holm over 14 -> 0.875
    assert (tests["min_p"] == 0.0625).all()
    assert tests.loc[("cora", "batchnorm"), "p_exact"] == 0.0625
    assert tests["p_holm"].min() == pytest.approx(14 * 0.0625)
    assert (tests["verdict"] == NO_EFFECT).all()


def test_issue_49_count_of_per_depth_intervals_excluding_zero(literature):
    """Issue 49: 13 per-depth intervals exclude 0 (9 for, 4 against), about 9.4 expected
    at 95 %, once the residual arms' depths <= 2 (the plain network) are not counted
    twice: 188 distinct intervals here (the issue says 187), 0.05 × 188 = 9.4."""
    result = primary_analysis(literature)
    summary = result.chance()
    assert (summary["intervals"], summary["excluding"], summary["above"], summary["below"]) == (188, 13, 9, 4)
    assert summary["expected"] == pytest.approx(9.4)
    against = result.per_block[result.per_block["hi"] < 0].set_index(["dataset", "remedy", "block"])
    # CiteSeer depth 2 of plain GAT, −0.6 [−1.19, −0.01], against LipschitzNorm
    cell = against.loc[("citeseer", "none", 2)]
    assert (round(cell["mean"], 1), round(cell["lo"], 2), round(cell["hi"], 2)) == (-0.6, -1.19, -0.01)


def test_the_primary_analysis_leaves_the_residual_arms_plain_depths_out(literature):
    assert primary_depths("residual") == primary_depths("initial-residual") == tuple(PRIMARY_DEPTHS[2:])
    assert primary_depths("batchnorm") == PRIMARY_DEPTHS
    # their runs at depths 1 and 2 are the plain network's, run for run
    plain = literature[literature["depth"] <= 2]
    table = plain.pivot_table(index=["dataset", "attention_norm", "depth", "seed"], columns="remedy",
                              values="best_val_test")
    assert (table["residual"] == table["none"]).all() and (table["initial-residual"] == table["none"]).all()
    tests = primary_analysis(literature).tests.set_index(["dataset", "remedy"])
    assert tests.loc[("cora", "residual"), "n_pairs"] == 60
    assert tests.loc[("cora", "batchnorm"), "n_pairs"] == 70
    assert math.isclose(tests.loc[("cora", "batchnorm"), "mean"], 10.706, abs_tol=1e-3)


def published_runs(dataset: str) -> list[str]:
    folders = [f"literature-{dataset}", f"literature-{dataset}-more", f"literature-{dataset}-deep"]
    return [str(REPO / "docs" / "results" / folder / "remedies" / "runs.csv") for folder in folders]


def test_lipnorm_compare_primary_prints_the_plans_test(capsys, tmp_path):
    from lipnorm import cli

    out = tmp_path / "tests.csv"
    assert cli.main(["compare", *published_runs("cora"), *published_runs("citeseer"), "--primary", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "per-block intervals (description, not a test): intervals 188, excluding 13, above 9, below 4" in printed
    tests = pd.read_csv(out)
    batchnorm = tests[(tests["dataset"] == "cora") & (tests["remedy"] == "batchnorm")].iloc[0]
    assert round(batchnorm["mean"], 1) == 10.7 and batchnorm["p_exact"] == 0.0625 and len(tests) == 14


def test_lipnorm_compare_any_axis(capsys):
    from lipnorm import cli

    argv = ["compare", *published_runs("cora"), "--axis", "attention_norm", "--a", "none", "--b", "lip",
            "--groups", "norm,residual,initial_residual,dropedge", "--blocks", "1-10,15,20,25,30", "--scale", "100"]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "batchnorm" in printed and "n_seeds" in printed


@pytest.mark.parametrize(
    "extra, message",
    [
        ([], "give --axis, --a, --b (or --primary, or --secondary)"),
        (["--secondary"], "lies in no folder of the secondary family (dropedge-secondary-authors, "),
        (["--axis", "attention_norm", "--a", "none", "--b", "lip", "--blocks", "1-x"], "--blocks '1-x': give integers"),
        (["--axis", "colour", "--a", "none", "--b", "lip"], "compare: unknown axis column 'colour'"),
    ],
)
def test_lipnorm_compare_refuses_bad_arguments_naming_them(capsys, extra, message):
    from lipnorm import cli

    with pytest.raises(SystemExit) as refused:
        cli.main(["compare", published_runs("cora")[0], *extra])
    assert refused.value.code == 2 and message in capsys.readouterr().err


# --- the secondary family ------------------------------------------------------------------

def secondary_part(protocol_depths, seeds=range(10), lip_gain=0.0, val=None, datasets=("cora",)):
    """A published-like runs table: GAT and GAT-Lip at `protocol_depths`, GAT-Lip better by
    `lip_gain` (+ 0.001 per seed, so the per-seed means differ); `val(attention_norm, depth)`
    gives the validation accuracy (default 0.5)."""
    rows = []
    for dataset in datasets:
        for depth in protocol_depths:
            for seed in seeds:
                for norm, gain in (("none", 0.0), ("lip", lip_gain + 0.001 * seed)):
                    rows.append({"dataset": dataset, "depth": depth, "seed": seed, "attention_norm": norm,
                                 "best_val_test": 0.6 + gain, "best_val_val": val(norm, depth) if val else 0.5})
    return pd.DataFrame(rows)


def test_the_secondary_family_tests_each_protocol_at_its_depths_holm_over_six():
    from lipnorm.results.compare import SNR_DEPTHS, secondary_analysis

    tables = {"dropedge-secondary-authors": secondary_part(PRIMARY_DEPTHS + (40,), lip_gain=0.02),
              "snr-secondary-lr0.01": secondary_part(SNR_DEPTHS + (3,), lip_gain=-0.01),
              "snr-secondary-lr0.001": secondary_part(SNR_DEPTHS + (3,), lip_gain=-0.01)}
    result = secondary_analysis(tables)
    tests = result.tests.set_index(["protocol", "dataset"])
    assert list(tests.index) == [("dropedge-authors", "cora"), ("snr", "cora")]
    # depth 40 and SNR's depth 3 are outside the fixed sets: 14 and 8 depths per seed
    assert tests["n_pairs"].tolist() == [140, 80]
    # per seed s the mean is 100 × (gain + 0.001 s): mean over seeds 0-9 adds 0.45 points
    assert tests.loc[("dropedge-authors", "cora"), "mean"] == pytest.approx(2.45)
    assert tests.loc[("snr", "cora"), "mean"] == pytest.approx(-0.55)
    # every seed of one sign: 2 / 2^10; Holm with m = 6 (4 pairs not run count as p = 1)
    assert tests["p_exact"].tolist() == pytest.approx([2 / 2 ** 10] * 2)
    assert tests["p_holm"].tolist() == pytest.approx([6 * 2 / 2 ** 10, 6 * 2 / 2 ** 10])
    assert tests["verdict"].tolist() == [HELPS, HURTS]
    assert result.settings["family_size"] == 6 and result.settings["held_back"] == {}


def test_snrs_learning_rate_is_chosen_by_validation_per_depth_and_arm():
    from lipnorm.results.compare import SNR_DEPTHS, secondary_runs

    # GAT validates best at lr 0.01 except at depth 30, GAT-Lip at lr 0.001 everywhere;
    # at depth 2 GAT's two rates tie, so the smaller (0.001) is taken.
    def fast(norm, depth):
        return 0.5 if depth == 2 else 0.7 if norm == "none" and depth != 30 else 0.4

    def slow(norm, depth):
        return 0.5 if depth == 2 else 0.6

    runs, held = secondary_runs({"snr-secondary-lr0.01": secondary_part(SNR_DEPTHS, val=fast),
                                 "snr-secondary-lr0.001": secondary_part(SNR_DEPTHS, val=slow)})
    assert held == {}
    chosen = {key: tuple(sorted(v)) for key, v in runs.groupby(["attention_norm", "depth"])["lr"].unique().items()}
    assert chosen == {**{("lip", d): (0.001,) for d in SNR_DEPTHS},
                      **{("none", d): (0.001,) if d in (2, 30) else (0.01,) for d in SNR_DEPTHS}}
    assert len(runs) == 2 * len(SNR_DEPTHS) * 10  # one learning rate per (arm, depth), 10 seeds
    # The test set is never read by the choice: test accuracies that favour the other
    # rate change nothing.
    flipped = secondary_part(SNR_DEPTHS, val=slow)
    flipped["best_val_test"] = 0.99
    again, _ = secondary_runs({"snr-secondary-lr0.01": secondary_part(SNR_DEPTHS, val=fast),
                               "snr-secondary-lr0.001": flipped})
    assert {key: tuple(sorted(v)) for key, v in again.groupby(["attention_norm", "depth"])["lr"].unique().items()} == chosen


def test_a_pair_whose_learning_rate_sweep_is_incomplete_is_held_back_as_not_yet_run():
    from lipnorm.results.compare import SNR_DEPTHS, secondary_analysis, secondary_runs

    # Cora's sweep lacks, at lr 0.001, GAT-Lip at depth 30 and GAT's seed 9 at depth 4;
    # CiteSeer has lr 0.01 only. A choice by validation among the rates present would be
    # a choice among fewer rates than the plan's, so neither pair is tested.
    slow = secondary_part(SNR_DEPTHS, lip_gain=0.02)
    slow = slow[~((slow["depth"] == 30) & (slow["attention_norm"] == "lip"))
                & ~((slow["depth"] == 4) & (slow["attention_norm"] == "none") & (slow["seed"] == 9))]
    tables = {"snr-secondary-lr0.01": secondary_part(SNR_DEPTHS, lip_gain=0.02, datasets=("cora", "citeseer")),
              "snr-secondary-lr0.001": slow,
              "dropedge-secondary-authors": secondary_part(PRIMARY_DEPTHS, lip_gain=0.02)}
    runs, held = secondary_runs(tables)
    assert held == {("snr", "citeseer"): "lr 0.001: no runs",
                    ("snr", "cora"): "lr 0.001: depth(s) 4, 30 without both arms at all 10 seeds"}
    assert set(runs["protocol"]) == {"dropedge-authors"}
    result = secondary_analysis(tables)
    assert list(zip(result.tests["protocol"], result.tests["dataset"])) == [("dropedge-authors", "cora")]
    # held back counts as not yet run: Holm over 6 with one p-value present
    assert result.tests["p_holm"].tolist() == pytest.approx([6 * 2 / 2 ** 10])
    assert result.settings["held_back"] == {"snr, citeseer": "lr 0.001: no runs",
                                            "snr, cora": "lr 0.001: depth(s) 4, 30 without both arms at all 10 seeds"}
    with pytest.raises(ValueError, match=r"no complete pair to test; held back: snr, cora: lr 0.001: no runs"):
        secondary_analysis({"snr-secondary-lr0.01": secondary_part(SNR_DEPTHS)})


def test_the_secondary_family_refuses_a_part_it_does_not_have():
    from lipnorm.results.compare import secondary_runs

    with pytest.raises(ValueError, match="unknown part.s. 'dropedge-authors'; allowed: dropedge-secondary-authors"):
        secondary_runs({"dropedge-authors": secondary_part((1,))})
    with pytest.raises(ValueError, match="no runs table given"):
        secondary_runs({})


def test_lipnorm_compare_secondary_reads_each_tables_protocol_from_its_folder(capsys, tmp_path):
    from lipnorm import cli
    from lipnorm.results.compare import SNR_DEPTHS

    paths = []
    for part, gain in (("dropedge-secondary-authors", 0.02), ("dropedge-secondary-decorr", 0.0)):
        path = tmp_path / part / "remedies" / "runs.csv"
        path.parent.mkdir(parents=True)
        runs = secondary_part(PRIMARY_DEPTHS, lip_gain=gain, datasets=("cora", "citeseer"))
        runs.to_csv(path, index=False)
        paths.append(str(path))
    snr = tmp_path / "snr-secondary-lr0.01" / "remedies" / "runs.csv"  # one rate of SNR's sweep only
    snr.parent.mkdir(parents=True)
    secondary_part(SNR_DEPTHS).to_csv(snr, index=False)
    paths.append(str(snr))
    report = tmp_path / "secondary"
    assert cli.main(["compare", *paths, "--secondary", "--report", str(report)]) == 0
    tests = pd.read_csv(report / "tests.csv")
    assert sorted(zip(tests["protocol"], tests["dataset"])) == [
        ("dropedge-authors", "citeseer"), ("dropedge-authors", "cora"),
        ("dropedge-decorr", "citeseer"), ("dropedge-decorr", "cora")]
    text = (report / "comparison.md").read_text()
    assert "Holm over the 6 at 0.05 (2 of them not yet run, each counted at p = 1)" in text
    assert ("Held back until their sweep is complete (counted as not yet run): snr, cora (lr 0.001: no runs)."
            in text)
    assert "held back, its sweep not complete (counted as not yet run): snr, cora: lr 0.001: no runs" in capsys.readouterr().out
    assert "lipnorm compare " in text and " --secondary --report " in text
    with pytest.raises(SystemExit) as refused:
        cli.main(["compare", paths[0], paths[0], "--secondary"])
    assert refused.value.code == 2 and "two runs tables of the part 'dropedge-secondary-authors'" in capsys.readouterr().err
