"""The package face: what `lipnorm` and `lipnorm.nn` export is the real object, and
`import lipnorm` stays free of torch and dgl."""

import importlib
import subprocess
import sys

import pytest

import lipnorm
import lipnorm.nn

# The modules that define what the packages export.
HOMES = [
    "lipnorm.data",
    "lipnorm.nn.conv.base",
    "lipnorm.nn.conv.gat",
    "lipnorm.nn.conv.gt",
    "lipnorm.nn.functional",
    "lipnorm.nn.models.build",
    "lipnorm.nn.models.classic",
    "lipnorm.settings.model_config",
    "lipnorm.nn.models.deep",
    "lipnorm.nn.norm.pairnorm",
]
# What each package must export at least (issue 16).
REQUIRED = {
    "lipnorm": {"load_dataset", "ModelConfig", "build_model", "GATConv", "GTConv", "PairNorm"},
    "lipnorm.nn": {
        "GATConv", "GTConv", "PairNorm", "DeepGAT", "DeepGT", "ClassicGAT", "ModelConfig",
        "build_model", "lipschitz_norm_linear", "lipschitz_norm_dot_product",
    },
}
EXPORTS = [(package, name) for package in REQUIRED for name in importlib.import_module(package).__all__]


@pytest.mark.parametrize("package", REQUIRED)
def test_all_lists_the_required_names(package):
    assert REQUIRED[package] <= set(importlib.import_module(package).__all__)


@pytest.mark.parametrize("package, name", EXPORTS)
def test_each_export_is_the_real_object(package, name):
    namespace: dict = {}
    exec(f"from {package} import {name}", namespace)
    if name == "__version__":
        assert namespace[name] == lipnorm.__version__
        return
    defining = [module for module in map(importlib.import_module, HOMES) if hasattr(module, name)]
    assert defining, f"{name} is defined in none of {HOMES}"
    assert all(namespace[name] is getattr(module, name) for module in defining)


def test_unknown_attribute_is_an_attribute_error_naming_it():
    with pytest.raises(AttributeError, match="module 'lipnorm' has no attribute 'GatConv'"):
        lipnorm.GatConv  # noqa: B018


def test_import_lipnorm_imports_neither_torch_nor_dgl():
    code = "import sys, lipnorm; dir(lipnorm); print(sorted({'torch', 'dgl'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
