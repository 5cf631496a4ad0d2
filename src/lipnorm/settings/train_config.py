"""Training settings: `TrainConfig` (validated, recipe defaults filled by `resolved`),
read from a YAML/JSON file and flags by `load_config`, with the defaults and checks of
its cluster-batch and device settings (`check_batching`, `check_device`), which the
training modules (`lipnorm.train`) import from here.

Torch-free (as the model's settings it checks, `lipnorm.settings.model_config`): every
check of a run's settings runs before `lipnorm train` imports torch and DGL."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from lipnorm import registry
from lipnorm.settings.constants import BATCHINGS, DEFAULT_DATA_ROOT, PLANETOID
from lipnorm.settings.csbm import csbm_params
from lipnorm.settings.model_config import ModelConfig
from lipnorm.settings.recipes import MISSING_POOLS, recipe_defaults


PROTOCOLS = ("best-val", "official")
# The settings a run passes on to `ModelConfig` unchanged.
MODEL_SETTINGS = (
    "model", "architecture", "attention_norm", "norm", "residual", "depth", "heads", "hidden",
    "alpha", "variant", "feat_drop", "attn_drop", "recipe", "initial_residual", "checkpoint",
    "batchnorm_momentum", "dgn_skip_weight", "output_relu",
)


def norm_extras() -> tuple[str, ...]:
    """The registered representation normalisations (`none` aside): what `norm_extra` takes."""
    return registry.norm_names()[1:]


def __getattr__(name: str):
    # `NORM_EXTRAS`: computed on access, since plugins register more.
    if name == "NORM_EXTRAS":
        return norm_extras()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Default epochs between saves of the training state: its cost is under 1 % of the
# run's time (benchmarks/run_state_cost.py, docs/performance.md).
SAVE_EVERY = 50
# Settings that may differ between a saved training state and the run resuming it: they
# change when the state is saved, not what is computed.
RESUME_INDIFFERENT = ("save_every", "checkpoint")
# Cluster batches (`lipnorm.train.cluster_batches`) where K (`partitions`) or B
# (`batch_partitions`) is not given follow the graph (`cluster_counts`): an epoch of
# ceil(nodes / CLUSTER_BATCH_NODES) batches, at least CLUSTER_MIN_BATCHES, each of
# B = max(CLUSTER_MIN_BATCH_PARTITIONS, ceil(CLUSTER_MIN_PARTITIONS / batches)) parts,
# K = batches * B. On Cora (2,708 nodes) that is 4 batches of 16 of 64 parts, each a
# quarter of the graph: the test accuracy stayed within a point of full batch's, where 8
# batches of 32 parts lost 5 points; many small parts a batch mix the clusters' labels.
# At ogbn-arxiv's size (169,343 nodes) it is K 400, B 4: batches of ~1,700 nodes, one
# epoch at depth 30, 8 x 64 in 3.8 GB against 13.5 GB with Cora's K 64, B 16
# (docs/performance.md).
CLUSTER_BATCH_NODES = 1700
CLUSTER_MIN_BATCHES = 4
CLUSTER_MIN_BATCH_PARTITIONS = 4
CLUSTER_MIN_PARTITIONS = 64
# The devices a run may ask for (`lipnorm.train.device.resolve_device` resolves them).
DEVICE_FORMS = "cpu, cuda, cuda:N (N a GPU index: 0, 1, ...) or auto (cuda if usable, else cpu)"
_DEVICE_RE = re.compile(r"cpu|auto|cuda(:[0-9]+)?")  # ASCII digits only, as the schema


@dataclass(frozen=True)
class TrainConfig:
    """Every setting of one run; `resolved()` gives the canonical, validated form.

    The settings defaulting to None take their value from `recipe` (`recipe_defaults`;
    dropouts the recipe leaves unset: the architecture's, as registered), so that one
    given explicitly wins. `partitions` and `batch_partitions` left None stay None: the
    run sizes them by the loaded graph and records them apart (summary.json's
    `cluster_batches`).

    `model` names a composition `<architecture>[-lip][-<norm>]` (`lipnorm.registry`);
    `architecture`, `attention_norm` and `norm`, where given, replace that part of it
    (`norm_extra` is the older spelling of `norm`), and `resolved` records all four.
    """

    dataset: str = "cora"
    model: str = "gat"
    norm_extra: str | None = None
    architecture: str | None = None
    attention_norm: str | None = None
    norm: str | None = None
    residual: bool = False
    # GCNII's initial residual weight (0: off) and DropEdge's rate (0: off): remedies for
    # deep networks (lipnorm.nn.residual, lipnorm.nn.dropedge).
    initial_residual: float = 0.0
    dropedge: float = 0.0
    # Activation checkpointing (lipnorm.nn.models.deep): less memory, the same numbers.
    checkpoint: bool = False
    # "full": each training step on the whole graph; "cluster": Cluster-GCN batches, each
    # the subgraph of `batch_partitions` of the graph's `partitions` METIS parts
    # (lipnorm.train.cluster_batches; the two counts are used by "cluster" only). None:
    # sized by the graph once it is loaded (`cluster_counts`).
    batching: str = "full"
    partitions: int | None = None
    batch_partitions: int | None = None
    recipe: str = "lipnorm"
    depth: int = 2
    alpha: float = 1.0
    heads: int | None = None
    hidden: int | None = None
    feat_drop: float | None = None
    attn_drop: float | None = None
    # Of the remedies' normalisations (lipnorm.nn.norm): BatchNorm's running-statistics
    # momentum and DGN's lambda; None = the recipe's.
    batchnorm_momentum: float | None = None
    dgn_skip_weight: float | None = None
    # Recipe dgn: the ReLU on the logits (DGN's code; DeCorr's GAT has none: False).
    output_relu: bool = True
    missing_rate: float = 0.0
    # Whose features `missing_rate` erases (lipnorm.settings.recipes.MISSING_POOLS); None:
    # the recipe's ("evaluation" for snr, "unlabelled" for the others).
    missing_pool: str | None = None
    seed: int = 0
    epochs: int | None = None
    lr: float | None = None
    weight_decay: float | None = None
    protocol: str | None = None
    patience: int | None = None
    variant: str | None = None
    threads: int = 1
    flush_denormal: bool = False
    grad_log_every: int = 10
    # Epochs between saves of the training state (`lipnorm.train.run_state`); a signal saves too.
    save_every: int = SAVE_EVERY
    layer_stats: bool = True
    mask: str | None = None
    data_root: str = DEFAULT_DATA_ROOT
    mirror: str | None = None
    csbm: str | None = None
    # cpu, cuda, cuda:N or auto (lipnorm.train.device); `run` records the device it resolved to.
    device: str = "cpu"

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any]) -> TrainConfig:
        """A config from `settings` (keys with `_` or `-`); unknown keys are errors."""
        names = [field.name for field in dataclasses.fields(cls)]
        normalised = {str(key).replace("-", "_"): value for key, value in settings.items()}
        unknown = sorted(set(normalised) - set(names))
        if unknown:
            raise ValueError(
                f"unknown training setting(s) {', '.join(map(repr, unknown))}; "
                f"allowed: {', '.join(names)}"
            )
        return cls(**normalised)

    def model_config(self, in_feats: int, num_classes: int) -> ModelConfig:
        shared = {name: getattr(self, name) for name in MODEL_SETTINGS}
        return ModelConfig(in_feats=in_feats, num_classes=num_classes, **shared)

    def with_recipe_defaults(self) -> TrainConfig:
        """A copy with every unset (None) recipe-dependent setting filled from `recipe`."""
        _check_types(self)
        defaults = recipe_defaults(self.recipe, self.depth, self.dataset, self.missing_rate)
        return dataclasses.replace(
            self, **{name: value for name, value in defaults.items() if getattr(self, name) is None}
        )

    @property
    def raw_features(self) -> bool:
        """Whether the run trains on the stored (not row-normalised) planetoid features:
        the official recipe, on a dataset whose DGL loader normalises them."""
        return self.recipe == "official" and self.dataset in PLANETOID

    def validate(self) -> None:
        """Raise ValueError naming the first bad setting; touches no file but `mask`.

        The recipe's defaults are filled in first (on a copy), so unset settings are fine.
        """
        self.with_recipe_defaults()._validate_filled()

    def _validate_filled(self) -> None:
        _check_types(self)
        registry.dataset(self.dataset)  # raises on an unknown one, naming the plugins loaded
        self.model_parts()
        # The model's own checks name the value: model, depth, heads, hidden, alpha,
        # variant, dropouts (in_feats and num_classes are only known after loading).
        self.model_config(in_feats=1, num_classes=1).validate()
        if self.epochs < 1:
            raise ValueError(f"epochs must be >= 1, got {self.epochs!r}")
        if not 0 <= self.dropedge < 1:
            raise ValueError(f"dropedge must be a rate in [0, 1) (0: off), got {self.dropedge!r}")
        check_batching(
            self.batching, self.partitions, self.batch_partitions, self.model_parts()[0], self.model
        )
        if not 0 <= self.missing_rate <= 100:
            raise ValueError(f"missing_rate must be in [0, 100] (percent), got {self.missing_rate!r}")
        if self.missing_pool not in MISSING_POOLS:
            raise ValueError(f"unknown missing_pool {self.missing_pool!r}; allowed: {', '.join(MISSING_POOLS)}")
        if not 0 <= self.seed < 2**32:
            raise ValueError(f"seed must be in [0, 2**32), got {self.seed!r}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be a finite number > 0, got {self.lr!r}")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise ValueError(f"weight_decay must be a finite number >= 0, got {self.weight_decay!r}")
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {self.protocol!r}; allowed: {', '.join(PROTOCOLS)}")
        if self.patience is not None:
            if self.protocol != "best-val":
                raise ValueError(
                    f"patience={self.patience!r} applies to protocol 'best-val' only, "
                    f"not {self.protocol!r} (which trains for all epochs)"
                )
            if self.patience < 1:
                raise ValueError(f"patience must be >= 1, got {self.patience!r}")
        for name in ("threads", "grad_log_every", "save_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        check_device(self.device)
        if self.mask is not None and not Path(self.mask).is_file():
            raise ValueError(f"mask file {self.mask!r} does not exist")
        if self.csbm is not None:
            if self.dataset != "csbm":
                raise ValueError(f"csbm={self.csbm!r} applies to dataset 'csbm' only, not {self.dataset!r}")
            csbm_params(self.csbm)  # raises on a bad spec

    def model_parts(self) -> tuple[str, str, str]:
        """`(architecture, attention_norm, norm)` of the run (see the class docstring)."""
        norm = self.norm if self.norm_extra is None else _norm_of_extra(self.model, self.norm_extra, self.norm)
        return registry.model_parts(self.model, self.architecture, self.attention_norm, norm)

    def resolved(self) -> TrainConfig:
        """Validated copy: the recipe's defaults filled in, then the architecture's
        dropouts where the recipe has none (`registry.architecture(...).dropout`),
        `norm_extra` folded into `norm`, `model` composed of the parts, whole floats as
        floats. What a run trains with and records (`lipnorm.train.runs`): every value
        known before the dataset is loaded; the model's settings derive from it
        (`model_config`) and nothing is written back into it."""
        filled = self.with_recipe_defaults()
        filled._validate_filled()
        architecture, attention_norm, norm = filled.model_parts()
        model = registry.compose_model(architecture, attention_norm, norm)
        feat_drop, attn_drop = registry.architecture(architecture).dropout
        if filled.feat_drop is None:
            filled = dataclasses.replace(filled, feat_drop=feat_drop)
        if filled.attn_drop is None:
            filled = dataclasses.replace(filled, attn_drop=attn_drop)
        floats = {
            field.name: float(getattr(filled, field.name))
            for field in dataclasses.fields(filled)
            if _allowed_types(field.name)[0] is float and getattr(filled, field.name) is not None
        }
        return dataclasses.replace(
            filled, model=model, norm_extra=None, architecture=architecture,
            attention_norm=attention_norm, norm=norm, **floats,
        )


def _norm_of_extra(model: str, norm_extra: str, norm: str | None) -> str:
    """The `norm` that `norm_extra` (its older spelling: a normalisation added to
    `model`) names; ValueError on one the model cannot take, or a `norm` saying otherwise."""
    extras = norm_extras()
    if norm_extra not in extras:
        raise ValueError(f"unknown norm_extra {norm_extra!r}; allowed: {', '.join(extras)}")
    architecture, _, has = registry.parse_model(model)
    why = (
        f"architecture {architecture!r} takes no representation normalisation"
        if not registry.architecture(architecture).norms
        else f"it has norm {has!r}" if has not in (registry.NO_NORM, norm_extra) else None
    )
    if why:
        raise ValueError(f"norm_extra {norm_extra!r} cannot be added to model {model!r}: {why}")
    if norm not in (None, norm_extra):
        raise ValueError(f"norm_extra={norm_extra!r} and norm={norm!r} disagree; give one")
    return norm_extra


_TYPE_WORDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string", type(None): "null"}


@functools.lru_cache(maxsize=1)
def _type_hints() -> dict[str, Any]:
    # Resolved once: get_type_hints evaluates every annotation's string (1 ms a call,
    # and each check asks once per field).
    return typing.get_type_hints(TrainConfig)


def _allowed_types(name: str) -> tuple[type, ...]:
    """The value types field `name` accepts (a float field takes ints too)."""
    hint = _type_hints()[name]
    types = typing.get_args(hint) or (hint,)
    return types + ((int,) if float in types else ())


def _check_types(config: TrainConfig) -> None:
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        allowed = _allowed_types(field.name)
        # bool is an int subclass: accept it only where the field is a bool.
        if isinstance(value, bool) is not (bool in allowed) or not isinstance(value, allowed):
            words = dict.fromkeys(_TYPE_WORDS[t] for t in allowed if t is not int or float not in allowed)
            raise ValueError(f"{field.name} must be {' or '.join(words)}, got {value!r}")


def check_batching(
    batching: str, partitions: int | None, batch_partitions: int | None, architecture: str, model: str
) -> None:
    """ValueError naming the first bad batching setting (the node count is checked by
    `lipnorm.train.cluster_batches.partition_sampler`, once the graph is loaded)."""
    if batching not in BATCHINGS:
        raise ValueError(f"unknown batching {batching!r}; allowed: {', '.join(BATCHINGS)}")
    for name, value in (("partitions", partitions), ("batch_partitions", batch_partitions)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    if None not in (partitions, batch_partitions) and batch_partitions > partitions:
        raise ValueError(
            f"batch_partitions={batch_partitions} must be at most partitions={partitions} "
            "(a batch is that many of the partitions)"
        )
    if batching == "cluster" and registry.architecture(architecture).full_batch_only:
        batched = [name for name, entry in registry.ARCHITECTURES.items() if not entry.full_batch_only]
        raise ValueError(
            f"batching='cluster': model {model!r} is trained on the whole graph only: architecture "
            f"{architecture!r} is registered with full_batch_only=True (cluster batches apply to "
            f"{', '.join(batched)})"
        )


class ClusterCounts(typing.NamedTuple):
    """A run's cluster batches: K parts, B a batch, and why (for the run's log)."""

    partitions: int
    batch_partitions: int
    reason: str


def cluster_counts(nodes: int, partitions: int | None = None, batch_partitions: int | None = None) -> ClusterCounts:
    """K and B for a graph of `nodes` nodes: those given, the others by the rule above
    `CLUSTER_BATCH_NODES` (given one, the other makes the rule's number of batches).
    K is at most `nodes` (a part holds a node at least) where the rule chooses it; a
    given K over `nodes` is `partition_sampler`'s error, and the result is checked as
    `check_batching` checks given counts."""
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise ValueError(f"nodes must be an integer >= 1, got {nodes!r}")
    if partitions is not None and batch_partitions is not None:
        return ClusterCounts(partitions, batch_partitions, "as given")
    batches = max(CLUSTER_MIN_BATCHES, math.ceil(nodes / CLUSTER_BATCH_NODES))
    rule = (
        f"{nodes} nodes: {batches} batches an epoch, ceil(nodes / {CLUSTER_BATCH_NODES}) and at "
        f"least {CLUSTER_MIN_BATCHES}, of at least {CLUSTER_MIN_BATCH_PARTITIONS} parts each and "
        f"{CLUSTER_MIN_PARTITIONS} parts in all"
    )
    if partitions is None and batch_partitions is None:
        batch_partitions = max(CLUSTER_MIN_BATCH_PARTITIONS, math.ceil(CLUSTER_MIN_PARTITIONS / batches))
        partitions = min(nodes, batches * batch_partitions)
        batch_partitions = math.ceil(partitions / batches)  # B again where K was cut to the nodes
        reason = f"K and B by the graph's size ({rule})"
    elif partitions is None:
        partitions = min(nodes, batches * batch_partitions)
        reason = f"B as given, K by the graph's size ({rule})"
    else:
        batch_partitions = min(partitions, math.ceil(partitions / batches))
        reason = f"K as given, B by the graph's size ({rule})"
    if batch_partitions > partitions:
        raise ValueError(
            f"batch_partitions={batch_partitions} must be at most partitions={partitions} "
            f"(the graph's {nodes} nodes make at most {nodes} parts)"
        )
    return ClusterCounts(partitions, batch_partitions, reason)


def check_device(text: str) -> str:
    """`text` if it is a device this project accepts (`DEVICE_FORMS`), else ValueError naming it."""
    if not isinstance(text, str) or not _DEVICE_RE.fullmatch(text):
        raise ValueError(f"unknown device {text!r}; allowed: {DEVICE_FORMS}")
    return text


def load_config(path: str | Path | None, overrides: Mapping[str, Any]) -> TrainConfig:
    """Settings from a YAML/JSON file (if any), with `overrides` (the flags) on top."""
    settings: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if path.suffix not in (".json", ".yaml", ".yml"):
            raise ValueError(f"config file {str(path)!r} must end in .json, .yaml or .yml")
        if not path.is_file():
            raise ValueError(f"config file {str(path)!r} does not exist")
        text = path.read_text()
        if path.suffix == ".json":
            loaded = json.loads(text)
        else:
            from lipnorm.yaml_numbers import load_yaml

            loaded = load_yaml(text)  # YAML 1.2 numbers: `lr: 5e-3` is a number
        if not isinstance(loaded, dict):
            raise ValueError(f"config file {str(path)!r} must hold a mapping of settings")
        # Normalise keys now so that a file's `missing-rate` and a flag's `missing_rate`
        # are one key, and the flag wins.
        settings = {str(key).replace("-", "_"): value for key, value in loaded.items()}
    settings.update(overrides)
    return TrainConfig.from_mapping(settings)