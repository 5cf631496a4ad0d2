"""BatchNorm over the nodes of a graph, a representation normalisation applied after each
layer of a deep model, and what the normalisations here share (`node_rows`).

A normalisation here is an `nn.Module` built as `Cls(width, **options)` whose
`forward(graph, h)` takes a layer's output, `(N, width)` or `(N, H, D)` with `H * D ==
width` (heads flattened, shape given back), as `lipnorm.nn.PairNorm` does. Statistics are
over all N nodes of the graph (full-batch training: the "batch" is the graph).

`BatchNorm`: `torch.nn.BatchNorm1d` over the nodes, as DeCorr (Jin et al., KDD 2022)
and PairNorm (Zhao & Akoglu, ICLR 2020) use it as a baseline: in training, each column
is standardised with the batch mean and biased variance, then scaled and shifted by the
learnt ``gamma``, ``beta``; the running mean and unbiased variance, updated with
`momentum`, standardise in evaluation. Defaults are PyTorch's (momentum 0.1, eps 1e-5).
"""

from __future__ import annotations

import math

import dgl
import torch
from torch import nn

__all__ = ["BatchNorm", "node_rows"]


def check_positive_int(name: str, value: int) -> None:
    if not (isinstance(value, int) and value >= 1):
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def check_batchnorm_options(momentum: float, eps: float) -> None:
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
        check_positive_int("width", width)
        check_batchnorm_options(momentum, eps)
        self.width = width
        self.bn = nn.BatchNorm1d(width, eps=eps, momentum=momentum, affine=affine)

    def extra_repr(self) -> str:
        return f"width={self.width}"

    def forward(self, graph: dgl.DGLGraph | None, h: torch.Tensor) -> torch.Tensor:
        """`h` `(N, width)` or `(N, H, D)` -> the same shape; `graph` is not used."""
        return self.bn(node_rows(h, self.width, "BatchNorm")).reshape(h.shape)
