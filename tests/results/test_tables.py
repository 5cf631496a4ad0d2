"""`lipnorm tables`: booktabs tables of synthetic runs, checked cell by cell against
statistics computed here with numpy from the values the runs were written with."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest
from tests.system_deps import missing_packages_message
from tests.synthetic_runs import DIAGNOSE_ALPHAS, layer_stat, write_diagnose, write_grid, write_remedies

from lipnorm.results.aggregate import aggregate_runs, load_table, write_aggregate
from lipnorm.results.tables import TABLES, write_tables
from lipnorm.results.tables.accuracy import classic_table, missing_features_table
from lipnorm.results.tables.diagnose import diagnose_table

MODELS = {"gat": "GAT", "gat-lip": "GAT-Lip", "gt": "GT", "gt-lip": "GT-Lip"}
DATASETS = {"cora": "Cora", "citeseer": "CiteSeer", "csbm": "CSBM"}
DEPTH_GRID = {
    "missing_rate": [0, 100],
    "dataset": ["cora", "citeseer"],
    "model": ["gat", "gat-lip"],
    "depth": [2, 4],
}
DIVERGED = (0, "cora", "gat", 4, 1)  # the grid values, then the seed
SINGLE_SEED = (100, "citeseer", "gat-lip", 4)


def parse_tabular(tex: str) -> tuple[list[list[str]], list[list[str]]]:
    """(header rows, body rows) of a booktabs tabular, cells stripped; the body's
    blank (sparsified) leading index cells are filled from the row above."""
    assert tex.startswith("\\begin{tabular}{") and tex.rstrip().endswith("\\end{tabular}")
    head, rest = tex.split("\\toprule", 1)[1].split("\\midrule", 1)
    body = rest.split("\\bottomrule", 1)[0]

    def rows(text):
        return [[c.strip() for c in r.split("&")] for r in text.split("\\\\") if r.strip()]

    body_rows = rows(body)
    for previous, row in zip(body_rows, body_rows[1:]):
        for i, cell in enumerate(row):
            if cell:
                break
            row[i] = previous[i]
    return rows(head), body_rows


def cell(values: list[float], diverged: int = 0) -> str:
    """The expected text of a cell of test metrics (fractions)."""
    n = len(values)
    if diverged:
        return f"diverged ({diverged}/{n})"
    scores = np.asarray(values) * 100
    if n == 1:
        return f"{scores.mean():.1f} (n=1)"
    return f"{scores.mean():.1f} $\\pm$ {np.std(scores, ddof=1):.1f} (n={n})"


def unbold(text: str) -> tuple[str, bool]:
    if text.startswith("\\textbf{") and text.endswith("}"):
        return text[len("\\textbf{"):-1], True
    return text, False


def cell_stats(records, **equal):
    """(text, mean or None when a seed diverged) of the runs matching `equal`."""
    runs = [r for r in records if all(r[k] == v for k, v in equal.items())]
    diverged = sum(r["status"] == "diverged" for r in runs)
    values = [r["test_metric"] for r in runs]
    return cell(values, diverged), None if diverged else float(np.mean(values)) * 100


def aggregate(records, tmp_path_factory, name):
    out = tmp_path_factory.mktemp(name)
    write_aggregate([r["run_dir"] for r in records], out)
    return out


@pytest.fixture(scope="module")
def depth(tmp_path_factory):
    records = write_grid(tmp_path_factory.mktemp("depth_runs"), DEPTH_GRID,
                         diverged={DIVERGED}, single_seed={SINGLE_SEED})
    out = tmp_path_factory.mktemp("depth_tables")
    written = write_tables("depth", aggregate(records, tmp_path_factory, "depth_agg"), out)
    return records, written


def test_depth_writes_its_stems(depth):
    _, written = depth
    assert [p.name for p in written] == [f"{stem}.tex" for stem in TABLES["depth"]]


def test_depth_table_cells_bold_and_layout(depth):
    records, written = depth
    head, body = parse_tabular(written[0].read_text())
    assert head == [["", "", "Layers", "2", "4"], ["Missing rate (\\%)", "Dataset", "Model", "", ""]]
    expected_rows, expected_means = [], []
    for rate in (0, 100):
        for dataset in ("cora", "citeseer"):
            for model in ("gat", "gat-lip"):
                stats = [cell_stats(records, missing_rate=rate, dataset=dataset, model=model,
                                    depth=d) for d in (2, 4)]
                expected_rows.append([str(rate), DATASETS[dataset], MODELS[model]] + [s[0] for s in stats])
                expected_means.append([np.nan if s[1] is None else s[1] for s in stats])
    texts = [[unbold(c)[0] for c in row] for row in body]
    assert texts == expected_rows
    # Bold: the best model per depth inside each (missing rate, dataset) block of 2 rows.
    means = np.array(expected_means)
    bold = np.array([[unbold(c)[1] for c in row[3:]] for row in body])
    for block in range(0, len(means), 2):
        block_means = means[block:block + 2]
        best = np.nanmax(block_means, axis=0)
        assert (bold[block:block + 2] == (block_means == best)).all()
    assert bold.sum() == 4 * 2  # one per block and depth (a diverged cell is never bold)


def test_depth_table_marks_diverged_and_single_seed_cells(depth):
    _, written = depth
    _, body = parse_tabular(written[0].read_text())
    rows = {tuple(r[:3]): r[3:] for r in body}
    assert rows[("0", "Cora", "GAT")][1] == "diverged (1/3)"
    assert unbold(rows[("100", "CiteSeer", "GAT-Lip")][1])[0].endswith("(n=1)")
    assert "$\\pm$" not in rows[("100", "CiteSeer", "GAT-Lip")][1]


def test_missing_features_table_best_depth_and_bold(depth):
    records, written = depth
    head, body = parse_tabular(written[1].read_text())
    assert head == [
        ["", "Dataset", "\\multicolumn{2}{c}{Cora}", "\\multicolumn{2}{c}{CiteSeer}"],
        ["", "", "Acc", "\\#L", "Acc", "\\#L"],
        ["Missing rate (\\%)", "Model", "", "", "", ""],
    ]
    expected, means = [], []
    for rate in (0, 100):
        for model in ("gat", "gat-lip"):
            row, row_means = [str(rate), MODELS[model]], []
            for dataset in ("cora", "citeseer"):
                candidates = [
                    (cell_stats(records, missing_rate=rate, dataset=dataset, model=model, depth=d), d)
                    for d in (2, 4)
                ]
                (text, mean), best_depth = max(
                    ((s, d) for s, d in candidates if s[1] is not None), key=lambda c: c[0][1]
                )
                row += [text, str(best_depth)]
                row_means.append(mean)
            expected.append(row)
            means.append(row_means)
    assert [[unbold(c)[0] for c in row] for row in body] == expected
    means = np.array(means)
    for block in (0, 2):
        best = means[block:block + 2].max(axis=0)
        for i in (0, 1):
            acc_bold = [unbold(body[block + i][c])[1] for c in (2, 4)]
            assert acc_bold == list(means[block + i] == best)
            assert not any(unbold(body[block + i][c])[1] for c in (3, 5))  # #L never bold


def test_missing_features_table_of_a_model_diverged_at_every_depth(tmp_path):
    records = write_grid(tmp_path, {"model": ["gat", "gat-lip"], "depth": [2, 4]},
                         diverged={("gat", 2, 0), ("gat", 4, 1)})
    text, bold = missing_features_table(aggregate_runs([r["run_dir"] for r in records])["runs"])
    assert text.loc[(0, "GAT")].tolist() == ["diverged (2/6)", "--"]
    lip_means = {d: cell_stats(records, model="gat-lip", depth=d) for d in (2, 4)}
    best_depth = max(lip_means, key=lambda d: lip_means[d][1])
    assert text.loc[(0, "GAT-Lip")].tolist() == [lip_means[best_depth][0], str(best_depth)]
    assert bold.tolist() == [[False, False], [True, False]]


def test_classic_table_needs_classic_runs(tmp_path):
    records = write_grid(tmp_path, {"model": ["gat"]}, seeds=(0,))
    with pytest.raises(ValueError, match=r"no runs of model 'gat-classic' \(models: \['gat'\]\)"):
        classic_table(aggregate_runs([r["run_dir"] for r in records])["runs"])


def test_alpha_table_bolds_the_best_alpha_per_row(tmp_path_factory):
    records = write_grid(tmp_path_factory.mktemp("alpha_runs"),
                         {"depth": [2, 4], "alpha": [0.5, 1.0, 10.0]}, model="gat-lip")
    (path,) = write_tables("alpha", aggregate(records, tmp_path_factory, "alpha_agg"),
                           tmp_path_factory.mktemp("alpha_tables"))
    head, body = parse_tabular(path.read_text())
    assert head == [["", "", "$\\alpha$", "0.5", "1", "10"], ["Dataset", "Model", "Layers", "", "", ""]]
    for row, depth in zip(body, (2, 4)):
        stats = [cell_stats(records, depth=depth, alpha=a) for a in (0.5, 1.0, 10.0)]
        assert row[:3] == ["Cora", "GAT-Lip", str(depth)]
        assert [unbold(c)[0] for c in row[3:]] == [s[0] for s in stats]
        best = int(np.argmax([s[1] for s in stats]))
        assert [unbold(c)[1] for c in row[3:]] == [i == best for i in range(3)]


def test_classic_table_sits_beside_the_published_numbers(tmp_path_factory):
    records = write_grid(tmp_path_factory.mktemp("classic_runs"),
                         {"dataset": ["citeseer", "cora", "csbm"]}, seeds=range(5),
                         diverged={("csbm", 3)}, model="gat-classic")
    (path,) = write_tables("classic", aggregate(records, tmp_path_factory, "classic_agg"),
                           tmp_path_factory.mktemp("classic_tables"))
    head, body = parse_tabular(path.read_text())
    assert head == [["", "This pipeline", "Published"], ["Dataset", "", ""]]
    assert body == [
        ["Cora", cell_stats(records, dataset="cora")[0], "83.0 $\\pm$ 0.7 (n=100)"],
        ["CiteSeer", cell_stats(records, dataset="citeseer")[0], "72.5 $\\pm$ 0.7 (n=100)"],
        ["CSBM", "diverged (1/5)", "--"],
    ]


def test_transformer_table_compares_gt_and_gt_lip(tmp_path_factory):
    records = write_grid(tmp_path_factory.mktemp("gt_runs"),
                         {"model": ["gt-lip", "gt"], "depth": [2, 4]})
    (path,) = write_tables("transformer", aggregate(records, tmp_path_factory, "gt_agg"),
                           tmp_path_factory.mktemp("gt_tables"))
    _, body = parse_tabular(path.read_text())
    assert [row[:3] for row in body] == [["0", "Cora", "GT"], ["0", "Cora", "GT-Lip"]]
    for row, model in zip(body, ("gt", "gt-lip")):
        assert [unbold(c)[0] for c in row[3:]] == [
            cell_stats(records, model=model, depth=d)[0] for d in (2, 4)
        ]


def test_experiments_without_tables_write_nothing_and_unknown_ones_fail(tmp_path):
    assert write_tables("gradients", tmp_path / "absent", tmp_path / "out") == []
    with pytest.raises(ValueError, match="unknown experiment 'width'; known: depth, gradients"):
        write_tables("width", tmp_path, tmp_path)
    with pytest.raises(ValueError, match="runs.parquet does not exist"):
        write_tables("depth", tmp_path / "absent", tmp_path / "out")


def test_tables_compile_with_pdflatex(depth, diagnose, tmp_path):
    missing = missing_packages_message("texlive-latex-base", "texlive-latex-recommended")
    if missing:
        pytest.fail(missing)
    records = write_remedies(tmp_path / "remedies")
    write_aggregate([r["run_dir"] for r in records], tmp_path / "remedies-aggregate")
    remedies = write_tables("remedies", tmp_path / "remedies-aggregate", tmp_path / "remedies-tables")
    written = depth[1] + [diagnose[2]] + remedies  # the diagnose table's row labels are LaTeX
    inputs = "\n".join(f"\\input{{{p}}}\\par" for p in written)
    document = tmp_path / "doc.tex"
    document.write_text(
        "\\documentclass{article}\n\\usepackage{booktabs}\n\\begin{document}\n"
        f"{inputs}\n\\end{{document}}\n"
    )
    result = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", document.name],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout[-2000:]
    assert (tmp_path / "doc.pdf").stat().st_size > 0



@pytest.mark.parametrize("module", ["lipnorm.results.tables", "lipnorm.results.publish", "lipnorm.bench"])
def test_tables_and_publishing_load_no_plotting_library(module):
    """Writing a LaTeX table or publishing results needs no matplotlib or seaborn (the
    analysis they share with the figures lives in lipnorm.results.analysis)."""
    import os
    import sys
    from pathlib import Path

    import lipnorm

    source = str(Path(lipnorm.__file__).parents[1])  # this checkout's src/, as imported here
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([source, os.environ.get("PYTHONPATH", "")])}
    probe = (f"import sys, {module}; print(sorted({{name.split('.')[0] for name in sys.modules}}"
             " & {'matplotlib', 'seaborn'}))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_markdown_writes_the_latex_cells_as_plain_text():
    import pandas as pd

    from lipnorm.results.tables.markdown import markdown

    text = pd.DataFrame({"A": ["83.0 $\\pm$ 0.7 (n=3)", "--"],
                         "B": ["$1.2 \\times 10^{-7}$", "diverged (1/3)"]},
                        index=pd.Index(["x", "y"], name="Row"))
    bold = np.array([[True, False], [False, True]])
    assert markdown(text, bold, index=True) == [
        "| Row | A | B |", "|---|---|---|",
        "| x | **83.0 ± 0.7 (n=3)** | 1.2 × 10⁻⁷ |", "| y | – | **diverged (1/3)** |"]
    assert markdown(text)[2] == "| 83.0 ± 0.7 (n=3) | 1.2 × 10⁻⁷ |"

# --- diagnose -----------------------------------------------------------------------

DIAGNOSE_HEAD = [
    ["", "", "", "\\multicolumn{2}{c}{Accuracy (\\%)}", "\\multicolumn{3}{c}{Last layer, last epoch}",
     "Gradients, first epoch"],
    ["", "", "", "Test (best val.)", "Train (last epoch)", "Dirichlet energy", "MAD",
     "1 - attention entropy", "Max/min layer norm"],
    ["Layers", "Model", "Feature dropout", "", "", "", "", "", ""],
]
DIAGNOSE_METRICS = ("dirichlet_energy", "mean_average_distance", "attention_entropy")
SCIENTIFIC = re.compile(r"^\$(-?\d\.\d) \\times 10\^\{(-?\d+)\}\$$")


def number_of(text: str) -> float:
    """The value a diagnostic cell prints (plain or `$m \\times 10^{e}$`)."""
    match = SCIENTIFIC.match(text)
    return float(match[1]) * 10.0 ** int(match[2]) if match else float(text)


def assert_number_cell(text: str, expected: float) -> None:
    """Scientific notation (2 significant digits) below 0.01 or from 1000 on, else 3
    significant digits; 0 prints as 0."""
    if expected == 0:
        assert text == "0"
        return
    scientific = not 0.01 <= abs(expected) < 1000
    assert bool(SCIENTIFIC.match(text)) == scientific, text
    assert number_of(text) == pytest.approx(expected, rel=0.05 if scientific else 5e-3), text


@pytest.fixture(scope="module")
def diagnose(tmp_path_factory):
    records = write_diagnose(tmp_path_factory.mktemp("diagnose_runs"))
    agg = aggregate(records, tmp_path_factory, "diagnose_agg")
    (path,) = write_tables("diagnose", agg, tmp_path_factory.mktemp("diagnose_tables"))
    return records, agg, path


def expected_diagnose_rows(records):
    """(label, dropout, runs, in the grid) per body row, in the table's order."""
    rows = []
    for depth in (2, 6):
        for model, name in (("gat", "GAT"), ("gat-lip", "GAT-Lip")):
            for fd in (0.6, 0.0):
                runs = [r for r in records if r.get("recipe") == "lipnorm" and r["alpha"] == 1
                        and (r["model"], r["depth"], r["feat_drop"]) == (model, depth, fd)]
                rows.append((str(depth), name, f"{fd:g}", runs, True))
        if depth == 6:
            for alpha in DIAGNOSE_ALPHAS:
                runs = [r for r in records if r["alpha"] == alpha]
                rows.append(("6", f"GAT-Lip, $\\alpha={alpha:g}$", "0", runs, False))
            runs = [r for r in records if r.get("recipe") == "official"]
            rows.append(("6", "GAT-Lip (authors' recipe, 8$\\times$64, 2 epochs)", "0.6", runs, False))
    return rows


