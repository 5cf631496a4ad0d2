"""`gt`: the deep graph transformer of the LipschitzNorm paper
(`lipnorm.nn.models.deep.DeepGT`, of `lipnorm.nn.GTConv` layers), with a LipschitzNorm
variant and no representation normalisation (no model gt-pairnorm)."""

from __future__ import annotations

from lipnorm.registry.register import register_architecture

# Its layer computes four (N, H * D) projections of its input (query, key, value, skip),
# which `lipnorm plan` counts in a run's memory.
register_architecture(
    "gt", label="GT", colour="#cc78bc", lip=True, lip_colour="#ca9161",
    model="lipnorm.nn.models.deep:DeepGT.from_config", norms=False, dropout=(0.5, 0.3), projections=4,
    checkpointable=True,
)
