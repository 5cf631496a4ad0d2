"""One training run: node classification, full batch or on Cluster-GCN batches
(`batching`, `lipnorm.cluster_batches`), with per-layer gradient logging.

`run(config, out)` validates the settings, loads the dataset, erases the feature rows of
the missing-features mask, trains with Adam and evaluates every epoch, and writes the
run directory of docs/architecture.md (`summary.json`, `metrics.parquet`,
`gradnorms.parquet`, `outnorms.parquet`, `layerstats.parquet`, `train.log`) atomically.

Training state (`lipnorm.run_state`): every `save_every` epochs, and when SIGTERM or SIGINT
arrives (at the end of the epoch under way), the model, optimizer, scheduler, random
streams, the rows so far and the log are saved beside `out` (`run_state.state_path`). The
same call finds that state, refuses it if another configuration or version saved it, and
continues: the run directory is the one an uninterrupted run writes (timings excepted).
After a signal the run raises `run_state.RunInterrupted` (the CLI's exit code 128 + N).

Per-layer representation diagnostics (`lipnorm.diagnostics`: Dirichlet energy, MAD,
Rayleigh quotient, attention entropy, output norm) are measured on the eval-mode
forward of the epochs whose gradient norms are logged, and once more after the last
epoch of a run that did not diverge. They read the forward `evaluate` runs anyway (one
extra eval forward at the end) and draw no random numbers, so a run's training numbers
are the same with and without them (`layer_stats=False`).

Protocols:
- "best-val": the test metric at the epoch of best validation metric (ties: the earlier
  epoch); `patience` stops training after that many epochs without a new best.
- "official": as the authors' public code: `ReduceLROnPlateau` (factor 0.1, patience 10)
  stepped on the validation loss every epoch, and the test metric of the last epoch.

Recipes (`TrainConfig.recipe`) supply the defaults of the settings left unset (None):
- "lipnorm" (default): this project's settings, `LIPNORM_DEFAULTS`.
- "official": what the authors' `train_deepgat_missing.py` runs (`OFFICIAL_DEFAULTS`,
  `official_epochs`): their DeepGAT (`ModelConfig.recipe`), 8 heads x 64, LipschitzNorm
  variant "official", Adam lr 0.01 with weight decay 5e-4, protocol "official", epochs by
  depth as their launcher, and the planetoid datasets' features as stored (PyG's
  `Planetoid` does not row-normalise them; DGL's loader does, see
  `lipnorm.data.load_dataset(raw_features=...)`); other datasets are loaded as always,
  their loaders not normalising.
A setting given explicitly wins over the recipe's default, e.g. `epochs=150` for a
reduced official run.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import logging
import math
import platform
import random
import sys
import time
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import dgl
import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from tqdm import tqdm

import lipnorm
from lipnorm import cluster_batches, data, registry
from lipnorm import device as devices
from lipnorm import run_state
from lipnorm.cluster_batches import ClusterBatches
from lipnorm.device import check_device, resolve_device
from lipnorm.diagnostics import GraphDiagnostics
from lipnorm.io import atomic_dir, write_json, write_parquet
from lipnorm.recipes import LIPNORM_DEFAULTS, OFFICIAL_DEFAULTS, RECIPES, official_epochs, recipe_defaults
from lipnorm.nn.dropedge import DropEdge
from lipnorm.nn.models import (
    ModelConfig,
    attention_layers,
    build_model,
    combine_parts,
    gradient_groups,
    returns_attention,
)

PROTOCOLS = ("best-val", "official")
# The settings a run passes on to `ModelConfig` unchanged.
MODEL_SETTINGS = (
    "model", "architecture", "attention_norm", "norm", "residual", "depth", "heads", "hidden",
    "alpha", "variant", "feat_drop", "attn_drop", "recipe", "initial_residual", "checkpoint",
)


def norm_extras() -> tuple[str, ...]:
    """The registered representation normalisations (`none` aside): what `norm_extra` takes."""
    return registry.norm_names()[1:]


def __getattr__(name: str):
    # `NORM_EXTRAS`: computed on access, since plugins register more.
    if name == "NORM_EXTRAS":
        return norm_extras()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
# The authors' code uses `ReduceLROnPlateau(optimizer)`, i.e. torch's defaults.
PLATEAU_FACTOR = 0.1
PLATEAU_PATIENCE = 10

METRICS_COLUMNS = [
    "epoch", "train_loss", "train_metric", "val_loss", "val_metric", "test_metric", "lr", "seconds"
]
GRADNORMS_COLUMNS = ["epoch", "layer", "kind", "group", "grad_norm"]
OUTNORMS_COLUMNS = ["epoch", "layer", "output_norm"]
LAYERSTATS_COLUMNS = ["epoch", "layer", "metric", "value"]
# Default epochs between saves of the training state: its cost is under 1 % of the
# run's time (benchmarks/run_state_cost.py, docs/performance.md).
SAVE_EVERY = 50
# Settings that may differ between a saved training state and the run resuming it: they
# change when the state is saved, not what is computed.
RESUME_INDIFFERENT = ("save_every", "checkpoint")

log = logging.getLogger("lipnorm.train")


@dataclass(frozen=True)
class TrainConfig:
    """Every setting of one run; `resolved()` gives the canonical, validated form.

    The settings defaulting to None take their value from `recipe` (`recipe_defaults`;
    dropouts: the architecture's, models.py), so that one given explicitly wins.

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
    # Activation checkpointing (lipnorm.nn.models): less memory, the same numbers.
    checkpoint: bool = False
    # "full": each training step on the whole graph; "cluster": Cluster-GCN batches, each
    # the subgraph of `batch_partitions` of the graph's `partitions` METIS parts
    # (lipnorm.cluster_batches; the two counts are used by "cluster" only).
    batching: str = "full"
    partitions: int = cluster_batches.DEFAULT_PARTITIONS
    batch_partitions: int = cluster_batches.DEFAULT_BATCH_PARTITIONS
    recipe: str = "lipnorm"
    depth: int = 2
    alpha: float = 1.0
    heads: int | None = None
    hidden: int | None = None
    feat_drop: float | None = None
    attn_drop: float | None = None
    missing_rate: float = 0.0
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
    # Epochs between saves of the training state (`lipnorm.run_state`); a signal saves too.
    save_every: int = SAVE_EVERY
    layer_stats: bool = True
    mask: str | None = None
    data_root: str = "resources/datasets"
    mirror: str | None = None
    csbm: str | None = None
    # cpu, cuda, cuda:N or auto (lipnorm.device); `run` records the device it resolved to.
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
        defaults = recipe_defaults(self.recipe, self.depth)
        return dataclasses.replace(
            self, **{name: value for name, value in defaults.items() if getattr(self, name) is None}
        )

    @property
    def raw_features(self) -> bool:
        """Whether the run trains on the stored (not row-normalised) planetoid features:
        the official recipe, on a dataset whose DGL loader normalises them."""
        return self.recipe == "official" and self.dataset in data.PLANETOID

    def validate(self) -> None:
        """Raise ValueError naming the first bad setting; touches no file but `mask`.

        The recipe's defaults are filled in first (on a copy), so unset settings are fine.
        """
        self.with_recipe_defaults()._validate_filled()

    def _validate_filled(self) -> None:
        _check_types(self)
        if self.dataset not in registry.dataset_names():
            raise ValueError(
                f"unknown dataset {self.dataset!r}; allowed: {', '.join(registry.dataset_names())}"
            )
        self.model_parts()
        # The model's own checks name the value: model, depth, heads, hidden, alpha,
        # variant, dropouts (in_feats and num_classes are only known after loading).
        self.model_config(in_feats=1, num_classes=1).validate()
        if self.epochs < 1:
            raise ValueError(f"epochs must be >= 1, got {self.epochs!r}")
        if not 0 <= self.dropedge < 1:
            raise ValueError(f"dropedge must be a rate in [0, 1) (0: off), got {self.dropedge!r}")
        cluster_batches.check_settings(
            self.batching, self.partitions, self.batch_partitions, self.model_parts()[0], self.model
        )
        if not 0 <= self.missing_rate <= 100:
            raise ValueError(f"missing_rate must be in [0, 100] (percent), got {self.missing_rate!r}")
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
            data.csbm_params(self.csbm)  # raises on a bad spec

    def model_parts(self) -> tuple[str, str, str]:
        """`(architecture, attention_norm, norm)` of the run (see the class docstring)."""
        model = self.model if self.norm_extra is None else _fold_norm_extra(self.model, self.norm_extra)
        if self.norm_extra is not None and self.norm not in (None, self.norm_extra):
            raise ValueError(f"norm_extra={self.norm_extra!r} and norm={self.norm!r} disagree; give one")
        return combine_parts(model, self.architecture, self.attention_norm, self.norm)

    def resolved(self) -> TrainConfig:
        """Validated copy: the recipe's defaults filled in, `norm_extra` folded into
        `norm`, `model` composed of the parts, whole floats as floats."""
        filled = self.with_recipe_defaults()
        filled._validate_filled()
        architecture, attention_norm, norm = filled.model_parts()
        model = registry.compose_model(architecture, attention_norm, norm)
        floats = {
            field.name: float(getattr(filled, field.name))
            for field in dataclasses.fields(filled)
            if _allowed_types(field.name)[0] is float and getattr(filled, field.name) is not None
        }
        return dataclasses.replace(
            filled, model=model, norm_extra=None, architecture=architecture,
            attention_norm=attention_norm, norm=norm, **floats,
        )


def _fold_norm_extra(model: str, norm_extra: str) -> str:
    """`gat` + `pairnorm` -> `gat-pairnorm` (idempotent on a model that has it)."""
    extras = norm_extras()
    if norm_extra not in extras:
        raise ValueError(f"unknown norm_extra {norm_extra!r}; allowed: {', '.join(extras)}")
    if model.endswith(f"-{norm_extra}"):
        return model
    combined = f"{model}-{norm_extra}"
    names = registry.model_names()
    allowed = [name for name in names if name.endswith(f"-{norm_extra}")]
    if combined not in names:
        raise ValueError(
            f"norm_extra {norm_extra!r} cannot be added to model {model!r}; it exists for: "
            f"{', '.join(name.removesuffix(f'-{norm_extra}') for name in allowed)}"
        )
    return combined


_TYPE_WORDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string", type(None): "null"}


def _allowed_types(name: str) -> tuple[type, ...]:
    """The value types field `name` accepts (a float field takes ints too)."""
    hint = typing.get_type_hints(TrainConfig)[name]
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
            from lipnorm.numbers import load_yaml

            loaded = load_yaml(text)  # YAML 1.2 numbers: `lr: 5e-3` is a number
        if not isinstance(loaded, dict):
            raise ValueError(f"config file {str(path)!r} must hold a mapping of settings")
        # Normalise keys now so that a file's `missing-rate` and a flag's `missing_rate`
        # are one key, and the flag wins.
        settings = {str(key).replace("-", "_"): value for key, value in loaded.items()}
    settings.update(overrides)
    return TrainConfig.from_mapping(settings)


def select_epoch(protocol: str, val_metrics: Sequence[float]) -> int:
    """Index of the epoch whose test metric `protocol` reports.

    "best-val": the first maximum of the validation metric; "official": the last epoch.
    """
    if not val_metrics:
        raise ValueError("no epochs to select from")
    if protocol == "official":
        return len(val_metrics) - 1
    if protocol == "best-val":
        return max(range(len(val_metrics)), key=val_metrics.__getitem__)
    raise ValueError(f"unknown protocol {protocol!r}; allowed: {', '.join(PROTOCOLS)}")


def make_scheduler(protocol: str, optimizer: torch.optim.Optimizer):
    """The learning-rate scheduler of `protocol` (None: a constant learning rate)."""
    if protocol == "official":
        return torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer, mode="min", factor=PLATEAU_FACTOR, patience=PLATEAU_PATIENCE
        )
    return None


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    dgl.seed(seed)


