"""`ogbn-arxiv`: the arXiv citation graph of OGB (Hu et al. 2020), with OGB's official
(time) split, evaluated with OGB's Evaluator."""

from __future__ import annotations

from pathlib import Path

from lipnorm.registry.entries import DatasetSizes, RawFiles
from lipnorm.registry.register import register_dataset

FILES = (
    "RELEASE_v1.txt",  # without it OGB asks on stdin whether to re-download
    *(f"raw/{f}.csv.gz" for f in ("edge", "node-feat", "node-label", "node_year",
                                  "num-node-list", "num-edge-list")),
    *(f"split/time/{s}.csv.gz" for s in ("train", "valid", "test")),
)


def read(folder: Path):
    """ogbn-arxiv with OGB's official (time) split, evaluated with OGB's Evaluator.

    The citation graph is directed; as in the OGB and DGL examples it is made
    bidirected (`dgl.to_bidirected`, which also merges duplicate edges).
    """
    import dgl
    from ogb.nodeproppred import DglNodePropPredDataset

    from lipnorm.data.dataset import build_node_dataset, index_mask

    data = DglNodePropPredDataset("ogbn-arxiv", root=str(folder.parent))
    graph, labels = data[0]
    split = data.get_idx_split()
    n = graph.num_nodes()
    src, dst = dgl.to_bidirected(dgl.graph(graph.edges(), num_nodes=n)).edges()
    masks = tuple(index_mask(n, split[part].numpy()) for part in ("train", "valid", "test"))
    return build_node_dataset(
        "ogbn-arxiv", src, dst, n, graph.ndata["feat"], labels.reshape(-1),
        masks, data.num_classes, multilabel=False, metric="ogb-accuracy",
    )


# Sizes: `dgl.to_bidirected` of the 1,166,243 citations, 2,315,598 edges, plus one
# self-loop per node.
register_dataset(
    "ogbn-arxiv", label="ogbn-arxiv", colour="#ca9161",
    sizes=DatasetSizes(nodes=169343, edges=2315598 + 169343, features=128, classes=40),
    raw=RawFiles("ogb", "ogbn-arxiv", FILES), read=read,
)
