"""The deep-GNN literature's GAT network (DGN's code, which DeCorr's follows): the "dgn"
recipe's model."""

from __future__ import annotations

from typing import TYPE_CHECKING

import dgl
import torch
import torch.nn.functional as F
from torch import nn

from lipnorm import registry
from lipnorm.nn.conv.gat import GATConv
from lipnorm.nn.models.init import pyg13_attention_glorot_, pyg_glorot_
from lipnorm.nn.norm import add_norms, representation_norms
from lipnorm.nn.models.numbering import NumberedLayer
from lipnorm.nn.residual import initial_residual
from lipnorm.nn.row_pruned import RowPruned, row_pruned

if TYPE_CHECKING:
    from lipnorm.settings.model_config import ModelConfig


class LiteratureGAT(nn.Module):
    """The deep-GNN literature's GAT: DGN's `models/GAT.py` (github.com/Kaixiong-Zhou/DGN),
    which DeCorr's follows; built by `recipe="dgn"` (SNR's own network is `SNRGAT`).

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
      `GATConv(fused=True)`: its attention in one compiled kernel (`lipnorm.kernels`);
    - then the representation normalisation of the model, if any (their ``layers_bn``:
      BatchNorm, PairNorm, DGN), then ReLU, after every layer, **the last included**:
      the logits are ReLU'd, as in DGN's code; ``output_relu=False`` drops that last ReLU,
      as DeCorr's GAT does (github.com/ChandlerBang/DeCorr, `models/GAT.py`:
      ``if i != self.num_layers-1: x = F.relu(x)``);
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
        self.output_relu = config.output_relu
        self.parameter_groups = dict(registry.architecture("gat").parameter_groups)
        self.returns_attention = True
        options = dict(
            attn_drop=config.attn_drop, bias=False, norm=config.attention_norm, alpha=config.alpha,
            variant=config.variant, fused=True,
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
        add_norms(self, config, [width] * (depth - 1) + [num_classes])

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> LiteratureGAT:
        """The network of a resolved `cfg` (recipe "dgn")."""
        return cls(cfg)

    _norms = representation_norms

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
            if i < last or self.output_relu:
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
