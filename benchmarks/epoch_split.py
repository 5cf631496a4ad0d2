"""Where the literature protocol's seeds-together epoch goes: kernels, the calls around them, the rest.

Question (issue: grids of small runs): of an epoch of S seeds trained together
(`SeedBatchedGAT`, 1 x 16, 100 % missing features; training step and evaluation
forward), how much is the compiled kernels' arithmetic, how much the Python, torch and
autograd calls around them, and how much does not grow with depth (the first layer's
input and dropout, the loss, Adam)? And what would the whole literature grid need of
each to fit its CPU-hour budget?

The epoch is timed at several depths as it runs, and with every call into the compiled
kernels (`lipnorm.kernels`) made a no-op that returns at once (its outputs left as
allocated: the calls around it run on the same shapes, the numbers are meaningless),
each path on a network of its own that only it trains. The two alternate round by round
in one process. A straight line through each gives the cost a layer adds (its slope) and
the part that does not grow with depth (its intercept); the kernels' share is the
difference between the two lines.

Given several datasets, normalisations and attention norms, each combination is timed in
turn and the grid is estimated from them: the arms without a normalisation of their own
(nothing, DropEdge, residual, initial residual) as the `none` normalisation (their own
extra calls not counted), a dataset, normalisation or attention norm left out as the
mean of those timed. Its floor is the kernels' part that grows with depth alone: what
the grid's epochs would cost if nothing but today's kernels ran.

    python benchmarks/epoch_split.py --depths 5,10,20 --mirror ../shared/datasets
    python benchmarks/epoch_split.py --datasets cora,citeseer --norms none,batchnorm,pairnorm,dgn \\
        --attention-norms none,lip --depths 4,12,20 --rounds 7 --mirror ../shared/datasets

Not a test: it prints the figures and exits 0 whatever they are.
"""
from __future__ import annotations

import argparse
import itertools
import statistics
import time

import torch

from lipnorm import kernels
from lipnorm.kernels import dispatch
from lipnorm.train.process import retain_freed_memory
from seed_batching import load_protocol, literature_models, print_header, seed_batch, seed_batch_epoch

# The literature grid (docs/workflow.md): per dataset, GAT and GAT-Lip x 7 arms x 5 seeds at
# depths 1-10, 15, 20, 25, 30, 1000 epochs; Cora and CiteSeer.
GRID_DEPTHS = [*range(1, 11), 15, 20, 25, 30]
GRID_DATASETS = ["cora", "citeseer"]
GRID_ATTENTION_NORMS = ["none", "lip"]
# The seven arms by the normalisation their network has.
GRID_ARMS = {"none": 4, "batchnorm": 1, "pairnorm": 1, "dgn": 1}
GRID_SEEDS = 5
GRID_EPOCHS = 1000
GRID_RUNS = len(GRID_DATASETS) * len(GRID_ATTENTION_NORMS) * sum(GRID_ARMS.values()) * GRID_SEEDS * len(GRID_DEPTHS)


class _NoKernelsHandle:
    def __getattr__(self, name):
        return lambda *args: None


class _NoKernels:
    """A loaded library (`lipnorm.kernels.build.Library`) whose every kernel returns at once."""

    handle = _NoKernelsHandle()


def fit(depths: list[int], times: list[float]) -> tuple[float, float]:
    """Least-squares line `time = intercept + slope * depth`: (slope, intercept)."""
    mean_depth, mean_time = statistics.fmean(depths), statistics.fmean(times)
    slope = sum((d - mean_depth) * (t - mean_time) for d, t in zip(depths, times)) / sum(
        (d - mean_depth) ** 2 for d in depths
    )
    return slope, mean_time - slope * mean_depth


def names(text: str) -> list[str]:
    """The names of a comma-separated option."""
    return [name for name in text.split(",") if name]


