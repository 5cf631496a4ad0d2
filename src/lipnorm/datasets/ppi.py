"""`ppi`: the protein-protein interaction graphs (Zitnik & Leskovec 2017; the GAT paper's
inductive task), through DGL's `PPIDataset`, batched into one graph."""

from __future__ import annotations

from pathlib import Path

from lipnorm.registry.entries import DatasetSizes, RawFiles
from lipnorm.registry.register import register_dataset

FILES = tuple(
    f"{split}_{part}"
    for split in ("train", "valid", "test")
    for part in ("graph.json", "feats.npy", "labels.npy", "graph_id.npy")
)


def read(folder: Path):
    """All PPI graphs batched into one (train, then valid, then test graphs).

    The graphs share no edges, so training on the train mask is inductive:
    message passing never reaches validation or test nodes.
    """
    import dgl
    import torch
    from dgl.data import PPIDataset

    from lipnorm.data.dataset import build_node_dataset

    splits = [PPIDataset(mode=mode, raw_dir=str(folder.parent)) for mode in ("train", "valid", "test")]
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


# Sizes: one batched graph of its 24 graphs, 2 x the GAT paper's 818,716 undirected
# edges plus one self-loop per node (approximate: a self-loop in the source would be
# counted twice, under 0.1 % of the edges).
register_dataset(
    "ppi", label="PPI", colour="#cc78bc",
    sizes=DatasetSizes(nodes=56944, edges=2 * 818716 + 56944, features=50, classes=121),
    raw=RawFiles("dgl", "ppi", FILES), read=read,
)
