"""Node-classification models built from the attention layers, and their configuration.

Deep models (`DeepGAT`, `DeepGT`), as in the LipschitzNorm authors' code:

    x -> Linear(in, H*D) = h0 -> L x [dropout(feat_drop) -> attention layer (heads
    concatenated) -> initial residual (if any: (1 - a) h + a h0, GCNII's) -> ELU (not
    after the last layer) -> normalisation (if any: PairNorm, BatchNorm, DGN, ...)]
    -> Linear(H*D, classes)

With `checkpoint=True` each bracketed block but the last is recomputed in the backward
pass (activation checkpointing, `torch.utils.checkpoint`, non-reentrant, RNG state
kept), so a training forward keeps one `(N, H*D)` tensor per layer instead of the
block's intermediates, and computes exactly the same numbers. (The backward pass would
recompute the last block first thing, so keeping its intermediates instead costs no
peak memory and saves one block's recomputation.) During that recomputation the
model's `recomputing` is True; a representation normalisation's buffers (BatchNorm's
running statistics) are restored after it, so they are updated once per step.

The classic GAT (`ClassicGAT`, model name "gat-classic") is Velickovic et al.'s network
as in DGL's Cora example: depth-1 hidden attention layers (8 heads x 8 features, inputs
and attention dropped out with p=0.6, ELU, heads concatenated), then one output attention
layer with a single head producing the logits. depth=2 is the published architecture.

With recipe="official" (`ModelConfig.recipe`), `DeepGAT` is instead the network of the
authors' `models/deepgat.py` (see `DeepGAT`): Linear(in, D) (one head's width, not H*D),
the first attention layer taking D inputs and the later ones H*D, PyG's Glorot
initialisation of the attention layers.

Architectures and representation normalisations are looked up in `lipnorm.registry`
(a model name is `<architecture>[-lip][-<norm>]`); an architecture registered with a
layer factory is stacked by `DeepNet` as the deep models are.

Layer numbering for gradient logging (`gradient_groups`, `attention_layers`):

- deep models: 0 = input Linear (kind "input"), 1..L = attention (graph) layers
  ("attention"), L+1 = output Linear ("output");
- gat-classic: 0..L-2 = hidden attention layers ("attention"), L-1 = output attention
  layer ("output"); it has no Linear layers.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import dgl
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from lipnorm import registry
from lipnorm.nn.gat import GATConv
from lipnorm.nn.gt import VARIANTS, GTConv
from lipnorm.nn.norms import DGN_SKIP_WEIGHT
from lipnorm.nn.pairnorm import PairNorm
from lipnorm.nn.residual import initial_residual
from lipnorm.nn.row_pruned import RowPruned, row_pruned

from lipnorm.recipes import RECIPES
# The models the authors' DeepGAT has (its norm=None, "lipschitznorm", "pairnorm").
OFFICIAL_MODELS = ("gat", "gat-lip", "gat-pairnorm")
GROUPS = (*registry.PARAMETER_GROUPS, "all")


def deep_norms() -> dict[str, str]:
    """Model name -> its `norm` option as the deep models spell it (`none`, `lip`,
    `pairnorm`, `lip+pairnorm`, ...)."""
    return {name: _norm_option(*registry.parse_model(name)[1:]) for name in registry.model_names()}


def _norm_option(attention_norm: str, norm: str) -> str:
    parts = [part for part in (attention_norm, norm) if part != "none"]
    return "+".join(parts) or "none"


def norm_options() -> tuple[str, ...]:
    """The deep models' `norm` options: `none`, `lip`, then each normalisation without
    and with LipschitzNorm."""
    return tuple(
        _norm_option(attention_norm, norm)
        for norm in registry.norm_names()
        for attention_norm in registry.ATTENTION_NORMS
    )


def default_dropout() -> dict[str, tuple[float, float]]:
    """Architecture -> (feature dropout, attention dropout) by default."""
    return {name: registry.architecture(name).dropout for name in registry.architecture_names()}


# The registry-derived lists, computed on access so that a plugin's entries appear.
_DERIVED = {
    "MODEL_NAMES": registry.model_names,
    "DEEP_NORMS": deep_norms,
    "NORMS": norm_options,
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
    # The remedies' normalisations (lipnorm.nn.norms): BatchNorm's momentum, DGN's lambda.
    batchnorm_momentum: float = 0.1
    dgn_skip_weight: float = DGN_SKIP_WEIGHT
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
        return combine_parts(self.model, self.architecture, self.attention_norm, self.norm)

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
            raise ValueError(f"model {self.model!r}: {_NO_GT_RESIDUAL}")
        _check_initial_residual(self.initial_residual)
        if self.initial_residual and (self.recipe == "official" or architecture == "gat-classic"):
            raise ValueError(
                f"initial_residual={self.initial_residual!r} needs the deep models' input Linear "
                f"as wide as the layers; model {self.model!r} with recipe {self.recipe!r} has none"
            )
        _check_recipe(self.recipe, registry.compose_model(*self.parts()), self.residual)
        if not isinstance(self.checkpoint, bool):
            raise ValueError(f"checkpoint must be true or false, got {self.checkpoint!r}")
        if self.checkpoint and not registry.architecture(architecture).checkpointable:
            checkpointed = [name for name, entry in registry.ARCHITECTURES.items() if entry.checkpointable]
            raise ValueError(_no_checkpoint(
                self.model, f"architecture {architecture!r} is not registered with checkpointable=True "
                f"(those that are: {', '.join(checkpointed)})"
            ))
        if self.checkpoint and self.recipe == "dgn":
            raise ValueError(_no_checkpoint(self.model, "recipe 'dgn' builds the literature's GAT network, which has none"))
        if not (math.isfinite(self.batchnorm_momentum) and 0 <= self.batchnorm_momentum <= 1):
            raise ValueError(f"batchnorm_momentum must be a number in [0, 1], got {self.batchnorm_momentum!r}")
        if not math.isfinite(self.dgn_skip_weight):
            raise ValueError(f"dgn_skip_weight must be a finite number, got {self.dgn_skip_weight!r}")
        PairNorm(self.pairnorm_mode, self.pairnorm_scale)  # raises on a bad mode or scale


def combine_parts(
    model: str, architecture: str | None, attention_norm: str | None, norm: str | None
) -> tuple[str, str, str]:
    """`model`'s `(architecture, attention_norm, norm)` with each one given instead of
    its part; ValueError naming a value the registry does not have, or a combination
    the architecture does not take."""
    parsed = registry.parse_model(model)
    given = (architecture, attention_norm, norm)
    parts = tuple(part if value is None else value for value, part in zip(given, parsed))
    registry.compose_model(*parts)  # raises on an unknown part or combination
    return parts


def _check_initial_residual(alpha: float) -> None:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not (math.isfinite(alpha) and 0 <= alpha < 1):
        raise ValueError(f"initial_residual must be a number in [0, 1) (0: off), got {alpha!r}")


def _check_recipe(recipe: str, model: str, residual: bool) -> None:
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


def pyg_glorot_(tensor: torch.Tensor) -> torch.Tensor:
    """PyG's `glorot` (torch_geometric/nn/inits.py), in place: uniform on
    ``[-b, b]``, ``b = sqrt(6 / (size(-2) + size(-1)))``, over the last two dimensions
    of the tensor as it is stored. Not torch's `xavier_uniform_`, whose fans of a 3-d
    tensor such as an ``(1, H, D)`` attention vector differ."""
    bound = math.sqrt(6.0 / (tensor.size(-2) + tensor.size(-1)))
    with torch.no_grad():
        return tensor.uniform_(-bound, bound)


def _no_checkpoint(model: str, reason: str) -> str:
    return f"checkpoint=True: model {model!r} has no checkpointed blocks: {reason}"


_NO_GT_RESIDUAL = (
    "residual=True is not available for GT models, whose layers always carry their skip "
    "projection; residual applies to the GAT models"
)


def _add_norms(model: nn.Module, config: ModelConfig, widths: list[int]) -> None:
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


def _representation_norms(model: nn.Module) -> nn.ModuleList | None:
    """The per-layer normalisations `_add_norms` gave `model` (None without any)."""
    return None if model.norm_attribute is None else getattr(model, model.norm_attribute)


class NumberedLayer(NamedTuple):
    """One layer of a model as gradient logging sees it."""

    index: int
    kind: str  # input | attention | output
    module: nn.Module
    norm: nn.Module | None  # the representation normalisation applied after it, if any
    graph_layer: bool = False  # a message-passing layer: its outputs are logged


class _DeepAttentionNet(nn.Module):
    """Input Linear, `depth` graph layers, output Linear (see the module docstring).

    `norm`: `none`, `lip`, a registered normalisation (`pairnorm`) or `lip+<it>`
    (`norm_options`). `feat_drop`/`attn_drop` None = the architecture's default.
    """

    architecture: str  # a name in lipnorm.registry

    def __init__(
        self,
        in_feats: int,
        num_classes: int,
        *,
        depth: int = 2,
        heads: int = 8,
        hidden: int = 8,
        norm: str = "none",
        alpha: float = 1.0,
        variant: str = "paper",
        residual: bool = False,
        feat_drop: float | None = None,
        attn_drop: float | None = None,
        pairnorm_mode: str | None = "PN",
        pairnorm_scale: float = 1.0,
        initial_residual: float = 0.0,
        checkpoint: bool = False,
        input_width: int | None = None,
        batchnorm_momentum: float = 0.1,
        dgn_skip_weight: float = DGN_SKIP_WEIGHT,
    ):
        super().__init__()
        _check_initial_residual(initial_residual)
        allowed = norm_options()
        if norm not in allowed:
            raise ValueError(f"unknown norm {norm!r}; allowed: {', '.join(allowed)}")
        parts = norm.split("+")
        attention_norm = "lip" if "lip" in parts else "none"
        representation_norm = next((part for part in parts if part not in registry.ATTENTION_NORMS), "none")
        model_name = registry.compose_model(self.architecture, attention_norm, representation_norm)
        entry = registry.architecture(self.architecture)
        default_feat, default_attn = entry.dropout
        width = heads * hidden
        # Output size of the input Linear = input size of the first attention layer.
        input_width = width if input_width is None else input_width
        self.feat_drop = default_feat if feat_drop is None else feat_drop
        attn_drop = default_attn if attn_drop is None else attn_drop
        if initial_residual and input_width != width:
            raise ValueError(f"initial_residual needs the input Linear as wide as the layers ({input_width} != {width})")
        self.initial_residual = float(initial_residual)
        self.checkpoint = checkpoint
        # True while a block is recomputed in the backward pass (checkpointing); hooks
        # that must record once per step can skip then.
        self.recomputing = False
        self._in_forward = False
        self.parameter_groups = dict(entry.parameter_groups)
        self.returns_attention = entry.attention
        self.input_fc = nn.Linear(in_feats, input_width)
        self.layers = nn.ModuleList(
            self._make_layer(
                input_width if i == 0 else width,
                hidden,
                heads,
                residual,
                norm=attention_norm,
                alpha=alpha,
                variant=variant,
                attn_drop=attn_drop,
            )
            for i in range(depth)
        )
        config = ModelConfig(
            model=model_name, in_feats=in_feats, num_classes=num_classes, depth=depth,
            heads=heads, hidden=hidden, alpha=alpha, variant=variant, residual=residual,
            feat_drop=self.feat_drop, attn_drop=attn_drop, pairnorm_mode=pairnorm_mode,
            pairnorm_scale=pairnorm_scale, architecture=self.architecture,
            attention_norm=attention_norm, norm=representation_norm,
            batchnorm_momentum=batchnorm_momentum, dgn_skip_weight=dgn_skip_weight,
        )
        _add_norms(self, config, [width] * depth)
        self.output_fc = nn.Linear(width, num_classes)

    @classmethod
    def from_config(cls, cfg: ModelConfig, **options: Any) -> _DeepAttentionNet:
        """The network of a resolved `cfg`."""
        return cls(
            cfg.in_feats,
            cfg.num_classes,
            depth=cfg.depth,
            heads=cfg.heads,
            hidden=cfg.hidden,
            norm=_norm_option(cfg.attention_norm, cfg.norm),
            alpha=cfg.alpha,
            variant=cfg.variant,
            residual=cfg.residual,
            feat_drop=cfg.feat_drop,
            attn_drop=cfg.attn_drop,
            pairnorm_mode=cfg.pairnorm_mode,
            pairnorm_scale=cfg.pairnorm_scale,
            initial_residual=cfg.initial_residual,
            checkpoint=cfg.checkpoint,
            batchnorm_momentum=cfg.batchnorm_momentum,
            dgn_skip_weight=cfg.dgn_skip_weight,
            **options,
        )

    def _make_layer(
        self, in_feats: int, out_feats: int, heads: int, residual: bool, **options: Any
    ) -> nn.Module:
        raise NotImplementedError

    _norms = _representation_norms

    def forward(self, graph: dgl.DGLGraph, feat: torch.Tensor) -> torch.Tensor:
        h = h0 = self.input_fc(feat)
        recompute = self.checkpoint and self.training and torch.is_grad_enabled()
        self._in_forward = True
        try:
            for i in range(len(self.layers)):
                if recompute and i < len(self.layers) - 1:
                    h = checkpoint(self._block, i, graph, h, h0, use_reentrant=False, preserve_rng_state=True)
                else:
                    h = self._block(i, graph, h, h0)
        finally:
            self._in_forward = False
        return self.output_fc(h)

    def _block(self, i: int, graph: dgl.DGLGraph, h: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
        """Layer `i`'s block: dropout, attention layer, initial residual, ELU (not after
        the last layer), normalisation. Called outside `forward` it is being recomputed."""
        self.recomputing = not self._in_forward
        try:
            h = F.dropout(h, p=self.feat_drop, training=self.training)
            h = self.layers[i](graph, h).flatten(1)
            if self.initial_residual:
                h = initial_residual(h, h0, self.initial_residual)
            if i < len(self.layers) - 1:
                h = F.elu(h)
            norms = self._norms()
            if norms is not None:
                h = self._normalise(norms[i], graph, h)
            return h
        finally:
            self.recomputing = False

    def _normalise(self, norm: nn.Module, graph: dgl.DGLGraph, h: torch.Tensor) -> torch.Tensor:
        if not self.recomputing:
            return norm(graph, h)
        # The forward already updated the buffers (running statistics) this step. In a
        # finally: the recomputation stops early, by an exception, once it has what the
        # backward pass needs.
        saved = [buffer.clone() for buffer in norm.buffers()]
        try:
            return norm(graph, h)
        finally:
            with torch.no_grad():
                for buffer, value in zip(norm.buffers(), saved):
                    buffer.copy_(value)

    def numbered_layers(self) -> list[NumberedLayer]:
        norms = self._norms()
        norms = norms if norms is not None else [None] * len(self.layers)
        return [
            NumberedLayer(0, "input", self.input_fc, None),
            *(
                NumberedLayer(i, "attention", layer, norm, graph_layer=True)
                for i, (layer, norm) in enumerate(zip(self.layers, norms), start=1)
            ),
            NumberedLayer(len(self.layers) + 1, "output", self.output_fc, None),
        ]


def pairnorm_layer(width: int, config: ModelConfig) -> PairNorm:
    """The registered factory of `pairnorm`: PairNorm of `config`'s mode and scale."""
    return PairNorm(config.pairnorm_mode, config.pairnorm_scale)


