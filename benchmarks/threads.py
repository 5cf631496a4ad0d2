"""One `lipnorm train` run on 2 threads vs 1, and vs two concurrent 1-thread runs.

Three conditions take turns, in an order rotated every round, so load changes of the
machine hit all of them alike:
- "1 thread": one run with `--threads 1`;
- "2 threads": one run with `--threads 2`;
- "2 x 1 thread": two runs with `--threads 1` started together (seeds 0 and 1).
Every run is a real `lipnorm train` process (default: Cora, gat-lip, 8 heads x 64,
depth 10, 30 epochs) writing its run directory into a temporary folder. Per round it
takes the wall time of the processes (startup and data loading included) and the
runs' `mean_epoch_s` (summary.json: the epochs alone). The dataset mirror comes from
`--mirror DIR` or $LIPNORM_DATA_MIRROR, as for `lipnorm train`.

Printed, as medians over the rounds with the range of the per-round values:
- speed-up of 2 threads: time(1 thread) / time(2 threads), per epoch and wall;
- throughput of two concurrent 1-thread runs over one 1-thread run:
  2 x time(1 thread) / time(2 x 1 thread), wall (2 = perfect, two cores fully used);
- two concurrent 1-thread runs vs the same two runs one after the other on 2 threads:
  2 x time(2 threads) / time(2 x 1 thread), wall (> 1: prefer two runs of one thread);
- slowdown of an epoch when two runs share the machine: epoch(2 x 1) / epoch(1).

    PYTHONPATH=src .venv/bin/python benchmarks/threads.py --mirror ../shared/datasets
    PYTHONPATH=src .venv/bin/python benchmarks/threads.py --rounds 5 --epochs 50 --depth 30

The machine must otherwise be idle (check `uptime`): the load average at the start and
end is printed. Not a test: it exits 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_SETTINGS = [
    "--dataset", "cora", "--model", "gat-lip", "--depth", "10", "--heads", "8", "--hidden", "64", "--epochs", "30",
]
CONDITIONS = {"1 thread": (1, 1), "2 threads": (2, 1), "2 x 1 thread": (1, 2)}  # (threads, concurrent runs)


def run_condition(settings: list[str], threads: int, runs: int, folder: Path) -> tuple[float, float]:
    """(wall seconds until every run has finished, mean of the runs' mean_epoch_s)."""
    outs = [folder / f"run{index}" for index in range(runs)]
    start = time.perf_counter()
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "lipnorm.cli", "train", *settings, "--threads", str(threads),
             "--seed", str(index), "--out", str(out)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        for index, out in enumerate(outs)
    ]
    for process in processes:
        _, err = process.communicate()
        if process.returncode != 0:
            raise SystemExit(f"lipnorm train failed (exit {process.returncode}):\n{err}")
    wall = time.perf_counter() - start
    epochs = [json.loads((out / "summary.json").read_text())["mean_epoch_s"] for out in outs]
    return wall, statistics.mean(epochs)


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} (range {min(values):.3f}-{max(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="Any other flag goes to every `lipnorm train` run, after (so overriding) "
        f"the defaults: {' '.join(DEFAULT_SETTINGS)}",
    )
    parser.add_argument("--rounds", type=int, default=3)
    args, extra = parser.parse_known_args()
    settings = [*DEFAULT_SETTINGS, *extra]
    print(
        f"lipnorm train {' '.join(settings)}; {args.rounds} rounds; {os.cpu_count()} CPU(s), "
        f"python {platform.python_version()}; load average at start "
        + ", ".join(f"{x:.2f}" for x in os.getloadavg()),
        flush=True,
    )
    wall: dict[str, list[float]] = {name: [] for name in CONDITIONS}
    epoch: dict[str, list[float]] = {name: [] for name in CONDITIONS}
    names = list(CONDITIONS)
    with tempfile.TemporaryDirectory(prefix="lipnorm-threads-") as tmp:
        for r in range(args.rounds):
            for name in names[r % len(names):] + names[: r % len(names)]:
                folder = Path(tmp) / f"round{r}" / name.replace(" ", "")
                seconds, per_epoch = run_condition(settings, *CONDITIONS[name], folder)
                wall[name].append(seconds)
                epoch[name].append(per_epoch)
                print(f"round {r} {name}: wall {seconds:.1f} s, mean epoch {1e3 * per_epoch:.0f} ms", flush=True)
    one, two, pair = "1 thread", "2 threads", "2 x 1 thread"
    per_round = range(args.rounds)
    print("load average at end " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(f"speed-up of 2 threads, per epoch: {spread([epoch[one][r] / epoch[two][r] for r in per_round])}")
    print(f"speed-up of 2 threads, wall:      {spread([wall[one][r] / wall[two][r] for r in per_round])}")
    print(f"throughput of 2 x 1 thread over one 1-thread run, wall: "
          f"{spread([2 * wall[one][r] / wall[pair][r] for r in per_round])}")
    print(f"2 x 1 thread concurrently vs two 2-thread runs in turn, wall: "
          f"{spread([2 * wall[two][r] / wall[pair][r] for r in per_round])}")
    print(f"epoch slowdown with two runs sharing the machine: "
          f"{spread([epoch[pair][r] / epoch[one][r] for r in per_round])}")
    for name in names:
        print(f"median {name}: wall {statistics.median(wall[name]):.1f} s, "
              f"epoch {1e3 * statistics.median(epoch[name]):.0f} ms")


if __name__ == "__main__":
    main()
