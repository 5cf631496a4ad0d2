"""Graph attention layer (GAT) with optional LipschitzNorm on its attention scores.

The layer is DGL's `GATConv` (homogeneous graphs, blocks, bipartite graphs with a feature
pair, edge weights; heads returned separately) with one change when norm="lip": for head
h, destination i and in-neighbour (source) j (self-loop included), the score

    e_ij = a_l . W h_j + a_r . W h_i

is replaced by alpha * e_ij / (u v) before the LeakyReLU and the edge softmax, where
(Dasoulas, Scaman, Virmaux, "Lipschitz normalization for self-attention layers with
application to graph neural networks", ICML 2021):

- variant="paper":    u = ||[a_l; a_r]||_2 of head h,
                      v = v_i = sqrt(||W h_i||^2 + max_{k in N(i)} ||W h_k||^2),
  so |normalised score| <= alpha by Cauchy-Schwarz, since
  |e_ij| <= ||[a_l; a_r]|| ||[W h_j; W h_i]|| <= u v_i.
- variant="official": the normaliser of the authors' public PyG code (see `GATConv`).

All norms are per head, of the head's D-dimensional slice.
"""

from __future__ import annotations

import dgl
import dgl.function as fn
import torch
from torch import nn

from lipnorm import kernels
from lipnorm.dgl_private import edge_softmax
from lipnorm.nn.conv.base import AttentionConv, reject_zero_in_degree, reset_residual, residual_projection
from lipnorm.nn.functional import check_eps, lipschitz_norm_linear
from lipnorm.nn.row_pruned import RowPruned
from lipnorm.nn.neighbour_sum import neighbour_weighted_sum

__all__ = ["GATConv"]