class DeepNet(_DeepAttentionNet):
    """The deep network of an architecture registered with a layer factory
    (`lipnorm.registry.register_architecture(layer=...)`): the factory's layers stacked
    as the deep models' are (module docstring)."""

    def __init__(self, in_feats: int, num_classes: int, *, architecture: str, **options: Any):
        entry = registry.architecture(architecture)
        if entry.layer is None:
            raise ValueError(f"architecture {architecture!r} is registered with a model factory, not a layer factory")
        # Read by the base class's __init__ (before nn.Module allows attributes).
        self.__dict__["architecture"] = architecture
        self.__dict__["_layer_factory"] = registry.resolve(entry.layer)
        super().__init__(in_feats, num_classes, **options)

    @classmethod
    def from_config(cls, cfg: ModelConfig, **options: Any) -> DeepNet:
        return super().from_config(cfg, architecture=cfg.architecture, **options)

    def _make_layer(self, in_feats, out_feats, heads, residual, norm, **options):
        return self._layer_factory(in_feats, out_feats, heads, attention_norm=norm, residual=residual, **options)


class DeepGAT(_DeepAttentionNet):
    """Deep GAT of the LipschitzNorm paper; `residual` adds DGL-style residual connections.

    recipe="lipnorm" (default): the network of the module docstring, `Linear(in, H*D)`,
    attention layers initialised as DGL's GATConv (Xavier-normal, ReLU gain).

    recipe="official": the `DeepGAT` of the authors' public code
    (github.com/gdasoulas/LipschitzNorm, `models/deepgat.py`), choice by choice:

    - input `Linear(in, D)` (their `self.lin = nn.Linear(idim, hdim)`): D = `hidden`, the
      width of one head, not H*D; the first attention layer takes D inputs
      (`DeepGATConv(hdim, hdim, heads=heads)`), the later ones H*D
      (`DeepGATConv(heads * hdim, hdim, heads=heads)`); output `Linear(H*D, classes)`
      (`self.fc1 = nn.Linear(heads * hdim, odim)`). Both Linears keep PyTorch's default
      initialisation, as theirs do.
    - attention layers initialised as their `DeepGATConv.reset_parameters`: PyG's
      `glorot` on the projection and both attention vectors, computed on the shapes PyG
      stores (`lin_l.weight` ``(H*D, in)``, `att_l`/`att_r` ``(1, H, D)``), which are the
      shapes of our `fc.weight`, `attn_l`, `attn_r`; biases zero (`zeros(self.bias)`);
      the projection has no bias (`Linear(..., bias=False)`), as ours.
    - heads concatenated in every layer, the last included (`concat=True` default; the
      output Linear then maps H*D to the classes).
    - feature dropout 0.6 on the input of every attention layer (`F.dropout(h, p=0.6)` at
      the top of the loop; none before the input Linear or the output Linear), attention
      dropout 0.3 on the softmaxed scores (`dropout=0.3`): the deep-GAT defaults here too.
    - ELU after every attention layer but the last (`if i < self.num_layers - 1`), none
      after the input Linear; PairNorm (gat-pairnorm) after every layer, after the ELU.
    - no residual connections; LeakyReLU slope 0.2; self-loops removed then one added per
      node (their `remove_self_loops` + `add_self_loops`; our graphs are built so).
    - their forward returns `log_softmax` and the loss is `CrossEntropyLoss` on it; as
      log_softmax of log-probabilities is the identity, that is the cross-entropy of the
      logits this model returns, and the argmax is the same.
    - models: their norm None ("gat"), "lipschitznorm" ("gat-lip", with the normaliser of
      `GATConv(variant="official")`) and "pairnorm" ("gat-pairnorm", PairNorm "PN").
    """

    architecture = "gat"

    def __init__(self, in_feats: int, num_classes: int, *, recipe: str = "lipnorm", **options: Any):
        if recipe not in RECIPES:
            raise ValueError(f"unknown recipe {recipe!r}; allowed: {', '.join(RECIPES)}")
        if recipe == "official":
            if options.get("residual"):
                _check_recipe(recipe, "gat", True)
            options["input_width"] = options.get("hidden", 8)
        super().__init__(in_feats, num_classes, **options)
        self.recipe = recipe
        if recipe == "official":
            for layer in self.layers:
                pyg_glorot_(layer.fc.weight)
                pyg_glorot_(layer.attn_l)
                pyg_glorot_(layer.attn_r)
                nn.init.zeros_(layer.bias)

    @classmethod
    def from_config(cls, cfg: ModelConfig, **options: Any) -> DeepGAT | LiteratureGAT:
        """The network of a resolved `cfg`: with recipe "dgn", the literature's
        (`LiteratureGAT`); validate() allows recipe "official" for OFFICIAL_MODELS only."""
        if cfg.recipe == "dgn":
            return LiteratureGAT.from_config(cfg)
        return super().from_config(cfg, recipe=cfg.recipe, **options)

    def _make_layer(self, in_feats, out_feats, heads, residual, **options):
        return GATConv(in_feats, out_feats, heads, residual=residual, **options)


