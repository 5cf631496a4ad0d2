"""Benchmarks: the cost of LipschitzNorm, side by side with DGL's and PyG's layers.

Every implementation of a family runs inside the same deep model, the one `lipnorm
train` trains (`lipnorm.nn.models.build.build_model`: input Linear, `depth` x [dropout ->
attention layer (heads concatenated) -> ELU except after the last], output Linear, its
dropouts): ours is that model as it is; DGL's and PyG's layers take the place of its
attention layers (`build_bench_model`). So the only difference between two timings is
the attention layer:

- family "gat": our `GATConv` without norm (`gat`), with LipschitzNorm (`gat-lip`, the
  paper's normaliser; `gat-lip-official`, the authors' code's), `dgl.nn.GATConv`
  (`dgl-gat`) and PyG's `GATConv` (`pyg-gat`, self-loops already in the graph);
- family "gt": our `GTConv` (`gt`, `gt-lip`, `gt-lip-official`) and PyG's
  `TransformerConv` (`pyg-transformer`).

One training step is zero_grad, full-batch forward, cross-entropy on the training nodes,
backward and an Adam step. Per case (graph x depth x heads x hidden), after warm-up, the
implementations take one step each in round-robin order (rotated every round) for many
rounds, so load changes of the shared machine hit all of them alike; medians per
implementation and ratios of medians come from the same rounds. Memory is measured
after the timings, apart from them: the peak RSS of one step (Linux VmHWM, reset
through /proc/self/clear_refs) and the bytes one attention layer alone keeps for its
backward pass (saved tensors, each storage counted once).

Outputs (`run_benchmark`): `measurements.csv` (every measurement, long format),
`summary.md` (ratios, memory, gradient-logging overhead, scaling slopes, profile),
`epoch_time_vs_edges.{pdf,png}` and `profile_gat_8x8.txt` (torch.profiler tables).
"""

from __future__ import annotations

import ctypes
import math
import os
import platform
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from lipnorm import registry
from lipnorm.io import atomic_dir
from lipnorm.settings.constants import DEFAULT_DATA_ROOT

# csbm graphs: average degree 9 plus one self-loop, so edges = 10 x nodes exactly.
CSBM_AVG_DEGREE = 9
CSBM_FEATURES = 32
CSBM_CLASSES = 3
COLUMNS = [
    "family", "dataset", "nodes", "edges", "depth", "heads", "hidden",
    "implementation", "metric", "round", "value",
]
# What identifies a benchmark case (the leading columns of `COLUMNS`).
CASE_KEYS = ["family", "dataset", "nodes", "edges", "depth", "heads", "hidden"]
# (numerator, denominator, target or None): the ratios summary.md reports, per family;
# the targets of issue 15 (GAT-Lip within 10 % of GAT, our GAT and GAT-Lip no slower
# than DGL's and PyG's GATConv).
RATIOS = {
    "gat": [
        ("gat-lip", "gat", 1.10),
        ("gat-lip-official", "gat", 1.10),
        ("gat", "dgl-gat", 1.0),
        ("gat-lip", "pyg-gat", 1.0),
    ],
    "gt": [
        ("gt-lip", "gt", 1.10),
        ("gt-lip-official", "gt", 1.10),
        ("gt", "pyg-transformer", None),
        ("gt-lip", "pyg-transformer", None),
    ],
}
GRADLOG_TARGET = 1.05
SLOPE_TARGET = 1.1
# Step time over the dense-GEMM floor (`gemm_floor`): the target holds for the case
# (dataset, depth, heads, hidden) of the paper's deep wide models.
FLOOR_TARGET = 1.4
FLOOR_TARGET_CASE = ("cora", 10, 8, 64)
FLOOR = "gemm-floor"  # the floor's implementation name in measurements.csv
# The epoch of `lipnorm train` (`epoch_times`): what each timed part runs.
EPOCH_PARTS = ("step", "epoch", "logged_epoch", "train_forward", "evaluate")


class Implementation(NamedTuple):
    family: str  # also the model whose attention layers a competitor's replace
    # (in_feats, out_feats, heads, attn_drop) -> layer called as layer(structure, h)
    make: Callable[[int, int, int, float], Any]
    edge_index: bool  # PyG layer: `structure` is the (2, E) edge index, else the DGLGraph
    model: str | None = None  # ours: the model of `lipnorm.nn.models`; None: a competitor
    variant: str = "paper"  # ours: the LipschitzNorm variant


class Case(NamedTuple):
    family: str
    dataset: str  # "cora" or "csbm"
    nodes: int
    edges: int  # self-loops included
    depth: int
    heads: int
    hidden: int


@dataclass(frozen=True)
class Plan:
    """What one benchmark run measures and how hard it tries."""

    datasets: tuple[str, ...]  # "cora" and/or "csbm-<edges>"
    depths: tuple[int, ...]
    widths: tuple[tuple[int, int], ...]  # (heads, hidden)
    families: tuple[str, ...] = ("gat", "gt")
    seconds_per_case: float = 20.0  # timed rounds stop after this (at least min_rounds)
    min_rounds: int = 5
    max_rounds: int = 40
    warmup_rounds: int = 2
    # Cases estimated above this much work per step (~2 s on one core) are skipped: the
    # grid's largest cells (e.g. 10^6 edges x depth 30 x 8x64) take minutes per step, and
    # the ratios depend on the per-layer balance of projections and edge passes, which
    # the smaller cells of the same width and degree already measure.
    step_budget_gflop: float = 60.0
    # The same on a GPU: ~2 s per step at a sustained 10 TFLOP/s (a fraction of a current
    # GPU's float32 peak: the edge passes are memory-bound). The full grid's largest cell
    # (gt, 10^6 edges, depth 30, 8x64) is ~19,000 GFLOP, so a GPU run measures every cell.
    cuda_step_budget_gflop: float = 20_000.0

    def budget_gflop(self, device) -> float:
        """The work per step above which a case is skipped on `device`."""
        return self.cuda_step_budget_gflop if device.type == "cuda" else self.step_budget_gflop
    gradlog_depths: tuple[int, ...] = (2, 10, 30)
    gradlog_rounds: int = 15
    profile_edges: int = 100_000
    profile_depth: int = 2
    profile_steps: int = 5
    # (dataset, depth, heads, hidden) of family "gat" measured although over the budget,
    # for their GEMM floor, with `floor_implementations` only.
    over_budget_cases: tuple[tuple[str, int, int, int], ...] = ()
    floor_implementations: tuple[str, ...] = ("gat", "gat-lip")
    # (dataset, depth, heads, hidden, model) whose `lipnorm train` epoch is timed.
    epoch_cases: tuple[tuple[str, int, int, int, str], ...] = ()
    epoch_rounds: int = 5


