"""A lipnorm plugin: a graph from another library as a dataset (Zachary's karate club,
from networkx) and a wrapped DGL layer as an architecture (GIN, dgl.nn.GINConv).

Use it by name, with no edit inside lipnorm:

    lipnorm train --plugin examples/plugins/karate.py --model gin --dataset karate-club --depth 2 --heads 1 --hidden 16 --epochs 50 --out runs/karate

or in the workflow config: `plugins: [examples/plugins/karate.py]`, and `gin`,
`gin-pairnorm`, ... in a grid's `models`, `karate-club` in its `datasets`.

torch, dgl and networkx are imported where the functions run, so that naming the
plugin costs nothing to commands that only need its names, labels and colours.
"""

from lipnorm.registry import DatasetSizes, register_architecture, register_dataset

# Kipf & Welling's semi-supervised karate club: one labelled node per club, its leader.
TRAIN_NODES = (0, 33)
# Validation: the four lowest-numbered other members of each club; test: the rest.
VAL_NODES = (1, 2, 3, 4, 9, 14, 15, 18)


def karate_club():
    """Zachary's karate club (networkx): 34 members, 78 friendships (both directions),
    labels the club each member joined after the split (0 Mr. Hi's, 1 the Officer's),
    one-hot features (the graph has none of its own)."""
    import dgl
    import networkx
    import torch

    graph = networkx.karate_club_graph()
    labels = torch.tensor([graph.nodes[node]["club"] != "Mr. Hi" for node in graph.nodes], dtype=torch.int64)
    nodes = graph.number_of_nodes()

    def mask(members):
        chosen = torch.zeros(nodes, dtype=torch.bool)
        chosen[list(members)] = True
        return chosen

    train_mask, val_mask = mask(TRAIN_NODES), mask(VAL_NODES)
    return {
        "graph": dgl.from_networkx(graph),  # an undirected graph: each edge both ways
        "features": torch.eye(nodes),
        "labels": labels,
        "train_mask": train_mask,
        "val_mask": val_mask,
        "test_mask": ~(train_mask | val_mask),
    }


def gin_layer(in_feats, out_feats, heads, *, attention_norm, residual, **options):
    """One GIN layer (Xu et al.; sum aggregation, a two-layer MLP) as wide as the
    attention layers' heads x features: (N, heads * out_feats) outputs, no attention.
    Its MLP's Linears need no gradient groups declared (an nn.Linear's weight is fc)."""
    from dgl.nn import GINConv
    from torch import nn

    if residual:
        raise ValueError("the gin architecture has no residual connections; got residual=True")
    width = heads * out_feats
    return GINConv(nn.Sequential(nn.Linear(in_feats, width), nn.ReLU(), nn.Linear(width, width)), "sum")


register_architecture("gin", label="GIN", colour="#029e73", layer=gin_layer, attention=False, dropout=(0.5, 0.0))
register_dataset(
    "karate-club", label="Karate club", colour="#d55e00", load=karate_club,
    # lipnorm's count: 2 x 78 friendships plus one self-loop per member.
    sizes=DatasetSizes(nodes=34, edges=2 * 78 + 34, features=34, classes=2, train_nodes=len(TRAIN_NODES)),
)
