"""CITATION.cff is valid Citation File Format 1.2.0 (the format's own JSON schema, kept beside
this file from the cffconvert 2.0.0 wheel, checked with jsonschema), cites this
software and prefers the ICML 2021 paper."""

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads(Path(__file__).with_name("cff-1.2.0.schema.json").read_text())


def validation_errors(citation: dict) -> list[str]:
    validator = jsonschema.Draft7Validator(SCHEMA, format_checker=jsonschema.FormatChecker())
    return [f"{list(error.path)}: {error.message}" for error in validator.iter_errors(citation)]


@pytest.fixture()
def citation() -> dict:
    return yaml.safe_load((ROOT / "CITATION.cff").read_text())


def test_citation_file_is_valid_cff_1_2_0(citation):
    assert citation["cff-version"] == "1.2.0"
    assert validation_errors(citation) == []


def test_the_schema_rejects_what_cff_forbids(citation):
    # The check can fail: no authors, and a preferred citation without its type.
    del citation["authors"]
    del citation["preferred-citation"]["type"]
    errors = validation_errors(citation)
    assert "[]: 'authors' is a required property" in errors
    assert any(error.startswith("['preferred-citation']") for error in errors)


def test_preferred_citation_is_the_icml_2021_paper(citation):
    paper = citation["preferred-citation"]
    assert paper["title"] == (
        "Lipschitz Normalization for Self-Attention Layers with Application to Graph Neural Networks"
    )
    assert [a["family-names"] for a in paper["authors"]] == ["Dasoulas", "Scaman", "Virmaux"]
    assert paper["collection-title"] == "Proceedings of the 38th International Conference on Machine Learning"
    assert (paper["publisher"]["name"], paper["volume"], paper["year"]) == ("PMLR", 139, 2021)
    assert citation["type"] == "software" and citation["license"] == "MIT"
