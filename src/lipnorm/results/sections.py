"""The sections of a published folder's `summary.md`, one per experiment (its
`section`, `lipnorm.experiments`): Markdown rendered from the experiment's published files
alone (`runs.csv` and what its `store` wrote), so that `lipnorm.results.publish.regenerate`
renders them again from the committed files.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from lipnorm import registry
from lipnorm.experiments import diagnose
from lipnorm.experiments.gradients import RATIOS_FILE
from lipnorm.experiments.lipschitz import PROBE_COLUMNS, PROBE_FILE
from lipnorm.experiments.registry import RUN_KEYS
from lipnorm.results import remedies
from lipnorm.results.aggregate import label, ordered, seed_cells
from lipnorm.results.analysis import (
    DEFAULT_RECIPE,
    DRAWN_AS_COMPLEMENT,
    LAYER_METRICS,
    gradient_ratios_by_epoch,
    recipe_label,
)
from lipnorm.results.publish import load_diagnose, read_csv
from lipnorm.results.tables.accuracy import best_depths, classic_table
from lipnorm.results.tables.cells import EMPTY, cell_texts, format_cell, number_cell, number_text
from lipnorm.results.tables.markdown import MARKDOWN_EMPTY, markdown
from lipnorm.results.tables.remedies import (
    remedies_best,
    remedies_comparison,
    remedies_paired,
    remedies_selection,
)


def _paper_order(column: pd.Series) -> pd.Series:
    """Sort key: datasets and models in the paper's order, anything else by value."""
    if column.name not in ("dataset", "model"):
        return column
    return column.map(list(registry.names(column.name)).index)


def _by_model(cells: pd.DataFrame, rows: list[str], names: list[str], bold: bool) -> list[str]:
    """A table of `cells["text"]`: rows `rows` (headed `names`), one column per model in
    the paper's order; with `bold`, the best mean of each row is bold."""
    models = ordered("model", cells["model"])
    grid, means = (cells.pivot(index=rows, columns="model", values=values).reindex(columns=models)
                   .reset_index().sort_values(rows, key=_paper_order) for values in ("text", "mean"))
    means = means[models].astype(float)
    marked = means.eq(means.max(axis=1), axis=0).to_numpy() if bold else None
    index = pd.MultiIndex.from_arrays(
        [[label(row, v) if row == "dataset" else number_text(v) for v in grid[row]] for row in rows],
        names=names)
    text = grid[models].fillna(EMPTY).set_axis(index)
    text.columns = [label("model", m) for m in models]
    return markdown(text, marked, index=True)


def _metric(runs: pd.DataFrame) -> str:
    return " / ".join(sorted(runs["metric"].unique()))


def _counts(runs: pd.DataFrame) -> str:
    diverged = int((runs["status"] == "diverged").sum())
    seeds = ", ".join(str(s) for s in sorted(runs["seed"].unique()))
    return f"{len(runs)} runs ({diverged} diverged), seeds {seeds}."


def _blocks(cells: pd.DataFrame, keys: list[str]):
    """(key values, rows) per combination of `keys`, datasets and models in the paper's order."""
    combos = cells[keys].drop_duplicates()
    combos = combos.sort_values(keys, key=_paper_order)
    for combo in combos.itertuples(index=False):
        mask = np.logical_and.reduce([(cells[k] == v).to_numpy() for k, v in zip(keys, combo)])
        yield combo, cells.loc[mask]


def _accuracy_by_depth(runs: pd.DataFrame) -> list[str]:
    """Per dataset and missing rate: depth (rows) × model; bold: the best model per depth."""
    cells = seed_cells(runs, ["dataset", "missing_rate", "model", "depth"])
    cells["text"] = cell_texts(cells)
    lines = [f"Test {_metric(runs)} (%) per depth. {_counts(runs)} Bold: the best model at each depth."]
    for (dataset, rate), block in _blocks(cells, ["dataset", "missing_rate"]):
        lines += ["", f"### {label('dataset', dataset)}, {number_text(rate)}% missing features", ""]
        lines += _by_model(block, ["depth"], ["Layers"], bold=True)
    return lines


