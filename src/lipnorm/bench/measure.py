"""Timing one case: a training step (`train_step`), the implementations in interleaved,
rotated rounds (`interleaved_rounds`), and every measurement of a case as rows of
`measurements.csv` (`measure_case`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from lipnorm.bench.cases import Case, Graph, Plan, build_bench_model, implementations
from lipnorm.bench.dense_floor import FLOOR, floor_gemms, gemm_floor
from lipnorm.bench.memory import peak_cuda_of, peak_rss_of, saved_tensor_bytes


def train_step(model, optimizer, structure, graph: Graph):
    """One full-batch training step; returns the loss tensor (not waited for)."""
    import torch.nn.functional as F

    optimizer.zero_grad(set_to_none=True)
    logits = model(structure, graph.features)
    loss = F.cross_entropy(logits[graph.train_index], graph.labels[graph.train_index])
    loss.backward()
    optimizer.step()
    return loss.detach()


def timed(step: Callable[[], Any], device) -> float:
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
    its completion on `device` (default the CPU; `timed`).

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
            yield r, name, timed(steps[name], device)
        enough = rounds is None and r + 1 >= plan.min_rounds
        if enough and time.perf_counter() - started >= plan.seconds_per_case:
            break


def to_device(graph: Graph, device) -> Graph:
    """`graph` with its structures, inputs and targets on `device`."""
    from lipnorm.train.device import move

    moved = {name: move(getattr(graph, name), device) for name in
             ("graph", "edge_index", "features", "labels", "train_index")}
    return graph._replace(**moved)


def measurement_rows(case: Case, impl: str, metric: str, values: Sequence[tuple[int | None, float]]):
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
    rows = measurement_rows(case, FLOOR, "floor_seconds", times.pop(FLOOR))
    for name in impls:
        rows += measurement_rows(case, name, "step_seconds", times[name])
        peak, delta = peak_rss_of(steps[name])
        rows += measurement_rows(case, name, "peak_rss_mb", [(None, peak)])
        rows += measurement_rows(case, name, "step_rss_mb", [(None, delta)])
    if device.type == "cuda":
        # Each implementation alone on the GPU (the graph besides): a fresh model, one warm
        # step so that Adam's state exists as in the timed steps, then the measured one.
        steps.clear()
        for name in impls:
            step = make_step(name)
            step()
            rows += measurement_rows(case, name, "peak_cuda_mb", [(None, peak_cuda_of(step, device))])
            del step
    for name in impls:
        width = case.heads * case.hidden
        torch.manual_seed(0)
        layer = move(impls[name].make(width, case.hidden, case.heads, 0.0), device)
        feat = move(torch.randn(graph.nodes, width), device).requires_grad_()
        saved = saved_tensor_bytes(layer, graph.structure(impls[name]), feat)
        rows += measurement_rows(case, name, "layer_saved_mb", [(None, saved / 2**20)])
    medians = ", ".join(f"{name} {1e3 * np.median([t for _, t in times[name]]):.1f}" for name in impls)
    floor = 1e3 * np.median([row["value"] for row in rows if row["metric"] == "floor_seconds"])
    log(f"{case}: {len(times[next(iter(impls))])} rounds, median ms: {medians}, GEMM floor {floor:.1f}")
    return rows
