"""Start-up cost of a `lipnorm train` process: import and Cora load, process exit, and
a rejected bad setting.

Each sample is a fresh Python process that imports the training modules
(`lipnorm.train.run_directory`: `lipnorm.train` itself imports them on first use), loads Cora (from
the mirror into a cached `--root`, so after the first sample the load is warm) and
exits, as every job of a grid does. The child reports its import and load times; the
parent times the whole process. Samples alternate between the process as shipped and
one without the two exit fixes of `lipnorm` (ogb's PyPI version check in non-daemon
threads, disabled in `lipnorm/__init__.py`; the interpreter's exit-time garbage
collection, skipped by `gc.freeze()` in `lipnorm.cli.main`), so the difference is
measured side by side on the same machine load.

A rejected setting (`lipnorm train --patience 0`) is timed as a whole process, side by
side with the same command in a process that imports the training modules (torch, DGL)
before it checks the settings, as `lipnorm train` did until the checks moved ahead of
those imports.

    .venv/bin/python benchmarks/startup.py --mirror ../shared/datasets

Not a test: it prints the figures and exits 0 whatever they are.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = """
import json, sys, time
start = time.perf_counter()
if {unfixed}:
    import outdated  # before lipnorm: its import then starts ogb's version-check threads
import lipnorm.train.run_directory
from lipnorm.data import load_dataset
imported = time.perf_counter()
load_dataset("cora", root={root!r}, mirror={mirror!r})
loaded = time.perf_counter()
print(json.dumps({{"import_s": imported - start, "load_s": loaded - imported}}))
if not {unfixed}:
    import gc
    gc.freeze()  # as lipnorm.cli.main does when a command returns
"""


REJECT = """
import sys
if {heavy_first}:
    import lipnorm.train.run_directory  # torch and DGL, as before the settings were checked first
from lipnorm import cli
try:
    cli.main(["train", "--patience", "0", "--out", {out!r}])
except SystemExit as error:
    assert error.code == 2, error.code
"""


def rejected_sample(out: str, heavy_first: bool) -> float:
    """Seconds of a whole process whose `lipnorm train` refuses `--patience 0`."""
    code = REJECT.format(heavy_first=heavy_first, out=out)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0 or "patience must be >= 1, got 0" not in done.stderr:
        raise RuntimeError(f"the bad setting was not refused as expected: {done.stderr}")
    return wall


def sample(root: str, mirror: str | None, unfixed: bool) -> dict[str, float]:
    code = CHILD.format(root=root, mirror=mirror, unfixed=unfixed)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    times = json.loads(done.stdout.strip().splitlines()[-1])
    times["process_s"] = wall
    times["exit_s"] = wall - times["import_s"] - times["load_s"]
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", default=None, help="dataset mirror folder")
    parser.add_argument("--samples", type=int, default=5, help="processes per variant")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        sample(root, args.mirror, unfixed=False)  # fetch and warm the page cache
        runs: dict[str, list[dict[str, float]]] = {"shipped": [], "without exit fixes": []}
        for _ in range(args.samples):
            runs["shipped"].append(sample(root, args.mirror, unfixed=False))
            runs["without exit fixes"].append(sample(root, args.mirror, unfixed=True))
        rejected: dict[str, list[float]] = {"checked first": [], "after torch and DGL": []}
        for _ in range(args.samples):
            rejected["checked first"].append(rejected_sample(f"{root}/never", heavy_first=False))
            rejected["after torch and DGL"].append(rejected_sample(f"{root}/never", heavy_first=True))
    keys = ("import_s", "load_s", "exit_s", "process_s")
    print(f"medians of {args.samples} fresh processes (seconds)")
    print(f"{'variant':<20}" + "".join(f"{key:>11}" for key in keys))
    for name, samples in runs.items():
        medians = [statistics.median(s[key] for s in samples) for key in keys]
        print(f"{name:<20}" + "".join(f"{value:>11.2f}" for value in medians))
    shipped = runs["shipped"]
    print(
        "import + Cora load (shipped): "
        f"{statistics.median(s['import_s'] + s['load_s'] for s in shipped):.2f} s (target < 5 s)"
    )
    print("lipnorm train --patience 0, whole process (refused):")
    for name, walls in rejected.items():
        print(f"  {name:<20}{statistics.median(walls):>8.2f} s")


if __name__ == "__main__":
    main()
