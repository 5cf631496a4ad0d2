"""GCN (Kipf & Welling, ICLR 2017) as the non-attention reference layer: DGL's `GraphConv`
with the constructor and output layout of `lipnorm.nn.GATConv`, so that it drops into a
deep model that concatenates heads.

The layer is `dgl.nn.GraphConv(in_feats, num_heads * out_feats, norm="both")` itself (a
subclass: its parameters are GraphConv's `weight` and `bias`, Glorot-uniform and zero as
Kipf's code), i.e. for destination i

    out_i = sum_{j -> i} h_j W / sqrt(d_out(j) d_in(i)) + b,

D^-1/2 A D^-1/2 H W on a symmetric graph with its self-loops. Choices:

- Heads: GCN has no heads; `num_heads` x `out_feats` only sets the width W = H * D, and
  the output `(N, W)` is returned as `(N, H, D)` (a reshape), as GATConv returns its heads,
  so a model flattening heads sees width H * D either way.
- `residual` as GATConv's (DGL's): the input itself if ``in_feats == H * D``, else a
  linear `res_fc` (Xavier-normal with the ReLU gain, as DGL's GATConv), which then
  carries the bias instead of GraphConv (DGL's layout: one bias).
- `get_attention=True` returns ``(out, None)``: GCN has no attention, and its edge weights
  1/sqrt(d_out(j) d_in(i)) are not a distribution over in-edges, so an attention
  statistic (entropy) would be meaningless; `None` says so
  (`lipnorm.train.diagnostics.GraphDiagnostics.layer_stats` takes ``attention=None``).
- Only `norm="none"`: there are no attention scores for LipschitzNorm to normalise, so
  ``norm="lip"`` is a `ValueError` (GATConv's `norm` option; GraphConv's own degree
  normalisation is `degree_norm`). The attention options (`alpha`, `variant`,
  `attn_drop`, `negative_slope`) are not accepted.
- Nodes without in-edges are rejected as GATConv rejects them (`ValueError`), unless
  `allow_zero_in_degree`.
"""

from __future__ import annotations

import dgl
import torch
from dgl.nn import GraphConv
from torch import nn

from lipnorm.nn.conv.base import reject_zero_in_degree, reset_residual, residual_projection

__all__ = ["GCNLayer", "DEGREE_NORMS"]

DEGREE_NORMS = ("both", "right", "left", "none")


class GCNLayer(GraphConv):
    """DGL's GraphConv with GATConv's constructor and `(N, H, D)` output.

    Parameters
    ----------
    in_feats : int
        Input features per node.
    out_feats, num_heads : int
        The output width is ``num_heads * out_feats``, returned as `(N, num_heads, out_feats)`.
    norm : str
        "none" only (LipschitzNorm needs attention scores; see the module docstring).
    degree_norm : str
        GraphConv's `norm`: "both" (D^-1/2 A D^-1/2, Kipf's; default), "right", "left",
        "none".
    feat_drop : float
        Dropout on the input features, as GATConv's.
    residual : bool
        As GATConv's (see the module docstring).
    bias : bool
        Learn an additive bias of size ``num_heads * out_feats``.
    allow_zero_in_degree : bool
        As GATConv's.
    """

    def __init__(
        self,
        in_feats: int,
        out_feats: int,
        num_heads: int = 1,
        *,
        norm: str = "none",
        degree_norm: str = "both",
        feat_drop: float = 0.0,
        residual: bool = False,
        bias: bool = True,
        allow_zero_in_degree: bool = False,
    ):
        if norm != "none":
            raise ValueError(
                f"GCNLayer has no attention scores, so no norm {norm!r}; allowed: none "
                "(LipschitzNorm applies to attention layers)"
            )
        if degree_norm not in DEGREE_NORMS:
            raise ValueError(f"unknown degree_norm {degree_norm!r}; allowed: {', '.join(DEGREE_NORMS)}")
        for name, value in (("in_feats", in_feats), ("out_feats", out_feats), ("num_heads", num_heads)):
            if value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        width = num_heads * out_feats
        linear_residual = residual and in_feats != width
        # GraphConv's own check raises DGLError; ours (forward) raises ValueError.
        super().__init__(
            in_feats, width, norm=degree_norm, bias=bias and not linear_residual, allow_zero_in_degree=True
        )
        self.in_feats = in_feats
        self.out_feats = out_feats
        self.num_heads = num_heads
        self.allow_zero_in_degree = allow_zero_in_degree
        self.feat_drop = nn.Dropout(feat_drop)
        self.register_module("res_fc", residual_projection(in_feats, width, residual=residual, bias=bias))
        # GraphConv's __init__ has drawn its weight as GraphConv(in_feats, width) does.
        reset_residual(self.res_fc)

    def reset_parameters(self) -> None:
        """GraphConv's (Glorot-uniform weight, zero bias); a linear residual as GATConv's."""
        super().reset_parameters()
        # GraphConv's __init__ calls this before the residual exists.
        if "res_fc" in self._modules:
            reset_residual(self.res_fc)

    def extra_repr(self) -> str:
        return (
            f"in_feats={self.in_feats}, out_feats={self.out_feats}, num_heads={self.num_heads}, "
            f"degree_norm={self._norm!r}, residual={self.res_fc is not None}"
        )

    def set_allow_zero_in_degree(self, set_value: bool) -> None:
        """As GraphConv's: whether nodes without in-edges are accepted."""
        self.allow_zero_in_degree = set_value

    def forward(self, graph: dgl.DGLGraph, feat: torch.Tensor, get_attention: bool = False):
        """`feat` `(N, in_feats)` -> `(N, H, D)`; with `get_attention`, ``(out, None)``."""
        if not self.allow_zero_in_degree:
            reject_zero_in_degree(graph)
        h = self.feat_drop(feat)
        rst = super().forward(graph, h)
        if self.res_fc is not None:
            rst = rst + self.res_fc(h)
        rst = rst.view(-1, self.num_heads, self.out_feats)
        if get_attention:
            return rst, None
        return rst
