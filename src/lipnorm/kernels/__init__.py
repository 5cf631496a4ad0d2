"""lipnorm's compiled CPU kernels: GAT's attention, the seeds' per-seed projections, DGN's
grouped BatchNorm and PairNorm, each forward and backward in one compiled call.

On small layers (a few heads of 16 features, Cora-sized graphs) a layer does almost no
arithmetic: its cost is the dozen graph and element-wise calls between the projection
and the output, each walking the edges or the nodes once more. A kernel does them all in
one pass (docs/performance.md has the figures).

The interface the layers call:

- `gat_attention` (with `gat_attention_applies`), `grouped_linear`, `dgn_output`,
  `pairnorm`: the kernel where the rule of `use` lets it run, else (except
  `gat_attention`, whose fallback is the layer's DGL path) the torch form
  (`lipnorm.kernels.reference`), which computes the same formula;
- `use(family, *tensors, applies=...)`: the one rule for when a kernel runs, recorded;
- ``LIPNORM_KERNELS=auto|on|off``, `kernels_off`, `unavailable`, `require`, `record`
  (`lipnorm.kernels.dispatch`).

Numbers. The kernels compute the formulas of the layers' torch and DGL paths in another
order, so their results differ from those paths by float rounding (relative 1e-6 in
float32, 1e-15 in float64, more where a softmax or a normalisation is ill-conditioned),
but not between machines: a kernel's bits do not depend on the CPU or the instruction
set it was built for (`csrc/common.h` says how; tests/kernels/test_reproducible.py builds
two instruction-set levels and compares them bit for bit). Building, the cache and its
safety on shared machines: `lipnorm.kernels.build`.
"""

from __future__ import annotations

import dgl
import torch

from lipnorm.dgl_private import per_structure
from lipnorm.kernels import reference
from lipnorm.kernels.build import KernelsUnavailable
from lipnorm.kernels.dispatch import (
    KernelsWarning,
    kernels_off,
    mode,
    record,
    require,
    reset,
    unavailable,
    use,
)
from lipnorm.kernels.functions import dgn_output_call, gat_attention_call, grouped_linear_call, pairnorm_call

__all__ = [
    "gat_attention", "gat_attention_applies", "grouped_linear", "dgn_output", "pairnorm",
    "use", "mode", "unavailable", "require", "kernels_off", "record", "reset", "KernelsUnavailable", "KernelsWarning",
]


def gat_attention_applies(graph: dgl.DGLGraph) -> bool:
    """Whether `gat_attention` takes this graph: a whole homogeneous graph (not a block
    nor a bipartite graph)."""
    return not graph.is_block and graph.num_src_nodes() == graph.num_dst_nodes()


def _in_edges(graph: dgl.DGLGraph) -> tuple[tuple[torch.Tensor, torch.Tensor, torch.Tensor], int]:
    """The graph's in-edge (CSC) index `(indptr, src, eid)` and its widest in-degree,
    once per graph structure."""
    def build(graph):
        structure = tuple(t.to(torch.int64).contiguous() for t in graph.adj_tensors("csc"))
        widest = int(structure[0].diff().max()) if graph.num_nodes() else 0
        return structure, widest

    return per_structure(graph, "kernels-csc", build)


