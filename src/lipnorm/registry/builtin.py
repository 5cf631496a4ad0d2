"""lipnorm's own entries: the architectures `gat`, `gt`, `gat-classic`, `gcn` and the
representation normalisations `pairnorm`, `batchnorm`, `dgn`, registered here because
the modules defining them (`lipnorm.nn`) import torch: a new one is one call here, its
factory a "module:attribute" string so that nothing is imported before a model is built.
The datasets are registered beside their definitions, in the modules of
`lipnorm.datasets`, which this module imports by name (`import_parts`), and
`BUILTIN_DATASETS` names them. Imported once, by `lipnorm.registry`.
"""

from __future__ import annotations

from lipnorm.registry.entries import DATASETS
from lipnorm.registry.plugins import import_parts
from lipnorm.registry.register import register_architecture, register_norm


def literature_gat_seed_batch_check(config) -> str | None:
    """Why the architecture "gat"'s `seed_batch` (`lipnorm.nn.models.seed_batch.seed_batched`:
    `SeedBatchedGAT` for recipe dgn, `SeedBatchedSNR` for recipe snr) cannot hold the
    networks of a resolved GAT `ModelConfig`, None where it can: the settings form of
    `lipnorm.nn.models.seed_batch.why_not_seed_batched` (a test holds the two equal over
    lipnorm's GAT settings), read without building a network."""
    if config.recipe not in ("dgn", "snr"):
        return (
            f"recipe {config.recipe!r} builds neither the literature GAT (recipe dgn) nor SNR's GAT "
            "(recipe snr), the networks batched over seeds"
        )
    if config.attention_norm == "lip" and config.variant != "paper":
        return "LipschitzNorm's official variant takes one norm over all heads, which would mix the seeds"
    if config.norm not in _SEED_BATCHED_NORMS:
        return f"its normalisation {config.norm!r} has no seed-batched form"
    if config.norm == "pairnorm" and config.pairnorm_mode != "PN":
        return f"PairNorm mode {config.pairnorm_mode!r} has no seed-batched form; PN has"
    return None


# The normalisations whose seeds `SeedBatchedGAT` batches (lipnorm.nn.models.seed_batch);
# recipe snr takes none (`lipnorm.settings.model_config` refuses the others).
_SEED_BATCHED_NORMS = ("none", "pairnorm", "batchnorm", "dgn")

# seaborn's colour-blind palette; a Lipschitz variant sits next to its baseline.
register_architecture(
    "gat", label="GAT", colour="#0173b2", lip=True, lip_colour="#de8f05",
    model="lipnorm.nn.models.deep:DeepGAT.from_config", dropout=(0.6, 0.3),
    seed_batch="lipnorm.nn.models.seed_batch:seed_batched", seed_batch_check=literature_gat_seed_batch_check,
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
# lipnorm's own datasets are defined and registered each in its module of the package
# `lipnorm.datasets` (label, colour, sizes, raw files and their sums, the reader), found
# by name as a plugin is (`import_parts`): their modules import only this registry at
# import, their readers' numpy, DGL and `lipnorm.data` inside the functions.
import_parts("lipnorm.datasets")
# lipnorm's own datasets (`lipnorm.data.DATASETS`): those registered so far, before any plugin.
BUILTIN_DATASETS = tuple(DATASETS)
