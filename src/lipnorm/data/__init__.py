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


def fetch_dataset(
    name: str, root: str | os.PathLike = DEFAULT_DATA_ROOT, mirror=None, verify: bool = True
) -> Path | None:
    """Make sure the verified raw files of `name` are under `root`; return their folder.

    `mirror` (else $LIPNORM_DATA_MIRROR) is a local copy of the data servers; without
    one, DGL's / OGB's download code fetches the archive. A dataset without raw files
    (csbm, generated; a plugin's, loaded by its `load`) needs nothing: None.
    """
    if registry.dataset(_check_name(name)).raw is None:
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

    What `name` is comes from the registry: lipnorm's own datasets are defined each in its
    module of `lipnorm.datasets` (its raw files, pinned sums and `read`); this fetches
    and verifies the raw files (`lipnorm.data.sources.prepared`) and calls `read` on
    the folder, holding its lock.

    `csbm` (a CSBMParams, a dict or a `key=value,...` spec) parametrises "csbm" only.

    `raw_features` applies to the planetoid datasets (`PLANETOID`) only: DGL's loader
    row-normalises their features, and True returns the rows as stored in the files
    (Cora, CiteSeer: binary bag-of-words; PubMed: TF-IDF), as PyG's `Planetoid` without
    transforms gives them. The other datasets' loaders return their features as stored,
    so there is nothing to undo and True is an error. (Each takes the options its
    registration names: `lipnorm.registry.register_dataset(options=...)`.)

    A dataset a plugin registered (`lipnorm.registry.register_dataset(load=...)`) is
    built from what its `load()` returns (`dataset_from_parts`).
    """
    entry = registry.dataset(_check_name(name))
    if raw_features and "raw_features" not in entry.options:
        takes = [other for other, each in registry.DATASETS.items() if "raw_features" in each.options]
        raise ValueError(
            f"raw_features=True applies to the planetoid datasets ({', '.join(takes)}), "
            f"whose DGL loader row-normalises the features; {name!r} is loaded with its "
            "features as stored already"
        )
    if csbm is not None and "csbm" not in entry.options:
        raise ValueError(f"csbm parameters were given for dataset {name!r}; they apply only to csbm")
    if entry.load is not None:
        return dataset_from_parts(name, registry.resolve(entry.load)())
    given = {"raw_features": raw_features, "csbm": csbm}
    options = {option: given[option] for option in entry.options}
    read = registry.resolve(entry.read)
    if entry.raw is None:
        return read(**options)
    with prepared(SOURCES[name], root, mirror, verify) as folder:
        return read(folder, **options)


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
