"""LipschitzNorm among the literature's remedies for deep GNNs: the remedies experiment's
analysis (no plotting library: tables import it too).

A run's remedy is read from its settings: a representation normalisation after every
layer (`norm`: batchnorm, pairnorm, dgn), DropEdge (`dropedge` > 0), residual connections
(`residual`) or the initial residual (`initial_residual` > 0); "none" when it has none,
the parts joined by "+" when it has several. The attention normalisation
(`attention_norm`: none or lip) is the other axis.

Two rules choose the depth of a cell (dataset x attention normalisation x remedy), both
computed by `select_depths` and read with `at_chosen_depths` (`RULES` names them):

- the literature's rule, the depth of the best mean *test* accuracy over seeds: how the
  published numbers (`PUBLISHED`, see `SOURCE`) report the best depth; optimistic, since
  the test set chooses what it then measures, but the only rule that reads straight
  against the papers;
- ours, the depth of the best mean *validation* accuracy (the smaller depth on a tie),
  and the test accuracy there.

LipschitzNorm's effect is measured by paired differences (`paired_differences`,
`paired_at_chosen_depths`): GAT-Lip minus GAT on the same seed (the seed of everything,
the missing-features mask included, so a pair shares its data), in percentage points,
with a 95 % Student-t interval over seeds (`student_t_interval`) and a verdict (`verdict`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import pandas as pd

from lipnorm import registry
from lipnorm.results.aggregate import seed_cells

# Order of rows and legends; the names of the settings' values.
REMEDIES = ("none", "batchnorm", "pairnorm", "dgn", "dropedge", "residual", "initial-residual")
REMEDY_LABELS = {
    "none": "nothing",
    "batchnorm": "BatchNorm",
    "pairnorm": "PairNorm",
    "dgn": "DGN",
    "dropedge": "DropEdge",
    "residual": "residual",
    "initial-residual": "initial residual",
}
# The settings a remedy is read from, beside `norm`: name -> the value that means "off".
REMEDY_OPTIONS = {"dropedge": 0.0, "residual": False, "initial_residual": 0.0}


class Published(NamedTuple):
    accuracy: float  # test accuracy, percent
    std: float | None  # over runs, where the paper gives one
    depth: int  # the depth (#L) it was reached at


SOURCE = (
    "Table 5 of Deep Graph Neural Networks via Flexible Subgraph Aggregation (SNR, 2023): "
    "GAT, 100 % missing features; its nothing/BatchNorm/PairNorm/DGN/DropEdge rows are "
    "DeCorr's (Jin et al., KDD 2022), its residual row its own"
)
# (remedy, dataset) -> published GAT result; SNR's own best, for reference, under "snr".
PUBLISHED = {
    ("none", "cora"): Published(50.1, None, 2),
    ("none", "citeseer"): Published(40.8, None, 4),
    ("batchnorm", "cora"): Published(72.7, None, 5),
    ("batchnorm", "citeseer"): Published(48.7, None, 5),
    ("pairnorm", "cora"): Published(68.8, None, 8),
    ("pairnorm", "citeseer"): Published(50.3, None, 6),
    ("dgn", "cora"): Published(75.8, None, 8),
    ("dgn", "citeseer"): Published(54.5, None, 5),
    ("dropedge", "cora"): Published(67.2, None, 6),
    ("dropedge", "citeseer"): Published(48.2, None, 6),
    ("residual", "cora"): Published(74.9, 1.3, 6),
    ("residual", "citeseer"): Published(57.9, 2.8, 4),
    ("snr", "cora"): Published(77.0, 0.9, 9),
    ("snr", "citeseer"): Published(61.0, 1.1, 8),
}


def remedy_of(settings: pd.DataFrame) -> pd.Series:
    """The remedy name of each run (row) of `settings` (see the module docstring); a
    setting absent from the frame, or NaN there, is off (`with_remedy_settings`)."""
    filled = with_remedy_settings(settings)
    names = []
    for _, row in filled.iterrows():
        parts = [] if row["norm"] == "none" else [row["norm"]]
        parts += [option.replace("_", "-") for option, off in REMEDY_OPTIONS.items() if row[option] != off]
        names.append("+".join(parts) or "none")
    return pd.Series(names, index=settings.index, name="remedy")


def with_remedy_settings(runs: pd.DataFrame) -> pd.DataFrame:
    """`runs` with every setting a remedy is read from (`norm` and REMEDY_OPTIONS) as a
    column, off (`none`, REMEDY_OPTIONS' value) where the column is absent or the run
    predates the setting (NaN), as `remedy_of` reads them."""
    filled = {}
    for option, off in {"norm": "none", **REMEDY_OPTIONS}.items():
        filled[option] = runs[option].where(runs[option].notna(), off) if option in runs else off
    frame = runs.assign(**filled)
    frame.attrs = runs.attrs
    return frame


def with_remedies(runs: pd.DataFrame) -> pd.DataFrame:
    """`runs` with each run's `remedy` (`remedy_of`), checked to hold one setting per cell
    (dataset x attention norm x remedy x depth) as `aggregate.seed_cells` checks: two
    runs of one seed in a cell would otherwise be averaged as two seeds."""
    runs = runs.assign(remedy=remedy_of(runs))
    seed_cells(runs.assign(test_metric=runs["best_val_test"]), ["dataset", "attention_norm", "remedy", "depth"])
    return runs


def model_label(runs: pd.DataFrame, attention_norm: str) -> str:
    """"GAT" / "GAT-Lip": the printed model of the runs' one architecture (gat where the
    runs predate the `architecture` setting) with that attention norm."""
    architectures = sorted(runs["architecture"].unique()) if "architecture" in runs else ["gat"]
    if len(architectures) != 1:
        raise ValueError(f"remedies: runs of several architectures {architectures}; the "
                         "experiment compares one architecture with and without LipschitzNorm")
    return registry.label("model", registry.compose_model(architectures[0], attention_norm))


def remedy_label(name: str) -> str:
    """The printed name of a remedy (a combination: its parts' labels joined by " + ")."""
    return " + ".join(REMEDY_LABELS.get(part, part) for part in name.split("+"))


def remedy_order(names) -> list[str]:
    """The distinct remedy names: `REMEDIES` order, then the others sorted."""
    distinct = set(names)
    return [n for n in REMEDIES if n in distinct] + sorted(distinct - set(REMEDIES))


# --- choosing the depth ---------------------------------------------------------------

# The rules that choose a cell's depth, as every table and text names them.
LITERATURE_RULE = "literature"
VALIDATION_RULE = "validation"
RULES = {
    LITERATURE_RULE: "literature's rule (optimistic: chosen on the test set)",
    VALIDATION_RULE: "our rule (chosen on the validation set)",
}
# Rule -> the columns of `select_depths` that hold its choice, by their names in
# `at_chosen_depths` (depth, test_mean, test_std, n).
RULE_COLUMNS = {
    VALIDATION_RULE: {"depth": "depth", "test_mean": "test_mean", "test_std": "test_std", "n": "n"},
    LITERATURE_RULE: {"test_depth": "depth", "test_best_mean": "test_mean",
                      "test_best_std": "test_std", "test_best_n": "n"},
}
CELL_KEYS = ("dataset", "attention_norm", "remedy")


def _check_rule(rule: str) -> None:
    if rule not in RULES:
        raise ValueError(f"unknown depth rule {rule!r}; known: {', '.join(RULES)}")


def _seed_stats(values: pd.Series) -> tuple[float, float]:
    scores = values.to_numpy(dtype=float) * 100.0
    return scores.mean(), (scores.std(ddof=1) if len(scores) > 1 else np.nan)


def _candidates(cell: pd.DataFrame, by) -> list[tuple]:
    """`(key, val mean, test mean, test std, n)`, % over seeds, for each group of `cell`
    by `by` in which no seed diverged (a mean over the survivors would flatter it)."""
    candidates = []
    for key, group in cell.groupby(by):
        if (group["status"] == "diverged").any():
            continue
        val_mean, _ = _seed_stats(group["best_val_val"])
        test_mean, test_std = _seed_stats(group["best_val_test"])
        candidates.append((key, val_mean, test_mean, test_std, len(group)))
    return candidates


def select_depths(runs: pd.DataFrame, keys: tuple[str, ...] = CELL_KEYS) -> pd.DataFrame:
    """Per cell of `keys` (runs carry a `remedy` column, `remedy_of`), the depth each rule
    (`RULES`) chooses and the test accuracy there, % over seeds:

    - ours: the depth of the best mean validation accuracy (the smaller depth on a tie),
      columns `depth`, `val_mean`, `test_mean`, `test_std`, `n`;
    - the literature's: the depth of the best mean test accuracy (the smaller depth on a
      tie), columns `test_depth`, `test_best_mean`, `test_best_std`, `test_best_n`
      (optimistic: it looks at the test set).

    Uses each run's `best_val_val` and `best_val_test` (the epoch of its best validation
    accuracy, protocol best-val); std is the sample std (ddof=1; NaN for one seed).
    Depths with a diverged seed are candidates for neither rule (their mean would average
    only the survivors). `depths` counts the candidates; a cell without any is left out.
    `at_chosen_depths` reads one rule's columns under common names.
    """
    keys = list(keys)
    rows = []
    for key, cell in runs.groupby(keys, sort=False):
        candidates = [(int(depth), *stats) for depth, *stats in _candidates(cell, "depth")]
        if not candidates:
            continue
        by_val = max(candidates, key=lambda c: (c[1], -c[0]))
        by_test = max(candidates, key=lambda c: (c[2], -c[0]))
        rows.append({
            **dict(zip(keys, key)), "depth": by_val[0], "val_mean": by_val[1], "test_mean": by_val[2],
            "test_std": by_val[3], "n": by_val[4], "test_depth": by_test[0], "test_best_mean": by_test[2],
            "test_best_std": by_test[3], "test_best_n": by_test[4], "depths": len(candidates),
        })
    columns = [*keys, "depth", "val_mean", "test_mean", "test_std", "n", "test_depth", "test_best_mean",
               "test_best_std", "test_best_n", "depths"]
    return pd.DataFrame(rows, columns=columns)


def at_chosen_depths(chosen: pd.DataFrame, rule: str, keys: tuple[str, ...] = CELL_KEYS) -> pd.DataFrame:
    """One rule's choice from `select_depths`' frame `chosen` (cells of `keys`), under the
    same column names whichever the rule: `keys`, `depth`, `test_mean`, `test_std`, `n`."""
    _check_rule(rule)
    columns = RULE_COLUMNS[rule]
    return chosen[[*keys, *columns]].rename(columns=columns)


def best_by_validation(runs: pd.DataFrame) -> pd.DataFrame:
    """Per dataset and model (`attention_norm`), the configuration of the grid with the
    best mean validation accuracy over every remedy and depth run, and the test accuracy
    there (%, over seeds): a choice that never reads the test set, to set beside the best
    published cell (SNR's). Ties go to the shallower depth, then to the remedy first in
    `REMEDIES`; a depth with a diverged seed is no candidate (`select_depths`' rule).

    Columns: dataset, attention_norm, remedy, depth, val_mean, test_mean, test_std, n,
    and `candidates`, the number of (remedy, depth) configurations searched.
    """
    runs = _with_remedy(runs)
    rank = {name: index for index, name in enumerate(remedy_order(runs["remedy"]))}
    rows = []
    for (dataset, attention_norm), cell in runs.groupby(["dataset", "attention_norm"], sort=False):
        candidates = [(remedy, int(depth), *stats) for (remedy, depth), *stats in _candidates(cell, ["remedy", "depth"])]
        if not candidates:
            continue
        remedy, depth, val_mean, test_mean, test_std, n = max(
            candidates, key=lambda c: (c[2], -c[1], -rank[c[0]])
        )
        rows.append({
            "dataset": dataset, "attention_norm": attention_norm, "remedy": remedy, "depth": depth,
            "val_mean": val_mean, "test_mean": test_mean, "test_std": test_std, "n": n,
            "candidates": len(candidates),
        })
    columns = ["dataset", "attention_norm", "remedy", "depth", "val_mean", "test_mean", "test_std", "n", "candidates"]
    return pd.DataFrame(rows, columns=columns)


# --- LipschitzNorm's effect: paired differences -----------------------------------------

CONFIDENCE = 0.95
# What one uncorrected interval says, as description: the claims about LipschitzNorm are
# the pre-registered test's (`lipnorm.results.compare`, docs/results/analysis-plan.md).
HELPED, HURT, NO_EFFECT = "above 0", "below 0", "holds 0"
VERDICTS = (HELPED, HURT, NO_EFFECT)
DIVERGED = "diverged"  # the verdict of a depth at which a paired run diverged


def t_quantile(probability: float, df: int) -> float:
    """The `probability` quantile of Student's t distribution with `df` degrees of freedom
    (scipy.stats.t.ppf; scipy is imported here, not at module import)."""
    if not 0.0 < probability < 1.0:
        raise ValueError(f"t quantile: probability {probability} must lie in (0, 1)")
    if df < 1:
        raise ValueError(f"t quantile: {df} degrees of freedom; at least 1 is needed")
    from scipy import stats

    return float(stats.t.ppf(probability, df))


def student_t_interval(values, confidence: float = CONFIDENCE) -> tuple[float, float, float, float]:
    """(mean, sd, lo, hi) of `values`: sd the sample std (ddof=1), [lo, hi] the two-sided
    Student-t interval of the mean, mean ± t_{(1+confidence)/2, n-1} · sd / √n. With one
    value sd and the interval are NaN (no spread to estimate); with none, all four."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence {confidence} must lie in (0, 1), e.g. 0.95")
    values = np.asarray(values, dtype=float)
    if len(values) == 0:
        return (np.nan,) * 4
    mean = float(values.mean())
    if len(values) < 2:
        return mean, np.nan, np.nan, np.nan
    sd = float(values.std(ddof=1))
    half = t_quantile(0.5 + confidence / 2.0, len(values) - 1) * sd / math.sqrt(len(values))
    return mean, sd, mean - half, mean + half


def verdict(lo: float, hi: float) -> str:
    """HELPED when the interval [lo, hi] of GAT-Lip − GAT lies above 0, HURT when it lies
    below, NO_EFFECT otherwise (it holds 0, or there is none: NaN)."""
    if lo > 0:
        return HELPED
    if hi < 0:
        return HURT
    return NO_EFFECT


def _arm(runs: pd.DataFrame, where: str) -> pd.DataFrame:
    """The runs of one arm (one attention norm at one depth), indexed by seed; a seed
    twice is refused: it would pair with one partner twice."""
    repeated = runs["seed"][runs["seed"].duplicated()]
    if not repeated.empty:
        raise ValueError(f"remedies: seed {repeated.iloc[0]} occurs twice among the runs of {where}; "
                         "a paired difference needs one run per seed and arm (keep one setting)")
    return runs.set_index("seed")


def _paired(gat: pd.DataFrame, lip: pd.DataFrame, gat_at: str, lip_at: str) -> dict:
    """The paired difference GAT-Lip − GAT (points) over the seeds present in both arms:
    `n` pairs, `n_unpaired` seeds of one arm only (left out), `n_diverged` pairs with a
    diverged run, and, where none diverged, `student_t_interval`'s mean, sd, lo, hi and
    the `verdict` (DIVERGED where a pair diverged: nothing is averaged, as in every table)."""
    gat, lip = _arm(gat, gat_at), _arm(lip, lip_at)
    seeds = gat.index.intersection(lip.index).sort_values()
    unpaired = len(gat.index.symmetric_difference(lip.index))
    diverged = int(((gat.loc[seeds, "status"] == "diverged") | (lip.loc[seeds, "status"] == "diverged")).sum())
    if diverged:
        mean = sd = lo = hi = np.nan
    else:
        differences = (lip.loc[seeds, "best_val_test"].to_numpy(dtype=float)
                       - gat.loc[seeds, "best_val_test"].to_numpy(dtype=float)) * 100.0
        mean, sd, lo, hi = student_t_interval(differences)
    return {"n": len(seeds), "n_unpaired": unpaired, "n_diverged": diverged, "mean": mean, "sd": sd,
            "lo": lo, "hi": hi, "verdict": DIVERGED if diverged else verdict(lo, hi)}


PAIRED_COLUMNS = ["n", "n_unpaired", "n_diverged", "mean", "sd", "lo", "hi", "verdict"]


def _with_remedy(runs: pd.DataFrame) -> pd.DataFrame:
    return runs if "remedy" in runs else runs.assign(remedy=remedy_of(runs))


def _sorted_cells(frame: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Rows by dataset (`datasets_in_order`), remedy (`remedy_order`), then `by`."""
    order = {name: i for i, name in enumerate(remedy_order(frame["remedy"]))}
    datasets = {name: i for i, name in enumerate(datasets_in_order(frame["dataset"]))}
    keys = frame.assign(_dataset=frame["dataset"].map(datasets), _remedy=frame["remedy"].map(order))
    return frame.loc[keys.sort_values(["_dataset", "_remedy", *by]).index].reset_index(drop=True)


def paired_differences(runs: pd.DataFrame) -> pd.DataFrame:
    """LipschitzNorm's effect at every depth: per dataset x remedy x depth, the test
    accuracy (`best_val_test`) of GAT-Lip (attention_norm lip) minus that of GAT (none)
    on the same seed, in percentage points, over the seeds present in both arms.

    Columns: `dataset`, `remedy`, `depth`, `n` (pairs), `n_unpaired` (seeds run in one
    arm only: left out, not compared with another seed), `n_diverged` (pairs with a
    diverged run), `mean` and `sd` (ddof=1) of the differences, `lo`, `hi` (the 95 %
    Student-t interval of the mean, `student_t_interval`; NaN for fewer than two pairs)
    and `verdict` (`verdict`: helped, hurt, no measurable effect).

    Divergence: a depth at which a run of either arm diverged has no difference (mean
    and interval NaN, verdict DIVERGED), as a cell with a diverged seed has no mean in
    the tables; dropping the diverged pair would compare only the seeds on which both
    models trained, which flatters the one that diverged. (`select_depths` makes no
    such depth a candidate, so the differences at the chosen depths never meet one.)
    `runs` may carry `remedy`; else it is read from the settings (`remedy_of`).
    """
    runs = _with_remedy(runs)
    rows = []
    for (dataset, remedy, depth), cell in runs.groupby(["dataset", "remedy", "depth"], sort=False):
        where = f"{dataset}, {remedy}, depth {depth}"
        rows.append({"dataset": dataset, "remedy": remedy, "depth": int(depth),
                     **_paired(cell[cell["attention_norm"] == "none"], cell[cell["attention_norm"] == "lip"],
                               f"GAT at {where}", f"GAT-Lip at {where}")})
    frame = pd.DataFrame(rows, columns=["dataset", "remedy", "depth", *PAIRED_COLUMNS])
    return _sorted_cells(frame, ["depth"])


def paired_at_chosen_depths(runs: pd.DataFrame, rule: str = VALIDATION_RULE) -> pd.DataFrame:
    """LipschitzNorm's effect as the tables report each model, at its own chosen depth:
    per dataset x remedy, seed s of GAT-Lip at the depth `rule` chooses for GAT-Lip minus
    seed s of GAT at the depth it chooses for GAT (`select_depths`, `at_chosen_depths`),
    test accuracy in percentage points, over the seeds present in both.

    Columns: `dataset`, `remedy`, `depth_gat`, `depth_lip`, then as `paired_differences`
    (`n`, `n_unpaired`, `n_diverged` (always 0: a chosen depth has no diverged seed),
    `mean`, `sd`, `lo`, `hi`, `verdict`). A (dataset, remedy) where either model has
    no chosen depth (not run, or every depth diverged) has no row.
    """
    _check_rule(rule)
    runs = _with_remedy(runs)
    chosen = at_chosen_depths(select_depths(runs), rule)
    depth_of = {(dataset, remedy, norm): depth for dataset, norm, remedy, depth
                in chosen[["dataset", "attention_norm", "remedy", "depth"]].itertuples(index=False)}
    rows = []
    for (dataset, remedy), cell in runs.groupby(["dataset", "remedy"], sort=False):
        depths = {norm: depth_of.get((dataset, remedy, norm)) for norm in ("none", "lip")}
        if None in depths.values():
            continue
        arms = {norm: cell[(cell["attention_norm"] == norm) & (cell["depth"] == depth)]
                for norm, depth in depths.items()}
        rows.append({"dataset": dataset, "remedy": remedy, "depth_gat": depths["none"],
                     "depth_lip": depths["lip"],
                     **_paired(arms["none"], arms["lip"], f"GAT at {dataset}, {remedy}, depth {depths['none']}",
                               f"GAT-Lip at {dataset}, {remedy}, depth {depths['lip']}")})
    frame = pd.DataFrame(rows, columns=["dataset", "remedy", "depth_gat", "depth_lip", *PAIRED_COLUMNS])
    return _sorted_cells(frame, [])


# --- texts ------------------------------------------------------------------------------

def accuracy_text(mean: float, std: float, depth: int) -> str:
    """A chosen cell as the tables print it: "test accuracy ± std / depth" (no ± for one
    seed: std NaN)."""
    spread = "" if math.isnan(std) else f" ± {std:.1f}"
    return f"{mean:.1f}{spread} / {depth}"


def published_text(entry: Published | None) -> str:
    """A published cell as the tables print it: "accuracy ± std / depth", "–" for none."""
    if entry is None:
        return "–"
    spread = "" if entry.std is None else f" ± {entry.std:.1f}"
    return f"{entry.accuracy:.1f}{spread} / {entry.depth}"


def datasets_in_order(names) -> list[str]:
    """The distinct dataset names, Cora and CiteSeer first (the published table's order)."""
    distinct = set(names)
    first = [name for name in ("cora", "citeseer") if name in distinct]
    return first + sorted(distinct - set(first))


def comparison_table(runs: pd.DataFrame, rule: str = LITERATURE_RULE) -> pd.DataFrame:
    """The published table's form: rows remedies (in `REMEDIES` order, then any other,
    then SNR's published best); per dataset three columns, the published GAT result and
    ours with GAT and with GAT-Lip, each "test accuracy ± std / depth" at the depth `rule`
    chooses (`select_depths`). By default the literature's rule, the one the published
    numbers used (optimistic: chosen on the test set), so the columns read straight
    against each other."""
    _check_rule(rule)
    runs = _with_remedy(runs)
    chosen = at_chosen_depths(select_depths(runs), rule)
    datasets = datasets_in_order(chosen["dataset"])
    rows = []
    for remedy in [*remedy_order(chosen["remedy"]), "snr"]:
        row = {"remedy": "SNR (best published)" if remedy == "snr" else remedy_label(remedy)}
        for dataset in datasets:
            row[f"{dataset}: published GAT"] = published_text(PUBLISHED.get((remedy, dataset)))
            for attention_norm, name in (("none", "GAT"), ("lip", "GAT-Lip")):
                match = chosen[(chosen["dataset"] == dataset) & (chosen["remedy"] == remedy)
                               & (chosen["attention_norm"] == attention_norm)]
                row[f"{dataset}: ours {name}"] = (
                    "–" if match.empty else accuracy_text(*match.iloc[0][["test_mean", "test_std", "depth"]])
                )
        rows.append(row)
    return pd.DataFrame(rows)