def compute_metric(metric: str, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """`metric` of the predictions `logits` against `labels` (rows already selected), as a
    0-d float64 tensor on their device: computed there, with no host synchronisation.

    "ogb-accuracy" is OGB's `Evaluator("ogbn-arxiv")` (the share of correct labels, the
    same float64 division; tested against it), computed without its copy to numpy.
    """
    if metric in ("accuracy", "ogb-accuracy"):
        return (logits.argmax(1) == labels).double().mean()
    if metric == "micro-f1":
        predicted, actual = logits > 0, labels > 0.5
        true_pos = (predicted & actual).sum().double()
        false_pos = (predicted & ~actual).sum().double()
        false_neg = (~predicted & actual).sum().double()
        denominator = 2 * true_pos + false_pos + false_neg
        # No positives predicted or present: 0 (the division's 0/0 is not taken).
        return torch.where(denominator > 0, 2 * true_pos / denominator.clamp(min=1), 0.0)
    raise ValueError(f"unknown metric {metric!r}; allowed: accuracy, micro-f1, ogb-accuracy")


class Setup(NamedTuple):
    """Everything a run trains on, built deterministically from the config's seed."""

    dataset: Any  # lipnorm.data.NodeDataset, on the CPU as loaded
    features: torch.Tensor  # with the missing rows erased, on `device`
    model: torch.nn.Module  # on `device`
    model_config: ModelConfig  # resolved
    erased: int  # number of feature rows erased
    graph: dgl.DGLGraph  # the dataset's graph on `device`
    labels: torch.Tensor  # on `device`
    splits: tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # train/val/test node indices on `device`
    device: torch.device
    batches: ClusterBatches | None = None  # the training batches of `batching="cluster"`


def prepare(config: TrainConfig) -> Setup:
    """Seed, load the data, apply the missing-features mask, build the model, and move
    what training uses to `config.device`: the graph, the erased features, the labels, the
    split masks as node indices, the model (not the unerased features or the masks).
    With `batching="cluster"`, the METIS partition too (`lipnorm.cluster_batches`: read from
    its cache under `data_root`, else computed and cached); the batches stay on the CPU
    until each is used."""
    # First: an unusable device is refused before anything is loaded.
    device = resolve_device(config.device)
    devices.use_device(device)
    # DGL's kernels run on their own OpenMP pool: limit both.
    torch.set_num_threads(config.threads)
    dgl.utils.set_num_threads(config.threads)
    set_flush_denormal(config.flush_denormal)
    retain_freed_memory(map_large_tensors=config.checkpoint)
    seed_everything(config.seed)
    csbm = None if config.csbm is None else data.csbm_params(config.csbm)
    dataset = data.load_dataset(
        config.dataset, root=config.data_root, mirror=config.mirror, csbm=csbm,
        raw_features=config.raw_features,
    )
    if config.mask is not None:
        mask = data.load_mask(config.mask, dataset.num_nodes)
    else:
        mask = data.missing_features_mask(dataset.train_mask.numpy(), config.missing_rate, config.seed)
    features = data.apply_missing_features(dataset.features, mask)
    model_config = config.model_config(dataset.features.shape[1], dataset.num_classes).resolved()
    model = build_model(model_config)
    erased = int(np.count_nonzero(mask))
    # Indices, made on the CPU: selecting rows by a boolean mask on a GPU waits for the
    # GPU to count them (a host synchronisation) at every use.
    masks = (dataset.train_mask, dataset.val_mask, dataset.test_mask)
    cpu_splits = [torch.nonzero(mask).squeeze(1) for mask in masks]
    batches = None
    if config.batching == "cluster":
        path = cluster_batches.cache_path(config.data_root, config.dataset, config.partitions, csbm)
        sampler = cluster_batches.partition_sampler(dataset.graph, config.partitions, path)
        batches = ClusterBatches(
            sampler, dataset.graph, cpu_splits[0], config.batch_partitions, config.seed, device, path
        )
    return Setup(
        dataset, devices.move(features, device), devices.move(model, device), model_config, erased,
        graph=devices.move(dataset.graph, device), labels=devices.move(dataset.labels, device),
        splits=tuple(devices.move(split, device) for split in cpu_splits), device=device,
        batches=batches,
    )


# glibc's mallopt parameters (malloc.h), and the sizes from which an allocation gets a
# mapping of its own: everything below 1 GiB kept in the heap, or tensors from 32 MiB on
# (glibc's own largest dynamic threshold) mapped each.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
RETAINED_ALLOCATION_BYTES = 1 << 30
MAPPED_LARGE_TENSOR_BYTES = 32 << 20


def retain_freed_memory(map_large_tensors: bool = False) -> bool:
    """Make glibc's malloc keep freed memory for reuse (True), where it is glibc (else False).

    By default glibc serves allocations above its mmap threshold (128 KiB, raised
    dynamically to at most 32 MiB) with fresh mmaps and returns freed heap tops to the
    OS above its trim threshold; the MB-sized tensors of a training step are then
    page-faulted in anew every step (21,000-27,000 minor faults per step at Cora, 8 x 64,
    depth 10), which the kernel zero-fills. Raising both thresholds to 1 GiB makes freed
    tensors' memory reused: no value changes, only where the bytes live.

    `map_large_tensors` trades that speed back for memory where memory is the point (under
    activation checkpointing): tensors of 32 MiB and more (a large graph's (N, H*D)
    activations) then get a mapping each, unmapped when freed, instead of leaving holes in
    the heap that make a step's peak grow by about one more such tensor a layer; their
    pages are faulted in anew (docs/performance.md, "Memory allocation").
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mapped_from = MAPPED_LARGE_TENSOR_BYTES if map_large_tensors else RETAINED_ALLOCATION_BYTES
    return (
        mallopt(ctypes.c_int(M_MMAP_THRESHOLD), ctypes.c_int(mapped_from)) == 1
        and mallopt(ctypes.c_int(M_TRIM_THRESHOLD), ctypes.c_int(RETAINED_ALLOCATION_BYTES)) == 1
    )


def set_flush_denormal(on: bool) -> None:
    """`torch.set_flush_denormal(on)` for the process (both ways: a previous run's
    setting does not carry over); ValueError if the CPU cannot flush denormals."""
    if not torch.set_flush_denormal(on) and on:
        raise ValueError("flush_denormal is not supported on this CPU (it needs SSE3)")


class StepResult(NamedTuple):
    """What a training step measured, as tensors left on the device (see `Trainer.train_step`)."""

    loss: torch.Tensor  # 0-d
    grad_norms: torch.Tensor | None  # (len(GradientNorms.keys),) float64, None when not measured
    output_norms: torch.Tensor | None  # (attention layers,) float64, None when not measured


class Epoch(NamedTuple):
    """An epoch's step and evaluation as numbers on the host (`gather`)."""

    loss: float
    grad_norms: list[float]  # empty when not measured
    output_norms: list[float]
    val_loss: float
    train_metric: float
    val_metric: float
    test_metric: float

    @property
    def finite(self) -> bool:
        """Loss and gradient norms finite (else the run has diverged at this step)."""
        return math.isfinite(self.loss) and all(map(math.isfinite, self.grad_norms))


def gather(step: StepResult, evaluation: torch.Tensor) -> Epoch:
    """The step's and the evaluation's tensors copied to the host at once: the one host
    synchronisation of an epoch."""
    parts = [step.loss.detach().double().reshape(1)]
    parts += [part for part in (step.grad_norms, step.output_norms) if part is not None]
    values = torch.cat([*parts, evaluation]).tolist()
    counts = [0 if part is None else len(part) for part in (step.grad_norms, step.output_norms)]
    grad_end = 1 + counts[0]
    output_end = grad_end + counts[1]
    return Epoch(values[0], values[1:grad_end], values[grad_end:output_end], *values[output_end:])


class GradientNorms:
    """Joint L2 norm of the gradients of each `gradient_groups` group, in one pass."""

    def __init__(self, model: torch.nn.Module):
        groups = gradient_groups(model)
        self.keys = [(layer, kind, group) for layer, kind, group, _ in groups]
        self.params = [param for *_, params in groups for param in params]
        # On the parameters' device, made once: a copy per step would wait for the GPU.
        self.index = torch.tensor(
            [i for i, (*_, params) in enumerate(groups) for _ in params], dtype=torch.long,
            device=self.params[0].device if self.params else None,
        )
        self._subsets: dict[tuple[int, ...], torch.Tensor] = {}

    def __call__(self) -> torch.Tensor:
        """Norms `(len(keys),)` in float64, left on the device (no synchronisation)."""
        present = tuple(i for i, param in enumerate(self.params) if param.grad is not None)
        per_param = torch._foreach_norm([self.params[i].grad for i in present])
        # Squares in float64: a float32 square overflows at norms of ~1e19.
        squares = torch.stack(per_param).double().square()
        if len(present) == len(self.params):
            index = self.index
        else:  # some parameters got no gradient: their groups' index, kept per pattern
            if present not in self._subsets:
                self._subsets[present] = self.index[list(present)]
            index = self._subsets[present]
        totals = torch.zeros(len(self.keys), dtype=torch.float64, device=squares.device)
        totals.index_add_(0, index, squares)
        return totals.sqrt()


class OutputNorms:
    """Forward hooks keeping the Frobenius norm of each attention layer's output."""

    def __init__(self, model: torch.nn.Module):
        self.layers = [index for index, _ in attention_layers(model)]
        self.norms: list[torch.Tensor] = []
        self.active = False
        self.handles = [module.register_forward_hook(self._hook) for _, module in attention_layers(model)]

    def _hook(self, module, inputs, output) -> None:
        if self.active:
            tensor = output[0] if isinstance(output, tuple) else output
            self.norms.append(torch.linalg.vector_norm(tensor.detach()))

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


class LayerStats:
    """Diagnostics of each attention layer's output and attention in a forward pass.

    While `active`, a pre-hook makes every attention layer return its attention too
    (`get_attention=True`) and a forward hook reduces `(output, attention)` to the
    layer's statistics at once (`GraphDiagnostics.layer_stats_tensors`, left on the
    device) and hands the output alone on, so the model computes exactly what it computes
    without them, and an evaluation keeps no layer's output or attention beyond its
    layer: memory O(N H D) rather than O(depth N H D). The layers of an architecture
    registered with `attention=False` (e.g. GCN) are asked for nothing: their statistics
    have no attention entropy.
    """

    def __init__(self, model: torch.nn.Module, graph: dgl.DGLGraph):
        self.diagnostics = GraphDiagnostics(graph)
        self.layers = [index for index, _ in attention_layers(model)]
        # Per layer of the forward: its statistics, metric -> 0-d float64 tensor.
        self.captured: list[dict[str, torch.Tensor]] = []
        self.active = False
        self.handles = []
        self.with_attention = returns_attention(model)
        for _, module in attention_layers(model):
            if self.with_attention:
                self.handles.append(module.register_forward_pre_hook(self._ask_attention, with_kwargs=True))
            self.handles.append(module.register_forward_hook(self._keep, with_kwargs=True))

    def _ask_attention(self, module, args, kwargs):
        if self.active:
            return args, {**kwargs, "get_attention": True}
        return None

    def _keep(self, module, args, kwargs, output):
        if not self.active:
            return None
        if not self.with_attention:
            self.captured.append(self.diagnostics.layer_stats_tensors(output))
            return None
        if not isinstance(output, tuple) or len(output) != 2:
            raise ValueError(
                f"{type(module).__name__} called with get_attention=True returned "
                f"{type(output).__name__}, not (output, attention); register its architecture "
                "with attention=False if its layers have no attention"
            )
        rst, attention = output
        self.captured.append(self.diagnostics.layer_stats_tensors(rst, attention))
        return rst

    def rows(self, epoch: int) -> list[tuple]:
        """`(epoch, layer, metric, value)` rows of the captured forward; clears it."""
        if len(self.captured) != len(self.layers):
            raise RuntimeError(
                f"captured {len(self.captured)} attention layers of {len(self.layers)}: "
                "the forward did not run every attention layer once"
            )
        values = iter(torch.stack([value for stats in self.captured for value in stats.values()]).tolist())
        rows = [(epoch, layer, metric, next(values)) for layer, stats in zip(self.layers, self.captured) for metric in stats]
        self.captured.clear()
        return rows

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


class Trainer:
    """Training epochs (full batch, or cluster batches where `setup.batches` has them) and
    whole-graph evaluation of one model on one dataset."""

    def __init__(
        self, setup: Setup, lr: float, weight_decay: float, protocol: str, *, dropedge: float = 0.0, seed: int = 0
    ):
        """`dropedge` > 0: each training step sees a fresh DropEdge subset of the graph's
        edges, drawn from a stream of its own seeded with `seed` (evaluation: the whole graph;
        the subset is drawn on the host, so on a GPU such a step waits for it once).
        `setup.batches` (cluster batches): their shuffling stream is registered too."""
        dataset = setup.dataset
        self.model = setup.model
        self.graph = setup.graph
        self.features = setup.features
        self.labels = setup.labels
        self.splits = setup.splits  # train, val, test node indices
        self.device = setup.device
        self.metric = dataset.metric
        self.loss_fn = (
            F.binary_cross_entropy_with_logits if dataset.multilabel else F.cross_entropy
        )
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=lr, weight_decay=weight_decay)
        self.scheduler = make_scheduler(protocol, self.optimizer)
        self.gradient_norms = GradientNorms(self.model)
        self.output_norms = OutputNorms(self.model)
        self.layer_stats = LayerStats(self.model, self.graph)
        # What a step draws from; a component with its own generator registers it here.
        self.random_streams = run_state.RandomStreams(self.device)
        self.dropedge = DropEdge(dropedge, seed) if dropedge else None
        if self.dropedge is not None:
            self.random_streams.register("dropedge", self.dropedge)
        self.batches = setup.batches
        if self.batches is not None:
            self.random_streams.register("cluster_batches", self.batches)

    @property
    def lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    def _rows(self, tensor: torch.Tensor, split: int) -> torch.Tensor:
        return tensor.index_select(0, self.splits[split])

    def state_dict(self) -> dict[str, Any]:
        """What the next training step depends on: the model, the optimizer, the scheduler
        and every random stream (`load_state_dict` restores it)."""
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": None if self.scheduler is None else self.scheduler.state_dict(),
            "random": self.random_streams.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        self.random_streams.load_state_dict(state["random"])

    def train_step(self, instrument: bool = True) -> StepResult:
        """An epoch's training: forward, backward and an optimizer step on the whole graph,
        or one per cluster batch (`Setup.batches`); the measurements stay on the device.

        `instrument` measures the gradient-group norms (which also detect a non-finite
        gradient) and the attention outputs' norms; False exists to time their cost.
        Nothing here waits for a GPU: the step is taken whatever the gradients are, since
        deciding on the host would synchronise every step; a non-finite loss or gradient
        norm ends the run at this epoch (`_train_loop`), so the model it leaves is not used.
        (Cluster batches are built on the host: each waits for its copy to the device and
        the layers' zero-in-degree check of its new graph.)

        With cluster batches, a batch without training nodes is skipped, and the epoch's
        measurements combine those of its steps: the loss is their mean weighted by the
        batches' training nodes (the mean over every training node, as on the whole
        graph), a gradient-group norm the mean of the steps' norms, a layer's output norm
        the Frobenius norm over the nodes of every step (`sqrt` of the sum of the steps'
        squares: with every batch trained on, each node's output counted once).
        """
        if self.batches is None:
            return self._step(self.graph, self.features, self.splits[0], self._rows(self.labels, 0), instrument)
        steps: list[StepResult] = []
        weights: list[int] = []
        for batch in self.batches.epoch():
            if not batch.has_training_nodes:
                continue
            steps.append(self._step(
                batch.graph, self.features.index_select(0, batch.nodes), batch.train_rows,
                self.labels.index_select(0, batch.train_nodes), instrument,
            ))
            weights.append(batch.num_train)
        if not steps:
            raise ValueError("no cluster batch has training nodes: the training split is empty")
        loss = sum(step.loss.double() * weight for step, weight in zip(steps, weights)) / sum(weights)
        grad_norms = output_norms = None
        if instrument:
            grad_norms = sum(step.grad_norms for step in steps) / len(steps)
            if steps[0].output_norms is not None:
                output_norms = sum(step.output_norms.square() for step in steps).sqrt()
        return StepResult(loss, grad_norms, output_norms)

    def _step(
        self, graph: dgl.DGLGraph, features: torch.Tensor, train_rows: torch.Tensor,
        train_labels: torch.Tensor, instrument: bool,
    ) -> StepResult:
        """One optimizer step on `graph` (DropEdge's subset of it, if on), the loss on its
        rows `train_rows`, whose labels are `train_labels`."""
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        self.output_norms.norms.clear()
        self.output_norms.active = instrument
        if self.dropedge is not None:
            graph = self.dropedge.graph_for_epoch(graph)
        try:
            logits = self.model(graph, features)
        finally:
            self.output_norms.active = False
        loss = self.loss_fn(logits.index_select(0, train_rows), train_labels)
        loss.backward()
        grad_norms = output_norms = None
        if instrument:
            grad_norms = self.gradient_norms()
            if self.output_norms.norms:
                output_norms = torch.stack(self.output_norms.norms).double()
        self.optimizer.step()
        return StepResult(loss.detach(), grad_norms, output_norms)

    # no_grad, not inference_mode: the latter measured no faster (docs/performance.md, Evaluation forward).
    @torch.no_grad()
    def evaluate(self, layer_stats: bool = False) -> torch.Tensor:
        """`(val_loss, train_metric, val_metric, test_metric)` in eval mode, as a float64
        tensor on the device (no host synchronisation; `gather` copies it).

        `layer_stats` keeps each attention layer's output and attention for
        `self.layer_stats.rows` (the forward itself is unchanged).
        """
        self.model.eval()
        self.layer_stats.active = layer_stats
        try:
            logits = self.model(self.graph, self.features)
        finally:
            self.layer_stats.active = False
        val_loss = self.loss_fn(self._rows(logits, 1), self._rows(self.labels, 1))
        metrics = [
            compute_metric(self.metric, self._rows(logits, split), self._rows(self.labels, split))
            for split in range(3)
        ]
        return torch.stack([val_loss.double(), *metrics])


