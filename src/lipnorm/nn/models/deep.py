"""The deep node-classification networks built from the attention layers.

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

With recipe="official" (`ModelConfig.recipe`), `DeepGAT` is instead the network of the
authors' `models/deepgat.py` (see `DeepGAT`): Linear(in, D) (one head's width, not H*D),
the first attention layer taking D inputs and the later ones H*D, PyG's Glorot
initialisation of the attention layers.

Architectures and representation normalisations are looked up in `lipnorm.registry`
(a model name is `<architecture>[-lip][-<norm>]`); an architecture registered with a
layer factory is stacked by `DeepNet` as the deep models are.
"""

from __future__ import annotations

from typing import Any

import dgl
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from lipnorm import registry
from lipnorm.nn.conv.gat import GATConv
from lipnorm.nn.conv.gt import GTConv
from lipnorm.nn.models.init import pyg_glorot_
from lipnorm.nn.models.literature import LiteratureGAT
from lipnorm.nn.norm import add_norms, representation_norms
from lipnorm.nn.models.numbering import NumberedLayer
from lipnorm.nn.models.snr import SNRGAT
from lipnorm.nn.residual import initial_residual
from lipnorm.settings.model_config import (
    DGN_SKIP_WEIGHT,
    NO_GT_RESIDUAL,
    ModelConfig,
    check_initial_residual,
    check_recipe,
)
from lipnorm.settings.recipes import RECIPES


class _DeepAttentionNet(nn.Module):
    """Input Linear, `depth` graph layers, output Linear (see the module docstring).

    `attention_norm`: `none` or `lip` (LipschitzNorm in the attention layers, for an
    architecture registered with `lip=True`); `norm`: `none` or a registered
    representation normalisation (`pairnorm`, ...) after each layer.
    `feat_drop`/`attn_drop` None = the architecture's default.
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
        attention_norm: str = "none",
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
        check_initial_residual(initial_residual)
        # Raises on an unknown value, or a combination the architecture does not have.
        model_name = registry.compose_model(self.architecture, attention_norm, norm)
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
                attention_norm=attention_norm,
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
            attention_norm=attention_norm, norm=norm,
            batchnorm_momentum=batchnorm_momentum, dgn_skip_weight=dgn_skip_weight,
        )
        add_norms(self, config, [width] * depth)
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
            attention_norm=cfg.attention_norm,
            norm=cfg.norm,
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
        self, in_feats: int, out_feats: int, heads: int, residual: bool, *, attention_norm: str, **options: Any
    ) -> nn.Module:
        """One graph layer; `attention_norm` is what the layers take as `norm` (DGL-style)."""
        raise NotImplementedError

    _norms = representation_norms

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

    def _make_layer(self, in_feats, out_feats, heads, residual, *, attention_norm, **options):
        return self._layer_factory(
            in_feats, out_feats, heads, attention_norm=attention_norm, residual=residual, **options
        )


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
                check_recipe(recipe, "gat", True)
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
    def from_config(cls, cfg: ModelConfig, **options: Any) -> DeepGAT | LiteratureGAT | SNRGAT:
        """The network of a resolved `cfg`: with recipe "dgn", the literature's
        (`LiteratureGAT`); with recipe "snr", SNR's (`SNRGAT`); validate() allows recipe
        "official" for OFFICIAL_MODELS only."""
        if cfg.recipe == "dgn":
            return LiteratureGAT.from_config(cfg)
        if cfg.recipe == "snr":
            return SNRGAT.from_config(cfg)
        return super().from_config(cfg, recipe=cfg.recipe, **options)

    def _make_layer(self, in_feats, out_feats, heads, residual, *, attention_norm, **options):
        return GATConv(in_feats, out_feats, heads, residual=residual, norm=attention_norm, **options)


class DeepGT(_DeepAttentionNet):
    """Deep graph transformer of the LipschitzNorm paper (each layer has its skip projection)."""

    architecture = "gt"

    def _make_layer(self, in_feats, out_feats, heads, residual, *, attention_norm, **options):
        if residual:
            raise ValueError(NO_GT_RESIDUAL)
        return GTConv(in_feats, out_feats, heads, skip=True, norm=attention_norm, **options)
