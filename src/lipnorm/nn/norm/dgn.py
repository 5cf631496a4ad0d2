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

from lipnorm.nn.norm.batchnorm import check_batchnorm_options, check_positive_int, node_rows
from lipnorm.settings.model_config import DGN_SKIP_WEIGHT

__all__ = ["DiffGroupNorm", "dgn_layer"]


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
        assignment = F.softmax(self.cluster(rows), dim=1)  # (N, G)
        # Group g's features S[:, g] * h side by side: (N, G * width).
        grouped = (assignment.unsqueeze(2) * rows.unsqueeze(1)).reshape(rows.shape[0], -1)
        normalised = self.bn(grouped).view(rows.shape[0], self.num_groups, self.width).sum(dim=1)
        return (rows + self.skip_weight * normalised).reshape(h.shape)



def dgn_layer(width: int, config) -> DiffGroupNorm:
    """The registered factory of `dgn`: `DiffGroupNorm(width)` with G = 10 and lambda =
    the model's `dgn_skip_weight` (`DGN_SKIP_WEIGHT` by default, the authors' value for
    GAT with missing features on Cora and CiteSeer; the "dgn" recipe's is theirs per
    dataset, `lipnorm.settings.recipes.dgn_skip_weight`)."""
    return DiffGroupNorm(width, skip_weight=config.dgn_skip_weight)
