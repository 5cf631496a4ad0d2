"""`coauthor-cs`: the Coauthor-CS co-authorship graph (Shchur et al. 2018), through DGL's
`CoauthorCSDataset`, with the split of "Pitfalls of GNN evaluation"."""

from __future__ import annotations

from pathlib import Path

from lipnorm.registry.entries import DatasetSizes, RawFiles
from lipnorm.registry.register import register_dataset

# Coauthor-CS ships without a split; we use the one of Shchur et al. (2018),
# "Pitfalls of GNN evaluation": 20 training and 30 validation nodes per class,
# every other node for test, drawn once with this fixed seed so all runs share it.
COAUTHOR_SPLIT_SEED = 0
COAUTHOR_TRAIN_PER_CLASS = 20
COAUTHOR_VAL_PER_CLASS = 30


def read(folder: Path):
    import numpy as np
    from dgl.data import CoauthorCSDataset

    from lipnorm.data.dataset import build_node_dataset, index_mask, sample_per_class

    data = CoauthorCSDataset(raw_dir=str(folder.parent), verbose=False)
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


# Sizes: DGL's 163,788 edges (no self-loops), plus one self-loop per node.
register_dataset(
    "coauthor-cs", label="CoauthorCS", colour="#d55e00",
    sizes=DatasetSizes(nodes=18333, edges=163788 + 18333, features=6805, classes=15),
    raw=RawFiles("dgl", "coauthor_cs", ("coauthor_cs.npz",)), read=read,
)