def _versions() -> dict[str, str]:
    return {
        "lipnorm": lipnorm.__version__,
        "torch": str(torch.__version__),  # a TorchVersion, which a state file would pickle as a class
        "dgl": dgl.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
    }


class _TqdmHandler(logging.Handler):
    """Messages to stderr without breaking the progress bar."""

    def emit(self, record: logging.LogRecord) -> None:
        tqdm.write(self.format(record), file=sys.stderr)


def _attach_log(path: Path) -> list[logging.Handler]:
    """train.log gets every message and one line per epoch; stderr the messages."""
    file_handler = logging.FileHandler(path)
    file_handler.setLevel(logging.DEBUG)
    file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    stderr_handler = _TqdmHandler()
    stderr_handler.setLevel(logging.INFO)
    stderr_handler.setFormatter(logging.Formatter("lipnorm train: %(message)s"))
    log.setLevel(logging.DEBUG)
    log.propagate = False
    for handler in (file_handler, stderr_handler):
        log.addHandler(handler)
    return [file_handler, stderr_handler]


def _detach_log(handlers: list[logging.Handler]) -> None:
    for handler in handlers:
        log.removeHandler(handler)
        handler.close()


def _epoch_record(row: dict[str, float] | None) -> dict[str, float] | None:
    if row is None:
        return None
    return {
        "epoch": row["epoch"],
        "train": row["train_metric"],
        "val": row["val_metric"],
        "test": row["test_metric"],
    }


