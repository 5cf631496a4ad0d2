"""Representation normalisations applied after a layer, one a file: `pairnorm` (PairNorm),
`batchnorm` (BatchNorm), `dgn` (DiffGroupNorm); and here how a model gets them
(`add_norms`: the registered factory's modules, `lipnorm.registry`, one per layer) and
finds them again (`representation_norms`). Users import PairNorm from `lipnorm.nn`.
The normalisations are registered, with their factories, in `lipnorm.normalisations`
(one module each, importing its class from here inside the factory).

"norm" in lipnorm's settings and here is this, a representation normalisation; the
choice of LipschitzNorm on the attention scores is `attention_norm` (`GATConv`'s `norm`,
DGL's spelling of its constructor), and gradnorms/outnorms are measured vector norms."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch import nn

from lipnorm import registry

if TYPE_CHECKING:
    from lipnorm.settings.model_config import ModelConfig


def add_norms(model: nn.Module, config: ModelConfig, widths: list[int]) -> None:
    """Give `model` the representation normalisation `config.norm` after each of its
    layers, one module per width of `widths` (the registered factory's, as the attribute
    the registry names, `model.norm_attribute`); `norm_attribute` None without one.
    `pairnorms` is None unless the model has PairNorm (the attribute its modules always had)."""
    model.pairnorms = None
    model.norm_attribute = None
    entry = registry.norm(config.norm)
    if entry is not None:
        factory = registry.resolve(entry.factory)
        model.norm_attribute = entry.attribute
        setattr(model, entry.attribute, nn.ModuleList(factory(width, config) for width in widths))


def representation_norms(model: nn.Module) -> nn.ModuleList | None:
    """The per-layer normalisations `add_norms` gave `model` (None without any)."""
    return None if model.norm_attribute is None else getattr(model, model.norm_attribute)
