"""The estimate of a training run's peak memory and epoch time, and its coefficients.

A run's peak memory (MB) and epoch time (s) are predicted by a small linear model
whose terms are the sizes a run's tensors grow with, and whose non-negative
coefficients are fitted (`fit`, non-negative least squares) to runs measured on the
machine (`calibrate`). With N nodes, E edges (self-loops included), F features,
depth L, H heads of D features (width W = H*D):

- memory, full batch: ``base + a_F N F + a_E E + a_M E W + a_W N W`` (features,
  graph structure and its cached layouts, one message per edge of W values as in a
  full-graph pass or the layer statistics, the input projection) plus the layers whose
  working set is held at once: plain, all L of them (``a_N L N W + a_A L E H``, and
  ``a_P L N W (P - 1)`` for a layer of P > 1 projections, as the graph transformer's
  query, key, value and skip: `lipnorm.registry.Architecture.projections`);
  checkpointed (`--checkpoint`), one block (``a_N N W + a_A E H + a_P N W (P - 1)``)
  plus the saved input of each layer but the last (which is not recomputed):
  ``a_S (L - 1) N W`` where they live in glibc's heap, exactly ``(L - 1) N W`` (known,
  not fitted) where each is 32 MiB or more and so mapped on its own
  (`known_memory_mb`); and the parameters with their gradients and Adam's two moments,
  four float32 copies (known);
- memory, cluster batches (`batching: cluster`, B of K partitions per step): the
  training terms above on the batch subgraph (N B/K nodes and, as an upper bound,
  E B/K edges), which stay in the heap, plus the whole-graph evaluation under no_grad
  (``a_VN N W + a_VE E H``, and ``a_P N W (P - 1)``), whose large tensors are mapped on
  their own (`lipnorm.train.process.retain_freed_memory`): the two peaks add up;
- epoch time: ``base + F W N`` (input projection) + per layer ``P N W^2`` (dense),
  ``N W`` (element-wise), ``E W`` (aggregation) and ``E H`` (attention) terms, and,
  checkpointed, the recomputed forward (``(L - 1) P N W^2``, ``(L - 1) E W``); cluster batches
  cover the graph once per epoch, as full batch does, plus a cost per batch and layer
  (``L K / B``).

Memory terms count float32 values (4 bytes) in MB, so a coefficient is a number of
copies; time terms count 1e9 operations. Coefficients come from a calibration file
(`--coefficients FILE`, else `$LIPNORM_PLAN_COEFFICIENTS`, else the file fitted on
the development machine that ships with `lipnorm.plan`, `plan_coefficients.json`); a
file holds one device kind (cpu or cuda) and the thread count it was measured with,
and every job is planned with it whatever its device: CPU coefficients overestimate
a GPU job's host memory and time (calibrate on the GPU nodes for GPU numbers).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Mapping, Sequence

from lipnorm import registry
from lipnorm.registry import DatasetSizes
from lipnorm.settings.constants import BATCHINGS, MAPPED_LARGE_TENSOR_BYTES

# Environment variable naming a calibration file (`--coefficients` wins).
COEFFICIENTS_ENV = "LIPNORM_PLAN_COEFFICIENTS"
DEFAULT_COEFFICIENTS = "plan_coefficients.json"
# /2: the terms of projections, cluster evaluation and batches (a /1 file: calibrate anew).
FORMAT = "lipnorm-plan-coefficients/2"
_FLOATS_MB = 4 / 2**20
_GIGA = 1e-9

MEMORY_TERMS = (
    "base", "features", "edges", "edge_messages", "width", "layer_nodes", "layer_edges", "saved_inputs",
    "projections", "evaluation_nodes", "evaluation_edges",
)
TIME_TERMS = (
    "base", "input", "layer_dense", "layer_elementwise", "layer_edges", "attention",
    "recompute_dense", "recompute_edges", "batches",
)
# Float32 copies of every parameter a training step holds: the parameter, its gradient
# and Adam's two moments.
PARAMETER_COPIES = 4


@dataclass(frozen=True)
class RunShape:
    """What a training run's cost depends on: its dataset's sizes and the settings."""

    sizes: DatasetSizes
    depth: int
    heads: int
    hidden: int
    checkpoint: bool = False
    batching: str = "full"
    partitions: int = 1
    batch_partitions: int = 1
    # (N, W) projections a layer computes (`lipnorm.registry.Architecture.projections`).
    projections: int = 1
    # Rows of the input that the first layer drops out and projects: all (None), or the
    # ones that can be non-zero where it is row-pruned (`lipnorm.nn.row_pruned`).
    input_rows: int | None = None

    def __post_init__(self) -> None:
        if self.input_rows is not None and not 0 <= self.input_rows <= self.sizes.nodes:
            raise ValueError(f"plan: input_rows={self.input_rows!r} must be in [0, {self.sizes.nodes}]")
        for key in ("depth", "heads", "hidden", "partitions", "batch_partitions", "projections"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"plan: {key}={value!r} must be a positive integer")
        if self.batching not in BATCHINGS:
            raise ValueError(f"plan: batching={self.batching!r}; allowed: {', '.join(BATCHINGS)}")
        if self.batch_partitions > self.partitions:
            raise ValueError(
                f"plan: batch_partitions={self.batch_partitions} must be at most partitions={self.partitions}"
            )

    @property
    def width(self) -> int:
        """Features per node after each attention layer: heads x hidden."""
        return self.heads * self.hidden


def _saved_inputs_mapped(nodes: float, shape: RunShape) -> bool:
    """Whether a checkpointed run's saved block inputs, (nodes, W) float32 each, are mapped
    one by one (from MAPPED_LARGE_TENSOR_BYTES on, `lipnorm.train.process.retain_freed_memory`):
    then each takes exactly its size, a known term, not a fitted one (in the
    heap, fragmentation makes it a fitted multiple)."""
    return shape.checkpoint and nodes * shape.width * 4 >= MAPPED_LARGE_TENSOR_BYTES


def _training_memory(nodes: float, edges: float, shape: RunShape) -> dict[str, float]:
    held = 1 if shape.checkpoint else shape.depth
    in_heap = shape.checkpoint and not _saved_inputs_mapped(nodes, shape)
    return {
        "width": nodes * shape.width,
        "layer_nodes": held * nodes * shape.width,
        "layer_edges": held * edges * shape.heads,
        "saved_inputs": (shape.depth - 1) * nodes * shape.width if in_heap else 0.0,
        "projections": held * nodes * shape.width * (shape.projections - 1),
    }


def parameter_count(shape: RunShape) -> int:
    """The network's parameters, to within the attention vectors and biases: the input
    Linear (F x W), P projections of W x W a layer, the output Linear (W x classes)."""
    width, sizes = shape.width, shape.sizes
    return sizes.features * width + shape.depth * shape.projections * width * width + width * sizes.classes


def _step_graph(shape: RunShape) -> tuple[float, float]:
    """Nodes and edges of the graph one training step sees: the whole graph, or a cluster
    batch's B/K share of it (its edges as an upper bound)."""
    sizes = shape.sizes
    if shape.batching == "full":
        return sizes.nodes, sizes.edges
    share = shape.batch_partitions / shape.partitions
    return math.ceil(sizes.nodes * share), math.ceil(sizes.edges * share)


