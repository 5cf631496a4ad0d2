"""DGN, differentiable group normalisation (Zhou et al., "Towards Deeper Graph Neural
Networks with Differentiable Group Normalization", NeurIPS 2020), a representation
normalisation applied after each layer of a deep model, `forward(graph, h)` as
`lipnorm.nn.norm.batchnorm.BatchNorm`'s.

A soft assignment of the nodes to G groups, S = softmax(h W + b) `(N, G)`, then

    out = h + lambda * sum_g BN_g(S[:, g] * h),

with one BatchNorm (own statistics and affine parameters) per group. As in the
authors' code (github.com/Kaixiong-Zhou/DGN, `models/common_blocks.py`, class
`batch_norm`, type_norm "group"), the G BatchNorms are one `BatchNorm1d(G * width)` over
the groups' scaled features side by side (the same statistics, column by column),
with their momentum 0.3; the defaults G = 10 (`num_groups`) and lambda = 0.005
(`skip_weight`) are the defaults of their `options/base_options.py`. That file's
`reset_weight` sets lambda per dataset and setting; for GAT with 100 % missing
features it is 0.01 on Cora and on CiteSeer (pass `skip_weight=0.01` to reproduce it).
"""

from __future__ import annotations

import math

import dgl
import torch
import torch.nn.functional as F
from torch import nn

from lipnorm import kernels
from lipnorm.nn.norm.batchnorm import check_batchnorm_options, check_positive_int, node_rows
from lipnorm.settings.model_config import DGN_SKIP_WEIGHT

__all__ = ["DiffGroupNorm", "group_assignment", "dgn_output"]


class DiffGroupNorm(nn.Module):
    """Differentiable group normalisation, DGN (see the module docstring).

    Parameters
    ----------
    width : int
        Features per node (H * D for a layer with H heads of D features).
    num_groups : int
        G, the number of soft groups (10 in the authors' code).
    skip_weight : float
        lambda, the weight of the normalised groups added to the input (0.005 there).
    momentum, eps :
        Of the groups' BatchNorm (0.3 and PyTorch's 1e-5 there).

    Attributes
    ----------
    cluster : nn.Linear
        `width -> num_groups`, the assignment scores (their `group_func`, with bias).
    bn : nn.BatchNorm1d
        Of `num_groups * width` columns: group g's statistics are columns
        `g * width .. (g + 1) * width - 1`.
    """

    def __init__(
        self,
        width: int,
        *,
        num_groups: int = 10,
        skip_weight: float = 0.005,
        momentum: float = 0.3,
        eps: float = 1e-5,
    ):
        super().__init__()
        check_positive_int("width", width)
        check_positive_int("num_groups", num_groups)
        if not math.isfinite(skip_weight):
            raise ValueError(f"skip_weight must be a finite number, got {skip_weight}")
        check_batchnorm_options(momentum, eps)
        self.width = width
        self.num_groups = num_groups
        self.skip_weight = skip_weight
        self.cluster = nn.Linear(width, num_groups)
        self.bn = nn.BatchNorm1d(num_groups * width, eps=eps, momentum=momentum)

    def extra_repr(self) -> str:
        return f"width={self.width}, num_groups={self.num_groups}, skip_weight={self.skip_weight}"

    def forward(self, graph: dgl.DGLGraph | None, h: torch.Tensor) -> torch.Tensor:
        """`h` `(N, width)` or `(N, H, D)` -> the same shape; `graph` is not used."""
        rows = node_rows(h, self.width, "DiffGroupNorm")
        h3 = rows.unsqueeze(1)  # (N, 1, W): one set of the batched form, the same operations
        assignment = group_assignment(h3, self.cluster.weight.unsqueeze(0), self.cluster.bias.unsqueeze(0))
        return dgn_output(assignment, h3, self.bn, self.skip_weight).reshape(h.shape)


def group_assignment(h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """`(S, G, N)`: each node's soft assignment to the G groups, ``softmax(W h + b)``, for
    S sets of `h` `(N, S, W)` with their own `weight` `(S, G, W)` and `bias` `(S, G)`.
    Group-major, so that the softmax over the groups runs along N-long rows (over
    10-long ones it took 2.8 ms of a 22 ms layer at Cora, 5 seeds x 16)."""
    return F.softmax(torch.baddbmm(bias.unsqueeze(2), weight, h.permute(1, 2, 0)), dim=1)


def dgn_output(assignment: torch.Tensor, h: torch.Tensor, bn: nn.BatchNorm1d, skip_weight: float) -> torch.Tensor:
    """DGN's output ``h + skip_weight * sum_g BN(assignment[g] h)``, group g's columns of
    `bn`, for S sets side by side.

    `assignment` `(S, G, N)` (each node's weights over the G groups, group-major), `h`
    `(N, S, W)`, `bn` of ``S * G * W`` columns ordered (s, g, w): what `bn` does to the
    ``(N, S * G * W)`` matrix of every group's scaled features (batch statistics and a
    running-statistics update in training, the running ones in evaluation), summed over
    the groups, `(N, S, W)`, without forming that matrix. Column (g, w)'s mean and
    variance are ``A^T h`` and ``(A^2)^T h^2`` over the nodes, and ``sum_g gamma_gw
    (a_g h_w - mu_gw) / sigma_gw`` is ``h_w (A K)_w`` with ``K = gamma / sigma``, less ``sum_g
    gamma_gw mu_gw / sigma_gw``: products of ``(N, G)`` by ``(G, W)`` where the matrix was
    ``(N, G W)``, 10 x the features for DGN's 10 groups. In float64 inside: the
    shortcut's terms can cancel (a column of near-constant features), float32 BatchNorm's
    own rounding is what is left.

    The whole output, the skip connection with it, runs in the compiled kernel where it
    runs (`lipnorm.kernels.use`): the same numbers to float rounding in a few passes over
    the nodes, where the products above (`lipnorm.kernels.reference.dgn_output`) take two
    dozen calls each way.
    """
    nodes = assignment.shape[2]
    batch = bn.training or not bn.track_running_stats
    out, mean, var = kernels.dgn_output(
        assignment, h, bn.weight if bn.affine else None, bn.bias if bn.affine else None, bn.eps, skip_weight,
        None if batch else (bn.running_mean, bn.running_var),
    )
    if bn.training and bn.track_running_stats:
        _update_running_stats(bn, mean, var, nodes)
    return out


def _update_running_stats(bn: nn.BatchNorm1d, mean: torch.Tensor, var: torch.Tensor, nodes: int) -> None:
    """`bn`'s running mean and (unbiased) variance moved towards this batch's, as its own
    forward in training moves them."""
    with torch.no_grad():
        bn.num_batches_tracked.add_(1)
        momentum = 1 / bn.num_batches_tracked.item() if bn.momentum is None else bn.momentum
        unbiased = var * (nodes / (nodes - 1)) if nodes > 1 else var
        bn.running_mean.mul_(1 - momentum).add_(mean.reshape(-1).to(bn.running_mean.dtype), alpha=momentum)
        bn.running_var.mul_(1 - momentum).add_(unbiased.reshape(-1).to(bn.running_var.dtype), alpha=momentum)
