"""Where the literature protocol's seeds-together epoch goes: kernels, the calls around them, the rest.

Question (issue: grids of small runs): of an epoch of S seeds trained together
(`SeedBatchedGAT`, Cora, 1 x 16, 100 % missing features; training step and evaluation
forward), how much is the compiled kernels' arithmetic, how much the Python, torch and
autograd calls around them, and how much does not grow with depth (the first layer's
input and dropout, the loss, Adam)? And what would the whole literature grid need of
each to fit its CPU-hour budget?

The epoch is timed at several depths as it runs, and with every call into the compiled
kernels (`lipnorm.nn.fused`) made a no-op that returns at once (its outputs left as
allocated: the calls around it run on the same shapes, the numbers are meaningless).
The two alternate round by round in one process. A straight line through each gives
the cost a layer adds (its slope) and the part that does not grow with depth (its
intercept); the kernels' share is the difference between the two lines.

    python benchmarks/epoch_split.py --depths 5,10,20 --mirror ../shared/datasets

Not a test: it prints the figures and exits 0 whatever they are.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from lipnorm.nn import fused
from lipnorm.train.tuning import retain_freed_memory
from seed_batching import load_protocol, literature_models, print_header, seeds_together, together_epoch

# The literature grid (docs/workflow.md): per dataset, GAT and GAT-Lip x 7 arms x 5 seeds at
# depths 1-10, 15, 20, 25, 30, 1000 epochs; Cora and CiteSeer.
GRID_DEPTHS = [*range(1, 11), 15, 20, 25, 30]
GRID_RUNS_PER_DEPTH = 2 * 7 * 5 * 2  # models x arms x seeds x datasets
GRID_EPOCHS = 1000


class _NoKernels:
    """A kernel library whose every function returns at once."""

    def __getattr__(self, name):
        return lambda *args: None


def fit(depths: list[int], times: list[float]) -> tuple[float, float]:
    """Least-squares line `time = intercept + slope * depth`: (slope, intercept)."""
    mean_depth, mean_time = statistics.fmean(depths), statistics.fmean(times)
    slope = sum((d - mean_depth) * (t - mean_time) for d, t in zip(depths, times)) / sum(
        (d - mean_depth) ** 2 for d in depths
    )
    return slope, mean_time - slope * mean_depth


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="cora")
    parser.add_argument("--norm", default="none")
    parser.add_argument("--attention-norm", default="none", choices=["none", "lip"])
    parser.add_argument("--depths", default="5,10,20", help="comma-separated, at least two")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=6, help="epochs timed per round, depth and path")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--budget-cpu-hours", type=float, default=4.0, help="the grid's budget (the issue's goal)")
    parser.add_argument("--data-root", default="resources/datasets")
    parser.add_argument("--mirror", default=None)
    args = parser.parse_args()
    depths = sorted({int(depth) for depth in args.depths.split(",")})
    if len(depths) < 2 or depths[0] < 1:
        raise SystemExit(f"--depths {args.depths!r}: give at least two depths >= 1")
    torch.set_num_threads(1)
    retain_freed_memory()  # as `lipnorm train`
    reason = fused.kernel_unavailable()
    if reason is not None:
        raise SystemExit(f"no compiled kernels here: {reason}")
    kernels, library = fused._library(), fused._library
    epochs = {}
    for depth in depths:
        args.depth = depth
        protocol = load_protocol(args)
        epochs[depth] = together_epoch(
            protocol, seeds_together(literature_models(protocol, args.norm, args.attention_norm, args.seeds))
        )
    args.depth = ",".join(map(str, depths))
    print_header(args, f"{args.seeds} seeds together, attention norm {args.attention_norm}, kernels and no-op kernels")
    times = {(depth, path): [] for depth in depths for path in ("kernels", "no-op")}
    try:
        for round_ in range(args.rounds + 1):  # round 0 warms up
            for depth in depths:
                for path in ("kernels", "no-op"):
                    fused._library = (lambda: kernels) if path == "kernels" else (lambda: _NoKernels())
                    start = time.process_time()
                    for _ in range(args.epochs):
                        epochs[depth]()
                    if round_:
                        times[depth, path].append(1000 * (time.process_time() - start) / args.epochs)
    finally:
        fused._library = library
    median = {key: statistics.median(values) for key, values in times.items()}
    print(f"ms per epoch of {args.seeds} seeds (CPU time, median of {args.rounds} rounds):")
    for depth in depths:
        print(f"  depth {depth:3}: {median[depth, 'kernels']:7.1f} with the kernels, {median[depth, 'no-op']:7.1f} without")
    slope, intercept = fit(depths, [median[depth, "kernels"] for depth in depths])
    bare_slope, bare_intercept = fit(depths, [median[depth, "no-op"] for depth in depths])
    seeds = args.seeds
    print(f"a layer adds {slope:.2f} ms an epoch ({slope / seeds:.3f} per seed): the kernels {slope - bare_slope:.2f}, "
          f"the calls around them {bare_slope:.2f}; the rest of the epoch (no layer) {intercept:.1f} ms "
          f"({intercept / seeds:.2f} per seed), of which kernels {intercept - bare_intercept:.1f}")
    mean_depth = sum(GRID_DEPTHS) / len(GRID_DEPTHS)
    run_epochs = GRID_RUNS_PER_DEPTH * len(GRID_DEPTHS) * GRID_EPOCHS
    per_run_epoch = (intercept + slope * mean_depth) / seeds  # ms, at the grid's mean depth
    kernels_share = (intercept - bare_intercept + (slope - bare_slope) * mean_depth) / seeds
    budget = args.budget_cpu_hours * 3600 * 1000 / run_epochs
    print(f"the literature grid: {run_epochs // GRID_EPOCHS} runs of {GRID_EPOCHS} epochs, mean depth {mean_depth:.2f}; "
          f"{args.budget_cpu_hours:g} CPU-hours leave {budget:.2f} ms per run-epoch (start-up included); this arm's "
          f"run-epoch at the mean depth takes {per_run_epoch:.2f} ms, its kernels {kernels_share:.2f} of them "
          f"({run_epochs * per_run_epoch / 1000 / 3600:.1f} CPU-hours if every arm cost what this one does)")

if __name__ == "__main__":
    main()