class GATConv(AttentionConv):
    r"""Multi-head graph attention convolution with optional LipschitzNorm.

    ``forward(graph, feat)`` maps the input features to ``(N_dst, num_heads, out_feats)``:

    .. math::
        h_i' = \sum_{j \in N(i)} w_{ji}\, \mathrm{softmax}_j(\mathrm{LeakyReLU}(s_{ij}))
               W_{src} h_j \;[+\, \mathrm{res}(h_i)] \;[+\, b]

    with :math:`s_{ij} = e_{ij}` for norm="none" (this then equals ``dgl.nn.GATConv``
    with the same weights, for every input it takes) and :math:`s_{ij} = \alpha e_{ij} /
    (u v)` for norm="lip" (see the module docstring for :math:`e, u, v`), and the edge
    weights :math:`w_{ji}` (1 unless given), as DGL.

    The inputs are DGL's: a homogeneous graph with ``feat`` ``(N, in_feats)``; a block
    (a message-flow graph, as ``dgl.dataloading`` samplers yield) with the source
    features, whose first ``num_dst_nodes`` rows are the destination nodes'; or any
    graph with a pair ``(feat_src, feat_dst)`` of ``(N_src, in_src_feats)`` and
    ``(N_dst, in_dst_feats)`` features (a bipartite graph). The neighbour maxima of
    LipschitzNorm are taken over each destination's in-edges of the graph given.

    The parameters up to ``bias`` are DGL's, in DGL's order; the LipschitzNorm ones are
    keyword-only.

    Parameters
    ----------
    in_feats : int or (int, int)
        Input size, or the pair ``(in_src_feats, in_dst_feats)``: then, as in DGL, the
        sources and the destinations have their own projections ``fc_src`` and
        ``fc_dst`` (else one ``fc``), and ``forward`` takes a feature pair.
    out_feats, num_heads : int
        Output size per head, number of heads (both >= 1).
    feat_drop, attn_drop : float
        Dropout on the input features and on the attention weights.
    negative_slope : float
        Slope of the LeakyReLU applied to the (normalised) scores.
    residual : bool
        Add a residual of the destination features: the input itself if
        ``in_dst_feats == num_heads * out_feats``, else a linear map ``res_fc`` (which then
        carries the bias, as in DGL).
    activation : callable or None
        Applied to the output last, as in DGL.
    allow_zero_in_degree : bool
        As in DGL: by default a graph with destination nodes without in-edges is rejected
        (their output would be the residual and bias only) with `ZeroInDegreeError`, a
        ``DGLError`` with DGL's message that is also a ``ValueError``. With True such
        nodes are accepted and get exactly that: no message, so 0 + residual + bias.
        The check counts them once per graph structure, not per forward.
    bias : bool
        Learn an additive bias of size ``num_heads * out_feats``.
    norm : "none" or "lip"
        Plain GAT scores, or LipschitzNorm-ed scores.
    alpha : float
        Scale of the normalised scores (>= 0; norm="lip" only). With variant="paper",
        every score lies in ``[-alpha, alpha]``.
    variant : "paper" or "official"
        Which normaliser norm="lip" uses (ignored for norm="none").

        "paper" (default) is the formula of the paper, per head:
        :math:`u_h = \|[a_l; a_r]\|_2`,
        :math:`v_i = \sqrt{\|Wh_i\|^2 + \max_{k \in N(i)} \|Wh_k\|^2}`.

        "official" is a compatibility mode reproducing the normaliser of the authors'
        public PyG code (github.com/gdasoulas/LipschitzNorm,
        ``normalizations/lipschitznorm.py``, ``LipschitzNorm(scale_individually=False)``
        as used by ``models/deepgat.py`` for "lipschitznorm"):
        :math:`u = 4 \|(a_l, a_r)\|_F`, one number over the attention parameters of all
        heads together, and a per-edge
        :math:`v_{ij} = \sqrt{\max_{k \in N(i)} \|Wh_k\|^2 + \|Wh_j\|^2}` (j the source,
        per head). Their code has no alpha (alpha=1 reproduces it). What is *not*
        reproduced: (1) their multi-head indexing bug: they take the neighbour max as
        an ``(N, H)`` tensor, flatten it with ``.view(-1, 1)`` and index it by
        destination node, so for ``H > 1`` the edge into node i reads the max of node
        ``i // H`` in head ``i % H``, shared by all heads; here the max of node i in
        head h is used, as their comment ("max_j ||x_j||^2 + ||x_i||^2") intends;
        (2) their ``+ 1e-12`` in the denominator, replaced by the ``eps`` rule below
        (the values differ by a relative 1e-12 / (u v)).
    eps : float
        Where the bound ``u v`` is at most ``eps`` (e.g. all-zero features, the
        missing-features setting), the normalised score is 0 instead of 0/0, i.e.
        uniform attention; elsewhere the score is exact. Must be >= 0.
    fused : bool
        Compute the scores, LipschitzNorm, softmax, attention dropout and neighbour sum
        in one compiled CPU kernel (`lipnorm.kernels`) where it applies: a whole
        homogeneous graph on the CPU, one feature tensor, no `edge_weight`, no
        `get_attention` where autograd records, the "paper" variant; elsewhere, and where the
        kernels are unavailable or off (``LIPNORM_KERNELS``), DGL's calls (docs/layers.md,
        "Compiled kernels"). The same numbers to float rounding and the same dropout
        masks; for small layers (a few heads of 16 features) where DGL's per-call cost
        dominates, several times faster (docs/performance.md).
    """

    def __init__(
        self,
        in_feats: int | tuple[int, int],
        out_feats: int,
        num_heads: int,
        feat_drop: float = 0.0,
        attn_drop: float = 0.0,
        negative_slope: float = 0.2,
        residual: bool = False,
        activation=None,
        allow_zero_in_degree: bool = False,
        bias: bool = True,
        *,
        norm: str = "none",
        alpha: float = 1.0,
        variant: str = "paper",
        eps: float = 1e-12,
        fused: bool = False,
    ):
        super().__init__(in_feats, out_feats, num_heads, norm=norm, alpha=alpha, variant=variant)
        check_eps(eps)
        self.eps = eps
        self.fused = fused
        self.allow_zero_in_degree = allow_zero_in_degree
        width = num_heads * out_feats
        if isinstance(in_feats, tuple):
            self.register_module("fc", None)
            self.fc_src = nn.Linear(self.in_src_feats, width, bias=False)
            self.fc_dst = nn.Linear(self.in_dst_feats, width, bias=False)
        else:
            self.fc = nn.Linear(in_feats, width, bias=False)
        self.attn_l = nn.Parameter(torch.empty(1, num_heads, out_feats))
        self.attn_r = nn.Parameter(torch.empty(1, num_heads, out_feats))
        self.feat_drop = nn.Dropout(feat_drop)
        self.attn_drop = nn.Dropout(attn_drop)
        self.leaky_relu = nn.LeakyReLU(negative_slope)
        # DGL's layout: a linear residual carries the bias, so there is no second one.
        linear_residual = residual and self.in_dst_feats != width
        self.register_module("res_fc", residual_projection(self.in_dst_feats, width, residual=residual, bias=bias))
        if bias and not linear_residual:
            self.bias = nn.Parameter(torch.empty(width))
        else:
            self.register_parameter("bias", None)
        self.activation = activation
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-normal weights with the ReLU gain and zero biases, as DGL's GATConv
        (drawn in DGL's order, so a seed gives DGL's weights)."""
        gain = nn.init.calculate_gain("relu")
        for fc in (self.fc,) if self.fc is not None else (self.fc_src, self.fc_dst):
            nn.init.xavier_normal_(fc.weight, gain=gain)
        nn.init.xavier_normal_(self.attn_l, gain=gain)
        nn.init.xavier_normal_(self.attn_r, gain=gain)
        if self.bias is not None:
            nn.init.zeros_(self.bias)
        reset_residual(self.res_fc)

    def set_allow_zero_in_degree(self, set_value: bool) -> None:
        """Set `allow_zero_in_degree` (DGL's method of the same name)."""
        self.allow_zero_in_degree = set_value

    def _heads(self, fc: nn.Linear, h: torch.Tensor) -> torch.Tensor:
        return fc(h).view(-1, self.num_heads, self.out_feats)

    def _project(self, graph: dgl.DGLGraph, feat):
        """The destination nodes' dropped-out input (for the residual) and the projections.

        The projections W h are one `(N_src, H, D)` tensor for a single `feat` (on a
        block, its first `num_dst_nodes` rows are the destinations'), or a pair
        `(ft_src, ft_dst)` for a pair `(feat_src, feat_dst)`.

        A `RowPruned` input (`lipnorm.nn.row_pruned`) is dropped out and projected on its
        rows only: the same numbers as its dense form's, a mask drawn over fewer entries.
        """
        if not self.allow_zero_in_degree:
            reject_zero_in_degree(graph)
        if isinstance(feat, RowPruned):
            if self.fc is None or graph.is_block or self.res_fc is not None or feat.values.dim() != 2:
                raise ValueError(
                    "a row-pruned input needs one projection fc, a whole graph, no residual and "
                    f"(R, F) values; got fc={self.fc is not None}, block={graph.is_block}, "
                    f"residual={self.res_fc is not None}, values of shape {tuple(feat.values.shape)}"
                )
            projected = self.fc(self.feat_drop(feat.values))
            return None, feat.scatter(projected).view(-1, self.num_heads, self.out_feats)
        feat_src, feat_dst = self._input_features(graph, feat)
        if feat_dst is not None:
            h_src, h_dst = self.feat_drop(feat_src), self.feat_drop(feat_dst)
            fc_src, fc_dst = (self.fc, self.fc) if self.fc is not None else (self.fc_src, self.fc_dst)
            return h_dst, (self._heads(fc_src, h_src), self._heads(fc_dst, h_dst))
        h = self.feat_drop(feat_src)
        return (h[: graph.num_dst_nodes()] if graph.is_block else h), self._heads(self.fc, h)

    def _attention_terms(self, ft: torch.Tensor, *vectors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """`a . W h` per node and head, `(N, H, 1)`, for each attention vector `a`, as one GEMM.

        `W h` flattened to `(N, H*D)` times the block-diagonal `(H*D, k H)` matrix whose
        block h holds head h's k vectors: one matrix product forward and two backward,
        where `(ft * attn_l).sum(-1)` makes an `(N, H, D)` temporary forward and two
        backward, per vector (fwd+bwd of both terms at Cora: 2.5 -> 1.0 ms at 8 heads x 8,
        19.8 -> 8.2 ms at 8 x 64). The zeros add nothing; BLAS sums in its own order, so
        the terms move by float32 rounding (1e-6 absolute there), not more.
        """
        stacked = torch.cat(vectors).permute(1, 2, 0)  # (H, D, k)
        terms = (ft.flatten(1) @ torch.block_diag(*stacked)).view(-1, self.num_heads, len(vectors))
        return terms.split(1, dim=-1)

    def _scores(self, graph: dgl.DGLGraph, ft, edge_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Pre-LeakyReLU scores `(E, H, 1)`, normalised as `norm`/`variant` say
        (`edge_mask`: `lipschitz_norm_linear`'s, the edges each head sees)."""
        if isinstance(ft, tuple):
            (el,), (er,) = self._attention_terms(ft[0], self.attn_l), self._attention_terms(ft[1], self.attn_r)
        else:
            el, er = self._attention_terms(ft, self.attn_l, self.attn_r)
            if graph.is_block:
                er = er[: graph.num_dst_nodes()]
        graph.srcdata["el"], graph.dstdata["er"] = el, er
        graph.apply_edges(fn.u_add_v("el", "er", "e"))
        if self.norm == "none":
            return graph.edata["e"]
        return lipschitz_norm_linear(
            graph, graph.edata["e"], ft, self.attn_l, self.attn_r, alpha=self.alpha, variant=self.variant, eps=self.eps,
            edge_mask=edge_mask,
        )

    def normalized_scores(self, graph: dgl.DGLGraph, feat) -> torch.Tensor:
        """The scores fed to the LeakyReLU, `(E, H, 1)` in edge-ID order.

        Raw ``e_ij`` for norm="none"; ``alpha e_ij / (u v)`` for norm="lip", which lies in
        ``[-alpha, alpha]`` for variant="paper". `feat` as in `forward`; feature dropout
        applies in training mode, as in `forward`.
        """
        with graph.local_scope():
            _, ft = self._project(graph, feat)
            return self._scores(graph, ft)

    def forward(self, graph: dgl.DGLGraph, feat, edge_weight: torch.Tensor | None = None, get_attention: bool = False):
        """Output `(N_dst, H, D)`; with `get_attention`, also the attention `(E, H, 1)`.

        Parameters
        ----------
        graph : DGLGraph
            Homogeneous, a block, or bipartite (then `feat` is a pair).
        feat : tensor or (tensor, tensor)
            ``(N_src, in_feats)``, or ``(feat_src, feat_dst)`` (see the class docstring),
            or a `RowPruned` ``(N_src, in_feats)`` on a whole graph without residual.
        edge_weight : (E,) tensor, optional
            Multiplies each edge's attention (after attention dropout), as in DGL.
        get_attention : bool
            Also return the attention used: after attention dropout and edge weights (as DGL).
        """
        with graph.local_scope():
            h_dst, ft = self._project(graph, feat)
            rst, attention = self._attend(graph, ft, edge_weight=edge_weight, get_attention=get_attention)
            if self.res_fc is not None:
                rst = rst + self._heads(self.res_fc, h_dst)
            if self.bias is not None:
                rst = rst + self.bias.view(1, self.num_heads, self.out_feats)
            if self.activation is not None:
                rst = self.activation(rst)
            if get_attention:
                return rst, attention
            return rst

    def _attend(self, graph: dgl.DGLGraph, ft, *, edge_weight=None, get_attention: bool = False, head_mask=None):
        """The attention-weighted neighbour sum `(N_dst, H, D)` of the projections `ft`,
        and the attention `(E, H, 1)` with `get_attention` (else None).

        `head_mask` `(E, K)` bool, K dividing H: the edges each of K equal groups of heads
        sees (seeds trained together, each with its DropEdge); the others are left out
        of that group's softmax and LipschitzNorm maxima. With `fused` and what the kernel
        takes, one call of `lipnorm.kernels.gat_attention` does it all.
        """
        group = self._heads_per_group(head_mask)
        applies = (
            self.fused and edge_weight is None and not isinstance(ft, tuple)
            and (self.norm == "none" or self.variant == "paper") and kernels.gat_attention_applies(graph)
            # the kernel's attention is for inspection (the layer statistics): not where
            # autograd records, which DGL's differentiable one serves
            and not (get_attention and torch.is_grad_enabled())
        )
        if kernels.use("gat_attention", ft[0] if isinstance(ft, tuple) else ft, self.attn_l, self.attn_r, applies=applies):
            drop = self._attention_dropout(self._dropout_shape(graph, head_mask), ft, head_mask)
            rst = kernels.gat_attention(
                graph, ft, self.attn_l, self.attn_r, norm=self.norm, alpha=self.alpha, eps=self.eps,
                negative_slope=self.leaky_relu.negative_slope, kept=head_mask, heads_per_seed=group, drop=drop,
                get_attention=get_attention,
            )
            return rst if get_attention else (rst, None)
        edges = None if head_mask is None else head_mask.repeat_interleave(group, dim=1).unsqueeze(-1)
        scores = self.leaky_relu(self._scores(graph, ft, edge_mask=edges))
        if edges is not None:  # -inf: exp gives 0 (each node keeps its self-loop, so its max is finite)
            scores = scores.masked_fill(~edges, float("-inf"))
        attention = edge_softmax(graph, scores)
        if head_mask is None:
            attention = self.attn_drop(attention)  # nn.Dropout's own draw, on every device
        else:
            drop = self._attention_dropout(self._dropout_shape(graph, head_mask), attention, head_mask)
            if drop is not None:  # (S, E, H/S, 1) -> the attention's (E, H, 1)
                attention = attention * drop.transpose(0, 1).reshape(attention.shape)
        if edge_weight is not None:
            if tuple(edge_weight.shape) != (graph.num_edges(),):
                raise ValueError(
                    f"edge_weight has shape {tuple(edge_weight.shape)}; expected (E,) = ({graph.num_edges()},)"
                )
            attention = attention * edge_weight.view(-1, 1, 1)
        # update_all(fn.u_mul_e("ft", "a", "m"), fn.sum("m", "ft")), same bits, faster.
        rst = neighbour_weighted_sum(graph, ft[0] if isinstance(ft, tuple) else ft, attention)
        return rst, attention

    def _heads_per_group(self, head_mask) -> int:
        """Heads per group of heads that see the same edges and draw their attention
        dropout together: all of them without `head_mask`."""
        return self.num_heads if head_mask is None else self.num_heads // head_mask.shape[1]

    def _dropout_shape(self, graph: dgl.DGLGraph, head_mask) -> tuple[int, int, int, int]:
        """`(S, E, H/S, 1)`: the attention-dropout multiplier's shape, S groups of heads
        first (S = 1 without `head_mask`: then the attention's own `(E, H, 1)`)."""
        group = self._heads_per_group(head_mask)
        return self.num_heads // group, graph.num_edges(), group, 1

    def _attention_dropout(self, shape: tuple[int, ...], like: torch.Tensor, head_mask=None) -> torch.Tensor | None:
        """The attention-dropout multiplier (mask / (1 - p)) of `shape` (`_dropout_shape`),
        drawn as `nn.Dropout` draws its mask on the CPU (so without `head_mask`,
        `attention * multiplier` is its output, bit for bit); None where none applies
        (evaluation, p = 0)."""
        p = self.attn_drop.p
        if not self.training or p == 0:
            return None
        if p == 1:  # nn.Dropout draws nothing then
            return torch.zeros(shape, dtype=like.dtype, device=like.device)
        return torch.empty(shape, dtype=like.dtype, device=like.device).bernoulli_(1 - p).div_(1 - p)
