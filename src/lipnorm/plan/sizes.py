"""The sizes a run's cost grows with, of each dataset: registered, csbm's from its
parameters, or a plugin's counted by loading it."""

from __future__ import annotations

from typing import Any

from lipnorm import registry
from lipnorm.registry import DatasetSizes
from lipnorm.settings.constants import DEFAULT_DATA_ROOT
from lipnorm.settings.csbm import csbm_params


def csbm_sizes(params: Any) -> DatasetSizes:
    """The sizes of the csbm graph of `params` (a `CSBMParams`, mapping or spec):
    both directions of each undirected edge, plus one self-loop per node."""
    params = csbm_params(params)
    intra, inter = params.edge_counts()
    return DatasetSizes(params.nodes, 2 * (intra + inter) + params.nodes, params.feature_dim, params.classes)


_LOADED_SIZES: dict[str, DatasetSizes] = {}


def dataset_sizes(name: str, csbm: Any = None, root: str = DEFAULT_DATA_ROOT, mirror: str | None = None) -> DatasetSizes:
    """The sizes of dataset `name`: registered ones as registered, a dataset generated from
    csbm parameters (its registered `options` take `csbm`: lipnorm's `csbm`) from `csbm`,
    else (a plugin's dataset without sizes) counted by loading it once per process."""
    entry = registry.dataset(name)
    if "csbm" in entry.options:
        return csbm_sizes(csbm)
    if entry.sizes is not None:
        return entry.sizes
    if name not in _LOADED_SIZES:
        from lipnorm.data import load_dataset

        data = load_dataset(name, root=root, mirror=mirror)
        labels = data.labels.shape[1] if data.multilabel else data.num_classes
        _LOADED_SIZES[name] = DatasetSizes(
            data.graph.num_nodes(), data.graph.num_edges(), int(data.features.shape[1]), int(labels)
        )
    return _LOADED_SIZES[name]
