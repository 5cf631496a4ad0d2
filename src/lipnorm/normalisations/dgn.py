"""`dgn`: differentiable group normalisation (Zhou et al., NeurIPS 2020), one of the
literature's remedies for deep GNNs (`lipnorm.nn.norm.dgn.DiffGroupNorm`)."""

from __future__ import annotations

from lipnorm.registry.register import register_norm


def dgn_layer(width: int, config):
    """The factory of `dgn`: `DiffGroupNorm(width)` with G = 10 and lambda = the model's
    `dgn_skip_weight` (`DGN_SKIP_WEIGHT` by default, the authors' value for GAT with
    missing features on Cora and CiteSeer; the "dgn" recipe's is theirs per dataset,
    `lipnorm.settings.recipes.dgn_skip_weight`). The layer (torch) is imported here, when
    a model is built."""
    from lipnorm.nn.norm.dgn import DiffGroupNorm

    return DiffGroupNorm(width, skip_weight=config.dgn_skip_weight)


register_norm(
    "dgn", label="DGN", colour="#fbafe4", lip_colour="#cc79a7",
    factory=dgn_layer,
)
