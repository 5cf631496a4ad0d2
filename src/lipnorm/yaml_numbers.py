"""Numbers as people write them in config files: `5e-4`, `1e-2`, `1E3`.

YAML 1.1, which PyYAML (and so Snakemake) implements, reads a float only with a dot and
a signed exponent (`5.0e-4`); `5e-4`, `1E3` or `1.0e3` come back as strings. YAML 1.2
(and JSON) read them as numbers. Two entry points, one rule (`NUMBER_RE`, YAML 1.2's
core-schema number):

- `load_yaml(text)`: PyYAML's safe loader plus YAML 1.2's float syntax; what
  `lipnorm train --config` reads YAML files with (JSON files already have it).
- `coerce_numbers(config, schema)`: for configs loaded by someone else (Snakemake loads
  its configfiles itself), turns every string that is a YAML 1.2 number into one where
  the JSON schema expects a number or integer, in place, before validation. Other
  strings are left alone, so validation still names the key and the value
  (`'abc' is not of type 'number'`).
"""

from __future__ import annotations

import re
from typing import Any, Mapping

import yaml

# YAML 1.2 core schema: integers and floats in decimal (no `.inf`/`.nan`, no `_`).
NUMBER_RE = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_INTEGER_RE = re.compile(r"[-+]?[0-9]+")


def parse_number(text: str) -> int | float | None:
    """The number `text` spells in YAML 1.2 (`'5e-4'` -> 0.0005, `'12'` -> 12), else None."""
    if not NUMBER_RE.fullmatch(text):
        return None
    return int(text) if _INTEGER_RE.fullmatch(text) else float(text)


class NumberLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that also reads YAML 1.2 floats (`5e-4`, `1E3`, `1.0e3`)."""


NumberLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    # Only what YAML 1.1 misses: an exponent (after digits, with or without a dot).
    re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)[eE][-+]?[0-9]+$"),
    list("-+.0123456789"),
)


def load_yaml(text: str) -> Any:
    """`yaml.safe_load(text)`, with YAML 1.2's numbers."""
    return yaml.load(text, Loader=NumberLoader)  # noqa: S506 (a SafeLoader subclass)


def read_schema(path) -> dict[str, Any]:
    """A JSON schema from a YAML (or JSON) file."""
    with open(path) as file:
        return yaml.safe_load(file)


def _resolve(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    while "$ref" in schema:
        ref = schema["$ref"]
        if not ref.startswith("#/"):
            raise ValueError(f"only local $ref are supported, got {ref!r}")
        target: Any = root
        for part in ref[2:].split("/"):
            target = target[part]
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def coerce_numbers(value: Any, schema: Mapping[str, Any], root: Mapping[str, Any] | None = None) -> Any:
    """`value` with every string that is a YAML 1.2 number turned into one where
    `schema` (a JSON schema: properties, additionalProperties, items, $ref, oneOf/anyOf/
    allOf) expects a number or an integer; dicts and lists are changed in place.

    A float with no fractional part becomes an int where only integers are allowed
    (`epochs: 1e3` -> 1000).
    """
    root = schema if root is None else root
    schema = _resolve(schema, root)
    for keyword in ("oneOf", "anyOf", "allOf"):
        for branch in schema.get(keyword, ()):
            value = coerce_numbers(value, branch, root)
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key in list(value):
            sub = properties.get(key, extra if isinstance(extra, Mapping) else None)
            if sub is not None:
                value[key] = coerce_numbers(value[key], sub, root)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        value[:] = [coerce_numbers(item, schema["items"], root) for item in value]
    elif isinstance(value, str):
        types = schema.get("type", [])
        types = [types] if isinstance(types, str) else list(types)
        if {"number", "integer"} & set(types) and "string" not in types:
            number = parse_number(value)
            if number is not None:
                if types == ["integer"] and isinstance(number, float) and number.is_integer():
                    number = int(number)
                return number
    return value
