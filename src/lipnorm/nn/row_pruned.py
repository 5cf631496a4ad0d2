"""Node features given by their rows that can be non-zero (issue: grids of small runs).

With missing features (`--missing-rate 100`) every node outside the training split has
its feature row erased: on Cora 140 of 2,708 rows are left. A first layer that drops out
and projects the whole `(N, F)` input draws a dropout mask over 3.9 M entries and
multiplies 2,568 zero rows, most of a small network's epoch; on the rows that can be
non-zero only, it computes the same numbers (a zero row drops out and projects to zero,
whatever its mask), with a mask of `(R, F)` instead of `(N, F)`.

`row_pruned(feat)` gives that form (`RowPruned`); `GATConv` takes it as its input
(`lipnorm.nn.conv.gat`), the literature GAT gives it to its first layer, and the rows of one
features tensor are found once (`nonzero_rows` remembers the last tensor it saw).
"""

from __future__ import annotations

import weakref
from typing import NamedTuple

import torch

__all__ = ["RowPruned", "nonzero_rows", "row_pruned"]


class RowPruned(NamedTuple):
    """Features `(num_nodes, F)` that are zero outside the rows `rows`, whose values are
    `values` `(len(rows), F)` (`(S, len(rows), F)` for S seeds side by side,
    `lipnorm.nn.models.seed_batch`)."""

    rows: torch.Tensor
    values: torch.Tensor
    num_nodes: int

    def scatter(self, projected: torch.Tensor) -> torch.Tensor:
        """`projected` `(..., len(rows), W)`, the rows' images under a linear map, as the
        whole input's `(..., num_nodes, W)`: zero at the other rows."""
        shape = (*projected.shape[:-2], self.num_nodes, projected.shape[-1])
        return projected.new_zeros(shape).index_copy(projected.dim() - 2, self.rows, projected)

    def dense(self) -> torch.Tensor:
        """The whole features, `(num_nodes, F)` (or `(S, num_nodes, F)`)."""
        return self.scatter(self.values)


# The last features tensor `nonzero_rows` saw: (weak reference, version, rows). A run
# passes the same tensor every forward; its in-place change bumps `_version`.
_last_rows: tuple[weakref.ref, int, torch.Tensor] | None = None


def nonzero_rows(feat: torch.Tensor) -> torch.Tensor:
    """Indices of the rows of `feat` `(N, F)` (or of any of `(S, N, F)`'s slices) with a
    non-zero entry, ascending, on its device; remembered for the last tensor asked about
    while it lives unchanged."""
    global _last_rows
    if _last_rows is not None:
        ref, version, rows = _last_rows
        if ref() is feat and version == feat._version:
            return rows
    nonzero = feat != 0
    if feat.dim() == 3:
        nonzero = nonzero.any(dim=0)
    rows = torch.nonzero(nonzero.any(dim=1)).squeeze(1)
    _last_rows = (weakref.ref(feat), feat._version, rows)
    return rows


def row_pruned(feat: torch.Tensor) -> RowPruned:
    """`feat` `(N, F)` (or `(S, N, F)`) as its rows that can be non-zero."""
    if feat.dim() not in (2, 3):
        raise ValueError(f"features must be (N, F) or (S, N, F); got shape {tuple(feat.shape)}")
    rows = nonzero_rows(feat)
    return RowPruned(rows, feat.index_select(feat.dim() - 2, rows), feat.shape[-2])
