"""The documentation's lists of architectures, normalisations and datasets are the
registry's (`lipnorm.registry.catalogue`), rendered into docs/models.md and
docs/datasets.md by the site's hook: a part registered once is listed, a plugin's too."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from lipnorm import registry
from lipnorm.registry.catalogue import KINDS, catalogue

ROOT = Path(__file__).resolve().parents[2]


def hook():
    spec = importlib.util.spec_from_file_location("mkdocs_registry_tables", ROOT / "scripts" / "mkdocs_registry_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rows(table: str) -> dict[str, list[str]]:
    """The table's body rows by their first cell's name."""
    body = [line.strip("|").split(" | ") for line in table.strip().splitlines()[2:]]
    return {cells[0].strip().strip("`"): [cell.strip() for cell in cells] for cells in body}


def test_every_registered_entry_is_a_row_with_its_label():
    for kind, entries in (("architectures", registry.ARCHITECTURES), ("norms", registry.NORMS),
                          ("datasets", registry.DATASETS)):
        table = rows(catalogue(kind))
        assert list(table) == list(entries), kind
        assert [row[1] for row in table.values()] == [entry.label for entry in entries.values()], kind


def test_rows_say_what_the_registry_holds():
    assert rows(catalogue("datasets"))["cora"] == [
        "`cora`", "Cora", "2,708", "13,264", "1,433", "7", "raw files, verified", "`raw_features`",
    ]
    assert rows(catalogue("datasets"))["csbm"][2:] == ["–", "–", "–", "–", "generated", "`csbm`"]
    gt = rows(catalogue("architectures"))["gt"]
    assert gt[2:] == ["`lipnorm.nn.models.deep:DeepGT.from_config`", "yes", "no", "0.5 / 0.3", "yes", "yes", "no",
                      "`gt`, `gt-lip`"]
    assert rows(catalogue("norms"))["dgn"] == ["`dgn`", "DGN", "`lipnorm.normalisations.dgn:dgn_layer`"]


def test_a_plugins_entries_are_listed_while_registered():
    def layer(in_feats, out_feats, heads, **options):
        raise NotImplementedError  # never built here

    def load():
        raise NotImplementedError  # never loaded here

    registry.register_architecture("test-list", label="Listed", colour="#123456", layer=layer, attention=False,
                                   dropout=(0.1, 0.0))
    registry.register_norm("test-norm", label="Normed", colour="#654321", lip_colour="#abcdef",
                           factory=lambda width, config: None)
    registry.register_dataset("test-set", label="Set", colour="#111111", load=load)
    try:
        assert rows(catalogue("architectures"))["test-list"][1:5] == [
            "Listed", f"`{__name__}:test_a_plugins_entries_are_listed_while_registered.<locals>.layer`", "no", "yes",
        ]
        assert "`test-list-test-norm`" in rows(catalogue("architectures"))["test-list"][-1]
        assert rows(catalogue("norms"))["test-norm"][1] == "Normed"
        assert rows(catalogue("datasets"))["test-set"][1:] == ["Set", "–", "–", "–", "–", "plugin `load`", "–"]
    finally:
        registry.unregister("dataset", "test-set")
        registry.unregister("norm", "test-norm")
        registry.unregister("architecture", "test-list")
    assert "test-list" not in rows(catalogue("architectures"))


def test_an_unknown_kind_is_named():
    with pytest.raises(ValueError, match=r"unknown registry kind 'models'; allowed: architectures, norms, datasets"):
        catalogue("models")


@pytest.mark.parametrize(("page", "kinds"), [("models.md", ["architectures", "norms"]), ("datasets.md", ["datasets"])])
def test_the_pages_list_the_registry_through_the_sites_hook(page, kinds):
    """The pages hold the markers, not hand-written lists; the hook puts the tables there."""
    text = (ROOT / "docs" / page).read_text()
    assert [kind for kind in KINDS if f"<!-- registry: {kind} -->" in text] == kinds
    rendered = hook().on_page_markdown(text, page=None, config=None, files=None)
    assert "<!-- registry:" not in rendered
    for kind in kinds:
        assert catalogue(kind) in rendered
