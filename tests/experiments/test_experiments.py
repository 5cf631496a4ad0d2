"""The registry of experiments (`lipnorm.experiments`): its conventions, lipnorm's own
eight, and an experiment registered in one plugin module
(`examples/plugins/gap_experiment.py`) reaching the workflow schema, a dry run,
aggregation, its table, its figure and the published summary, with no other edit.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import yaml
from tests.synthetic_runs import write_grid

from lipnorm import experiments, grid, registry, yaml_numbers
from lipnorm.registry import plugins
from lipnorm.results.aggregate import write_aggregate
from lipnorm.cli import build_parser, main
from lipnorm.experiments import Output, register_experiment, unregister_experiment
from lipnorm.results.publish import publish, regenerate

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
GAP = REPO / "examples" / "plugins" / "gap_experiment.py"
BIN = Path(sys.executable).parent
BUILTIN = ("depth", "gradients", "alpha", "transformer", "lipschitz", "classic", "diagnose", "remedies")


# --- the registry's conventions ------------------------------------------------------


def register_toy(name="toy", **overrides):
    settings = {"title": "a toy", "section": "lipnorm.results.sections:depth_section",
                "tables": (Output("toy_table", "lipnorm.results.tables.accuracy:depth_table"),), **overrides}
    return register_experiment(name, **settings)


def test_lipnorms_experiments_are_registered_in_the_order_of_the_summary():
    assert experiments.names() == BUILTIN
    assert experiments.experiment("diagnose").tables[0].inputs == ("runs", "layerstats", "gradnorms")
    assert [e for e in BUILTIN if not experiments.experiment(e).trains] == ["lipschitz"]
    assert experiments.experiment("lipschitz").aggregate_tables == ("probe",)


def test_an_entry_is_removed_again_and_its_stems_are_free():
    entry = register_toy()
    try:
        assert experiments.names()[-1] == "toy" and experiments.tables()["toy"] == ["toy_table"]
        assert experiments.experiment("toy") is entry
    finally:
        unregister_experiment("toy")
    assert "toy" not in experiments.names()
    with pytest.raises(ValueError, match="no experiment 'toy' is registered"):
        unregister_experiment("toy")


@pytest.mark.parametrize("name, overrides, message", [
    ("depth", {}, "experiment 'depth' is registered already"),
    ("Toy", {}, "experiment name 'Toy' must be a non-empty lower-case string"),
    ("toy", {"tables": (Output("depth_accuracy_table", "lipnorm.results.tables.accuracy:depth_table"),)},
     "experiment 'toy': stem 'depth_accuracy_table' is taken by experiment 'depth'"),
    ("toy", {"figures": (Output("toy_table", "lipnorm.results.figures.accuracy:accuracy_vs_depth"),)},
     "experiment 'toy': stem 'toy_table' is taken by experiment 'toy'"),
    ("toy", {"tables": (Output("Toy table", "lipnorm.results.tables.accuracy:depth_table"),)},
     "experiment 'toy': stem 'Toy table' must be lower-case letters, digits and '_'"),
    ("toy", {"tables": ("toy_table",)}, "experiment 'toy': each of tables must be a lipnorm.experiments.Output"),
    ("toy", {"section": "publish.depth_section"},
     "experiment 'toy': section must be a callable or a 'module:attribute' string"),
    ("toy", {"tables": (Output("toy_table", "depth_table"),)},
     "experiment 'toy': the builder of 'toy_table' must be a callable or a 'module:attribute' string"),
    ("toy", {"tables": (Output("toy_table", "lipnorm.results.tables.accuracy:depth_table", ()),)},
     "experiment 'toy': 'toy_table' needs the names of its input tables"),
    ("toy", {"tables": (Output("toy_table", "lipnorm.results.tables.accuracy:depth_table", caption="no/such.rst"),)},
     "experiment 'toy': the caption of 'toy_table' must be the path of an existing file, got 'no/such.rst'"),
    ("toy", {"trains": False}, "experiment 'toy': an experiment without training runs .* names its aggregate_tables"),
    ("toy", {"aggregate_tables": ("probe",)}, "names its aggregate_tables, and only it"),
    ("toy", {"run_keys": ("dataset", "model")}, "experiment 'toy': run_keys must end with 'seed' and begin run_columns"),
    ("toy", {"title": " "}, "experiment 'toy': title must be a non-empty string"),
])
def test_a_bad_entry_is_refused_naming_the_experiment_and_what(name, overrides, message):
    with pytest.raises(ValueError, match=message):
        register_toy(name, **overrides)
    assert experiments.names() == BUILTIN


def test_an_unknown_experiment_is_named_with_the_known_ones():
    with pytest.raises(ValueError, match="unknown experiment 'width'; known: depth, gradients, alpha, "
                                         "transformer, lipschitz, classic, diagnose, remedies$"):
        experiments.experiment("width")


def test_the_workflow_schema_lists_the_registered_experiments_with_their_config():
    schema = yaml.safe_load(SCHEMA.read_text())
    assert schema["properties"]["experiments"]["properties"] == {}  # the file lists none
    listed = grid.schema_with_registry(schema)["properties"]["experiments"]["properties"]
    assert list(listed) == list(BUILTIN)
    assert listed == {name: experiments.experiment(name).config for name in BUILTIN}
    assert listed["depth"] == {"$ref": "#/$defs/grid_experiment"}
    assert listed["lipschitz"] == {"$ref": "#/$defs/probe_experiment"}
    assert listed["remedies"]["oneOf"] == [{"$ref": "#/$defs/grid_experiment"}, {"$ref": "#/$defs/armed_experiment"}]


def test_the_cli_help_names_every_experiment():
    for command in ("tables", "plots"):
        subparser = build_parser()._subparsers._group_actions[0].choices[command]
        help_text = " ".join(subparser.format_help().split())
        assert f"{', '.join(BUILTIN)} (or a plugin's; lipnorm.experiments)" in help_text


def test_importing_the_registry_loads_no_torch_numpy_or_pandas():
    code = ("import sys, lipnorm.experiments; "
            "print(sorted({'torch', 'dgl', 'numpy', 'pandas', 'matplotlib'} & set(sys.modules)))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.strip() == "[]"


# --- an experiment of a plugin, end to end -------------------------------------------------


@pytest.fixture(scope="module")
def gap():
    """The example plugin's `gap` experiment, registered for this module's tests."""
    registry.load_plugin(str(GAP))
    yield experiments.experiment("gap")
    unregister_experiment("gap")
    plugins._LOADED_PLUGINS.pop(str(GAP.resolve()))


GAP_GRID = {"model": ["gat", "gat-lip"], "depth": [2, 4]}
GAP_DIVERGED = ("gat", 4, 1)  # model, depth, seed


@pytest.fixture(scope="module")
def gap_results(gap, tmp_path_factory):
    """(results root with `gap/aggregate/`, the run records): synthetic runs of the grid."""
    records = write_grid(tmp_path_factory.mktemp("gap_runs"), GAP_GRID, seeds=(0, 1), diverged={GAP_DIVERGED})
    root = tmp_path_factory.mktemp("results")
    write_aggregate([r["run_dir"] for r in records], root / "gap" / "aggregate")
    return root, records


@pytest.fixture(scope="module")
def gap_written(gap_results):
    """`gap_results` with the experiment's table and figure written, as the workflow does."""
    from lipnorm.results.figures import write_figures
    from lipnorm.results.tables import write_tables

    root, records = gap_results
    write_tables("gap", root / "gap" / "aggregate", root / "gap" / "tables")
    write_figures("gap", root / "gap" / "aggregate", root / "gap" / "figures")
    return root, records


