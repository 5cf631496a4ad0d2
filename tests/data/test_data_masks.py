"""Missing-features masks (PairNorm's setting): exact counts, pool, seeds, artefacts."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch

from lipnorm.data import apply_missing_features, load_mask, mask_path, missing_features_mask, save_mask


def _train_mask(n=1000, train=140, seed=5):
    mask = np.zeros(n, dtype=bool)
    mask[np.random.default_rng(seed).choice(n, size=train, replace=False)] = True
    return mask


@pytest.mark.parametrize("rate", [0, 1, 10, 33, 50, 62.5, 99, 100])
def test_exact_count_and_pool(rate):
    train = _train_mask()
    erased = missing_features_mask(train, rate, seed=3)
    pool = 1000 - 140
    assert erased.dtype == bool and erased.shape == (1000,)
    assert erased.sum() == math.floor(Fraction(pool) * Fraction(rate) / 100)
    assert not (erased & train).any()


def test_rate_100_erases_every_non_training_node():
    train = _train_mask()
    assert np.array_equal(missing_features_mask(train, 100, seed=0), ~train)


def test_rate_0_erases_nothing():
    assert not missing_features_mask(_train_mask(), 0, seed=0).any()


def test_draw_is_numpys_default_rng_choice():
    """The documented draw, so other tools can reproduce a mask from (rate, seed)."""
    train = _train_mask()
    pool = np.flatnonzero(~train)
    chosen = np.random.default_rng(11).choice(pool, size=len(pool) * 30 // 100, replace=False)
    assert np.array_equal(np.flatnonzero(missing_features_mask(train, 30, seed=11)), np.sort(chosen))


def test_seed_reproducible_and_distinct():
    train = _train_mask()
    first = missing_features_mask(train, 40, seed=1)
    assert np.array_equal(first, missing_features_mask(train, 40, seed=1))
    assert not np.array_equal(first, missing_features_mask(train, 40, seed=2))


def test_accepts_torch_masks():
    train = _train_mask()
    assert np.array_equal(
        missing_features_mask(torch.from_numpy(train), 20, 4), missing_features_mask(train, 20, 4)
    )


@pytest.mark.parametrize("rate", [-1, 100.5, float("nan"), "10", True])
def test_bad_rate(rate):
    with pytest.raises(ValueError, match=rf"missing-features rate {rate!r} must be a number from 0 to 100"):
        missing_features_mask(_train_mask(), rate, seed=0)


@pytest.mark.parametrize("seed", [-1, 1.5, "3"])
def test_bad_seed(seed):
    with pytest.raises(ValueError, match=rf"missing-features seed {seed!r} must be a non-negative integer"):
        missing_features_mask(_train_mask(), 10, seed=seed)


def test_mask_path_keys_dataset_rate_seed(tmp_path):
    assert mask_path(tmp_path, "cora", 50, 3) == tmp_path / "masks" / "cora" / "rate50_seed3.npy"
    assert mask_path(tmp_path, "cora", 12.5, 0).name == "rate12.5_seed0.npy"
    with pytest.raises(ValueError, match="rate 101"):
        mask_path(tmp_path, "cora", 101, 0)


def test_save_and_load_round_trip(tmp_path):
    mask = missing_features_mask(_train_mask(), 25, seed=9)
    path = save_mask(mask_path(tmp_path, "cora", 25, 9), mask)
    assert sorted(p.name for p in path.parent.iterdir()) == ["rate25_seed9.npy"]  # no temp file left
    assert np.array_equal(load_mask(path, 1000), mask)
    with pytest.raises(ValueError, match=r"expected bool of shape \(999,\) for this dataset"):
        load_mask(path, 999)


def test_apply_zeroes_rows_and_copies():
    mask = np.array([True, False, True, False])
    for features in (np.arange(12, dtype=np.float32).reshape(4, 3), torch.arange(12.0).reshape(4, 3)):
        erased = apply_missing_features(features, mask)
        assert type(erased) is type(features)
        assert np.array_equal(np.asarray(erased)[mask], np.zeros((2, 3)))
        assert np.array_equal(np.asarray(erased)[~mask], np.asarray(features)[~mask])
        assert np.asarray(features)[0, 1] == 1  # the input is untouched
    with pytest.raises(ValueError, match=r"mask of shape \(4,\) does not fit features of shape \(5, 3\)"):
        apply_missing_features(np.zeros((5, 3)), mask)


def test_evaluation_pool_erases_validation_and_test_only():
    """SNR's setting: the pool is the validation and test nodes; at rate 100 all of them,
    at 50 half of them drawn by the seed, never a training or other unlabelled node."""
    from lipnorm.data import erasable_nodes

    n = 40
    train, val, test = np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, bool)
    train[:6], val[10:18], test[20:36] = True, True, True
    pool = erasable_nodes("evaluation", train, val, test)
    assert np.array_equal(pool, val | test)
    assert np.array_equal(erasable_nodes("unlabelled", train, val, test), ~train)
    assert np.array_equal(missing_features_mask(train, 100, 0, pool), val | test)
    half = missing_features_mask(train, 50, 4, pool)
    assert half.sum() == 12 and not (half & ~pool).any()
    chosen = np.random.default_rng(4).choice(np.flatnonzero(pool), size=12, replace=False)
    assert np.array_equal(np.flatnonzero(half), np.sort(chosen))
    with pytest.raises(ValueError, match=r"unknown missing-features pool 'labelled'; allowed: unlabelled, evaluation"):
        erasable_nodes("labelled", train, val, test)
    with pytest.raises(ValueError, match=r"erasable nodes of shape \(39,\) do not fit \(40,\) nodes"):
        missing_features_mask(train, 10, 0, pool[:-1])


def test_mask_path_of_a_pool_is_a_folder_of_its_own(tmp_path):
    assert mask_path(tmp_path, "cora", 100, 3) == tmp_path / "masks" / "cora" / "rate100_seed3.npy"
    assert mask_path(tmp_path, "cora", 100, 3, "evaluation") == tmp_path / "masks" / "cora" / "evaluation" / "rate100_seed3.npy"
    with pytest.raises(ValueError, match="unknown missing-features pool 'all'"):
        mask_path(tmp_path, "cora", 100, 3, "all")
