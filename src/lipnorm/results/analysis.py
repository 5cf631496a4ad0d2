"""What the tables, the figures and the published results read from an aggregate alike,
without drawing anything: the diagnose grid and each run's recipe, the last logged epoch
of the layer statistics and how each metric is named and shown, and the gradient-norm
ratios across layers.

`lipnorm.results.tables` and `lipnorm.results.publish` import this module and not
`lipnorm.results.figures`, so writing a LaTeX table or publishing results loads no
matplotlib or seaborn (tested).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lipnorm.results.aggregate import label

# Norms below float32's smallest normal number are rounding noise, not a measurement;
# flooring them keeps the max/min ratio finite.
NORM_FLOOR = float(np.finfo(np.float32).tiny)

# Metric of `layerstats.parquet` -> its name in figures and the published summary; the
# figures' rows of panels in this order, all on log axes. The attention entropy is shown
# as 1 - entropy, its distance from uniform attention: measured entropies sit within
# 1e-2 of 1, where a [0, 1] axis shows nothing.
LAYER_METRICS = {
    "dirichlet_energy": "Dirichlet energy",
    "mean_average_distance": "MAD",
    "rayleigh_quotient": "Rayleigh quotient",
    "attention_entropy": "1 − attention entropy",
    "output_norm": "Output norm",
}
DRAWN_AS_COMPLEMENT = ("attention_entropy",)
DEFAULT_RECIPE = "lipnorm"  # runs of aggregates without a `recipe` setting


def recipes(runs: pd.DataFrame) -> pd.Series:
    """Each run's training recipe: `recipe` (DEFAULT_RECIPE where absent or empty)."""
    if "recipe" not in runs.columns:
        return pd.Series(DEFAULT_RECIPE, index=runs.index, name="recipe")
    return runs["recipe"].fillna(DEFAULT_RECIPE)


def with_recipes(runs: pd.DataFrame) -> pd.DataFrame:
    """`runs` with its `recipe` column filled (`recipes`), as the diagnose table reads it."""
    return runs.assign(recipe=recipes(runs))


def diagnose_grid(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs of the diagnose grid proper (model × depth × feature dropout × seed):
    this pipeline's recipe at α = 1 (the α study and the authors' recipe are extra)."""
    return runs.loc[(recipes(runs) == DEFAULT_RECIPE) & (runs["alpha"] == 1)]


def recipe_label(row: pd.Series) -> str:
    """`GAT-Lip, authors' recipe (8×64, dropout 0.6, 100 epochs)` for a run of another
    recipe."""
    return (f"{label('model', row['model'])}, authors' recipe ({row['heads']}×{row['hidden']}, "
            f"dropout {row['feat_drop']:g}, {row['epochs']} epochs)")


def last_epoch_stats(layerstats: pd.DataFrame) -> pd.DataFrame:
    """The rows of each run's last logged epoch (`lipnorm train` always logs the last
    epoch it ran, unless the run diverged)."""
    last = layerstats.groupby("run_dir")["epoch"].transform("max")
    return layerstats.loc[layerstats["epoch"] == last]


def layer_gradient_norms(gradnorms: pd.DataFrame, kinds: tuple[str, ...]) -> pd.DataFrame:
    """Norm of all of a layer's parameters per run and epoch (group `all`; the
    `kinds` parts of one layer index combine as the root of the sum of squares):
    columns `run_dir, epoch, layer, grad_norm`."""
    rows = gradnorms[(gradnorms["group"] == "all") & gradnorms["kind"].isin(kinds)]
    squared = rows.assign(sq=rows["grad_norm"].astype(float) ** 2)
    norms = squared.groupby(["run_dir", "epoch", "layer"], as_index=False)["sq"].sum()
    return norms.assign(grad_norm=np.sqrt(norms.pop("sq")))


def gradient_ratios_by_epoch(gradnorms: pd.DataFrame) -> pd.Series:
    """Per run and logged epoch (index `run_dir, epoch`, sorted): max/min over attention
    layers of the layer's gradient norm (group `all`); norms are floored at NORM_FLOOR."""
    norms = layer_gradient_norms(gradnorms, ("attention",))
    floored = norms["grad_norm"].clip(lower=NORM_FLOOR)
    per_epoch = floored.groupby([norms["run_dir"], norms["epoch"]])
    return (per_epoch.max() / per_epoch.min()).rename("grad_ratio")


def gradient_ratios(gradnorms: pd.DataFrame) -> pd.Series:
    """Per run: the median over logged epochs of `gradient_ratios_by_epoch`."""
    ratio = gradient_ratios_by_epoch(gradnorms)
    return ratio.groupby(level="run_dir").median().rename("grad_ratio")