def known_memory_mb(shape: RunShape) -> float:
    """The MB of `shape`'s peak that no coefficient scales: the parameters'
    `PARAMETER_COPIES`, and a checkpointed run's saved block inputs when they are mapped
    one by one (one float32 (N, W) tensor for each layer but the last; measured 1.02 of
    that at ogbn-arxiv's size, 8 x 64)."""
    nodes, _ = _step_graph(shape)
    saved = (shape.depth - 1) * nodes * shape.width if _saved_inputs_mapped(nodes, shape) else 0.0
    return (saved + PARAMETER_COPIES * parameter_count(shape)) * _FLOATS_MB


def memory_terms(shape: RunShape) -> list[float]:
    """The memory terms of `shape`, in the order of `MEMORY_TERMS` (float32 MB; base 1)."""
    sizes = shape.sizes
    counts = {
        "base": 1 / _FLOATS_MB,
        "features": sizes.nodes * sizes.features,
        "edges": sizes.edges,
        "edge_messages": sizes.edges * shape.width,
        "evaluation_nodes": 0.0,
        "evaluation_edges": 0.0,
    }
    counts.update(_training_memory(*_step_graph(shape), shape))
    if shape.batching != "full":
        # Evaluation on the whole graph under no_grad, beside the batches' heap.
        counts["evaluation_nodes"] = sizes.nodes * shape.width
        counts["evaluation_edges"] = sizes.edges * shape.heads
        counts["projections"] += sizes.nodes * shape.width * (shape.projections - 1)
    return [counts[key] * _FLOATS_MB for key in MEMORY_TERMS]


