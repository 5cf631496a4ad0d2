"""The registry's entries: what an architecture, a representation normalisation and a
dataset are (`Architecture`, with the capability flags its runs are planned and trained
by; `Norm`; `Dataset` and the `DatasetSizes` the planner reads), the tables holding them
(`ARCHITECTURES`, `NORMS`, `DATASETS`), their lookups, the checks every registry shares
(`check_new`, `check_factory`, also `lipnorm.experiments`'s) and `resolve`, which turns
a factory into the callable it names. Registering is `lipnorm.registry.register`'s.
"""

from __future__ import annotations

import importlib
import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Union

from lipnorm.registry.plugins import loaded_plugins

# LipschitzNorm off or on in the attention layers (lipnorm.nn.functional.NORMS).
ATTENTION_NORMS = ("none", "lip")
NO_NORM = "none"
# The gradient groups a parameter can belong to (lipnorm.nn.models.numbering.GROUPS).
PARAMETER_GROUPS = ("fc", "attn", "bias", "res", "norm")

Factory = Union[Callable[..., Any], str]


@dataclass(frozen=True)
class Architecture:
    """A registered network (see `register_architecture`): its factory, its looks, and
    the capability flags its runs are built, trained and planned by (`lip`, `norms`,
    `attention`, `projections`, `seed_batch`, `checkpointable`, `full_batch_only`)."""

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
    seed_batch: Factory | None = None
    seed_batch_check: Factory | None = None
    checkpointable: bool = False
    full_batch_only: bool = False

    @property
    def attention_norms(self) -> tuple[str, ...]:
        return ATTENTION_NORMS if self.lip else (NO_NORM,)

    @property
    def seeds_together(self) -> Factory | None:
        """Deprecated: `seed_batch` (warns)."""
        warnings.warn("Architecture.seeds_together is deprecated: use Architecture.seed_batch", DeprecationWarning,
                      stacklevel=2)
        return self.seed_batch

    @property
    def seeds_together_check(self) -> Factory | None:
        """Deprecated: `seed_batch_check` (warns)."""
        warnings.warn("Architecture.seeds_together_check is deprecated: use Architecture.seed_batch_check",
                      DeprecationWarning, stacklevel=2)
        return self.seed_batch_check


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
class RawFiles:
    """Where a dataset's raw files come from, for `lipnorm.data.sources` to fetch (from a
    mirror or through DGL's / OGB's download code) and verify before they are parsed.

    `kind`: ``"dgl"`` (the archive ``dataset/<archive>.zip`` of DGL's data server,
    extracted into the folder DGL itself would use) or ``"ogb"`` (the archive OGB's
    ``master.csv`` names for dataset `archive`); `files`: the raw files the dataset's
    `read` parses, relative to its folder; `sha256`: their pinned SHA-256 sums, by
    relative path, or None to record them on first fetch (trust on first use)."""

    kind: str
    archive: str
    files: tuple[str, ...]
    sha256: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        if self.kind not in RAW_KINDS:
            raise ValueError(f"raw files: kind {self.kind!r} must be one of {', '.join(RAW_KINDS)}")
        if not isinstance(self.archive, str) or not self.archive:
            raise ValueError(f"raw files: archive must be a non-empty string, got {self.archive!r}")
        if isinstance(self.files, str) or not self.files or not all(isinstance(f, str) and f for f in self.files):
            raise ValueError(f"raw files: files must be a non-empty tuple of relative paths, got {self.files!r}")
        object.__setattr__(self, "files", tuple(self.files))
        if self.sha256 is not None:
            object.__setattr__(self, "sha256", dict(self.sha256))


# Where `RawFiles` can come from (`lipnorm.data.sources.Source`).
RAW_KINDS = ("dgl", "ogb")
# The options of `lipnorm.data.load_dataset` a dataset's `read` may take (its `options`):
# `raw_features` (the feature rows as stored, where the loader normalises them) and
# `csbm` (the parameters of a generated graph).
DATASET_OPTIONS = ("raw_features", "csbm")


