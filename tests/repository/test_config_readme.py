"""config/README.md (the Snakemake workflow catalog's convention) describes every key of
the workflow config: each key the schema defines, at any depth, and each preset."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from lipnorm import grid

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
README = ROOT / "config" / "README.md"


def schema_keys(node) -> set[str]:
    """Every property name the schema defines, its `$defs` and nested blocks included."""
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                found |= set(value)
            found |= schema_keys(value)
    elif isinstance(node, list):
        for item in node:
            found |= schema_keys(item)
    return found


def described(text: str, key: str) -> bool:
    """`key` named in code on the page, alone or as the last part of a dotted path."""
    return re.search(rf"`(?:[\w.]+\.)?{re.escape(key)}`", text) is not None


def test_the_schema_walk_finds_nested_keys():
    keys = schema_keys(yaml.safe_load(SCHEMA.read_text()))
    assert {"results", "mirror", "experiments", "grid", "datasets", "batch_partitions", "arms", "scales",
            "feature_dim", "device"} <= keys


def test_every_schema_key_is_described_in_config_readme():
    text = README.read_text()
    # The workflow's copy: the file's keys and the registered experiments' names.
    keys = schema_keys(grid.schema_with_registry(yaml.safe_load(SCHEMA.read_text())))
    assert {"depth", "remedies", "lipschitz"} <= keys
    assert sorted(key for key in keys if not described(text, key)) == []


def test_every_preset_is_in_the_presets_table():
    text = README.read_text()
    presets = ["config.yaml", *(f"config/presets/{path.name}" for path in sorted((ROOT / "config" / "presets").glob("*.yaml")))]
    assert [preset for preset in presets if f"| `{preset}` |" not in text] == []
