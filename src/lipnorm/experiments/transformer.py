"""transformer: the graph transformer's accuracy against depth, with and without LipschitzNorm."""

from lipnorm.experiments.registry import Output, register_experiment

register_experiment(
    "transformer",
    title="graph transformer with and without LipschitzNorm",
    tables=(Output("transformer_table", "lipnorm.tables:depth_table"),),
    figures=(Output("transformer_accuracy", "lipnorm.plots:accuracy_vs_depth"),),
    section="lipnorm.publish:transformer_section",
)
