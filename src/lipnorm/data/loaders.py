"""Turn a verified raw folder into a NodeDataset through DGL's / OGB's own loaders."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from lipnorm.data.dataset import NodeDataset, build_node_dataset, index_mask, sample_per_class

# Coauthor-CS ships without a split; we use the one of Shchur et al. (2018),
# "Pitfalls of GNN evaluation": 20 training and 30 validation nodes per class,
# every other node for test, drawn once with this fixed seed so all runs share it.
COAUTHOR_SPLIT_SEED = 0
COAUTHOR_TRAIN_PER_CLASS = 20
COAUTHOR_VAL_PER_CLASS = 30


def load_planetoid(name: str, raw_dir: Path, raw_features: bool = False) -> NodeDataset:
    """cora, citeseer, pubmed with their public planetoid split.

    DGL's `CitationGraphDataset` row-normalises the features (every non-empty row sums
    to 1). `raw_features=True` gives the rows as stored in the planetoid files (Cora and
    CiteSeer: binary bag-of-words; PubMed: TF-IDF), i.e. what PyG's `Planetoid` without
    transforms returns, through the same DGL loading code (see
    `_raw_feature_citation_dataset`): same nodes, order, labels, split and graph.
    """
    from dgl.data import CitationGraphDataset

    dataset_class = _raw_feature_citation_dataset() if raw_features else CitationGraphDataset
    data = dataset_class(name, raw_dir=str(raw_dir), verbose=False)
    graph = data[0]
    src, dst = graph.edges()
    masks = tuple(graph.ndata[f"{split}_mask"] for split in ("train", "val", "test"))
    return build_node_dataset(
        name, src, dst, graph.num_nodes(), graph.ndata["feat"], graph.ndata["label"],
        masks, data.num_classes, multilabel=False, metric="accuracy",
    )


def _dense_rows(features):
    """`dgl.data.citation_graph._preprocess_features` without its row normalisation."""
    return np.asarray(features.todense())


@functools.cache
def _raw_feature_citation_dataset() -> type:
    """DGL's `CitationGraphDataset` keeping the stored feature rows.

    DGL builds the feature matrix in `process()` (the pickled scipy matrices `allx` and
    `tx` stacked, test rows put in graph order, CiteSeer's missing test rows added as
    zeros) and then calls the module function `_preprocess_features`, which row-normalises
    and densifies. This subclass runs that same `process()` with `_preprocess_features`
    replaced, for the duration of the call, by `_dense_rows` (densify only;
    `lipnorm.dgl_private.citation_features_replaced`), so nothing
    of the file parsing is re-implemented here. Its processed cache has its own name
    (`<name>_dgl_graph_raw_features.bin`/`.pkl` beside DGL's), so the normalised cache is
    never touched. The swap is of a module global, so it assumes no other thread is
    processing a citation dataset at the same time (callers hold the dataset folder's
    lock). If a DGL version stops calling `_preprocess_features`, processing fails rather
    than silently returning normalised rows.
    """
    from dgl.data import CitationGraphDataset

    from lipnorm.dgl_private import citation_features_replaced

    class RawFeatureCitationGraphDataset(CitationGraphDataset):
        @property
        def save_name(self) -> str:
            return f"{self.name}_dgl_graph_raw_features"

        def process(self) -> None:
            calls = []

            def dense_rows(features):
                calls.append(1)
                return _dense_rows(features)

            with citation_features_replaced(dense_rows):
                super().process()
            if len(calls) != 1:
                raise RuntimeError(
                    f"dgl.data.citation_graph.process() called _preprocess_features {len(calls)} "
                    "time(s), expected once: this DGL version builds the features differently, "
                    "so the raw feature rows cannot be recovered through its loader"
                )

    return RawFeatureCitationGraphDataset


def load_coauthor_cs(raw_dir: Path) -> NodeDataset:
    from dgl.data import CoauthorCSDataset

    data = CoauthorCSDataset(raw_dir=str(raw_dir), verbose=False)
    graph = data[0]
    labels = graph.ndata["label"].numpy()
    n = graph.num_nodes()
    rng = np.random.default_rng(COAUTHOR_SPLIT_SEED)
    train = sample_per_class(np.arange(n), labels, COAUTHOR_TRAIN_PER_CLASS, rng)
    rest = np.setdiff1d(np.arange(n), train)
    val = sample_per_class(rest, labels, COAUTHOR_VAL_PER_CLASS, rng)
    test = np.setdiff1d(rest, val)
    src, dst = graph.edges()
    return build_node_dataset(
        "coauthor-cs", src, dst, n, graph.ndata["feat"], labels,
        (index_mask(n, train), index_mask(n, val), index_mask(n, test)),
        data.num_classes, multilabel=False, metric="accuracy",
    )


def load_ppi(raw_dir: Path) -> NodeDataset:
    """All PPI graphs batched into one (train, then valid, then test graphs).

    The graphs share no edges, so training on the train mask is inductive:
    message passing never reaches validation or test nodes.
    """
    import dgl
    import torch
    from dgl.data import PPIDataset

    splits = [PPIDataset(mode=mode, raw_dir=str(raw_dir)) for mode in ("train", "valid", "test")]
    graphs = [list(split) for split in splits]
    batched = dgl.batch([g for split in graphs for g in split])
    sizes = [sum(g.num_nodes() for g in split) for split in graphs]
    owner = torch.repeat_interleave(torch.arange(3), torch.tensor(sizes))
    src, dst = batched.edges()
    return build_node_dataset(
        "ppi", src, dst, batched.num_nodes(), batched.ndata["feat"], batched.ndata["label"],
        tuple(owner == i for i in range(3)),
        splits[0].num_classes, multilabel=True, metric="micro-f1",
    )


def load_ogbn_arxiv(root: Path) -> NodeDataset:
    """ogbn-arxiv with OGB's official (time) split, evaluated with OGB's Evaluator.

    The citation graph is directed; as in the OGB and DGL examples it is made
    bidirected (`dgl.to_bidirected`, which also merges duplicate edges).
    """
    import dgl
    from ogb.nodeproppred import DglNodePropPredDataset

    data = DglNodePropPredDataset("ogbn-arxiv", root=str(root))
    graph, labels = data[0]
    split = data.get_idx_split()
    n = graph.num_nodes()
    src, dst = dgl.to_bidirected(dgl.graph(graph.edges(), num_nodes=n)).edges()
    masks = tuple(index_mask(n, split[part].numpy()) for part in ("train", "valid", "test"))
    return build_node_dataset(
        "ogbn-arxiv", src, dst, n, graph.ndata["feat"], labels.reshape(-1),
        masks, data.num_classes, multilabel=False, metric="ogb-accuracy",
    )
