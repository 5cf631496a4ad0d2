"""The remedies experiment's tables (its statistics: `lipnorm.results.remedies`): the
comparison with the published GAT under the literature's rule, our rule with the paired
differences GAT-Lip − GAT, the paired differences at every depth and the best
configuration by validation; plain text (`summary.md`) and LaTeX (`*_table`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lipnorm.results import remedies
from lipnorm.results.aggregate import label, ordered
from lipnorm.results.tables.cells import NAMES
from lipnorm.results.tables.latex import latex_texts
from lipnorm.results.tables.markdown import MARKDOWN_EMPTY


# Column heads, plain text (the LaTeX tables convert them, `latex_head`).
PUBLISHED_HEAD = "Published GAT (acc / #L)"
OURS_HEAD = "Ours {model} (acc ± sd / #L)"
MODEL_HEAD = "{model} (acc ± sd / #L)"
PAIRS_HEAD = "Seeds paired"
DIFFERENCE_HEAD = "Δ {lip} − {gat} (points) [95 % interval]"
VERDICT_HEAD = "Interval (uncorrected)"
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
    """Points with their sign at one decimal, at two where |points| < 0.05 (so that an
    interval ending at -0.01 never prints as reaching 0: `-0.01`, not `+0.0`); what rounds
    to zero is `+0.00`, not `-0.00`."""
    if abs(points) < 0.05:
        return f"{round(points, 2) + 0.0:+.2f}"
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
    Student-t interval (`difference_text`), and where the interval lies (above 0, below
    0, or it holds 0: one uncorrected interval, description, not a test)."""
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


def remedies_table(runs: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """The remedies beside the published GAT numbers, literature's rule
    (`remedies_comparison`), as LaTeX."""
    text, bold = remedies_comparison(runs)
    return latex_texts(text), bold


def remedies_selection_table(runs: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """Our rule (depth by validation accuracy) with the paired difference GAT-Lip − GAT
    at the chosen depths (`remedies_selection`), as LaTeX; nothing bold."""
    text = latex_texts(remedies_selection(runs))
    return text, np.zeros(text.shape, dtype=bool)


def remedies_paired_table(runs: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """The paired difference GAT-Lip − GAT at every depth (`remedies_paired`), as LaTeX;
    nothing bold."""
    text = latex_texts(remedies_paired(runs))
    return text, np.zeros(text.shape, dtype=bool)


def remedies_best_table(runs: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """The best configuration by validation (`remedies_best`), as LaTeX; nothing bold."""
    text = latex_texts(remedies_best(runs))
    return text, np.zeros(text.shape, dtype=bool)
