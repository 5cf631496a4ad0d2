"""depth: test accuracy against depth, per missing-features rate."""

from lipnorm.experiments.registry import Output, register_experiment

register_experiment(
    "depth",
    title="accuracy vs depth",
    tables=(
        Output("depth_accuracy_table", "lipnorm.tables:depth_table"),
        Output("missing_features_table", "lipnorm.tables:missing_features_table"),
    ),
    figures=(Output("depth_accuracy", "lipnorm.plots:accuracy_vs_depth"),),
    section="lipnorm.publish:depth_section",
)
