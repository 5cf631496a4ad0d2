"""The memory and time plan of training runs (`lipnorm plan`, the workflow's resources).

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
  their own (`lipnorm.train.tuning.retain_freed_memory`): the two peaks add up;
- epoch time: ``base + F W N`` (input projection) + per layer ``P N W^2`` (dense),
  ``N W`` (element-wise), ``E W`` (aggregation) and ``E H`` (attention) terms, and,
  checkpointed, the recomputed forward (``(L - 1) P N W^2``, ``(L - 1) E W``); cluster batches
  cover the graph once per epoch, as full batch does, plus a cost per batch and layer
  (``L K / B``).

Memory terms count float32 values (4 bytes) in MB, so a coefficient is a number of
copies; time terms count 1e9 operations. Coefficients come from a calibration file
(`--coefficients FILE`, else `$LIPNORM_PLAN_COEFFICIENTS`, else the file fitted on
the development machine that ships with the package, `plan_coefficients.json`); a
file holds one device kind (cpu or cuda) and the thread count it was measured with,
and every job is planned with it whatever its device: CPU coefficients overestimate
a GPU job's host memory and time (calibrate on the GPU nodes for GPU numbers).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from lipnorm import grid, registry
from lipnorm.registry import DatasetSizes
from lipnorm.settings.constants import BATCHINGS, DEFAULT_DATA_ROOT, MAPPED_LARGE_TENSOR_BYTES

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

# Margins of the workflow's requests over the plan, times Snakemake's `attempt`.
MEMORY_MARGIN = 1.25
TIME_MARGIN = 1.5
# Seconds of a job outside its epochs (start-up, loading the data, writing the run).
STARTUP_S = 120


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
    one by one (from MAPPED_LARGE_TENSOR_BYTES on, `lipnorm.train.tuning.retain_freed_memory`):
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
    package's `plan_coefficients.json`. A missing or malformed file is a ValueError
    naming it."""
    if path is None:
        path = os.environ.get(COEFFICIENTS_ENV) or None
    if path is None:
        text = resources.files("lipnorm").joinpath(DEFAULT_COEFFICIENTS).read_text()
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
    return Coefficients(
        memory=_read_terms(where, data, "memory_mb", MEMORY_TERMS),
        time=_read_terms(where, data, "epoch_s", TIME_TERMS),
        device=data["device"],
        threads=threads,
        machine=str(data.get("machine", "")),
        date=str(data.get("date", "")),
        version=str(data.get("lipnorm_version", "")),
        measurements=tuple(data.get("measurements") or ()),
    )


# --- fitting --------------------------------------------------------------------------

# The keys of a measurement: the shape's settings and sizes, then what was measured.
SHAPE_KEYS = ("nodes", "edges", "features", "classes", "depth", "heads", "hidden", "checkpoint")


def projections_of(model: str) -> int:
    """The (N, W) projections a layer of `model` computes (its architecture's entry)."""
    return registry.architecture(registry.parse_model(model)[0]).projections


def shape_of(row: Mapping[str, Any]) -> RunShape:
    """The `RunShape` of a measurement row (`SHAPE_KEYS`, optionally batching keys and
    `model`, default `CALIBRATION_MODEL`)."""
    sizes = DatasetSizes(*(int(row[key]) for key in ("nodes", "edges", "features", "classes")))
    return RunShape(
        sizes, int(row["depth"]), int(row["heads"]), int(row["hidden"]), bool(row["checkpoint"]),
        row.get("batching", "full"), int(row.get("partitions", 1)), int(row.get("batch_partitions", 1)),
        projections_of(row.get("model", CALIBRATION_MODEL)),
    )


def _nnls(rows: Sequence[Sequence[float]], targets: Sequence[float], names: Sequence[str]) -> dict[str, float]:
    """Non-negative least squares of relative errors (each row divided by its target),
    so that small and large runs count alike."""
    import numpy as np
    from scipy.optimize import nnls

    matrix = np.asarray(rows, dtype=float)
    target = np.asarray(targets, dtype=float)
    if (target <= 0).any() or not np.isfinite(target).all():
        raise ValueError(f"plan fit: measured values must be finite and positive, got {target.tolist()}")
    scale = np.abs(matrix).max(axis=0)
    scale[scale == 0] = 1.0
    solution, _ = nnls(matrix / target[:, None] / scale, np.ones_like(target), maxiter=50 * len(names))
    return dict(zip(names, (solution / scale).tolist()))


