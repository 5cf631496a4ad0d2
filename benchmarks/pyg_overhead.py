"""What does LipschitzNorm cost in PyG's GATConv? `torch_geometric.nn.GATConv` against
`lipnorm.pyg.GATConv(norm=None)` and `lipnorm.pyg.GATConv(norm="lip")`, side by side in
one process (goal of issue 50: norm="lip" <= 1.10 x PyG at 8 heads x 64 on Cora).

One GAT layer on Cora's graph (lipnorm's loader: 2708 nodes, 13,264 edges with the
self-loops; PyG's layer removes and re-adds them), 8 heads x 64, the same weights in all
three (PyG's initialisation, loaded into each), a forward and a backward per step (the
loss a fixed random projection of the output, gradients of the parameters and of the
input). The input is a hidden layer's, 8 x 64 = 512 features (`--in-channels`; 1433 is
Cora's own features, whose projection dilutes the attention's share).

Timing: CPU time of the process (`time.process_time`) per step, one thread
(`--threads`). Each round runs `--steps` times one step of every implementation in turn
(interleaved, the order rotated every round, so that load changes hit them alike), after
`--warmup` untimed rounds; an implementation's time in a round is the median of its
steps there, and the figure per round is the ratio of each implementation's time to
PyG's in that round. Also printed: the ratio of the fastest rounds (least disturbed by
other processes on a shared machine). Printed: the date
(UTC), machine (CPU model, cores), torch / PyG versions, the command, the load average
before and after, per-round times and ratios, and the median and range of the ratios.
With `--profile`, torch.profiler's self CPU time per op for each implementation (ms per
step), to see where the difference goes.

    PYTHONPATH=src .venv/bin/python benchmarks/pyg_overhead.py --mirror ../shared/datasets
    PYTHONPATH=src .venv/bin/python benchmarks/pyg_overhead.py --rounds 30 --in-channels 1433 --profile

Not a test: it exits 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shlex
import statistics
import sys
import time

import torch
import torch_geometric
from torch_geometric.nn import GATConv as PyGGATConv

from lipnorm import load_dataset
from lipnorm.pyg import GATConv

IMPLEMENTATIONS = ("pyg", "lipnorm-none", "lipnorm-lip")


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average() -> str:
    try:
        return " ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "n/a"


def build(in_channels: int, heads: int, hidden: int, seed: int) -> dict[str, torch.nn.Module]:
    """The three layers with PyG's weights."""
    torch.manual_seed(seed)
    pyg = PyGGATConv(in_channels, hidden, heads=heads)
    layers = {"pyg": pyg, "lipnorm-none": GATConv(in_channels, hidden, heads=heads),
              "lipnorm-lip": GATConv(in_channels, hidden, heads=heads, norm="lip")}
    for name in IMPLEMENTATIONS[1:]:
        layers[name].load_state_dict(pyg.state_dict())
    return layers


def make_step(layer: torch.nn.Module, x: torch.Tensor, edge_index: torch.Tensor, direction: torch.Tensor):
    def step() -> None:
        layer.zero_grad(set_to_none=True)
        x.grad = None
        out = layer(x, edge_index)
        (out * direction).sum().backward()

    return step


def timed(step) -> float:
    start = time.process_time()
    step()
    return time.process_time() - start


def one_round(steps: dict, order: tuple[str, ...], repeats: int) -> dict[str, float]:
    """`repeats` times one step of each implementation in `order`, interleaved; per
    implementation the median of its steps' CPU times (a spike of the machine's load in
    one step does not move it)."""
    samples: dict[str, list[float]] = {name: [] for name in order}
    for _ in range(repeats):
        for name in order:
            samples[name].append(timed(steps[name]))
    return {name: statistics.median(values) for name, values in samples.items()}


