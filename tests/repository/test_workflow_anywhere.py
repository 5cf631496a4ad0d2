"""`lipnorm workflow` in a researcher's own folder: lipnorm built into a wheel and installed
from it (not editable), one plugin file and one config there, the grid run to tables and
figures in that folder and nothing written into the installed package; Snakemake's
`module` form on the installed Snakefile; the command's arguments and errors.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from lipnorm import cli, registry, workflow

REPO = Path(__file__).resolve().parents[2]

PLUGIN = '''
"""A researcher's plugin: a graph of their own and a normalisation."""
from lipnorm.registry import register_dataset, register_norm


def ring():
    import dgl
    import torch

    nodes = torch.arange(40)
    labels = nodes % 2
    graph = dgl.to_bidirected(dgl.graph((nodes, (nodes + 1) % 40), num_nodes=40))
    split = nodes % 4
    return {"graph": graph, "features": torch.nn.functional.one_hot(labels, 2).float(),
            "labels": labels, "train_mask": split <= 1, "val_mask": split == 2, "test_mask": split == 3}


def unit_norm(width, config):
    from torch import nn

    class UnitNorm(nn.Module):
        def forward(self, graph, h):
            return h / (h.norm(dim=-1, keepdim=True) + 1e-6)

    return UnitNorm()


register_dataset("ring", label="Ring graph", colour="#56b4e9", load=ring)
register_norm("unitnorm", label="UnitNorm", colour="#fbafe4", lip_colour="#ece133", factory=unit_norm)
'''


def smoke_config(plugin: str) -> dict:
    return {
        "results": "results",
        "resources": "resources",
        "data": {"mirror": None},
        "plugins": [plugin],
        "experiments": {"depth": {
            "grid": {"datasets": ["ring"], "models": ["gat", "gat-unitnorm"], "depths": [1],
                     "alphas": [1], "missing_rates": [0], "seeds": [0]},
            "train": {"epochs": 2, "heads": 1, "hidden": 4},
        }},
    }


def files_below(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file below `folder`, with its size and modification time."""
    return {
        str(path.relative_to(folder)): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in sorted(folder.rglob("*")) if path.is_file()
    }


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """lipnorm built into a wheel from a copy of this checkout's sources, installed with
    `pip install --target` into a folder of its own (that folder)."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    # A copy: building in place would leave build/ and an egg-info in the checkout.
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "Snakefile"):
        shutil.copy2(REPO / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in ("src", "workflow", "profiles"):
        shutil.copytree(REPO / name, source / name, symlinks=True, ignore=ignore)
    # Without the `wheel` package the build needs an isolated environment (pip fetches it).
    isolation = ["--no-build-isolation"] if importlib.util.find_spec("wheel") else []
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    subprocess.run([*pip, "wheel", "--no-deps", *isolation, "-w", root / "dist", source], check=True)
    (wheel,) = (root / "dist").glob("lipnorm-*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--target", root / "site", wheel], check=True)
    return root / "site"


def installed_env(site: Path) -> dict[str, str]:
    """The wheel's lipnorm first on the path (also for the jobs' `lipnorm` commands)."""
    return {**os.environ, "PYTHONPATH": str(site), "LIPNORM_DATA_MIRROR": ""}


@pytest.mark.slow
def test_the_installed_workflow_runs_a_plugins_grid_in_the_users_folder(site, tmp_path):
    env = installed_env(site)
    where = subprocess.run(
        [sys.executable, "-c", "import lipnorm, lipnorm.workflow as w; print(lipnorm.__file__); print(w.SNAKEFILE)"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=True,
    ).stdout.split()
    assert where == [str(site / "lipnorm" / "__init__.py"), str(site / "lipnorm" / "workflow" / "Snakefile")]
    # The wheel holds copies of the checkout's files, not links to them.
    packaged = site / "lipnorm" / "workflow"
    for name in ("Snakefile", "workflow/rules/common.smk", "workflow/schemas/config.schema.yaml",
                 "workflow/report/depth_accuracy.rst", "profiles/default/config.v9+.yaml",
                 "profiles/slurm/config.v9+.yaml"):
        assert not (packaged / name).is_symlink()
        assert (packaged / name).read_text() == (REPO / name).read_text()
    before = files_below(site)

    # The researcher's folder: the plugin beside a config folder; the plugin's path in the
    # config is relative to the config file, not to the folder the command runs in.
    project = tmp_path / "project"
    (project / "conf").mkdir(parents=True)
    (project / "my_plugin.py").write_text(PLUGIN)
    (project / "conf" / "my.yaml").write_text(yaml.safe_dump(smoke_config("../my_plugin.py")))
    done = subprocess.run(
        [site / "bin" / "lipnorm", "workflow", "--configfile", "conf/my.yaml", "--cores", "2"],
        cwd=project, env=env, capture_output=True, text=True,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert f"workflow specific profile {packaged / 'profiles' / 'default'}" in output
    assert f"--plugin {project / 'my_plugin.py'}" in output

    results = project / "results" / "depth"
    table = (results / "tables" / "depth_accuracy_table.tex").read_text()
    assert "UnitNorm" in table and "Ring graph" in table
    for ext in ("pdf", "png"):
        assert (results / "figures" / f"depth_accuracy.{ext}").stat().st_size > 0
    runs = pd.read_parquet(results / "aggregate" / "runs.parquet")
    assert sorted(zip(runs["dataset"], runs["norm"], runs["status"])) == [
        ("ring", "none", "ok"), ("ring", "unitnorm", "ok"),
    ]
    assert (project / "resources" / "masks" / "ring" / "rate0_seed0.npy").is_file()
    assert files_below(site) == before


@pytest.mark.slow
def test_a_users_snakefile_uses_the_installed_workflow_as_a_module(site, tmp_path):
    """docs/workflow.md's `module` form: lipnorm's rules beside the user's own."""
    (tmp_path / "config").mkdir()
    (tmp_path / "my_plugin.py").write_text(PLUGIN)
    (tmp_path / "config" / "config.yaml").write_text(yaml.safe_dump(smoke_config("../my_plugin.py")))
    (tmp_path / "Snakefile").write_text('''
