"""`gat`: the deep GAT of the LipschitzNorm paper (`lipnorm.nn.models.deep.DeepGAT`,
with its recipes: the literature GAT of recipe dgn, SNR's of recipe snr), with a
LipschitzNorm variant and every representation normalisation; its seeds train as one
network (`lipnorm.nn.models.seed_batch.seed_batched`) where
`literature_gat_seed_batch_check` allows."""

from __future__ import annotations

from lipnorm.registry.register import register_architecture

# The normalisations whose seeds `SeedBatchedGAT` batches (lipnorm.nn.models.seed_batch);
# recipe snr takes none (`lipnorm.settings.model_config` refuses the others).
_SEED_BATCHED_NORMS = ("none", "pairnorm", "batchnorm", "dgn")


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


# seaborn's colour-blind palette; a Lipschitz variant sits next to its baseline.
register_architecture(
    "gat", label="GAT", colour="#0173b2", lip=True, lip_colour="#de8f05",
    model="lipnorm.nn.models.deep:DeepGAT.from_config", dropout=(0.6, 0.3),
    seed_batch="lipnorm.nn.models.seed_batch:seed_batched", seed_batch_check=literature_gat_seed_batch_check,
    checkpointable=True,
)
