"""`lipnorm publish`: a results tree becomes a small published folder whose tables and
summary.md are regenerated from its stored aggregates; the drift test checks every
published folder under docs/results/ against the code.

The synthetic tree is made of real aggregates and tables (written by `lipnorm.results.aggregate`
and `lipnorm.results.tables` from synthetic run directories); its figures are placeholder bytes,
since publishing copies figures without reading them. Expected numbers are computed
here with numpy from the values the runs were written with.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.synthetic_runs import (
    DIAGNOSE_DIVERGED,
    DIAGNOSE_GRID,
    LAYER_METRICS,
    attention_grad_norm,
    layer_stat,
    write_diagnose,
    write_grid,
    write_remedies,
)

from lipnorm.results.aggregate import EXPERIMENTS, write_aggregate
from lipnorm.cli import main
from lipnorm.io import write_parquet
from lipnorm.results.figures import FIGURES
from lipnorm.results.publish import publish, read_runs, read_stored, regenerate
from lipnorm.results.tables import write_tables

REPO = Path(__file__).resolve().parents[1]
RUNS_COLUMNS = ["dataset", "missing_rate", "model", "depth", "alpha", "seed", "status",
                "metric", "test_metric"]
SEEDS = (0, 1)
GRIDS = {  # experiment -> (grid, fixed settings, seeds)
    "depth": ({"dataset": ["cora"], "missing_rate": [0, 100], "model": ["gat", "gat-lip"],
               "depth": [2, 4]}, {}, SEEDS),
    "gradients": ({"model": ["gat", "gat-lip"], "depth": [2, 3]}, {}, (0,)),
    "alpha": ({"alpha": [0.5, 1.0, 2.0]}, {"model": "gat-lip"}, SEEDS),
    "transformer": ({"model": ["gt", "gt-lip"], "depth": [2, 4]}, {}, SEEDS),
    "classic": ({"dataset": ["cora", "citeseer"]}, {"model": "gat-classic"}, SEEDS),
}
DIVERGED = {"depth": [("cora", 100, "gat", 4, 1)]}  # grid values, then the seed
PROBE = pd.DataFrame(
    [(m, s, k, e) for m, base in (("gat", 3.5), ("gat-lip", 2.25)) for k in ("random", "tied")
     for s, e in ((1.0, base), (10.0, base * (10 if m == "gat" else 1)))],
    columns=["model", "s", "kind", "estimate"],
)
MODELS = {"gat": "GAT", "gat-lip": "GAT-Lip", "gt": "GT", "gt-lip": "GT-Lip"}


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> tuple[Path, dict[str, list[dict]]]:
    """(results root, the run records of each experiment)."""
    root = tmp_path_factory.mktemp("results")
    run_root = tmp_path_factory.mktemp("runs")
    records = {}
    for experiment, (grid, fixed, seeds) in GRIDS.items():
        records[experiment] = write_grid(run_root / experiment, grid, seeds=seeds,
                                         diverged=DIVERGED.get(experiment, ()), **fixed)
        aggregate = root / experiment / "aggregate"
        write_aggregate([r["run_dir"] for r in records[experiment]], aggregate)
        write_tables(experiment, aggregate, root / experiment / "tables")
    records["diagnose"] = write_diagnose(run_root / "diagnose")
    write_aggregate([r["run_dir"] for r in records["diagnose"]], root / "diagnose" / "aggregate")
    write_tables("diagnose", root / "diagnose" / "aggregate", root / "diagnose" / "tables")
    records["remedies"] = write_remedies(run_root / "remedies")
    write_aggregate([r["run_dir"] for r in records["remedies"]], root / "remedies" / "aggregate")
    write_tables("remedies", root / "remedies" / "aggregate", root / "remedies" / "tables")
    write_parquet(root / "lipschitz" / "aggregate" / "probe.parquet", PROBE)
    for experiment in EXPERIMENTS:
        for stem in FIGURES[experiment]:
            for fmt in ("pdf", "png"):
                figure = root / experiment / "figures" / f"{stem}.{fmt}"
                figure.parent.mkdir(parents=True, exist_ok=True)
                figure.write_bytes(f"{experiment} {stem}.{fmt}".encode())
    (root / "bench").mkdir()  # not an experiment: not published
    (root / "bench" / "summary.md").write_text("bench")
    return root, records


@pytest.fixture(scope="module")
def published(tree, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("docs") / "results"
    publish(tree[0], out)
    return out


def markdown_tables(text: str) -> dict[tuple[str, str], list[dict[str, str]]]:
    """The pipe tables of summary.md by (## heading, ### heading): rows as dicts."""
    tables: dict[tuple[str, str], list[dict[str, str]]] = {}
    section = subsection = ""
    header = None
    for line in text.splitlines():
        if line.startswith("## "):
            section, subsection = line[3:], ""
        elif line.startswith("### "):
            subsection = line[4:]
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if header is None:
            header = cells
            tables[section, subsection] = []
        elif set(line) != {"|", "-"}:
            tables[section, subsection].append(dict(zip(header, cells)))
    return tables


def summary_tables(published: Path):
    return markdown_tables((published / "summary.md").read_text())


def cell_text(values: list[float], diverged: int = 0) -> str:
    if diverged:
        return f"diverged ({diverged}/{len(values)})"
    scores = np.asarray(values) * 100
    if len(scores) == 1:
        return f"{scores.mean():.1f} (n=1)"
    return f"{scores.mean():.1f} ± {np.std(scores, ddof=1):.1f} (n={len(scores)})"


def cell_of(records, **equal) -> tuple[str, float | None]:
    """(text, mean ×100 or None when a seed diverged) of the runs matching `equal`."""
    runs = [r for r in records if all(r[k] == v for k, v in equal.items())]
    diverged = sum(r["status"] == "diverged" for r in runs)
    values = [r["test_metric"] for r in runs]
    return cell_text(values, diverged), None if diverged else float(np.mean(values)) * 100


def unbold(text: str) -> tuple[str, bool]:
    return (text[2:-2], True) if text.startswith("**") and text.endswith("**") else (text, False)


def test_publish_writes_the_documented_files(tree, published):
    root, _ = tree
    expected = {
        "summary.md",
        "depth/runs.csv", "depth/depth_accuracy_table.tex", "depth/missing_features_table.tex",
        "depth/depth_accuracy.pdf", "depth/depth_accuracy.png",
        "gradients/runs.csv", "gradients/gradient_ratios.csv",
        *(f"gradients/{s}.{f}" for s in ("gradient_heatmaps", "gradient_ratio", "training_curves")
          for f in ("pdf", "png")),
        "alpha/runs.csv", "alpha/alpha_table.tex", "alpha/alpha_accuracy.pdf", "alpha/alpha_accuracy.png",
        "transformer/runs.csv", "transformer/transformer_table.tex",
        "transformer/transformer_accuracy.pdf", "transformer/transformer_accuracy.png",
        "lipschitz/probe.csv", "lipschitz/lipschitz_probe.pdf", "lipschitz/lipschitz_probe.png",
        "classic/runs.csv", "classic/classic_table.tex",
        "diagnose/runs.csv", "diagnose/layerstats.csv", "diagnose/gradnorms.csv",
        "diagnose/diagnose_table.tex",
        *(f"diagnose/{s}.{f}" for s in ("layerstats_by_layer", "layerstats_by_epoch", "alpha_layerstats")
          for f in ("pdf", "png")),
        "remedies/runs.csv", "remedies/layerstats.csv", "remedies/remedies_table.tex",
        "remedies/remedies_selection_table.tex",
        "remedies/remedies_paired_table.tex", "remedies/remedies_best_table.tex",
        *(f"remedies/{s}.{f}" for s in ("remedies_accuracy", "remedies_mad") for f in ("pdf", "png")),
    }
    written = {p.relative_to(published).as_posix() for p in published.rglob("*") if p.is_file()}
    assert written == expected
    for name in expected - {"summary.md"}:
        experiment, file = name.split("/")
        kind = {"tex": "tables", "pdf": "figures", "png": "figures"}.get(file.rsplit(".", 1)[1])
        if kind:
            assert (published / name).read_bytes() == (root / experiment / kind / file).read_bytes()


def test_runs_csv_holds_the_documented_columns_sorted(tree, published):
    _, records = tree
    for experiment in GRIDS:
        stored = pd.read_csv(published / experiment / "runs.csv")
        assert list(stored.columns) == RUNS_COLUMNS
        keys = RUNS_COLUMNS[:6]
        assert stored.equals(stored.sort_values(keys, ignore_index=True))
        expected = pd.DataFrame(
            [(r["dataset"], r["missing_rate"], r["model"], r["depth"], r["alpha"], r["seed"],
              r["status"], "accuracy", r["test_metric"] if r["status"] == "ok" else np.nan)
             for r in records[experiment]],
            columns=RUNS_COLUMNS,
        ).sort_values(keys, ignore_index=True)
        pd.testing.assert_frame_equal(stored, expected, check_dtype=False)


def test_gradient_ratios_and_probe_are_stored(tree, published):
    ratios = pd.read_csv(published / "gradients" / "gradient_ratios.csv")
    assert list(ratios.columns) == [*RUNS_COLUMNS[:6], "grad_ratio"]
    # synthetic_runs: GAT's attention-layer norms shrink 10× per layer, GAT-Lip's 2^(1/8)×.
    decay = {"gat": 10.0, "gat-lip": 2 ** (1 / 8)}
    expected = [decay[m] ** (d - 1) for m, d in zip(ratios["model"], ratios["depth"])]
    np.testing.assert_allclose(ratios["grad_ratio"], expected, rtol=1e-12)
    assert sorted(zip(ratios["model"], ratios["depth"])) == [
        ("gat", 2), ("gat", 3), ("gat-lip", 2), ("gat-lip", 3)]
    probe = pd.read_csv(published / "lipschitz" / "probe.csv")
    pd.testing.assert_frame_equal(
        probe, PROBE.sort_values(["model", "kind", "s"], ignore_index=True))


def test_summary_depth_cells_bold_and_best_depth(tree, published):
    records = tree[1]["depth"]
    tables = summary_tables(published)
    section = "depth: accuracy vs depth"
    for rate in (0, 100):
        rows = tables[section, f"Cora, {rate}% missing features"]
        assert [row["Layers"] for row in rows] == ["2", "4"]
        for row in rows:
            depth = int(row["Layers"])
            cells = {m: cell_of(records, missing_rate=rate, model=m, depth=depth) for m in ("gat", "gat-lip")}
            best = max(mean for _, mean in cells.values() if mean is not None)
            for model, (text, mean) in cells.items():
                assert unbold(row[MODELS[model]]) == (text, mean == best)
    (diverged_row,) = [r for r in tables[section, "Cora, 100% missing features"] if r["Layers"] == "4"]
    assert diverged_row["GAT"] == "diverged (1/2)"

    best_rows = tables[section, "Best depth per model"]
    assert [(r["Dataset"], r["Missing rate (%)"]) for r in best_rows] == [("Cora", "0"), ("Cora", "100")]
    for row in best_rows:
        rate = int(row["Missing rate (%)"])
        texts = {}
        for model in ("gat", "gat-lip"):
            candidates = [(mean, -d, text) for d in (2, 4)
                          for text, mean in [cell_of(records, missing_rate=rate, model=model, depth=d)]
                          if mean is not None]
            mean, minus_depth, text = max(candidates)
            texts[model] = (f"{text} at L={-minus_depth}", mean)
        best = max(mean for _, mean in texts.values())
        for model, (text, mean) in texts.items():
            assert unbold(row[MODELS[model]]) == (text, mean == best)


def test_summary_gradients_alpha_transformer_lipschitz_classic(tree, published):
    _, records = tree
    tables = summary_tables(published)
    ratio_rows = tables["gradients: gradient norm ratio across layers", "Cora"]
    assert ratio_rows == [
        {"Layers": "2", "GAT": "10.0 (n=1)", "GAT-Lip": f"{2 ** (1 / 8):.2f} (n=1)"},
        {"Layers": "3", "GAT": "100. (n=1)", "GAT-Lip": f"{2 ** (2 / 8):.2f} (n=1)"},
    ]

    alpha_rows = tables["alpha: sensitivity to the LipschitzNorm scale α", "Cora, GAT-Lip, 2 layers"]
    means = {a: cell_of(records["alpha"], alpha=a)[1] for a in (0.5, 1.0, 2.0)}
    ranking = sorted(means, key=means.get, reverse=True)
    assert alpha_rows == [
        {"α": f"{a:g}", "Test (%)": cell_of(records["alpha"], alpha=a)[0], "Rank": str(ranking.index(a) + 1)}
        for a in (0.5, 1.0, 2.0)
    ]
    summary = (published / "summary.md").read_text()
    assert f"α = 1 ranks {ranking.index(1.0) + 1} of 3." in summary

    gt_rows = tables["transformer: graph transformer with and without LipschitzNorm",
                     "Cora, 0% missing features"]
    assert [{k: unbold(v)[0] for k, v in row.items()} for row in gt_rows] == [
        {"Layers": str(d), "GT": cell_of(records["transformer"], model="gt", depth=d)[0],
         "GT-Lip": cell_of(records["transformer"], model="gt-lip", depth=d)[0]} for d in (2, 4)
    ]

    for kind in ("random", "tied"):
        assert tables["lipschitz: empirical Lipschitz constant", f"{kind} inputs"] == [
            {"Model": "GAT", "s = 1": "3.5", "s = 10": "35"},
            {"Model": "GAT-Lip", "s = 1": "2.25", "s = 10": "2.25"},
        ]

    assert tables["classic: classic GAT next to the published numbers", ""] == [
        {"Dataset": "Cora", "This pipeline": cell_of(records["classic"], dataset="cora")[0],
         "Published": "83.0 ± 0.7 (n=100)"},
        {"Dataset": "CiteSeer", "This pipeline": cell_of(records["classic"], dataset="citeseer")[0],
         "Published": "72.5 ± 0.7 (n=100)"},
    ]


def test_reduced_runs_render_the_tables_of_the_full_aggregate(tree, published):
    """Tables rendered from the small runs.csv equal those written from the full
    aggregate (the copies), byte for byte."""
    texts = regenerate(published)
    tex = {name for name in texts if name.endswith(".tex")}
    assert tex == {p.relative_to(published).as_posix() for p in published.rglob("*.tex")}
    for name in tex:
        assert texts[name] == (published / name).read_text(), name
    assert read_runs(published / "depth").attrs["settings"] == RUNS_COLUMNS[:6]


def test_bad_results_roots_name_the_path(tmp_path, tree):
    with pytest.raises(ValueError, match=f"results root {tmp_path / 'absent'} is not a folder"):
        publish(tmp_path / "absent", tmp_path / "out")
    (tmp_path / "empty" / "bench").mkdir(parents=True)
    with pytest.raises(ValueError, match=f"results root {tmp_path / 'empty'} holds no experiment folder"):
        publish(tmp_path / "empty", tmp_path / "out")
    with pytest.raises(ValueError, match="replacing it would delete the results"):
        publish(tree[0], tree[0].parent)
    assert not (tmp_path / "out").exists()


def test_incomplete_or_stale_trees_are_refused_and_the_previous_publish_kept(tree, tmp_path):
    root = tmp_path / "results"
    shutil.copytree(tree[0], root)
    out = tmp_path / "published"
    publish(root, out)
    before = (out / "summary.md").read_text()

    table = root / "depth" / "tables" / "depth_accuracy_table.tex"
    table.write_text(table.read_text().replace("(n=2)", "(n=3)", 1))
    with pytest.raises(ValueError, match="depth/depth_accuracy_table.tex under .* differ from the tables"):
        publish(root, out)
    table.unlink()
    with pytest.raises(ValueError, match=f"depth: missing {table}"):
        publish(root, out)
    assert (out / "summary.md").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["published", "results"]  # no temp left

    (out / "stray.txt").write_text("replaced by the next publish")
    shutil.rmtree(root / "depth")
    publish(root, out)
    assert not (out / "stray.txt").exists() and not (out / "depth").exists()
    assert "## depth" not in (out / "summary.md").read_text()


def test_cli_publish(tree, tmp_path, capsys):
    assert main(["publish", str(tree[0]), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == sorted(str(p) for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert str(tmp_path / "out" / "summary.md") in printed
    with pytest.raises(SystemExit) as exit_info:
        main(["publish", str(tmp_path / "absent"), "--out", str(tmp_path / "out2")])
    assert exit_info.value.code == 2
    assert f"lipnorm publish: error: results root {tmp_path / 'absent'} is not a folder" in capsys.readouterr().err


# --- diagnose ----------------------------------------------------------------------

DIAGNOSE_KEYS = ["dataset", "missing_rate", "model", "depth", "alpha", "feat_drop", "recipe",
                 "heads", "hidden", "epochs", "seed"]
DIAGNOSE_SECTION = "diagnose: why deep models fail (gradients, oversmoothing, attention saturation)"
STAT_HEADS = {"dirichlet_energy": "Dirichlet energy", "mean_average_distance": "MAD",
              "rayleigh_quotient": "Rayleigh quotient", "attention_entropy": "1 − attention entropy",
              "output_norm": "Output norm"}
SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def stats_epoch(record: dict) -> int:
    """The last epoch with layer statistics: the last epoch, or the one before the
    epoch a diverged run diverged at (synthetic_runs.write_run)."""
    return record["epochs"] - (1 if record["status"] == "ok" else 2)


def stat_text(value: float | None) -> str:
    """A diagnostic as summary.md prints it: 3 significant digits in [0.01, 1000), else
    `m.m × 10ᵉ`; `0` for 0 and `–` for none."""
    if value is None:
        return "–"
    if value == 0:
        return "0"
    if 0.01 <= abs(value) < 1000:
        return f"{value:.3g}"
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"{mantissa} × 10{str(int(exponent)).translate(SUPERSCRIPT)}"


def test_diagnose_runs_csv_and_small_aggregates(tree, published):
    records = tree[1]["diagnose"]
    folder = published / "diagnose"
    runs = pd.read_csv(folder / "runs.csv", float_precision="round_trip")
    assert list(runs.columns) == [*DIAGNOSE_KEYS, "status", "metric", "test_metric",
                                  "best_val_test", "final_train"]
    assert runs.equals(runs.sort_values(DIAGNOSE_KEYS, ignore_index=True))
    expected = pd.DataFrame(
        [(*(r[k] for k in DIAGNOSE_KEYS), r["status"], "accuracy",
          r["test_metric"] if r["status"] == "ok" else np.nan, r["test_metric"], r["final_train"])
         for r in records],
        columns=runs.columns,
    ).sort_values(DIAGNOSE_KEYS, ignore_index=True)
    pd.testing.assert_frame_equal(runs, expected, check_dtype=False)
    assert set(runs["recipe"]) == {"lipnorm", "official"}

    # layerstats.csv: the five metrics of each run's last layer at its last logged epoch.
    stats = pd.read_csv(folder / "layerstats.csv", float_precision="round_trip")
    assert list(stats.columns) == [*DIAGNOSE_KEYS, "epoch", "layer", "metric", "value"]
    assert len(stats) == len(records) * len(LAYER_METRICS)
    expected_rows = sorted(
        (tuple(r[k] for k in DIAGNOSE_KEYS), stats_epoch(r), r["depth"], metric,
         layer_stat(metric, layer=r["depth"], epoch=stats_epoch(r), **r))
        for r in records for metric in LAYER_METRICS
    )
    stored_rows = sorted(
        (tuple(row[:len(DIAGNOSE_KEYS)]), *row[len(DIAGNOSE_KEYS):])
        for row in stats.itertuples(index=False)
    )
    assert [row[:4] for row in stored_rows] == [row[:4] for row in expected_rows]
    np.testing.assert_allclose([row[4] for row in stored_rows],
                               [row[4] for row in expected_rows], rtol=1e-15)

    # gradnorms.csv: every attention layer's norm (group all) at the first epoch, 0.
    norms = pd.read_csv(folder / "gradnorms.csv", float_precision="round_trip")
    assert list(norms.columns) == [*DIAGNOSE_KEYS, "epoch", "layer", "kind", "group", "grad_norm"]
    assert (norms["epoch"] == 0).all() and (norms["kind"] == "attention").all()
    assert (norms["group"] == "all").all()
    assert len(norms) == sum(r["depth"] for r in records)
    expected_norms = sorted(
        (tuple(r[k] for k in DIAGNOSE_KEYS), layer, attention_grad_norm(r["model"], layer, 0))
        for r in records for layer in range(1, r["depth"] + 1)
    )
    stored_norms = sorted((tuple(row[:len(DIAGNOSE_KEYS)]), row.layer, row.grad_norm)
                          for row in norms.itertuples(index=False))
    assert [row[:2] for row in stored_norms] == [row[:2] for row in expected_norms]
    np.testing.assert_allclose([row[2] for row in stored_norms],
                               [row[2] for row in expected_norms], rtol=1e-15)

    # Small: a bounded size per run (layerstats) and per run and layer (gradnorms), i.e.
    # ~30 kB and ~95 kB for the preset's 69 runs of depths up to 30 (sum of depths ~1,100).
    assert (folder / "layerstats.csv").stat().st_size <= 600 * len(records)
    assert (folder / "gradnorms.csv").stat().st_size <= 130 * len(norms)
    aggregate = tree[0] / "diagnose" / "aggregate"
    for name in ("layerstats", "gradnorms"):
        assert (folder / f"{name}.csv").stat().st_size < (aggregate / f"{name}.csv").stat().st_size / 4


def diagnose_expected(records: list[dict], depth: int) -> list[dict[str, str]]:
    """summary.md's rows at `depth`, computed from the values the runs were written with."""
    def row(name: str, runs: list[dict]) -> dict:
        diverged = sum(r["status"] == "diverged" for r in runs)
        means = {
            metric: None if diverged else float(np.mean([
                layer_stat(metric, layer=depth, epoch=stats_epoch(r), **r) for r in runs]))
            for metric in STAT_HEADS
        }
        # The entropy is printed as 1 - entropy, as the figures draw it.
        stats = {
            head: means[metric] if means[metric] is None or metric != "attention_entropy"
            else 1.0 - means[metric]
            for metric, head in STAT_HEADS.items()
        }
        ratios = [attention_grad_norm(r["model"], 1, 0) / attention_grad_norm(r["model"], depth, 0)
                  for r in runs]
        return {
            "Model": name,
            "Feature dropout": f"{runs[0]['feat_drop']:g}",
            "Test, best val. (%)": cell_text([r["test_metric"] for r in runs], diverged),
            "Train, last epoch (%)": cell_text([r["final_train"] for r in runs], diverged),
            **{head: stat_text(value) for head, value in stats.items()},
            "Gradient ratio, first epoch": stat_text(
                None if diverged else float(np.exp(np.mean(np.log(ratios))))),
            "mean": None if diverged else float(np.mean([r["test_metric"] for r in runs])),
        }

    def where(**equal) -> list[dict]:
        return [r for r in records if r["depth"] == depth and all(r[k] == v for k, v in equal.items())]

    rows = [row(MODELS[model], where(model=model, feat_drop=drop, alpha=1.0, recipe="lipnorm"))
            for model in DIAGNOSE_GRID["model"] for drop in sorted(DIAGNOSE_GRID["feat_drop"], reverse=True)]
    best = max(r["mean"] for r in rows if r["mean"] is not None)
    for r in rows:
        if r.pop("mean") == best:
            r["Test, best val. (%)"] = f"**{r['Test, best val. (%)']}**"
    extra = [row(f"GAT-Lip, α = {a:g}", where(recipe="lipnorm", alpha=a))
             for a in sorted({r["alpha"] for r in where(recipe="lipnorm")} - {1.0})]
    extra += [row(f"GAT-Lip, authors' recipe ({r['heads']}×{r['hidden']}, dropout "
                  f"{r['feat_drop']:g}, {r['epochs']} epochs)", [r]) for r in where(recipe="official")]
    for r in extra:
        r.pop("mean")
    return rows + extra


def test_summary_diagnose_numbers(tree, published):
    records = tree[1]["diagnose"]
    tables = summary_tables(published)
    depths = sorted({r["depth"] for r in records})
    assert [sub for section, sub in tables if section == DIAGNOSE_SECTION] == [
        f"Cora, 0% missing features, {d} layers" for d in depths]
    for depth in depths:
        assert tables[DIAGNOSE_SECTION, f"Cora, 0% missing features, {depth} layers"] == \
            diagnose_expected(records, depth), depth
    # What the synthetic runs make visible: plain GAT's energy is exactly 0 from layer 5,
    # its deep gradient ratio is 10^5, and the cell with a diverged seed is not averaged.
    deep = {row["Model"] + " " + row["Feature dropout"]: row
            for row in tables[DIAGNOSE_SECTION, "Cora, 0% missing features, 6 layers"]}
    assert deep["GAT 0"]["Dirichlet energy"] == "0"
    assert deep["GAT 0"]["Gradient ratio, first epoch"] == "1.0 × 10⁵"
    model, depth, drop, _ = DIAGNOSE_DIVERGED
    assert depth == 6 and deep[f"{MODELS[model]} {drop:g}"]["MAD"] == "–"
    assert deep[f"{MODELS[model]} {drop:g}"]["Test, best val. (%)"] == "diverged (1/2)"
    summary = (published / "summary.md").read_text()
    assert "`diagnose/layerstats.csv`, `diagnose/gradnorms.csv`" in summary.splitlines()[2]
    assert "![alpha_layerstats](diagnose/alpha_layerstats.png)" in summary
    assert "[`diagnose_table.tex`](diagnose/diagnose_table.tex)" in summary


def test_diagnose_table_renders_from_the_stored_rows(tree, published):
    """The stored runs, layerstats and gradnorms hold every row diagnose_table reads."""
    texts = regenerate(published)
    assert texts["diagnose/diagnose_table.tex"] == \
        (tree[0] / "diagnose" / "tables" / "diagnose_table.tex").read_text()
    stored = read_stored(published / "diagnose")
    assert sorted(stored) == ["gradnorms", "layerstats", "runs"]
    assert stored["runs"]["run_dir"].is_unique
    assert stored["layerstats"]["run_dir"].isin(stored["runs"]["run_dir"]).all()


def test_diagnose_without_its_stored_aggregates_is_refused(published, tmp_path):
    edited = tmp_path / "results"
    shutil.copytree(published, edited)
    (edited / "diagnose" / "gradnorms.csv").unlink()
    with pytest.raises(ValueError, match="gradnorms.csv does not exist"):
        regenerate(edited)
    shutil.copyfile(published / "diagnose" / "gradnorms.csv", edited / "diagnose" / "gradnorms.csv")
    stats = pd.read_csv(edited / "diagnose" / "layerstats.csv")
    stats.loc[0, "seed"] = 7
    stats.to_csv(edited / "diagnose" / "layerstats.csv", index=False)
    orphan = r"layerstats.csv: 1 row \(the first on line 2\) of no run of .*runs.csv"
    with pytest.raises(ValueError, match=orphan):
        regenerate(edited)


# --- remedies ----------------------------------------------------------------------

REMEDIES_KEYS = ["dataset", "missing_rate", "model", "depth", "alpha", "architecture", "attention_norm",
                 "norm", "residual", "initial_residual", "dropedge", "heads", "hidden", "epochs", "seed"]
REMEDIES_SECTION = "remedies: LipschitzNorm among the published remedies for deep GNNs"


def remedies_expected_runs(records: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(
        [(*(r[k] for k in REMEDIES_KEYS), r["status"], "accuracy",
          r["test_metric"] if r["status"] == "ok" else np.nan, r["val_metric"], r["test_metric"])
         for r in records],
        columns=[*REMEDIES_KEYS, "status", "metric", "test_metric", "best_val_val", "best_val_test"],
    ).sort_values(REMEDIES_KEYS, ignore_index=True)


def test_remedies_runs_csv_holds_the_remedy_settings_and_both_accuracies(tree, published):
    stored = pd.read_csv(published / "remedies" / "runs.csv", float_precision="round_trip")
    pd.testing.assert_frame_equal(stored, remedies_expected_runs(tree[1]["remedies"]), check_dtype=False)


def test_summary_remedies_tables_are_the_tables_of_the_runs(tree, published):
    from lipnorm.results.tables.remedies import remedies_best, remedies_comparison, remedies_paired, remedies_selection

    records = tree[1]["remedies"]
    tables = summary_tables(published)
    runs = pd.DataFrame(records).assign(best_val_val=lambda r: r["val_metric"],
                                        best_val_test=lambda r: r["test_metric"])
    literature = "Beside the published numbers: literature's rule (optimistic: chosen on the test set)"
    text, bold = remedies_comparison(runs)
    rows = tables[REMEDIES_SECTION, literature]
    assert [row["GAT +"] for row in rows] == list(text.index)
    for row, (name, cells), marks in zip(rows, text.iterrows(), bold):
        for (dataset, source), cell, is_bold in zip(text.columns, cells, marks):
            assert row[f"{dataset}: {source}"] == (f"**{cell}**" if is_bold else cell)
    selection = tables[REMEDIES_SECTION, "LipschitzNorm's effect: our rule (chosen on the validation set)"]
    expected = remedies_selection(runs)
    assert [(r["Dataset"], r["Remedy"]) for r in selection] == list(expected.index)
    assert [[r[c] for c in expected.columns] for r in selection] == expected.values.tolist()
    best = tables[REMEDIES_SECTION, "The best configuration by validation"]
    expected = remedies_best(runs)
    assert [(r["Dataset"], r["Model"]) for r in best] == list(expected.index)
    assert [[r[c] for c in expected.columns] for r in best] == expected.values.tolist()
    paired = tables[REMEDIES_SECTION, "Paired difference GAT-Lip − GAT at every depth"]
    expected = remedies_paired(runs)
    assert [[r[f"{depth} layers"] for depth in expected.columns] for r in paired] == expected.values.tolist()
    summary = (published / "summary.md").read_text()
    assert "Cora, CiteSeer, 100% missing features, 8 heads × 8 hidden, up to 3 epochs, depths 2, 4;" in summary
    assert "![remedies_mad](remedies/remedies_mad.png)" in summary


def test_remedies_stores_the_rows_the_mad_figure_reads(tree, published):
    """layerstats.csv: the MAD of the hidden layers (no layer 0) of the runs at the deepest
    depth, at their last epoch; the MAD figure drawn from it equals the one drawn from the
    whole aggregate, line by line."""
    import matplotlib.pyplot as plt

    from lipnorm.results.figures.remedies import remedies_mad

    stats = pd.read_csv(published / "remedies" / "layerstats.csv", float_precision="round_trip")
    assert list(stats.columns) == [*REMEDIES_KEYS, "epoch", "layer", "metric", "value"]
    assert set(stats["metric"]) == {"mean_average_distance"} and stats["layer"].min() == 1
    assert set(stats["depth"]) == {4}
    deep = [r for r in tree[1]["remedies"] if r["depth"] == 4]
    assert len(stats) <= 4 * len(deep) and len(stats) >= 4 * sum(r["status"] == "ok" for r in deep)
    aggregate = tree[0] / "remedies" / "aggregate"
    figures = [remedies_mad(**read_stored(published / "remedies")),
               remedies_mad(pd.read_parquet(aggregate / "runs.parquet"), pd.read_parquet(aggregate / "layerstats.parquet"))]
    try:
        drawn = [[(line.get_xdata().tolist(), line.get_ydata().tolist()) for ax in fig.axes for line in ax.get_lines()]
                 for fig in figures]
        assert drawn[0] == drawn[1] and drawn[0]
    finally:
        for fig in figures:
            plt.close(fig)


@pytest.mark.parametrize("column", ["best_val_val", "best_val_test"])
def test_drift_check_catches_a_changed_remedies_number(published, tmp_path, column):
    edited = tmp_path / "results"
    shutil.copytree(published, edited)
    path = edited / "remedies" / "runs.csv"
    frame = pd.read_csv(path, float_precision="round_trip")
    # Every run of one cell, so that the cell's mean and, by validation, its depth move.
    cell = (frame["dataset"] == "cora") & (frame["attention_norm"] == "none") & (frame["norm"] == "none") \
        & (frame["dropedge"] == 0) & (frame["initial_residual"] == 0) & (frame["depth"] == 2)
    frame.loc[cell, column] = 0.99
    frame.to_csv(path, index=False)
    with pytest.raises(AssertionError, match=r"remedies/remedies_(selection_|paired_)?table.tex differs"):
        assert_regenerates(edited)


def test_remedies_runs_predating_the_newer_settings_publish_them_as_off(tree, tmp_path):
    """An aggregate without `initial_residual` and `dropedge` columns (runs of lipnorm
    train before they existed): runs.csv holds them as off, and the tables render."""
    older = [r for r in tree[1]["remedies"] if r["remedy"] in ("none", "pairnorm")]
    root = tmp_path / "results"
    aggregate = root / "remedies" / "aggregate"
    write_aggregate([r["run_dir"] for r in older], aggregate)
    runs = pd.read_parquet(aggregate / "runs.parquet")
    write_parquet(aggregate / "runs.parquet", runs.drop(columns=["initial_residual", "dropedge"]))
    write_tables("remedies", aggregate, root / "remedies" / "tables")
    for stem in FIGURES["remedies"]:
        for fmt in ("pdf", "png"):
            (root / "remedies" / "figures").mkdir(parents=True, exist_ok=True)
            (root / "remedies" / "figures" / f"{stem}.{fmt}").write_bytes(b"figure")
    publish(root, tmp_path / "out")
    stored = pd.read_csv(tmp_path / "out" / "remedies" / "runs.csv", float_precision="round_trip")
    pd.testing.assert_frame_equal(stored, remedies_expected_runs(older), check_dtype=False)
    assert_regenerates(tmp_path / "out")


# --- drift -------------------------------------------------------------------------

def published_folders(root: Path) -> list[Path]:
    """Folders holding experiment sub-folders with a stored aggregate."""
    found = {p.parent.parent for name in ("runs.csv", "probe.csv") for p in root.rglob(name)
             if p.parent.name in EXPERIMENTS}
    return sorted(found)


def assert_regenerates(folder: Path) -> None:
    """Every table and summary.md of a published folder equals its rendering from the
    stored aggregates by the current code."""
    texts = regenerate(folder)
    on_disk = {p.relative_to(folder).as_posix() for p in folder.rglob("*.tex")} | {"summary.md"}
    assert set(texts) == on_disk, f"{folder}: files without a rendering or missing"
    for name, text in texts.items():
        assert (folder / name).read_text() == text, (
            f"{folder / name} differs from its rendering from {folder}'s stored aggregates: "
            "the code changed the published numbers; publish again (`lipnorm publish`)"
        )


def test_drift_check_passes_on_a_fresh_publish_and_catches_a_changed_number(published, tmp_path):
    assert published_folders(published.parent) == [published]
    assert_regenerates(published)
    edited = tmp_path / "results"
    shutil.copytree(published, edited)
    runs = (edited / "classic" / "runs.csv").read_text().splitlines()
    value = runs[1].rsplit(",", 1)[1]
    runs[1] = runs[1][: -len(value)] + str(float(value) - 0.05)
    (edited / "classic" / "runs.csv").write_text("\n".join(runs) + "\n")
    with pytest.raises(AssertionError, match="classic_table.tex differs"):
        assert_regenerates(edited)


@pytest.mark.parametrize("file, column", [("layerstats.csv", "value"), ("gradnorms.csv", "grad_norm"),
                                          ("runs.csv", "best_val_test")])
def test_drift_check_catches_a_changed_diagnose_number(published, tmp_path, file, column):
    edited = tmp_path / "results"
    shutil.copytree(published, edited)
    path = edited / "diagnose" / file
    frame = pd.read_csv(path, float_precision="round_trip")
    ok = frame.index[frame["depth"] == 2][0]  # a run whose cells are averaged
    if file == "gradnorms.csv":  # the deepest layer: it holds the min
        ok = frame.index[(frame["depth"] == 2) & (frame["layer"] == 2)][0]
    frame.loc[ok, column] = frame.loc[ok, column] * 0.5
    frame.to_csv(path, index=False)
    with pytest.raises(AssertionError, match="diagnose_table.tex differs"):
        assert_regenerates(edited)


def test_drift_check_covers_every_published_folder(tree, published, tmp_path):
    """docs/results/ holds one folder per publish (default/, deep/, diagnose/, ...): the
    drift test finds each, e.g. a diagnose-only publish of the preset's results root."""
    root = tmp_path / "results" / "diagnose"
    shutil.copytree(tree[0] / "diagnose", root / "diagnose")
    docs = tmp_path / "docs" / "results"
    publish(root, docs / "diagnose")
    shutil.copytree(published, docs / "default")
    assert published_folders(docs) == [docs / "default", docs / "diagnose"]
    for folder in published_folders(docs):
        assert_regenerates(folder)
    assert "## depth" not in (docs / "diagnose" / "summary.md").read_text()


def test_published_results_in_docs_match_the_code():
    """The drift test: docs/results/ must hold published results, and each published
    folder must regenerate byte for byte."""
    folders = published_folders(REPO / "docs" / "results") if (REPO / "docs" / "results").is_dir() else []
    if not folders:
        pytest.fail(
            f"{REPO / 'docs' / 'results'} holds no published results folder (experiment folders "
            "with runs.csv or probe.csv): run `lipnorm publish results --out docs/results` "
            "and commit it"
        )
    for folder in folders:
        assert_regenerates(folder)


def test_the_environment_lists_what_ran_the_kernels(tmp_path):
    """Runs that recorded their compiled kernels (`summary.json` `kernels`) publish one
    `environment.csv` row per distinct CPU, build and paths, with its count of runs; runs
    that predate the record publish none."""
    from lipnorm.results.aggregate import aggregate_runs
    from lipnorm.results.publish import write_environment
    from tests.synthetic_runs import write_run

    build = {"mode": "auto", "cpu": "AMD EPYC", "machine": "x86_64", "compiler": "/usr/bin/cc",
             "compiler_version": "cc 12.2.0", "flags": ["-O3", "-march=native"], "target": "-march=znver3",
             "library": "/home/someone/.cache/lipnorm/kernels/kernels-0.so"}
    records = [
        {**build, "paths": {"gat_attention": ["compiled"], "dgn": ["compiled"]}},
        {**build, "paths": {"gat_attention": ["compiled"], "dgn": ["compiled"]}, "library": "/elsewhere/kernels-0.so"},
        {"mode": "off", "cpu": "Intel Xeon", "machine": "x86_64", "paths": {"gat_attention": ["dgl"], "dgn": ["torch"]}},
    ]
    run_dirs = []
    for seed, record in enumerate([*records, None]):
        run_dir = tmp_path / "runs" / f"s{seed}"
        write_run(run_dir, test_metric=0.5, seed=seed)
        summary = json.loads((run_dir / "summary.json").read_text())
        if record is not None:
            summary["kernels"] = record
        (run_dir / "summary.json").write_text(json.dumps(summary))
        run_dirs.append(run_dir)
    runs = aggregate_runs(run_dirs)["runs"]
    path = write_environment(runs, tmp_path)
    table = pd.read_csv(path, keep_default_na=False)
    assert "kernels_library" not in table.columns  # machine-local
    assert sorted(table["runs"]) == [1, 2]
    compiled = table[table["kernels_cpu"] == "AMD EPYC"].iloc[0]
    assert compiled["runs"] == 2 and compiled["kernels_paths_gat_attention"] == '["compiled"]'
    assert compiled["kernels_flags"] == '["-O3", "-march=native"]' and compiled["kernels_target"] == "-march=znver3"
    off = table[table["kernels_cpu"] == "Intel Xeon"].iloc[0]
    assert off["kernels_mode"] == "off" and off["kernels_paths_dgn"] == '["torch"]' and off["kernels_compiler"] == ""
    assert write_environment(aggregate_runs(run_dirs[3:])["runs"], tmp_path / "none") is None
