"""depth: test accuracy against depth, per missing-features rate."""

from lipnorm.experiments.registry import Output, register_experiment

register_experiment(
    "depth",
    title="accuracy vs depth",
    tables=(
        Output("depth_accuracy_table", "lipnorm.results.tables.accuracy:depth_table"),
        Output("missing_features_table", "lipnorm.results.tables.accuracy:missing_features_table"),
    ),
    figures=(Output("depth_accuracy", "lipnorm.results.figures.accuracy:accuracy_vs_depth"),),
    section="lipnorm.results.sections:depth_section",
)
