"""The loaded-dataset object every later stage consumes, and the split helpers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # torch and dgl are imported lazily: `lipnorm --help` stays instant
    import dgl
    import torch

METRICS = ("accuracy", "micro-f1", "ogb-accuracy")


class DatasetError(ValueError):
    """A dataset cannot be fetched or trusted: unknown name, missing mirror file,
    network failure, unsafe or truncated archive, checksum mismatch.

    A ValueError so that the CLI reports it like any other bad input
    (`lipnorm COMMAND: error: ...`, exit 2).
    """


@dataclass
class NodeDataset:
    """One node-classification graph with its split (see docs/architecture.md)."""

    name: str
    graph: "dgl.DGLGraph"
    features: "torch.Tensor"
    labels: "torch.Tensor"
    train_mask: "torch.Tensor"
    val_mask: "torch.Tensor"
    test_mask: "torch.Tensor"
    num_classes: int
    multilabel: bool
    metric: str
    # Edges as the loader delivers them, before self-loop handling (DGL's count: Cora
    # 10556; ogbn-arxiv after it is made bidirected).
    source_edges: int

    @property
    def num_nodes(self) -> int:
        return self.graph.num_nodes()

    def info(self) -> dict[str, Any]:
        """The counts `lipnorm data info` prints: `edges` as published (DGL's count),
        `graph_edges` as the models see them (self-loops removed, one per node added)."""
        return {
            "name": self.name,
            "nodes": self.graph.num_nodes(),
            "edges": self.source_edges,
            "graph_edges": self.graph.num_edges(),
            "features": int(self.features.shape[1]),
            "classes": self.num_classes,
            "train": int(self.train_mask.sum()),
            "val": int(self.val_mask.sum()),
            "test": int(self.test_mask.sum()),
            "multilabel": self.multilabel,
            "metric": self.metric,
        }


def build_node_dataset(
    name: str,
    src,
    dst,
    num_nodes: int,
    features,
    labels,
    masks: tuple,
    num_classes: int,
    multilabel: bool,
    metric: str,
) -> NodeDataset:
    """Assemble a NodeDataset from edge lists and arrays (numpy or torch).

    Self-loops are removed and then added once per node, so every node attends to
    itself exactly once whatever the raw data contained. The graph carries no
    node data: the dataclass fields are the single source of features and labels.
    """
    import dgl
    import torch

    src = torch.as_tensor(np.asarray(src), dtype=torch.int64)
    dst = torch.as_tensor(np.asarray(dst), dtype=torch.int64)
    keep = src != dst
    graph = dgl.add_self_loop(dgl.graph((src[keep], dst[keep]), num_nodes=num_nodes))
    label_dtype = torch.float32 if multilabel else torch.int64
    train, val, test = (torch.as_tensor(np.asarray(m), dtype=torch.bool) for m in masks)
    if metric not in METRICS:
        raise ValueError(f"metric {metric!r} is not one of {METRICS}")
    return NodeDataset(
        name=name,
        graph=graph,
        features=torch.as_tensor(np.asarray(features), dtype=torch.float32),
        labels=torch.as_tensor(np.asarray(labels), dtype=label_dtype),
        train_mask=train,
        val_mask=val,
        test_mask=test,
        num_classes=int(num_classes),
        multilabel=multilabel,
        metric=metric,
        source_edges=len(src),
    )


PARTS = ("graph", "features", "labels", "train_mask", "val_mask", "test_mask")


def dataset_from_parts(name: str, parts: Any) -> NodeDataset:
    """The NodeDataset of what a registered dataset's `load()` returned: a mapping with
    the keys of `PARTS` (and optionally `num_classes`): a DGLGraph, features `(N, F)`,
    integer labels `(N,)` in ``[0, num_classes)``, boolean masks `(N,)` (train not
    empty). Self-loops are removed and added once (`build_node_dataset`). Anything
    else is a ValueError naming the part and what was expected.
    """
    import dgl
    import torch

    where = f"dataset {name!r}: load() returned"
    if not isinstance(parts, dict):
        raise ValueError(f"{where} {type(parts).__name__}; expected a dict with keys {', '.join(PARTS)}")
    missing = [key for key in PARTS if key not in parts]
    unknown = sorted(set(parts) - {*PARTS, "num_classes"})
    if missing or unknown:
        raise ValueError(
            f"{where} keys {sorted(parts)}: missing {missing}, unknown {unknown}; expected "
            f"{', '.join(PARTS)} and optionally num_classes"
        )
    graph = parts["graph"]
    if not isinstance(graph, dgl.DGLGraph) or not graph.is_homogeneous:
        raise ValueError(f"{where} graph of type {type(graph).__name__}; expected a homogeneous dgl.DGLGraph")
    num_nodes = graph.num_nodes()
    features = torch.as_tensor(np.asarray(parts["features"]))
    if features.dim() != 2 or features.shape[0] != num_nodes or not features.is_floating_point():
        raise ValueError(
            f"{where} features of shape {tuple(features.shape)} and dtype {features.dtype}; "
            f"expected floats of shape ({num_nodes}, F)"
        )
    labels = torch.as_tensor(np.asarray(parts["labels"]))
    if labels.shape != (num_nodes,) or labels.is_floating_point() or labels.dtype == torch.bool:
        raise ValueError(
            f"{where} labels of shape {tuple(labels.shape)} and dtype {labels.dtype}; "
            f"expected integers of shape ({num_nodes},)"
        )
    num_classes = int(parts.get("num_classes", int(labels.max()) + 1 if len(labels) else 0))
    if len(labels) and (int(labels.min()) < 0 or int(labels.max()) >= num_classes):
        raise ValueError(
            f"{where} labels in [{int(labels.min())}, {int(labels.max())}]; expected them in [0, {num_classes})"
        )
    masks = []
    for key in PARTS[3:]:
        mask = torch.as_tensor(np.asarray(parts[key]))
        if mask.shape != (num_nodes,) or mask.dtype != torch.bool:
            raise ValueError(
                f"{where} {key} of shape {tuple(mask.shape)} and dtype {mask.dtype}; expected bool of shape ({num_nodes},)"
            )
        masks.append(mask)
    if not masks[0].any():
        raise ValueError(f"{where} an empty train_mask; expected at least one training node")
    src, dst = graph.edges()
    return build_node_dataset(
        name, src, dst, num_nodes, features, labels, tuple(masks), num_classes,
        multilabel=False, metric="accuracy",
    )


def sample_per_class(
    candidates: np.ndarray, labels: np.ndarray, per_class: int, rng: np.random.Generator
) -> np.ndarray:
    """Up to `per_class` nodes of each class drawn from `candidates`, sorted."""
    picked = [
        rng.permutation(candidates[labels[candidates] == c])[:per_class]
        for c in np.unique(labels[candidates])
    ]
    return np.sort(np.concatenate(picked)) if picked else np.empty(0, dtype=np.int64)


def index_mask(num_nodes: int, index: np.ndarray) -> np.ndarray:
    mask = np.zeros(num_nodes, dtype=bool)
    mask[index] = True
    return mask