def gat_attention(
    graph: dgl.DGLGraph,
    ft: torch.Tensor,
    attn_l: torch.Tensor,
    attn_r: torch.Tensor,
    *,
    norm: str = "none",
    alpha: float = 1.0,
    eps: float = 1e-12,
    negative_slope: float = 0.2,
    kept: torch.Tensor | None = None,
    heads_per_seed: int | None = None,
    drop: torch.Tensor | None = None,
    get_attention: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """`GATConv`'s attention and neighbour sum on projections `ft` `(N, G, D)`, in the
    kernel: `(N, G, D)`, and with `get_attention` the attention `(E, G, 1)` by edge ID
    (after dropout, as `GATConv` returns it; for inspection: no gradient flows back
    through it). `KernelsUnavailable` where the kernels cannot run here; callers check
    `use("gat_attention", ft, applies=gat_attention_applies(graph))` first.

    Per head (group) g, destination i and kept in-edge j -> i::

        out_i = sum_j softmax_j(LeakyReLU(s_ij)) m_ij W h_j,
        s_ij = a_l . W h_j + a_r . W h_i                 (norm "none")
        s_ij = alpha (a_l . W h_j + a_r . W h_i) c_i     (norm "lip", LipschitzNorm, the
               paper's variant: c_i = 1 / (u v_i), 0 where u v_i <= eps)

    with m the attention-dropout multiplier. Float32's exp is a polynomial within about 1
    ulp that gives 0 below -87.3, where libm's gives a denormal.

    Parameters
    ----------
    graph : DGLGraph
        A whole homogeneous graph (`gat_attention_applies`).
    ft : (N, G, D) tensor
        The projected features W h, G heads (S seeds x H heads when seeds train together).
    attn_l, attn_r : (1, G, D) or (G, D) tensors
    norm : "none" or "lip"
    kept : (E, S) bool tensor, optional
        The edges each seed kept (DropEdge), by edge ID; head g belongs to seed
        ``g // heads_per_seed``. None: every edge for every head.
    drop : (S, E, G / S) tensor, optional
        The attention-dropout multiplier (mask / (1 - p)), seed-major, by edge ID (any
        shape of those values in that order, e.g. `(E, G, 1)` for one seed); None: none.
    """
    nodes, groups, dim = ft.shape
    if norm not in ("none", "lip"):
        raise ValueError(f"unknown norm {norm!r}; allowed: none, lip")
    if not gat_attention_applies(graph):
        raise ValueError("gat_attention takes a whole homogeneous graph, not a block or a bipartite graph")
    if nodes != graph.num_nodes():
        raise ValueError(f"ft has shape {tuple(ft.shape)}; expected {graph.num_nodes()} rows, one per node")
    for name, tensor in (("attn_l", attn_l), ("attn_r", attn_r)):
        if tensor.dtype != ft.dtype or tensor.device != ft.device or tensor.numel() != groups * dim:
            raise ValueError(
                f"{name} is a {tensor.dtype} tensor of shape {tuple(tensor.shape)} on {tensor.device}; expected "
                f"{ft.dtype} ({groups}, {dim}) values on {ft.device}, as ft"
            )
    heads_per_seed = heads_per_seed or groups
    if groups % heads_per_seed:
        raise ValueError(f"{groups} heads are not whole seeds of {heads_per_seed} heads each")
    if kept is not None:
        seeds = groups // heads_per_seed
        if kept.dtype != torch.bool or tuple(kept.shape) != (graph.num_edges(), seeds):
            raise ValueError(f"kept is a {kept.dtype} tensor of shape {tuple(kept.shape)}; expected bool (E, S) = "
                             f"({graph.num_edges()}, {seeds})")
        kept = kept.contiguous().view(torch.uint8)
    if drop is not None:
        drop = drop.reshape(groups // heads_per_seed, graph.num_edges(), heads_per_seed).to(ft.dtype).contiguous()
    reason = unavailable()
    if reason is not None:
        raise KernelsUnavailable(f"the compiled kernels are not available: {reason}", "take GATConv's DGL path")
    attn_l, attn_r = (a.reshape(groups, dim) for a in (attn_l, attn_r))
    out, attention = gat_attention_call(
        ft, attn_l, attn_r, _in_edges(graph), kept, drop, heads_per_seed, norm == "lip", alpha, eps, negative_slope,
        get_attention,
    )
    return (out, attention) if get_attention else out


def grouped_linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """`out[n, s] = weight[s] @ x[n, s]`: `(N, S, O)` from node-major `x` `(N, S, I)` and
    `weight` `(S, O, I)` (S seeds' projections of one layer, each its own matrix), as
    ``torch.einsum("nsi,soi->nso", x, weight)``; in the kernel where `use` lets it run."""
    if x.dim() != 3 or weight.dim() != 3 or weight.shape[0] != x.shape[1] or weight.shape[2] != x.shape[2]:
        raise ValueError(
            f"x has shape {tuple(x.shape)} and weight {tuple(weight.shape)}; expected (N, S, I) and (S, O, I)"
        )
    if use("grouped_linear", x, weight):
        return grouped_linear_call(x, weight)
    return reference.grouped_linear(x, weight)


def dgn_output(
    assignment: torch.Tensor, h: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None,
    eps: float, skip_weight: float, running: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """DGN's ``h + skip_weight * sum_g BN(assignment[g] h)`` (`lipnorm.nn.norm.dgn.dgn_output`):
    `(out (N, S, W), mean, var)`, the statistics `(S, G, W)` float64 (the batch's where
    `running` is None, else `running` = (mean, var) as given), for the caller's
    running-statistics update; in the kernel where `use` lets it run."""
    if use("dgn", h, assignment):
        return dgn_output_call(assignment, h, weight, bias, eps, skip_weight, running)
    return reference.dgn_output(assignment, h, weight, bias, eps, skip_weight, running)


def pairnorm(x: torch.Tensor, scale: float, eps: float) -> torch.Tensor:
    """PairNorm's "PN" of S sets `x` `(N, S, W)` (`lipnorm.nn.norm.pairnorm.pairnorm_pn`);
    in the kernel where `use` lets it run."""
    if use("pairnorm", x):
        return pairnorm_call(x, scale, eps)
    return reference.pairnorm(x, scale, eps)
