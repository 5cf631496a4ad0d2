"""The registry as Markdown tables (`catalogue(kind)`): what the documentation site lists
as lipnorm's architectures, normalisations and datasets, rendered from the registry when
the site is built (`scripts/mkdocs_registry_tables.py` replaces a page's
``<!-- registry: KIND -->`` line), so a part registered once, a plugin's included, is
listed without an edit to the docs."""

from __future__ import annotations

from lipnorm.registry.entries import ARCHITECTURES, DATASETS, NORMS, Factory
from lipnorm.registry.grammar import model_names, parse_model

KINDS = ("architectures", "norms", "datasets")


def catalogue(kind: str) -> str:
    """The Markdown table of the registered entries of `kind` (one of `KINDS`)."""
    if kind not in KINDS:
        raise ValueError(f"unknown registry kind {kind!r}; allowed: {', '.join(KINDS)}")
    return {"architectures": _architectures, "norms": _norms, "datasets": _datasets}[kind]()


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _factory(factory: Factory | None) -> str:
    if factory is None:
        return "–"
    if isinstance(factory, str):
        return f"`{factory}`"
    return f"`{getattr(factory, '__module__', '?')}:{getattr(factory, '__qualname__', repr(factory))}`"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _architectures() -> str:
    rows = []
    for entry in ARCHITECTURES.values():
        models = [name for name in model_names() if parse_model(name)[0] == entry.name]
        rows.append([
            f"`{entry.name}`", entry.label, _factory(entry.layer if entry.layer is not None else entry.model),
            _yes(entry.lip), _yes(entry.norms), f"{entry.dropout[0]:g} / {entry.dropout[1]:g}",
            _yes(entry.checkpointable), _yes(not entry.full_batch_only), _yes(entry.seed_batch is not None),
            ", ".join(f"`{name}`" for name in models),
        ])
    return _table(
        ["name", "label", "built by", "LipschitzNorm", "normalisations", "dropout (feature / attention)",
         "checkpointing", "cluster batches", "seed batch", "model names"],
        rows,
    )


def _norms() -> str:
    rows = [[f"`{entry.name}`", entry.label, _factory(entry.factory)] for entry in NORMS.values()]
    return _table(["name", "label", "layer factory"], rows)


def _datasets() -> str:
    rows = []
    for entry in DATASETS.values():
        sizes = entry.sizes
        counts = (
            ["–"] * 4 if sizes is None
            else [f"{sizes.nodes:,}", f"{sizes.edges:,}", f"{sizes.features:,}", f"{sizes.classes:,}"]
        )
        source = "raw files, verified" if entry.raw is not None else "generated" if entry.read is not None else "plugin `load`"
        rows.append([f"`{entry.name}`", entry.label, *counts, source,
                     ", ".join(f"`{option}`" for option in entry.options) or "–"])
    return _table(["name", "label", "nodes", "edges (self-loops included)", "features", "classes", "source", "options"], rows)
