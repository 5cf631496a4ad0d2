"""transformer: the graph transformer's accuracy against depth, with and without LipschitzNorm."""

from lipnorm.experiments.registry import Output, register_experiment

register_experiment(
    "transformer",
    title="graph transformer with and without LipschitzNorm",
    tables=(Output("transformer_table", "lipnorm.results.tables.accuracy:depth_table"),),
    figures=(Output("transformer_accuracy", "lipnorm.results.figures.accuracy:accuracy_vs_depth"),),
    section="lipnorm.results.sections:transformer_section",
)