FULL = Plan(
    datasets=("cora", "csbm-10000", "csbm-100000", "csbm-1000000"),
    depths=(2, 10, 30),
    widths=((8, 8), (8, 64)),
    over_budget_cases=(("cora", 30, 8, 64),),
    epoch_cases=(("cora", 10, 8, 8, "gat-lip"), ("cora", 10, 8, 64, "gat-lip")),
)
QUICK = Plan(
    datasets=("csbm-10000",),
    depths=(2,),
    widths=((8, 8),),
    seconds_per_case=1.0,
    min_rounds=3,
    max_rounds=5,
    warmup_rounds=1,
    gradlog_depths=(2,),
    gradlog_rounds=3,
    profile_edges=10_000,
    profile_steps=1,
    epoch_cases=(("csbm-10000", 2, 8, 8, "gat-lip"),),
    epoch_rounds=3,
)


def _ours(layer_class: type, **options: Any):
    def make(in_feats: int, out_feats: int, heads: int, attn_drop: float):
        return layer_class(in_feats, out_feats, heads, attn_drop=attn_drop, **options)

    return make


def _dgl_gat(in_feats: int, out_feats: int, heads: int, attn_drop: float):
    import dgl.nn

    return dgl.nn.GATConv(in_feats, out_feats, heads, attn_drop=attn_drop)