class DeepGT(_DeepAttentionNet):
    """Deep graph transformer of the LipschitzNorm paper (each layer has its skip projection)."""

    architecture = "gt"

    def _make_layer(self, in_feats, out_feats, heads, residual, **options):
        if residual:
            raise ValueError(_NO_GT_RESIDUAL)
        return GTConv(in_feats, out_feats, heads, skip=True, **options)


def pyg13_attention_glorot_(attn: torch.Tensor) -> torch.Tensor:
    """PyG 1.3's GATConv initialisation of one attention half, in place.

    PyG 1.3.2 (the version DGN's and DeCorr's code pins) keeps one attention vector
    ``att`` of shape ``(1, H, 2 D)`` for the pair ``[W h_i; W h_j]`` and draws it with
    `glorot` over its last two dimensions: uniform on ``[-b, b]``, ``b = sqrt(6 / (H +
    2 D))``. Our ``attn_r``/``attn_l`` ``(1, H, D)`` are its two halves, so each is drawn
    with that bound (not ``sqrt(6 / (H + D))``, which `pyg_glorot_` on a half would give).
    """
    heads, out_feats = attn.shape[-2:]
    bound = math.sqrt(6.0 / (heads + 2 * out_feats))
    with torch.no_grad():
        return attn.uniform_(-bound, bound)


