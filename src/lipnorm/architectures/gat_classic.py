"""`gat-classic`: the published two-layer GAT (Veličković et al. 2018) as DGL's example
trains it (`lipnorm.nn.models.classic.ClassicGAT`)."""

from __future__ import annotations

from lipnorm.registry.register import register_architecture

# No representation normalisation, no LipschitzNorm variant, no checkpointed blocks, and
# trained on the whole graph, as in DGL's example.
register_architecture(
    "gat-classic", label="GAT (classic)", colour="#949494",
    model="lipnorm.nn.models.classic:ClassicGAT.from_config", norms=False, dropout=(0.6, 0.6), full_batch_only=True,
)