def time_terms(shape: RunShape) -> list[float]:
    """The epoch-time terms of `shape`, in the order of `TIME_TERMS` (1e9 operations; base 1)."""
    n, e, width, depth = shape.sizes.nodes, shape.sizes.edges, shape.width, shape.depth
    recompute = depth - 1 if shape.checkpoint else 0  # the last block is not recomputed
    batches = shape.partitions / shape.batch_partitions if shape.batching != "full" else 0
    counts = {
        "base": 1 / _GIGA,
        "input": (n if shape.input_rows is None else shape.input_rows) * shape.sizes.features * width,
        "layer_dense": depth * shape.projections * n * width * width,
        "layer_elementwise": depth * n * width,
        "layer_edges": depth * e * width,
        "attention": depth * e * shape.heads,
        "recompute_dense": recompute * shape.projections * n * width * width,
        "recompute_edges": recompute * e * width,
        "batches": depth * batches / _GIGA,
    }
    return [counts[key] * _GIGA for key in TIME_TERMS]


@dataclass(frozen=True)
class Estimate:
    """A run's predicted peak memory (MB) and epoch time (s)."""

    memory_mb: float
    epoch_s: float


@dataclass(frozen=True)
class Coefficients:
    """Fitted coefficients (`memory`: MB per term, `time`: s per term) and where they
    were measured (`device`: cpu or cuda; `threads`; `machine`, `date`, `version`),
    with the measurements they were fitted to."""

    memory: Mapping[str, float]
    time: Mapping[str, float]
    device: str = "cpu"
    threads: int = 1
    machine: str = ""
    date: str = ""
    version: str = ""
    measurements: tuple[Mapping[str, Any], ...] = ()
    # A run trained in a seed batch (`lipnorm train --seeds`: its seeds as one network, one
    # process, the compiled attention) costs this share of its estimate alone; measured
    # on a grid where it applies (`seed_batch_source` says which), 1 where not. (The
    # calibration file names them by their older word: `seeds_together`.)
    seed_batch_share: float = 1.0
    seed_batch_source: str = ""
    # The same share where the compiled kernels do not run (LIPNORM_KERNELS=off, no C
    # compiler): the torch and DGL paths' seed-batch epoch; None where not measured.
    seed_batch_share_without_kernels: float | None = None

    def seed_batch_share_on(self, kernels: bool) -> float:
        """The share of a run trained in a seed batch, on the path that will run."""
        if kernels or self.seed_batch_share_without_kernels is None:
            return self.seed_batch_share
        return self.seed_batch_share_without_kernels

    def estimate(self, shape: RunShape) -> Estimate:
        """The `Estimate` of `shape` under these coefficients."""
        memory = known_memory_mb(shape) + sum(
            self.memory[key] * value for key, value in zip(MEMORY_TERMS, memory_terms(shape))
        )
        seconds = sum(self.time[key] * value for key, value in zip(TIME_TERMS, time_terms(shape)))
        return Estimate(memory_mb=memory, epoch_s=seconds)

    def to_json(self) -> dict[str, Any]:
        """The calibration file's content (`FORMAT`)."""
        return {
            "format": FORMAT,
            "device": self.device,
            "threads": self.threads,
            "machine": self.machine,
            "date": self.date,
            "lipnorm_version": self.version,
            "memory_mb": dict(self.memory),
            "epoch_s": dict(self.time),
            "measurements": [dict(row) for row in self.measurements],
            "seeds_together": {
                "share": self.seed_batch_share, "measured": self.seed_batch_source,
                **({} if self.seed_batch_share_without_kernels is None
                   else {"without_kernels": self.seed_batch_share_without_kernels}),
            },
        }

    def save(self, path: str | Path) -> Path:
        """Write the coefficients to `path` (JSON, atomically)."""
        from lipnorm.io import write_json

        write_json(Path(path), self.to_json())
        return Path(path)


