"""alpha: sensitivity of the accuracy to LipschitzNorm's scale α."""

from lipnorm.experiments.registry import Output, register_experiment

register_experiment(
    "alpha",
    title="sensitivity to the LipschitzNorm scale α",
    tables=(Output("alpha_table", "lipnorm.results.tables.accuracy:alpha_table"),),
    figures=(Output("alpha_accuracy", "lipnorm.results.figures.accuracy:accuracy_vs_alpha"),),
    section="lipnorm.results.sections:alpha_section",
)
