"""PairNorm (Zhao & Akoglu, ICLR 2020), following the authors' code (LingxiaoShawn/PairNorm).

With x_c = x - mean_i x_i (the column mean over nodes) and eps = 1e-6:

- "PN":     s x_c / sqrt(eps + mean_i ||x_c,i||^2)
- "PN-SI":  s x_c,i / sqrt(eps + ||x_c,i||^2)
- "PN-SCS": s x_i / sqrt(eps + ||x_i||^2) - mean_i x_i   (the mean of the input, as the
  authors subtract it after scaling)
- None:     identity.

Statistics are taken over all nodes of the input, as in the original (and in the
LipschitzNorm authors' DeepGT), so a batched graph is normalised as one graph. With
`per_graph=True` they are taken over each graph of a DGL batched graph instead, which keeps
a graph's output independent of the other graphs in the batch (inductive settings).
"""

from __future__ import annotations

import dgl
import torch
from torch import nn

from lipnorm import kernels
from lipnorm.settings.model_config import check_pairnorm

EPS = 1e-6


def pairnorm_pn(x: torch.Tensor, scale: float) -> torch.Tensor:
    """PairNorm's "PN" of S sets side by side: `x` `(N, S, W)`, each set centred and
    scaled by its own rows, ``scale * x_c / sqrt(EPS + mean_n ||x_c,n||^2)``.

    In the compiled kernel where it runs (`lipnorm.kernels.use`): three passes over the
    nodes forward and two backward, its statistics in float64, where the torch form
    (`lipnorm.kernels.reference.pairnorm`) takes a dozen calls each way.
    """
    return kernels.pairnorm(x, scale, EPS)


class PairNorm(nn.Module):
    """`forward(graph, x)` on node features `(N, F)` or `(N, H, D)` (heads flattened)."""

    def __init__(self, mode: str | None = "PN", scale: float = 1.0, *, per_graph: bool = False):
        super().__init__()
        self.mode = check_pairnorm(mode, scale)
        self.scale = scale
        self.per_graph = per_graph

    def extra_repr(self) -> str:
        return f"mode={self.mode!r}, scale={self.scale}, per_graph={self.per_graph}"

    def _node_mean(self, graph: dgl.DGLGraph | None, x: torch.Tensor) -> torch.Tensor:
        """Mean over nodes (rows), broadcastable against `x`."""
        if not self.per_graph:
            return x.mean(dim=0, keepdim=True)
        if graph is None:
            raise ValueError("PairNorm(per_graph=True) needs the graph, got None")
        counts = graph.batch_num_nodes()
        return dgl.ops.segment_reduce(counts, x, "mean").repeat_interleave(counts, dim=0)

    def forward(self, graph: dgl.DGLGraph | None, x: torch.Tensor) -> torch.Tensor:
        if self.mode is None:
            return x
        rows = x.reshape(x.shape[0], -1)
        if self.mode == "PN" and not self.per_graph:
            return pairnorm_pn(rows.unsqueeze(1), self.scale).reshape(x.shape)
        mean = self._node_mean(graph, rows)
        if self.mode == "PN":
            centred = rows - mean
            squared_norms = centred.pow(2).sum(dim=1, keepdim=True)
            out = self.scale * centred / (EPS + self._node_mean(graph, squared_norms)).sqrt()
        elif self.mode == "PN-SI":
            centred = rows - mean
            out = self.scale * centred / (EPS + centred.pow(2).sum(dim=1, keepdim=True)).sqrt()
        else:
            out = self.scale * rows / (EPS + rows.pow(2).sum(dim=1, keepdim=True)).sqrt() - mean
        return out.reshape(x.shape)
