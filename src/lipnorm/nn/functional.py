"""Small graph helpers shared by the attention layers (GAT, GT)."""

from __future__ import annotations

import math

import dgl
import dgl.function as fn
import torch
from torch import nn

# LipschitzNorm settings of the attention layers: plain or normalised scores, and the
# normaliser's formula (the paper's, or the authors' public code's).
NORMS = ("none", "lip")
VARIANTS = ("paper", "official")


def safe_divide(numerator: torch.Tensor, denominator: torch.Tensor) -> torch.Tensor:
    """`numerator / denominator`, and 0 where `denominator` is 0.

    In LipschitzNorm the denominator bounds the numerator (|q.k| <= ||q|| max ||k||), so a
    zero denominator only meets a zero numerator: 0/0 is mapped to 0, i.e. a neutral score
    (uniform attention). Dividing by the denominator clamped to 1 where it is 0 keeps the
    discarded branch of `torch.where` finite, so its gradient is 0 instead of NaN.
    """
    positive = denominator > 0
    clamped = torch.where(positive, denominator, torch.ones_like(denominator))
    return torch.where(positive, numerator / clamped, torch.zeros_like(numerator))


def neighbour_max(graph: dgl.DGLGraph, src_values: torch.Tensor) -> torch.Tensor:
    """Per destination node, the max of `src_values` over its in-neighbours (0 if none).

    `src_values` is indexed by source node, any trailing shape. DGL fills nodes without
    in-edges with 0, which is the right neutral value for the non-negative norms it is
    used on.
    """
    with graph.local_scope():
        graph.srcdata["_value"] = src_values
        graph.update_all(fn.copy_u("_value", "_m"), fn.max("_m", "_max"))
        return graph.dstdata["_max"]


def check_attention_options(*, norm: str, variant: str, alpha: float, **sizes: int) -> None:
    """Raise `ValueError` naming the value if an attention layer's option is not allowed.

    `sizes` (e.g. `in_feats=..., num_heads=...`) must each be at least 1.
    """
    if norm not in NORMS:
        raise ValueError(f"unknown norm {norm!r}; allowed: {', '.join(NORMS)}")
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; allowed: {', '.join(VARIANTS)}")
    for name, value in sizes.items():
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    if not (math.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"alpha must be a finite number >= 0, got {alpha}")


class AttentionConv(nn.Module):
    """What GAT and GT layers share: validated sizes and LipschitzNorm options."""

    def __init__(self, in_feats: int, out_feats: int, num_heads: int, *, norm: str, alpha: float, variant: str):
        super().__init__()
        check_attention_options(
            norm=norm, variant=variant, alpha=alpha, in_feats=in_feats, out_feats=out_feats, num_heads=num_heads
        )
        self.in_feats = in_feats
        self.out_feats = out_feats
        self.num_heads = num_heads
        self.norm = norm
        self.alpha = alpha
        self.variant = variant

    def extra_repr(self) -> str:
        return (
            f"in_feats={self.in_feats}, out_feats={self.out_feats}, num_heads={self.num_heads}, "
            f"norm={self.norm!r}, alpha={self.alpha}, variant={self.variant!r}"
        )
