"""The diagnose table: per setting of the diagnose grid, the accuracies, the last
attention layer's statistics at the last epoch and the gradient-norm ratio at the first.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lipnorm.results.aggregate import label, ordered, seed_cells
from lipnorm.results.analysis import (
    DEFAULT_RECIPE,
    diagnose_grid,
    gradient_ratios_by_epoch,
    last_epoch_stats,
    recipes,
)
from lipnorm.results.tables.cells import NAMES, cell_texts, grid, number_cell


# The layer statistics of the diagnose table (metric of layerstats -> column). The
# entropy is printed as 1 - entropy, its distance from uniform attention: measured
# entropies round to 1 at three digits.
DIAGNOSE_STATS = {
    "dirichlet_energy": "Dirichlet energy",
    "mean_average_distance": "MAD",
    "attention_entropy": "1 - attention entropy",
}
PRINTED_AS_COMPLEMENT = ("attention_entropy",)
ACCURACY_HEAD = "Accuracy (%)"
LAST_LAYER_HEAD = "Last layer, last epoch"
GRADIENT_HEAD = "Gradients, first epoch"


def _geometric_mean(values: np.ndarray) -> float:
    return float(np.exp(np.mean(np.log(values))))


def _diagnose_rows(runs: pd.DataFrame, by: list[str], per_run: pd.DataFrame) -> pd.DataFrame:
    """Per cell of `by` (one row each, columns `by` first): the accuracy cells' texts
    (`test`, `train`) and test mean, and the columns of `per_run` (indexed by run_dir)
    over the seeds: mean, the gradient ratio's geometric mean; NaN for a cell with a
    diverged seed (not averaged, as `seed_cells`)."""
    test = seed_cells(runs.assign(test_metric=runs["best_val_test"]), by)
    train = seed_cells(runs.assign(test_metric=runs["final_train"]), by)
    rows = test[[*by, "valid"]].assign(test=cell_texts(test), test_mean=test["mean"],
                                      train=cell_texts(train)).set_index(by)
    mine = per_run.reindex(runs["run_dir"]).set_axis(runs.index)
    cells = pd.concat([runs[by], mine], axis=1).groupby(by, sort=True, dropna=False)
    combined = cells.agg({**{m: "mean" for m in DIAGNOSE_STATS}, "grad_ratio": _geometric_mean})
    combined.loc[~rows["valid"].reindex(combined.index).to_numpy()] = np.nan
    return rows.join(combined).reset_index()


def _per_run_diagnostics(runs: pd.DataFrame, layerstats: pd.DataFrame,
                         gradnorms: pd.DataFrame) -> pd.DataFrame:
    """Per run (index run_dir): DIAGNOSE_STATS at its last attention layer (layer =
    depth) at its last logged epoch, and the max/min ratio of its attention layers'
    gradient norms at its first logged epoch (`grad_ratio`)."""
    depth = runs.set_index("run_dir")["depth"]
    stats = layerstats.loc[layerstats["run_dir"].isin(depth.index)
                           & layerstats["metric"].isin(list(DIAGNOSE_STATS))]
    stats = last_epoch_stats(stats[["run_dir", "epoch", "layer", "metric", "value"]])
    stats = stats.loc[stats["layer"] == stats["run_dir"].map(depth)]
    per_run = stats.pivot(index="run_dir", columns="metric", values="value")
    per_run = per_run.reindex(index=depth.index, columns=list(DIAGNOSE_STATS))
    finished = runs.loc[runs["status"] == "ok", "run_dir"]
    without = sorted(finished[per_run.loc[finished].isna().all(axis=1).to_numpy()])
    if without:
        raise ValueError(f"no layer statistics (layerstats) of the last layer for runs {without}; "
                         "were they trained with layer_stats off?")
    ratios = gradient_ratios_by_epoch(gradnorms)
    first = ratios.groupby(level="run_dir").first()  # epochs ascending within each run
    return per_run.assign(grad_ratio=first.reindex(depth.index))


def _extra_label(row: pd.Series) -> str:
    """LaTeX row label of a run outside the grid: the α study or another recipe."""
    name = label("model", row["model"])
    if row["recipe"] != DEFAULT_RECIPE:
        return (f"{name} (authors' recipe, {row['heads']}$\\times${row['hidden']}, "
                f"{row['epochs']} epochs)")
    return f"{name}, $\\alpha={row['alpha']:g}$"


def diagnose_table(runs: pd.DataFrame, layerstats: pd.DataFrame,
                   gradnorms: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """Rows: layers × model × feature dropout (the diagnose grid: this pipeline's
    recipe, α = 1), then, inside the block of their depth, the α study and the
    authors'-recipe runs as labelled extra rows. Columns: test accuracy at the
    best-validation epoch (`best_val_test`) and training accuracy at the last epoch
    (mean ± std over seeds, as every accuracy cell); Dirichlet energy, MAD and
    1 − attention entropy of the last layer at the last logged epoch (mean over seeds);
    the max/min attention-layer gradient-norm ratio at the first logged epoch
    (geometric mean over seeds). A cell with a diverged seed is not averaged.

    Bold: the best test accuracy among the grid's rows of each depth (the extra rows
    are variants, not competitors).
    """
    runs = runs.assign(recipe=recipes(runs))
    per_run = _per_run_diagnostics(runs, layerstats, gradnorms)
    grid = diagnose_grid(runs)
    if grid.empty:
        raise ValueError("diagnose table: no runs of this pipeline's recipe at alpha 1 (the grid)")
    extra = runs.drop(index=grid.index)
    extra_by = ["depth", "model", "feat_drop", "recipe", "alpha", "heads", "hidden", "epochs"]
    main_rows = _diagnose_rows(grid, ["depth", "model", "feat_drop"], per_run)
    extra_rows = _diagnose_rows(extra, extra_by, per_run) if not extra.empty else None

    models = ordered("model", main_rows["model"])
    blocks = []
    for depth in sorted(runs["depth"].unique()):
        here = main_rows.loc[main_rows["depth"] == depth].copy()
        here["order"] = [models.index(m) for m in here["model"]]
        here = here.sort_values(["order", "feat_drop"], ascending=[True, False])
        here["row"] = [label("model", m) for m in here["model"]]
        here["grid"] = True
        blocks.append(here)
        if extra_rows is not None:
            others = extra_rows.loc[extra_rows["depth"] == depth].copy()
            others["official"] = others["recipe"] != DEFAULT_RECIPE
            others = others.sort_values(["official", "alpha", "feat_drop"],
                                        ascending=[True, True, False])
            others["row"] = [_extra_label(row) for _, row in others.iterrows()]
            others["grid"] = False
            blocks.append(others)
    rows = pd.concat(blocks, ignore_index=True)

    text = pd.DataFrame(  # tuple keys: two levels of column headers
        {
            (ACCURACY_HEAD, "Test (best val.)"): rows["test"],
            (ACCURACY_HEAD, "Train (last epoch)"): rows["train"],
            **{(LAST_LAYER_HEAD, name):
               (1.0 - rows[metric] if metric in PRINTED_AS_COMPLEMENT else rows[metric]).map(number_cell)
               for metric, name in DIAGNOSE_STATS.items()},
            (GRADIENT_HEAD, "Max/min layer norm"): rows["grad_ratio"].map(number_cell),
        }
    )
    text.index = pd.MultiIndex.from_arrays(
        [rows["depth"], rows["row"], rows["feat_drop"]],
        names=[NAMES["depth"], NAMES["model"], NAMES["feat_drop"]],
    )
    text.attrs["latex_rows"] = True
    means = rows["test_mean"].where(rows["grid"])
    best = means.groupby(rows["depth"]).transform("max")
    bold = np.zeros(text.shape, dtype=bool)
    bold[:, 0] = (means.notna() & means.eq(best)).to_numpy()
    return text, bold
