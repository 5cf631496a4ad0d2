"""classic: the classic two-layer GAT next to the published numbers."""

from lipnorm.experiments.registry import Output, register_experiment

register_experiment(
    "classic",
    title="classic GAT next to the published numbers",
    tables=(Output("classic_table", "lipnorm.results.tables.accuracy:classic_table"),),
    section="lipnorm.results.sections:classic_section",
)