def run(config: TrainConfig, out: str | Path) -> dict[str, Any]:
    """Train as `config` says and write the run directory `out`; returns the summary.

    Settings are validated before anything is loaded or created. A non-finite training
    loss, gradient norm or validation loss ends the run early with status "diverged"
    (not an error). Any exception leaves no `out` behind.

    The training state is saved to `run_state.state_path(out)` every `save_every` epochs
    and, after the epoch under way, on SIGTERM or SIGINT, which then raise
    `run_state.RunInterrupted`. A call that finds a state resumes from it and deletes it
    once `out` is written; a state saved by other settings or versions is a ValueError
    naming them, an unreadable one is logged and the run starts over.
    """
    started = time.perf_counter()
    config = config.resolved()
    # `auto` becomes the device it resolved to; an unusable one fails here, before any file.
    config = dataclasses.replace(config, device=str(resolve_device(config.device)))
    setup = prepare(config)
    config = dataclasses.replace(
        config, feat_drop=setup.model_config.feat_drop, attn_drop=setup.model_config.attn_drop
    )
    trainer = Trainer(
        setup, config.lr, config.weight_decay, config.protocol, dropedge=config.dropedge, seed=config.seed
    )
    state_file = run_state.state_path(out)
    saved, unreadable = _saved_state(state_file, config)
    history, resumed_from_epochs, earlier_s = History(), [], 0.0
    with atomic_dir(out) as tmp:
        log_path = tmp / "train.log"
        if saved is not None:
            log_path.write_text(saved["log"])  # the earlier attempts' log, continued
        handlers = _attach_log(log_path)
        try:
            if unreadable is not None:
                log.warning("%s: not resuming from it, starting the run over", unreadable)
            log.info(
                "%s on %s (%d nodes, %d classes, metric %s), %d feature rows erased, "
                "%d parameters, %d thread(s), recipe %s, features %s",
                config.model, config.dataset, setup.features.shape[0],
                setup.dataset.num_classes, setup.dataset.metric, setup.erased,
                _num_params(setup.model), config.threads, config.recipe,
                "as stored (not row-normalised)" if config.raw_features else "as loaded",
            )
            log.info("settings: %s", json.dumps(dataclasses.asdict(config), sort_keys=True))
            if setup.batches is not None:
                log.info(
                    "cluster batches: %d METIS partitions (%s), %d per batch, %d batches an epoch",
                    setup.batches.partitions, setup.batches.cache_path, setup.batches.batch_partitions,
                    math.ceil(setup.batches.partitions / setup.batches.batch_partitions),
                )
            if saved is not None:
                trainer.load_state_dict(saved["trainer"])
                history = History(**saved["history"])
                resumed_from_epochs = [*saved["resumed_from_epochs"], history.epochs_done]
                earlier_s = saved["elapsed_s"]
                log.info("resuming after epoch %d from the training state %s", history.epochs_done, state_file)
            save = StateSaver(state_file, config, trainer, log_path, resumed_from_epochs, earlier_s, started)
            run_state.remove_stale_temporaries(state_file)
            with run_state.StopSignals() as stop:
                history = _train_loop(config, trainer, history, save, stop)
            if stop.requested:
                log.warning(
                    "%s received: saving the training state after epoch %d to %s",
                    stop.name, history.epochs_done, state_file,
                )
                save(history)
                interrupted = run_state.RunInterrupted(stop.signal_number, history.epochs_done, state_file)
                log.warning(
                    "stopped; exit code %d (a failure, so that Snakemake and SLURM retry the job): "
                    "the same command resumes after epoch %d",
                    interrupted.exit_code, history.epochs_done,
                )
                raise interrupted
            summary = _summary(
                config, setup, history, earlier_s + time.perf_counter() - started, resumed_from_epochs
            )
            log.info(
                "%s after %d epoch(s): test %s %s (protocol %s), best val epoch %s",
                summary["status"], summary["epochs_run"], summary["metric"],
                summary["test_metric"], config.protocol, summary["best_epoch"],
            )
        finally:
            _detach_log(handlers)
        frames = {
            "metrics.parquet": pd.DataFrame(history.metrics, columns=METRICS_COLUMNS),
            "gradnorms.parquet": pd.DataFrame(history.gradnorms, columns=GRADNORMS_COLUMNS),
            "outnorms.parquet": pd.DataFrame(history.outnorms, columns=OUTNORMS_COLUMNS),
            "layerstats.parquet": pd.DataFrame(history.layerstats, columns=LAYERSTATS_COLUMNS),
        }
        for name, frame in frames.items():
            write_parquet(tmp / name, frame)
        write_json(tmp / "summary.json", summary)  # last: its presence marks a finished run
    state_file.unlink(missing_ok=True)
    return summary


