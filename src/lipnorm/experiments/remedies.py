"""remedies: LipschitzNorm among the published remedies for deep GNNs (its analysis:
`lipnorm.results.remedies`)."""

from lipnorm.experiments.registry import CELL_SETTINGS as GRID_CELL_SETTINGS
from lipnorm.experiments.registry import Output, grid_or_arms_config, register_experiment

# Published `runs.csv`: the model axes and the settings a remedy is read from
# (`lipnorm.results.remedies.remedy_of`) and the protocol's width and epochs, besides the grid's
# cell settings; the two accuracies the remedies tables read.
CELL_SETTINGS = (*GRID_CELL_SETTINGS, "architecture", "attention_norm", "norm", "residual",
                 "initial_residual", "dropedge", "heads", "hidden", "epochs")
RUN_KEYS = (*CELL_SETTINGS, "seed")
RUN_COLUMNS = (*RUN_KEYS, "status", "metric", "test_metric", "best_val_val", "best_val_test")

register_experiment(
    "remedies",
    title="LipschitzNorm among the published remedies for deep GNNs",
    tables=(
        Output("remedies_table", "lipnorm.results.tables.remedies:remedies_table"),
        Output("remedies_selection_table", "lipnorm.results.tables.remedies:remedies_selection_table"),
        Output("remedies_paired_table", "lipnorm.results.tables.remedies:remedies_paired_table"),
        Output("remedies_best_table", "lipnorm.results.tables.remedies:remedies_best_table"),
    ),
    figures=(
        Output("remedies_accuracy", "lipnorm.results.figures.remedies:remedies_accuracy"),
        Output("remedies_mad", "lipnorm.results.figures.remedies:remedies_mad", ("runs", "layerstats")),
    ),
    section="lipnorm.results.sections:remedies_section",
    config=grid_or_arms_config(
        "LipschitzNorm among the published remedies for deep GNNs (one arm per remedy); one grid, or several arms"
    ),
    run_keys=RUN_KEYS,
    run_columns=RUN_COLUMNS,
    prepare_runs="lipnorm.results.remedies:with_remedy_settings",
)