def depth_section(folder: Path, runs: pd.DataFrame) -> list[str]:
    best = best_depths(runs)
    best["text"] = [
        text if depth == EMPTY else f"{text} at L={depth}"
        for text, depth in zip(cell_texts(best), best["depth"])
    ]
    return [
        *_accuracy_by_depth(runs),
        "",
        "### Best depth per model",
        "",
        "The depth with the best mean (the smallest on a tie; depths with a diverged seed "
        "are not candidates). Bold: the best model per dataset and missing rate.",
        "",
        *_by_model(best, ["dataset", "missing_rate"], ["Dataset", "Missing rate (%)"], bold=True),
    ]


def gradients_section(folder: Path, runs: pd.DataFrame) -> list[str]:
    ratios = read_csv(folder / RATIOS_FILE, (*RUN_KEYS, "grad_ratio"))
    runs = runs.merge(ratios, on=list(RUN_KEYS), how="left", validate="one_to_one")
    cells = seed_cells(runs, ["dataset", "model", "depth"])
    # The figure's log axis averages in log space: the geometric mean over seeds.
    geometric = runs.groupby(["dataset", "model", "depth"])["grad_ratio"].apply(
        lambda r: float(np.exp(np.log(r).mean()))
    )
    cells = cells.merge(geometric.reset_index(), on=["dataset", "model", "depth"])
    cells["text"] = [
        f"{ratio:#.3g} (n={n})" if valid else format_cell(np.nan, np.nan, n, k)
        for ratio, n, k, valid in cells[["grad_ratio", "n", "n_diverged", "valid"]].itertuples(index=False)
    ]
    lines = [
        "Max/min over attention layers of the layer's gradient norm, median over logged "
        "epochs per run, geometric mean over seeds (1 = every layer gets the same gradient; "
        f"large = vanishing or exploding gradients). {_counts(runs)}"
    ]
    for (dataset,), block in _blocks(cells, ["dataset"]):
        lines += ["", f"### {label('dataset', dataset)}", ""]
        lines += _by_model(block, ["depth"], ["Layers"], bold=False)
    return lines


def alpha_section(folder: Path, runs: pd.DataFrame) -> list[str]:
    cells = seed_cells(runs, ["dataset", "model", "depth", "alpha"])
    lines = [f"Test {_metric(runs)} (%) per LipschitzNorm scale α. {_counts(runs)} "
             "Rank 1 = best mean; diverged settings are not ranked."]
    for (dataset, model, depth), block in _blocks(cells, ["dataset", "model", "depth"]):
        block = block.sort_values("alpha")
        rank = block["mean"].rank(ascending=False, method="min")
        rows = pd.DataFrame({
            "α": [number_text(a) for a in block["alpha"]],
            "Test (%)": cell_texts(block),
            "Rank": [EMPTY if np.isnan(r) else str(int(r)) for r in rank],
        })
        at_one = block["alpha"] == 1
        ranked = int(rank.notna().sum())
        if not at_one.any():
            verdict = "α = 1 was not run."
        elif rank[at_one].isna().all():
            verdict = "α = 1 diverged."
        else:
            verdict = f"α = 1 ranks {int(rank[at_one].iloc[0])} of {ranked}."
        lines += ["", f"### {label('dataset', dataset)}, {label('model', model)}, {depth} layers",
                  "", *markdown(rows), "", verdict]
    return lines


def transformer_section(folder: Path, runs: pd.DataFrame) -> list[str]:
    return _accuracy_by_depth(runs)


def lipschitz_section(folder: Path, runs: None) -> list[str]:
    probe = read_csv(folder / PROBE_FILE, PROBE_COLUMNS)
    lines = ["Empirical Lipschitz constant (Jacobian spectral norm) of one attention layer "
             "at inputs scaled by s; with LipschitzNorm it should not grow with s."]
    for kind in sorted(probe["kind"].unique()):
        here = probe[probe["kind"] == kind]
        models = ordered("model", here["model"])
        grid = here.pivot(index="model", columns="s", values="estimate").reindex(models)
        text = grid.map(lambda v: f"{v:.4g}")
        text.columns = [f"s = {number_text(s)}" for s in grid.columns]
        text.insert(0, "Model", [label("model", m) for m in models])
        lines += ["", f"### {kind} inputs", "", *markdown(text)]
    return lines


