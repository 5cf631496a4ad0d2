"""`Trainer.evaluate` under `torch.no_grad` (as `lipnorm train` runs it) vs under
`torch.inference_mode`, beside a training-mode forward, interleaved in one process.

Per cell (model, depth, heads x hidden), one Trainer (`lipnorm.train`, lipnorm recipe)
trains for a few epochs, then these take turns, in an order rotated every round
(`lipnorm.bench.interleaved_rounds`):
- "no_grad": `trainer.evaluate()` (the method is decorated with `torch.no_grad()`);
- "inference_mode": the same call inside `torch.inference_mode()`;
- "train_forward": `model.train()` and a forward with autograd recording (no backward).
It prints inference_mode / no_grad and no_grad / train_forward (ratios of medians, with
the quartiles of the per-round ratios), and checks that both evaluations return the
same numbers and that the layer statistics (`lipnorm.diagnostics`) can be computed from
an inference-mode forward.

    PYTHONPATH=src .venv/bin/python benchmarks/eval_modes.py --mirror ../shared/datasets

Not a test: it exits 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np
import torch

from lipnorm import bench, train

CELLS = [("gat-lip", 10, 8, 8), ("gat-lip", 10, 8, 64)]  # (model, depth, heads, hidden)


def ratio(times: dict[str, dict[int, float]], num: str, den: str) -> str:
    a = np.array([times[num][r] for r in sorted(times[num])])
    b = np.array([times[den][r] for r in sorted(times[den])])
    q25, q75 = np.percentile(a / b, [25, 75])
    return f"{num} / {den} {np.median(a) / np.median(b):.3f} (paired {q25:.3f}-{q75:.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="cora")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--data-root", default="resources/datasets")
    parser.add_argument("--mirror", default=None, help="default: $LIPNORM_DATA_MIRROR")
    args = parser.parse_args()
    plan = dataclasses.replace(bench.QUICK, warmup_rounds=3)
    for model, depth, heads, hidden in CELLS:
        config = train.TrainConfig(
            dataset=args.dataset, model=model, depth=depth, heads=heads, hidden=hidden,
            threads=args.threads, data_root=args.data_root, mirror=args.mirror,
        ).resolved()
        trainer = train.Trainer(train.prepare(config), config.lr, config.weight_decay, config.protocol)
        for _ in range(3):
            trainer.train_step()

        def in_inference_mode(layer_stats: bool = False):
            with torch.inference_mode():
                return trainer.evaluate(layer_stats=layer_stats)

        def train_forward() -> None:
            trainer.model.train()
            trainer.model(trainer.graph, trainer.features)

        assert torch.equal(in_inference_mode(), trainer.evaluate()), "the two evaluations differ"
        trainer.evaluate(layer_stats=True)
        expected = trainer.layer_stats.rows(0)
        in_inference_mode(layer_stats=True)
        assert trainer.layer_stats.rows(0) == expected, "layer statistics differ in inference mode"

        steps = {"no_grad": trainer.evaluate, "inference_mode": in_inference_mode, "train_forward": train_forward}
        times: dict[str, dict[int, float]] = {name: {} for name in steps}
        for r, name, seconds in bench.interleaved_rounds(steps, plan, rounds=args.rounds):
            times[name][r] = seconds
        medians = ", ".join(f"{name} {1e3 * np.median(list(t.values())):.1f}" for name, t in times.items())
        print(
            f"{model} depth {depth} {heads}x{hidden} on {args.dataset}, {args.rounds} rounds: "
            f"{ratio(times, 'inference_mode', 'no_grad')}; {ratio(times, 'no_grad', 'train_forward')}; "
            f"median ms: {medians}",
            flush=True,
        )


if __name__ == "__main__":
    main()
