"""LipschitzNorm for graph attention networks, on DGL."""

import os
import sys

# DGL picks its backend at import time and warns when none is configured.
os.environ.setdefault("DGLBACKEND", "pytorch")
# `import dgl` imports ogb, whose version check (package `outdated`, used by nothing
# else) asks PyPI for newer releases of ogb and of itself in two non-daemon threads
# that retry for ~3 s without a network, so every process waited that long to exit.
# ogb treats a failed `import outdated` as "skip the check"; make it fail.
sys.modules.setdefault("outdated", None)

# What a script needs, importable from `lipnorm` itself. Resolved on first access
# (PEP 562): `import lipnorm` stays free of torch and dgl, which `lipnorm --help` and
# every CLI process start rely on (tests/repository/test_startup.py).
_EXPORTS = {
    "load_dataset": "lipnorm.data",
    "DATASETS": "lipnorm.data",
    "NodeDataset": "lipnorm.data",
    "ModelConfig": "lipnorm.settings.model_config",
    "build_model": "lipnorm.nn",
    "MODEL_NAMES": "lipnorm.nn",
    "GATConv": "lipnorm.nn",
    "GTConv": "lipnorm.nn",
    "PairNorm": "lipnorm.nn",
}
__all__ = ["__version__", *_EXPORTS]
# Derived from lipnorm.registry on every access (a plugin's names appear): not cached.
_LIVE = {"MODEL_NAMES"}


def __getattr__(name: str):
    if name == "__version__":
        # The installed distribution's version: pyproject.toml is its one source.
        # Resolved on first access, like the exports (importlib.metadata costs ~10 ms).
        from importlib.metadata import version

        globals()[name] = version("lipnorm")
        return globals()[name]
    if name not in _EXPORTS:
        raise AttributeError(f"module 'lipnorm' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    if name not in _LIVE:
        globals()[name] = value  # later accesses skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
