"""What the attention layers share (GAT, GT), and GCN with them: DGL's zero-in-degree check,
DGL's residual projection, and `AttentionConv`, the validated sizes and LipschitzNorm options.
"""

from __future__ import annotations

import dgl
import torch
from dgl import DGLError
from torch import nn

from lipnorm.nn.functional import NORMS, check_normaliser_options, check_shape
from lipnorm.dgl_private import per_structure

__all__ = ["AttentionConv", "ZeroInDegreeError", "DGL_ZERO_IN_DEGREE_MESSAGE", "reject_zero_in_degree"]

# dgl.nn.GATConv's message (DGL 2.1), word for word, so code matching DGL's error matches ours.
DGL_ZERO_IN_DEGREE_MESSAGE = (
    "There are 0-in-degree nodes in the graph, "
    "output for those nodes will be invalid. "
    "This is harmful for some applications, "
    "causing silent performance regression. "
    "Adding self-loop on the input graph by "
    "calling `g = dgl.add_self_loop(g)` will resolve "
    "the issue. Setting ``allow_zero_in_degree`` "
    "to be `True` when constructing this module will "
    "suppress the check and let the code run."
)


class ZeroInDegreeError(DGLError, ValueError):
    """A graph with destination nodes without in-edges, given to a layer that rejects them.

    Both DGL's error (what `dgl.nn.GATConv` raises, with its message) and a `ValueError`
    (bad input, as everywhere here), so code written for either catches it.
    """


def zero_in_degree_count(graph: dgl.DGLGraph) -> int:
    """The number of destination nodes without in-edges, counted once per graph structure.

    Reading a count into Python synchronises the host with a GPU; cached with the
    structure (`lipnorm.dgl_private.per_structure`), later forwards on the same graph do
    not, and a graph changed in place is counted anew.
    """
    return per_structure(graph, "zero_in_degree_count", lambda graph: int((graph.in_degrees() == 0).sum()))


def reject_zero_in_degree(graph: dgl.DGLGraph) -> None:
    """Raise `ZeroInDegreeError` if a destination node of `graph` has no in-edge (DGL's
    layers' default check). Such a node gets no message: its output would be the residual
    and bias only."""
    isolated = zero_in_degree_count(graph)
    if isolated:
        raise ZeroInDegreeError(
            f"{DGL_ZERO_IN_DEGREE_MESSAGE} (Here: {isolated} node(s) with in-degree 0; add "
            "self-loops (dgl.add_self_loop) or pass allow_zero_in_degree=True.)"
        )


def residual_projection(in_feats: int, width: int, *, residual: bool, bias: bool) -> nn.Module | None:
    """DGL's GATConv residual: None, the identity (``in_feats == width``) or a Linear.

    The Linear carries the bias (DGL's layout: the layer then has none of its own).
    """
    if not residual:
        return None
    if in_feats != width:
        return nn.Linear(in_feats, width, bias=bias)
    return nn.Identity()


def reset_residual(res_fc: nn.Module | None) -> None:
    """A linear residual as DGL's GATConv draws it: Xavier-normal (ReLU gain), zero bias."""
    if isinstance(res_fc, nn.Linear):
        nn.init.xavier_normal_(res_fc.weight, gain=nn.init.calculate_gain("relu"))
        if res_fc.bias is not None:
            nn.init.zeros_(res_fc.bias)


def check_attention_options(*, norm: str, variant: str, alpha: float, **sizes: int) -> None:
    """Raise `ValueError` naming the value if an attention layer's option is not allowed.

    `sizes` (e.g. `in_feats=..., num_heads=...`) must each be at least 1.
    """
    if norm not in NORMS:
        raise ValueError(f"unknown norm {norm!r}; allowed: {', '.join(NORMS)}")
    for name, value in sizes.items():
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    check_normaliser_options(variant=variant, alpha=alpha)


class AttentionConv(nn.Module):
    """What GAT and GT layers share: validated sizes and LipschitzNorm options.

    `in_feats` is one input size, or a pair ``(in_src_feats, in_dst_feats)`` for
    bipartite graphs whose source and destination features differ in size (as DGL's
    layers take it); `in_src_feats` and `in_dst_feats` hold the two sizes either way.
    """

    def __init__(
        self, in_feats: int | tuple[int, int], out_feats: int, num_heads: int, *, norm: str, alpha: float, variant: str
    ):
        super().__init__()
        if isinstance(in_feats, tuple):
            if len(in_feats) != 2:
                raise ValueError(f"in_feats must be a size or a pair (in_src_feats, in_dst_feats), got {in_feats}")
            in_sizes = {"in_feats[0]": in_feats[0], "in_feats[1]": in_feats[1]}
            self.in_src_feats, self.in_dst_feats = in_feats
        else:
            in_sizes = {"in_feats": in_feats}
            self.in_src_feats = self.in_dst_feats = in_feats
        check_attention_options(
            norm=norm, variant=variant, alpha=alpha, **in_sizes, out_feats=out_feats, num_heads=num_heads
        )
        self.in_feats = in_feats
        self.out_feats = out_feats
        self.num_heads = num_heads
        self.norm = norm
        self.alpha = alpha
        self.variant = variant

    def _input_features(self, graph: dgl.DGLGraph, feat) -> tuple[torch.Tensor, torch.Tensor | None]:
        """`(feat_src, feat_dst)` of a feature pair, or `(feat, None)` of one tensor, checked.

        One tensor holds the source nodes' features (on a block, its first
        `num_dst_nodes` rows are the destinations', DGL's convention); a layer built with
        a pair of input sizes takes a pair only, as DGL's layers do.
        """
        if isinstance(feat, tuple):
            if len(feat) != 2:
                raise ValueError(f"feat must be a tensor or a pair (feat_src, feat_dst), got a tuple of {len(feat)}")
            feat_src, feat_dst = feat
            check_shape("feat_src", feat_src, (graph.num_src_nodes(), self.in_src_feats), "in_feats")
            check_shape("feat_dst", feat_dst, (graph.num_dst_nodes(), self.in_dst_feats), "in_feats")
            return feat_src, feat_dst
        if isinstance(self.in_feats, tuple):
            raise ValueError(
                f"this layer has in_feats = {self.in_feats}, a pair: it takes features as a pair "
                "(feat_src, feat_dst), got one tensor"
            )
        check_shape("feat", feat, (graph.num_src_nodes(), self.in_feats), "in_feats")
        return feat, None

    def extra_repr(self) -> str:
        return (
            f"in_feats={self.in_feats}, out_feats={self.out_feats}, num_heads={self.num_heads}, "
            f"norm={self.norm!r}, alpha={self.alpha}, variant={self.variant!r}"
        )
