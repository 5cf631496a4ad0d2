"""Predicted / measured peak memory and epoch time of `lipnorm.plan` on runs its fit
did not see: csbm graphs of 1e4 to 2e5 nodes (other degrees, features and seeds than
the calibration's), depths 2 to 30, widths 8x8 to 8x64, plain, checkpointed and with
cluster batches, GAT-Lip and the graph transformer.

Each run is `lipnorm train ... --epochs 2` in a subprocess (`lipnorm.plan.measure`, as
the calibration measures); a configuration predicted over `--max-mb` or `--max-epoch-s`
is left out (the machine is shared). Goal: memory ratios within 0.8-1.25.

    PYTHONPATH=src .venv/bin/python benchmarks/plan_accuracy.py [--coefficients FILE]

Not a test: it exits 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from lipnorm import plan

# (nodes, average degree, features, classes), (heads, hidden), depth, checkpoint, cluster
# batches (K partitions, B a batch) or None
CONFIGURATIONS = [
    ((10000, 10, 100, 6), (8, 64), 2, False, None),
    ((10000, 10, 100, 6), (8, 64), 8, True, None),
    ((10000, 10, 100, 6), (8, 8), 30, False, None),
    ((10000, 10, 100, 6), (8, 8), 30, True, None),
    ((25000, 12, 500, 7), (8, 32), 6, False, None),
    ((25000, 12, 500, 7), (8, 32), 6, True, None),
    ((50000, 8, 128, 12), (8, 16), 4, False, None),
    ((50000, 8, 128, 12), (8, 16), 16, True, None),
    ((100000, 5, 64, 20), (8, 8), 2, False, None),
    ((100000, 5, 64, 20), (8, 8), 12, True, None),
    ((200000, 4, 32, 40), (8, 8), 2, False, None),
    ((200000, 4, 32, 40), (8, 8), 6, True, None),
    ((25000, 12, 500, 7), (8, 32), 6, False, (10, 2)),
    ((50000, 8, 128, 12), (8, 16), 16, False, (20, 2)),
    ((100000, 5, 64, 20), (8, 64), 8, False, (50, 5)),
    ((100000, 5, 64, 20), (8, 64), 8, True, (50, 5)),
    ((200000, 4, 32, 40), (8, 16), 30, False, (100, 4)),
]
# The graph transformer (four projections a layer).
TRANSFORMER = [
    ((25000, 12, 500, 7), (8, 32), 6, False, None),
    ((25000, 12, 500, 7), (8, 32), 6, True, None),
    ((50000, 8, 128, 12), (8, 16), 4, False, (20, 4)),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--coefficients", help="calibration file (default: lipnorm's own)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-mb", type=float, default=5000, help="skip runs predicted over this (default 5000)")
    parser.add_argument("--max-epoch-s", type=float, default=40, help="skip runs predicted slower (default 40)")
    args = parser.parse_args()
    coefficients = plan.load_coefficients(args.coefficients)
    print(f"coefficients: {coefficients.machine} {coefficients.date}, {coefficients.threads} thread(s)")
    print("| model | nodes | edges | F | heads x hidden | depth | checkpoint | batches (K, B) | MB predicted | MB measured | ratio | s/epoch predicted | s/epoch measured | ratio |")
    print("|---|---:|---:|---:|---|---:|---|---|---:|---:|---:|---:|---:|---:|")
    ratios = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="lipnorm-plan-accuracy-") as workdir:
        runs = [(plan.CALIBRATION_MODEL, *c) for c in CONFIGURATIONS] + [("gt-lip", *c) for c in TRANSFORMER]
        for model, (nodes, degree, features, classes), (heads, hidden), depth, checkpoint, batches in runs:
            csbm = {"nodes": nodes, "classes": classes, "avg_degree": degree, "feature_dim": features, "signal": 1, "seed": 7}
            sizes = plan.csbm_sizes(csbm)
            cluster = {} if batches is None else {"batching": "cluster", "partitions": batches[0], "batch_partitions": batches[1]}
            run = plan.RunShape(sizes, depth, heads, hidden, checkpoint, **cluster, projections=plan.projections_of(model))
            predicted = coefficients.estimate(run)
            where = f"| {model} | {nodes} | {sizes.edges} | {features} | {heads}x{hidden} | {depth} | {checkpoint} | {batches or 'full'} |"
            if predicted.memory_mb > args.max_mb or predicted.epoch_s > args.max_epoch_s:
                print(f"{where} {predicted.memory_mb:.0f} | skipped | | {predicted.epoch_s:.2f} | | |")
                continue
            point = {
                "csbm": csbm, "heads": heads, "hidden": hidden, "depth": depth, "checkpoint": checkpoint, "model": model,
                **cluster,
            }
            row = plan.measure(point, args.threads, "cpu", Path(workdir))
            memory = predicted.memory_mb / row["memory_mb"]
            seconds = predicted.epoch_s / row["epoch_s"]
            ratios.append((memory, seconds))
            print(
                f"{where} {predicted.memory_mb:.0f} | {row['memory_mb']:.0f} | {memory:.2f} | "
                f"{predicted.epoch_s:.2f} | {row['epoch_s']:.2f} | {seconds:.2f} |",
                flush=True,
            )
    if ratios:
        memory = [m for m, _ in ratios]
        seconds = [s for _, s in ratios]
        inside = sum(0.8 <= m <= 1.25 for m in memory)
        print(
            f"\nmemory ratio {min(memory):.2f}-{max(memory):.2f} ({inside}/{len(memory)} within 0.8-1.25); "
            f"epoch-time ratio {min(seconds):.2f}-{max(seconds):.2f}; {time.perf_counter() - started:.0f} s"
        )


if __name__ == "__main__":
    main()