@dataclass
class StateSaver:
    """`saver(history)` writes the training state of a run to `path` (`lipnorm.run_state`):
    what `run` resumes from."""

    path: Path
    config: TrainConfig
    trainer: Trainer
    log_path: Path  # the run's train.log so far
    resumed_from_epochs: list[int]
    earlier_s: float  # wall time of the earlier attempts, up to their last save
    started: float  # `time.perf_counter()` when this attempt started

    def __call__(self, history: History) -> None:
        run_state.write_state(self.path, {
            "config": dataclasses.asdict(self.config),
            "versions": _versions(),
            "trainer": self.trainer.state_dict(),
            "history": dict(vars(history)),  # shallow: the rows are pickled as they are
            "resumed_from_epochs": self.resumed_from_epochs,
            "elapsed_s": self.earlier_s + time.perf_counter() - self.started,
            "log": self.log_path.read_text(),
        })


def _saved_state(path: Path, config: TrainConfig) -> tuple[dict[str, Any] | None, str | None]:
    """`(state, None)` for a state at `path` that this run may resume from, `(None, reason)`
    for an unreadable one, `(None, None)` for none; ValueError for one saved by other
    settings or versions (`run_state.check_resumable`)."""
    if not path.exists():
        return None, None
    try:
        state = run_state.read_state(path)
    except run_state.UnreadableState as err:
        return None, str(err)
    run_state.check_resumable(
        state, dataclasses.asdict(config), _versions(), path, ignored=RESUME_INDIFFERENT
    )
    return state, None