def classic_section(folder: Path, runs: pd.DataFrame) -> list[str]:
    return [
        f"Classic two-layer GAT, test {_metric(runs)} (%). {_counts(runs)} Published: "
        "Veličković et al. (2018), Table 2.",
        "",
        *markdown(*classic_table(runs), index=True),
    ]


def _diagnose_row_label(row) -> str:
    """The grid's rows by model; the α study's and other recipes' rows labelled."""
    if row.recipe != DEFAULT_RECIPE:
        return recipe_label(pd.Series(row._asdict()))
    if row.alpha != 1:
        return f"{label('model', row.model)}, α = {row.alpha:g}"
    return label("model", row.model)


def diagnose_section(folder: Path, runs: pd.DataFrame) -> list[str]:
    stored = load_diagnose(folder, runs)
    keys = list(diagnose.CELL_SETTINGS)
    metrics = list(LAYER_METRICS)
    per_run = (stored["layerstats"].pivot(index="run_dir", columns="metric", values="value")
               .reindex(index=runs["run_dir"], columns=metrics))
    ratios = gradient_ratios_by_epoch(stored["gradnorms"]).groupby(level="run_dir").first()
    per_run["grad_ratio"] = ratios.reindex(runs["run_dir"])
    per_run = pd.concat([runs[keys].reset_index(drop=True), per_run.reset_index(drop=True)], axis=1)
    seeds = per_run.groupby(keys, sort=True, dropna=False)
    means = seeds[metrics].mean().join(
        seeds["grad_ratio"].agg(lambda r: float(np.exp(np.mean(np.log(r))))))
    test = seed_cells(runs.assign(test_metric=runs["best_val_test"]), keys)
    train = seed_cells(runs.assign(test_metric=runs["final_train"]), keys)
    cells = test[[*keys, "valid", "mean"]].assign(test=cell_texts(test), train=cell_texts(train))
    cells = cells.merge(means.reset_index(), on=keys, how="left", validate="one_to_one")
    cells.loc[~cells["valid"], [*metrics, "grad_ratio"]] = np.nan  # not averaged, as the table
    cells["grid"] = (cells["recipe"] == DEFAULT_RECIPE) & (cells["alpha"] == 1)
    models = ordered("model", cells["model"])
    cells["order"] = [models.index(m) for m in cells["model"]]
    cells["row"] = [_diagnose_row_label(row) for row in cells.itertuples(index=False)]

    metric = _metric(runs)
    stats_file, norms_file = (diagnose.STORED_TABLES[name][0] for name in ("layerstats", "gradnorms"))
    lines = [
        "Why deep models fail. Per depth: the diagnose grid (this pipeline's recipe, α = 1; "
        "one row per model and feature dropout), then the other runs at that depth, labelled: "
        "the α study (`model, α = …`) and the authors' recipe. "
        f"Test {metric} (%) at the best-validation epoch and training {metric} (%) at the "
        "last epoch: mean ± std (n). The last attention layer's statistics at each run's "
        f"last logged epoch (`diagnose/{stats_file}`): mean over seeds. Gradient "
        "ratio: max/min over attention layers of the layer's gradient norm at the first "
        f"logged epoch (`diagnose/{norms_file}`), geometric mean over seeds. A cell with "
        f"a diverged seed has no mean ({MARKDOWN_EMPTY}). {_counts(runs)} Bold: the best test "
        f"{metric} of the grid at each depth."
    ]
    for (dataset, rate, depth), block in _blocks(cells, ["dataset", "missing_rate", "depth"]):
        grid = block.loc[block["grid"]].sort_values(["order", "feat_drop"], ascending=[True, False])
        extra = block.loc[~block["grid"]].assign(official=lambda b: b["recipe"] != DEFAULT_RECIPE)
        extra = extra.sort_values(["official", "alpha", "feat_drop"], ascending=[True, True, False])
        block = pd.concat([grid, extra])
        best = block.loc[block["grid"], "mean"].max()
        bold = block["grid"] & block["mean"].eq(best)
        rows = pd.DataFrame({
            "Model": block["row"],
            "Feature dropout": [number_text(d) for d in block["feat_drop"]],
            "Test, best val. (%)": block["test"],
            "Train, last epoch (%)": block["train"],
            # As the figures draw them (the entropy as 1 - entropy, analysis.LAYER_METRICS).
            **{LAYER_METRICS[m]: (1.0 - block[m] if m in DRAWN_AS_COMPLEMENT else block[m]).map(number_cell)
               for m in metrics},
            "Gradient ratio, first epoch": block["grad_ratio"].map(number_cell),
        })
        marked = np.zeros(rows.shape, dtype=bool)
        marked[:, rows.columns.get_loc("Test, best val. (%)")] = bold.to_numpy()
        lines += ["", f"### {label('dataset', dataset)}, {number_text(rate)}% missing features, "
                  f"{number_text(depth)} layers", "", *markdown(rows, marked)]
    return lines


