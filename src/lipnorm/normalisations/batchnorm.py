"""`batchnorm`: BatchNorm over the nodes of the graph, one of the literature's remedies
for deep GNNs (`lipnorm.nn.norm.batchnorm.BatchNorm`)."""

from __future__ import annotations

from lipnorm.registry.register import register_norm


def batchnorm_layer(width: int, config):
    """The factory of `batchnorm`: `BatchNorm(width)` with the model's
    `batchnorm_momentum` (torch's 0.1, the "dgn" recipe's 0.3). The layer (torch) is
    imported here, when a model is built."""
    from lipnorm.nn.norm.batchnorm import BatchNorm

    return BatchNorm(width, momentum=config.batchnorm_momentum)


register_norm(
    "batchnorm", label="BatchNorm", colour="#56b4e9", lip_colour="#0072b2",
    factory=batchnorm_layer,
)
