"""The accuracy tables: by depth, by missing rate, by α, and the classic benchmarks
beside the published GAT. Bold marks the best mean of the question each table asks
(see each builder).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lipnorm.results.aggregate import seed_cells
from lipnorm.results.tables.cells import (
    EMPTY,
    NAMES,
    best_per_column,
    cell_texts,
    format_cell,
    grid,
    with_labels,
)


# Veličković et al. (2018), Graph Attention Networks, Table 2: mean ± std test
# accuracy (%) of GAT over 100 runs.
PUBLISHED_CLASSIC = {"cora": (83.0, 0.7, 100), "citeseer": (72.5, 0.7, 100), "pubmed": (79.0, 0.3, 100)}


def depth_table(runs: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """Accuracy by missing rate × dataset × model (rows) and depth (columns).

    Bold: the best model at each depth, per dataset and missing rate.
    """
    rows = ["missing_rate", "dataset", "model"]
    text, means = grid(seed_cells(runs, [*rows, "depth"]), rows, ["depth"])
    return text, best_per_column(means, [NAMES["missing_rate"], NAMES["dataset"]])


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
    best_cells = with_labels(best_depths(runs))
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
    bold[:, 0::2] = best_per_column(means.astype(float), [rows[0]])  # columns: Acc, #L per dataset
    return text, bold


def alpha_table(runs: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """Accuracy by dataset × model × depth (rows) and α (columns).

    Bold: the best α in each row.
    """
    rows = ["dataset", "model", "depth"]
    text, means = grid(seed_cells(runs, [*rows, "alpha"]), rows, ["alpha"])
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
    cells = with_labels(cells).sort_values("dataset")
    text = pd.DataFrame(
        {"This pipeline": cell_texts(cells), "Published": cells["published"].to_list()},
        index=pd.Index(cells["dataset"].astype(str), name=NAMES["dataset"]),
    )
    return text, np.zeros(text.shape, dtype=bool)