def _values(runs: pd.DataFrame, column: str) -> str:
    return ", ".join(number_text(v) for v in sorted(runs[column].unique()))


def remedies_section(folder: Path, runs: pd.DataFrame) -> list[str]:
    text, bold = remedies_comparison(runs)
    text.columns = [f"{dataset}: {source}" for dataset, source in text.columns]
    selection = remedies_selection(runs)
    paired = remedies_paired(runs)
    paired.columns = [f"{number_text(depth)} layers" for depth in paired.columns]
    metric = _metric(runs)
    literature, ours = (remedies.RULES[rule] for rule in (remedies.LITERATURE_RULE, remedies.VALIDATION_RULE))
    return [
        f"GAT and GAT-Lip with each remedy for deep GNNs: test {metric} (%) at each run's "
        "best-validation epoch, mean ± std over seeds / depth #L. "
        f"Ours: {', '.join(label('dataset', d) for d in ordered('dataset', runs['dataset']))}, "
        f"{_values(runs, 'missing_rate')}% missing features, {_values(runs, 'heads')} heads × "
        f"{_values(runs, 'hidden')} hidden, up to {_values(runs, 'epochs')} epochs, depths "
        f"{_values(runs, 'depth')}; {_counts(runs)} Two rules choose a cell's depth among those "
        "without a diverged seed: the literature's, the depth of the best mean *test* accuracy "
        "(how the published numbers report theirs; optimistic, since the test set chooses "
        "what it then measures), and ours, the depth of the best mean *validation* accuracy "
        "(the shallower on a tie).",
        "",
        f"### Beside the published numbers: {literature}",
        "",
        f"Published: {remedies.SOURCE}; their heads, hidden size and epochs as in their papers. "
        "Ours chosen as theirs were, so that each row reads straight against the paper. "
        "Bold: the best of ours per dataset.",
        "",
        *markdown(text, bold, index=True),
        "",
        f"### LipschitzNorm's effect: {ours}",
        "",
        "Each model at the depth of the best mean validation accuracy, and the paired "
        "difference GAT-Lip − GAT there: seed s of GAT-Lip at its chosen depth minus seed s "
        "of GAT at its chosen depth (the seed fixes the missing-features mask), test "
        f"{metric} in percentage points, mean [95 % Student-t interval] over the seeds run "
        "in both (a seed run in one only is left out, and counted). The last column says "
        "where that one interval lies (above 0, below 0, or holds 0): description, "
        "uncorrected for the comparisons made; the test of LipschitzNorm is the analysis "
        "plan's (docs/results/analysis-plan.md).",
        "",
        *markdown(selection, index=True),
        "",
        "### The best configuration by validation",
        "",
        "Per dataset and model, the remedy and depth of the best mean validation accuracy "
        "over the whole grid (`Searched`: the remedy × depth configurations run; heads, "
        "width and α as run) and its test accuracy: a configuration chosen without reading "
        "the test set, beside the best published GAT cell (SNR's, chosen on the test set).",
        "",
        *markdown(remedies_best(runs), index=True),
        "",
        "### Paired difference GAT-Lip − GAT at every depth",
        "",
        "Per depth, the same paired difference (points): mean [95 % interval] over the "
        "seeds run in both, (n=k) where seeds were left unpaired; `diverged (k/n)` where k of "
        "the n pairs hold a diverged run (no difference: it would compare only the seeds on "
        "which both trained).",
        "",
        *markdown(paired, index=True),
    ]