def fit(measurements: Sequence[Mapping[str, Any]], **provenance: Any) -> Coefficients:
    """Coefficients fitted to `measurements` (rows of `SHAPE_KEYS` plus `memory_mb`
    and `epoch_s`) by non-negative least squares; `provenance`: `device`, `threads`,
    `machine`, `date`, `version` as recorded in `Coefficients`."""
    needed = max(len(MEMORY_TERMS), len(TIME_TERMS))
    if len(measurements) < needed:
        raise ValueError(f"plan fit: {len(measurements)} measurements; at least {needed} are needed")
    shapes = [shape_of(row) for row in measurements]
    memory = _nnls(
        [memory_terms(s) for s in shapes],
        [row["memory_mb"] - known_memory_mb(s) for row, s in zip(measurements, shapes)],
        MEMORY_TERMS,
    )
    seconds = _nnls([time_terms(s) for s in shapes], [row["epoch_s"] for row in measurements], TIME_TERMS)
    return Coefficients(memory, seconds, measurements=tuple(dict(row) for row in measurements), **provenance)


# --- dataset sizes --------------------------------------------------------------------


def csbm_sizes(params: Any) -> DatasetSizes:
    """The sizes of the csbm graph of `params` (a `CSBMParams`, mapping or spec):
    both directions of each undirected edge, plus one self-loop per node."""
    from lipnorm.data.csbm import csbm_params

    params = csbm_params(params)
    intra, inter = params.edge_counts()
    return DatasetSizes(params.nodes, 2 * (intra + inter) + params.nodes, params.feature_dim, params.classes)


_LOADED_SIZES: dict[str, DatasetSizes] = {}


def dataset_sizes(name: str, csbm: Any = None, root: str = DEFAULT_DATA_ROOT, mirror: str | None = None) -> DatasetSizes:
    """The sizes of dataset `name`: registered ones as registered, csbm's from `csbm`,
    else (a plugin's dataset without sizes) counted by loading it once per process."""
    entry = registry.dataset(name)
    if name == "csbm":
        return csbm_sizes(csbm)
    if entry.sizes is not None:
        return entry.sizes
    if name not in _LOADED_SIZES:
        from lipnorm.data import load_dataset

        data = load_dataset(name, root=root, mirror=mirror)
        labels = data.labels.shape[1] if data.multilabel else data.num_classes
        _LOADED_SIZES[name] = DatasetSizes(
            data.graph.num_nodes(), data.graph.num_edges(), int(data.features.shape[1]), int(labels)
        )
    return _LOADED_SIZES[name]


# --- calibration ----------------------------------------------------------------------

CALIBRATION_EPOCHS = 2
CALIBRATION_MODEL = "gat-lip"
# csbm graphs (nodes, average degree, feature columns, classes), the networks (heads,
# hidden, depths) run on each, plain and checkpointed, and other settings (model,
# cluster batches): node-, edge- and feature-heavy graphs and narrow to wide networks,
# so that every term varies on its own; each point stays under ~3.3 GB and the whole set
# ~20 min on one core.
_CLUSTER = {"batching": "cluster", "partitions": 16, "batch_partitions": 4}
CALIBRATION = (
    ((4000, 4, 64, 5), (8, 8), (1, 4, 8), {}),
    ((20000, 40, 32, 5), (8, 8), (1, 4, 8), {}),
    ((16000, 12, 256, 8), (8, 32), (1, 3, 6), {}),
    ((10000, 20, 1024, 10), (8, 16), (2, 6), {}),
    ((40000, 6, 32, 10), (4, 64), (1, 3, 5), {}),
    ((30000, 3, 128, 10), (2, 64), (2, 4), {}),
    # Deep checkpointed runs whose saved inputs stay in glibc's heap (under 32 MiB each).
    ((12000, 8, 64, 6), (8, 16), (12, 24), {}),
    ((60000, 5, 32, 10), (8, 16), (10,), {}),
    # Many nodes, few features, narrow: what the graph itself holds is most of the peak.
    ((150000, 4, 24, 20), (8, 8), (2, 5), {}),
    ((16000, 12, 256, 8), (8, 32), (1, 3), {"model": "gt-lip"}),
    ((40000, 6, 32, 10), (4, 64), (2, 6), _CLUSTER),
    ((50000, 10, 64, 10), (8, 16), (3,), _CLUSTER),
    # Batches of 1/40 of a wide graph: the whole-graph evaluation is most of the peak.
    ((80000, 6, 48, 10), (8, 64), (2, 5), {"batching": "cluster", "partitions": 80, "batch_partitions": 2}),
)


