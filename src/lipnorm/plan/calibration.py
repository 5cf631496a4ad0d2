"""Calibration: measure training runs on this machine and fit the plan's coefficients.

`calibrate` trains a fixed set of small csbm runs (`calibration_points`) for
`CALIBRATION_EPOCHS` epochs each (`measure`, one subprocess a run), fits the
coefficients of `lipnorm.plan.model` to what they measured (`fit`, non-negative least
squares of relative errors) and writes the calibration file (`lipnorm plan --calibrate`).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from lipnorm import grid
from lipnorm.plan.model import (
    MEMORY_TERMS,
    TIME_TERMS,
    Coefficients,
    RunShape,
    known_memory_mb,
    memory_terms,
    projections_of,
    time_terms,
)
from lipnorm.plan.sizes import csbm_sizes
from lipnorm.registry import DatasetSizes

CALIBRATION_EPOCHS = 2
CALIBRATION_MODEL = "gat-lip"
# csbm graphs (nodes, average degree, feature columns, classes), the networks (heads,
# hidden, depths) run on each, plain and checkpointed, and other settings (model,
# cluster batches): node-, edge- and feature-heavy graphs and narrow to wide networks,
# so that every term varies on its own; each point stays under ~3.3 GB and the whole set
# ~20 min on one core.
_CLUSTER = {"batching": "cluster", "partitions": 16, "batch_partitions": 4}
CALIBRATION = (
    ((4000, 4, 64, 5), (8, 8), (1, 4, 8), {}),
    ((20000, 40, 32, 5), (8, 8), (1, 4, 8), {}),
    ((16000, 12, 256, 8), (8, 32), (1, 3, 6), {}),
    ((10000, 20, 1024, 10), (8, 16), (2, 6), {}),
    ((40000, 6, 32, 10), (4, 64), (1, 3, 5), {}),
    ((30000, 3, 128, 10), (2, 64), (2, 4), {}),
    # Deep checkpointed runs whose saved inputs stay in glibc's heap (under 32 MiB each).
    ((12000, 8, 64, 6), (8, 16), (12, 24), {}),
    ((60000, 5, 32, 10), (8, 16), (10,), {}),
    # Many nodes, few features, narrow: what the graph itself holds is most of the peak.
    ((150000, 4, 24, 20), (8, 8), (2, 5), {}),
    ((16000, 12, 256, 8), (8, 32), (1, 3), {"model": "gt-lip"}),
    ((40000, 6, 32, 10), (4, 64), (2, 6), _CLUSTER),
    ((50000, 10, 64, 10), (8, 16), (3,), _CLUSTER),
    # Batches of 1/40 of a wide graph: the whole-graph evaluation is most of the peak.
    ((80000, 6, 48, 10), (8, 64), (2, 5), {"batching": "cluster", "partitions": 80, "batch_partitions": 2}),
)


# The keys of a measurement: the shape's settings and sizes, then what was measured.
SHAPE_KEYS = ("nodes", "edges", "features", "classes", "depth", "heads", "hidden", "checkpoint")


def shape_of(row: Mapping[str, Any]) -> RunShape:
    """The `RunShape` of a measurement row (`SHAPE_KEYS`, optionally batching keys and
    `model`, default `CALIBRATION_MODEL`)."""
    sizes = DatasetSizes(*(int(row[key]) for key in ("nodes", "edges", "features", "classes")))
    return RunShape(
        sizes, int(row["depth"]), int(row["heads"]), int(row["hidden"]), bool(row["checkpoint"]),
        row.get("batching", "full"), int(row.get("partitions", 1)), int(row.get("batch_partitions", 1)),
        projections_of(row.get("model", CALIBRATION_MODEL)),
    )


def _nnls(rows: Sequence[Sequence[float]], targets: Sequence[float], names: Sequence[str]) -> dict[str, float]:
    """Non-negative least squares of relative errors (each row divided by its target),
    so that small and large runs count alike."""
    import numpy as np
    from scipy.optimize import nnls

    matrix = np.asarray(rows, dtype=float)
    target = np.asarray(targets, dtype=float)
    if (target <= 0).any() or not np.isfinite(target).all():
        raise ValueError(f"plan fit: measured values must be finite and positive, got {target.tolist()}")
    scale = np.abs(matrix).max(axis=0)
    scale[scale == 0] = 1.0
    solution, _ = nnls(matrix / target[:, None] / scale, np.ones_like(target), maxiter=50 * len(names))
    return dict(zip(names, (solution / scale).tolist()))


def fit(measurements: Sequence[Mapping[str, Any]], **provenance: Any) -> Coefficients:
    """Coefficients fitted to `measurements` (rows of `SHAPE_KEYS` plus `memory_mb`
    and `epoch_s`) by non-negative least squares; `provenance`: `device`, `threads`,
    `machine`, `date`, `version` as recorded in `Coefficients`."""
    needed = max(len(MEMORY_TERMS), len(TIME_TERMS))
    if len(measurements) < needed:
        raise ValueError(f"plan fit: {len(measurements)} measurements; at least {needed} are needed")
    shapes = [shape_of(row) for row in measurements]
    memory = _nnls(
        [memory_terms(s) for s in shapes],
        [row["memory_mb"] - known_memory_mb(s) for row, s in zip(measurements, shapes)],
        MEMORY_TERMS,
    )
    seconds = _nnls([time_terms(s) for s in shapes], [row["epoch_s"] for row in measurements], TIME_TERMS)
    return Coefficients(memory, seconds, measurements=tuple(dict(row) for row in measurements), **provenance)


def calibration_points() -> list[dict[str, Any]]:
    """Every calibration run's settings (csbm parameters, heads, hidden, depth,
    checkpoint, and where set model and cluster batching)."""
    points = []
    for (nodes, degree, features, classes), (heads, hidden), depths, settings in CALIBRATION:
        csbm = {"nodes": nodes, "classes": classes, "avg_degree": degree, "feature_dim": features, "signal": 1, "seed": 0}
        for depth in depths:
            for checkpoint in (False, True):
                points.append({
                    "csbm": csbm, "heads": heads, "hidden": hidden, "depth": depth, "checkpoint": checkpoint, **settings,
                })
    return points


def _run_calibration(command: list[str]) -> None:
    """Run one calibration `lipnorm train` command; a failure is a RuntimeError with its stderr."""
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"calibration run failed ({' '.join(command)}):\n{done.stderr[-2000:]}")


def measure(point: Mapping[str, Any], threads: int, device: str, workdir: Path) -> dict[str, Any]:
    """Train `point` (csbm parameters, heads, hidden, depth, checkpoint, optionally
    model (default `CALIBRATION_MODEL`) and batching, partitions, batch_partitions) for
    `CALIBRATION_EPOCHS` epochs in a subprocess; its measurement row: sizes and
    settings, `memory_mb` (the run's `peak_memory_mb`) and `epoch_s` (the last epoch's
    seconds: the first includes warm-up). Under cluster batches the METIS partition is
    cached under `workdir` and made by a first run of its own before the measured one
    (making it is not what a training run costs); the csbm graph is generated in every
    run, as in training."""
    import pandas as pd

    model = point.get("model", CALIBRATION_MODEL)
    batching = point.get("batching", "full")
    command = [
        sys.executable, "-m", "lipnorm", "train", "--dataset", "csbm", "--csbm", grid.csbm_spec(point["csbm"]),
        "--model", model, "--depth", str(point["depth"]), "--heads", str(point["heads"]),
        "--hidden", str(point["hidden"]), "--threads", str(threads), "--data-root", str(workdir / "datasets"),
        "--device", device, "--checkpoint" if point["checkpoint"] else "--no-checkpoint", "--batching", batching,
    ]
    if batching == "cluster":
        command += ["--partitions", str(point["partitions"]), "--batch-partitions", str(point["batch_partitions"])]
        prepared = workdir / "datasets" / "prepared.json"
        key = json.dumps([point["csbm"], point["partitions"]], sort_keys=True)
        made = json.loads(prepared.read_text()) if prepared.exists() else []
        if key not in made:
            # One epoch of depth 1 makes the partition without the measured run's size.
            first = [*command, "--epochs", "1", "--out", str(workdir / f"prepare{len(made)}")]
            first[first.index("--depth") + 1] = "1"
            _run_calibration(first)
            prepared.parent.mkdir(parents=True, exist_ok=True)
            prepared.write_text(json.dumps([*made, key]))
    run_dir = workdir / f"run{len(list(workdir.iterdir()))}"
    _run_calibration([*command, "--epochs", str(CALIBRATION_EPOCHS), "--out", str(run_dir)])
    summary = json.loads((run_dir / "summary.json").read_text())
    seconds = pd.read_parquet(run_dir / "metrics.parquet")["seconds"].iloc[-1]
    sizes = csbm_sizes(point["csbm"])
    row = {
        "nodes": sizes.nodes, "edges": sizes.edges, "features": sizes.features, "classes": sizes.classes,
        "depth": point["depth"], "heads": point["heads"], "hidden": point["hidden"],
        "checkpoint": point["checkpoint"], "model": model, "batching": batching,
        "memory_mb": float(summary["peak_memory_mb"]), "epoch_s": float(seconds),
    }
    if batching == "cluster":
        row.update(partitions=point["partitions"], batch_partitions=point["batch_partitions"])
    return row


def machine_name() -> str:
    """`hostname (cpu model, N cores)`: where a calibration was measured."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.node()} ({model}, {os.cpu_count()} cores)"


