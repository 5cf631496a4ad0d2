"""SNR's GAT network (Deep Graph Neural Networks via Flexible Subgraph Aggregation, 2023;
github.com/jingbo02/PSNR-GNN): the "snr" recipe's model."""

from __future__ import annotations

from typing import TYPE_CHECKING

import dgl
import torch
import torch.nn.functional as F
from torch import nn

from lipnorm import registry
from lipnorm.nn.conv.gat import GATConv
from lipnorm.nn.models.numbering import NumberedLayer

if TYPE_CHECKING:
    from lipnorm.settings.model_config import ModelConfig


class SNRGAT(nn.Module):
    """The GAT of SNR's missing-vector experiment (`psnrgnn/models/gat.py` at commit
    93e4e0d, with the plain residual of their earlier `dataprocess.py`), built by
    `recipe="snr"`. It shares no code with DGN's network (`LiteratureGAT`).

    - an input Linear (features to `hidden`), then `depth` attention layers of `heads`
      heads of `hidden` features, averaged over the heads (``h.mean(1)``), then an output
      Linear to the classes: no ReLU on the logits;
    - dropout `feat_drop` (0.5) on the input of the input Linear and of every attention
      layer, none before the output Linear; no attention dropout (`attn_drop` 0, DGL's
      GATConv default); attention layers with DGL's defaults (bias, LeakyReLU 0.2);
    - ELU after the input Linear and after the first attention layer only: their loop over
      the later layers applies none (``h = self.data_process.normalization(h)``, no
      activation);
    - `residual`: each attention layer's input added to its output (their ``res``,
      ``hidden_list[-1] + x``), the first layer's included (its input is the input
      Linear's output, of the same width);
    - LipschitzNorm on the attention scores with ``attention_norm="lip"`` (`alpha`,
      `variant`); `GATConv(fused=True)` (`lipnorm.kernels`);
    - DGL's initialisation drawn in their order: the layers are made as theirs (input
      Linear, attention layers, output Linear), then reset as theirs (attention layers,
      output Linear, input Linear), so that a seed gives their initial weights.

    Layer numbering for gradient logging as the deep models': 0 the input Linear, 1..L the
    attention layers, L+1 the output Linear.
    """

    def __init__(self, config: ModelConfig):
        """The network of a resolved `config` (recipe "snr")."""
        super().__init__()
        self.feat_drop = config.feat_drop
        self.residual = config.residual
        self.parameter_groups = dict(registry.architecture("gat").parameter_groups)
        self.returns_attention = True
        self.input_fc = nn.Linear(config.in_feats, config.hidden)
        self.layers = nn.ModuleList(
            GATConv(
                config.hidden, config.hidden, config.heads, attn_drop=config.attn_drop, norm=config.attention_norm,
                alpha=config.alpha, variant=config.variant, fused=True,
            )
            for _ in range(config.depth)
        )
        self.output_fc = nn.Linear(config.hidden, config.num_classes)
        for layer in self.layers:
            layer.reset_parameters()
        self.output_fc.reset_parameters()
        self.input_fc.reset_parameters()

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> SNRGAT:
        """The network of a resolved `cfg` (recipe "snr")."""
        return cls(cfg)

    def forward(self, graph: dgl.DGLGraph, feat: torch.Tensor) -> torch.Tensor:
        h = F.elu(self.input_fc(F.dropout(feat, p=self.feat_drop, training=self.training)))
        for i, layer in enumerate(self.layers):
            out = layer(graph, F.dropout(h, p=self.feat_drop, training=self.training)).mean(1)
            if self.residual:
                out = h + out
            h = F.elu(out) if i == 0 else out
        return self.output_fc(h)

    def numbered_layers(self) -> list[NumberedLayer]:
        last = len(self.layers) + 1
        return [
            NumberedLayer(0, "input", self.input_fc, None),
            *(NumberedLayer(i, "attention", layer, None, graph_layer=True) for i, layer in enumerate(self.layers, 1)),
            NumberedLayer(last, "output", self.output_fc, None),
        ]
