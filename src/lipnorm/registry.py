"""Registries of architectures, representation normalisations and datasets, and plugins.

Every list of names the project uses (model names, the workflow schema's enums, CLI
help, labels and colours of tables and figures, the dropout defaults, the layers that
gradient logging and layer statistics see) is derived from what is registered here
(GraphGym-style `register_*` functions). A plugin (`load_plugins`: a Python file or an
importable module, `lipnorm train --plugin`, the workflow's `plugins:`) registers its
own with the same functions, and nothing inside `src/lipnorm` needs an edit.

The experiment's axes are orthogonal:

- `architecture`: the network's layer type (`gat`, `gt`, `gat-classic`, a plugin's);
- `attention_norm`: `none` or `lip` (LipschitzNorm inside the attention layers), for
  the architectures registered with `lip=True`;
- `norm`: the representation normalisation applied after each layer (`none`,
  `pairnorm`, a plugin's), for the architectures registered with `norms=True`.

A model name is their composition, `<architecture>[-lip][-<norm>]` (`compose_model`):
`gat-lip-pairnorm` is gat + lip + pairnorm, as it always meant; `parse_model` splits one.

This module imports no torch, no numpy and no other lipnorm module: names, labels and colours are plain data, and the
factories are `"module:attribute"` strings (or callables, for plugins) resolved when a
model is built (`resolve`).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Union

# lipnorm's own datasets, which `lipnorm.data` loads (its DATASETS); spelt here so that
# this module imports nothing (not even numpy): the CLI starts with it.
BUILTIN_DATASETS = ("cora", "citeseer", "pubmed", "coauthor-cs", "ppi", "ogbn-arxiv", "csbm")
# LipschitzNorm off or on in the attention layers (lipnorm.nn.functional.NORMS).
ATTENTION_NORMS = ("none", "lip")
NO_NORM = "none"
# The gradient groups a parameter can belong to (lipnorm.nn.models.numbering.GROUPS).
PARAMETER_GROUPS = ("fc", "attn", "bias", "res", "norm")

Factory = Union[Callable[..., Any], str]


@dataclass(frozen=True)
class Architecture:
    """A registered network (see `register_architecture`)."""

    name: str
    label: str
    colour: str
    lip_colour: str | None
    layer: Factory | None
    model: Factory | None
    lip: bool
    norms: bool
    attention: bool
    dropout: tuple[float, float]
    parameter_groups: Mapping[str, str] = field(default_factory=dict)
    projections: int = 1
    seeds_together: Factory | None = None
    checkpointable: bool = False
    full_batch_only: bool = False

    @property
    def attention_norms(self) -> tuple[str, ...]:
        return ATTENTION_NORMS if self.lip else (NO_NORM,)


@dataclass(frozen=True)
class Norm:
    """A registered representation normalisation (see `register_norm`)."""

    name: str
    label: str
    colour: str
    lip_colour: str
    factory: Factory | None
    attribute: str = "norms"


@dataclass(frozen=True)
class DatasetSizes:
    """What a dataset's training costs grow with (`lipnorm.plan`): nodes, edges as the
    model sees them (symmetrised where the loader does, one self-loop per node
    included), feature columns and classes (labels, for a multilabel dataset); and,
    where known, the training split's nodes, whose feature rows missing features never
    erase (the rows a row-pruned first layer keeps, `lipnorm.nn.row_pruned`)."""

    nodes: int
    edges: int
    features: int
    classes: int
    train_nodes: int | None = None

    def __post_init__(self) -> None:
        for key in ("nodes", "edges", "features", "classes", "train_nodes"):
            value = getattr(self, key)
            if key == "train_nodes" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"dataset sizes: {key}={value!r} must be a positive integer")
        if self.train_nodes is not None and self.train_nodes > self.nodes:
            raise ValueError(f"dataset sizes: train_nodes={self.train_nodes} exceeds nodes={self.nodes}")


@dataclass(frozen=True)
class Dataset:
    """A registered dataset (see `register_dataset`); `load` None = `lipnorm.data`'s own."""

    name: str
    label: str
    colour: str
    load: Factory | None
    sizes: DatasetSizes | None = None


