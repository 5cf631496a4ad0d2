"""A paired comparison of two arms of any experiment: "does B do better than A?", with
one pre-registered test per comparison (docs/results/analysis-plan.md).

The input is a runs table (one row per run, as `lipnorm aggregate` writes `runs`): a
column holds the A/B axis (e.g. `attention_norm`, none vs lip), a metric column the
outcome (e.g. `best_val_test`), a seed column and a block column (e.g. `depth`) over
whose fixed values the effect is averaged. Optional `groups` columns split the table
into comparisons tested together as one family (e.g. `dataset` and `remedy`), and
`match` columns must also agree within a pair (e.g. a split or a setting that varies
inside a group).

For each comparison (`compare_arms`):

1. **Pairs.** Run s of B at block k is paired with run s of A at block k (the same
   group and `match` values). A pair present in one arm only is left out and counted
   (`n_unpaired`); a fixed block that neither arm ran for a seed is counted too
   (`n_absent`). A run whose metric is NaN counts as absent from its arm.
2. **Per seed**, the mean over its pairs (the blocks) of B − A, times `scale` (100 for
   accuracies in percentage points). These per-seed means are the unit of the test:
   the blocks of one seed share its data, so they are not independent replicates.
3. **The exact sign-flip permutation test** of their mean (`sign_flip_test`): under
   the null hypothesis that A and B are exchangeable within a seed, every per-seed mean
   is as likely to have either sign; all 2^n sign assignments are enumerated and the
   two-sided p-value is the share whose |mean| is at least the observed one. It can go
   no lower than 2 / 2^n (`min_sign_flip_p`): 0.0625 with 5 seeds, 0.00195 with 10.
4. **A Student-t interval** of the mean of the per-seed means (`t_interval`), and the
   one-sample t-test's p-value for reference (not the primary test).
5. **Holm's step-down adjustment** (`holm`) of the exact p-values over every comparison
   of the family, at family-wise level `alpha`; the verdict (`verdict`) reads the
   adjusted p-value and the sign of the mean.

Beside the test, `per_block` gives each block's paired differences over seeds with its
own Student-t interval, as description only, and `chance_summary` counts the intervals
excluding 0 beside the number expected by chance ((1 − confidence) × their number).

Pure pandas, numpy and scipy; no plotting library.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

CONFIDENCE = 0.95
ALPHA = 0.05
# 2^20 sign assignments of 20 values: about 170 MB of float64 at once, so they are
# enumerated in chunks; past this the exact test is refused (use fewer seeds, or a
# Monte Carlo test, which this module does not offer).
MAX_EXACT_SEEDS = 24
_CHUNK_BITS = 16
# Relative tolerance of "|mean| >= observed": sums of the same values in another order
# differ by rounding, and a tie must count as a tie.
_TIE_RTOL = 1e-9

HELPS, HURTS, NO_EFFECT = "helps", "hurts", "no measurable effect"
VERDICTS = (HELPS, HURTS, NO_EFFECT)

TEST_COLUMNS = [
    "n_seeds", "n_pairs", "n_unpaired", "n_absent", "mean", "sd", "lo", "hi",
    "p_exact", "p_holm", "p_t", "p_t_holm", "min_p", "verdict",
]
PER_SEED_COLUMNS = ["seed", "difference", "n_blocks"]
PER_BLOCK_COLUMNS = ["block", "n", "mean", "sd", "lo", "hi", "excludes_zero"]


# --- the statistics ---------------------------------------------------------------------

def min_sign_flip_p(n: int) -> float:
    """The smallest two-sided p-value the exact sign-flip test can give with `n` values.

    Parameters
    ----------
    n : int
        Number of paired units (seeds), at least 1.

    Returns
    -------
    float
        ``2 / 2**n``: the observed assignment and its mirror image are always at least as
        extreme as the observation.
    """
    if n < 1:
        raise ValueError(f"min_sign_flip_p: n = {n}; at least one value is needed")
    return 2.0 / 2.0 ** n


def sign_flip_test(values) -> float:
    """Exact two-sided sign-flip permutation test of mean(values) = 0.

    Every one of the 2^n assignments of signs to the n values is enumerated; the p-value
    is the share of assignments whose |mean| is at least the observed |mean| (ties within
    a relative 1e-9 count as at least; the identity and its mirror always do, so p >=
    2 / 2^n).

    Parameters
    ----------
    values : array_like
        The n paired differences (here: per-seed means of B − A), finite.

    Returns
    -------
    float
        The exact two-sided p-value.

    Raises
    ------
    ValueError
        With fewer than 2 values, more than MAX_EXACT_SEEDS, or a non-finite value.
    """
    values = np.asarray(values, dtype=float).ravel()
    n = len(values)
    if n < 2:
        raise ValueError(f"sign-flip test: {n} value(s); at least 2 seeds are needed")
    if n > MAX_EXACT_SEEDS:
        raise ValueError(f"sign-flip test: {n} values; the exact enumeration stops at {MAX_EXACT_SEEDS}")
    if not np.all(np.isfinite(values)):
        raise ValueError("sign-flip test: the values must be finite (a NaN difference is a missing pair)")
    observed = abs(values.sum())
    threshold = observed - _TIE_RTOL * max(observed, np.abs(values).sum(), 1e-300)
    # Enumerate in chunks: the high bits select a fixed prefix of signs, the low bits
    # range over every assignment of the rest.
    low = min(n, _CHUNK_BITS)
    high = n - low
    codes = np.arange(2 ** low, dtype=np.int64)[:, None]
    low_signs = 1.0 - 2.0 * ((codes >> np.arange(low)) & 1)
    low_sums = low_signs @ values[:low]
    count = 0
    for prefix in range(2 ** high):
        high_signs = 1.0 - 2.0 * ((prefix >> np.arange(high)) & 1)
        total = low_sums + float(high_signs @ values[low:]) if high else low_sums
        count += int(np.count_nonzero(np.abs(total) >= threshold))
    return count / 2.0 ** n


def t_interval(values, confidence: float = CONFIDENCE) -> tuple[float, float, float, float]:
    """Mean, sample sd and the two-sided Student-t interval of the mean of `values`.

    Parameters
    ----------
    values : array_like
        At least 2 finite values.
    confidence : float
        Coverage of the interval, in (0, 1).

    Returns
    -------
    tuple of float
        ``(mean, sd, lo, hi)``: sd with ddof = 1, [lo, hi] = mean ± t_{(1+c)/2, n−1} ·
        sd / √n (equal to ``scipy.stats.t.interval``).
    """
    from scipy import stats

    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence {confidence} must lie in (0, 1), e.g. 0.95")
    values = np.asarray(values, dtype=float).ravel()
    if len(values) < 2:
        raise ValueError(f"t interval: {len(values)} value(s); at least 2 seeds are needed")
    mean = float(values.mean())
    sd = float(values.std(ddof=1))
    half = float(stats.t.ppf(0.5 + confidence / 2.0, len(values) - 1)) * sd / math.sqrt(len(values))
    return mean, sd, mean - half, mean + half


def t_test_p(values) -> float:
    """Two-sided one-sample Student t-test p-value of mean(values) = 0 (scipy's
    `ttest_1samp`); for values equal to rounding (sd <= 1e-12 of the largest |value|),
    1 where they are all 0 and 0 otherwise (no spread to estimate)."""
    from scipy import stats

    values = np.asarray(values, dtype=float).ravel()
    if len(values) < 2:
        raise ValueError(f"t test: {len(values)} value(s); at least 2 seeds are needed")
    spread = float(values.std(ddof=1))
    if spread <= 1e-12 * float(np.abs(values).max(initial=0.0)) or spread == 0.0:
        return 0.0 if float(np.abs(values).max()) > 0 else 1.0
    return float(stats.ttest_1samp(values, 0.0).pvalue)


def holm(p_values, family_size: int | None = None) -> np.ndarray:
    """Holm's step-down adjusted p-values of one family of tests.

    The p-values are sorted ascending, p_(1) <= ... <= p_(m); the adjusted value of the
    i-th is max_{j <= i} min(1, (m − j + 1) · p_(j)), returned in the input's order.
    Rejecting where the adjusted value is <= alpha controls the family-wise error rate at
    alpha. NaN p-values are left NaN and not counted in m.

    Parameters
    ----------
    p_values : array_like
        The family's unadjusted p-values, in [0, 1].
    family_size : int, optional
        m, where the family has tests not given (not yet run): each counts as p = 1,
        ranked last, so it changes no adjusted value but through m. It cannot be below
        the number of p-values given. Default: that number.

    Returns
    -------
    numpy.ndarray
        The adjusted p-values, same order and length.
    """
    p = np.asarray(p_values, dtype=float).ravel()
    finite = ~np.isnan(p)
    if np.any((p[finite] < 0) | (p[finite] > 1)):
        raise ValueError(f"holm: p-values must lie in [0, 1], got {p[finite].tolist()}")
    adjusted = np.full(p.shape, np.nan)
    index = np.flatnonzero(finite)
    order = index[np.argsort(p[index], kind="stable")]
    m = len(order) if family_size is None else family_size
    if m < len(order):
        raise ValueError(f"holm: family_size {family_size} is below the {len(order)} p-values given")
    running = 0.0
    for rank, k in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[k]))
        adjusted[k] = running
    return adjusted


def verdict(mean: float, p_adjusted: float, alpha: float = ALPHA) -> str:
    """HELPS (B better) where the adjusted p-value is <= alpha and the mean of B − A is
    above 0, HURTS where it is <= alpha and the mean is below 0, NO_EFFECT otherwise.
    For a metric where lower is better, "helps" reads as "B is higher": say so."""
    if not math.isnan(p_adjusted) and p_adjusted <= alpha and mean != 0:
        return HELPS if mean > 0 else HURTS
    return NO_EFFECT


# --- the comparison ----------------------------------------------------------------------

@dataclass(frozen=True)
class Comparison:
    """What `compare_arms` returns.

    Attributes
    ----------
    tests : pandas.DataFrame
        One row per comparison (group): the `groups` columns, then TEST_COLUMNS —
        `n_seeds` (per-seed means tested), `n_pairs` (pairs used), `n_unpaired` (runs of
        one arm without partner, left out), `n_absent` (fixed (seed, block) slots neither
        arm ran), `mean`, `sd`, `lo`, `hi` (Student-t interval) of the per-seed means,
        `p_exact` (sign-flip), `p_holm` (Holm over the family), `p_t` and `p_t_holm`
        (t-test, for reference), `min_p` (2 / 2^n_seeds) and `verdict`.
    per_seed : pandas.DataFrame
        The `groups` columns, `seed`, `difference` (mean over its pairs of B − A, times
        scale) and `n_blocks` (pairs averaged).
    per_block : pandas.DataFrame
        The `groups` columns, `block`, `n` (pairs), `mean`, `sd`, `lo`, `hi` (NaN for
        fewer than 2 pairs) and `excludes_zero`; description, not a test.
    settings : dict
        The arguments that define the comparison (axis, arms, metric, ...).
    """

    tests: pd.DataFrame
    per_seed: pd.DataFrame
    per_block: pd.DataFrame
    settings: dict

    def chance(self) -> dict:
        """`chance_summary` of `per_block`."""
        return chance_summary(self.per_block, self.settings["confidence"])


def _check_columns(runs: pd.DataFrame, named: Mapping[str, Iterable[str]]) -> None:
    for role, columns in named.items():
        for column in columns:
            if column not in runs.columns:
                raise ValueError(f"compare: unknown {role} column {column!r}; the runs have "
                                 f"{', '.join(map(str, runs.columns))}")


def _as_tuple(key) -> tuple:
    return key if isinstance(key, tuple) else (key,)


def compare_arms(
    runs: pd.DataFrame,
    axis: str,
    a,
    b,
    metric: str,
    *,
    groups: Sequence[str] = (),
    seed: str = "seed",
    block: str = "depth",
    blocks: Sequence | Callable[[dict], Sequence] | None = None,
    match: Sequence[str] = (),
    scale: float = 1.0,
    confidence: float = CONFIDENCE,
    alpha: float = ALPHA,
    family_size: int | None = None,
) -> Comparison:
    """Paired comparison of arm `b` against arm `a` of `runs` (B − A), one test per group.

    Parameters
    ----------
    runs : pandas.DataFrame
        One row per run.
    axis : str
        The column holding the A/B axis (e.g. ``"attention_norm"``).
    a : object
        The value of `axis` of the reference arm A (e.g. ``"none"``).
    b : object
        The value of `axis` of the tested arm B (e.g. ``"lip"``). Rows with other values
        of `axis` are ignored.
    metric : str
        The outcome column (e.g. ``"best_val_test"``); higher is "better" for the verdict.
    groups : sequence of str
        Columns whose every combination is one comparison; all the comparisons form the
        family Holm adjusts over. Empty: one comparison.
    seed : str
        The column pairing runs of the two arms (the seed of everything a run draws).
    block : str
        The column over whose values each seed's differences are averaged (e.g. depth).
    blocks : sequence, callable or None
        The fixed set of block values: a sequence for every group, or a function of the
        group's values (a dict column -> value) returning that group's sequence; None:
        every block value present in the group. Runs at other blocks are ignored; a fixed
        block a seed has in neither arm is counted in `n_absent`.
    match : sequence of str
        Further columns a pair must agree on (a setting varying inside a group); each
        seed's mean is then over its blocks and these values.
    scale : float
        Factor on B − A (100 for accuracies as percentage points).
    confidence : float
        Coverage of the Student-t intervals.
    alpha : float
        Family-wise level of the Holm-adjusted verdict.
    family_size : int, optional
        The number of comparisons in the family where some have no runs yet (`holm`'s
        `family_size`: each absent one counts as p = 1). Default: the groups present.

    Returns
    -------
    Comparison
        The tests, the per-seed means and the per-block descriptive intervals.

    Raises
    ------
    ValueError
        A column is unknown; `a` equals `b`, or either is absent from `axis` (in the
        whole table, or in a group); a run occurs twice at one pair key and arm; a group
        has fewer than 2 seeds with at least one pair, or more than MAX_EXACT_SEEDS.
    """
    _check_columns(runs, {"axis": [axis], "metric": [metric], "seed": [seed], "block": [block],
                          "group": list(groups), "match": list(match)})
    groups, match = list(groups), list(match)
    roles = [axis, seed, block]
    overlap = [c for c in groups + match if c in roles] + [c for c in groups if c in match]
    if overlap or len(set(roles)) < 3:
        raise ValueError(f"compare: axis {axis!r}, seed {seed!r}, block {block!r}, groups {groups} and "
                         f"match {match} must be distinct columns (repeated: {overlap or roles})")
    if a == b:
        raise ValueError(f"compare: arms A and B are both {a!r}; compare two different values of {axis!r}")
    present = set(runs[axis].dropna().unique())
    for name, value in (("A", a), ("B", b)):
        if value not in present:
            raise ValueError(f"compare: arm {name} {value!r} is absent from column {axis!r} "
                             f"(values: {sorted(map(str, present))})")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"compare: confidence {confidence} must lie in (0, 1), e.g. 0.95")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"compare: alpha {alpha} must lie in (0, 1), e.g. 0.05")

    keys = [*match, seed, block]
    frame = runs.loc[runs[axis].isin([a, b]), [*groups, *keys, axis, metric]]
    group_iter = frame.groupby(groups, sort=True, dropna=False) if groups else [((), frame)]
    tests, seeds_rows, block_rows = [], [], []
    for group_key, cell in group_iter:
        group_key = _as_tuple(group_key) if groups else ()
        group_values = dict(zip(groups, group_key))
        where = ", ".join(f"{k}={v!r}" for k, v in group_values.items()) or "the runs"
        fixed = blocks(group_values) if callable(blocks) else blocks
        if fixed is not None:
            fixed = list(fixed)
            cell = cell[cell[block].isin(fixed)]
        arms = {}
        for name, value in (("A", a), ("B", b)):
            arm = cell[cell[axis] == value]
            if arm.empty:
                raise ValueError(f"compare: arm {name} {value!r} has no run in {where}"
                                 + (f" at the blocks {fixed}" if fixed is not None else ""))
            repeated = arm[arm.duplicated(keys, keep=False)]
            if not repeated.empty:
                first = dict(zip(keys, repeated.iloc[0][keys]))
                raise ValueError(f"compare: arm {name} {value!r} has several runs at {first} in {where}; "
                                 f"one run per pair is needed (add the column that tells them apart to "
                                 f"groups or match)")
            arms[name] = arm.dropna(subset=[metric]).set_index(keys)[metric].astype(float)
        joined = pd.concat({"A": arms["A"], "B": arms["B"]}, axis=1)
        paired = joined.dropna()
        n_unpaired = int(len(joined) - len(paired))
        block_values = fixed if fixed is not None else sorted(cell[block].unique())
        all_seeds = sorted(cell[seed].unique())
        match_combos = (cell[match].drop_duplicates().shape[0] if match else 1)
        n_absent = int(len(all_seeds) * len(block_values) * match_combos - len(joined))
        differences = (paired["B"] - paired["A"]) * scale
        by_seed = differences.groupby(level=seed)
        per_seed = pd.DataFrame({"difference": by_seed.mean(), "n_blocks": by_seed.size()})
        n = len(per_seed)
        if n < 2:
            raise ValueError(f"compare: {where} has {n} seed(s) with a pair of {a!r} and {b!r}; "
                             "at least 2 seeds are needed")
        values = per_seed["difference"].to_numpy()
        mean, sd, lo, hi = t_interval(values, confidence)
        tests.append({**group_values, "n_seeds": n, "n_pairs": int(len(paired)), "n_unpaired": n_unpaired,
                      "n_absent": n_absent, "mean": mean, "sd": sd, "lo": lo, "hi": hi,
                      "p_exact": sign_flip_test(values), "p_t": t_test_p(values), "min_p": min_sign_flip_p(n)})
        for s, row in per_seed.iterrows():
            seeds_rows.append({**group_values, "seed": s, "difference": row["difference"],
                               "n_blocks": int(row["n_blocks"])})
        for k, at in differences.groupby(level=block):
            d = at.to_numpy()
            if len(d) >= 2:
                bm, bsd, blo, bhi = t_interval(d, confidence)
            else:
                bm, bsd, blo, bhi = float(d.mean()), np.nan, np.nan, np.nan
            block_rows.append({**group_values, "block": k, "n": len(d), "mean": bm, "sd": bsd,
                               "lo": blo, "hi": bhi, "excludes_zero": bool(blo > 0 or bhi < 0)})
    result = pd.DataFrame(tests)
    result["p_holm"] = holm(result["p_exact"], family_size)
    result["p_t_holm"] = holm(result["p_t"], family_size)
    result["verdict"] = [verdict(m, p, alpha) for m, p in zip(result["mean"], result["p_holm"])]
    result = result[[*groups, *TEST_COLUMNS]]
    settings = {"axis": axis, "a": a, "b": b, "metric": metric, "groups": groups, "seed": seed,
                "block": block, "blocks": blocks, "match": match, "scale": scale,
                "confidence": confidence, "alpha": alpha, "family_size": family_size or len(result)}
    return Comparison(tests=result,
                      per_seed=pd.DataFrame(seeds_rows, columns=[*groups, *PER_SEED_COLUMNS]),
                      per_block=pd.DataFrame(block_rows, columns=[*groups, *PER_BLOCK_COLUMNS]),
                      settings=settings)


def chance_summary(per_block: pd.DataFrame, confidence: float = CONFIDENCE) -> dict:
    """How many per-block intervals exclude 0, beside how many would by chance.

    Parameters
    ----------
    per_block : pandas.DataFrame
        `Comparison.per_block` (its `lo`, `hi`; rows without an interval are not counted).
    confidence : float
        The intervals' coverage.

    Returns
    -------
    dict
        ``intervals`` (with an interval), ``excluding`` (of them excluding 0), ``above``
        (lo > 0), ``below`` (hi < 0) and ``expected`` ((1 − confidence) × intervals: the
        number excluding 0 by chance alone if every true difference were 0).
    """
    with_interval = per_block.dropna(subset=["lo", "hi"])
    above = int((with_interval["lo"] > 0).sum())
    below = int((with_interval["hi"] < 0).sum())
    return {"intervals": len(with_interval), "excluding": above + below, "above": above, "below": below,
            "expected": (1.0 - confidence) * len(with_interval)}


# --- the pre-registered primary analysis of the remedies grid ---------------------------

PRIMARY_DEPTHS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30)
# Remedies whose runs at depth <= PLAIN_UP_TO are the plain network (no hidden layer to
# skip or mix): those depths are counted in the "none" comparison only.
PLAIN_AT_SHALLOW = ("residual", "initial-residual")
PLAIN_UP_TO = 2
PRIMARY_GROUPS = ("dataset", "remedy")


def primary_depths(remedy: str) -> tuple[int, ...]:
    """The fixed depths of a remedy's primary comparison: PRIMARY_DEPTHS, less depths
    <= PLAIN_UP_TO for the remedies of PLAIN_AT_SHALLOW (their runs there are the plain
    network's, already in the "none" comparison)."""
    if remedy in PLAIN_AT_SHALLOW:
        return tuple(d for d in PRIMARY_DEPTHS if d > PLAIN_UP_TO)
    return PRIMARY_DEPTHS


def primary_analysis(runs: pd.DataFrame, metric: str = "best_val_test") -> Comparison:
    """The primary analysis of docs/results/analysis-plan.md on a remedies runs table:
    GAT-Lip − GAT (`attention_norm` lip − none), percentage points, per (dataset, remedy)
    the per-seed mean over `primary_depths`, exact sign-flip test, t-interval, Holm over
    every (dataset, remedy) present. The remedy is read with `remedies.remedy_of` where
    the table has no `remedy` column."""
    if "remedy" not in runs.columns:
        from lipnorm.results.remedies import remedy_of

        runs = runs.assign(remedy=remedy_of(runs))
    return compare_arms(runs, "attention_norm", "none", "lip", metric, groups=PRIMARY_GROUPS,
                        seed="seed", block="depth", blocks=lambda g: primary_depths(g["remedy"]),
                        scale=100.0)



# The secondary family of docs/results/analysis-plan.md: LipschitzNorm inside the residual's
# and DropEdge's own protocols, one pair per (protocol, dataset), Holm over all 6.
SECONDARY_PROTOCOLS = ("snr", "dropedge-authors", "dropedge-decorr")
SECONDARY_DATASETS = ("cora", "citeseer")
SECONDARY_GROUPS = ("protocol", "dataset")
# The published folder of each part of the family -> its protocol and the value of the
# setting its protocol sweeps (SNR's learning rate; None: no sweep). The presets of the
# same names (config/presets/) write them.
SECONDARY_SOURCES = {
    "dropedge-secondary-authors": ("dropedge-authors", None),
    "dropedge-secondary-decorr": ("dropedge-decorr", None),
    "snr-secondary-lr0.01": ("snr", 0.01),
    "snr-secondary-lr0.001": ("snr", 0.001),
}
# SNR's code fixes its own depth grid (amendment 1); the DropEdge pairs take the 14.
SNR_DEPTHS = (2, 4, 6, 8, 10, 15, 20, 30)


def secondary_depths(protocol: str) -> tuple[int, ...]:
    """The fixed depths of a secondary pair: SNR_DEPTHS under SNR's protocol (its skip wraps
    every layer, so no depth is the plain network), PRIMARY_DEPTHS under DropEdge's."""
    return SNR_DEPTHS if protocol == "snr" else PRIMARY_DEPTHS


def select_by_validation(runs: pd.DataFrame, setting: str, keys: Sequence[str],
                         validation: str = "best_val_val") -> pd.DataFrame:
    """The runs at the value of `setting` whose mean `validation` over seeds is highest,
    per combination of `keys` (the smaller value on a tie): the analysis plan's rule for a
    swept setting, which never reads the test set. Rows whose `setting` is NaN (a
    protocol that sweeps nothing) are kept as they are."""
    _check_columns(runs, {"setting": [setting], "keys": list(keys), "validation": [validation]})
    swept = runs[setting].notna()
    means = runs[swept].groupby([*keys, setting], dropna=False)[validation].mean().reset_index()
    # Highest mean first, then the smaller value: the first row per key is the choice.
    means = means.sort_values([*keys, validation, setting], ascending=[True] * len(keys) + [False, True])
    chosen = means.drop_duplicates(list(keys))[[*keys, setting]]
    kept = runs[swept].merge(chosen, on=[*keys, setting], how="inner")
    return pd.concat([runs[~swept], kept], ignore_index=True)


def secondary_parts(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """One runs table from the published runs tables of the secondary family's parts, keyed
    by folder name (SECONDARY_SOURCES): each row gets its `protocol` and `lr` (the swept
    learning rate, NaN where none is swept)."""
    unknown = [name for name in tables if name not in SECONDARY_SOURCES]
    if unknown:
        raise ValueError(f"secondary analysis: unknown part(s) {', '.join(map(repr, unknown))}; "
                         f"allowed: {', '.join(SECONDARY_SOURCES)}")
    if not tables:
        raise ValueError(f"secondary analysis: no runs table given; its parts: {', '.join(SECONDARY_SOURCES)}")
    frames = []
    for name, runs in tables.items():
        protocol, lr = SECONDARY_SOURCES[name]
        frames.append(runs.assign(protocol=protocol, lr=np.nan if lr is None else lr))
    return pd.concat(frames, ignore_index=True)


def incomplete_sweeps(runs: pd.DataFrame) -> dict[tuple[str, str], str]:
    """The (protocol, dataset) pairs of a swept protocol whose sweep is not complete in
    `runs` (a `secondary_parts` table), each with what it lacks: every learning rate of the
    protocol's parts (SECONDARY_SOURCES), at every fixed depth (`secondary_depths`), needs
    both arms with the pair's every seed. A choice by validation among the rates present
    would otherwise be a choice among fewer rates than the plan's."""
    held = {}
    for (protocol, dataset), pair in runs[runs["lr"].notna()].groupby(["protocol", "dataset"], sort=True):
        seeds = set(pair["seed"])
        lacking = []
        for lr in sorted(lr for p, lr in SECONDARY_SOURCES.values() if p == protocol):
            at_rate = pair[pair["lr"] == lr]
            if at_rate.empty:
                lacking.append(f"lr {lr:g}: no runs")
                continue
            depths = [depth for depth in secondary_depths(protocol)
                      if any(set(at_rate.loc[(at_rate["depth"] == depth) & (at_rate["attention_norm"] == arm), "seed"])
                             != seeds for arm in ("none", "lip"))]
            if depths:
                lacking.append(f"lr {lr:g}: depth(s) {', '.join(map(str, depths))} without both arms at "
                               f"all {len(seeds)} seeds")
        if lacking:
            held[(protocol, dataset)] = "; ".join(lacking)
    return held


def secondary_runs(tables: Mapping[str, pd.DataFrame]) -> tuple[pd.DataFrame, dict[tuple[str, str], str]]:
    """The runs of the secondary family's complete pairs, and the pairs held back.

    The parts' tables are joined (`secondary_parts`); a pair whose learning-rate sweep is
    not complete (`incomplete_sweeps`) is held back, so it counts as not yet run; in the
    others SNR's learning rate is chosen by validation per (dataset, depth, arm)
    (`select_by_validation`).

    Returns
    -------
    (pandas.DataFrame, dict)
        The runs, with `protocol` and `lr` columns; (protocol, dataset) -> what its sweep
        lacks, for each pair held back.
    """
    runs = secondary_parts(tables)
    held = incomplete_sweeps(runs)
    if held:
        runs = runs[~pd.Series(list(zip(runs["protocol"], runs["dataset"])), index=runs.index).isin(held)]
    return select_by_validation(runs, "lr", ["protocol", "dataset", "depth", "attention_norm"]), held


def secondary_analysis(tables: Mapping[str, pd.DataFrame], metric: str = "best_val_test") -> Comparison:
    """The secondary analysis of docs/results/analysis-plan.md: GAT-Lip − GAT per (protocol,
    dataset) of the runs of `secondary_runs(tables)`, percentage points, per seed the mean
    over `secondary_depths`, exact sign-flip test, t-interval, Holm over the family's 6
    pairs, a pair not yet run or held back counting as p = 1 (`holm`'s `family_size`). The
    pairs held back are in the comparison's settings (`held_back`: "protocol, dataset" ->
    what its sweep lacks)."""
    runs, held = secondary_runs(tables)
    lacking = {f"{protocol}, {dataset}": what for (protocol, dataset), what in held.items()}
    if runs.empty:
        raise ValueError("secondary analysis: no complete pair to test; held back: "
                         + " | ".join(f"{pair}: {what}" for pair, what in lacking.items()))
    comparison = compare_arms(runs, "attention_norm", "none", "lip", metric, groups=SECONDARY_GROUPS,
                              seed="seed", block="depth", blocks=lambda g: secondary_depths(g["protocol"]),
                              scale=100.0, family_size=len(SECONDARY_PROTOCOLS) * len(SECONDARY_DATASETS))
    comparison.settings["held_back"] = lacking
    return comparison


# --- the report of a comparison ------------------------------------------------------------

REPORT_FILES = ("tests.csv", "per_seed.csv", "per_block.csv", "comparison.tex", "comparison.md",
                "comparison.pdf", "comparison.png")


def write_report(comparison: Comparison, out_dir, sources: Sequence[str] = (), command: str = "",
                 unit: str = "", title: str = "") -> list:
    """Write the folder `out_dir` (replaced atomically) of a comparison: its three tables as
    CSV (`tests.csv`, `per_seed.csv`, `per_block.csv`), the table as LaTeX
    (`comparison.tex`) and in `comparison.md` beside the command, the runs tables read
    (`sources`), the per-block intervals' count against chance, and the figure
    (`comparison.pdf|png`, `lipnorm.results.figures.compare`); `title` heads the Markdown
    (default: "B against A (axis)"). Needs the plots extra."""
    from pathlib import Path

    from lipnorm.io import atomic_dir
    from lipnorm.results.figures.compare import comparison_figure
    from lipnorm.results.figures.style import save_figure
    from lipnorm.results.tables.compare import comparison_latex, comparison_text
    from lipnorm.results.tables.markdown import markdown

    out = Path(out_dir)
    text, bold = comparison_text(comparison)
    chance = comparison.chance()
    settings = comparison.settings
    default_title = f"{settings['b']} against {settings['a']} ({settings['axis']})"
    family = settings["family_size"]
    absent = family - len(comparison.tests)
    untested = f" ({absent} of them not yet run, each counted at p = 1)" if absent else ""
    lines = [
        f"# {title or default_title}", "",
        f"Written by `{command or 'lipnorm.results.compare.write_report'}`"
        + (f" from {', '.join(f'`{source}`' for source in sources)}." if sources else "."), "",
        f"Outcome `{settings['metric']}` × {settings['scale']:g}; per seed the mean over `{settings['block']}` of "
        f"B − A; exact sign-flip test per comparison (smallest attainable p: "
        f"{', '.join(sorted({f'{p:.2g}' for p in comparison.tests['min_p']}))}), Holm over the "
        f"{family} at {settings['alpha']:g}{untested}; {round(100 * settings['confidence'])} % Student-t "
        "interval of the per-seed means.", "",
        *markdown(text, bold, index=bool(settings['groups'])), "",
        f"Per-`{settings['block']}` intervals (description, not tests): {chance['intervals']}, of which "
        f"{chance['excluding']} exclude 0 ({chance['above']} above, {chance['below']} below); "
        f"{chance['expected']:.1f} would by chance alone.", "",
        "![comparison](comparison.png)",
    ]
    held = settings.get("held_back", {})
    if held:
        lines[-2:-2] = ["Held back until their sweep is complete (counted as not yet run): "
                        + "; ".join(f"{pair} ({what})" for pair, what in held.items()) + ".", ""]
    with atomic_dir(out) as tmp:
        comparison.tests.to_csv(tmp / "tests.csv", index=False)
        comparison.per_seed.to_csv(tmp / "per_seed.csv", index=False)
        comparison.per_block.to_csv(tmp / "per_block.csv", index=False)
        (tmp / "comparison.tex").write_text(comparison_latex(comparison))
        (tmp / "comparison.md").write_text("\n".join(lines) + "\n")
        save_figure(comparison_figure(comparison, unit=unit), tmp / "comparison")
    return [out / name for name in REPORT_FILES]
