"""The install: one version, a slim base that covers the layers, data and training, and
commands that name the extra they lack.

The slim install is simulated in a subprocess where every module that the base
requirements do not install counts as missing, so these tests run in the full development
environment.
"""

import json
import re
import subprocess
import sys
import textwrap
import tomllib
from importlib.metadata import PackageNotFoundError, distribution, packages_distributions, requires, version
from pathlib import Path

import pytest

import lipnorm
from lipnorm import cli

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
TINY_CSBM = "nodes=60,classes=3,feature_dim=8,avg_degree=4"


def requirement_name(requirement: str) -> str:
    return re.match(r"[A-Za-z0-9._-]+", requirement).group().lower().replace("_", "-")


def base_closure() -> set[str]:
    """Distributions the base requirements install, transitively (extras excluded)."""
    seen: set[str] = set()
    todo = [requirement_name(r) for r in PYPROJECT["dependencies"]]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            dependencies = requires(name) or []
        except PackageNotFoundError:  # a platform-conditional requirement not installed here
            continue
        todo += [requirement_name(r) for r in dependencies if "extra ==" not in r]
    return seen


def normalised(name: str) -> str:
    return name.lower().replace("_", "-")


def outside_base_modules() -> list[str]:
    """Installed top-level modules that no base requirement brings along: the extras'
    and whatever else this environment has (lipnorm's own excepted)."""
    base = base_closure() | {"lipnorm"}
    return sorted(
        module for module, dists in packages_distributions().items()
        if not any(normalised(d) in base for d in dists)
    )


# A module mapped to None is one Python reports as missing: `import` raises
# ModuleNotFoundError and importlib.util.find_spec returns None (torch probes optional
# modules that way), as for a package that is not installed.
BLOCKER = """
import sys
sys.modules.update(dict.fromkeys(BLOCKED))
"""


def run_without(blocked: list[str], code: str) -> subprocess.CompletedProcess:
    program = f"BLOCKED = {blocked!r}\n{BLOCKER}\n{textwrap.dedent(code)}"
    return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=ROOT)


def test_version_is_the_installed_distributions_and_pyprojects():
    assert lipnorm.__version__ == version("lipnorm") == PYPROJECT["version"]


def test_citation_and_changelog_carry_the_version():
    assert f"version: {PYPROJECT['version']}\n" in (ROOT / "CITATION.cff").read_text()
    assert f"## [{PYPROJECT['version']}] - " in (ROOT / "CHANGELOG.md").read_text()


def test_extras_are_the_documented_ones_and_all_is_their_union():
    extras = PYPROJECT["optional-dependencies"]
    assert set(extras) == {"workflow", "plots", "bench", "pyg", "docs", "dev", "all"}
    (everything,) = extras["all"]
    assert set(re.fullmatch(r"lipnorm\[(.*)\]", everything).group(1).split(",")) == set(extras) - {"all"}


def test_the_extras_modules_are_blocked_in_the_slim_simulation():
    blocked = outside_base_modules()
    # The extras' own packages; jinja2 comes with torch, so a slim install has it.
    assert {"matplotlib", "seaborn", "snakemake", "torch_geometric", "pytest", "mkdocs"} <= set(blocked)
    assert "jinja2" not in blocked
    done = run_without(blocked, "import matplotlib")
    assert "ModuleNotFoundError: import of matplotlib halted" in done.stderr


@pytest.mark.slow
def test_base_requirements_cover_the_layers_data_and_training(tmp_path):
    """`lipnorm train` runs an epoch with every module outside the base requirements
    blocked: the extras' and any other package this environment happens to have."""
    done = run_without(outside_base_modules(), f"""
        import json, sys
        import lipnorm.nn, lipnorm.nn.functional, lipnorm.data, lipnorm.train, lipnorm.results.aggregate
        from lipnorm import cli
        code = cli.main(["train", "--dataset", "csbm", "--csbm", {TINY_CSBM!r}, "--epochs", "1",
                         "--heads", "2", "--hidden", "4", "--threads", "1",
                         "--data-root", {str(tmp_path / "datasets")!r}, "--out", {str(tmp_path / "run")!r}])
        top = sorted({{name.split(".")[0] for name in sys.modules}} - set(sys.stdlib_module_names))
        print(json.dumps([code, top]))
    """)
    assert done.returncode == 0, done.stderr
    code, top_level = json.loads(done.stdout.strip().splitlines()[-1])
    assert code == 0 and (tmp_path / "run" / "summary.json").exists()
    assert {"torch", "dgl", "numpy", "pandas", "pyarrow"} <= set(top_level)


def test_a_command_without_its_extra_names_the_extra_to_install(tmp_path):
    done = run_without(["matplotlib", "seaborn"], f"""
        import sys
        from lipnorm import cli
        sys.exit(cli.main(["plots", "depth", "--aggregate-dir", {str(tmp_path)!r}, "--out-dir", {str(tmp_path)!r}]))
    """)
    assert done.returncode == 1
    assert done.stderr == (
        "lipnorm plots: needs matplotlib, from the 'plots' extra: pip install 'lipnorm[plots]'\n"
    )


def test_missing_extra_follows_the_chain_of_import_errors():
    # pandas reports a missing optional dependency as a plain ImportError raised
    # while handling the ModuleNotFoundError.
    try:
        try:
            raise ModuleNotFoundError("No module named 'jinja2'", name="jinja2")
        except ModuleNotFoundError:
            raise ImportError("Missing optional dependency 'Jinja2'.")
    except ImportError as err:
        assert cli.missing_extra(err) == ("jinja2", "plots")
    assert cli.missing_extra(ModuleNotFoundError(name="torch_geometric.nn")) == ("torch_geometric", "bench")
    assert cli.missing_extra(ModuleNotFoundError(name="snakemake_executor_plugin_slurm")) == (
        "snakemake_executor_plugin_slurm", "workflow",
    )


def test_an_import_error_of_no_extra_stays_a_traceback(tmp_path):
    assert cli.missing_extra(ModuleNotFoundError(name="scipy")) is None
    done = run_without(["pyarrow"], f"""
        import sys
        from lipnorm import cli
        sys.exit(cli.main(["aggregate", "--out-dir", {str(tmp_path)!r}, {str(tmp_path)!r}]))
    """)
    # pyarrow is a base requirement: a broken install, reported as what it is.
    assert done.returncode == 1 and "Traceback" in done.stderr and "No module named 'pyarrow.parquet'" in done.stderr


def test_the_license_is_mit_with_the_contributors_copyright():
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n\nCopyright (c) 2026 the lipnorm contributors\n")
    assert PYPROJECT["license"] == {"text": "MIT"}
    assert distribution("lipnorm").metadata["License"] == "MIT"