import lipnorm.workflow

configfile: "config/config.yaml"


module lipnorm:
    snakefile:
        str(lipnorm.workflow.SNAKEFILE)
    config:
        config


use rule * from lipnorm as lipnorm_*


rule all:
    default_target: True
    input:
        rules.lipnorm_all.input,
        "my_summary.txt",


rule my_summary:
    input:
        "results/depth/tables/depth_accuracy_table.tex",
    output:
        "my_summary.txt",
    shell:
        "wc -l {input} > {output}"
''')
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "1"],
        cwd=tmp_path, env=installed_env(site), capture_output=True, text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    stats = done.stdout.split("Job stats:")[1].split("total")[0]
    counts = dict(line.split() for line in stats.splitlines()[3:] if line.strip())
    assert counts == {
        "lipnorm_mask": "1", "lipnorm_run_list": "1", "lipnorm_train": "2", "lipnorm_aggregate": "1",
        "lipnorm_plots_depth": "1", "lipnorm_tables_depth": "1", "my_summary": "1", "all": "1",
    }


def test_snakemakes_arguments_pass_through_in_order():
    args = cli.parse_args(cli.build_parser(), [
        "workflow", "-n", "--config", "seed=1", "--configfile", "my.yaml", "--profile", "slurm", "--cores", "2", "all",
    ])
    # `--config` is Snakemake's, not an abbreviation of `--configfile`.
    assert (args.configfile, args.profile) == ("my.yaml", "slurm")
    assert args.snakemake_args == ["-n", "--config", "seed=1", "--cores", "2", "all"]


def test_the_command_is_snakemake_on_the_installed_snakefile(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my.yaml").write_text("results: results\n")
    (tmp_path / "site-profile").mkdir()
    assert workflow.snakemake_command("my.yaml", "site-profile", ["--", "-n"]) == [
        sys.executable, "-m", "snakemake", "--snakefile", str(workflow.ROOT / "Snakefile"),
        "--workflow-profile", str(tmp_path / "site-profile"), "--configfile", str(tmp_path / "my.yaml"), "-n",
    ]
    assert workflow.profile_dir("slurm") == workflow.ROOT / "profiles" / "slurm"
    assert (workflow.profile_dir("default") / "config.v9+.yaml").read_text() == (
        REPO / "profiles" / "default" / "config.v9+.yaml"
    ).read_text()


@pytest.mark.parametrize("argv, message", [
    (["workflow", "-n"], "workflow: error: config file 'config.yaml' does not exist (in {cwd}); give one with --configfile FILE"),
    (["workflow", "--configfile", "my.yaml", "--profile", "gpu"],
     "workflow: error: profile 'gpu' is neither one of default, slurm nor an existing folder or file"),
    (["data", "info", "csbm", "--bogus"], "data info: error: unrecognized arguments: --bogus"),
])
def test_bad_workflow_arguments_are_refused_before_snakemake(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my.yaml").write_text("results: results\n")
    with pytest.raises(SystemExit) as exit:
        cli.main(argv)
    assert exit.value.code == 2
    assert f"lipnorm {message.format(cwd=tmp_path)}" in capsys.readouterr().err


def test_plugin_files_are_read_relative_to_the_config_files_folder(tmp_path):
    (tmp_path / "plugin").write_text("")  # a file without .py: still a file, not a module
    assert registry.plugins_relative_to(
        ["mine.py", "sub/other.py", "plugin", "/abs/p.py", "some_package.plugin"], tmp_path
    ) == [
        str(tmp_path / "mine.py"), str(tmp_path / "sub" / "other.py"), str(tmp_path / "plugin"),
        "/abs/p.py", "some_package.plugin",
    ]


def test_without_snakemake_the_command_names_the_extra_to_install(tmp_path):
    (tmp_path / "my.yaml").write_text("results: results\n")
    code = (
        "import sys; sys.modules['snakemake'] = None; from lipnorm import cli;"
        "sys.exit(cli.main(['workflow', '--configfile', 'my.yaml']))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert (done.returncode, done.stderr) == (
        1, "lipnorm workflow: needs snakemake, from the 'workflow' extra: pip install 'lipnorm[workflow]'\n",
    )
