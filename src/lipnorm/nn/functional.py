"""LipschitzNorm as functions, for the layers here and for anyone's own attention layer.

Public API (Dasoulas, Scaman, Virmaux, "Lipschitz normalization for self-attention layers
with application to graph neural networks", ICML 2021):

- `lipschitz_norm_linear(graph, e, ft, attn_l, attn_r, ...)`: GAT-type scores
  e_ij = a_l . W h_j + a_r . W h_i, what `lipnorm.nn.GATConv(norm="lip")` uses;
- `lipschitz_norm_dot_product(graph, dot, q, k, v, ...)`: transformer scores q_i . k_j,
  what `lipnorm.nn.GTConv(norm="lip")` uses.

Both take the raw scores in edge-ID order, `(E, H, 1)`, with the per-head tensors they are
made of, and return the normalised scores, which go to the LeakyReLU / edge softmax in
place of the raw ones. They accept homogeneous graphs, bipartite graphs and message-flow
blocks; gradients flow through every input.

Their graph ops beyond the raw scores (the neighbour max, the per-node or per-edge
scaling) call DGL's g-SpMM/g-SDDMM kernels through `dgl.ops`: the same kernels as `update_all` /
`apply_edges` with `fn.*` builtins, without their frame bookkeeping, which at 8 heads x 8
on Cora costs 0.3-0.4 ms per call (update_all: 1.46 vs 1.02 ms for the max; apply_edges:
0.67 vs 0.37 ms for an edge multiply).
"""

from __future__ import annotations

import math

import dgl
import torch

from lipnorm.bound import inverse_sqrt, scaled, squared_norm
from lipnorm.settings.model_config import VARIANTS

__all__ = ["lipschitz_norm_linear", "lipschitz_norm_dot_product", "NORMS", "VARIANTS", "OFFICIAL_ATTENTION_FACTOR"]

# LipschitzNorm settings of the attention layers: plain or normalised scores, and the
# normaliser's formula (`VARIANTS`: the paper's, or the authors' public code's).
NORMS = ("none", "lip")
# The authors' public GAT code scales the attention norm by this constant (`att_norm=4`).
OFFICIAL_ATTENTION_FACTOR = 4.0


