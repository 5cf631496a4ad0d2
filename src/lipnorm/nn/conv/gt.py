"""Graph transformer layer with optional LipschitzNorm on its dot-product scores.

The layer is PyG's `TransformerConv` (root_weight=True, no beta, heads concatenated by the
caller) written the DGL way. For head h, destination i and in-neighbour j:

    q_i = W_q x_i,  k_j = W_k x_j,  val_j = W_v x_j              (per head, size D)
    s_ij = q_i . k_j / sqrt(D)                                   norm="none"
    out_i = sum_j softmax_j(s_ij) val_j + W_skip x_i             skip=True

LipschitzNorm ("lip", Dasoulas et al., ICML 2021) divides the score by
max(u v, u w, v w), where v = max_j ||k_j||, w = max_j ||val_j|| (neighbour max, per head):

- variant="paper":    u = ||q_i||, s_ij = alpha q_i . k_j / max(...), so |s_ij| <= alpha.
- variant="official": the normaliser of the authors' public PyG code (gdasoulas/LipschitzNorm,
  normalizations/quadratic_lipschitznorm.py, revision 25ddec3 with `torch.norm(Q, dim=[0,2])`,
  applied in models/deepgt.py to the already sqrt(D)-scaled score): u is one number per
  head, the Frobenius norm of the queries copied onto every edge,
  sqrt(sum_i indeg(i) ||q_i||^2), over the whole (batched) graph; v and w as above; and the
  sqrt(D) is kept: s_ij = alpha (q_i . k_j / sqrt(D)) / max(...). Their code has no alpha
  (alpha=1 reproduces it). Not reproduced: the file's other revision (b506691), whose u
  is one Frobenius norm over all heads together, and their `+ 1e-12` in the denominator,
  replaced by mapping 0/0 to 0 (`lipnorm.bound.inverse_sqrt` with eps=0);
  elsewhere the two differ by a relative 1e-12 / max(...).

The bound is computed from squared norms, max(u^2 v^2, u^2 w^2, v^2 w^2), whose inverse
square root is taken once per node: a bound below ~1e-22 in float32 squares to 0 and so
gives the neutral score 0, where its score |s_ij| <= alpha would be numerically
meaningless anyway.

Unlike DGL's GATConv, nodes without in-edges are accepted (as in PyG): they receive no
message, so their output is the skip term alone.

Inputs as DGL's GATConv takes them (and PyG's TransformerConv): a homogeneous graph with one
feature tensor, a block with its source features (the destinations' are the first
`num_dst_nodes` rows), or a bipartite graph with a pair (feat_src, feat_dst); keys and
values come from the sources, queries and the skip term from the destinations.
"""

from __future__ import annotations

import math

import dgl
import dgl.function as fn
import torch
from torch import nn

from lipnorm.dgl_private import edge_softmax
from lipnorm.nn.conv.base import AttentionConv
from lipnorm.nn.functional import lipschitz_norm_dot_product
from lipnorm.nn.neighbour_sum import neighbour_weighted_sum

__all__ = ["GTConv"]


class GTConv(AttentionConv):
    """Multi-head graph transformer convolution; `forward` returns `(N_dst, num_heads, out_feats)`.

    `in_feats` is one input size or a pair ``(in_src_feats, in_dst_feats)``: `fc_k` and
    `fc_v` take the source features, `fc_q` and `fc_skip` the destination ones (PyG's
    `TransformerConv` with a pair of channels); a layer built with a pair takes a feature
    pair. Biases: `bias` switches the biases of all four projections (`fc_q`, `fc_k`,
    `fc_v`, `fc_skip`); with the defaults this equals PyG's `TransformerConv`, whose
    query, key and value projections always carry a bias.
    """

    def __init__(
        self,
        in_feats: int | tuple[int, int],
        out_feats: int,
        num_heads: int,
        *,
        norm: str = "none",
        alpha: float = 1.0,
        variant: str = "paper",
        feat_drop: float = 0.0,
        attn_drop: float = 0.0,
        skip: bool = True,
        bias: bool = True,
    ):
        super().__init__(in_feats, out_feats, num_heads, norm=norm, alpha=alpha, variant=variant)
        width = num_heads * out_feats
        self.fc_q = nn.Linear(self.in_dst_feats, width, bias=bias)
        self.fc_k = nn.Linear(self.in_src_feats, width, bias=bias)
        self.fc_v = nn.Linear(self.in_src_feats, width, bias=bias)
        self.fc_skip = nn.Linear(self.in_dst_feats, width, bias=bias) if skip else None
        self.feat_drop = nn.Dropout(feat_drop)
        self.attn_drop = nn.Dropout(attn_drop)

    def reset_parameters(self) -> None:
        """PyTorch's `nn.Linear` initialisation, as PyG's `TransformerConv`."""
        for fc in (self.fc_q, self.fc_k, self.fc_v, self.fc_skip):
            if fc is not None:
                fc.reset_parameters()

    def _heads(self, fc: nn.Linear, h: torch.Tensor) -> torch.Tensor:
        return fc(h).view(-1, self.num_heads, self.out_feats)

    def _project(self, graph: dgl.DGLGraph, feat):
        """The destinations' dropped-out input (for the skip term), their queries
        `(N_dst, H, D)`, and the sources' keys and values, `(N_src, H, D)` each."""
        feat_src, feat_dst = self._input_features(graph, feat)
        h_src = self.feat_drop(feat_src)
        if feat_dst is not None:
            h_dst = self.feat_drop(feat_dst)
        else:
            h_dst = h_src[: graph.num_dst_nodes()] if graph.is_block else h_src
        return h_dst, self._heads(self.fc_q, h_dst), self._heads(self.fc_k, h_src), self._heads(self.fc_v, h_src)

    def _scores(self, graph: dgl.DGLGraph, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
        """Pre-softmax scores `(E, H, 1)`, normalised as `norm`/`variant` say."""
        graph.dstdata["q"] = q
        graph.srcdata["k"] = k
        graph.apply_edges(fn.v_dot_u("q", "k", "dot"))
        dot = graph.edata["dot"]
        if self.norm == "none":
            return dot / math.sqrt(self.out_feats)
        return lipschitz_norm_dot_product(graph, dot, q, k, v, alpha=self.alpha, variant=self.variant)

    def normalized_scores(self, graph: dgl.DGLGraph, feat) -> torch.Tensor:
        """The scores fed to the edge softmax, `(E, H, 1)` in edge-ID order; `feat` as in `forward`.

        With norm="lip", variant="paper" every entry lies in [-alpha, alpha].
        """
        with graph.local_scope():
            _, q, k, v = self._project(graph, feat)
            return self._scores(graph, q, k, v)

    def forward(self, graph: dgl.DGLGraph, feat, get_attention: bool = False):
        """`feat` -> `(N_dst, H, D)`; with `get_attention`, also `(E, H, 1)`.

        `feat` is `(N_src, in_feats)` (homogeneous graph or block) or a pair
        `(feat_src, feat_dst)` (bipartite graph).

        Nodes without in-edges get only their skip term (or 0 without skip). The returned
        attention is the one used, i.e. after attention dropout (as DGL's GATConv).
        """
        with graph.local_scope():
            h_dst, q, k, v = self._project(graph, feat)
            attention = self.attn_drop(edge_softmax(graph, self._scores(graph, q, k, v)))
            # update_all(fn.u_mul_e("v", "a", "m"), fn.sum("m", "out")), same bits, faster.
            out = neighbour_weighted_sum(graph, v, attention)
            if self.fc_skip is not None:
                out = out + self._heads(self.fc_skip, h_dst)
            if get_attention:
                return out, attention
            return out
