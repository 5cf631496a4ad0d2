"""Missing-features setting (PairNorm, Zhao & Akoglu 2020), as used by the paper.

For a rate r (percent, 0-100) and a seed, the erasable pool is every node outside
the training set ("unlabelled", PairNorm's and DGN's), or the validation and test nodes
only ("evaluation", SNR's: `erasable_nodes`); `floor(|pool| * r / 100)` of them, drawn with
`numpy.random.default_rng(seed)`, have their feature rows set to zero. The mask is
saved as an `.npy` artefact so every model of a grid sees the same nodes erased.
"""

from __future__ import annotations

import math
import os
from numbers import Integral, Real
from pathlib import Path

import numpy as np

from lipnorm.io import atomic_path
from lipnorm.settings.recipes import MISSING_POOLS


def _check_rate(rate) -> float:
    if isinstance(rate, bool) or not isinstance(rate, Real) or not 0 <= rate <= 100:
        raise ValueError(f"missing-features rate {rate!r} must be a number from 0 to 100 (percent)")
    return float(rate)


def _check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, Integral) or seed < 0:
        raise ValueError(f"missing-features seed {seed!r} must be a non-negative integer")
    return int(seed)


def erasable_nodes(pool: str, train_mask, val_mask, test_mask) -> np.ndarray:
    """Boolean mask of the nodes whose features the missing-features setting of `pool`
    (lipnorm.settings.recipes.MISSING_POOLS) may erase."""
    if pool == "unlabelled":
        return ~np.asarray(train_mask, dtype=bool)
    if pool == "evaluation":
        return np.asarray(val_mask, dtype=bool) | np.asarray(test_mask, dtype=bool)
    raise ValueError(f"unknown missing-features pool {pool!r}; allowed: {', '.join(MISSING_POOLS)}")


def missing_features_mask(train_mask, rate: float, seed: int, erasable=None) -> np.ndarray:
    """Boolean mask over nodes, True where the feature row is erased: drawn from the
    `erasable` nodes (a boolean mask; default: every node outside `train_mask`)."""
    rate, seed = _check_rate(rate), _check_seed(seed)
    train = np.asarray(train_mask, dtype=bool)
    erasable = ~train if erasable is None else np.asarray(erasable, dtype=bool)
    if erasable.shape != train.shape:
        raise ValueError(f"erasable nodes of shape {erasable.shape} do not fit {train.shape} nodes")
    pool = np.flatnonzero(erasable)
    count = math.floor(len(pool) * rate / 100)
    erased = np.zeros(len(train), dtype=bool)
    erased[np.random.default_rng(seed).choice(pool, size=count, replace=False)] = True
    return erased


def mask_path(root: str | os.PathLike, dataset: str, rate: float, seed: int, pool: str = "unlabelled") -> Path:
    """Where the mask of (dataset, rate, seed) is stored under `root`: a pool other than
    "unlabelled" in a folder of its own."""
    rate, seed = _check_rate(rate), _check_seed(seed)
    if pool not in MISSING_POOLS:
        raise ValueError(f"unknown missing-features pool {pool!r}; allowed: {', '.join(MISSING_POOLS)}")
    folder = Path(root) / "masks" / dataset
    return (folder if pool == "unlabelled" else folder / pool) / f"rate{rate:g}_seed{seed}.npy"


def save_mask(path: str | os.PathLike, mask: np.ndarray) -> Path:
    path = Path(path)
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        np.save(handle, np.asarray(mask, dtype=bool))  # a handle: np.save would append .npy to a name
    return path


def load_mask(path: str | os.PathLike, num_nodes: int) -> np.ndarray:
    """Read a saved mask, checking it fits a graph of `num_nodes` nodes."""
    mask = np.load(path, allow_pickle=False)
    if mask.dtype != bool or mask.shape != (num_nodes,):
        raise ValueError(
            f"mask {path} has dtype {mask.dtype} and shape {mask.shape}; "
            f"expected bool of shape ({num_nodes},) for this dataset"
        )
    return mask


def apply_missing_features(features, mask):
    """A copy of `features` (torch tensor or numpy array) with masked rows zeroed."""
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != (features.shape[0],):
        raise ValueError(
            f"missing-features mask of shape {mask.shape} does not fit features of shape "
            f"{tuple(features.shape)}; expected ({features.shape[0]},)"
        )
    if isinstance(features, np.ndarray):
        erased = features.copy()
        erased[mask] = 0
        return erased
    import torch

    erased = features.clone()
    erased[torch.from_numpy(mask).to(features.device)] = 0
    return erased
