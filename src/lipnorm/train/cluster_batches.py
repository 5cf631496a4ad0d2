"""Cluster-GCN mini-batches (Chiang et al., KDD 2019) for graphs whose full-batch
training does not fit in memory.

The graph is split once into `partitions` (K) parts by METIS
(`dgl.dataloading.ClusterGCNSampler`), cached beside the dataset under the data root
(`cache_path`), so a later run of the same dataset and K reads them instead of running
METIS again. Each training epoch shuffles the K parts (a `torch.Generator` of its own,
saved with a run's state through `run_state.RandomStreams`) and groups them
`batch_partitions` (B) at a time: each group is one batch, the subgraph its nodes induce
(the edges between its parts included, the edges to other batches left out). Parts are
disjoint and each is used once per epoch, so every node, and every training node, is in
exactly one batch of an epoch. A batch without training nodes has nothing to learn from
and is skipped (`Batch.has_training_nodes`).

The subgraph is built on the host and then moved to the training device: on a GPU each
batch waits for that copy (as DropEdge's subset does) and for the layers' zero-in-degree
check of a new graph (`lipnorm.nn.conv.base.zero_in_degree_count`); the rest of a step
does not wait (`lipnorm.train.trainer.Trainer.train_step`).

The settings (`batching`, `partitions`, `batch_partitions`), their checks and the rule
that sizes K and B by the graph where they are not given (`cluster_counts`) are
`lipnorm.settings.train_config`'s.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Iterator, NamedTuple

import dgl
import numpy as np
import torch

from lipnorm.io import atomic_path

__all__ = ["Batch", "ClusterBatches", "cache_path", "partition_sampler"]


def cache_path(root: str | os.PathLike, dataset: str, partitions: int, csbm: Any = None) -> Path:
    """Where the METIS partition of `dataset` into `partitions` parts is cached:
    `<root>/<dataset>-metis-k<K>.pkl`, with a generated csbm's parameters in the name
    (`csbm-nodes500-classes3-...-metis-k8.pkl`), since they make its graph."""
    from lipnorm.grid import format_number

    name = dataset
    if csbm is not None:
        params = dataclasses.asdict(csbm)
        name += "".join(f"-{key}{format_number(value)}" for key, value in params.items())
    return Path(root) / f"{name}-metis-k{partitions}.pkl"


def partition_sampler(graph: dgl.DGLGraph, partitions: int, path: Path) -> dgl.dataloading.ClusterGCNSampler:
    """DGL's Cluster-GCN sampler of `graph` (on the CPU) into `partitions` METIS parts,
    read from `path` if it is there, else computed and written there atomically (DGL
    writes its cache in place: it writes a temporary file here, renamed onto `path`)."""
    if partitions > graph.num_nodes():
        raise ValueError(
            f"partitions={partitions} must be at most the graph's {graph.num_nodes()} nodes"
        )
    if path.exists():
        return dgl.dataloading.ClusterGCNSampler(graph, partitions, cache_path=str(path))
    with atomic_path(path) as tmp:
        tmp.unlink()  # DGL computes the partition only where no cache file exists
        sampler = dgl.dataloading.ClusterGCNSampler(graph, partitions, cache_path=str(tmp))
    return sampler


class Batch(NamedTuple):
    """One batch of an epoch, on the training device."""

    graph: dgl.DGLGraph  # the induced subgraph; its `ndata[dgl.NID]` are the graph's node IDs
    nodes: torch.Tensor  # the graph's IDs of the subgraph's nodes, in the subgraph's order
    train_rows: torch.Tensor  # positions of the batch's training nodes in the subgraph
    train_nodes: torch.Tensor  # their IDs in the graph
    num_train: int  # how many (known on the host: no wait for a device)

    @property
    def has_training_nodes(self) -> bool:
        return self.num_train > 0


class ClusterBatches:
    """The batches of each training epoch (module docstring), with their random stream.

    Parameters
    ----------
    sampler : dgl.dataloading.ClusterGCNSampler
        The partition (`partition_sampler`).
    graph : DGLGraph
        The graph it partitions, on the CPU.
    train_nodes : Tensor
        IDs of the training nodes.
    batch_partitions : int
        Partitions per batch (the last batch of an epoch has the remainder).
    seed : int
        Seed of the generator that shuffles the partitions every epoch.
    device : torch.device
        Where the batches go.
    cache_path : Path, optional
        Where the partition is cached (`cache_path`), for the run's log.
    reason : str
        Why these K and B (`lipnorm.settings.train_config.cluster_counts`), for the run's log.
    """

    def __init__(
        self,
        sampler: dgl.dataloading.ClusterGCNSampler,
        graph: dgl.DGLGraph,
        train_nodes: torch.Tensor,
        batch_partitions: int,
        seed: int,
        device: torch.device,
        cache_path: Path | None = None,
        reason: str = "as given",
    ):
        self.sampler = sampler
        self.cache_path = cache_path
        self.reason = reason
        self.graph = graph
        self.partitions = len(sampler.partition_offset) - 1
        self.batch_partitions = batch_partitions
        self.device = device
        self.is_train = torch.zeros(graph.num_nodes(), dtype=torch.bool)
        self.is_train[train_nodes.cpu()] = True
        # Its own seed derived from the run's: DropEdge's generator takes the run's seed.
        self.seed = int(np.random.SeedSequence(seed, spawn_key=(1,)).generate_state(1)[0])
        self.generator = torch.Generator().manual_seed(self.seed)

    def __repr__(self) -> str:
        return f"ClusterBatches(partitions={self.partitions}, batch_partitions={self.batch_partitions})"

    def epoch(self) -> Iterator[Batch]:
        """This epoch's batches: the partitions in a fresh order, `batch_partitions` at a
        time (drawn when called; a batch is built as it is reached)."""
        from lipnorm.train import device as devices

        order = torch.randperm(self.partitions, generator=self.generator)
        for group in order.split(self.batch_partitions):
            subgraph = self.sampler.sample(self.graph, group)
            nodes = subgraph.ndata[dgl.NID]
            train_rows = torch.nonzero(self.is_train[nodes]).squeeze(1)
            yield Batch(
                devices.move(subgraph, self.device), devices.move(nodes, self.device),
                devices.move(train_rows, self.device), devices.move(nodes[train_rows], self.device),
                len(train_rows),
            )

    def state_dict(self) -> dict[str, Any]:
        """The generator's state and what it shuffles: what `load_state_dict` restores."""
        return {
            "partitions": self.partitions, "batch_partitions": self.batch_partitions,
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue the stream saved by `state_dict` (of the same partitions and batches)."""
        saved = (state["partitions"], state["batch_partitions"])
        if saved != (self.partitions, self.batch_partitions):
            raise ValueError(
                f"cluster-batch state of {saved[0]} partitions, {saved[1]} per batch, loaded into "
                f"one of {self.partitions}, {self.batch_partitions} per batch"
            )
        self.generator.set_state(state["generator"])
