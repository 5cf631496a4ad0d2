"""An epoch with activation checkpointing against the plain one, side by side.

Question: what does `--checkpoint` cost in time, where the plain run fits too? Plain
and checkpointed `lipnorm train` processes of the same run alternate, round by round
(so that a change of the shared machine's load falls on both), and each round's ratio
of mean epoch times is printed with its peak memory, then the median ratio.

    python benchmarks/checkpoint_cost.py --csbm nodes=20000,classes=40,feature_dim=128 --depth 8 --rounds 3
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile
from datetime import datetime, timezone
from pathlib import Path


def epoch(args: argparse.Namespace, checkpoint: bool) -> tuple[float, float]:
    """Mean epoch seconds and peak MB of one `lipnorm train` process."""
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            "lipnorm", "train", "--dataset", "csbm", "--csbm", args.csbm, "--model", args.model,
            "--depth", str(args.depth), "--heads", str(args.heads), "--hidden", str(args.hidden),
            "--epochs", str(args.epochs), "--threads", "1", "--data-root", args.data_root,
            "--no-layer-stats", "--out", f"{tmp}/run", "--checkpoint" if checkpoint else "--no-checkpoint",
        ]
        subprocess.run(command, check=True, capture_output=True)
        summary = json.loads(Path(tmp, "run", "summary.json").read_text())
        return summary["mean_epoch_s"], summary["peak_memory_mb"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csbm", default="nodes=20000,classes=40,feature_dim=128")
    parser.add_argument("--model", default="gat-lip")
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data-root", default="resources/datasets")
    args = parser.parse_args()
    print(f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, {os.cpu_count()} cores; "
          f"{args.model} depth {args.depth}, {args.heads} x {args.hidden}, csbm {args.csbm}, {args.epochs} epochs, 1 thread")
    ratios = []
    for round_ in range(1, args.rounds + 1):
        load = os.getloadavg()[0]
        plain_s, plain_mb = epoch(args, checkpoint=False)
        checkpoint_s, checkpoint_mb = epoch(args, checkpoint=True)
        ratios.append(checkpoint_s / plain_s)
        print(f"round {round_} (load {load:.1f}): plain {plain_s:.2f} s/epoch, {plain_mb:.0f} MB; "
              f"checkpoint {checkpoint_s:.2f} s/epoch, {checkpoint_mb:.0f} MB; ratio {ratios[-1]:.2f}", flush=True)
    print(f"median ratio {statistics.median(ratios):.2f} (range {min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
