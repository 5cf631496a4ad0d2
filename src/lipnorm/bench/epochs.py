"""The epoch of `lipnorm train` measured whole: its parts (`EPOCH_PARTS`, `epoch_times`),
the overhead of gradient logging (`gradlog_overhead`) and the profile of GAT-Lip
(`profile_lip`, torch.profiler tables).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from lipnorm.bench.cases import (
    CSBM_AVG_DEGREE,
    CSBM_CLASSES,
    CSBM_FEATURES,
    Case,
    Graph,
    Plan,
    build_bench_model,
    parse_dataset,
)
from lipnorm.bench.measure import interleaved_rounds, measurement_rows, train_step


# The epoch of `lipnorm train` (`epoch_times`): what each timed part runs.
EPOCH_PARTS = ("step", "epoch", "logged_epoch", "train_forward", "evaluate")


def _trainer(spec: str, depth: int, threads: int, root, mirror, **settings: Any):
    """`(config, Trainer)` of `lipnorm train` on a benchmark graph (settings: TrainConfig's)."""
    from lipnorm.train.trainer import Trainer, prepare
    from lipnorm.settings.train_config import TrainConfig

    name, edges = parse_dataset(spec)
    csbm = None
    if name == "csbm":
        csbm = f"nodes={edges // (CSBM_AVG_DEGREE + 1)},avg_degree={CSBM_AVG_DEGREE},classes={CSBM_CLASSES},feature_dim={CSBM_FEATURES}"
    config = TrainConfig(
        dataset=name, depth=depth, threads=threads, data_root=str(root), mirror=mirror, csbm=csbm, **settings
    ).resolved()
    setup = prepare(config)
    return config, Trainer(setup, config)


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
    return [row for r, impl, seconds in rounds for row in measurement_rows(case, impl, "step_seconds", [(r, seconds)])]


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
    return [row for r, part, seconds in rounds for row in measurement_rows(case, model, f"{part}_seconds", [(r, seconds)])]


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
