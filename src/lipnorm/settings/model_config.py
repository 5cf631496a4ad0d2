"""The configuration of a model (`ModelConfig`: a model name of the registry, or its
parts, and its settings, validated and resolved), the lists derived from the registry
that name the models and their dropout defaults, and the values the layers' settings
take (`VARIANTS`, `PAIRNORM_MODES`, `DGN_SKIP_WEIGHT`), which `lipnorm.nn` imports from here.

Torch-free: a run's settings are checked before a network is built (`lipnorm train`
rejects a bad one without importing torch).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from lipnorm import registry
from lipnorm.settings.recipes import RECIPES

# LipschitzNorm's normaliser formula (`lipnorm.nn.functional`): the paper's, or the
# authors' public code's.
VARIANTS = ("paper", "official")
# PairNorm's modes (`lipnorm.nn.norm.pairnorm`); None is the identity.
PAIRNORM_MODES = (None, "PN", "PN-SI", "PN-SCS")
# DGN's lambda for GAT with 100 % missing features on Cora and CiteSeer (their
# options/base_options.py `reset_weight`): the setting of this project's deep experiments.
DGN_SKIP_WEIGHT = 0.01
# The models the authors' DeepGAT has (its norm=None, "lipschitznorm", "pairnorm").
OFFICIAL_MODELS = ("gat", "gat-lip", "gat-pairnorm")


def default_dropout() -> dict[str, tuple[float, float]]:
    """Architecture -> (feature dropout, attention dropout) by default."""
    return {name: registry.architecture(name).dropout for name in registry.architecture_names()}


# The registry-derived lists, computed on access so that a plugin's entries appear.
_DERIVED = {
    "MODEL_NAMES": registry.model_names,
    "_DEFAULT_DROPOUT": default_dropout,
}


def __getattr__(name: str):
    if name in _DERIVED:
        return _DERIVED[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass
class ModelConfig:
    """Everything needed to build a model; `feat_drop`/`attn_drop` None = the
    architecture's default (see `resolved`).

    `model` names a composition (`gat-lip-pairnorm`, see `lipnorm.registry`);
    `architecture`, `attention_norm` and `norm`, where given, replace that part of it.
    `resolved` fills all four consistently.
    """

    model: str
    in_feats: int
    num_classes: int
    depth: int = 2
    heads: int = 8
    hidden: int = 8
    alpha: float = 1.0
    variant: str = "paper"
    residual: bool = False
    feat_drop: float | None = None
    attn_drop: float | None = None
    pairnorm_mode: str | None = "PN"
    pairnorm_scale: float = 1.0
    recipe: str = "lipnorm"
    # GCNII's initial residual: each layer's output mixed with the input Linear's, weight a.
    initial_residual: float = 0.0
    # Activation checkpointing of the deep models' blocks (module docstring).
    checkpoint: bool = False
    # The remedies' normalisations (lipnorm.nn.norm): BatchNorm's momentum, DGN's lambda.
    batchnorm_momentum: float = 0.1
    dgn_skip_weight: float = DGN_SKIP_WEIGHT
    # The literature GAT's ReLU on the logits (recipe dgn: DGN's code has it, DeCorr's
    # drops it); the other networks have no such ReLU and take True only.
    output_relu: bool = True
    architecture: str | None = None
    attention_norm: str | None = None
    norm: str | None = None

    @classmethod
    def from_dict(cls, settings: dict[str, Any]) -> ModelConfig:
        fields = [field.name for field in dataclasses.fields(cls)]
        unknown = sorted(set(settings) - set(fields))
        if unknown:
            raise ValueError(
                f"unknown model setting(s) {', '.join(map(repr, unknown))}; "
                f"allowed: {', '.join(fields)}"
            )
        required = [
            field.name
            for field in dataclasses.fields(cls)
            if field.default is dataclasses.MISSING and field.name not in settings
        ]
        if required:
            raise ValueError(f"missing model setting(s): {', '.join(required)}")
        return cls(**settings)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def parts(self) -> tuple[str, str, str]:
        """`(architecture, attention_norm, norm)`: `model`'s, with the given ones instead."""
        return registry.model_parts(self.model, self.architecture, self.attention_norm, self.norm)

    def resolved(self) -> ModelConfig:
        """A validated copy with the model's parts and the dropout defaults of the
        architecture filled in."""
        self.validate()
        architecture, attention_norm, norm = self.parts()
        default_feat, default_attn = registry.architecture(architecture).dropout
        return dataclasses.replace(
            self,
            model=registry.compose_model(architecture, attention_norm, norm),
            architecture=architecture,
            attention_norm=attention_norm,
            norm=norm,
            feat_drop=default_feat if self.feat_drop is None else self.feat_drop,
            attn_drop=default_attn if self.attn_drop is None else self.attn_drop,
        )

    def validate(self) -> None:
        architecture, _, _ = self.parts()
        for name in ("in_feats", "num_classes", "depth", "heads", "hidden"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if not self.alpha >= 0:
            raise ValueError(f"alpha must be >= 0, got {self.alpha!r}")
        if self.variant not in VARIANTS:
            raise ValueError(f"unknown variant {self.variant!r}; allowed: {', '.join(VARIANTS)}")
        for name in ("feat_drop", "attn_drop"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < 1:
                raise ValueError(f"{name} must be in [0, 1) or None (default), got {value!r}")
        if self.residual and architecture == "gt":
            raise ValueError(f"model {self.model!r}: {NO_GT_RESIDUAL}")
        check_initial_residual(self.initial_residual)
        if self.initial_residual and (self.recipe in ("official", "snr") or architecture == "gat-classic"):
            raise ValueError(
                f"initial_residual={self.initial_residual!r} needs the deep models' input Linear "
                f"as wide as the layers; model {self.model!r} with recipe {self.recipe!r} has none"
            )
        check_recipe(self.recipe, registry.compose_model(*self.parts()), self.residual)
        if not isinstance(self.checkpoint, bool):
            raise ValueError(f"checkpoint must be true or false, got {self.checkpoint!r}")
        if self.checkpoint and not registry.architecture(architecture).checkpointable:
            checkpointed = [name for name, entry in registry.ARCHITECTURES.items() if entry.checkpointable]
            raise ValueError(no_checkpoint(
                self.model, f"architecture {architecture!r} is not registered with checkpointable=True "
                f"(those that are: {', '.join(checkpointed)})"
            ))
        if self.checkpoint and self.recipe in ("dgn", "snr"):
            raise ValueError(no_checkpoint(self.model, f"recipe {self.recipe!r} builds the literature's GAT network, which has none"))
        if not (math.isfinite(self.batchnorm_momentum) and 0 <= self.batchnorm_momentum <= 1):
            raise ValueError(f"batchnorm_momentum must be a number in [0, 1], got {self.batchnorm_momentum!r}")
        if not isinstance(self.output_relu, bool):
            raise ValueError(f"output_relu must be true or false, got {self.output_relu!r}")
        if not self.output_relu and self.recipe != "dgn":
            raise ValueError(
                f"output_relu=False applies to recipe 'dgn' (the literature GAT's ReLU on its logits), "
                f"not {self.recipe!r}, whose network has none"
            )
        if not math.isfinite(self.dgn_skip_weight):
            raise ValueError(f"dgn_skip_weight must be a finite number, got {self.dgn_skip_weight!r}")
        check_pairnorm(self.pairnorm_mode, self.pairnorm_scale)


def check_pairnorm(mode: str | None, scale: float) -> str | None:
    """PairNorm's `mode` (the string "None", as configuration files spell the identity
    the authors' way, is None), else ValueError naming a bad mode or scale."""
    mode = None if mode == "None" else mode
    if mode not in PAIRNORM_MODES:
        raise ValueError(f"unknown PairNorm mode {mode!r}; allowed: None, PN, PN-SI, PN-SCS")
    if not scale > 0:
        raise ValueError(f"PairNorm scale must be positive, got {scale}")
    return mode


def check_initial_residual(alpha: float) -> None:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not (math.isfinite(alpha) and 0 <= alpha < 1):
        raise ValueError(f"initial_residual must be a number in [0, 1) (0: off), got {alpha!r}")


def check_recipe(recipe: str, model: str, residual: bool) -> None:
    if recipe not in RECIPES:
        raise ValueError(f"unknown recipe {recipe!r}; allowed: {', '.join(RECIPES)}")
    if recipe == "official":
        if model not in OFFICIAL_MODELS:
            raise ValueError(
                f"recipe 'official' builds the authors' DeepGAT, which has no model {model!r}; "
                f"allowed with it: {', '.join(OFFICIAL_MODELS)}"
            )
        if residual:
            raise ValueError("recipe 'official' has no residual connections (their DeepGAT has none); got residual=True")
    if recipe == "dgn" and registry.parse_model(model)[0] != "gat":
        raise ValueError(
            f"recipe 'dgn' builds the literature's GAT network (DGN's models/GAT.py), not model "
            f"{model!r}; allowed with it: gat and its -lip/-<norm> forms"
        )
    if recipe == "snr" and registry.parse_model(model)[::2] != ("gat", registry.NO_NORM):
        raise ValueError(
            f"recipe 'snr' builds SNR's GAT network (their psnrgnn/models/gat.py, whose residual "
            f"row has no normalisation), not model {model!r}; allowed with it: gat, gat-lip"
        )


def no_checkpoint(model: str, reason: str) -> str:
    return f"checkpoint=True: model {model!r} has no checkpointed blocks: {reason}"


NO_GT_RESIDUAL = (
    "residual=True is not available for GT models, whose layers always carry their skip "
    "projection; residual applies to the GAT models"
)