ARCHITECTURES: dict[str, Architecture] = {}
NORMS: dict[str, Norm] = {}
DATASETS: dict[str, Dataset] = {}
# The model table of the current entries, recomputed after a change: the derived lists
# are then the same objects until the registry changes.
_MODEL_TABLE: dict[str, tuple[str, str, str]] | None = None


# Names become path segments, wildcards and parts of model names (joined by "-").
NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9-]*")


def check_new(kind: str, name: str, registered: Mapping[str, Any]) -> None:
    """ValueError unless `name` is a valid name of a `kind` not in `registered` yet
    (shared by every registry: this module's, `lipnorm.experiments`)."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise ValueError(
            f"{kind} name {name!r} must be a non-empty lower-case string of letters, digits "
            "and '-', starting with a letter or digit"
        )
    if name in registered:
        raise ValueError(f"{kind} {name!r} is registered already")
    if kind == "norm" and name in ATTENTION_NORMS:
        raise ValueError(f"norm name {name!r} is an attention_norm value; choose another name")


def check_factory(kind: str, name: str, what: str, factory: Any) -> None:
    """ValueError unless `factory` is a callable or a `"module:attribute"` string (`resolve`)."""
    if not (callable(factory) or (isinstance(factory, str) and ":" in factory)):
        raise ValueError(
            f"{kind} {name!r}: {what} must be a callable or a 'module:attribute' string, got {factory!r}"
        )


def register_architecture(
    name: str,
    *,
    label: str,
    colour: str,
    layer: Factory | None = None,
    model: Factory | None = None,
    lip: bool = False,
    lip_colour: str | None = None,
    norms: bool = True,
    attention: bool = True,
    dropout: tuple[float, float] = (0.6, 0.3),
    parameter_groups: Mapping[str, str] | None = None,
    projections: int = 1,
    seeds_together: Factory | None = None,
    checkpointable: bool | None = None,
    full_batch_only: bool = False,
) -> Architecture:
    """Register a network under `name`; returns its entry.

    Give exactly one of:

    - `layer`: ``layer(in_feats, out_feats, heads, **options) -> nn.Module``, one graph
      layer whose ``forward(graph, h)`` returns ``(N, heads, out_feats)`` or
      ``(N, heads * out_feats)``; options are `attention_norm` (``"none"``, or ``"lip"``
      when `lip`), `residual`, `alpha`, `variant` and `attn_drop`. lipnorm stacks
      `depth` of them as its deep models do (`lipnorm.nn.models.deep.DeepNet`): input
      Linear, [dropout, layer, ELU (not after the last), normalisation] per layer,
      output Linear.
    - `model`: ``model(config: ModelConfig) -> nn.Module`` with ``forward(graph, feat)
      -> logits`` and ``numbered_layers()`` (see `lipnorm.nn.models.numbering.NumberedLayer`).

    `lip`: whether the layer takes ``attention_norm="lip"`` (then `lip_colour` colours
    the LipschitzNorm variant); `norms`: whether representation normalisations apply
    after its layers; `attention`: whether its layers return ``(output, attention
    (E, H, 1))`` when called with ``get_attention=True`` (layer statistics then include
    the attention entropy); `dropout`: default (feature, attention) dropout;
    `parameter_groups`: gradient group (one of `PARAMETER_GROUPS`) of a layer parameter
    by its name in the layer, or by a prefix ending in ``.``, for names lipnorm's own
    rules (`lipnorm.nn.models.numbering._group_of`) do not place, e.g. ``{"attn": "attn"}`` for
    DGL's GATv2Conv; `projections`: how many (N, heads * out_feats) projections of its
    input a layer computes (GAT's one, the graph transformer's query, key, value and skip
    four), which `lipnorm plan` counts in a run's memory.

    `seeds_together` (optional): ``seeds_together(models) -> nn.Module``, the networks of
    S seeds of one configuration as one network, which `lipnorm train --seeds`
    (`lipnorm.train.seed_group`) trains in their place; a ValueError saying why, for models it
    cannot hold. Its contract is `lipnorm.nn.models.seeds.SeedBatchedGAT`'s: ``forward(graph,
    feat, kept=None) -> (S, N, C)`` (``kept``: ``(E, S)`` bool, the edges each seed's
    DropEdge kept), ``layers`` (the attention layers, outputs ``(N, S * H, D)``),
    ``generators`` and ``set_generators`` (each seed's dropout stream), ``seed_views``
    and ``seed_state_dict``. Without it (the default), a group's seeds are trained one
    after another in one process, and their logs say so.

    What its runs may take, read by training and by `lipnorm plan` (which offers a job
    over its memory limit checkpointing, then cluster batches, where allowed):

    - `checkpointable`: activation checkpointing (``checkpoint=True``, `lipnorm train
      --checkpoint`). None (the default) means True for a `layer` architecture, whose
      stack (`lipnorm.nn.models.deep.DeepNet`) checkpoints its blocks, and False for a `model`
      one. A `model` factory that declares it builds, when ``config.checkpoint``, a
      network that recomputes its blocks in the backward pass (`torch.utils.checkpoint`,
      as `lipnorm.nn.models.deep.DeepGAT` does) and says so with a true ``checkpoint``
      attribute, which `lipnorm.nn.models.build.build_model` checks.
    - `full_batch_only`: True refuses cluster batches (``batching="cluster"``, `lipnorm
      train --batching cluster`): the network is trained on the whole graph only (as the
      published two-layer `gat-classic`). Default False: any network's ``forward(graph,
      feat)`` takes a batch's subgraph as it takes the whole graph.
    """
    check_new("architecture", name, ARCHITECTURES)
    if isinstance(projections, bool) or not isinstance(projections, int) or projections < 1:
        raise ValueError(f"architecture {name!r}: projections must be a positive integer, got {projections!r}")
    if (layer is None) == (model is None):
        raise ValueError(f"architecture {name!r}: give exactly one of layer= and model=")
    check_factory("architecture", name, "layer" if layer is not None else "model", layer or model)
    if seeds_together is not None:
        check_factory("architecture", name, "seeds_together", seeds_together)
    if lip and lip_colour is None:
        raise ValueError(f"architecture {name!r}: lip=True needs lip_colour (its LipschitzNorm variant's colour)")
    groups = dict(parameter_groups or {})
    bad = {key: group for key, group in groups.items() if group not in PARAMETER_GROUPS}
    if bad:
        raise ValueError(
            f"architecture {name!r}: unknown gradient group(s) {bad}; allowed: {', '.join(PARAMETER_GROUPS)}"
        )
    feat_drop, attn_drop = dropout
    for what, value in (("feature", feat_drop), ("attention", attn_drop)):
        if not 0 <= value < 1:
            raise ValueError(f"architecture {name!r}: {what} dropout must be in [0, 1), got {value!r}")
    entry = Architecture(
        name, label, colour, lip_colour if lip else None, layer, model, bool(lip), bool(norms),
        bool(attention), (float(feat_drop), float(attn_drop)), groups, projections, seeds_together,
        checkpointable=layer is not None if checkpointable is None else bool(checkpointable),
        full_batch_only=bool(full_batch_only),
    )
    return _add(ARCHITECTURES, entry)


def register_norm(
    name: str, *, label: str, colour: str, lip_colour: str, factory: Factory, attribute: str = "norms"
) -> Norm:
    """Register a representation normalisation applied after each layer.

    ``factory(width, config: ModelConfig) -> nn.Module`` with ``forward(graph, h (N, W))
    -> (N, W)``; one is built per layer. `lip_colour` colours its combination with
    LipschitzNorm; `attribute` is the deep model's attribute holding the per-layer
    modules (their state-dict prefix).
    """
    check_new("norm", name, NORMS)
    check_factory("norm", name, "factory", factory)
    return _add(NORMS, Norm(name, label, colour, lip_colour, factory, attribute))


def register_dataset(
    name: str, *, label: str, colour: str, load: Factory | None = None, sizes: DatasetSizes | None = None
) -> Dataset:
    """Register a dataset. `load() -> mapping` with keys `graph` (a DGLGraph), `features`
    `(N, F)`, `labels` `(N,)` integer classes, `train_mask`, `val_mask`, `test_mask`
    (bool `(N,)`), and optionally `num_classes` (default: max label + 1); lipnorm builds
    and checks the `NodeDataset` (`lipnorm.data.dataset.dataset_from_parts`). `load`
    None is for lipnorm's own datasets (`lipnorm.data.DATASETS`). `sizes` (optional,
    `DatasetSizes`) lets `lipnorm.plan` estimate a run without loading the data; without
    it the plan loads the dataset once to count them."""
    check_new("dataset", name, DATASETS)
    if sizes is not None and not isinstance(sizes, DatasetSizes):
        raise ValueError(f"dataset {name!r}: sizes must be a lipnorm.registry.DatasetSizes, got {sizes!r}")
    if load is None and name not in BUILTIN_DATASETS:
        raise ValueError(f"dataset {name!r}: give load= (a function returning the graph, features, labels and masks)")
    if load is not None:
        check_factory("dataset", name, "load", load)
    return _add(DATASETS, Dataset(name, label, colour, load, sizes))


def _add(registered: dict, entry):
    global _MODEL_TABLE
    registered[entry.name] = entry
    _MODEL_TABLE = None
    try:
        _model_table()  # a new name must not compose to one that exists
    except ValueError:
        del registered[entry.name]
        _MODEL_TABLE = None
        raise
    return entry


def unregister(kind: str, name: str) -> None:
    """Remove a registered `kind` ("architecture", "norm", "dataset") entry (tests)."""
    global _MODEL_TABLE
    registered = {"architecture": ARCHITECTURES, "norm": NORMS, "dataset": DATASETS}[kind]
    if name not in registered:
        raise ValueError(f"no {kind} {name!r} is registered")
    del registered[name]
    _MODEL_TABLE = None


# --- lookups ------------------------------------------------------------------------


def _unknown(kind: str, name: Any, names: Iterable[str]) -> ValueError:
    return ValueError(f"unknown {kind} {name!r}; allowed: {', '.join(names)}")


def architecture(name: str) -> Architecture:
    if name not in ARCHITECTURES:
        raise _unknown("architecture", name, ARCHITECTURES)
    return ARCHITECTURES[name]


def norm(name: str) -> Norm | None:
    """The entry of `name`; None for "none"."""
    if name == NO_NORM:
        return None
    if name not in NORMS:
        raise _unknown("norm", name, norm_names())
    return NORMS[name]


def dataset(name: str) -> Dataset:
    if name not in DATASETS:
        raise _unknown("dataset", name, DATASETS)
    return DATASETS[name]


def architecture_names() -> tuple[str, ...]:
    return tuple(ARCHITECTURES)


def norm_names() -> tuple[str, ...]:
    """"none", then the registered normalisations."""
    return (NO_NORM, *NORMS)


def dataset_names() -> tuple[str, ...]:
    return tuple(DATASETS)


def compose_model(architecture_name: str, attention_norm: str = NO_NORM, norm_name: str = NO_NORM) -> str:
    """`gat` + `lip` + `pairnorm` -> `gat-lip-pairnorm`; ValueError on a combination
    the architecture does not have."""
    entry = architecture(architecture_name)
    if attention_norm not in entry.attention_norms:
        raise ValueError(
            f"architecture {architecture_name!r} has no attention_norm {attention_norm!r}; "
            f"allowed: {', '.join(entry.attention_norms)}"
        )
    norm(norm_name)  # raises on an unknown one
    if norm_name != NO_NORM and not entry.norms:
        raise ValueError(
            f"architecture {architecture_name!r} takes no representation normalisation; got norm {norm_name!r}"
        )
    parts = [architecture_name]
    if attention_norm != NO_NORM:
        parts.append(attention_norm)
    if norm_name != NO_NORM:
        parts.append(norm_name)
    return "-".join(parts)


def _model_table() -> dict[str, tuple[str, str, str]]:
    """Every model name -> (architecture, attention_norm, norm), in the order of rows
    and legends: per architecture, per normalisation, without then with LipschitzNorm."""
    global _MODEL_TABLE
    if _MODEL_TABLE is not None:
        return _MODEL_TABLE
    table: dict[str, tuple[str, str, str]] = {}
    for entry in ARCHITECTURES.values():
        for norm_name in norm_names() if entry.norms else (NO_NORM,):
            for attention_norm in entry.attention_norms:
                name = compose_model(entry.name, attention_norm, norm_name)
                if name in table:
                    raise ValueError(
                        f"model name {name!r} would mean both {table[name]} and "
                        f"{(entry.name, attention_norm, norm_name)}; choose another name"
                    )
                table[name] = (entry.name, attention_norm, norm_name)
    _MODEL_TABLE = table
    return table


def model_names() -> tuple[str, ...]:
    """Every model name the registry composes, in the order of rows and legends (the
    same tuple until the registry changes)."""
    global _MODEL_NAMES
    table = _model_table()
    if _MODEL_NAMES is None or _MODEL_NAMES[0] is not table:
        _MODEL_NAMES = (table, tuple(table))
    return _MODEL_NAMES[1]


_MODEL_NAMES: tuple[dict, tuple[str, ...]] | None = None


def parse_model(name: str) -> tuple[str, str, str]:
    """`gat-lip-pairnorm` -> `("gat", "lip", "pairnorm")`; ValueError listing the names."""
    table = _model_table()
    if name not in table:
        raise _unknown("model", name, table)
    return table[name]


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
            raise _unknown("attention_norm", name, ATTENTION_NORMS)
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


def resolve(factory: Factory) -> Callable[..., Any]:
    """A factory itself, or the attribute a `"module:attribute"` string names (imported now)."""
    if callable(factory):
        return factory
    module_name, _, attribute = factory.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    return target


# --- plugins ------------------------------------------------------------------------

_LOADED_PLUGINS: dict[str, Any] = {}


def load_plugin(spec: str) -> Any:
    """Import a plugin: a Python file (a path, or a name ending in ``.py``) or an
    importable module, which registers entries when imported. Loading one twice is a
    no-op. A missing file or module, or one whose import raises, is a ValueError
    naming it and why."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"plugin must be a file path or a module name, got {spec!r}")
    as_path = Path(spec)
    is_file = spec.endswith(".py") or "/" in spec or as_path.is_file()
    key = str(as_path.resolve()) if is_file else spec
    if key in _LOADED_PLUGINS:
        return _LOADED_PLUGINS[key]
    if is_file:
        if not as_path.is_file():
            raise ValueError(f"plugin file {spec!r} does not exist")
        module_name = f"lipnorm_plugin_{as_path.stem}_{len(_LOADED_PLUGINS)}"
        module_spec = importlib.util.spec_from_file_location(module_name, as_path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_name] = module
        where = f"plugin file {spec!r}"
        load = lambda: module_spec.loader.exec_module(module)  # noqa: E731
    else:
        where = f"plugin module {spec!r}"
        if importlib.util.find_spec(spec.split(".")[0]) is None:
            raise ValueError(f"{where} is neither a file nor an importable module")
        module = None
        load = lambda: importlib.import_module(spec)  # noqa: E731
    try:
        loaded = load()
    except Exception as err:
        if is_file:
            sys.modules.pop(module_name, None)
        raise ValueError(f"{where} failed to import: {type(err).__name__}: {err}") from err
    module = module if is_file else loaded
    _LOADED_PLUGINS[key] = module
    return module


