"""Epoch time of `lipnorm train` with and without `--flush-denormal`, side by side.

Per cell (model, depth, heads x hidden), two Trainers of the same settings and seed
(`lipnorm.train.trainer.prepare`: same data, mask and initial weights) train in one process:
one always with `torch.set_flush_denormal(True)`, the other always without, one epoch
each (train step + evaluation, as `lipnorm train`) in round-robin order rotated every
round (`lipnorm.bench.interleaved_rounds`), so load changes of a shared machine hit both
alike. Deep models on the missing-features setting (default: 100 % of the non-training
rows erased, as the paper's deepest runs) are where tiny, subnormal values appear.

    PYTHONPATH=src .venv/bin/python benchmarks/flush_denormal.py --mirror ../shared/datasets

Not a test: it prints, per cell, the ratio of median epoch times flush / no-flush with
the quartiles of the per-round ratios, the medians, and the share of subnormal values
among the attention layers' outputs and attention weights of the no-flush model after
the last round.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform

import numpy as np
import torch

from lipnorm import bench
from lipnorm.nn.models.numbering import attention_layers
from lipnorm.train import TrainConfig
from lipnorm.train.trainer import Trainer, prepare
from lipnorm.train.process import set_flush_denormal

CELLS = [  # (model, depth, heads, hidden)
    ("gat", 10, 8, 8),
    ("gat-lip", 10, 8, 8),
    ("gat", 10, 8, 64),
    ("gat-lip", 10, 8, 64),
]


def subnormal_share(trainer: Trainer) -> float:
    """Share of subnormal values among the attention layers' outputs and attention
    weights of one eval forward (`Trainer.evaluate(layer_stats=True)` asks the layers for
    their attention; hooks put before its own see `(output, attention)`)."""
    kept: list[torch.Tensor] = []

    def keep(module, args, output):
        kept.extend(t.detach().flatten() for t in output)

    handles = [module.register_forward_hook(keep, prepend=True) for _, module in attention_layers(trainer.model)]
    try:
        trainer.evaluate(layer_stats=True)
    finally:
        for handle in handles:
            handle.remove()
    trainer.layer_stats.captured.clear()
    values = torch.cat(kept).abs()
    tiny = (values > 0) & (values < torch.finfo(torch.float32).tiny)
    return tiny.double().mean().item()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="cora")
    parser.add_argument("--missing-rate", type=float, default=100.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=30, help="timed rounds per cell")
    parser.add_argument("--warmup", type=int, default=3, help="untimed rounds first")
    parser.add_argument("--cells", default=None,
                        help="model:depth:heads:hidden,... (default: " + ",".join(":".join(map(str, c)) for c in CELLS) + ")")
    parser.add_argument("--data-root", default="resources/datasets")
    parser.add_argument("--mirror", default=None, help="default: $LIPNORM_DATA_MIRROR")
    args = parser.parse_args()
    cells = CELLS if args.cells is None else [
        (model, int(depth), int(heads), int(hidden))
        for model, depth, heads, hidden in (cell.split(":") for cell in args.cells.split(","))
    ]
    plan = dataclasses.replace(bench.QUICK, warmup_rounds=args.warmup)
    print(
        f"{args.dataset}, missing rate {args.missing_rate:g} %, {args.threads} thread(s), {args.rounds} rounds; "
        f"torch {torch.__version__}, python {platform.python_version()}, load average at start "
        + ", ".join(f"{x:.2f}" for x in os.getloadavg()),
        flush=True,
    )
    for model, depth, heads, hidden in cells:
        trainers = {}
        for flush in (True, False):
            config = TrainConfig(
                dataset=args.dataset, model=model, depth=depth, heads=heads, hidden=hidden,
                missing_rate=args.missing_rate, threads=args.threads, data_root=args.data_root,
                mirror=args.mirror, flush_denormal=flush,
            ).resolved()
            setup = prepare(config)  # sets the flush mode; each step sets its own again
            trainers["flush" if flush else "no-flush"] = Trainer(setup, config)

        def epoch(name: str) -> None:
            set_flush_denormal(name == "flush")
            trainers[name].train_step()
            trainers[name].evaluate()

        steps = {name: (lambda n=name: epoch(n)) for name in trainers}
        times: dict[str, dict[int, float]] = {name: {} for name in steps}
        for r, name, seconds in bench.interleaved_rounds(steps, plan, rounds=args.rounds):
            times[name][r] = seconds
        set_flush_denormal(False)  # also for `subnormal_share`: flushing would hide them
        flush, plain = (np.array([times[name][r] for r in sorted(times[name])]) for name in ("flush", "no-flush"))
        q25, q75 = np.percentile(flush / plain, [25, 75])
        print(
            f"{model} depth {depth} {heads}x{hidden}: flush/no-flush {np.median(flush) / np.median(plain):.3f} "
            f"(paired {q25:.3f}-{q75:.3f}, {len(flush)} rounds); median epoch ms: flush "
            f"{1e3 * np.median(flush):.1f}, no-flush {1e3 * np.median(plain):.1f}; subnormal share of "
            f"attention outputs and weights (no-flush model, eval forward without flushing): "
            f"{subnormal_share(trainers['no-flush']):.2e}",
            flush=True,
        )


if __name__ == "__main__":
    main()
