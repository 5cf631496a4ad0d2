"""Small graph helpers shared by the attention layers (GAT, GT)."""

from __future__ import annotations

import dgl
import dgl.function as fn
import torch


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