class LiteratureGAT(nn.Module):
    """The deep-GNN literature's GAT: DGN's `models/GAT.py` (github.com/Kaixiong-Zhou/DGN),
    which DeCorr and SNR reuse; built by `recipe="dgn"`.

    `depth` graph-attention layers and nothing else (no input or output Linear): the first
    maps the features to `heads` x `hidden` (1 x 16 in their code), the hidden ones keep
    that width, the last maps it to the classes with one head (depth 1: features to
    classes). Each layer, choice by choice as theirs:

    - feature dropout `feat_drop` (0.6) on the input of the first and of the last layer
      only (``if i == 0 or i == self.num_layers - 1: x = F.dropout(x)``); the first
      layer's input is dropped out and projected on its rows that can be non-zero
      (`lipnorm.nn.row_pruned`): the same distribution, a mask over those rows only;
    - the attention layer: no bias (``bias=False``), attention dropout `attn_drop` (0.6)
      on the softmaxed scores (PyG's ``dropout=``), LeakyReLU 0.2, heads concatenated,
      LipschitzNorm on its scores with ``attention_norm="lip"`` (`alpha`, `variant`);
    - then the representation normalisation of the model, if any (their ``layers_bn``:
      BatchNorm, PairNorm, DGN), then ReLU, after every layer, **the last included**:
      the logits are ReLU'd, as in DGN's code (DeCorr's drops that last ReLU; this
      follows DGN's);
    - PyG 1.3's initialisation: `pyg_glorot_` on the projection (uniform, bound
      ``sqrt(6 / (in + H D))``), `pyg13_attention_glorot_` on each attention half.

    The literature's other remedies, as this project defines them in this network:

    - `residual`: each hidden layer's input added to its attention output (identity skip,
      before the normalisation and ReLU); the first and last layers change width and have
      none, so at depth <= 2 the network is the plain one;
    - `initial_residual` a: each hidden layer's attention output mixed with the first
      layer's output h0 (after its normalisation and ReLU), ``(1 - a) h + a h0``, GCNII's
      initial residual with the first layer as the input embedding; no effect at depth <= 2;
    - DropEdge: the trainer's, on the graph (`lipnorm.nn.dropedge`).

    Layer numbering for gradient logging as gat-classic's: 0..L-2 hidden attention
    layers ("attention"), L-1 the output attention layer ("output").
    """

    def __init__(self, config: ModelConfig):
        """The network of a resolved `config` (recipe "dgn")."""
        super().__init__()
        in_feats, num_classes = config.in_feats, config.num_classes
        depth, width = config.depth, config.heads * config.hidden
        self.feat_drop = config.feat_drop
        self.initial_residual = float(config.initial_residual)
        self.parameter_groups = dict(registry.architecture("gat").parameter_groups)
        self.returns_attention = True
        options = dict(
            attn_drop=config.attn_drop, bias=False, norm=config.attention_norm, alpha=config.alpha,
            variant=config.variant,
        )
        layers = []
        for i in range(depth):
            last = i == depth - 1
            layers.append(GATConv(
                in_feats if i == 0 else width, num_classes if last else config.hidden, 1 if last else config.heads,
                residual=config.residual and 0 < i < depth - 1, **options,
            ))
        self.layers = nn.ModuleList(layers)
        for layer in self.layers:
            pyg_glorot_(layer.fc.weight)
            pyg13_attention_glorot_(layer.attn_l)
            pyg13_attention_glorot_(layer.attn_r)
        _add_norms(self, config, [width] * (depth - 1) + [num_classes])

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> LiteratureGAT:
        """The network of a resolved `cfg` (recipe "dgn")."""
        return cls(cfg)

    _norms = _representation_norms

    def forward(self, graph: dgl.DGLGraph, feat: torch.Tensor) -> torch.Tensor:
        norms = self._norms()
        last = len(self.layers) - 1
        h, h0 = feat, None
        for i, layer in enumerate(self.layers):
            if i == 0:  # depth 1: dropped out once
                h = self._first_input(feat)
            elif i == last:
                h = F.dropout(h, p=self.feat_drop, training=self.training)
            h = layer(graph, h).flatten(1)
            if h0 is not None and self.initial_residual and i < last:
                h = initial_residual(h, h0, self.initial_residual)
            if norms is not None:
                h = norms[i](graph, h)
            h = F.relu(h)
            if i == 0:
                h0 = h
        return h

    def _first_input(self, feat: torch.Tensor) -> RowPruned:
        """The first layer's input, dropped out and given by its rows that can be non-zero:
        with missing features most are erased (`lipnorm.nn.row_pruned`)."""
        pruned = row_pruned(feat)
        return pruned._replace(values=F.dropout(pruned.values, p=self.feat_drop, training=self.training))

    def numbered_layers(self) -> list[NumberedLayer]:
        norms = self._norms()
        norms = norms if norms is not None else [None] * len(self.layers)
        last = len(self.layers) - 1
        return [
            NumberedLayer(i, "output" if i == last else "attention", layer, norm, graph_layer=True)
            for i, (layer, norm) in enumerate(zip(self.layers, norms))
        ]


