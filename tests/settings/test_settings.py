"""lipnorm.settings: each shared constant and default assigned once, in its owner (a
module of lipnorm.settings), each setting's class and check defined there only, and the
modules that read them at start-up (the CLI's parser, the planner, the settings
themselves) free of torch."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import lipnorm

SOURCE = Path(lipnorm.__file__).parent  # this checkout's package, as imported here
OWNERS = sorted(path.relative_to(SOURCE).as_posix() for path in (SOURCE / "settings").glob("[!_]*.py"))


def _module_level(owner: str) -> list[ast.stmt]:
    return ast.parse((SOURCE / owner).read_text()).body


# (owner, name) -> the value as spelt in the owner (`("full", "cluster")`, `32 << 20`, ...):
# every constant a module of lipnorm.settings assigns at module level (upper-case names).
OWNED = {
    (owner, node.targets[0].id): ast.get_source_segment((SOURCE / owner).read_text(), node.value)
    for owner in OWNERS
    for node in _module_level(owner)
    if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and node.targets[0].id.isupper()
}
# (owner, name): every class and function a module of lipnorm.settings defines (TrainConfig,
# ModelConfig, check_device, recipe_defaults, ...).
DEFINED = [
    (owner, node.name)
    for owner in OWNERS
    for node in _module_level(owner)
    if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and not node.name.startswith("_")
]


def assigned_names(text: str) -> set[str]:
    """Every name a module's code assigns, at any depth (`x = ...`, `x: T = ...`, `a, x =
    ...`, a loop's variable); an import is no assignment."""
    return {node.id for node in ast.walk(ast.parse(text)) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}


def _is_number(spelt: str) -> bool:
    try:
        float(spelt)
    except ValueError:
        return False
    return True


MODULES = {path.relative_to(SOURCE).as_posix(): path.read_text() for path in sorted(SOURCE.rglob("*.py"))}


def test_the_owners_hold_the_settings_the_issues_name():
    assert OWNERS == [
        "settings/constants.py", "settings/csbm.py", "settings/model_config.py", "settings/recipes.py",
        "settings/train_config.py",
    ]
    assert {"BATCHINGS", "DEFAULT_DATA_ROOT", "MAPPED_LARGE_TENSOR_BYTES", "PLANETOID"} <= {
        name for owner, name in OWNED if owner == "settings/constants.py"
    }
    assert OWNED["settings/constants.py", "DEFAULT_DATA_ROOT"] == '"resources/datasets"'
    assert {("settings/train_config.py", "TrainConfig"), ("settings/model_config.py", "ModelConfig"),
            ("settings/recipes.py", "recipe_defaults"), ("settings/csbm.py", "CSBMParams")} <= set(DEFINED)
    assert {("settings/model_config.py", "VARIANTS"), ("settings/model_config.py", "DGN_SKIP_WEIGHT"),
            ("settings/recipes.py", "RECIPES"), ("settings/train_config.py", "SAVE_EVERY")} <= set(OWNED)


@pytest.mark.parametrize("owner, name", sorted(OWNED))
def test_each_constant_is_assigned_in_its_owner_only(owner, name):
    assigning = [path for path, text in MODULES.items() if name in assigned_names(text)]
    assert assigning == [owner]


@pytest.mark.parametrize("owner, name", [key for key, value in sorted(OWNED.items()) if not _is_number(value)])
def test_each_constants_value_is_spelt_in_its_owner_only(owner, name):
    """No copy under another name either: `"resources/datasets"`, `("full", "cluster")`,
    `32 << 20` appear in the owner alone (a plain number such as `0.005` may recur)."""
    spelt = [path for path, text in MODULES.items() if OWNED[owner, name] in text]
    assert spelt == [owner]


@pytest.mark.parametrize("owner, name", DEFINED)
def test_each_class_and_function_is_defined_in_its_owner_only(owner, name):
    defining = [
        path for path, text in MODULES.items()
        if any(isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == name for node in ast.walk(ast.parse(text)))
    ]
    assert defining == [owner]


def test_the_cli_parser_and_the_planner_import_no_torch():
    code = (
        "import sys; from lipnorm import cli, plan, settings; cli.build_parser();"
        "from lipnorm.settings import csbm, model_config, recipes, train_config;"
        "print(sorted({'torch', 'dgl', 'numpy'} & set(sys.modules)))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SOURCE.parent), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.strip() == "[]"
