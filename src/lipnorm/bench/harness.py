"""`lipnorm bench`: run a plan on a device and write its outputs (`run_benchmark`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from lipnorm.bench.cases import COLUMNS, FULL, QUICK, Graph, cases, load_graph, require_pyg
from lipnorm.bench.epochs import epoch_times, gradlog_overhead, profile_lip
from lipnorm.bench.dense_floor import estimated_step_gflop
from lipnorm.bench.measure import measure_case, to_device
from lipnorm.bench.report import environment, floor_rows, layer_times, write_summary
from lipnorm.io import atomic_dir
from lipnorm.settings.constants import DEFAULT_DATA_ROOT


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

    from lipnorm.bench.figure import write_figure  # matplotlib, once there is something to draw
    from lipnorm.train.device import resolve_device, use_device
    from lipnorm.train.process import retain_freed_memory, set_flush_denormal

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
            graphs = {spec: to_device(load_graph(spec, root, mirror), target)}  # one at a time
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
    graphs = {profile_spec: graphs.get(profile_spec) or to_device(load_graph(profile_spec, root, mirror), target)}
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
    env = environment(threads, command, load_start, os.getloadavg(), str(target), flush_denormal)
    with atomic_dir(out) as tmp:
        frame.to_csv(tmp / "measurements.csv", index=False)
        (tmp / "profile_gat_8x8.txt").write_text(profile_text)
        profile_ops.to_csv(tmp / "profile_gat_8x8_ops.csv", index=False)
        write_summary(frame, profile_ops, skipped, env, tmp / "summary.md", target.type)
        names = [path.name for path in write_figure(layer_times(frame), tmp)]
    out = Path(out)
    return [out / name for name in
            ["measurements.csv", "summary.md", *names, "profile_gat_8x8.txt", "profile_gat_8x8_ops.csv"]]