class ClassicGAT(nn.Module):
    """Velickovic et al.'s GAT (see the module docstring); depth counts attention layers.

    `feat_drop`/`attn_drop` None = the published 0.6.
    """

    def __init__(
        self,
        in_feats: int,
        num_classes: int,
        *,
        depth: int = 2,
        heads: int = 8,
        hidden: int = 8,
        alpha: float = 1.0,
        variant: str = "paper",
        residual: bool = False,
        feat_drop: float | None = None,
        attn_drop: float | None = None,
    ):
        super().__init__()
        default_feat, default_attn = registry.architecture("gat-classic").dropout
        options = dict(
            alpha=alpha,
            variant=variant,
            residual=residual,
            feat_drop=default_feat if feat_drop is None else feat_drop,
            attn_drop=default_attn if attn_drop is None else attn_drop,
        )
        width = heads * hidden
        self.layers = nn.ModuleList(
            GATConv(in_feats if i == 0 else width, hidden, heads, **options)
            for i in range(depth - 1)
        )
        self.layers.append(GATConv(in_feats if depth == 1 else width, num_classes, 1, **options))

    def forward(self, graph: dgl.DGLGraph, feat: torch.Tensor) -> torch.Tensor:
        h = feat
        for layer in self.layers[:-1]:
            h = F.elu(layer(graph, h).flatten(1))
        return self.layers[-1](graph, h).mean(1)

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> ClassicGAT:
        """The network of a resolved `cfg`."""
        return cls(
            cfg.in_feats, cfg.num_classes, depth=cfg.depth, heads=cfg.heads, hidden=cfg.hidden,
            alpha=cfg.alpha, variant=cfg.variant, residual=cfg.residual, feat_drop=cfg.feat_drop,
            attn_drop=cfg.attn_drop,
        )

    def numbered_layers(self) -> list[NumberedLayer]:
        last = len(self.layers) - 1
        return [
            NumberedLayer(i, "output" if i == last else "attention", layer, None, graph_layer=True)
            for i, layer in enumerate(self.layers)
        ]