@dataclass(frozen=True)
class Dataset:
    """A registered dataset (see `register_dataset`): a plugin's gives `load`, lipnorm's
    own (and any dataset that `lipnorm.data` fetches and verifies) gives `read`, with its
    `raw` files and the `options` of `lipnorm.data.load_dataset` it takes."""

    name: str
    label: str
    colour: str
    load: Factory | None
    sizes: DatasetSizes | None = None
    read: Factory | None = None
    raw: RawFiles | None = None
    options: tuple[str, ...] = ()


ARCHITECTURES: dict[str, Architecture] = {}
NORMS: dict[str, Norm] = {}
DATASETS: dict[str, Dataset] = {}

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


# The kinds a plugin can add names to.
PLUGIN_KINDS = ("model", "architecture", "norm", "dataset")


def unknown(kind: str, name: Any, names: Iterable[str]) -> ValueError:
    """The error for a `kind` value `name` that is not one of `names`; for a kind a
    plugin can add to, it says which plugins are loaded and how to load one."""
    return ValueError(f"unknown {kind} {name!r}; allowed: {', '.join(names)}{plugin_hint(kind)}")


def plugin_hint(kind: str) -> str:
    """"; plugins loaded: ... (how to load one)" for a `kind` in `PLUGIN_KINDS`, else ""."""
    if kind not in PLUGIN_KINDS:
        return ""
    loaded = ", ".join(loaded_plugins()) or "none"
    return (
        f"; plugins loaded: {loaded} (a plugin's names need --plugin PATH_OR_MODULE, "
        "or plugins: [PATH_OR_MODULE] in the workflow config)"
    )


def architecture(name: str) -> Architecture:
    if name not in ARCHITECTURES:
        raise unknown("architecture", name, ARCHITECTURES)
    return ARCHITECTURES[name]


def norm(name: str) -> Norm | None:
    """The entry of `name`; None for "none"."""
    if name == NO_NORM:
        return None
    if name not in NORMS:
        raise unknown("norm", name, norm_names())
    return NORMS[name]


def dataset(name: str) -> Dataset:
    if name not in DATASETS:
        raise unknown("dataset", name, DATASETS)
    return DATASETS[name]


def architecture_names() -> tuple[str, ...]:
    return tuple(ARCHITECTURES)


def norm_names() -> tuple[str, ...]:
    """"none", then the registered normalisations."""
    return (NO_NORM, *NORMS)


def dataset_names() -> tuple[str, ...]:
    return tuple(DATASETS)



# Factories of lipnorm's own parts that moved, by their old "module:attribute" string (a
# plugin's registration may name one): each moved into the module that registers its part.
MOVED_FACTORIES = {
    "lipnorm.nn.conv.gcn:gcn_layer": "lipnorm.architectures.gcn:gcn_layer",
    "lipnorm.nn.norm.pairnorm:pairnorm_layer": "lipnorm.normalisations.pairnorm:pairnorm_layer",
    "lipnorm.nn.norm.batchnorm:batchnorm_layer": "lipnorm.normalisations.batchnorm:batchnorm_layer",
    "lipnorm.nn.norm.dgn:dgn_layer": "lipnorm.normalisations.dgn:dgn_layer",
}


def resolve(factory: Factory) -> Callable[..., Any]:
    """A factory itself, or the attribute a `"module:attribute"` string names (imported now).
    An old string of `MOVED_FACTORIES` gives the factory at its new place and warns
    (`DeprecationWarning`) naming it."""
    if callable(factory):
        return factory
    if factory in MOVED_FACTORIES:
        warnings.warn(f"factory {factory!r} has moved: name {MOVED_FACTORIES[factory]!r}", DeprecationWarning,
                      stacklevel=2)
        factory = MOVED_FACTORIES[factory]
    module_name, _, attribute = factory.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    return target
