"""LipschitzNorm among the literature's remedies for deep GNNs: the remedies experiment's
analysis (no plotting library: tables import it too).

A run's remedy is read from its settings: a representation normalisation after every
layer (`norm`: batchnorm, pairnorm, dgn), DropEdge (`dropedge` > 0), residual connections
(`residual`) or the initial residual (`initial_residual` > 0); "none" when it has none,
the parts joined by "+" when it has several. The attention normalisation
(`attention_norm`: none or lip) is the other axis.

The best depth of a cell (dataset x attention normalisation x remedy) is the depth of the
best mean *validation* accuracy over seeds, and its *test* accuracy is reported
(`select_depths`). The published numbers (`PUBLISHED`) chose differently (see `SOURCE`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import pandas as pd

from lipnorm import registry
from lipnorm.aggregate import seed_cells

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


def _seed_stats(values: pd.Series) -> tuple[float, float]:
    scores = values.to_numpy(dtype=float) * 100.0
    return scores.mean(), (scores.std(ddof=1) if len(scores) > 1 else np.nan)


def select_depths(runs: pd.DataFrame, keys: tuple[str, ...] = ("dataset", "attention_norm", "remedy")) -> pd.DataFrame:
    """Per cell of `keys` (runs carry a `remedy` column, `remedy_of`), the depth chosen by
    the mean validation accuracy over seeds (the smaller depth on a tie) and the test
    accuracy there; beside it, for contrast, the depth and test accuracy that choosing by
    the mean test accuracy would report (optimistic: it looks at the test set).

    Uses each run's `best_val_val` and `best_val_test` (the epoch of its best validation
    accuracy, protocol best-val). Depths with a diverged seed are not candidates.
    Columns: `keys`, `depth`, `val_mean`, `test_mean`, `test_std`, `n`, `test_depth`,
    `test_best_mean`, `depths` (how many were candidates).
    """
    keys = list(keys)
    rows = []
    for key, cell in runs.groupby(keys, sort=False):
        candidates = []
        for depth, group in cell.groupby("depth"):
            if (group["status"] == "diverged").any():
                continue
            val_mean, _ = _seed_stats(group["best_val_val"])
            test_mean, test_std = _seed_stats(group["best_val_test"])
            candidates.append((int(depth), val_mean, test_mean, test_std, len(group)))
        if not candidates:
            continue
        by_val = max(candidates, key=lambda c: (c[1], -c[0]))
        by_test = max(candidates, key=lambda c: (c[2], -c[0]))
        rows.append({
            **dict(zip(keys, key)), "depth": by_val[0], "val_mean": by_val[1], "test_mean": by_val[2],
            "test_std": by_val[3], "n": by_val[4], "test_depth": by_test[0], "test_best_mean": by_test[2],
            "depths": len(candidates),
        })
    columns = [*keys, "depth", "val_mean", "test_mean", "test_std", "n", "test_depth", "test_best_mean", "depths"]
    return pd.DataFrame(rows, columns=columns)


def _ours(mean: float, std: float, depth: int) -> str:
    spread = "" if math.isnan(std) else f" ± {std:.1f}"
    return f"{mean:.1f}{spread} / {depth}"


def _published(entry: Published | None) -> str:
    if entry is None:
        return "–"
    spread = "" if entry.std is None else f" ± {entry.std:.1f}"
    return f"{entry.accuracy:.1f}{spread} / {entry.depth}"


def comparison_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Rows: remedies (in `REMEDIES` order, then any other, then SNR's published best);
    per dataset three columns: the published GAT result, ours with GAT and ours with
    GAT-Lip, each "test accuracy ± std / best depth" (`select_depths`)."""
    runs = runs.assign(remedy=remedy_of(runs))
    chosen = select_depths(runs)
    datasets = [name for name in ("cora", "citeseer") if name in set(chosen["dataset"])]
    datasets += sorted(set(chosen["dataset"]) - set(datasets))
    present = set(chosen["remedy"])
    remedies = [name for name in REMEDIES if name in present] + sorted(present - set(REMEDIES))
    rows = []
    for remedy in [*remedies, "snr"]:
        row = {"remedy": "SNR (best published)" if remedy == "snr" else remedy_label(remedy)}
        for dataset in datasets:
            row[f"{dataset}: published GAT"] = _published(PUBLISHED.get((remedy, dataset)))
            for attention_norm, name in (("none", "GAT"), ("lip", "GAT-Lip")):
                match = chosen[(chosen["dataset"] == dataset) & (chosen["remedy"] == remedy)
                               & (chosen["attention_norm"] == attention_norm)]
                row[f"{dataset}: ours {name}"] = (
                    "–" if match.empty else _ours(*match.iloc[0][["test_mean", "test_std", "depth"]])
                )
        rows.append(row)
    return pd.DataFrame(rows)