def build_model(cfg: ModelConfig) -> nn.Module:
    """The model `cfg` describes (its architecture's registered factory); raises
    ValueError on an invalid configuration."""
    cfg = cfg.resolved()
    entry = registry.architecture(cfg.architecture)
    if entry.layer is not None:
        return DeepNet.from_config(cfg)
    model = registry.resolve(entry.model)(cfg)
    if cfg.checkpoint and not getattr(model, "checkpoint", False):
        raise ValueError(_no_checkpoint(
            cfg.model, f"architecture {cfg.architecture!r} is registered with checkpointable=True, but its "
            f"model factory built a {type(model).__name__} without a true `checkpoint` attribute (the "
            "network's word that it recomputes its blocks in the backward pass)"
        ))
    return model


def _numbered_layers(model: nn.Module) -> list[NumberedLayer]:
    if not hasattr(model, "numbered_layers"):
        raise ValueError(
            f"{type(model).__name__} has no numbered layers; allowed: DeepGAT, DeepGT, ClassicGAT, "
            "DeepNet, or a registered model with numbered_layers()"
        )
    return model.numbered_layers()


def _group_of(name: str, declared: dict[str, str] | None = None) -> str:
    """Gradient group of a parameter of an attention layer or Linear, by its name there.

    `declared` (a registered architecture's `parameter_groups`) first: a parameter's
    name, or a prefix ending in `.`, mapped to its group. Then the rules: the residual
    (GAT `res_fc`) or skip (GT `fc_skip`) projection is one group, bias included; the
    other biases form `bias`, projection weights (GAT `fc`, GT `fc_q`/`fc_k`/`fc_v`, a
    Linear's `weight`) form `fc`.
    """
    for key, group in (declared or {}).items():
        if name == key or (key.endswith(".") and name.startswith(key)):
            return group
    if name.startswith(("res_fc.", "fc_skip.")):
        return "res"
    if name in ("attn_l", "attn_r"):
        return "attn"
    if name == "bias" or name.endswith(".bias"):
        return "bias"
    if name == "weight" or (name.startswith("fc") and name.endswith(".weight")):
        return "fc"
    raise ValueError(
        f"parameter {name!r} has no gradient group; known: res_fc.*, fc_skip.*, attn_l, "
        "attn_r, *bias, weight, fc*.weight; an architecture declares others with "
        f"lipnorm.registry.register_architecture(parameter_groups={{{name!r}: GROUP}}), "
        f"GROUP one of {', '.join(registry.PARAMETER_GROUPS)}"
    )