@dataclass
class History:
    """Rows of the per-epoch parquet files, and where training stands: what a resumed run
    continues from."""

    metrics: list[dict[str, float]] = dataclasses.field(default_factory=list)
    gradnorms: list[tuple] = dataclasses.field(default_factory=list)
    outnorms: list[tuple] = dataclasses.field(default_factory=list)
    layerstats: list[tuple] = dataclasses.field(default_factory=list)
    diverged_epoch: int | None = None
    stats_epoch: int | None = None  # the last epoch whose layer statistics were recorded
    epochs_done: int = 0  # epochs trained, a diverged one included
    finished: bool = False  # no epoch left: the last one, an early stop or a divergence


def _train_loop(
    config: TrainConfig,
    trainer: Trainer,
    history: History | None = None,
    save: Callable[[History], None] | None = None,
    stop: run_state.StopSignals | None = None,
) -> History:
    """Train the epochs after `history.epochs_done` (a fresh `History`: all of them).

    `save(history)` is called every `config.save_every` epochs that training goes on
    after. When `stop` is requested, the loop ends after the epoch under way, without the
    last epoch's layer statistics, which the resumed run adds.
    """
    history = History() if history is None else history
    bar = tqdm(
        range(history.epochs_done + 1, 0 if history.finished else config.epochs + 1),
        desc="train", unit="epoch", file=sys.stderr, mininterval=1.0, dynamic_ncols=True,
        initial=history.epochs_done, total=config.epochs,
    )
    for epoch in bar:
        epoch_start = time.perf_counter()
        lr = trainer.lr
        # Epoch 1 is always logged: the gradients at initialisation matter most.
        logged = (epoch - 1) % config.grad_log_every == 0
        with_stats = logged and config.layer_stats
        step = gather(trainer.train_step(), trainer.evaluate(with_stats))
        history.epochs_done = epoch
        val_loss, train_metric, val_metric, test_metric = step.val_loss, step.train_metric, step.val_metric, step.test_metric
        if not step.finite:  # the evaluation saw the model after a non-finite step
            val_loss = train_metric = val_metric = test_metric = math.nan
            trainer.layer_stats.captured.clear()
        elif with_stats:
            history.layerstats += trainer.layer_stats.rows(epoch)
            history.stats_epoch = epoch
        diverged = not math.isfinite(val_loss)
        # The diverged epoch's gradient norms are kept whatever the interval: they show
        # what blew up.
        if logged or diverged:
            history.gradnorms += [
                (epoch, *key, norm) for key, norm in zip(trainer.gradient_norms.keys, step.grad_norms)
            ]
            history.outnorms += [
                (epoch, layer, norm) for layer, norm in zip(trainer.output_norms.layers, step.output_norms)
            ]
        if diverged:
            history.diverged_epoch = epoch
            history.finished = True
            log.warning(
                "diverged at epoch %d: train loss %r, largest gradient-group norm %r, "
                "validation loss %r",
                epoch, step.loss, max(step.grad_norms, key=_nan_last), val_loss,
            )
            break
        if trainer.scheduler is not None:
            trainer.scheduler.step(val_loss)
        history.metrics.append(
            {
                "epoch": epoch,
                "train_loss": step.loss,
                "train_metric": train_metric,
                "val_loss": val_loss,
                "val_metric": val_metric,
                "test_metric": test_metric,
                "lr": lr,
                "seconds": time.perf_counter() - epoch_start,
            }
        )
        bar.set_postfix(loss=f"{step.loss:.4f}", val=f"{val_metric:.4f}", refresh=False)
        log.debug(
            "epoch %d loss %.6g train %.4f val_loss %.6g val %.4f test %.4f lr %.3g",
            epoch, step.loss, train_metric, val_loss, val_metric, test_metric, lr,
        )
        history.finished = epoch == config.epochs
        if config.patience is not None:
            val_metrics = [row["val_metric"] for row in history.metrics]
            best_epoch = history.metrics[select_epoch("best-val", val_metrics)]["epoch"]
            if epoch - best_epoch >= config.patience:
                log.info("early stop at epoch %d: no better val metric since epoch %d", epoch, best_epoch)
                history.finished = True
                break
        if stop is not None and stop.requested:
            break
        if save is not None and not history.finished and epoch % config.save_every == 0:
            save(history)
    bar.close()
    # The last epoch's representations, unless that epoch was logged: the forward of
    # `evaluate` is deterministic, so repeating it gives the ones that epoch saw. (After
    # a divergence the model is no longer the last epoch's: nothing to add.)
    last_epoch = history.metrics[-1]["epoch"] if history.metrics else None
    if (
        config.layer_stats
        and not (stop is not None and stop.requested)
        and history.diverged_epoch is None
        and last_epoch is not None
        and last_epoch != history.stats_epoch
    ):
        trainer.evaluate(layer_stats=True)
        history.layerstats += trainer.layer_stats.rows(last_epoch)
    trainer.output_norms.remove()
    trainer.layer_stats.remove()
    return history


