"""Labels and colours: the printed name (`label`) and the colour (`colour`, `palette`,
`figure_palette`) of every value of a kind (`names`: model, dataset, architecture,
attention_norm, norm), for tables and figures. A model's are composed from its parts'
(`model_label`, `model_colour`), so a plugin's entries have theirs.
"""

from __future__ import annotations

from typing import Iterable

from lipnorm.registry.entries import (
    ARCHITECTURES,
    ATTENTION_NORMS,
    NO_NORM,
    NORMS,
    architecture,
    architecture_names,
    dataset,
    dataset_names,
    norm,
    norm_names,
    unknown,
)
from lipnorm.registry.grammar import model_names, parse_model


def model_label(name: str) -> str:
    """`GAT-Lip+PairNorm`: the architecture's label, `-Lip`, `+` the norm's label."""
    arch, attention_norm, norm_name = parse_model(name)
    text = ARCHITECTURES[arch].label + ("-Lip" if attention_norm == "lip" else "")
    return text if norm_name == NO_NORM else f"{text}+{NORMS[norm_name].label}"


def model_colour(name: str) -> str:
    """The normalisation's colour if the model has one, else the architecture's; the
    `lip_colour` of either for its LipschitzNorm variant."""
    arch, attention_norm, norm_name = parse_model(name)
    entry = ARCHITECTURES[arch] if norm_name == NO_NORM else NORMS[norm_name]
    return entry.lip_colour if attention_norm == "lip" else entry.colour


AXIS_LABELS = {"none": "none", "lip": "LipschitzNorm"}
# Colours of the attention_norm axis and of "no normalisation": GAT's pair and grey.
AXIS_COLOURS = {"none": "#0173b2", "lip": "#de8f05"}
NO_NORM_COLOUR = "#949494"


def colour(kind: str, name: str) -> str:
    """The colour of a value of `kind` (see `label`), for figures coloured by that axis."""
    label(kind, name)  # raises on an unknown kind or name
    if kind == "model":
        return model_colour(name)
    if kind == "attention_norm":
        return AXIS_COLOURS[name]
    if kind == "norm":
        entry = norm(name)
        return NO_NORM_COLOUR if entry is None else entry.colour
    return (dataset(name) if kind == "dataset" else architecture(name)).colour


def palette(kind: str) -> dict[str, str]:
    """Value -> colour for every registered value of `kind`."""
    return {name: colour(kind, name) for name in names(kind)}


# Colours for models whose own colour another model of the same figure has (the
# composed colours repeat: gat-layernorm and gcn-layernorm are both the norm's):
# seaborn's colour-blind palette, then matplotlib's tab10 and darker tones.
SPARE_COLOURS = (
    "#0173b2", "#de8f05", "#029e73", "#d55e00", "#cc78bc", "#ca9161", "#fbafe4", "#949494",
    "#ece133", "#56b4e9", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
    "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#000000", "#4d4d4d", "#8b0000", "#00008b",
)


def figure_palette(models: Iterable[str]) -> dict[str, str]:
    """Model -> colour for the models of one figure, in their order: each its own
    (`model_colour`) unless an earlier one has it, then the first spare colour no model
    of the figure has (cycling when all are taken). lipnorm's own models keep theirs."""
    models = list(dict.fromkeys(models))
    own = {name: model_colour(name) for name in models}
    spares = [c for c in SPARE_COLOURS if c not in own.values()] or list(SPARE_COLOURS)
    colours: dict[str, str] = {}
    for name in models:
        if own[name] in colours.values():
            colours[name] = spares.pop(0) if spares else SPARE_COLOURS[len(colours) % len(SPARE_COLOURS)]
        else:
            colours[name] = own[name]
    return colours


def label(kind: str, name: str) -> str:
    """The printed name of a `kind` in ("model", "dataset", "architecture",
    "attention_norm", "norm") value."""
    if kind == "model":
        return model_label(name)
    if kind == "dataset":
        return dataset(name).label
    if kind == "architecture":
        return architecture(name).label
    if kind == "attention_norm":
        if name not in ATTENTION_NORMS:
            raise unknown("attention_norm", name, ATTENTION_NORMS)
        return AXIS_LABELS[name]
    if kind == "norm":
        entry = norm(name)
        return "none" if entry is None else entry.label
    raise ValueError(f"unknown kind {kind!r}; allowed: model, dataset, architecture, attention_norm, norm")


def names(kind: str) -> tuple[str, ...]:
    """Every registered value of `kind` (see `label`), in the order of rows and legends."""
    lists = {
        "model": model_names, "dataset": dataset_names, "architecture": architecture_names,
        "attention_norm": lambda: ATTENTION_NORMS, "norm": norm_names,
    }
    if kind not in lists:
        raise ValueError(f"unknown kind {kind!r}; allowed: {', '.join(lists)}")
    return tuple(lists[kind]())