def calibration_points() -> list[dict[str, Any]]:
    """Every calibration run's settings (csbm parameters, heads, hidden, depth,
    checkpoint, and where set model and cluster batching)."""
    points = []
    for (nodes, degree, features, classes), (heads, hidden), depths, settings in CALIBRATION:
        csbm = {"nodes": nodes, "classes": classes, "avg_degree": degree, "feature_dim": features, "signal": 1, "seed": 0}
        for depth in depths:
            for checkpoint in (False, True):
                points.append({
                    "csbm": csbm, "heads": heads, "hidden": hidden, "depth": depth, "checkpoint": checkpoint, **settings,
                })
    return points


def _run_calibration(command: list[str]) -> None:
    """Run one calibration `lipnorm train` command; a failure is a RuntimeError with its stderr."""
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"calibration run failed ({' '.join(command)}):\n{done.stderr[-2000:]}")


def measure(point: Mapping[str, Any], threads: int, device: str, workdir: Path) -> dict[str, Any]:
    """Train `point` (csbm parameters, heads, hidden, depth, checkpoint, optionally
    model (default `CALIBRATION_MODEL`) and batching, partitions, batch_partitions) for
    `CALIBRATION_EPOCHS` epochs in a subprocess; its measurement row: sizes and
    settings, `memory_mb` (the run's `peak_memory_mb`) and `epoch_s` (the last epoch's
    seconds: the first includes warm-up). Under cluster batches the METIS partition is
    cached under `workdir` and made by a first run of its own before the measured one
    (making it is not what a training run costs); the csbm graph is generated in every
    run, as in training."""
    import pandas as pd

    model = point.get("model", CALIBRATION_MODEL)
    batching = point.get("batching", "full")
    command = [
        sys.executable, "-m", "lipnorm", "train", "--dataset", "csbm", "--csbm", grid.csbm_spec(point["csbm"]),
        "--model", model, "--depth", str(point["depth"]), "--heads", str(point["heads"]),
        "--hidden", str(point["hidden"]), "--threads", str(threads), "--data-root", str(workdir / "datasets"),
        "--device", device, "--checkpoint" if point["checkpoint"] else "--no-checkpoint", "--batching", batching,
    ]
    if batching == "cluster":
        command += ["--partitions", str(point["partitions"]), "--batch-partitions", str(point["batch_partitions"])]
        prepared = workdir / "datasets" / "prepared.json"
        key = json.dumps([point["csbm"], point["partitions"]], sort_keys=True)
        made = json.loads(prepared.read_text()) if prepared.exists() else []
        if key not in made:
            # One epoch of depth 1 makes the partition without the measured run's size.
            first = [*command, "--epochs", "1", "--out", str(workdir / f"prepare{len(made)}")]
            first[first.index("--depth") + 1] = "1"
            _run_calibration(first)
            prepared.parent.mkdir(parents=True, exist_ok=True)
            prepared.write_text(json.dumps([*made, key]))
    run_dir = workdir / f"run{len(list(workdir.iterdir()))}"
    _run_calibration([*command, "--epochs", str(CALIBRATION_EPOCHS), "--out", str(run_dir)])
    summary = json.loads((run_dir / "summary.json").read_text())
    seconds = pd.read_parquet(run_dir / "metrics.parquet")["seconds"].iloc[-1]
    sizes = csbm_sizes(point["csbm"])
    row = {
        "nodes": sizes.nodes, "edges": sizes.edges, "features": sizes.features, "classes": sizes.classes,
        "depth": point["depth"], "heads": point["heads"], "hidden": point["hidden"],
        "checkpoint": point["checkpoint"], "model": model, "batching": batching,
        "memory_mb": float(summary["peak_memory_mb"]), "epoch_s": float(seconds),
    }
    if batching == "cluster":
        row.update(partitions=point["partitions"], batch_partitions=point["batch_partitions"])
    return row