def lipschitz_norm_linear(
    graph: dgl.DGLGraph,
    e: torch.Tensor,
    ft: torch.Tensor | tuple[torch.Tensor, torch.Tensor],
    attn_l: torch.Tensor,
    attn_r: torch.Tensor,
    *,
    alpha: float = 1.0,
    variant: str = "paper",
    eps: float = 1e-12,
    edge_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""LipschitzNorm of GAT-type (linear) attention scores.

    For head h, destination i and in-neighbour (source) j, the raw score
    :math:`e_{ij} = a_l \cdot W h_j + a_r \cdot W h_i` becomes
    :math:`\alpha e_{ij} / (u v)`:

    - variant="paper": :math:`u_h = \|[a_l; a_r]\|_2` of head h and
      :math:`v_i = \sqrt{\|Wh_i\|^2 + \max_{k \in N(i)} \|Wh_k\|^2}` (i the destination),
      so every score lies in ``[-alpha, alpha]`` (Cauchy-Schwarz).
    - variant="official": the normaliser of the authors' public PyG code,
      :math:`u = 4 \|(a_l, a_r)\|_F` over all heads together and a per-edge
      :math:`v_{ij} = \sqrt{\max_{k \in N(i)} \|Wh_k\|^2 + \|Wh_j\|^2}` (j the source);
      see `lipnorm.nn.GATConv` for what is and is not reproduced.

    Where the bound ``u v`` is at most ``eps`` the score is 0 (uniform attention)
    instead of 0/0; elsewhere it is exact. Norms are per head, over the D features.

    Parameters
    ----------
    graph : DGLGraph
        Homogeneous, bipartite or a block; nodes without in-edges are allowed.
    e : (E, H, 1) tensor
        The raw scores in edge-ID order.
    ft : (N, H, D) tensor, or a pair ``(ft_src, ft_dst)``
        The projected features W h per head. One tensor serves as source and destination
        features; on a block its first ``num_dst_nodes`` rows are the destination nodes
        (DGL's convention). A pair gives ``(num_src_nodes, H, D)`` and
        ``(num_dst_nodes, H, D)`` (bipartite graphs).
    attn_l, attn_r : (1, H, D) or (H, D) tensors
        The attention vectors applied to the source and to the destination features.
    alpha : float
        Scale of the normalised scores (finite, >= 0).
    variant : "paper" or "official"
    eps : float
        Bound below which a score is 0 (finite, >= 0).
    edge_mask : (E, H, 1) bool tensor, optional
        The edges each head sees (e.g. a DropEdge drawn per head): the neighbour maxima
        are then taken over those in-edges only, as on the graph of the kept edges. The
        scores of the other edges are computed too; the caller leaves them out of its
        softmax. None: every edge, every head.

    Returns
    -------
    (E, H, 1) tensor: the normalised scores, in edge-ID order.
    """
    check_normaliser_options(variant=variant, alpha=alpha)
    check_eps(eps)
    ft_src, ft_dst = _src_dst(graph, ft)
    heads, dim = ft_src.shape[1:]
    check_shape("ft_dst" if ft_dst is not ft_src else "ft", ft_dst, (graph.num_dst_nodes(), heads, dim))
    attn_l, attn_r = (_attention_vector(name, a, heads, dim) for name, a in (("attn_l", attn_l), ("attn_r", attn_r)))
    check_shape("e", e, (graph.num_edges(), heads, 1))
    src_squared = squared_norm(ft_src).unsqueeze(-1)  # ||W h_k||^2, (N_src, H, 1)
    # The one extra reduce: max over in-neighbours of the squared norms, (N_dst, H, 1).
    if edge_mask is None:
        max_squared = neighbour_max(graph, src_squared)
    else:
        check_shape("edge_mask", edge_mask, (graph.num_edges(), heads, 1))
        if edge_mask.dtype != torch.bool:
            raise ValueError(f"edge_mask must be a bool tensor, got {edge_mask.dtype}")
        # A masked edge's value 0 is neutral for a max of norms, as neighbour_max's 0 is.
        edge_squared = dgl.ops.copy_u(graph, src_squared).masked_fill(~edge_mask, 0.0)
        max_squared = dgl.ops.copy_e_max(graph, edge_squared).clamp_min(0.0)
    if variant == "paper":
        dst_squared = src_squared if ft_dst is ft_src else squared_norm(ft_dst).unsqueeze(-1)
        attn_squared = attn_l.pow(2).sum(-1, keepdim=True) + attn_r.pow(2).sum(-1, keepdim=True)
        # Per destination node and head: 1 / (u_h v_i), then one edge op.
        scores = dgl.ops.e_mul_v(graph, e, inverse_sqrt(attn_squared * (dst_squared + max_squared), eps))
    else:
        attn_squared = OFFICIAL_ATTENTION_FACTOR**2 * (attn_l.pow(2).sum() + attn_r.pow(2).sum())
        v_squared = dgl.ops.u_add_v(graph, src_squared, max_squared)  # v_ij^2, (E, H, 1)
        scores = e * inverse_sqrt(attn_squared * v_squared, eps)
    return scaled(scores, alpha)


def lipschitz_norm_dot_product(
    graph: dgl.DGLGraph,
    dot: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    alpha: float = 1.0,
    variant: str = "paper",
) -> torch.Tensor:
    r"""LipschitzNorm of dot-product (quadratic, transformer) attention scores.

    For head h, destination i and in-neighbour (source) j, the raw score
    :math:`q_i \cdot k_j` is divided by :math:`\max(u v, u w, v w)` with
    :math:`v = \max_{j \in N(i)} \|k_j\|`, :math:`w = \max_{j \in N(i)} \|val_j\|`:

    - variant="paper": :math:`u = \|q_i\|`; the result is
      :math:`\alpha\, q_i \cdot k_j / \max(\dots)`, in ``[-alpha, alpha]``.
    - variant="official": the authors' public code, which normalises the already
      :math:`\sqrt{D}`-scaled score: :math:`u` is one number per head, the Frobenius norm
      of the queries copied onto every edge, :math:`\sqrt{\sum_i \mathrm{indeg}(i)
      \|q_i\|^2}`, and the result :math:`\alpha (q_i \cdot k_j / \sqrt{D}) / \max(\dots)`.

    A bound of 0 (all-zero queries, keys or values) gives the score 0 instead of 0/0.
    Norms are per head, over the D features.

    Parameters
    ----------
    graph : DGLGraph
        Homogeneous, bipartite or a block; nodes without in-edges are allowed.
    dot : (E, H, 1) tensor
        The raw scores :math:`q_i \cdot k_j` in edge-ID order, without the
        :math:`1/\sqrt{D}`.
    q : (num_dst_nodes, H, D) tensor
        Queries of the destination nodes.
    k, v : (num_src_nodes, H, D) tensors
        Keys and values of the source nodes.
    alpha : float
        Scale of the normalised scores (finite, >= 0).
    variant : "paper" or "official"

    Returns
    -------
    (E, H, 1) tensor: the normalised scores, in edge-ID order.
    """
    check_normaliser_options(variant=variant, alpha=alpha)
    _check_rank("k", k, 3)
    heads, dim = k.shape[1:]
    check_shape("k", k, (graph.num_src_nodes(), heads, dim))
    check_shape("v", v, (graph.num_src_nodes(), heads, dim))
    check_shape("q", q, (graph.num_dst_nodes(), heads, dim))
    check_shape("dot", dot, (graph.num_edges(), heads, 1))
    # Squared norms throughout (cheaper than norms, fwd and bwd): max_j ||k_j||^2 and
    # max_j ||val_j||^2 over in-neighbours in one reduce, (N_dst, H, 2).
    max_squared = neighbour_max(graph, torch.stack([squared_norm(k), squared_norm(v)], dim=-1))
    k_max_sq, v_max_sq = max_squared.split(1, dim=-1)
    u_sq = squared_norm(q).unsqueeze(-1)
    if variant == "paper":
        scale = alpha
    else:
        # ||stack of q_dst(e) over edges||_F^2 per head, without materialising (E, H, D).
        u_sq = (u_sq * graph.in_degrees().to(q.dtype).view(-1, 1, 1)).sum(dim=0, keepdim=True)
        scale = alpha / math.sqrt(dim)
    bound_sq = torch.maximum(torch.maximum(u_sq * k_max_sq, u_sq * v_max_sq), k_max_sq * v_max_sq)
    return scaled(dgl.ops.e_mul_v(graph, dot, inverse_sqrt(bound_sq, 0.0)), scale)


def _src_dst(graph: dgl.DGLGraph, ft) -> tuple[torch.Tensor, torch.Tensor]:
    """Source and destination features of `ft` (a tensor or a pair), shapes checked."""
    if isinstance(ft, (tuple, list)):
        if len(ft) != 2:
            raise ValueError(f"ft must be a tensor or a pair (ft_src, ft_dst), got a sequence of {len(ft)}")
        ft_src, ft_dst = ft
        _check_rank("ft_src", ft_src, 3)
        check_shape("ft_src", ft_src, (graph.num_src_nodes(), *ft_src.shape[1:]))
        return ft_src, ft_dst
    _check_rank("ft", ft, 3)
    check_shape("ft", ft, (graph.num_src_nodes(), *ft.shape[1:]))
    if graph.is_block:
        return ft, ft[: graph.num_dst_nodes()]
    return ft, ft


def _attention_vector(name: str, attn: torch.Tensor, heads: int, dim: int) -> torch.Tensor:
    """`attn` `(1, H, D)` or `(H, D)` as `(1, H, D)`."""
    if tuple(attn.shape) not in ((1, heads, dim), (heads, dim)):
        raise ValueError(
            f"{name} has shape {tuple(attn.shape)}; allowed: (1, H, D) = {(1, heads, dim)} "
            f"or (H, D) = {(heads, dim)}, H and D as in ft"
        )
    return attn.view(1, heads, dim)


def _check_rank(name: str, tensor: torch.Tensor, rank: int) -> None:
    if tensor.dim() != rank:
        raise ValueError(f"{name} has shape {tuple(tensor.shape)}; expected {rank} dimensions (N, H, D)")


def check_shape(name: str, tensor: torch.Tensor, expected: tuple[int, ...], given: str = "ft") -> None:
    """Raise `ValueError` naming `name` if `tensor` does not have the shape `expected`."""
    if tuple(tensor.shape) != expected:
        raise ValueError(f"{name} has shape {tuple(tensor.shape)}; expected {expected} for this graph and {given}")


def neighbour_max(graph: dgl.DGLGraph, src_values: torch.Tensor) -> torch.Tensor:
    """Per destination node, the max of `src_values` over its in-neighbours (0 if none).

    `src_values` (non-negative) is indexed by source node, any trailing shape. Nodes
    without in-edges get 0, the right neutral value for the norms it is used on.

    This is `update_all(fn.copy_u, fn.max)` as one `dgl.ops` call (see the module note).
    The raw kernel leaves -inf at nodes without in-edges (and routes their gradient to
    source 0); `clamp_min(0)`, exact on the non-negative values it is used on, gives 0
    there with zero gradient, in one op where `masked_fill(isinf)` takes two.
    """
    return dgl.ops.copy_u_max(graph, src_values).clamp_min(0.0)


def check_normaliser_options(*, variant: str, alpha: float) -> None:
    """Raise `ValueError` naming the value if a LipschitzNorm option is not allowed."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; allowed: {', '.join(VARIANTS)}")
    if not (math.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"alpha must be a finite number >= 0, got {alpha}")


def check_eps(eps: float) -> None:
    if not (math.isfinite(eps) and eps >= 0):
        raise ValueError(f"eps must be a finite number >= 0, got {eps}")