def expected_gap_cells(records) -> dict[tuple[str, int], str]:
    """(model label, depth) -> the cell text, computed here from the records."""
    labels = {"gat": "GAT", "gat-lip": "GAT-Lip"}
    cells = {}
    for model in GAP_GRID["model"]:
        for depth in GAP_GRID["depth"]:
            runs = [r for r in records if r["model"] == model and r["depth"] == depth]
            diverged = sum(r["status"] == "diverged" for r in runs)
            gaps = np.array([r["final_train"] - r["test_metric"] for r in runs]) * 100
            cells[labels[model], depth] = (f"diverged ({diverged}/{len(runs)})" if diverged else
                                          f"{gaps.mean():.1f} $\\pm$ {gaps.std(ddof=1):.1f} (n={len(runs)})")
    return cells


def test_a_plugins_experiment_is_in_the_workflow_schema(gap):
    schema = grid.schema_with_registry(yaml_numbers.read_schema(SCHEMA))
    assert schema["properties"]["experiments"]["properties"]["gap"] == {"$ref": "#/$defs/grid_experiment"}
    block = {"grid": {"datasets": ["csbm"], "models": ["gat"], "depths": [2], "alphas": [1],
                      "missing_rates": [0], "seeds": [0]}, "train": {}}
    config = {"results": "r", "resources": "s", "data": {}, "experiments": {"gap": block}}
    jsonschema.validate(config, schema)
    with pytest.raises(jsonschema.ValidationError, match="'train' is a required property"):
        jsonschema.validate({**config, "experiments": {"gap": {"grid": block["grid"]}}}, schema)


