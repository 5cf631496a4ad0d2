"""LaTeX tables (booktabs) of an experiment's aggregate, one `<stem>.tex` per table.

Cells read `mean $\\pm$ std (n=N)`: the test metric ×100 over N seeds, std the sample
std (ddof=1); with one seed the cell is `mean (n=1)` (no spread to report). A cell in
which any seed diverged reads `diverged (k/N)` and takes no part in the averages or
the bold: the mean of the survivors alone would flatter the setting. Bold marks the
best mean of the question the table asks (see each builder). The diagnose table adds
cells of per-layer statistics (`number_cell`: plain, or scientific when tiny or huge).

The same (text, bold) frames render as Markdown (`markdown`: GitHub pipe tables, the
cells' LaTeX as plain text), which `lipnorm publish` writes into its `summary.md`.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lipnorm import experiments, remedies
from lipnorm.aggregate import label, load_table, ordered, seed_cells
from lipnorm.analysis import (
    DEFAULT_RECIPE,
    diagnose_grid,
    gradient_ratios_by_epoch,
    last_epoch_stats,
    recipes,
)
from lipnorm.io import atomic_path


def __getattr__(name: str):
    if name == "TABLES":  # experiment -> its table stems, as registered (lipnorm.experiments)
        return experiments.tables()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Veličković et al. (2018), Graph Attention Networks, Table 2: mean ± std test
# accuracy (%) of GAT over 100 runs.
PUBLISHED_CLASSIC = {"cora": (83.0, 0.7, 100), "citeseer": (72.5, 0.7, 100), "pubmed": (79.0, 0.3, 100)}

EMPTY = "--"  # a combination without runs (renders as an en dash)
BOLD = "textbf:--rwrap;"
# Printed names of the row and column levels, already LaTeX.
NAMES = {
    "missing_rate": "Missing rate (\\%)",
    "dataset": "Dataset",
    "model": "Model",
    "architecture": "Architecture",
    "attention_norm": "Attention norm",
    "norm": "Normalisation",
    "depth": "Layers",
    "alpha": "$\\alpha$",
    "feat_drop": "Feature dropout",
}


def format_cell(mean: float, std: float, n: int, n_diverged: int = 0) -> str:
    """The text of one table cell (see the module docstring)."""
    if n_diverged:
        return f"diverged ({n_diverged}/{n})"
    if n == 1:
        return f"{mean:.1f} (n=1)"
    return f"{mean:.1f} $\\pm$ {std:.1f} (n={n})"


def number_text(value: Any) -> Any:
    """Index values as printed: 0.5 stays 0.5, 100.0 becomes 100."""
    return f"{value:g}" if isinstance(value, (int, float, np.number)) else value


def render(text: pd.DataFrame, bold: np.ndarray) -> str:
    """A booktabs tabular of the string frame `text`, bold where `bold` is True.

    Index and column names are written as LaTeX already; index values are escaped,
    except the row labels of a frame whose `attrs["latex_rows"]` is true (a builder
    whose row labels are LaTeX already, e.g. `$\\alpha$`) and the column labels of a
    frame whose `attrs["latex_columns"]` is true (e.g. `latex_head`'s).
    """
    styler = text.style.apply(lambda _: np.where(bold, BOLD, ""), axis=None)
    for axis in (0, 1):
        escape = None if text.attrs.get(("latex_rows", "latex_columns")[axis]) else "latex"
        styler = styler.format_index(number_text, escape=escape, axis=axis)
    return styler.to_latex(
        hrules=True,
        column_format="l" * text.index.nlevels + "r" * text.shape[1],
        multirow_align="naive",
        multicol_align="c",
    )


MARKDOWN_EMPTY = "–"  # EMPTY as plain text; the remedies tables' texts use it too
# Superscripts of a power of ten, as the README prints them (10⁻⁷).
SUPERSCRIPTS = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def markdown_cell(text: str) -> str:
    """A cell as Markdown: the LaTeX of this module's cells as plain text (`$\\pm$` as
    `±`, EMPTY as MARKDOWN_EMPTY, `number_cell`'s `$1.2 \\times 10^{-7}$` as
    `1.2 × 10⁻⁷`); any other text as it is."""
    if text == EMPTY:
        return MARKDOWN_EMPTY
    power = re.fullmatch(r"\$(\S+) \\times 10\^\{(-?\d+)\}\$", text)
    if power:
        return f"{power[1]} × 10{power[2].translate(SUPERSCRIPTS)}"
    return text.replace("$\\pm$", "±")


def markdown(text: pd.DataFrame, bold: np.ndarray | None = None, index: bool = False) -> list[str]:
    """The lines of a GitHub pipe table of the string frame `text`: its column names as
    the header, each cell through `markdown_cell`, `**bold**` where `bold` is True;
    with `index`, the index levels first (headed by their names), never bold."""
    cells = text.map(lambda cell: markdown_cell(str(cell)))
    if bold is not None:
        cells = cells.where(~np.asarray(bold, dtype=bool), "**" + cells + "**")
    if index:
        cells = cells.reset_index()
    lines = ["| " + " | ".join(map(str, cells.columns)) + " |",
             "|" + "|".join("---" for _ in cells.columns) + "|"]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in cells.itertuples(index=False)]
    return lines


def _with_labels(cells: pd.DataFrame) -> pd.DataFrame:
    """Model, dataset and model-axis names replaced by their printed labels, in the
    registry's order."""
    cells = cells.copy()
    for kind in ("model", "dataset", "architecture", "attention_norm", "norm"):
        if kind in cells.columns:
            names = ordered(kind, cells[kind])
            cells[kind] = pd.Categorical(
                [label(kind, n) for n in cells[kind]], categories=[label(kind, n) for n in names]
            )
    return cells


