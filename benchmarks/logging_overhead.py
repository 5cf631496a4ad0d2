"""Overhead of `lipnorm train`'s per-layer logging on its epoch time.

Two kinds of logging, each against bare epochs, on one model in one process:
- "gradients": per-group gradient norms (which also serve as the non-finite-gradient
  check) and forward hooks keeping the attention outputs' norms, in the training step;
- "layer stats": the representation diagnostics (`lipnorm.diagnostics`: Dirichlet energy,
  MAD, Rayleigh quotient, attention entropy, output norm of every attention layer) on
  the evaluation forward.
After a warm-up, blocks of epochs (train step + evaluation, as an epoch of `lipnorm
train`) rotate through bare / gradients / layer stats / both; each block is timed as a
whole on the wall clock and on the process's CPU clock, each logged block is paired with
the bare block of its round, and the median pair ratio is reported. Rotating keeps drift
in machine load out of the comparison. Last, each instrumentation alone is timed
directly (CPU) on the last epoch's tensors, as a share of the bare epoch.

An epoch is logged every `grad_log_every` epochs: at K, the cost per epoch is the logged
epoch's extra divided by K (printed for K = 1 and 10).

    .venv/bin/python benchmarks/logging_overhead.py --mirror ../shared/datasets

Not a test: it prints the figures and exits 0 whatever they are.
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
# condition -> (gradient instrumentation, layer statistics)
CONDITIONS = {
    "bare": (False, False),
    "gradients": (True, False),
    "layer stats": (False, True),
    "both": (True, True),
}


def time_block(trainer: train.Trainer, epochs: int, condition: str) -> tuple[float, float]:
    """Mean (wall, CPU) seconds of an epoch: train step + evaluation, as in a run."""
    instrument, layer_stats = CONDITIONS[condition]
    wall, cpu = time.perf_counter(), time.process_time()
    for epoch in range(epochs):
        trainer.train_step(instrument=instrument)
        trainer.evaluate(layer_stats=layer_stats)
        if layer_stats:
            trainer.layer_stats.rows(epoch)
    return (time.perf_counter() - wall) / epochs, (time.process_time() - cpu) / epochs


def direct_costs(trainer: train.Trainer, repeats: int) -> dict[str, float]:
    """CPU seconds per logged epoch of each instrumentation alone, repeated on the last
    epoch's gradients, outputs and attention: far less noisy than a difference of epoch
    times."""
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
    gradients = (time.process_time() - start) / repeats

    trainer.evaluate(layer_stats=True)
    captured = list(trainer.layer_stats.captured)
    start = time.process_time()
    for _ in range(repeats):
        trainer.layer_stats.captured[:] = captured
        trainer.layer_stats.rows(0)
    return {"gradients": gradients, "layer stats": (time.process_time() - start) / repeats}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="cora")
    parser.add_argument("--model", default="gat-lip")
    parser.add_argument("--depth", type=int, default=10)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--data-root", default="resources/datasets")
    parser.add_argument("--mirror", default=None, help="default: $LIPNORM_DATA_MIRROR")
    parser.add_argument("--warmup", type=int, default=5, help="epochs before timing")
    parser.add_argument("--rounds", type=int, default=20, help="rounds of one block per condition")
    parser.add_argument("--block", type=int, default=1, help="epochs per block")
    parser.add_argument("--repeats", type=int, default=50, help="for the direct costs")
    args = parser.parse_args()

    config = train.TrainConfig(
        dataset=args.dataset, model=args.model, depth=args.depth, heads=args.heads,
        hidden=args.hidden, threads=args.threads, data_root=args.data_root, mirror=args.mirror,
    ).resolved()
    setup = train.prepare(config)
    trainer = train.Trainer(setup, config.lr, config.weight_decay, config.protocol)
    time_block(trainer, args.warmup, "both")

    # seconds[clock][condition]: one entry per round.
    seconds = {clock: {condition: [] for condition in CONDITIONS} for clock in CLOCKS}
    names = list(CONDITIONS)
    for r in range(args.rounds):
        # Rotate the order, so no condition always follows the same one.
        for condition in names[r % len(names):] + names[: r % len(names)]:
            for clock, value in zip(CLOCKS, time_block(trainer, args.block, condition)):
                seconds[clock][condition].append(value)

    print(
        f"{args.model} {args.heads} x {args.hidden}, depth {args.depth} on {args.dataset}, "
        f"{args.threads} thread(s), {args.rounds} rounds of {args.block}-epoch blocks"
    )
    for clock in CLOCKS:
        bare = seconds[clock]["bare"]
        print(f"{clock}: median bare epoch {statistics.median(bare) * 1000:.1f} ms")
        for condition in names[1:]:
            ratios = [a / b for a, b in zip(seconds[clock][condition], bare)]
            print(
                f"  {condition}: median epoch {statistics.median(seconds[clock][condition]) * 1000:.1f} ms, "
                f"median pair ratio {statistics.median(ratios):.4f} (quartiles "
                + ", ".join(f"{q:.4f}" for q in statistics.quantiles(ratios, n=4)) + ")"
            )
    bare = statistics.median(seconds["cpu"]["bare"])
    for name, cost in direct_costs(trainer, args.repeats).items():
        print(
            f"direct cost of the {name} logging: {cost * 1000:.3f} ms CPU per logged epoch "
            f"= {100 * cost / bare:.2f}% of the median bare epoch every epoch, "
            f"{10 * cost / bare:.2f}% at grad_log_every=10"
        )


if __name__ == "__main__":
    main()