def profile(steps_by_name: dict, steps: int, top: int, rounds: int = 5) -> None:
    """torch.profiler's self CPU time per op and step: `rounds` profiles of `steps` steps
    per implementation, interleaved in rotated order; per op the least over the rounds
    (the profiler reads wall time, which a busy machine inflates where it deschedules us)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    names = tuple(steps_by_name)
    tables: dict[str, dict[str, tuple[float, float]]] = {name: {} for name in names}
    for round_ in range(rounds):
        for name in names[round_ % 3:] + names[: round_ % 3]:
            step = steps_by_name[name]
            step()
            with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
                for _ in range(steps):
                    step()
            for event in prof.key_averages():
                value = (event.count / steps, event.self_cpu_time_total / 1000 / steps)
                best = tables[name].get(event.key)
                tables[name][event.key] = value if best is None or value[1] < best[1] else best
    ops = set().union(*tables.values())
    base, lip = tables["pyg"], tables["lipnorm-lip"]
    extra = sorted(ops, key=lambda op: lip.get(op, (0, 0))[1] - base.get(op, (0, 0))[1], reverse=True)
    print(f"\nprofile (self CPU ms per step, least of {rounds} rounds; calls per step), "
          f"ops by lipnorm-lip minus pyg, top {top}:")
    print(f"{'op':45s} {'pyg ms':>9s} {'lip ms':>9s} {'extra':>8s} {'pyg n':>6s} {'lip n':>6s}")
    for op in extra[:top]:
        (bn, bt), (ln, lt) = base.get(op, (0, 0.0)), lip.get(op, (0, 0.0))
        print(f"{op[:45]:45s} {bt:9.3f} {lt:9.3f} {lt - bt:8.3f} {bn:6.1f} {ln:6.1f}")
    total = {name: sum(t for _, t in table.values()) for name, table in tables.items()}
    print("sum of the ops' least self CPU ms per step: " + ", ".join(f"{n} {v:.2f}" for n, v in total.items()))


def summary(values: list[float]) -> str:
    return f"median {statistics.median(values):.3f} x (range {min(values):.3f}-{max(values):.3f})"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="cora")
    parser.add_argument("--root", default="resources/datasets")
    parser.add_argument("--mirror", default=os.environ.get("LIPNORM_DATA_MIRROR"), help="dataset mirror")
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--in-channels", type=int, default=512, help="input width (default: heads x hidden)")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5, help="steps of each implementation per round")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", action="store_true", help="torch.profiler's op table after the rounds")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    words = [sys.argv[0], *(sys.argv[1:] if argv is None else argv)]
    command = "PYTHONPATH=src .venv/bin/python " + " ".join(shlex.quote(word) for word in words)
    print(f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M:%S} UTC")
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores; {platform.platform()}")
    print(f"versions: python {platform.python_version()}, torch {torch.__version__}, "
          f"torch_geometric {torch_geometric.__version__}; threads {torch.get_num_threads()}")
    print(f"command: {command}")
    print(f"load average before (1, 5, 15 min): {load_average()}")

    dataset = load_dataset(args.dataset, root=args.root, mirror=args.mirror)
    src, dst = dataset.graph.edges()
    edge_index = torch.stack([src, dst]).long()
    generator = torch.Generator().manual_seed(args.seed)
    if args.in_channels == dataset.features.shape[1]:
        x = dataset.features.clone().float()
    else:
        x = torch.randn(dataset.num_nodes, args.in_channels, generator=generator)
    x.requires_grad_(True)
    direction = torch.randn(dataset.num_nodes, args.heads * args.hidden, generator=generator)
    print(
        f"case: {args.dataset} ({dataset.num_nodes} nodes, {edge_index.shape[1]} edges), one GATConv "
        f"{args.in_channels} -> {args.heads} x {args.hidden}, forward + backward; {args.rounds} rounds of "
        f"{args.steps} interleaved steps each ({args.warmup} warm-up rounds)"
    )
    layers = build(args.in_channels, args.heads, args.hidden, args.seed)
    steps = {name: make_step(layer, x, edge_index, direction) for name, layer in layers.items()}
    times: dict[str, list[float]] = {name: [] for name in IMPLEMENTATIONS}
    print(f"\n{'round':>5s} " + " ".join(f"{name + ' ms':>16s}" for name in IMPLEMENTATIONS)
          + f" {'none/pyg':>9s} {'lip/pyg':>8s}")
    for round_ in range(-args.warmup, args.rounds):
        order = IMPLEMENTATIONS[round_ % 3:] + IMPLEMENTATIONS[: round_ % 3]
        measured = one_round(steps, order, args.steps)
        if round_ < 0:
            continue
        for name, value in measured.items():
            times[name].append(value)
        print(f"{round_:5d} " + " ".join(f"{measured[name] * 1e3:16.2f}" for name in IMPLEMENTATIONS)
              + f" {measured['lipnorm-none'] / measured['pyg']:9.3f} {measured['lipnorm-lip'] / measured['pyg']:8.3f}")
    ratios = {name: [t / p for t, p in zip(times[name], times["pyg"])] for name in IMPLEMENTATIONS[1:]}
    print()
    for name in IMPLEMENTATIONS:
        print(f"{name:13s} ms per step: median {statistics.median(times[name]) * 1e3:.2f} "
              f"(range {min(times[name]) * 1e3:.2f}-{max(times[name]) * 1e3:.2f})")
    fastest = {name: min(values) for name, values in times.items()}
    print(f"lipnorm-none / pyg: {summary(ratios['lipnorm-none'])}; fastest rounds "
          f"{fastest['lipnorm-none'] / fastest['pyg']:.3f} x")
    print(f"lipnorm-lip  / pyg: {summary(ratios['lipnorm-lip'])}; fastest rounds "
          f"{fastest['lipnorm-lip'] / fastest['pyg']:.3f} x  (goal <= 1.10 x)")
    print(f"load average after (1, 5, 15 min): {load_average()}")
    if args.profile:
        profile(steps, max(args.steps, 10), args.top)


if __name__ == "__main__":
    main()
