"""Construction of a model from its configuration: the architecture's registered factory."""

from __future__ import annotations

from torch import nn

from lipnorm import registry
from lipnorm.nn.models.deep import DeepNet
from lipnorm.settings.model_config import ModelConfig, no_checkpoint


def build_model(cfg: ModelConfig) -> nn.Module:
    """The model `cfg` describes (its architecture's registered factory); raises
    ValueError on an invalid configuration."""
    cfg = cfg.resolved()
    entry = registry.architecture(cfg.architecture)
    if entry.layer is not None:
        return DeepNet.from_config(cfg)
    model = registry.resolve(entry.model)(cfg)
    if cfg.checkpoint and not getattr(model, "checkpoint", False):
        raise ValueError(no_checkpoint(
            cfg.model, f"architecture {cfg.architecture!r} is registered with checkpointable=True, but its "
            f"model factory built a {type(model).__name__} without a true `checkpoint` attribute (the "
            "network's word that it recomputes its blocks in the backward pass)"
        ))
    return model
