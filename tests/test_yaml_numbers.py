"""Numbers as people write them (`5e-4`, `1E3`): YAML 1.2 numbers in every config."""

from __future__ import annotations

import importlib
import sys

import pytest
import yaml

from lipnorm import yaml_numbers


@pytest.mark.parametrize(
    ("text", "number"),
    [("5e-4", 0.0005), ("1e-2", 0.01), ("1E3", 1000.0), ("1.0e3", 1000.0), ("-2.5E+1", -25.0),
     (".5", 0.5), ("12", 12), ("+7", 7), ("3.", 3.0)],
)
def test_parse_number_reads_yaml_1_2_numbers(text, number):
    parsed = yaml_numbers.parse_number(text)
    assert parsed == number and type(parsed) is type(number)


@pytest.mark.parametrize("text", ["abc", "1e", "e3", "1_000", "0x10", ".inf", "nan", "1e3.5", " 1", ""])
def test_parse_number_leaves_other_strings(text):
    assert yaml_numbers.parse_number(text) is None


def test_load_yaml_reads_exponents_without_a_dot_as_floats():
    text = "lr: 5e-3\nweight_decay: 5e-4\nbig: 1E3\nplain: 0.01\nint: 3\nname: 5e-4x\nquoted: '1e-2'\n"
    # PyYAML (YAML 1.1) reads the first three as strings: what the loader fixes.
    assert yaml.safe_load(text)["lr"] == "5e-3"
    assert yaml_numbers.load_yaml(text) == {
        "lr": 0.005, "weight_decay": 0.0005, "big": 1000.0, "plain": 0.01, "int": 3,
        "name": "5e-4x", "quoted": "1e-2",
    }
    # The loader is a subclass: yaml.SafeLoader itself is unchanged.
    assert yaml.safe_load("x: 1e3") == {"x": "1e3"}


SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "maybe": {"type": ["string", "null"]},
        "rates": {"type": "array", "items": {"type": "number"}},
        "groups": {"type": "object", "additionalProperties": {"$ref": "#/$defs/settings"}},
        "either": {"oneOf": [{"$ref": "#/$defs/settings"}, {"type": "object", "properties": {"n": {"type": "integer"}}}]},
    },
    "$defs": {
        "settings": {"type": "object", "properties": {"lr": {"type": "number"}, "epochs": {"type": "integer"}}},
    },
}


def test_coerce_numbers_follows_the_schema_and_leaves_strings_elsewhere():
    config = {
        "path": "1e3", "maybe": "2e2", "rates": ["1e-1", 0.5, "abc"],
        "groups": {"a": {"lr": "5e-4", "epochs": "1e2"}, "b": {"lr": "abc"}},
        "either": {"lr": "1E-2", "n": "4e1"}, "unknown": "1e3",
    }
    same = yaml_numbers.coerce_numbers(config, SCHEMA)
    assert same is config
    assert config == {
        "path": "1e3", "maybe": "2e2", "rates": [0.1, 0.5, "abc"],
        "groups": {"a": {"lr": 0.0005, "epochs": 100}, "b": {"lr": "abc"}},
        "either": {"lr": 0.01, "n": 40}, "unknown": "1e3",
    }
    assert type(config["groups"]["a"]["epochs"]) is int


def test_coerce_numbers_refuses_remote_refs():
    with pytest.raises(ValueError, match="only local \\$ref are supported, got 'other.yaml#/x'"):
        yaml_numbers.coerce_numbers({"a": "1"}, {"properties": {"a": {"$ref": "other.yaml#/x"}}})


def test_the_old_name_lipnorm_numbers_warns_naming_the_new_and_gives_its_names(monkeypatch):
    monkeypatch.delitem(sys.modules, "lipnorm.numbers", raising=False)
    with pytest.warns(DeprecationWarning, match=r"import lipnorm\.yaml_numbers instead"):
        old = importlib.import_module("lipnorm.numbers")
    assert old.parse_number is yaml_numbers.parse_number and old.coerce_numbers is yaml_numbers.coerce_numbers
    assert old._INTEGER_RE is yaml_numbers._INTEGER_RE
