"""Overhead of gradient and output-norm logging on the epoch time of `lipnorm train`.

One process, one model: after a warm-up, blocks of epochs alternate between training
steps with instrumentation (per-group gradient norms, which also serve as the
non-finite-gradient check, and forward hooks on the attention layers) and bare steps
(loss check only). Each block is timed as a whole (train step + evaluation, as an
epoch of `lipnorm train`) on the wall clock and on the process's CPU clock; each pair
of blocks gives a ratio, and the median ratio is reported. Interleaving keeps drift in
machine load out of the comparison. Last, the instrumentation alone is timed directly
on the last step's gradients and outputs, as a share of the bare epoch.

    .venv/bin/python benchmarks/gradlog_overhead.py --mirror ../shared/datasets

Not a test: it prints the figure and exits 0 whatever it is.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from lipnorm import train
from lipnorm.nn.models import attention_layers

# Wall time is what a run takes; CPU time of this process is what it costs, and is far
# less disturbed by other processes on a busy machine.
CLOCKS = ("wall", "cpu")


def time_block(trainer: train.Trainer, epochs: int, instrument: bool) -> tuple[float, float]:
    """Mean (wall, CPU) seconds of an epoch: train step + evaluation, as in a run."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(epochs):
        trainer.train_step(instrument=instrument)
        trainer.evaluate()
    return (time.perf_counter() - wall) / epochs, (time.process_time() - cpu) / epochs


def direct_cost(trainer: train.Trainer, repeats: int) -> float:
    """CPU seconds of the instrumentation alone per epoch, repeated on the last step's
    gradients and attention outputs: far less noisy than a difference of epoch times."""
    outputs = []
    handles = [
        module.register_forward_hook(lambda _m, _i, out: outputs.append(out.detach()))
        for _, module in attention_layers(trainer.model)
    ]
    trainer.train_step(instrument=False)
    for handle in handles:
        handle.remove()
    start = time.process_time()
    for _ in range(repeats):
        norms = [torch.linalg.vector_norm(out) for out in outputs]
        torch.cat([trainer.gradient_norms(), torch.stack(norms).double()]).tolist()
    return (time.process_time() - start) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="cora")
    parser.add_argument("--model", default="gat")
    parser.add_argument("--depth", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--data-root", default="resources/datasets")
    parser.add_argument("--mirror", default=None, help="default: $LIPNORM_DATA_MIRROR")
    parser.add_argument("--warmup", type=int, default=5, help="epochs before timing")
    parser.add_argument("--pairs", type=int, default=30, help="(with, without) block pairs")
    parser.add_argument("--block", type=int, default=1, help="epochs per block")
    parser.add_argument("--repeats", type=int, default=200, help="for the direct cost")
    args = parser.parse_args()

    config = train.TrainConfig(
        dataset=args.dataset, model=args.model, depth=args.depth, threads=args.threads,
        data_root=args.data_root, mirror=args.mirror,
    ).resolved()
    setup = train.prepare(config)
    trainer = train.Trainer(setup, config.lr, config.weight_decay, config.protocol)
    time_block(trainer, args.warmup, instrument=True)

    # seconds[clock][instrument]: one entry per block.
    seconds = {clock: {True: [], False: []} for clock in CLOCKS}
    for pair in range(args.pairs):
        # Alternate which condition goes first, so neither always follows the other.
        for instrument in (True, False) if pair % 2 == 0 else (False, True):
            for clock, value in zip(CLOCKS, time_block(trainer, args.block, instrument)):
                seconds[clock][instrument].append(value)

    print(
        f"{args.model} depth {args.depth} on {args.dataset}, {args.threads} thread(s), "
        f"{args.pairs} pairs of {args.block}-epoch blocks"
    )
    for clock in CLOCKS:
        with_logging, without_logging = seconds[clock][True], seconds[clock][False]
        ratios = [a / b for a, b in zip(with_logging, without_logging)]
        median_with, median_without = map(statistics.median, (with_logging, without_logging))
        print(
            f"{clock}: median epoch {median_with * 1000:.1f} ms with logging, "
            f"{median_without * 1000:.1f} ms without (ratio {median_with / median_without:.4f}); "
            f"median pair ratio {statistics.median(ratios):.4f} (quartiles "
            + ", ".join(f"{q:.4f}" for q in statistics.quantiles(ratios, n=4)) + ")"
        )
    cost = direct_cost(trainer, args.repeats)
    bare = statistics.median(seconds["cpu"][False])
    print(
        f"direct cost of the instrumentation: {cost * 1000:.3f} ms CPU per epoch "
        f"= {100 * cost / bare:.2f}% of the median bare epoch"
    )


if __name__ == "__main__":
    main()
