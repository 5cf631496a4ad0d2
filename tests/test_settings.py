"""lipnorm.settings: each shared constant and default assigned once, in its owner, and
the modules that read them at start-up (the CLI's parser, the planner) free of torch."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import lipnorm

SOURCE = Path(lipnorm.__file__).parent  # this checkout's package, as imported here
OWNER = SOURCE / "settings" / "constants.py"
# name -> its value as spelt in the owner (`("full", "cluster")`, `32 << 20`, ...).
OWNED = {
    node.targets[0].id: ast.get_source_segment(OWNER.read_text(), node.value)
    for node in ast.parse(OWNER.read_text()).body
    if isinstance(node, ast.Assign)
}


def assigned_names(text: str) -> set[str]:
    """Every name a module's code assigns, at any depth (`x = ...`, `x: T = ...`, `a, x =
    ...`, a loop's variable); an import is no assignment."""
    return {node.id for node in ast.walk(ast.parse(text)) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}


MODULES = {path.relative_to(SOURCE).as_posix(): path.read_text() for path in sorted(SOURCE.rglob("*.py"))}


def test_the_owner_holds_the_constants_the_issue_names():
    assert {"BATCHINGS", "DEFAULT_DATA_ROOT", "MAPPED_LARGE_TENSOR_BYTES"} <= set(OWNED)
    assert OWNED["DEFAULT_DATA_ROOT"] == '"resources/datasets"'


@pytest.mark.parametrize("name", sorted(OWNED))
def test_each_constant_is_assigned_in_its_owner_only(name):
    assigning = [path for path, text in MODULES.items() if name in assigned_names(text)]
    assert assigning == ["settings/constants.py"]


@pytest.mark.parametrize("name", sorted(OWNED))
def test_each_constants_value_is_spelt_in_its_owner_only(name):
    """No copy under another name either: `"resources/datasets"`, `("full", "cluster")`,
    `32 << 20` appear in the owner alone."""
    spelt = [path for path, text in MODULES.items() if OWNED[name] in text]
    assert spelt == ["settings/constants.py"]


def test_the_cli_parser_and_the_planner_import_no_torch():
    code = (
        "import sys; from lipnorm import cli, plan, settings; cli.build_parser();"
        "print(sorted({'torch', 'dgl', 'numpy'} & set(sys.modules)))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SOURCE.parent), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.strip() == "[]"
