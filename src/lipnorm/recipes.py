"""Training recipes: the defaults of the recipe-dependent settings.

Torch-free, so that the workflow (`lipnorm.plan` at Snakemake's parse) and the CLI's
help read them without importing the training code.
"""

from __future__ import annotations

from typing import Any

# "lipnorm": this project's networks; "official": the authors' public DeepGAT.
RECIPES = ("lipnorm", "official")

# The recipe-dependent settings: None in a TrainConfig means "the recipe's default".
LIPNORM_DEFAULTS = {
    "epochs": 200, "lr": 0.005, "weight_decay": 5e-4, "heads": 8, "hidden": 8,
    "protocol": "best-val", "variant": "paper",
}
# The authors' parser.py defaults (lr 0.01, weight decay 5e-4, 8 heads, hidden 64),
# the scheduler and last-epoch test accuracy of train_deepgat_missing.py, the normaliser
# of normalizations/lipschitznorm.py; epochs from `official_epochs`.
OFFICIAL_DEFAULTS = {
    "lr": 0.01, "weight_decay": 5e-4, "heads": 8, "hidden": 64,
    "protocol": "official", "variant": "official",
}


def official_epochs(depth: int) -> int:
    """Epochs of the authors' launcher (`launch_batch_xps.py`) for a network of `depth`
    attention layers: it launches a (num_layers, nepoch) combination only if nepoch is
    1000 for num_layers <= 4, 1500 for 4 < num_layers < 8 and 2500 for num_layers >= 8."""
    if depth <= 4:
        return 1000
    if depth < 8:
        return 1500
    return 2500


def recipe_defaults(recipe: str, depth: int) -> dict[str, Any]:
    """The value each recipe-dependent setting takes when it is not given."""
    if recipe not in RECIPES:
        raise ValueError(f"unknown recipe {recipe!r}; allowed: {', '.join(RECIPES)}")
    if recipe == "lipnorm":
        return dict(LIPNORM_DEFAULTS)
    return {"epochs": official_epochs(depth), **OFFICIAL_DEFAULTS}
