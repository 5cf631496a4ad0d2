"""Datasets: fetch with raw-file verification, load as one NodeDataset, csbm
generation and missing-features masks.

torch, dgl and ogb are imported inside functions, so importing this package is cheap.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from lipnorm import registry
from lipnorm.data.csbm import CSBMParams, csbm_params, generate_csbm
from lipnorm.data.dataset import DatasetError, NodeDataset, dataset_from_parts
from lipnorm.data.masks import (
    apply_missing_features,
    erasable_nodes,
    load_mask,
    mask_path,
    missing_features_mask,
    save_mask,
)
from lipnorm.data.sources import MIRROR_ENV, SOURCES, UnpinnedChecksumWarning, prepared
from lipnorm.settings.constants import DEFAULT_DATA_ROOT, PLANETOID

# lipnorm's own datasets (a plugin's are in lipnorm.registry too).
DATASETS = registry.BUILTIN_DATASETS

__all__ = [
    "DATASETS", "PLANETOID", "MIRROR_ENV", "CSBMParams", "DatasetError", "NodeDataset",
    "UnpinnedChecksumWarning", "apply_missing_features", "csbm_params", "dataset_from_parts", "describe_dataset",
    "erasable_nodes", "fetch_dataset", "load_dataset", "load_mask", "mask_path", "missing_features_mask",
    "save_mask", "write_mask",
]


def _check_name(name: str) -> str:
    """`name` if it is registered (`lipnorm.registry`: these DATASETS and a plugin's)."""
    try:
        registry.dataset(name)
    except ValueError as err:
        raise DatasetError(str(err)) from None
    return name


def _registered_load(name: str):
    """The `load` function of a dataset a plugin registered; None for lipnorm's own."""
    load = registry.dataset(_check_name(name)).load
    return None if load is None else registry.resolve(load)


def fetch_dataset(
    name: str, root: str | os.PathLike = DEFAULT_DATA_ROOT, mirror=None, verify: bool = True
) -> Path | None:
    """Make sure the verified raw files of `name` are under `root`; return their folder.

    `mirror` (else $LIPNORM_DATA_MIRROR) is a local copy of the data servers; without
    one, DGL's / OGB's download code fetches the archive. csbm and the datasets a
    plugin registers need nothing: None.
    """
    if _check_name(name) == "csbm" or _registered_load(name) is not None:
        return None
    with prepared(SOURCES[name], root, mirror, verify) as folder:
        return folder


def load_dataset(
    name: str,
    root: str | os.PathLike = DEFAULT_DATA_ROOT,
    mirror=None,
    verify: bool = True,
    csbm: "CSBMParams | dict | str | None" = None,
    raw_features: bool = False,
) -> NodeDataset:
    """Fetch `name` if needed, verify its raw files, and load it as a NodeDataset.

    `csbm` (a CSBMParams, a dict or a `key=value,...` spec) parametrises "csbm" only.

    `raw_features` applies to the planetoid datasets (`PLANETOID`) only: DGL's loader
    row-normalises their features, and True returns the rows as stored in the files
    (Cora, CiteSeer: binary bag-of-words; PubMed: TF-IDF), as PyG's `Planetoid` without
    transforms gives them. The other datasets' loaders return their features as stored,
    so there is nothing to undo and True is an error.

    A dataset a plugin registered (`lipnorm.registry.register_dataset(load=...)`) is
    built from what its `load()` returns (`dataset_from_parts`).
    """
    if raw_features and _check_name(name) not in PLANETOID:
        raise ValueError(
            f"raw_features=True applies to the planetoid datasets ({', '.join(PLANETOID)}), "
            f"whose DGL loader row-normalises the features; {name!r} is loaded with its "
            "features as stored already"
        )
    if _check_name(name) == "csbm":
        return generate_csbm(csbm_params(csbm))
    if csbm is not None:
        raise ValueError(f"csbm parameters were given for dataset {name!r}; they apply only to csbm")
    load = _registered_load(name)
    if load is not None:
        return dataset_from_parts(name, load())
    from lipnorm.data import loaders

    source = SOURCES[name]
    with prepared(source, root, mirror, verify) as folder:
        if name in PLANETOID:
            return loaders.load_planetoid(name, folder.parent, raw_features=raw_features)
        if name == "coauthor-cs":
            return loaders.load_coauthor_cs(folder.parent)
        if name == "ppi":
            return loaders.load_ppi(folder.parent)
        return loaders.load_ogbn_arxiv(folder.parent)


def describe_dataset(name: str, root=DEFAULT_DATA_ROOT, mirror=None, csbm=None) -> dict[str, Any]:
    """Counts of a loaded dataset: nodes, edges (as published, and in our graph),
    features, classes, split sizes, multilabel, metric."""
    return load_dataset(name, root, mirror, csbm=csbm).info()


def write_mask(
    out: str | os.PathLike, name: str, rate: float, seed: int, root=DEFAULT_DATA_ROOT, mirror=None, csbm=None,
    pool: str = "unlabelled",
) -> Path:
    """Compute the missing-features mask of `name` for (rate, seed), drawn from the nodes
    of `pool` (`erasable_nodes`), and save it to `out`."""
    dataset = load_dataset(name, root, mirror, csbm=csbm)
    erasable = erasable_nodes(pool, dataset.train_mask, dataset.val_mask, dataset.test_mask)
    return save_mask(out, missing_features_mask(dataset.train_mask.numpy(), rate, seed, erasable))