def cell_texts(cells: pd.DataFrame) -> list[str]:
    """`format_cell` of each row of seed cells (`mean, std, n, n_diverged`)."""
    return [
        format_cell(m, s, n, d)
        for m, s, n, d in cells[["mean", "std", "n", "n_diverged"]].itertuples(index=False)
    ]


def _grid(cells: pd.DataFrame, rows: list[str], columns: list[str]):
    """Pivot cells into (text, means) frames with the printed level names."""
    cells = _with_labels(cells)
    cells["text"] = cell_texts(cells)
    text = cells.pivot(index=rows, columns=columns, values="text").fillna(EMPTY)
    means = cells.pivot(index=rows, columns=columns, values="mean").astype(float)
    for frame in (text, means):
        frame.index = frame.index.set_names([NAMES[r] for r in rows])
        frame.columns = frame.columns.set_names([NAMES[c] for c in columns])
    return text, means


def _best_per_column(means: pd.DataFrame, within: list[str]) -> np.ndarray:
    """True at the highest mean of each column inside each block of rows `within`."""
    block_max = means.groupby(level=within, dropna=False, observed=True).transform("max")
    return (means.notna() & means.eq(block_max)).to_numpy()


def depth_table(runs: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """Accuracy by missing rate × dataset × model (rows) and depth (columns).

    Bold: the best model at each depth, per dataset and missing rate.
    """
    rows = ["missing_rate", "dataset", "model"]
    text, means = _grid(seed_cells(runs, [*rows, "depth"]), rows, ["depth"])
    return text, _best_per_column(means, [NAMES["missing_rate"], NAMES["dataset"]])


def best_depths(runs: pd.DataFrame) -> pd.DataFrame:
    """Per missing rate × dataset × model, the seed cell of the depth with the best mean
    (the smallest such depth on a tie); depths with a diverged seed are not candidates.

    Columns: `missing_rate, dataset, model, mean, std, n, n_diverged, depth` (`depth` as
    text; EMPTY, with the counts of all depths, when every depth diverged).
    """
    keys = ["missing_rate", "dataset", "model"]
    cells = seed_cells(runs, [*keys, "depth"])
    best_rows = []
    for key, group in cells.groupby(keys, sort=True, dropna=False):
        valid = group[group["valid"]].sort_values(["mean", "depth"], ascending=[False, True])
        if valid.empty:
            best = {"mean": np.nan, "std": np.nan, "n": group["n"].sum(),
                    "n_diverged": group["n_diverged"].sum(), "depth": EMPTY}
        else:
            top = valid.iloc[0]
            best = {"mean": top["mean"], "std": top["std"], "n": top["n"], "n_diverged": 0,
                    "depth": str(int(top["depth"]))}
        best_rows.append({**dict(zip(keys, key)), **best})
    return pd.DataFrame(best_rows)


def missing_features_table(runs: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """The paper's missing-features table: per missing rate (rows, every rate present)
    and model, for each dataset the best accuracy over depths (`Acc`) and the depth
    reaching it (`#L`, see `best_depths`). Bold: the best model per dataset and missing rate.
    """
    best_cells = _with_labels(best_depths(runs))
    best_cells["text"] = cell_texts(best_cells)
    rows = ["missing_rate", "model"]
    acc, depth, means = (
        best_cells.pivot(index=rows, columns="dataset", values=v) for v in ("text", "depth", "mean")
    )
    text = pd.concat(
        {d: pd.concat({"Acc": acc[d], "#L": depth[d]}, axis=1) for d in acc.columns}, axis=1
    ).fillna(EMPTY)
    text.index = text.index.set_names([NAMES[r] for r in rows])
    text.columns = text.columns.set_names([NAMES["dataset"], None])
    bold = np.zeros(text.shape, dtype=bool)
    bold[:, 0::2] = _best_per_column(means.astype(float), [rows[0]])  # columns: Acc, #L per dataset
    return text, bold


def alpha_table(runs: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """Accuracy by dataset × model × depth (rows) and α (columns).

    Bold: the best α in each row.
    """
    rows = ["dataset", "model", "depth"]
    text, means = _grid(seed_cells(runs, [*rows, "alpha"]), rows, ["alpha"])
    row_max = means.max(axis=1)
    return text, (means.notna() & means.eq(row_max, axis=0)).to_numpy()


def classic_table(runs: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """The classic GAT (model `gat-classic`) next to Veličković et al. (2018), per
    dataset. Nothing is bold: the columns are not competitors."""
    classic = runs[runs["model"] == "gat-classic"]
    if classic.empty:
        raise ValueError(
            f"classic table: no runs of model 'gat-classic' (models: {sorted(runs['model'].unique())})"
        )
    cells = seed_cells(classic, ["dataset"])
    cells["published"] = [
        format_cell(*PUBLISHED_CLASSIC[name]) if name in PUBLISHED_CLASSIC else EMPTY
        for name in cells["dataset"]
    ]
    cells = _with_labels(cells).sort_values("dataset")
    text = pd.DataFrame(
        {"This pipeline": cell_texts(cells), "Published": cells["published"].to_list()},
        index=pd.Index(cells["dataset"].astype(str), name=NAMES["dataset"]),
    )
    return text, np.zeros(text.shape, dtype=bool)


# --- diagnose ----------------------------------------------------------------------

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


def number_cell(value: float) -> str:
    """A diagnostic as printed: 3 significant digits from 0.01 to 1000, else LaTeX
    scientific notation with 2 (`$1.2 \\times 10^{-7}$`); `0` for 0, EMPTY for NaN."""
    if not np.isfinite(value):
        return EMPTY
    if value == 0:
        return "0"
    if 0.01 <= abs(value) < 1000:
        return f"{value:.3g}"
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"${mantissa} \\times 10^{{{int(exponent)}}}$"


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


# --- remedies -----------------------------------------------------------------------

# Column heads, plain text (the LaTeX tables convert them, `latex_head`).
PUBLISHED_HEAD = "Published GAT (acc / #L)"
OURS_HEAD = "Ours {model} (acc ± sd / #L)"
MODEL_HEAD = "{model} (acc ± sd / #L)"
PAIRS_HEAD = "Seeds paired"
DIFFERENCE_HEAD = "Δ {lip} − {gat} (points) [95 % interval]"
VERDICT_HEAD = "Verdict"
REMEDY_HEAD = "Remedy"


def difference_text(n: int, n_diverged: int, mean: float, lo: float, hi: float,
                    n_unpaired: int = 0, count_pairs: bool = False) -> str:
    """A paired difference GAT-Lip − GAT (`remedies.paired_differences`) as printed: `+2.0
    [-0.5, +4.5]` (mean [95 % interval], points); `+2.0 (n=1)` for one pair (no
    interval); `diverged (k/n)` when k of the n pairs hold a diverged run (no mean);
    MARKDOWN_EMPTY without pairs. With `count_pairs`, a difference that left seeds
    unpaired says over how many pairs it is (`(n=2)`)."""
    if n_diverged:
        return f"diverged ({n_diverged}/{n})"
    if n == 0:
        return MARKDOWN_EMPTY
    if n == 1:
        return f"{_signed(mean)} (n=1)"
    count = f" (n={n})" if count_pairs and n_unpaired else ""
    return f"{_signed(mean)} [{_signed(lo)}, {_signed(hi)}]{count}"


def _signed(points: float) -> str:
    """Points with their sign at one decimal; what rounds to zero is `+0.0`, not `-0.0`."""
    return f"{round(points, 1) + 0.0:+.1f}"


def _remedy_rows(cells: pd.DataFrame) -> list[tuple[str, str]]:
    """(dataset, remedy) of `cells`: datasets in the registry's order, remedies in
    `remedies.remedy_order`."""
    return [(dataset, remedy) for dataset in ordered("dataset", cells["dataset"])
            for remedy in remedies.remedy_order(cells.loc[cells["dataset"] == dataset, "remedy"])]


def _remedy_index(rows: list[tuple[str, str]]) -> pd.MultiIndex:
    return pd.MultiIndex.from_tuples([(label("dataset", d), remedies.remedy_label(r)) for d, r in rows],
                                     names=[NAMES["dataset"], REMEDY_HEAD])


def remedies_comparison(runs: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """The published table's form (`remedies.comparison_table`) as (text, bold), plain
    text (`±`, `–`): rows the remedies (index), columns (dataset label, Published GAT |
    Ours GAT | Ours GAT-Lip). Each of ours is `test accuracy ± std / depth` at the depth
    of the *literature's rule* (`remedies.RULES`: the best mean test accuracy, as the
    published numbers were chosen; optimistic), so the row reads straight against the
    paper. Bold: the best of ours per dataset (both attention norms)."""
    runs = remedies.with_remedies(runs)
    rule = remedies.LITERATURE_RULE
    table = remedies.comparison_table(runs, rule).set_index("remedy")
    chosen = remedies.at_chosen_depths(remedies.select_depths(runs), rule)
    label_of = {remedies.remedy_label(name): name for name in chosen["remedy"]}
    sources = {"published GAT": PUBLISHED_HEAD,
               **{f"ours {name}": OURS_HEAD.format(model=remedies.model_label(runs, norm)) for norm, name in
                  (("none", "GAT"), ("lip", "GAT-Lip"))}}
    columns, bold = [], np.zeros(table.shape, dtype=bool)
    for j, column in enumerate(table.columns):
        dataset, source = column.split(": ", 1)
        columns.append((label("dataset", dataset), sources[source]))
        if source == "published GAT":
            continue
        attention_norm = "none" if source == "ours GAT" else "lip"
        here = chosen[(chosen["dataset"] == dataset)]
        best = here["test_mean"].max()
        for i, row in enumerate(table.index):
            match = here[(here["remedy"] == label_of.get(row)) & (here["attention_norm"] == attention_norm)]
            bold[i, j] = not match.empty and match["test_mean"].iloc[0] == best
    table.columns = pd.MultiIndex.from_tuples(columns, names=[NAMES["dataset"], None])
    table.index = table.index.rename("GAT +")
    return table, bold


def remedies_selection(runs: pd.DataFrame) -> pd.DataFrame:
    """Our rule and LipschitzNorm's effect, plain text (`±`, `–`): per dataset × remedy
    (rows, labels), GAT and GAT-Lip each at the depth of *our rule* (`remedies.RULES`:
    the best mean validation accuracy; `test accuracy ± std / depth`), then the paired
    difference GAT-Lip − GAT at those depths (`remedies.paired_at_chosen_depths`): the
    seeds paired (and any left unpaired), the mean difference in points with its 95 %
    Student-t interval (`difference_text`), and the verdict (helped: the interval lies
    above 0; hurt: below; else no measurable effect)."""
    runs = remedies.with_remedies(runs)
    rule = remedies.VALIDATION_RULE
    chosen = remedies.at_chosen_depths(remedies.select_depths(runs), rule)
    paired = remedies.paired_at_chosen_depths(runs, rule).set_index(["dataset", "remedy"])
    names = {norm: remedies.model_label(runs, norm) for norm in ("none", "lip")}
    difference_head = DIFFERENCE_HEAD.format(lip=names["lip"], gat=names["none"])
    rows = _remedy_rows(chosen)
    cells = []
    for dataset, remedy in rows:
        row = {}
        for norm, name in names.items():
            match = chosen[(chosen["dataset"] == dataset) & (chosen["remedy"] == remedy)
                           & (chosen["attention_norm"] == norm)]
            row[MODEL_HEAD.format(model=name)] = (
                MARKDOWN_EMPTY if match.empty
                else remedies.accuracy_text(*match.iloc[0][["test_mean", "test_std", "depth"]]))
        if (dataset, remedy) in paired.index:
            pair = paired.loc[(dataset, remedy)]
            unpaired = f" ({pair['n_unpaired']} unpaired)" if pair["n_unpaired"] else ""
            row[PAIRS_HEAD] = f"{pair['n']}{unpaired}"
            row[difference_head] = difference_text(
                pair["n"], pair["n_diverged"], pair["mean"], pair["lo"], pair["hi"])
            row[VERDICT_HEAD] = pair["verdict"]
        else:
            row[PAIRS_HEAD] = row[difference_head] = row[VERDICT_HEAD] = MARKDOWN_EMPTY
        cells.append(row)
    columns = [*(MODEL_HEAD.format(model=name) for name in names.values()), PAIRS_HEAD, difference_head,
               VERDICT_HEAD]
    return pd.DataFrame(cells, columns=columns, index=_remedy_index(rows))


BEST_HEADS = ("Configuration (remedy / #L)", "Validation (%)", "Test (acc ± sd)", "Searched",
              "Published best, SNR (acc ± sd / #L)")


def remedies_best(runs: pd.DataFrame) -> pd.DataFrame:
    """The grid's best configuration by validation, plain text: per dataset × model
    (rows, labels), the remedy and depth of the best mean validation accuracy over the
    whole grid (`remedies.best_by_validation`), that mean, the test accuracy there (± std
    over seeds), how many configurations were searched, and the best published GAT
    cell (SNR's, `remedies.PUBLISHED`)."""
    best = remedies.best_by_validation(remedies.with_remedies(runs))
    rows, cells = [], []
    for dataset in ordered("dataset", best["dataset"]):
        for norm in ("none", "lip"):
            match = best[(best["dataset"] == dataset) & (best["attention_norm"] == norm)]
            if match.empty:
                continue
            row = match.iloc[0]
            spread = "" if np.isnan(row["test_std"]) else f" ± {row['test_std']:.1f}"
            rows.append((label("dataset", dataset), remedies.model_label(runs, norm)))
            cells.append(dict(zip(BEST_HEADS, (
                f"{remedies.remedy_label(row['remedy'])} / {row['depth']}", f"{row['val_mean']:.1f}",
                f"{row['test_mean']:.1f}{spread}", str(row["candidates"]),
                remedies.published_text(remedies.PUBLISHED.get(("snr", dataset))),
            ))))
    index = pd.MultiIndex.from_tuples(rows, names=[NAMES["dataset"], "Model"])
    return pd.DataFrame(cells, columns=list(BEST_HEADS), index=index)


def remedies_paired(runs: pd.DataFrame) -> pd.DataFrame:
    """LipschitzNorm's effect at every depth, plain text: per dataset × remedy (rows) and
    depth (columns), the paired difference GAT-Lip − GAT of test accuracy in points with
    its 95 % Student-t interval (`remedies.paired_differences`, `difference_text`; the
    number of pairs where seeds were left unpaired; `diverged (k/n)` where a paired run
    diverged; `–` where nothing pairs)."""
    runs = remedies.with_remedies(runs)
    differences = remedies.paired_differences(runs)
    differences["text"] = [
        difference_text(n, diverged, mean, lo, hi, unpaired, count_pairs=True)
        for n, diverged, mean, lo, hi, unpaired
        in differences[["n", "n_diverged", "mean", "lo", "hi", "n_unpaired"]].itertuples(index=False)
    ]
    rows = _remedy_rows(differences)
    text = (differences.pivot(index=["dataset", "remedy"], columns="depth", values="text")
            .reindex(index=pd.MultiIndex.from_tuples(rows), columns=sorted(differences["depth"].unique()))
            .fillna(MARKDOWN_EMPTY))
    text.index = _remedy_index(rows)
    text.columns = text.columns.rename(NAMES["depth"])
    return text


# Plain text of the remedies' heads -> LaTeX: specials escaped first, then the symbols.
LATEX_HEAD_SPECIALS = {"\\": "\\textbackslash{}", "#": "\\#", "%": "\\%", "&": "\\&", "_": "\\_"}
LATEX_HEAD_SYMBOLS = {"±": "$\\pm$", "Δ": "$\\Delta$", "−": "$-$"}


def latex_head(head: Any) -> Any:
    """A plain-text column head as LaTeX (`#` as `\\#`, `±` as `$\\pm$`, `Δ` as
    `$\\Delta$`, `−` as `$-$`, ...); a tuple head part by part; anything else as it is."""
    if isinstance(head, tuple):
        return tuple(latex_head(part) for part in head)
    if not isinstance(head, str):
        return head
    text = "".join(LATEX_HEAD_SPECIALS.get(char, char) for char in head)
    for symbol, latex in LATEX_HEAD_SYMBOLS.items():
        text = text.replace(symbol, latex)
    return text


def _latex_texts(text: pd.DataFrame) -> pd.DataFrame:
    """Plain cells and heads as LaTeX (`markdown_cell` the other way): `±` as `$\\pm$`,
    MARKDOWN_EMPTY (no result) as EMPTY; heads through `latex_head`, which `render` then
    leaves unescaped (`attrs["latex_columns"]`)."""
    latex = text.map(lambda cell: EMPTY if cell == MARKDOWN_EMPTY else cell.replace(" ± ", " $\\pm$ "))
    latex.columns = latex.columns.map(latex_head)
    latex.attrs["latex_columns"] = True
    return latex


def remedies_table(runs: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """The remedies beside the published GAT numbers, literature's rule
    (`remedies_comparison`), as LaTeX."""
    text, bold = remedies_comparison(runs)
    return _latex_texts(text), bold


def remedies_selection_table(runs: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """Our rule (depth by validation accuracy) with the paired difference GAT-Lip − GAT
    at the chosen depths (`remedies_selection`), as LaTeX; nothing bold."""
    text = _latex_texts(remedies_selection(runs))
    return text, np.zeros(text.shape, dtype=bool)


def remedies_paired_table(runs: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """The paired difference GAT-Lip − GAT at every depth (`remedies_paired`), as LaTeX;
    nothing bold."""
    text = _latex_texts(remedies_paired(runs))
    return text, np.zeros(text.shape, dtype=bool)


def remedies_best_table(runs: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """The best configuration by validation (`remedies_best`), as LaTeX; nothing bold."""
    text = _latex_texts(remedies_best(runs))
    return text, np.zeros(text.shape, dtype=bool)


def write_tables(
    experiment: str, aggregate_dir: str | os.PathLike, out_dir: str | os.PathLike
) -> list[Path]:
    """Write `<out_dir>/<stem>.tex` for each table the experiment registers
    (`lipnorm.experiments`), built from the aggregate tables it names."""
    entry = experiments.experiment(experiment)
    load = functools.cache(functools.partial(load_table, aggregate_dir))
    written = []
    for output in entry.tables:
        path = Path(out_dir) / f"{output.stem}.tex"
        with atomic_path(path) as tmp:
            tmp.write_text(render(*experiments.build(output, load)))
        written.append(path)
    return written
