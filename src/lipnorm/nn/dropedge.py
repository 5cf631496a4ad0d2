"""DropEdge (Rong, Huang, Xu, Huang, "DropEdge: Towards Deep Graph Convolutional Networks
on Node Classification", ICLR 2020): each training epoch the model sees the graph with a
fresh random subset of its edges removed; evaluation uses the full graph.

Choices, after the authors' code (github.com/DropEdge/DropEdge, `src/sample.py`,
`Sampler.randomedge_sampler`, and `src/normalization.py`):

- Each edge is dropped on its own, direction by direction: they permute the nonzero
  entries of the (symmetric) adjacency matrix, each of which is one direction of an
  undirected edge, and keep the first ones, so u -> v can be kept while v -> u is dropped.
  Here the entries are the graph's edges (DGL stores an undirected edge as two).
- A fixed number is kept, not a binomial one: of the E non-self-loop edges exactly
  floor(E (1 - rate)) are kept (their ``preserve_nnz = int(nnz * percent)``, percent
  = 1 - rate), chosen uniformly without replacement.
- Self-loops are always kept: their sampled matrix has none, and their normalisations
  (e.g. "AugNormAdj", D^-1/2 (A + I) D^-1/2) add them after sampling. This project's
  graphs carry one self-loop per node, which is never a candidate for dropping.
- Renormalisation: they normalise the sampled matrix anew (degrees of the kept edges).
  Nothing is rescaled here; the layers do it, as they compute their normalisation from
  the graph they are given: the attention's edge softmax over the kept in-edges, GCN's
  D^-1/2 A D^-1/2 from the kept degrees (`lipnorm.nn.conv.gcn.GCNLayer`).

Randomness: a dedicated `torch.Generator` seeded from the run's seed, so that the masks
do not shift the model's dropout stream (the global generator) and that the state can be
saved and restored (`state_dict`, `load_state_dict`) to resume a run with the same masks.
"""

from __future__ import annotations

import math
from typing import Any

import dgl
import torch

from lipnorm.dgl_private import per_structure

__all__ = ["DropEdge"]


def _loops_and_candidates(graph: dgl.DGLGraph) -> tuple[torch.Tensor, torch.Tensor]:
    """IDs of the self-loops and of the other edges, on the CPU: what `DropEdge` keeps
    and draws from, once per graph structure (training draws every epoch on one graph)."""
    src, dst = (ids.cpu() for ids in graph.edges(order="eid"))
    is_loop = src == dst
    return torch.nonzero(is_loop).squeeze(1), torch.nonzero(~is_loop).squeeze(1)


class DropEdge:
    """Per-epoch edge dropping with its own random stream.

    Parameters
    ----------
    rate : float
        The fraction of the non-self-loop edges removed each epoch, in [0, 1).
    seed : int
        Seed of the dedicated generator (e.g. the run's seed).

    Notes
    -----
    In a training loop::

        drop = DropEdge(0.3, seed=run_seed)
        for epoch in range(epochs):
            logits = model(drop.graph_for_epoch(graph), x)  # training forward
            ...
            evaluate(model(graph, x))  # always the full graph
    """

    def __init__(self, rate: float, seed: int):
        if not (isinstance(rate, (int, float)) and math.isfinite(rate) and 0 <= rate < 1):
            raise ValueError(f"DropEdge rate must be a number in [0, 1), got {rate!r}")
        self.rate = float(rate)
        self.seed = seed
        self.generator = torch.Generator().manual_seed(seed)

    def __repr__(self) -> str:
        return f"DropEdge(rate={self.rate}, seed={self.seed})"

    def kept_edges(self, graph: dgl.DGLGraph, ordered: bool = True) -> torch.Tensor:
        """IDs of the edges kept this time, ascending (in no order with `ordered=False`,
        e.g. for a mask, where the sort is half the cost), on the CPU; draws from the
        generator, the same draws either way.

        Every self-loop, and floor(E (1 - rate)) of the E other edges, uniformly.
        """
        loops, candidates = per_structure(graph, "dropedge_loops_and_candidates", _loops_and_candidates)
        # Rounded first so that float error does not floor e.g. 10 * (1 - 0.9) to 0.
        num_kept = math.floor(round(len(candidates) * (1.0 - self.rate), 9))
        chosen = candidates[torch.randperm(len(candidates), generator=self.generator)[:num_kept]]
        kept = torch.cat([loops, chosen])
        return kept.sort().values if ordered else kept

    def graph_for_epoch(self, graph: dgl.DGLGraph) -> dgl.DGLGraph:
        """`graph` with this epoch's edges dropped; a new graph, `graph` is not changed.

        Same nodes and node data; the kept edges in their original order, with their edge
        data and their IDs in `graph` as `edata[dgl.EID]`; a batched graph keeps its
        batch sizes (nodes and kept edges per graph). `rate` 0 gives `graph` itself and
        draws nothing.
        """
        if self.rate == 0:
            return graph
        kept = self.kept_edges(graph)
        dropped = dgl.edge_subgraph(graph, kept.to(graph.device), relabel_nodes=False)
        if graph.batch_size > 1:
            # edge_subgraph forgets the batch; edge IDs are grouped by graph in a batch.
            ends = graph.batch_num_edges().cpu().cumsum(0)
            owner = torch.searchsorted(ends, kept, right=True)
            dropped.set_batch_num_nodes(graph.batch_num_nodes())
            dropped.set_batch_num_edges(torch.bincount(owner, minlength=graph.batch_size).to(graph.device))
        return dropped

    def state_dict(self) -> dict[str, Any]:
        """`rate`, `seed` and the generator's state: what `load_state_dict` restores."""
        return {"rate": self.rate, "seed": self.seed, "generator": self.generator.get_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue the random stream saved by `state_dict` (of a DropEdge of this rate)."""
        if state["rate"] != self.rate:
            raise ValueError(f"DropEdge state of rate {state['rate']} loaded into a DropEdge of rate {self.rate}")
        self.seed = state["seed"]
        self.generator.set_state(state["generator"])
