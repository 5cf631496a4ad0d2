"""Representation normalisations applied after each layer of a deep model: BatchNorm, DGN.

Each is an `nn.Module` built as `Cls(width, **options)` whose `forward(graph, h)` takes a
layer's output, `(N, width)` or `(N, H, D)` with `H * D == width` (heads flattened, shape
given back), as `lipnorm.nn.PairNorm` does. Statistics are over all N nodes of the graph
(full-batch training: the "batch" is the graph).

- `BatchNorm`: `torch.nn.BatchNorm1d` over the nodes, as DeCorr (Jin et al., KDD 2022)
  and PairNorm (Zhao & Akoglu, ICLR 2020) use it as a baseline: in training, each column
  is standardised with the batch mean and biased variance, then scaled and shifted by the
  learnt ``gamma``, ``beta``; the running mean and unbiased variance, updated with
  `momentum`, standardise in evaluation. Defaults are PyTorch's (momentum 0.1, eps 1e-5).
- `DiffGroupNorm` (DGN: Zhou et al., "Towards Deeper Graph Neural Networks with
  Differentiable Group Normalization", NeurIPS 2020): a soft assignment of the nodes to
  G groups, S = softmax(h W + b) `(N, G)`, then

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

__all__ = ["BatchNorm", "DiffGroupNorm", "batchnorm_layer", "dgn_layer", "DGN_SKIP_WEIGHT"]


def _check_positive_int(name: str, value: int) -> None:
    if not (isinstance(value, int) and value >= 1):
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def _check_batchnorm_options(momentum: float, eps: float) -> None:
    if not (math.isfinite(momentum) and 0 <= momentum <= 1):
        raise ValueError(f"momentum must be a number in [0, 1], got {momentum}")
    if not (math.isfinite(eps) and eps > 0):
        raise ValueError(f"eps must be a finite number > 0, got {eps}")


def node_rows(h: torch.Tensor, width: int, norm: str) -> torch.Tensor:
    """`h` as `(N, width)` rows (heads flattened); `ValueError` if its width is not `width`."""
    if h.dim() < 2 or math.prod(h.shape[1:]) != width:
        raise ValueError(
            f"{norm} of width {width} got features of shape {tuple(h.shape)}; allowed: "
            f"(N, {width}) or (N, H, D) with H * D = {width}"
        )
    return h.reshape(h.shape[0], width)


class BatchNorm(nn.Module):
    """`torch.nn.BatchNorm1d(width)` over the nodes of the graph (see the module docstring).

    Parameters
    ----------
    width : int
        Features per node (H * D for a layer with H heads of D features).
    momentum, eps, affine :
        As `torch.nn.BatchNorm1d`.
    """

    def __init__(self, width: int, *, momentum: float = 0.1, eps: float = 1e-5, affine: bool = True):
        super().__init__()
        _check_positive_int("width", width)
        _check_batchnorm_options(momentum, eps)
        self.width = width
        self.bn = nn.BatchNorm1d(width, eps=eps, momentum=momentum, affine=affine)

    def extra_repr(self) -> str:
        return f"width={self.width}"

    def forward(self, graph: dgl.DGLGraph | None, h: torch.Tensor) -> torch.Tensor:
        """`h` `(N, width)` or `(N, H, D)` -> the same shape; `graph` is not used."""
        return self.bn(node_rows(h, self.width, "BatchNorm")).reshape(h.shape)


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
        _check_positive_int("width", width)
        _check_positive_int("num_groups", num_groups)
        if not math.isfinite(skip_weight):
            raise ValueError(f"skip_weight must be a finite number, got {skip_weight}")
        _check_batchnorm_options(momentum, eps)
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


# DGN's lambda for GAT with 100 % missing features on Cora and CiteSeer (their
# options/base_options.py `reset_weight`): the setting of this project's deep experiments.
DGN_SKIP_WEIGHT = 0.01


def batchnorm_layer(width: int, config) -> BatchNorm:
    """The registered factory of `batchnorm` (`lipnorm.registry`): `BatchNorm(width)`
    with the model's `batchnorm_momentum` (torch's 0.1, the "dgn" recipe's 0.3)."""
    return BatchNorm(width, momentum=config.batchnorm_momentum)


def dgn_layer(width: int, config) -> DiffGroupNorm:
    """The registered factory of `dgn`: `DiffGroupNorm(width)` with G = 10 and lambda =
    the model's `dgn_skip_weight` (`DGN_SKIP_WEIGHT` by default, the authors' value for
    GAT with missing features on Cora and CiteSeer; the "dgn" recipe's is theirs per
    dataset, `lipnorm.recipes.dgn_skip_weight`)."""
    return DiffGroupNorm(width, skip_weight=config.dgn_skip_weight)
