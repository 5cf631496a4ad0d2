"""Missing-features setting (PairNorm, Zhao & Akoglu 2020), as used by the paper.

For a rate r (percent, 0-100) and a seed, the erasable pool is every node outside
the training set; `floor(|pool| * r / 100)` of them, drawn with
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


def _check_rate(rate) -> float:
    if isinstance(rate, bool) or not isinstance(rate, Real) or not 0 <= rate <= 100:
        raise ValueError(f"missing-features rate {rate!r} must be a number from 0 to 100 (percent)")
    return float(rate)


def _check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, Integral) or seed < 0:
        raise ValueError(f"missing-features seed {seed!r} must be a non-negative integer")
    return int(seed)


def missing_features_mask(train_mask, rate: float, seed: int) -> np.ndarray:
    """Boolean mask over nodes, True where the feature row is erased."""
    rate, seed = _check_rate(rate), _check_seed(seed)
    train = np.asarray(train_mask, dtype=bool)
    pool = np.flatnonzero(~train)
    count = math.floor(len(pool) * rate / 100)
    erased = np.zeros(len(train), dtype=bool)
    erased[np.random.default_rng(seed).choice(pool, size=count, replace=False)] = True
    return erased


def mask_path(root: str | os.PathLike, dataset: str, rate: float, seed: int) -> Path:
    """Where the mask of (dataset, rate, seed) is stored under `root`."""
    rate, seed = _check_rate(rate), _check_seed(seed)
    return Path(root) / "masks" / dataset / f"rate{rate:g}_seed{seed}.npy"


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