def _pyg(layer):
    """PyG layers take `(x, edge_index)`; the bench model calls `(structure, h)`."""
    from torch import nn

    class EdgeIndexFirst(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = layer

        def forward(self, edge_index, h):
            return self.layer(h, edge_index)

    return EdgeIndexFirst()


def _pyg_gat(in_feats: int, out_feats: int, heads: int, attn_drop: float):
    from torch_geometric.nn import GATConv

    return _pyg(GATConv(in_feats, out_feats, heads, dropout=attn_drop, add_self_loops=False))


def _pyg_transformer(in_feats: int, out_feats: int, heads: int, attn_drop: float):
    from torch_geometric.nn import TransformerConv

    return _pyg(TransformerConv(in_feats, out_feats, heads, dropout=attn_drop, root_weight=True))


def implementations() -> dict[str, Implementation]:
    """Name -> implementation; PyG ones need the `bench` extra (torch_geometric)."""
    from lipnorm.nn.conv.gat import GATConv
    from lipnorm.nn.conv.gt import GTConv

    return {
        "gat": Implementation("gat", _ours(GATConv, norm="none"), False, "gat"),
        "gat-lip": Implementation("gat", _ours(GATConv, norm="lip", variant="paper"), False, "gat-lip"),
        "gat-lip-official": Implementation(
            "gat", _ours(GATConv, norm="lip", variant="official"), False, "gat-lip", "official"),
        "dgl-gat": Implementation("gat", _dgl_gat, False),
        "pyg-gat": Implementation("gat", _pyg_gat, True),
        "gt": Implementation("gt", _ours(GTConv, norm="none"), False, "gt"),
        "gt-lip": Implementation("gt", _ours(GTConv, norm="lip", variant="paper"), False, "gt-lip"),
        "gt-lip-official": Implementation(
            "gt", _ours(GTConv, norm="lip", variant="official"), False, "gt-lip", "official"),
        "pyg-transformer": Implementation("gt", _pyg_transformer, True),
    }


def require_pyg() -> None:
    """Raise ValueError naming the missing extra if torch_geometric cannot be imported."""
    try:
        import torch_geometric  # noqa: F401
    except ImportError as err:
        raise ValueError(
            f"the benchmark compares with PyG, which is not installed ({err}); install the "
            "`bench` extra: pip install -c constraints.txt -e '.[bench]'"
        ) from None


def build_bench_model(name: str, in_feats: int, num_classes: int, depth: int, heads: int, hidden: int):
    """The bench model of implementation `name`, initialised from seed 0: ours, the model
    `lipnorm train` builds (`lipnorm.nn.models.build.build_model`); a competitor, the model of
    its family (`gat`, `gt`) with the competitor's layers in place of the attention layers."""
    import torch
    from torch import nn

    from lipnorm.nn.models.build import build_model
    from lipnorm.nn.models.config import ModelConfig

    impls = implementations()
    if name not in impls:
        raise ValueError(f"unknown implementation {name!r}; allowed: {', '.join(impls)}")
    impl = impls[name]
    config = ModelConfig(model=impl.model or impl.family, in_feats=in_feats, num_classes=num_classes,
                         depth=depth, heads=heads, hidden=hidden, variant=impl.variant).resolved()
    torch.manual_seed(0)
    model = build_model(config)
    if impl.model is None:
        model.layers = nn.ModuleList(
            impl.make(heads * hidden, hidden, heads, config.attn_drop) for _ in range(depth))
    return model


class Graph(NamedTuple):
    """A benchmark graph: both structures, inputs and training targets."""

    name: str
    graph: Any  # DGLGraph with self-loops
    edge_index: Any  # (2, E) int64, source row first (PyG's flow source -> target)
    features: Any
    labels: Any
    train_index: Any  # the training nodes' indices (a boolean mask would synchronise a GPU)
    num_classes: int

    @property
    def nodes(self) -> int:
        return self.graph.num_nodes()

    @property
    def edges(self) -> int:
        return self.graph.num_edges()

    def structure(self, impl: Implementation):
        return self.edge_index if impl.edge_index else self.graph


def parse_dataset(spec: str) -> tuple[str, int | None]:
    """"cora" -> ("cora", None); "csbm-<edges>" -> ("csbm", edges), edges >= 100."""
    if spec == "cora":
        return "cora", None
    prefix, _, count = spec.partition("-")
    if prefix == "csbm" and count.isdigit() and int(count) >= 100:
        return "csbm", int(count)
    raise ValueError(f"unknown benchmark dataset {spec!r}; allowed: cora, csbm-<edges> (edges >= 100)")


def load_graph(spec: str, root: str | os.PathLike, mirror: str | None) -> Graph:
    import torch

    from lipnorm import data

    name, edges = parse_dataset(spec)
    if name == "csbm":
        params = data.CSBMParams(
            nodes=edges // (CSBM_AVG_DEGREE + 1), classes=CSBM_CLASSES,
            avg_degree=CSBM_AVG_DEGREE, feature_dim=CSBM_FEATURES, seed=0,
        )
        dataset = data.load_dataset("csbm", csbm=params)
    else:
        dataset = data.load_dataset(name, root=root, mirror=mirror)
    edge_index = torch.stack(dataset.graph.edges()).long().contiguous()
    return Graph(
        spec, dataset.graph, edge_index, dataset.features, dataset.labels,
        torch.nonzero(dataset.train_mask).squeeze(1), dataset.num_classes,
    )


def estimated_step_gflop(
    nodes: int, edges: int, in_feats: int, depth: int, heads: int, hidden: int, family: str
) -> float:
    """Rough floating-point work of one training step (forward + backward ~ 3 x forward).

    Per attention layer: the projections (the family's registered `projections`: 1 for
    "gat", 4 for "gt": queries, keys, values, skip) of width W = heads x hidden, 2 N W^2
    each, and about 7 edge passes of width W; plus the input Linear. Used to keep the full run within its time budget.
    """
    width = heads * hidden
    projections = registry.architecture(family).projections
    per_layer = projections * 2 * nodes * width * width + 7 * edges * width
    return 3 * (depth * per_layer + 2 * nodes * in_feats * width) / 1e9


def floor_gemms(case: Case, in_feats: int, num_classes: int) -> list[tuple[int, int, int, bool]]:
    """The dense matrix products of one training step of the case's bench model, as
    `(rows, inner, cols, transposed)`: an `(rows, inner) x (inner, cols)` product whose
    left factor is a transposed view when `transposed` (as autograd's weight gradient).

    Per projection of every attention layer (the family's registered `projections`: 1
    for "gat", 4 for "gt": queries, keys, values, skip), with N nodes and W = heads x
    hidden: forward X.W `(N, W) x (W, W)`, backward dY.W^T `(N, W) x (W, W)` and X^T.dY `(W, N) x (N, W)`. The input Linear:
    forward and X^T.dY (the features need no gradient); the output Linear: all three.
    """
    nodes, width = case.nodes, case.heads * case.hidden
    projections = registry.architecture(case.family).projections

    def linear(fan_in: int, fan_out: int, input_grad: bool = True) -> list[tuple[int, int, int, bool]]:
        forward = (nodes, fan_in, fan_out, False)
        input_grad_gemm = [(nodes, fan_out, fan_in, False)] if input_grad else []
        return [forward, *input_grad_gemm, (fan_in, nodes, fan_out, True)]

    return (
        linear(in_feats, width, input_grad=False)
        + linear(width, width) * (projections * case.depth)
        + linear(width, num_classes)
    )


def gemm_floor(gemms: Sequence[tuple[int, int, int, bool]], device=None) -> Callable[[], None]:
    """A step of plain `torch.mm` calls of those shapes, on random operands made once
    (on `device`, default the CPU)."""
    import torch

    from lipnorm.train.device import move

    device = torch.device("cpu") if device is None else device
    operands = {}
    for rows, inner, cols, transposed in set(gemms):
        left = move(torch.randn(inner, rows), device).t() if transposed else move(torch.randn(rows, inner), device)
        operands[rows, inner, cols, transposed] = (left, move(torch.randn(inner, cols), device))
    calls = [operands[gemm] for gemm in gemms]

    def step() -> None:
        for left, right in calls:
            torch.mm(left, right)

    return step


def train_step(model, optimizer, structure, graph: Graph):
    """One full-batch training step; returns the loss tensor (not waited for)."""
    import torch.nn.functional as F

    optimizer.zero_grad(set_to_none=True)
    logits = model(structure, graph.features)
    loss = F.cross_entropy(logits[graph.train_index], graph.labels[graph.train_index])
    loss.backward()
    optimizer.step()
    return loss.detach()


def _timed(step: Callable[[], Any], device) -> float:
    """Seconds `step` takes to complete on `device`: a GPU runs queued work after the
    call returns, so the device is synchronised before the clock starts (nothing of the
    previous step is charged to this one) and before it stops."""
    from lipnorm.train.device import synchronize

    synchronize(device)
    start = time.perf_counter()
    step()
    synchronize(device)
    return time.perf_counter() - start


def interleaved_rounds(
    steps: dict[str, Callable[[], Any]], plan: Plan, rounds: int | None = None, device=None
) -> Iterator[tuple[int, str, float]]:
    """Warm up, then yield `(round, name, seconds)`: one step of each per round, timed to
    its completion on `device` (default the CPU; `_timed`).

    The order rotates by one every round. Without `rounds`, rounds continue until
    `plan.seconds_per_case` have passed (within [min_rounds, max_rounds]).
    """
    import torch

    device = torch.device("cpu") if device is None else device
    names = list(steps)
    for _ in range(plan.warmup_rounds):
        for name in names:
            steps[name]()
    started = time.perf_counter()
    limit = rounds if rounds is not None else plan.max_rounds
    for r in range(limit):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            yield r, name, _timed(steps[name], device)
        enough = rounds is None and r + 1 >= plan.min_rounds
        if enough and time.perf_counter() - started >= plan.seconds_per_case:
            break


def _peak_rss_of(step: Callable[[], Any]) -> tuple[float, float]:
    """(peak RSS during `step`, that peak minus the RSS before it), in MB (Linux)."""
    # Return freed heap pages to the system first, or the baseline hides the step's peak.
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    before = _status_kb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
    step()
    peak = _status_kb("VmHWM")
    return peak / 1024, (peak - before) / 1024


def _peak_cuda_of(step: Callable[[], Any], device) -> float:
    """Peak MB torch's tensors occupy on the GPU during `step` (everything resident then
    counts: call it with nothing else of the benchmark alive)."""
    from lipnorm.train import device as devices

    devices.release_memory(device)
    devices.synchronize(device)
    devices.reset_peak_memory(device)
    step()
    devices.synchronize(device)
    return devices.peak_memory_mb(device)


def _to_device(graph: Graph, device) -> Graph:
    """`graph` with its structures, inputs and targets on `device`."""
    from lipnorm.train.device import move

    moved = {name: move(getattr(graph, name), device) for name in
             ("graph", "edge_index", "features", "labels", "train_index")}
    return graph._replace(**moved)


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise ValueError(f"/proc/self/status has no field {field!r}")


def saved_tensor_bytes(layer, structure, feat) -> int:
    """Bytes the layer's forward keeps for backward (each storage counted once)."""
    import torch

    storages: dict[int, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        layer(structure, feat)
    # The input itself is not the layer's cost.
    storages.pop(feat.untyped_storage().data_ptr(), None)
    return sum(storages.values())


def _rows(case: Case, impl: str, metric: str, values: Sequence[tuple[int | None, float]]):
    return [
        {
            "family": case.family, "dataset": case.dataset, "nodes": case.nodes, "edges": case.edges,
            "depth": case.depth, "heads": case.heads, "hidden": case.hidden,
            "implementation": impl, "metric": metric, "round": r, "value": value,
        }
        for r, value in values
    ]


def measure_case(
    case: Case, graph: Graph, plan: Plan, log: Callable[[str], None], names: Sequence[str] | None = None,
    device=None,
) -> list[dict]:
    """Interleaved step times of every implementation of the case's family (or of
    `names`) and of its GEMM floor (`gemm_floor`, implementation `FLOOR`, metric
    `floor_seconds`), then peak RSS (and on a GPU its peak allocation) and per-layer
    saved bytes of each implementation, on `device` (default: that of `graph`'s tensors)."""
    import torch

    from lipnorm.train.device import move

    device = graph.features.device if device is None else device
    impls = {
        name: impl for name, impl in implementations().items()
        if impl.family == case.family and (names is None or name in names)
    }
    def make_step(name: str) -> Callable[[], Any]:
        model = build_bench_model(
            name, graph.features.shape[1], graph.num_classes, case.depth, case.heads, case.hidden
        ).train()
        model = move(model, device)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.005)
        structure = graph.structure(impls[name])
        return lambda: train_step(model, optimizer, structure, graph)

    steps = {name: make_step(name) for name in impls}
    steps[FLOOR] = gemm_floor(floor_gemms(case, graph.features.shape[1], graph.num_classes), device)
    times: dict[str, list[tuple[int, float]]] = {name: [] for name in steps}
    for r, name, seconds in interleaved_rounds(steps, plan, device=device):
        times[name].append((r, seconds))
    del steps[FLOOR]  # its operands
    rows = _rows(case, FLOOR, "floor_seconds", times.pop(FLOOR))
    for name in impls:
        rows += _rows(case, name, "step_seconds", times[name])
        peak, delta = _peak_rss_of(steps[name])
        rows += _rows(case, name, "peak_rss_mb", [(None, peak)])
        rows += _rows(case, name, "step_rss_mb", [(None, delta)])
    if device.type == "cuda":
        # Each implementation alone on the GPU (the graph besides): a fresh model, one warm
        # step so that Adam's state exists as in the timed steps, then the measured one.
        steps.clear()
        for name in impls:
            step = make_step(name)
            step()
            rows += _rows(case, name, "peak_cuda_mb", [(None, _peak_cuda_of(step, device))])
            del step
    for name in impls:
        width = case.heads * case.hidden
        torch.manual_seed(0)
        layer = move(impls[name].make(width, case.hidden, case.heads, 0.0), device)
        feat = move(torch.randn(graph.nodes, width), device).requires_grad_()
        saved = saved_tensor_bytes(layer, graph.structure(impls[name]), feat)
        rows += _rows(case, name, "layer_saved_mb", [(None, saved / 2**20)])
    medians = ", ".join(f"{name} {1e3 * np.median([t for _, t in times[name]]):.1f}" for name in impls)
    floor = 1e3 * np.median([row["value"] for row in rows if row["metric"] == "floor_seconds"])
    log(f"{case}: {len(times[next(iter(impls))])} rounds, median ms: {medians}, GEMM floor {floor:.1f}")
    return rows


def _trainer(spec: str, depth: int, threads: int, root, mirror, **settings: Any):
    """`(config, Trainer)` of `lipnorm train` on a benchmark graph (settings: TrainConfig's)."""
    from lipnorm.train.trainer import Trainer, prepare
    from lipnorm.train_config import TrainConfig

    name, edges = parse_dataset(spec)
    csbm = None
    if name == "csbm":
        csbm = f"nodes={edges // (CSBM_AVG_DEGREE + 1)},avg_degree={CSBM_AVG_DEGREE},classes={CSBM_CLASSES},feature_dim={CSBM_FEATURES}"
    config = TrainConfig(
        dataset=name, depth=depth, threads=threads, data_root=str(root), mirror=mirror, csbm=csbm, **settings
    ).resolved()
    setup = prepare(config)
    return config, Trainer(setup, config.lr, config.weight_decay, config.protocol)


def gradlog_overhead(
    spec: str, depth: int, plan: Plan, threads: int, root, mirror, flush_denormal: bool = False, device: str = "cpu"
) -> list[dict]:
    """Step times of `lipnorm train`'s Trainer with and without gradient/output-norm logging.

    Uses `Trainer.train_step(instrument=...)`, interleaved on the same model (gat-lip,
    8 heads x 8).
    """
    config, trainer = _trainer(
        spec, depth, threads, root, mirror, model="gat-lip", flush_denormal=flush_denormal, device=device
    )
    steps = {
        "logged": lambda: trainer.train_step(instrument=True),
        "unlogged": lambda: trainer.train_step(instrument=False),
    }
    graph = trainer.graph
    case = Case("gradlog", config.dataset, graph.num_nodes(), graph.num_edges(), depth, config.heads, config.hidden)
    rounds = interleaved_rounds(steps, plan, rounds=plan.gradlog_rounds, device=trainer.device)
    return [row for r, impl, seconds in rounds for row in _rows(case, impl, "step_seconds", [(r, seconds)])]


def epoch_times(
    spec: str, depth: int, heads: int, hidden: int, model: str, plan: Plan, threads: int, root, mirror,
    flush_denormal: bool = False, device: str = "cpu",
) -> list[dict]:
    """The parts of an epoch of `lipnorm train` (its Trainer and model), interleaved for
    `plan.epoch_rounds` rounds; rows of family "epoch", implementation `model`, metric
    `<part>_seconds` for each of `EPOCH_PARTS`:

    - step: `Trainer.train_step()`, as every epoch runs it (gradient norms measured);
    - epoch: the step and `Trainer.evaluate()`, an epoch without layer statistics;
    - logged_epoch: the step, `evaluate(layer_stats=True)` and the statistics' rows, an
      epoch whose layer statistics are logged (every `grad_log_every`-th);
    - train_forward: the training-mode forward alone, with autograd recording;
    - evaluate: `Trainer.evaluate()` alone (eval-mode forward, loss and metrics).
    What `lipnorm.train.loop.train_loop` adds per epoch besides (a row of metrics, the progress bar, a
    debug line in train.log) is not timed.
    """
    config, trainer = _trainer(
        spec, depth, threads, root, mirror, model=model, heads=heads, hidden=hidden, flush_denormal=flush_denormal,
        device=device,
    )

    def epoch(logged: bool) -> None:
        trainer.train_step()
        trainer.evaluate(layer_stats=logged)
        if logged:
            trainer.layer_stats.rows(0)

    def train_forward() -> None:
        trainer.model.train()
        trainer.model(trainer.graph, trainer.features)

    steps = {
        "step": trainer.train_step,
        "epoch": lambda: epoch(False),
        "logged_epoch": lambda: epoch(True),
        "train_forward": train_forward,
        "evaluate": trainer.evaluate,
    }
    graph = trainer.graph
    case = Case("epoch", config.dataset, graph.num_nodes(), graph.num_edges(), depth, heads, hidden)
    rounds = interleaved_rounds(steps, plan, rounds=plan.epoch_rounds, device=trainer.device)
    return [row for r, part, seconds in rounds for row in _rows(case, model, f"{part}_seconds", [(r, seconds)])]


def profile_lip(graph: Graph, plan: Plan, heads: int = 8, hidden: int = 8, device=None) -> tuple[str, pd.DataFrame]:
    """torch.profiler tables of training steps of gat and gat-lip, and per-op differences.

    Returns the text report and a frame `op, calls_gat, calls_gat_lip, ms_gat, ms_gat_lip,
    extra_ms` (self time per step: on the CPU, CPU time; on a GPU, the time its kernels ran
    on the GPU, which is what a step waits for there), largest extra first.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile

    from lipnorm.train.device import move, synchronize

    per_impl = {}
    text = []
    device = graph.features.device if device is None else device
    activities = [ProfilerActivity.CPU]
    # torch 2.2's names (2.4 renamed them self_device_time_total / "self_device_time_total").
    self_time = "self_cpu_time_total"
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
        self_time = "self_cuda_time_total"
    for name in ("gat", "gat-lip"):
        model = build_bench_model(
            name, graph.features.shape[1], graph.num_classes, plan.profile_depth, heads, hidden
        ).train()
        model = move(model, device)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.005)
        for _ in range(2):
            train_step(model, optimizer, graph.graph, graph)
        synchronize(device)
        with profile(activities=activities, record_shapes=False) as prof:
            for _ in range(plan.profile_steps):
                train_step(model, optimizer, graph.graph, graph)
            synchronize(device)
        averages = prof.key_averages()
        text.append(
            f"== {name}: {plan.profile_steps} training step(s), {graph.name} "
            f"({graph.nodes} nodes, {graph.edges} edges), depth {plan.profile_depth}, "
            f"{heads} heads x {hidden}, ranked by {self_time}\n"
            + averages.table(sort_by=self_time, row_limit=30)
        )
        per_impl[name] = pd.DataFrame(
            {
                "op": [event.key for event in averages],
                "calls": [event.count / plan.profile_steps for event in averages],
                "ms": [getattr(event, self_time) / 1e3 / plan.profile_steps for event in averages],
            }
        ).groupby("op").sum()
    both = per_impl["gat"].join(per_impl["gat-lip"], how="outer", lsuffix="_gat", rsuffix="_gat_lip").fillna(0.0)
    both["extra_ms"] = both["ms_gat_lip"] - both["ms_gat"]
    both = both.reset_index().sort_values("extra_ms", ascending=False)
    return "\n\n".join(text), both[["op", "calls_gat", "calls_gat_lip", "ms_gat", "ms_gat_lip", "extra_ms"]]


def cases(plan: Plan) -> list[tuple[str, Case]]:
    return [
        (spec, Case(family, parse_dataset(spec)[0], 0, 0, depth, heads, hidden))
        for spec in plan.datasets
        for family in plan.families
        for depth in plan.depths
        for heads, hidden in plan.widths
    ]


def paired_ratio(num: pd.Series, den: pd.Series, target: float | None) -> dict:
    """Times of the same rounds (indexed by round): the ratio of medians, the
    interquartile range of the per-round ratios, the rounds paired, the target check."""
    paired = (num / den).dropna()
    ratio = num.median() / den.median()
    return {
        "ratio": ratio, "paired_q25": paired.quantile(0.25), "paired_q75": paired.quantile(0.75),
        "rounds": len(paired), "target": target, "met": None if target is None else bool(ratio <= target),
    }


def ratio_table(times: pd.DataFrame) -> pd.DataFrame:
    """One row per (family, case, ratio): medians, ratio of medians, and the
    interquartile range of the per-round ratios, with the target check."""
    rows = []
    for key, group in times.groupby(CASE_KEYS, sort=False):
        by_impl = group.pivot_table(index="round", columns="implementation", values="value")
        for num, den, target in RATIOS[key[0]]:
            if num not in by_impl or den not in by_impl:
                continue
            stats = paired_ratio(by_impl[num], by_impl[den], target)
            rows.append({
                **dict(zip(CASE_KEYS, key)),
                "ratio": f"{num} / {den}",
                "median_ms_num": 1e3 * by_impl[num].median(),
                "median_ms_den": 1e3 * by_impl[den].median(),
                "value": stats.pop("ratio"),
                **stats,
            })
    return pd.DataFrame(rows)


def scaling_slopes(times: pd.DataFrame) -> pd.DataFrame:
    """Log-log slope of median step time vs edges (csbm sizes), per implementation,
    depth and width; and the time per layer (linear fit over depths), per graph."""
    medians = (
        times.groupby(["family", "dataset", "nodes", "edges", "depth", "heads", "hidden", "implementation"])
        ["value"].median().reset_index()
    )
    rows = []
    csbm = medians[medians["dataset"] == "csbm"]
    for key, group in csbm.groupby(["implementation", "depth", "heads", "hidden"]):
        if group["edges"].nunique() >= 2:
            slope = np.polyfit(np.log(group["edges"]), np.log(group["value"]), 1)[0]
            sizes = f"{group['edges'].min():.0e}..{group['edges'].max():.0e}"
            rows.append({"kind": "edges (log-log slope)", "implementation": key[0], "depth": key[1],
                         "heads": key[2], "hidden": key[3], "over": sizes, "value": slope})
    for key, group in medians.groupby(["implementation", "edges", "heads", "hidden"]):
        if group["depth"].nunique() >= 2:
            per_layer, _ = np.polyfit(group["depth"], group["value"], 1)
            shallow, deep = group.loc[group["depth"].idxmin()], group.loc[group["depth"].idxmax()]
            rows.append({"kind": "ms per layer (linear fit)", "implementation": key[0], "depth": None,
                         "heads": key[2], "hidden": key[3], "over": f"{key[1]} edges",
                         "value": 1e3 * per_layer,
                         "deep_over_shallow": deep["value"] / shallow["value"]})
    return pd.DataFrame(rows)


def _markdown(frame: pd.DataFrame, floatfmt: str = ".3g") -> str:
    """A GitHub table (`lipnorm.tables.markdown`) of `frame`, floats as `floatfmt`."""
    from lipnorm.tables import markdown

    def cell(value):
        if isinstance(value, float):
            return "" if math.isnan(value) else format(value, floatfmt)
        return "" if value is None else str(value)

    return "\n".join(markdown(frame.map(cell)))


def write_figure(times: pd.DataFrame, folder: Path) -> list[Path]:
    """`epoch_time_vs_edges.{pdf,png}` in `folder` (see `lipnorm.plots.epoch_time_vs_edges`)."""
    from lipnorm import plots

    return plots.save_figure(plots.epoch_time_vs_edges(times), folder / "epoch_time_vs_edges")


def _environment(
    threads: int, command: str, load_start: tuple, load_end: tuple, device: str = "cpu", flush_denormal: bool = False
) -> str:
    import dgl
    import torch
    import torch_geometric

    return "\n".join([
        f"- command: `{command}`",
        f"- device: {device}",
        f"- machine: {platform.machine()}, {os.cpu_count()} CPU(s), {platform.processor() or platform.platform()}",
        f"- threads: torch {threads}, DGL same",
        f"- flush denormal: {'on' if flush_denormal else 'off'} (`torch.set_flush_denormal`)",
        f"- load average (1, 5, 15 min): start {', '.join(f'{x:.2f}' for x in load_start)}; "
        f"end {', '.join(f'{x:.2f}' for x in load_end)}",
        f"- versions: python {platform.python_version()}, torch {torch.__version__}, dgl {dgl.__version__}, "
        f"torch_geometric {torch_geometric.__version__}, numpy {np.__version__}",
    ])


def layer_times(frame: pd.DataFrame) -> pd.DataFrame:
    """The step times of the layer comparisons (not of the gradient-logging check or
    the epochs of `lipnorm train`)."""
    return frame[(frame["metric"] == "step_seconds") & frame["family"].isin(list(RATIOS))]


def floor_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per case and implementation: median step and GEMM-floor ms of the same
    rounds, step / floor (ratio of medians) with the quartiles of the per-round ratios,
    and the target check (`FLOOR_TARGET`, for `FLOOR_TARGET_CASE` only)."""
    times = layer_times(frame).groupby(CASE_KEYS, sort=False)
    rows = []
    for key, floor in frame[frame["metric"] == "floor_seconds"].groupby(CASE_KEYS, sort=False):
        case = dict(zip(CASE_KEYS, key))
        floor = floor.set_index("round")["value"]
        target = FLOOR_TARGET if (case["dataset"], case["depth"], case["heads"], case["hidden"]) == FLOOR_TARGET_CASE else None
        for impl, group in times.get_group(key).groupby("implementation", sort=False):
            step = group.set_index("round")["value"]
            rows.append({
                **case, "implementation": impl, "step_ms": 1e3 * step.median(), "floor_ms": 1e3 * floor.median(),
                **paired_ratio(step, floor, target),
            })
    return pd.DataFrame(rows)


def floor_rows(frame: pd.DataFrame) -> list[dict]:
    """`step_over_floor` rows (one per case and implementation) of `floor_table`."""
    return [
        row
        for record in floor_table(frame).to_dict("records")
        for row in _rows(Case(*(record[key] for key in CASE_KEYS)), record["implementation"],
                         "step_over_floor", [(None, record["ratio"])])
    ]


def epoch_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per epoch case: medians of the step, of the epoch with the layer
    statistics logged every `grad_log_every` (default) epochs, amortised per round as
    (logged + (K - 1) x unlogged) / K, of the evaluation and of the training forward."""
    from lipnorm.train_config import TrainConfig

    every = TrainConfig.grad_log_every
    epochs = frame[frame["family"] == "epoch"]
    rows = []
    for key, group in epochs.groupby([*CASE_KEYS, "implementation"], sort=False):
        by = group.pivot_table(index="round", columns="metric", values="value")
        epoch = (by["logged_epoch_seconds"] + (every - 1) * by["epoch_seconds"]) / every
        med = {part: by[f"{part}_seconds"].median() for part in EPOCH_PARTS}
        rows.append({
            **dict(zip(CASE_KEYS[1:], key[1:-1])), "model": key[-1],
            "step_ms": 1e3 * med["step"], f"epoch_ms (log every {every})": 1e3 * epoch.median(),
            "epoch / step": epoch.median() / med["step"], "logged_epoch_ms": 1e3 * med["logged_epoch"],
            "evaluate_ms": 1e3 * med["evaluate"], "train_forward_ms": 1e3 * med["train_forward"],
            "evaluate / train_forward": med["evaluate"] / med["train_forward"], "rounds": len(by),
        })
    return pd.DataFrame(rows)


def write_summary(
    frame: pd.DataFrame, profile_ops: pd.DataFrame, skipped: list[str], env: str, path: Path, device_type: str = "cpu"
) -> None:
    times = layer_times(frame)
    ratios = ratio_table(times)
    parts = ["# Benchmark: the cost of LipschitzNorm", "", env, ""]
    parts += [
        "## Step-time ratios (ratio of medians; paired = per-round ratios, 25th-75th percentile)", "",
        _markdown(ratios.drop(columns=["family"])), "",
    ]
    memory = frame[frame["metric"].isin(["peak_rss_mb", "step_rss_mb", "peak_cuda_mb", "layer_saved_mb"])]
    if not memory.empty:
        table = memory.pivot_table(
            index=["family", "dataset", "edges", "depth", "heads", "hidden", "implementation"],
            columns="metric", values="value",
        ).reset_index()
        parts += ["## Memory (MB): peak RSS of one step, its rise over the RSS before it, "
                  "and what one layer alone saves for backward", ""]
        if "peak_cuda_mb" in table:
            parts += ["peak_cuda_mb: the most torch's tensors occupied on the GPU during one step "
                      "with this implementation alone there (its model, Adam's state, the graph "
                      "and inputs; not the allocator's cache or the CUDA context).", ""]
        parts += [_markdown(table, ".4g"), ""]
    gradlog = frame[frame["family"] == "gradlog"]
    if not gradlog.empty:
        rows = []
        for (dataset, depth), group in gradlog.groupby(["dataset", "depth"]):
            by = group.pivot_table(index="round", columns="implementation", values="value")
            ratio = by["logged"].median() / by["unlogged"].median()
            rows.append({"dataset": dataset, "depth": depth, "model": "gat-lip 8x8",
                         "logged_ms": 1e3 * by["logged"].median(), "unlogged_ms": 1e3 * by["unlogged"].median(),
                         "ratio": ratio, "target": GRADLOG_TARGET, "met": bool(ratio <= GRADLOG_TARGET)})
        parts += ["## Gradient-norm logging overhead (`Trainer.train_step(instrument=True/False)`)", "",
                  _markdown(pd.DataFrame(rows)), ""]
    floors = floor_table(frame)
    if not floors.empty:
        parts += [
            "## Step time over the GEMM floor (ratio of medians; paired = per-round ratios, "
            "25th-75th percentile)", "",
            "The floor: per training step, the dense matrix products of the case's model (per "
            "projection of each attention layer X.W, dY.W^T and X^T.dY of (N, H x D) by "
            "(H x D, H x D); the input and output Linears' too) as plain `torch.mm` calls, "
            "timed in the same rounds as the steps (`lipnorm.bench.floor_gemms`).", "",
            _markdown(floors.drop(columns=["family"]), ".4g"), "",
        ]
    epochs = epoch_table(frame)
    if not epochs.empty:
        parts += [
            "## Epoch of `lipnorm train` beside its step (its Trainer and model; medians)", "",
            "epoch = train step + evaluation, with layer statistics every K-th epoch, amortised "
            "per round as (logged epoch + (K - 1) epochs) / K; evaluate / train_forward: the "
            "evaluation (no autograd) over a training-mode forward with autograd recording.", "",
            _markdown(epochs, ".4g"), "",
        ]
    slopes = scaling_slopes(times)
    if not slopes.empty:
        parts += [f"## Scaling (target: edges slope <= {SLOPE_TARGET})", "", _markdown(slopes), ""]
    if skipped:
        parts += ["## Skipped (estimated work per training step over the budget)", ""]
        parts += [f"- {line}" for line in skipped] + [""]
    clock = "self GPU kernel ms" if device_type == "cuda" else "self CPU ms"
    parts += [f"## Where LipschitzNorm's extra time goes (gat-lip minus gat, {clock} per step)", "",
              "Full tables: `profile_gat_8x8.txt`.", "", _markdown(profile_ops.head(15)), ""]
    path.write_text("\n".join(parts))


def run_benchmark(
    out: str | os.PathLike = "results/bench",
    quick: bool = False,
    threads: int | None = None,
    root: str | os.PathLike = DEFAULT_DATA_ROOT,
    mirror: str | None = None,
    log: Callable[[str], None] | None = None,
    device: str = "cpu",
    flush_denormal: bool = False,
) -> list[Path]:
    """Run the benchmark (`QUICK` or `FULL` plan) on `device` (`lipnorm.train.device`) and
    write its outputs into `out`.

    Progress goes to `log` (default: stderr); returns the paths written.
    `flush_denormal` sets `torch.set_flush_denormal` for every measurement.
    """
    import dgl
    import torch

    from lipnorm.train.device import resolve_device, use_device
    from lipnorm.train.tuning import retain_freed_memory, set_flush_denormal

    target = resolve_device(device)  # first: a refused device leaves nothing behind
    use_device(target)
    require_pyg()
    set_flush_denormal(flush_denormal)
    retain_freed_memory()  # as `lipnorm train` runs
    if threads is not None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        torch.set_num_threads(threads)
        dgl.utils.set_num_threads(threads)
    threads = torch.get_num_threads()
    log = log or (lambda message: print(message, file=sys.stderr, flush=True))
    plan = QUICK if quick else FULL
    command = (
        "lipnorm bench" + (" --quick" if quick else "") + f" --out {out} --threads {threads} --device {target}"
        + (" --flush-denormal" if flush_denormal else "")
    )
    load_start = os.getloadavg()
    rows: list[dict] = []
    skipped = []
    graphs: dict[str, Graph] = {}
    for spec, case in cases(plan):
        if spec not in graphs:
            graphs = {spec: _to_device(load_graph(spec, root, mirror), target)}  # one at a time
        graph = graphs[spec]
        case = case._replace(nodes=graph.nodes, edges=graph.edges)
        need = estimated_step_gflop(
            graph.nodes, graph.edges, graph.features.shape[1], case.depth, case.heads, case.hidden, case.family
        )
        names = None
        if need > plan.budget_gflop(target):
            if case.family != "gat" or (spec, case.depth, case.heads, case.hidden) not in plan.over_budget_cases:
                skipped.append(f"{case.family} {spec} depth {case.depth} {case.heads}x{case.hidden}: ~{need:.0f} GFLOP")
                log(f"skip {case}: ~{need:.1f} GFLOP per step > {plan.budget_gflop(target)} ({target.type} budget)")
                continue
            names = plan.floor_implementations
            log(f"{case}: ~{need:.1f} GFLOP per step, measured for its GEMM floor with {', '.join(names)} only")
        rows += measure_case(case, graph, plan, log, names, device=target)
    profile_spec = f"csbm-{plan.profile_edges}"
    graphs = {profile_spec: graphs.get(profile_spec) or _to_device(load_graph(profile_spec, root, mirror), target)}
    profile_text, profile_ops = profile_lip(graphs[profile_spec], plan, device=target)
    gradlog_spec = "cora" if "cora" in plan.datasets else plan.datasets[0]
    for depth in plan.gradlog_depths:
        rows += gradlog_overhead(gradlog_spec, depth, plan, threads, root, mirror, flush_denormal, str(target))
        log(f"gradient-logging overhead measured on {gradlog_spec}, depth {depth}")
    for spec, depth, heads, hidden, model in plan.epoch_cases:
        rows += epoch_times(spec, depth, heads, hidden, model, plan, threads, root, mirror, flush_denormal, str(target))
        log(f"epoch of lipnorm train measured: {model} on {spec}, depth {depth}, {heads}x{hidden}")
    rows += floor_rows(pd.DataFrame(rows, columns=COLUMNS))
    frame = pd.DataFrame(rows, columns=COLUMNS)
    env = _environment(threads, command, load_start, os.getloadavg(), str(target), flush_denormal)
    with atomic_dir(out) as tmp:
        frame.to_csv(tmp / "measurements.csv", index=False)
        (tmp / "profile_gat_8x8.txt").write_text(profile_text)
        profile_ops.to_csv(tmp / "profile_gat_8x8_ops.csv", index=False)
        write_summary(frame, profile_ops, skipped, env, tmp / "summary.md", target.type)
        names = [path.name for path in write_figure(layer_times(frame), tmp)]
    out = Path(out)
    return [out / name for name in
            ["measurements.csv", "summary.md", *names, "profile_gat_8x8.txt", "profile_gat_8x8_ops.csv"]]
