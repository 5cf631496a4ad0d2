"""The README's results: at most 25 lines, and every number in its table equal to what
the published folders under docs/results hold (their runs.csv, summaries and reports),
recomputed here: a republished folder that moves a number fails this test until the
README says the same."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from lipnorm.results import remedies

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "docs" / "results"
DATASETS = ("cora", "citeseer")
NORMALISATIONS = ("none", "batchnorm", "pairnorm", "dgn")


def results_section() -> list[str]:
    lines = (REPO / "README.md").read_text().splitlines()
    start = lines.index("## Results")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("## "))
    return lines[start + 1:end]


def row(claim: str) -> str:
    """The README results table's row whose first cell starts with `claim`."""
    rows = [line for line in results_section() if line.startswith(f"| {claim}")]
    assert len(rows) == 1, f"one row starting {claim!r} expected, found {rows}"
    return rows[0]


def runs(folder: str) -> pd.DataFrame:
    return remedies.with_remedies(pd.read_csv(RESULTS / folder / "remedies" / "runs.csv"))


def points(value: float) -> str:
    return f"{value:.1f}"


def test_results_section_is_at_most_25_lines():
    assert len(results_section()) <= 25


def test_gradient_ratios_are_the_default_presets():
    summary = (RESULTS / "default" / "summary.md").read_text()
    gat, lip = re.search(r"^\| 30 \| (\S+) \(n=1\) \| (\S+) \(n=1\) \|$", summary, re.M).groups()
    mantissa, exponent = f"{float(gat):.2e}".split("e+")
    text = row("GAT-Lip's per-layer gradient norms")
    assert f"{mantissa} × 10{str(int(exponent)).translate(str.maketrans('0123456789', '⁰¹²³⁴⁵⁶⁷⁸⁹'))}" in text
    assert f"{float(lip):.2f}" in text


def test_classic_gat_is_the_default_presets():
    summary = (RESULTS / "default" / "summary.md").read_text()
    text = row("The classic 2-layer GAT")
    for dataset in ("Cora", "CiteSeer"):
        ours, published = re.search(rf"^\| {dataset} \| (\S+ ± \S+) \(n=3\) \| (\S+ ± \S+) \(n=100\) \|$",
                                    summary, re.M).groups()
        assert ours in text and published in text


def normalisation_cells() -> dict[tuple[str, str], float]:
    """Per (dataset, remedy), GAT's best mean test accuracy over the whole depth grid
    (the literature's rule), from the merged literature folders."""
    cells = {}
    for dataset in DATASETS:
        chosen = remedies.select_depths(runs(f"literature-{dataset}-all"))
        for remedy in NORMALISATIONS:
            cell = chosen[(chosen["attention_norm"] == "none") & (chosen["remedy"] == remedy)]
            cells[dataset, remedy] = float(cell["test_best_mean"].iloc[0])
    return cells


def test_normalisation_rows_reproduce_within_the_stated_points():
    deviations = {key: value - remedies.PUBLISHED[key[1], key[0]].accuracy for key, value in normalisation_cells().items()}
    largest = max(deviations, key=lambda key: abs(deviations[key]))
    text = row("The nothing / BatchNorm / PairNorm / DGN rows")
    assert f"within {points(abs(deviations[largest]))} points" in text
    assert f"{points(deviations[largest]).replace('-', '−') if deviations[largest] < 0 else '+' + points(deviations[largest])}" in text


def snr_cells() -> dict[str, tuple[float, float, str]]:
    """Per dataset, GAT with the residual under SNR's protocol at the learning rate of the
    best mean test accuracy (their rule): (mean, np.std as theirs, lr)."""
    cells = {}
    for dataset in DATASETS:
        best = None
        for lr in ("0.01", "0.001"):
            frame = runs(f"snr-lr{lr}")
            gat = frame[(frame["dataset"] == dataset) & (frame["attention_norm"] == "none")]["best_val_test"] * 100
            if best is None or gat.mean() > best[0]:
                best = (gat.mean(), float(np.std(gat.to_numpy())), lr)
        cells[dataset] = best
    return cells


def test_snr_residual_row_is_the_published_snr_folders():
    text = row("SNR's residual row")
    for dataset, (mean, sd, _) in snr_cells().items():
        assert f"{points(mean)} ± {points(sd)}" in text, dataset
    assert "74.9 ± 1.3" in text and "57.9 ± 2.8" in text


def test_dropedge_row_is_the_published_dropedge_folders():
    text = row("The DropEdge row")
    for folder in ("dropedge-authors", "dropedge-decorr"):
        frame = runs(folder)
        for dataset in DATASETS:
            gat = frame[(frame["dataset"] == dataset) & (frame["attention_norm"] == "none")]["best_val_test"] * 100
            assert points(gat.mean()) in text, (folder, dataset)


def test_primary_row_is_the_published_report():
    tests = pd.read_csv(RESULTS / "primary" / "tests.csv")
    text = row("LipschitzNorm inside each remedy")
    passed = tests[tests["verdict"] != "no measurable effect"]
    assert f"{len(passed)} of {len(tests)}" in text
    for _, pair in passed.iterrows():
        assert f"{pair['mean']:+.1f}".replace("-", "−") in text
    assert f"{int((tests['n_seeds'] == 10).sum())} with 10 seeds" in text


def test_secondary_row_is_the_published_report():
    from lipnorm.results.compare import SECONDARY_DATASETS, SECONDARY_PROTOCOLS
    from lipnorm.results.tables.compare import interval_text

    tests = pd.read_csv(RESULTS / "secondary" / "tests.csv")
    text = row("LipschitzNorm inside DropEdge's and the residual's own protocols")
    family = len(SECONDARY_PROTOCOLS) * len(SECONDARY_DATASETS)
    passed = tests[tests["verdict"] != "no measurable effect"]
    assert f"{len(tests)} of {family} run" in text and f"helps in {len(passed)} of {family}" in text
    for _, pair in tests.iterrows():
        # as the report prints it: one decimal, two within 0.05 of 0
        assert interval_text(pair["mean"], pair["lo"], pair["hi"]) in text, (pair["protocol"], pair["dataset"])