def _read_terms(where: str, data: Mapping, key: str, names: Sequence[str]) -> dict[str, float]:
    values = data.get(key)
    if not isinstance(values, Mapping) or set(values) != set(names):
        got = sorted(values) if isinstance(values, Mapping) else values
        raise ValueError(f"{where}: {key!r} must map exactly the terms {', '.join(names)}; got {got!r}")
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or math.isinf(value):
            raise ValueError(f"{where}: {key}.{name}={value!r} must be a finite number >= 0")
    return {name: float(values[name]) for name in names}


def load_coefficients(path: str | Path | None = None) -> Coefficients:
    """The coefficients in `path`; None: `$LIPNORM_PLAN_COEFFICIENTS`, else the
    `plan_coefficients.json` shipped with `lipnorm.plan`. A missing or malformed file is a ValueError
    naming it."""
    if path is None:
        path = os.environ.get(COEFFICIENTS_ENV) or None
    if path is None:
        text = resources.files("lipnorm.plan").joinpath(DEFAULT_COEFFICIENTS).read_text()
        where = f"lipnorm's {DEFAULT_COEFFICIENTS}"
    else:
        where = f"plan coefficients {str(path)!r}"
        try:
            text = Path(path).read_text()
        except OSError as error:
            raise ValueError(f"{where}: cannot read ({error.strerror}); write one with `lipnorm plan --calibrate --out FILE`") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{where} is not valid JSON ({error})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"{where}: format {found!r}, expected {FORMAT!r}")
    if data.get("device") not in ("cpu", "cuda"):
        raise ValueError(f"{where}: device {data.get('device')!r} must be cpu or cuda")
    threads = data.get("threads")
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"{where}: threads {threads!r} must be a positive integer")
    seed_batch = data.get("seeds_together", {"share": 1.0, "measured": ""})
    if not isinstance(seed_batch, Mapping):
        raise ValueError(f"{where}: seeds_together must map share and measured; got {seed_batch!r}")
    share = seed_batch.get("share")
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
        raise ValueError(f"{where}: seeds_together.share={share!r} must be a number in (0, 1]")
    without = seed_batch.get("without_kernels")
    if without is not None and (isinstance(without, bool) or not isinstance(without, (int, float)) or not 0 < without <= 1):
        raise ValueError(f"{where}: seeds_together.without_kernels={without!r} must be a number in (0, 1]")
    return Coefficients(
        seed_batch_share=float(share),
        seed_batch_share_without_kernels=None if without is None else float(without),
        seed_batch_source=str(seed_batch.get("measured", "")),
        memory=_read_terms(where, data, "memory_mb", MEMORY_TERMS),
        time=_read_terms(where, data, "epoch_s", TIME_TERMS),
        device=data["device"],
        threads=threads,
        machine=str(data.get("machine", "")),
        date=str(data.get("date", "")),
        version=str(data.get("lipnorm_version", "")),
        measurements=tuple(data.get("measurements") or ()),
    )


def projections_of(model: str) -> int:
    """The (N, W) projections a layer of `model` computes (its architecture's entry)."""
    return registry.architecture(registry.parse_model(model)[0]).projections
