"""The kernels' formulas in torch: what each compiled kernel computes, in differentiable
torch calls on any device.

They serve twice: as the paths the layers take where a kernel does not run (PairNorm's
and DGN's torch paths are these functions), and as the backward of a kernel whose
gradient is differentiated again (``create_graph=True``): the kernels' own backwards run
once, so there the gradient is taken through these forms instead, which autograd can
differentiate any number of times (`lipnorm.kernels.functions`).
"""

from __future__ import annotations

import torch

__all__ = ["gat_attention", "grouped_linear", "dgn_output", "pairnorm"]


def grouped_linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """`out[n, s] = weight[s] @ x[n, s]`: x `(N, S, I)`, weight `(S, O, I)`."""
    return torch.einsum("nsi,soi->nso", x, weight)


def pairnorm(x: torch.Tensor, scale: float, eps: float) -> torch.Tensor:
    """PairNorm's "PN" of S sets `x` `(N, S, W)`: ``scale * x_c / sqrt(eps + mean_n ||x_c,n||^2)``."""
    centred = x - x.mean(dim=0, keepdim=True)
    squared_norms = centred.pow(2).sum(dim=2, keepdim=True)  # (N, S, 1)
    return scale * centred / (eps + squared_norms.mean(dim=0, keepdim=True)).sqrt()


def dgn_output(
    assignment: torch.Tensor, h: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None,
    eps: float, skip_weight: float, running: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """DGN's ``h + skip_weight * sum_g BN(assignment[g] h)``: `(out (N, S, W), mean, var)`,
    the statistics `(S, G, W)` float64 (the batch's where `running` is None), in float64
    inside (`lipnorm.nn.norm.dgn.dgn_output` derives it)."""
    sets, groups, nodes = assignment.shape
    width = h.shape[2]
    double = dict(dtype=torch.float64, memory_format=torch.contiguous_format)
    a, x = assignment.to(**double), h.transpose(0, 1).to(**double)  # (S, G, N), (S, N, W)
    if running is None:
        mean = torch.bmm(a, x) / nodes  # (S, G, W)
        var = (torch.bmm(a.square(), x.square()) / nodes - mean.square()).clamp_min(0)
    else:
        mean = running[0].double().view(sets, groups, width)
        var = running[1].double().view(sets, groups, width)
    scale = torch.rsqrt(var + eps)
    shift = -(mean * scale)
    if weight is not None:
        gamma = weight.double().view(sets, groups, width)
        scale, shift = gamma * scale, gamma * shift + bias.double().view(sets, groups, width)
    normalised = x * torch.bmm(a.transpose(1, 2), scale) + shift.sum(dim=1, keepdim=True)  # (S, N, W)
    return h + skip_weight * normalised.transpose(0, 1).to(h.dtype), mean.detach(), var.detach()


def gat_attention(
    in_edges: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    ft: torch.Tensor,
    attn_l: torch.Tensor,
    attn_r: torch.Tensor,
    *,
    lip: bool,
    alpha: float,
    eps: float,
    negative_slope: float,
    kept: torch.Tensor | None,
    heads_per_seed: int,
    drop: torch.Tensor | None,
) -> torch.Tensor:
    """GAT's attention-weighted neighbour sum `(N, G, D)` over the in-edge index
    `in_edges` = (indptr, src, eid), as `lipnorm.kernels.gat_attention` computes it:
    scores, LipschitzNorm (the paper's variant), LeakyReLU, softmax over each node's kept
    in-edges (none kept: 0), the dropout multiplier, the sum. `attn_l`, `attn_r` `(G, D)`;
    `kept` `(E, S)` bool by edge ID or None; `drop` `(S, E, H)` or None."""
    indptr, src, eid = in_edges
    nodes, groups, _ = ft.shape
    dst = torch.repeat_interleave(torch.arange(nodes, device=ft.device), indptr.diff())  # per in-edge position
    el, er = (ft * attn_l).sum(-1), (ft * attn_r).sum(-1)  # (N, G)
    z = el[src] + er[dst]  # (E, G), in-edge order
    mask = None if kept is None else kept[eid].repeat_interleave(heads_per_seed, dim=1)
    per_node = dst.unsqueeze(1).expand(-1, groups)
    if lip:
        squared = ft.square().sum(-1)  # (N, G)
        neighbour = squared[src] if mask is None else squared[src].masked_fill(~mask, 0)
        largest = squared.new_zeros(nodes, groups).scatter_reduce(0, per_node, neighbour, "amax")  # 0: neutral
        bound = (attn_l.square().sum(-1) + attn_r.square().sum(-1)) * (squared + largest)
        tiny = bound <= eps * eps
        factor = torch.where(tiny, 0, torch.rsqrt(torch.where(tiny, 1, bound)))  # 0 where the bound vanishes
        z = alpha * (z * factor[dst])
    scores = torch.nn.functional.leaky_relu(z, negative_slope)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    row_max = scores.new_full((nodes, groups), float("-inf")).scatter_reduce(0, per_node, scores.detach(), "amax")
    row_max = row_max.masked_fill(row_max == float("-inf"), 0)  # a row without a kept edge: all weights 0
    weights = torch.exp(scores - row_max[dst])
    total = weights.new_zeros(nodes, groups).index_add(0, dst, weights)
    attention = weights / total.masked_fill(total == 0, 1)[dst]
    if drop is not None:  # (S, E, H) -> (E, G) by edge ID -> in-edge order
        attention = attention * drop.permute(1, 0, 2).reshape(-1, groups)[eid]
    return ft.new_zeros(ft.shape).index_add(0, dst, attention.unsqueeze(-1) * ft[src])