def machine_name() -> str:
    """`hostname (cpu model, N cores)`: where a calibration was measured."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.node()} ({model}, {os.cpu_count()} cores)"


def calibrate(
    out: str | Path,
    threads: int = 1,
    device: str = "cpu",
    points: Sequence[Mapping[str, Any]] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Coefficients:
    """Measure `points` (default `calibration_points()`) on this machine, fit, and
    write the coefficients to `out` atomically; returns them."""
    import lipnorm

    if device not in ("cpu", "cuda"):
        raise ValueError(f"plan calibration: device {device!r}; allowed: cpu, cuda")
    points = calibration_points() if points is None else list(points)
    rows = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="lipnorm-plan-") as workdir:
        for index, point in enumerate(points, 1):
            row = measure(point, threads, device, Path(workdir))
            rows.append(row)
            if progress:
                progress(
                    f"[{index}/{len(points)}, {time.perf_counter() - started:.0f} s] N={row['nodes']} E={row['edges']} "
                    f"F={row['features']} L={row['depth']} {row['heads']}x{row['hidden']} "
                    f"checkpoint={row['checkpoint']} {row['model']} {row['batching']}: {row['memory_mb']:.0f} MB, "
                    f"{row['epoch_s']:.2f} s/epoch"
                )
    coefficients = fit(
        rows, device=device, threads=threads, machine=machine_name(),
        date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        version=lipnorm.__version__,
    )
    coefficients.save(out)
    return coefficients


# --- the workflow's training jobs -----------------------------------------------------

def _number(where: str, value: Any, integer: bool = True) -> Any:
    """A config number (YAML 1.1 may leave `1e3` a string) as int (or float)."""
    from lipnorm.numbers import parse_number

    number = parse_number(value) if isinstance(value, str) else value
    if isinstance(number, bool) or not isinstance(number, (int, float)) or (integer and number != int(number)):
        raise ValueError(f"{where}={value!r} must be {'a whole number' if integer else 'a number'}")
    return int(number) if integer else float(number)


@dataclass(frozen=True)
class Job:
    """One training job of the workflow, planned: its run group and run directory below
    it, its settings (the config's, the run group's, and what the plan added in
    `changed`), its epochs and its `Estimate`."""

    run_group: str
    subdir: str
    wildcards: Mapping[str, str]
    settings: Mapping[str, Any]
    changed: Mapping[str, Any]
    epochs: int
    estimate: Estimate

    @property
    def run_dir(self) -> str:
        """`<run_group>/runs/<subdir>`, below the config's `results`."""
        return f"{self.run_group}/runs/{self.subdir}"

    def mem_mb(self, attempt: int = 1) -> int:
        """Memory to request (MB): the estimate x `MEMORY_MARGIN` x `attempt`."""
        return math.ceil(self.estimate.memory_mb * MEMORY_MARGIN * attempt)

    def runtime_min(self, attempt: int = 1) -> int:
        """Runtime to request (minutes): (epochs x epoch time + `STARTUP_S`) x
        `TIME_MARGIN` x `attempt`."""
        return math.ceil((self.epochs * self.estimate.epoch_s + STARTUP_S) * TIME_MARGIN * attempt / 60)

    @property
    def cpu_hours(self) -> float:
        """Epochs x epoch time, in hours (times the calibration's threads for CPU-hours)."""
        return self.epochs * self.estimate.epoch_s / 3600


def _describe(job_dir: str, wildcards: Mapping[str, str]) -> str:
    return f"train job {job_dir} ({', '.join(f'{k}={v}' for k, v in wildcards.items())})"


def _subdir_wildcards(subdir: str) -> dict[str, str]:
    parts = subdir.split("/")
    return {wildcard: part[len(prefix):] for (_, wildcard, prefix), part in zip(grid.AXES, parts)}


def input_rows(recipe: str, sizes: DatasetSizes, missing_rate: float) -> int | None:
    """The feature rows a run's first layer drops out and projects: under recipe "dgn"
    (`LiteratureGAT`, row-pruned) the training nodes' and the non-training nodes' that
    `missing_rate` % erasure leaves, where the dataset's `train_nodes` are known; else
    None, all of them."""
    if recipe != "dgn" or sizes.train_nodes is None:
        return None
    return sizes.train_nodes + round((1 - missing_rate / 100) * (sizes.nodes - sizes.train_nodes))


