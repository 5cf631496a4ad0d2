"""diagnose: why deep models fail, per layer (gradients, oversmoothing, attention saturation).

Published besides `runs.csv`: the rows of the aggregate's `layerstats` and `gradnorms`
that the diagnose table reads (`lipnorm.results.publish.store_diagnose`), so that the table is
rendered again from them.
"""

from lipnorm.experiments.registry import CELL_SETTINGS as GRID_CELL_SETTINGS
from lipnorm.experiments.registry import Output, grid_or_arms_config, register_experiment

# The settings the diagnose table groups by (grid: depth, model, feat_drop; the other
# runs also recipe, alpha, heads, hidden, epochs), and the accuracies it reads.
CELL_SETTINGS = (*GRID_CELL_SETTINGS, "feat_drop", "recipe", "heads", "hidden", "epochs")
RUN_KEYS = (*CELL_SETTINGS, "seed")
RUN_COLUMNS = (*RUN_KEYS, "status", "metric", "test_metric", "best_val_test", "final_train")
# Aggregate table -> (its stored file, the file's columns), besides runs.
STORED_TABLES = {
    "layerstats": ("layerstats.csv", (*RUN_KEYS, "epoch", "layer", "metric", "value")),
    "gradnorms": ("gradnorms.csv", (*RUN_KEYS, "epoch", "layer", "kind", "group", "grad_norm")),
}

register_experiment(
    "diagnose",
    title="why deep models fail (gradients, oversmoothing, attention saturation)",
    tables=(Output("diagnose_table", "lipnorm.results.tables.diagnose:diagnose_table", ("runs", "layerstats", "gradnorms")),),
    figures=(
        Output("layerstats_by_layer", "lipnorm.results.figures.layerstats:layerstats_by_layer", ("runs", "layerstats")),
        Output("layerstats_by_epoch", "lipnorm.results.figures.layerstats:layerstats_by_epoch", ("runs", "layerstats")),
        Output("alpha_layerstats", "lipnorm.results.figures.layerstats:alpha_layerstats", ("runs", "layerstats")),
    ),
    section="lipnorm.results.sections:diagnose_section",
    config=grid_or_arms_config("per-layer diagnostics of deep models; one grid, or several arms"),
    run_keys=RUN_KEYS,
    run_columns=RUN_COLUMNS,
    prepare_runs="lipnorm.results.analysis:with_recipes",
    store="lipnorm.results.publish:store_diagnose",
    load_stored="lipnorm.results.publish:load_diagnose",
    stored_files=tuple(file for file, _ in STORED_TABLES.values()),
)
