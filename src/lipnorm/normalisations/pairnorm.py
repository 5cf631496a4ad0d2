"""`pairnorm`: PairNorm (Zhao & Akoglu, ICLR 2020), `lipnorm.nn.norm.pairnorm.PairNorm`,
of the model's `pairnorm_mode` and `pairnorm_scale`."""

from __future__ import annotations

from lipnorm.registry.register import register_norm


def pairnorm_layer(width: int, config):
    """The factory of `pairnorm`: PairNorm of the model's `pairnorm_mode` and
    `pairnorm_scale` (`width` is not needed). The layer (torch) is imported here, when a
    model is built."""
    from lipnorm.nn.norm.pairnorm import PairNorm

    return PairNorm(config.pairnorm_mode, config.pairnorm_scale)


# seaborn's colour-blind palette; the LipschitzNorm combination's colour next to it. Its
# modules are the deep models' `pairnorms` (the attribute, and state-dict prefix, they
# always had).
register_norm(
    "pairnorm", label="PairNorm", colour="#029e73", lip_colour="#d55e00",
    factory=pairnorm_layer, attribute="pairnorms",
)
