"""Graph attention layers with LipschitzNorm, the deep models built from them, and
LipschitzNorm as functions for other attention layers (`lipnorm.nn.functional`).

    from lipnorm.nn import GATConv, GTConv, PairNorm
    from lipnorm.nn.functional import lipschitz_norm_linear, lipschitz_norm_dot_product
"""

from lipnorm.nn.conv.base import ZeroInDegreeError
from lipnorm.nn.conv.gat import GATConv
from lipnorm.nn.conv.gt import GTConv
from lipnorm.nn.functional import lipschitz_norm_dot_product, lipschitz_norm_linear
from lipnorm.nn.models.build import build_model
from lipnorm.nn.models.classic import ClassicGAT
from lipnorm.nn.models.deep import DeepGAT, DeepGT
from lipnorm.nn.norm.pairnorm import PairNorm
from lipnorm.settings.model_config import ModelConfig

__all__ = [
    "GATConv",
    "GTConv",
    "PairNorm",
    "ZeroInDegreeError",
    "DeepGAT",
    "DeepGT",
    "ClassicGAT",
    "MODEL_NAMES",
    "ModelConfig",
    "build_model",
    "lipschitz_norm_linear",
    "lipschitz_norm_dot_product",
]


def __getattr__(name: str):
    # The registry's model names, as of now (a plugin adds some): lipnorm.settings.model_config's.
    if name == "MODEL_NAMES":
        from lipnorm.settings import model_config as config

        return config.MODEL_NAMES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