def test_diagnose_table_cells_equal_the_synthetic_records(diagnose):
    records, _, path = diagnose
    head, body = parse_tabular(path.read_text())
    assert head == DIAGNOSE_HEAD
    expected = expected_diagnose_rows(records)
    assert [row[:3] for row in body] == [list(e[:3]) for e in expected]
    for row, (depth, _, _, runs, _) in zip(body, expected):
        diverged = sum(r["status"] == "diverged" for r in runs)
        assert unbold(row[3])[0] == cell([r["test_metric"] for r in runs], diverged)
        assert row[4] == cell([r["final_train"] for r in runs], diverged)
        if diverged:
            assert row[5:] == ["--"] * 4
            continue
        depth = int(depth)
        for text, metric in zip(row[5:8], DIAGNOSE_METRICS):
            # The last layer at each run's last epoch (the authors' recipe ran 2 epochs).
            values = [layer_stat(metric, **{**r, "layer": depth, "epoch": r["epochs"] - 1})
                      for r in runs]
            mean = float(np.mean(values))
            assert_number_cell(text, 1.0 - mean if metric == "attention_entropy" else mean)
        # Synthetic gradient norms: attention layer l has c(epoch) * decay**-l.
        decay = 10.0 if runs[0]["model"] == "gat" else 2.0 ** (1 / 8)
        assert_number_cell(row[8], decay ** (depth - 1))
    by_label = {tuple(r[:3]): r for r in body}
    assert by_label[("6", "GAT", "0")][5] == "0"  # an energy of exactly 0
    assert by_label[("6", "GAT", "0")][8] == "$1.0 \\times 10^{5}$"
    assert by_label[("6", "GAT", "0.6")][3] == "diverged (1/2)"


