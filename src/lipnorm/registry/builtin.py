"""lipnorm's own entries: the architectures `gat`, `gt`, `gat-classic`, `gcn`, the
representation normalisations `pairnorm`, `batchnorm`, `dgn`, and the datasets of
`lipnorm.data` with the sizes the planner reads (`DatasetSizes`). A new one is one call
here, its factory a "module:attribute" string so that nothing is imported before a model
is built. Imported once, by `lipnorm.registry`.
"""

from __future__ import annotations

from lipnorm.registry.entries import BUILTIN_DATASETS, DatasetSizes
from lipnorm.registry.register import register_architecture, register_dataset, register_norm


def literature_gat_seed_batch_check(config) -> str | None:
    """Why `SeedBatchedGAT` cannot hold the networks of a resolved GAT `ModelConfig`, None
    where it can: the settings form of `lipnorm.nn.models.seed_batch.why_not_seed_batched` (a test holds
    the two equal over lipnorm's GAT settings), read without building a network."""
    if config.recipe != "dgn":
        return f"recipe {config.recipe!r} builds no literature GAT (recipe dgn), the one network batched over seeds"
    if config.attention_norm == "lip" and config.variant != "paper":
        return "LipschitzNorm's official variant takes one norm over all heads, which would mix the seeds"
    if config.norm not in _SEED_BATCHED_NORMS:
        return f"its normalisation {config.norm!r} has no seed-batched form"
    if config.norm == "pairnorm" and config.pairnorm_mode != "PN":
        return f"PairNorm mode {config.pairnorm_mode!r} has no seed-batched form; PN has"
    return None


# The normalisations whose seeds `SeedBatchedGAT` batches (lipnorm.nn.models.seed_batch).
_SEED_BATCHED_NORMS = ("none", "pairnorm", "batchnorm", "dgn")

# seaborn's colour-blind palette; a Lipschitz variant sits next to its baseline.
register_architecture(
    "gat", label="GAT", colour="#0173b2", lip=True, lip_colour="#de8f05",
    model="lipnorm.nn.models.deep:DeepGAT.from_config", dropout=(0.6, 0.3),
    seed_batch="lipnorm.nn.models.seed_batch:SeedBatchedGAT", seed_batch_check=literature_gat_seed_batch_check,
    checkpointable=True,
)
register_architecture(
    "gt", label="GT", colour="#cc78bc", lip=True, lip_colour="#ca9161",
    model="lipnorm.nn.models.deep:DeepGT.from_config", norms=False, dropout=(0.5, 0.3), projections=4,
    checkpointable=True,
)
# GT and the published classic GAT take no representation normalisation (as before:
# no model gt-pairnorm); the classic GAT has no LipschitzNorm variant either, no
# checkpointed blocks, and is trained on the whole graph, as in DGL's example.
register_architecture(
    "gat-classic", label="GAT (classic)", colour="#949494",
    model="lipnorm.nn.models.classic:ClassicGAT.from_config", norms=False, dropout=(0.6, 0.6), full_batch_only=True,
)
register_norm(
    "pairnorm", label="PairNorm", colour="#029e73", lip_colour="#d55e00",
    factory="lipnorm.nn.norm.pairnorm:pairnorm_layer", attribute="pairnorms",
)
# The literature's remedies for deep GNNs (lipnorm.nn.norm, lipnorm.nn.conv.gcn).
register_norm(
    "batchnorm", label="BatchNorm", colour="#56b4e9", lip_colour="#0072b2",
    factory="lipnorm.nn.norm.batchnorm:batchnorm_layer",
)
register_norm(
    "dgn", label="DGN", colour="#fbafe4", lip_colour="#cc79a7",
    factory="lipnorm.nn.norm.dgn:dgn_layer",
)
# GCN (Kipf & Welling, dgl.nn.GraphConv): the non-attention reference architecture;
# feature dropout 0.5 as Kipf's, no attention to drop out.
register_architecture(
    "gcn", label="GCN", colour="#000000", layer="lipnorm.nn.conv.gcn:gcn_layer", attention=False, dropout=(0.5, 0.0),
)
_DATASET_STYLE = {
    "cora": ("Cora", "#0173b2"),
    "citeseer": ("CiteSeer", "#de8f05"),
    "pubmed": ("PubMed", "#029e73"),
    "coauthor-cs": ("CoauthorCS", "#d55e00"),
    "ppi": ("PPI", "#cc78bc"),
    "ogbn-arxiv": ("ogbn-arxiv", "#ca9161"),
    "csbm": ("CSBM", "#949494"),
}
# The sizes of lipnorm's own datasets as `lipnorm.data` loads them: self-loops removed,
# then one per node added (`build_node_dataset`). Cora and CiteSeer counted from the
# loaded graphs; PubMed: DGL's 88,651 edges less its 3 self-loops (PyG's 88,648);
# Coauthor-CS: DGL's 163,788 (no self-loops); PPI: one batched graph of its 24
# graphs, 2 x the GAT paper's 818,716 undirected edges (approximate: a self-loop in
# the source would be counted twice, under 0.1 % of the edges); ogbn-arxiv:
# `dgl.to_bidirected` of the 1,166,243 citations, 2,315,598 edges. csbm's follow from
# its parameters (`lipnorm.plan.dataset_sizes`).
_BUILTIN_SIZES = {
    "cora": DatasetSizes(nodes=2708, edges=10556 + 2708, features=1433, classes=7, train_nodes=140),
    "citeseer": DatasetSizes(nodes=3327, edges=9104 + 3327, features=3703, classes=6, train_nodes=120),
    "pubmed": DatasetSizes(nodes=19717, edges=88648 + 19717, features=500, classes=3, train_nodes=60),
    "coauthor-cs": DatasetSizes(nodes=18333, edges=163788 + 18333, features=6805, classes=15),
    "ppi": DatasetSizes(nodes=56944, edges=2 * 818716 + 56944, features=50, classes=121),
    "ogbn-arxiv": DatasetSizes(nodes=169343, edges=2315598 + 169343, features=128, classes=40),
}
for _name in BUILTIN_DATASETS:
    register_dataset(
        _name, label=_DATASET_STYLE[_name][0], colour=_DATASET_STYLE[_name][1], sizes=_BUILTIN_SIZES.get(_name)
    )
