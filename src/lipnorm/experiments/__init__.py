"""The experiments, one module each, registered in `lipnorm.experiments.registry`.

Importing this package registers lipnorm's own, in the order of the published summary;
a plugin registers its own with `register_experiment`. Torch-, numpy- and pandas-free.
"""

from lipnorm.experiments.registry import (
    CELL_SETTINGS,
    GRID_CONFIG,
    RUN_COLUMNS,
    RUN_KEYS,
    Experiment,
    Output,
    build,
    experiment,
    figures,
    grid_or_arms_config,
    names,
    register_experiment,
    tables,
    unregister_experiment,
)

# lipnorm's own, in this order.
from lipnorm.experiments import depth, gradients, alpha, transformer, lipschitz, classic, diagnose, remedies  # noqa: E402, F401, I001

__all__ = [
    "CELL_SETTINGS", "GRID_CONFIG", "RUN_COLUMNS", "RUN_KEYS", "Experiment", "Output", "build", "experiment",
    "figures", "grid_or_arms_config", "names", "register_experiment", "tables", "unregister_experiment",
]
