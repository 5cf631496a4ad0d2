"""remedies: LipschitzNorm among the published remedies for deep GNNs (its analysis:
`lipnorm.results.remedies`).

Published besides `runs.csv`: `layerstats.csv`, the rows of the aggregate's `layerstats`
that the MAD figure reads (`lipnorm.results.publish.store_remedies`), so that it is drawn
again from a published folder (`lipnorm publish --merge`).
"""

from lipnorm.experiments.registry import CELL_SETTINGS as GRID_CELL_SETTINGS
from lipnorm.experiments.registry import Output, grid_or_arms_config, register_experiment

# Published `runs.csv`: the model axes and the settings a remedy is read from
# (`lipnorm.results.remedies.remedy_of`) and the protocol's width and epochs, besides the grid's
# cell settings; the two accuracies the remedies tables read.
CELL_SETTINGS = (*GRID_CELL_SETTINGS, "architecture", "attention_norm", "norm", "residual",
                 "initial_residual", "dropedge", "heads", "hidden", "epochs")
RUN_KEYS = (*CELL_SETTINGS, "seed")
RUN_COLUMNS = (*RUN_KEYS, "status", "metric", "test_metric", "best_val_val", "best_val_test")
# Aggregate table -> (its stored file, the file's columns), besides runs: the MAD of the
# hidden layers at the deepest depth, last epoch (`lipnorm.results.publish.mad_rows`).
STORED_TABLES = {
    "layerstats": ("layerstats.csv", (*RUN_KEYS, "epoch", "layer", "metric", "value")),
}

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
    store="lipnorm.results.publish:store_remedies",
    load_stored="lipnorm.results.publish:load_remedies",
    stored_files=tuple(file for file, _ in STORED_TABLES.values()),
)