def calibrate(
    out: str | Path,
    threads: int = 1,
    device: str = "cpu",
    points: Sequence[Mapping[str, Any]] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Coefficients:
    """Measure `points` (default `calibration_points()`) on this machine, fit, and
    write the coefficients to `out` atomically; returns them."""
    import lipnorm

    if device not in ("cpu", "cuda"):
        raise ValueError(f"plan calibration: device {device!r}; allowed: cpu, cuda")
    points = calibration_points() if points is None else list(points)
    rows = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="lipnorm-plan-") as workdir:
        for index, point in enumerate(points, 1):
            row = measure(point, threads, device, Path(workdir))
            rows.append(row)
            if progress:
                progress(
                    f"[{index}/{len(points)}, {time.perf_counter() - started:.0f} s] N={row['nodes']} E={row['edges']} "
                    f"F={row['features']} L={row['depth']} {row['heads']}x{row['hidden']} "
                    f"checkpoint={row['checkpoint']} {row['model']} {row['batching']}: {row['memory_mb']:.0f} MB, "
                    f"{row['epoch_s']:.2f} s/epoch"
                )
    coefficients = fit(
        rows, device=device, threads=threads, machine=machine_name(),
        date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        version=lipnorm.__version__,
    )
    coefficients.save(out)
    return coefficients