def test_diagnose_table_bolds_the_best_grid_accuracy_per_depth(diagnose):
    records, _, path = diagnose
    _, body = parse_tabular(path.read_text())
    expected = expected_diagnose_rows(records)
    means = [np.nan if any(r["status"] == "diverged" for r in runs) or not grid
             else np.mean([r["test_metric"] for r in runs]) for *_, runs, grid in expected]
    bold = [unbold(row[3])[1] for row in body]
    for depth in ("2", "6"):
        here = [i for i, e in enumerate(expected) if e[0] == depth]
        best = np.nanmax([means[i] for i in here])
        assert [bold[i] for i in here] == [means[i] == best for i in here]
    assert sum(bold) == 2
    assert not any(unbold(c)[1] for row in body for c in row[4:])  # accuracy of the test only


def test_diagnose_table_without_a_recipe_column_treats_every_run_as_this_pipelines(diagnose):
    records, agg, _ = diagnose
    runs, stats, grads = (load_table(agg, name) for name in ("runs", "layerstats", "gradnorms"))
    older = runs.loc[runs["recipe"] == "lipnorm"].drop(columns="recipe")
    text, _ = diagnose_table(older, stats, grads)
    labels = [(str(d), m, f"{fd:g}") for d, m, fd in text.index]
    assert labels == [tuple(e[:3]) for e in expected_diagnose_rows(records)[:-1]]


def test_diagnose_table_needs_layerstats_and_names_runs_without_them(diagnose, tmp_path):
    records, agg, _ = diagnose
    partial = tmp_path / "aggregate"
    partial.mkdir()
    for name in ("runs", "gradnorms"):
        shutil.copyfile(agg / f"{name}.parquet", partial / f"{name}.parquet")
    with pytest.raises(ValueError,
                       match="layerstats.parquet does not exist; `lipnorm aggregate --out-dir"):
        write_tables("diagnose", partial, tmp_path / "out")
    stats = load_table(agg, "layerstats")
    lost = records[0]["run_dir"]
    with pytest.raises(ValueError, match=re.escape(f"last layer for runs ['{lost}']")):
        diagnose_table(load_table(agg, "runs"), stats.loc[stats["run_dir"] != lost],
                       load_table(agg, "gradnorms"))