def load_plugins(specs: Iterable[str] | None) -> list[Any]:
    """`load_plugin` of each, in order."""
    return [load_plugin(spec) for spec in specs or ()]


# --- lipnorm's own entries --------------------------------------------------------------
# A new one is one call here, its factory a "module:attribute" string so that nothing is
# imported before a model is built.

# seaborn's colour-blind palette; a Lipschitz variant sits next to its baseline.
register_architecture(
    "gat", label="GAT", colour="#0173b2", lip=True, lip_colour="#de8f05",
    model="lipnorm.nn.models.deep:DeepGAT.from_config", dropout=(0.6, 0.3),
    seeds_together="lipnorm.nn.models.seeds:SeedBatchedGAT", checkpointable=True,
)
register_architecture(
    "gt", label="GT", colour="#cc78bc", lip=True, lip_colour="#ca9161",
    model="lipnorm.nn.models.deep:DeepGT.from_config", norms=False, dropout=(0.5, 0.3), projections=4,
    checkpointable=True,
)
# GT and the published classic GAT take no representation normalisation (as before:
# no model gt-pairnorm); the classic GAT has no LipschitzNorm variant either, no
# checkpointed blocks, and is trained on the whole graph, as in DGL's example.
register_architecture(
    "gat-classic", label="GAT (classic)", colour="#949494",
    model="lipnorm.nn.models.classic:ClassicGAT.from_config", norms=False, dropout=(0.6, 0.6), full_batch_only=True,
)
register_norm(
    "pairnorm", label="PairNorm", colour="#029e73", lip_colour="#d55e00",
    factory="lipnorm.nn.norm.pairnorm:pairnorm_layer", attribute="pairnorms",
)
# The literature's remedies for deep GNNs (lipnorm.nn.norm, lipnorm.nn.conv.gcn).
register_norm(
    "batchnorm", label="BatchNorm", colour="#56b4e9", lip_colour="#0072b2",
    factory="lipnorm.nn.norm.batchnorm:batchnorm_layer",
)
register_norm(
    "dgn", label="DGN", colour="#fbafe4", lip_colour="#cc79a7",
    factory="lipnorm.nn.norm.dgn:dgn_layer",
)
# GCN (Kipf & Welling, dgl.nn.GraphConv): the non-attention reference architecture;
# feature dropout 0.5 as Kipf's, no attention to drop out.
register_architecture(
    "gcn", label="GCN", colour="#000000", layer="lipnorm.nn.conv.gcn:gcn_layer", attention=False, dropout=(0.5, 0.0),
)
_DATASET_STYLE = {
    "cora": ("Cora", "#0173b2"),
    "citeseer": ("CiteSeer", "#de8f05"),
    "pubmed": ("PubMed", "#029e73"),
    "coauthor-cs": ("CoauthorCS", "#d55e00"),
    "ppi": ("PPI", "#cc78bc"),
    "ogbn-arxiv": ("ogbn-arxiv", "#ca9161"),
    "csbm": ("CSBM", "#949494"),
}
# The sizes of lipnorm's own datasets as `lipnorm.data` loads them: self-loops removed,
# then one per node added (`build_node_dataset`). Cora and CiteSeer counted from the
# loaded graphs; PubMed: DGL's 88,651 edges less its 3 self-loops (PyG's 88,648);
# Coauthor-CS: DGL's 163,788 (no self-loops); PPI: one batched graph of its 24
# graphs, 2 x the GAT paper's 818,716 undirected edges (approximate: a self-loop in
# the source would be counted twice, under 0.1 % of the edges); ogbn-arxiv:
# `dgl.to_bidirected` of the 1,166,243 citations, 2,315,598 edges. csbm's follow from
# its parameters (`lipnorm.plan.dataset_sizes`).
_BUILTIN_SIZES = {
    "cora": DatasetSizes(nodes=2708, edges=10556 + 2708, features=1433, classes=7, train_nodes=140),
    "citeseer": DatasetSizes(nodes=3327, edges=9104 + 3327, features=3703, classes=6, train_nodes=120),
    "pubmed": DatasetSizes(nodes=19717, edges=88648 + 19717, features=500, classes=3, train_nodes=60),
    "coauthor-cs": DatasetSizes(nodes=18333, edges=163788 + 18333, features=6805, classes=15),
    "ppi": DatasetSizes(nodes=56944, edges=2 * 818716 + 56944, features=50, classes=121),
    "ogbn-arxiv": DatasetSizes(nodes=169343, edges=2315598 + 169343, features=128, classes=40),
}
for _name in BUILTIN_DATASETS:
    register_dataset(
        _name, label=_DATASET_STYLE[_name][0], colour=_DATASET_STYLE[_name][1], sizes=_BUILTIN_SIZES.get(_name)
    )