def gradient_groups(model: nn.Module) -> list[tuple[int, str, str, list[nn.Parameter]]]:
    """`(layer_index, kind, group, params)` for every layer and every non-empty group.

    Groups are `fc`, `attn`, `bias`, `res`, `norm` (the normalisation's parameters) and
    `all` (every parameter of the layer, its normalisation included); the others
    partition `all`.
    """
    entries = []
    covered: set[int] = set()
    declared = getattr(model, "parameter_groups", None)
    for layer in _numbered_layers(model):
        groups: dict[str, list[nn.Parameter]] = {group: [] for group in GROUPS}
        for name, param in layer.module.named_parameters():
            groups[_group_of(name, declared)].append(param)
        if layer.norm is not None:
            groups["norm"].extend(layer.norm.parameters())
        groups["all"] = [param for group in GROUPS[:-1] for param in groups[group]]
        covered.update(id(param) for param in groups["all"])
        entries.extend(
            (layer.index, layer.kind, group, params) for group, params in groups.items() if params
        )
    missing = [name for name, param in model.named_parameters() if id(param) not in covered]
    if missing:
        raise ValueError(f"parameters outside every numbered layer: {', '.join(missing)}")
    return entries


def attention_layers(model: nn.Module) -> list[tuple[int, nn.Module]]:
    """`(layer_index, module)` of every graph (attention) layer (gat-classic's output
    layer too), the layers `numbered_layers` marks `graph_layer`.

    A forward hook on the module sees the layer's output `(N, H, D)` (or `(N, W)`),
    before ELU and normalisation. A model none of whose layers is marked is a
    ValueError: its logging would record nothing.
    """
    layers = [(layer.index, layer.module) for layer in _numbered_layers(model) if layer.graph_layer]
    if not layers:
        raise ValueError(
            f"{type(model).__name__}.numbered_layers() marks no layer graph_layer=True: "
            "output norms and layer statistics would record nothing"
        )
    return layers


def returns_attention(model: nn.Module) -> bool:
    """Whether the model's graph layers return `(output, attention)` with
    `get_attention=True` (its architecture's `attention`; lipnorm's models do)."""
    return getattr(model, "returns_attention", True)