def split(args, depths: list[int]) -> dict[str, tuple[float, float]]:
    """Times `args.dataset`, `args.norm`, `args.attention_norm` at `depths`, prints them;
    the lines `(slope, intercept)` in ms per epoch of `args.seeds` seeds: "kernels" (the
    epoch as it runs) and "no-op" (every kernel call a no-op)."""
    built, loaded = dispatch.library(), dispatch._loaded
    # A network per depth and path: the no-op path's parameters are trained on whatever its
    # outputs held, and the kernels must not then compute on them (a sparser attention, or
    # zeros the backward skips, would time them faster than a real run does).
    epochs = {}
    for depth in depths:
        args.depth = depth
        protocol = load_protocol(args)
        for path in ("kernels", "no-op"):
            epochs[depth, path] = seed_batch_epoch(
                protocol, seed_batch(literature_models(protocol, args.norm, args.attention_norm, args.seeds))
            )
    args.depth = ",".join(map(str, depths))
    print_header(args, f"{args.seeds} seeds together, attention norm {args.attention_norm}, kernels and no-op kernels")
    times = {(depth, path): [] for depth in depths for path in ("kernels", "no-op")}
    try:
        for round_ in range(args.rounds + 1):  # round 0 warms up
            for depth in depths:
                for path in ("kernels", "no-op"):
                    dispatch._loaded = (lambda: built) if path == "kernels" else (lambda: _NoKernels())
                    start = time.process_time()
                    for _ in range(args.epochs):
                        epochs[depth, path]()
                    if round_:
                        times[depth, path].append(1000 * (time.process_time() - start) / args.epochs)
    finally:
        dispatch._loaded = loaded
    median = {key: statistics.median(values) for key, values in times.items()}
    print(f"ms per epoch of {args.seeds} seeds (CPU time, median of {args.rounds} rounds):")
    for depth in depths:
        print(f"  depth {depth:3}: {median[depth, 'kernels']:7.1f} with the kernels, {median[depth, 'no-op']:7.1f} without")
    lines = {path: fit(depths, [median[depth, path] for depth in depths]) for path in ("kernels", "no-op")}
    (slope, intercept), (bare_slope, bare_intercept) = lines["kernels"], lines["no-op"]
    seeds = args.seeds
    print(f"a layer adds {slope:.2f} ms an epoch ({slope / seeds:.3f} per seed): the kernels {slope - bare_slope:.2f}, "
          f"the calls around them {bare_slope:.2f}; the rest of the epoch (no layer) {intercept:.1f} ms "
          f"({intercept / seeds:.2f} per seed), of which kernels {intercept - bare_intercept:.1f}")
    return lines


def grid_estimate(lines: dict[tuple[str, str, str], dict[str, tuple[float, float]]], seeds: int, budget: float) -> None:
    """Prints the literature grid's CPU-hours of epochs from the timed combinations' lines."""
    timed = [{key[position] for key in lines} for position in range(3)]  # datasets, norms, attention norms

    def cost(*wanted: str) -> tuple[float, float]:
        """(ms, of them the kernels' part that grows with depth) of a seed's run-epochs over
        the grid's depths, for `wanted` (dataset, norm, attention norm)."""
        keys = [
            key for key in lines
            if all(key[position] == name or name not in timed[position] for position, name in enumerate(wanted))
        ]
        total = floor = 0.0
        for key in keys:
            (slope, intercept), (bare_slope, _) = lines[key]["kernels"], lines[key]["no-op"]
            total += sum(intercept + slope * depth for depth in GRID_DEPTHS) / seeds
            floor += sum((slope - bare_slope) * depth for depth in GRID_DEPTHS) / seeds
        return total / len(keys), floor / len(keys)

    hours = floor_hours = 0.0
    for dataset, attention_norm, (norm, arms) in itertools.product(
        GRID_DATASETS, GRID_ATTENTION_NORMS, GRID_ARMS.items()
    ):
        total, floor = cost(dataset, norm, attention_norm)
        # each of these arms' seeds runs every depth for GRID_EPOCHS epochs; ms -> hours
        seed_epochs_in_hours = arms * GRID_SEEDS * GRID_EPOCHS / 1000 / 3600
        hours += total * seed_epochs_in_hours
        floor_hours += floor * seed_epochs_in_hours
    per_run_epoch = budget * 3600 * 1000 / (GRID_RUNS * GRID_EPOCHS)
    print(f"the literature grid ({GRID_RUNS} runs of {GRID_EPOCHS} epochs; the arms without a normalisation as "
          f"'none', what was not timed as the mean of what was): {hours:.1f} CPU-hours of epochs, start-up and "
          f"each run's records not counted; the kernels' part that grows with depth alone {floor_hours:.1f} "
          f"CPU-hours, against a budget of {budget:g} ({per_run_epoch:.2f} ms per run-epoch)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", "--dataset", default="cora", help="comma-separated")
    parser.add_argument("--norms", "--norm", default="none", help="comma-separated: none, batchnorm, pairnorm, dgn")
    parser.add_argument("--attention-norms", "--attention-norm", default="none", help="comma-separated: none, lip")
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
    for option, given, allowed in [
        ("--norms", args.norms, GRID_ARMS), ("--attention-norms", args.attention_norms, GRID_ATTENTION_NORMS)
    ]:
        unknown = [name for name in names(given) if name not in allowed]
        if unknown or not names(given):
            raise SystemExit(f"{option} {given!r}: give a comma-separated list of {', '.join(allowed)}")
    torch.set_num_threads(1)
    retain_freed_memory()  # as `lipnorm train`
    reason = kernels.unavailable()
    if reason is not None:
        raise SystemExit(f"no compiled kernels here: {reason}")
    lines = {}
    for key in itertools.product(names(args.datasets), names(args.norms), names(args.attention_norms)):
        args.dataset, args.norm, args.attention_norm = key
        lines[key] = split(args, depths)
    grid_estimate(lines, args.seeds, args.budget_cpu_hours)


if __name__ == "__main__":
    main()