def test_a_plugins_experiment_runs_in_the_workflow_dry_run(gap, tmp_path):
    config = {
        "results": "results", "resources": "resources", "data": {"mirror": None}, "plugins": [str(GAP)],
        "experiments": {"gap": {
            "grid": {"datasets": ["csbm"], "models": ["gat", "gat-lip"], "depths": [2, 4], "alphas": [1],
                     "missing_rates": [0], "seeds": [0]},
            "train": {"epochs": 2},
        }},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    cmd = [str(BIN / "snakemake"), "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path),
           "--workflow-profile", str(REPO / "profiles" / "default"), "--configfile", str(path), "-n", "-p"]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    stats = done.stdout.split("Job stats:", 1)[1]
    counts = dict(re.findall(r"^(\S+)\s+(\d+)$", stats, flags=re.MULTILINE))
    assert counts == {"aggregate": "1", "all": "1", "mask": "1", "plots_gap": "1", "run_list": "1",
                      "tables_gap": "1", "train": "4", "total": "10"}
    commands = [line.split("Shell command: ", 1)[1] for line in done.stdout.splitlines()
                if "Shell command: lipnorm " in line]
    plugin = f"--plugin {GAP}"
    assert (f"lipnorm tables gap {plugin} --aggregate-dir results/gap/aggregate --out-dir results/gap/tables"
            in " ".join(commands))
    assert (f"lipnorm plots gap {plugin} --aggregate-dir results/gap/aggregate --out-dir results/gap/figures"
            in " ".join(commands))
    assert f"lipnorm aggregate {plugin} --out-dir results/gap/aggregate" in " ".join(commands)


def test_a_plugins_experiment_is_in_the_report_with_its_caption(gap, gap_written, tmp_path):
    # The figure has a caption file of its own (the plugin's), the table none: both are
    # shown, the figure with its caption.
    root, _ = gap_written
    shutil.copytree(root / "gap", tmp_path / "results" / "gap")
    config = {
        "results": "results", "resources": "resources", "data": {"mirror": None}, "plugins": [str(GAP)],
        "experiments": {"gap": {"grid": {"datasets": ["csbm"], "models": GAP_GRID["model"], "depths": GAP_GRID["depth"],
                                         "alphas": [1], "missing_rates": [0], "seeds": [0, 1]},
                                "train": {"epochs": 2}}},
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    outputs = ["results/gap/tables/gap_table.tex", "results/gap/figures/gap_by_depth.png"]
    cmd = [str(BIN / "snakemake"), "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path),
           "--configfile", str(tmp_path / "config.yaml"), "--report", str(tmp_path / "report.html"), *outputs]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    html = (tmp_path / "report.html").read_text()
    caption = " ".join(GAP.with_name("gap_by_depth.rst").read_text().split()[:6])
    assert "gap_table.tex" in html and "gap_by_depth.png" in html
    assert caption in html


def test_a_plugins_experiment_writes_its_table_and_figure(gap, gap_results, tmp_path, capsys):
    root, records = gap_results
    runs = pd.read_parquet(root / "gap" / "aggregate" / "runs.parquet")
    assert sorted(zip(runs["model"], runs["depth"], runs["seed"], runs["status"])) == sorted(
        (r["model"], r["depth"], r["seed"], r["status"]) for r in records)
    aggregate_dir = str(root / "gap" / "aggregate")
    for command, folder in (("tables", "tables"), ("plots", "figures")):
        assert main([command, "gap", "--plugin", str(GAP), "--aggregate-dir", aggregate_dir,
                     "--out-dir", str(tmp_path / folder)]) == 0
    assert capsys.readouterr().out.split() == [
        str(tmp_path / "tables" / "gap_table.tex"),
        str(tmp_path / "figures" / "gap_by_depth.pdf"), str(tmp_path / "figures" / "gap_by_depth.png")]
    tex = (tmp_path / "tables" / "gap_table.tex").read_text()
    body = tex.split("\\midrule", 1)[1].split("\\bottomrule", 1)[0]
    rows = [[cell.strip() for cell in line.split("&")] for line in body.split("\\\\") if line.strip()]
    cells = expected_gap_cells(records)
    assert rows == [[model, cells[model, 2], cells[model, 4]] for model in ("GAT", "GAT-Lip")]
    assert (tmp_path / "figures" / "gap_by_depth.pdf").read_bytes()[:5] == b"%PDF-"
    assert (tmp_path / "figures" / "gap_by_depth.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The figure draws the cells' means; GAT's at depth 4 has a diverged seed: not drawn.
    figure = experiments.build(gap.figures[0], {"runs": runs}.get)
    lines = {line.get_label(): line for line in figure.axes[0].get_lines()}
    plt.close(figure)
    assert list(lines) == ["GAT", "GAT-Lip"]
    assert list(lines["GAT"].get_xdata()) == [2] and list(lines["GAT-Lip"].get_xdata()) == [2, 4]
    drawn = [f"{y:.1f}" for model in lines for y in lines[model].get_ydata()]
    assert drawn == [cells[key].split()[0] for key in (("GAT", 2), ("GAT-Lip", 2), ("GAT-Lip", 4))]
    assert plt.get_fignums() == []  # the figures the commands drew are closed


def test_a_plugins_experiment_is_published_with_its_section(gap_written, tmp_path):
    root, records = gap_written
    out = tmp_path / "published"
    publish(root, out)
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "gap/gap_by_depth.pdf", "gap/gap_by_depth.png", "gap/gap_table.tex", "gap/runs.csv", "summary.md"]
    stored = pd.read_csv(out / "gap" / "runs.csv")
    assert list(stored.columns) == [*experiments.RUN_COLUMNS, "final_train"]
    summary = (out / "summary.md").read_text()
    cells = {key: text.replace("$\\pm$", "±") for key, text in expected_gap_cells(records).items()}
    section = summary.split("\n## gap: generalisation gap against depth\n", 1)[1].splitlines()
    assert section == [
        "",
        "Training accuracy at the last epoch minus test accuracy (points): mean ± std over n seeds.",
        "",
        "| Model | 2 | 4 |",
        "|---|---|---|",
        *(f"| {model} | {cells[model, 2]} | {cells[model, 4]} |" for model in ("GAT", "GAT-Lip")),
        "",
        "LaTeX: [`gap_table.tex`](gap/gap_table.tex).",
        "",
        "![gap_by_depth](gap/gap_by_depth.png)",
    ]
    assert "(`<experiment>/runs.csv`, `gradients/gradient_ratios.csv`, `lipschitz/probe.csv`)" in summary
    assert regenerate(out) == {name: (out / name).read_text() for name in ("gap/gap_table.tex", "summary.md")}
