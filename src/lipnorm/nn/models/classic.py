"""The classic GAT (`ClassicGAT`, model name "gat-classic") is Velickovic et al.'s network
as in DGL's Cora example: depth-1 hidden attention layers (8 heads x 8 features, inputs
and attention dropped out with p=0.6, ELU, heads concatenated), then one output attention
layer with a single head producing the logits. depth=2 is the published architecture.

Layer numbering for gradient logging: 0..L-2 = hidden attention layers ("attention"),
L-1 = output attention layer ("output"); it has no Linear layers.
"""

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