def plan_job(
    run_group: str,
    subdir: str,
    settings: Mapping[str, Any],
    sizes: DatasetSizes,
    coefficients: Coefficients,
    max_mem_mb: float | None = None,
    max_runtime: float | None = None,
    cluster: Mapping[str, Any] | None = None,
) -> Job:
    """Plan one training job (`subdir` below `run_group`'s runs, with `settings`).

    A job whose first-attempt request (`Job.mem_mb`) exceeds `max_mem_mb` is given
    checkpointing (the same numbers) if its architecture is registered checkpointable and
    that fits; else, where `cluster` (`partitions`, `batch_partitions`) allows it and the
    architecture is not full-batch only, cluster batches (without, then with
    checkpointing); else ValueError naming the job, its estimate and the limit.
    A job whose runtime request exceeds `max_runtime` (minutes) is a ValueError too.
    """
    from lipnorm.recipes import recipe_defaults

    wildcards = _subdir_wildcards(subdir)
    depth = int(wildcards["depth"])
    defaults = recipe_defaults(
        settings.get("recipe", "lipnorm"), depth, wildcards["dataset"], float(wildcards["rate"])
    )
    resolved = {**defaults, **settings}
    where = f"{run_group} train"
    epochs = _number(f"{where} epochs", resolved["epochs"])
    architecture = registry.architecture(registry.parse_model(wildcards["model"])[0])
    base = {
        "depth": depth,
        "heads": _number(f"{where} heads", resolved["heads"]),
        "hidden": _number(f"{where} hidden", resolved["hidden"]),
        "checkpoint": bool(resolved.get("checkpoint", False)),
        "batching": resolved.get("batching", "full"),
        "partitions": _number(f"{where} partitions", resolved.get("partitions", 1)),
        "batch_partitions": _number(f"{where} batch_partitions", resolved.get("batch_partitions", 1)),
        "projections": architecture.projections,
        "input_rows": input_rows(resolved.get("recipe", "lipnorm"), sizes, float(wildcards["rate"])),
    }
    # What the plan may change, in order: nothing, checkpointing, cluster batches.
    may_checkpoint = not base["checkpoint"] and architecture.checkpointable
    candidates: list[dict[str, Any]] = [{}] + ([{"checkpoint": True}] if may_checkpoint else [])
    if cluster and base["batching"] == "full" and not architecture.full_batch_only:
        batches = {
            "batching": "cluster",
            "partitions": _number(f"{run_group} plan.cluster.partitions", cluster["partitions"]),
            "batch_partitions": _number(f"{run_group} plan.cluster.batch_partitions", cluster["batch_partitions"]),
        }
        candidates += [batches] + ([{**batches, "checkpoint": True}] if may_checkpoint else [])
    tried = []
    for changed in candidates:
        shape = RunShape(sizes, **{**base, **changed})
        job = Job(run_group, subdir, wildcards, {**settings, **changed}, changed, epochs, coefficients.estimate(shape))
        tried.append(job)
        if max_mem_mb is None or job.mem_mb() <= max_mem_mb:
            break
    else:
        attempts = "; ".join(
            f"{', '.join(f'{k}={v}' for k, v in t.changed.items()) or 'as configured'}: {t.mem_mb()} MB" for t in tried
        )
        if architecture.full_batch_only:
            hint = f" (architecture {architecture.name!r} is registered with full_batch_only=True: no cluster batches)"
        elif not cluster:
            hint = f" (cluster batches are not allowed: set plan: cluster: {{partitions: K, batch_partitions: B}} in {run_group.split('/')[0]})"
        else:
            hint = ""
        raise ValueError(
            f"{_describe(job.run_dir, wildcards)} needs more memory than max_mem_mb={max_mem_mb:g}: "
            f"estimate {tried[0].estimate.memory_mb:.0f} MB, request x{MEMORY_MARGIN} = {attempts}{hint}"
        )
    if max_runtime is not None and job.runtime_min() > max_runtime:
        raise ValueError(
            f"{_describe(job.run_dir, wildcards)} needs a runtime over max_runtime={max_runtime:g} min: estimate "
            f"{job.epochs} epochs x {job.estimate.epoch_s:.2f} s, request x{TIME_MARGIN} = {job.runtime_min()} min; "
            "lower its epochs or raise max_runtime"
        )
    return job