def _nan_last(value: float) -> float:
    """Sort key putting NaN above everything, so `max` reports it."""
    return math.inf if math.isnan(value) else value


def _num_params(model: torch.nn.Module) -> int:
    return sum(param.numel() for param in model.parameters() if param.requires_grad)


def _summary(
    config: TrainConfig,
    setup: Setup,
    history: History,
    wall_time_s: float,
    resumed_from_epochs: list[int],
) -> dict[str, Any]:
    rows, diverged_epoch = history.metrics, history.diverged_epoch
    val_metrics = [row["val_metric"] for row in rows]
    best = rows[select_epoch("best-val", val_metrics)] if rows else None
    reported = rows[select_epoch(config.protocol, val_metrics)] if rows else None
    return {
        "config": dataclasses.asdict(config),
        "status": "ok" if diverged_epoch is None else "diverged",
        "diverged_epoch": diverged_epoch,
        "metric": setup.dataset.metric,
        "test_metric": reported["test_metric"] if reported else None,
        "final": _epoch_record(rows[-1] if rows else None),
        "best_val": _epoch_record(best),
        "best_epoch": best["epoch"] if best else None,
        "epochs_run": len(rows),
        "wall_time_s": wall_time_s,
        "resumed_from_epochs": resumed_from_epochs,
        "mean_epoch_s": float(np.mean([row["seconds"] for row in rows])) if rows else None,
        "peak_memory_mb": devices.peak_memory_mb(setup.device),
        "num_params": _num_params(setup.model),
        "versions": _versions(),
        "device": str(setup.device),
        "threads": torch.get_num_threads(),
    }
