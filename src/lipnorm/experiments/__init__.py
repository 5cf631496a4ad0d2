"""The experiments, one module each, registered in `lipnorm.experiments.registry`.

Importing this package registers lipnorm's own: every module of the package
(`lipnorm.registry.import_parts`), those of `ORDER` first, in the order of the published
summary, then any other by name, so a new experiment is a new module that nothing else
lists. A plugin registers its own with `register_experiment`. Torch-, numpy- and
pandas-free.
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

from lipnorm.registry.plugins import import_parts

# lipnorm's own, in the order of the published summary; then any other module of the package.
ORDER = ("registry", "depth", "gradients", "alpha", "transformer", "lipschitz", "classic", "diagnose", "remedies")
import_parts(__name__)

__all__ = [
    "CELL_SETTINGS", "GRID_CONFIG", "RUN_COLUMNS", "RUN_KEYS", "Experiment", "Output", "build", "experiment",
    "figures", "grid_or_arms_config", "names", "register_experiment", "tables", "unregister_experiment",
]