def plan_workflow(config: Mapping[str, Any], coefficients: Coefficients) -> dict[tuple[str, str], Job]:
    """Every training job of the workflow `config`, planned (`plan_job`), by (run
    group, run subdirectory): the jobs of `lipnorm.grid.run_groups` and
    `lipnorm.grid.run_subdirs`, the workflow's own expansion."""
    max_mem = config.get("max_mem_mb")
    max_runtime = config.get("max_runtime")
    max_mem = None if max_mem is None else _number("max_mem_mb", max_mem, integer=False)
    max_runtime = None if max_runtime is None else _number("max_runtime", max_runtime, integer=False)
    csbm = (config.get("datasets") or {}).get("csbm") or {}
    root = f"{config.get('resources', 'resources')}/datasets"
    mirror = (config.get("data") or {}).get("mirror") or os.environ.get("LIPNORM_DATA_MIRROR")
    jobs: dict[tuple[str, str], Job] = {}
    for group, spec in grid.run_groups(config["experiments"]).items():
        settings = {**(config.get("train") or {}), **(spec.get("train") or {})}
        cluster = (spec.get("plan") or {}).get("cluster")
        for subdir in grid.run_subdirs(spec["grid"]):
            dataset = subdir.split("/", 1)[0]
            sizes = dataset_sizes(dataset, csbm, root=root, mirror=mirror)
            jobs[group, subdir] = plan_job(group, subdir, settings, sizes, coefficients, max_mem, max_runtime, cluster)
    return jobs


def read_config(path: str | Path) -> dict[str, Any]:
    """A workflow config file (YAML), its plugins loaded."""
    from lipnorm.numbers import load_yaml

    try:
        config = load_yaml(Path(path).read_text())
    except OSError as error:
        raise ValueError(f"workflow config {str(path)!r}: cannot read ({error.strerror})") from None
    if not isinstance(config, dict) or not isinstance(config.get("experiments"), dict):
        raise ValueError(f"workflow config {str(path)!r} has no experiments mapping")
    registry.load_plugins(config.get("plugins") or [])
    return config


def config_report(config: Mapping[str, Any], coefficients: Coefficients) -> str:
    """Per experiment: jobs, CPU-hours (epochs x epoch time x the calibration's
    threads), the largest job's memory request and its run directory, the longest
    job's runtime request, and the jobs the plan gave checkpointing or cluster batches."""
    from lipnorm.train.seed_group import workflow_seed_groups

    jobs = plan_workflow(config, coefficients)
    experiments: dict[str, list[Job]] = {}
    for job in jobs.values():
        experiments.setdefault(job.run_group.split("/")[0], []).append(job)
    seeds, seed_groups = workflow_seed_groups(config)
    limit = config.get("max_mem_mb")
    lines = [
        f"coefficients: {coefficients.device}, {coefficients.threads} thread(s), {coefficients.machine} {coefficients.date}",
        f"requests: memory = estimate x {MEMORY_MARGIN} x attempt, runtime = (epochs x epoch time + {STARTUP_S} s) "
        f"x {TIME_MARGIN} x attempt; max_mem_mb: {limit if limit is not None else 'none'}",
        "jobs: one per run, or per seed list for seeds trained together; CPU-h: each run as if alone",
        f"{'experiment':<12} {'runs':>6} {'jobs':>6} {'CPU-h':>9} {'largest MB':>10} {'longest min':>11} {'ckpt':>5} {'cluster':>7}  largest job",
    ]

    def job_count(group: list[Job]) -> int:
        return sum(1 / len(seeds) if job.run_group in seed_groups else 1 for job in group)

    for name, group in experiments.items():
        largest = max(group, key=lambda job: job.mem_mb())
        longest = max(group, key=lambda job: job.runtime_min())
        cpu_hours = sum(job.cpu_hours for job in group) * coefficients.threads
        checkpointed = sum(1 for job in group if job.changed.get("checkpoint"))
        clustered = sum(1 for job in group if job.changed.get("batching") == "cluster")
        lines.append(
            f"{name:<12} {len(group):>6} {round(job_count(group)):>6} {cpu_hours:>9.1f} {largest.mem_mb():>10} "
            f"{longest.runtime_min():>11} {checkpointed:>5} {clustered:>7}  {largest.run_dir}"
        )
    total = sum(job.cpu_hours for job in jobs.values()) * coefficients.threads
    lines.append(f"{'total':<12} {len(jobs):>6} {round(job_count(list(jobs.values()))):>6} {total:>9.1f}")
    return "\n".join(lines)
