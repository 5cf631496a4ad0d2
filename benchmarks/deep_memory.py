"""Peak memory and epoch time of a deep GAT-Lip vs depth at ogbn-arxiv's size.

Question: how deep can a run at the largest dataset's size go in a given memory, plain,
with activation checkpointing (`--checkpoint`) and with cluster batches
(`--batching cluster`)? Each point is one `lipnorm train` process of one epoch on a
csbm graph of ogbn-arxiv's node count (its graph cached under --data-root after the
first point), 8 heads x 64; its peak resident memory and epoch time come from the run's
summary.json. Rows are appended to --csv as each point finishes (rewritten atomically),
so a stopped benchmark keeps what it measured and a rerun skips the points already there.

    python benchmarks/deep_memory.py --modes checkpoint --depths 2 4 8 16 30 --csv docs/bench/deep_memory.csv
    python benchmarks/deep_memory.py --plot docs/bench/deep_memory.png --csv docs/bench/deep_memory.csv
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from lipnorm.io import atomic_path

ARXIV_CSBM = "nodes=169343,classes=40,avg_degree=7,feature_dim=128,signal=1,seed=0"
MODES = {
    "plain": [],
    "checkpoint": ["--checkpoint"],
    "cluster": ["--batching", "cluster"],
    "cluster+checkpoint": ["--batching", "cluster", "--checkpoint"],
}
COLUMNS = [
    "mode", "depth", "heads", "hidden", "nodes", "peak_memory_mb", "epoch_s", "status",
    "threads", "partitions", "batch_partitions", "date", "machine", "load_1min",
]


def measure(mode: str, depth: int, args: argparse.Namespace) -> dict:
    """One epoch of `lipnorm train` in a process of its own; its summary as a row."""
    flags = list(MODES[mode])
    if mode.startswith("cluster"):
        flags += ["--partitions", str(args.partitions), "--batch-partitions", str(args.batch_partitions)]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        command = [
            "lipnorm", "train", "--dataset", "csbm", "--csbm", args.csbm, "--model", "gat-lip",
            "--depth", str(depth), "--heads", str(args.heads), "--hidden", str(args.hidden),
            "--epochs", "1", "--threads", str(args.threads), "--data-root", args.data_root,
            "--out", str(out), *flags,
        ]
        print(" ".join(command), flush=True)
        done = subprocess.run(command, capture_output=True, text=True)
        row = {
            "mode": mode, "depth": depth, "heads": args.heads, "hidden": args.hidden,
            "nodes": dict(item.split("=") for item in args.csbm.split(","))["nodes"],
            "threads": args.threads, "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M"),
            "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
            "load_1min": os.getloadavg()[0],
            "partitions": args.partitions if mode.startswith("cluster") else None,
            "batch_partitions": args.batch_partitions if mode.startswith("cluster") else None,
        }
        if done.returncode != 0:
            # Killed for memory (-9) or failed: recorded, so the figure shows where it stops.
            print(done.stderr[-2000:], file=sys.stderr)
            return {**row, "status": f"exit {done.returncode}", "peak_memory_mb": None, "epoch_s": None}
        summary = json.loads((out / "summary.json").read_text())
        return {
            **row, "status": summary["status"], "peak_memory_mb": summary["peak_memory_mb"], "epoch_s": summary["mean_epoch_s"],
        }


def run(args: argparse.Namespace) -> None:
    csv = Path(args.csv)
    rows = pd.read_csv(csv).to_dict("records") if csv.exists() else []
    for mode in args.modes:
        for depth in args.depths:
            if any(row["mode"] == mode and row["depth"] == depth for row in rows):
                continue
            started = time.perf_counter()
            row = measure(mode, depth, args)
            rows.append(row)
            with atomic_path(csv) as tmp:
                pd.DataFrame(rows, columns=COLUMNS).to_csv(tmp, index=False)
            print(f"{mode} depth {depth}: {row['peak_memory_mb']} MB, {row['epoch_s']} s/epoch "
                  f"({time.perf_counter() - started:.0f} s in all)", flush=True)


def plot(args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = pd.read_csv(args.csv).dropna(subset=["peak_memory_mb"])
    figure, (memory, seconds) = plt.subplots(1, 2, figsize=(8, 3.2), constrained_layout=True)
    for mode, rows in table.groupby("mode", sort=False):
        rows = rows.sort_values("depth")
        memory.plot(rows["depth"], rows["peak_memory_mb"] / 1000, marker="o", label=mode)
        seconds.plot(rows["depth"], rows["epoch_s"], marker="o", label=mode)
    memory.set(xlabel="attention layers", ylabel="peak memory (GB)")
    seconds.set(xlabel="attention layers", ylabel="one epoch (s)")
    memory.legend()
    for axis in (memory, seconds):
        axis.grid(alpha=0.3)
    figure.suptitle("GAT-Lip, 8 heads x 64, csbm of ogbn-arxiv's 169,343 nodes", fontsize=9)
    with atomic_path(args.plot) as tmp:
        figure.savefig(tmp, dpi=120, format=Path(args.plot).suffix.lstrip("."))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--csv", required=True, help="measurements, appended point by point")
    parser.add_argument("--plot", help="draw the figure from --csv to this file instead of measuring")
    parser.add_argument("--modes", nargs="+", choices=sorted(MODES), default=["plain", "checkpoint", "cluster"])
    parser.add_argument("--depths", nargs="+", type=int, default=[2, 4, 8, 16, 30])
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--csbm", default=ARXIV_CSBM)
    parser.add_argument("--partitions", type=int, default=400)
    parser.add_argument("--batch-partitions", type=int, default=4)
    parser.add_argument("--data-root", default="resources/datasets")
    args = parser.parse_args()
    if shutil.which("lipnorm") is None:
        parser.error("lipnorm is not on PATH: run from the project's venv (make setup)")
    plot(args) if args.plot else run(args)


if __name__ == "__main__":
    main()
