"""`lipnorm bench`'s `summary.md`: ratios of medians against their targets, memory,
gradient-logging overhead, the GEMM floor, the epoch's parts, scaling slopes and the
environment (`write_summary`).
"""

from __future__ import annotations

import math
import os
import platform
from pathlib import Path

import numpy as np
import pandas as pd

from lipnorm.bench.cases import CASE_KEYS, Case
from lipnorm.bench.epochs import EPOCH_PARTS
from lipnorm.bench.measure import measurement_rows


# (numerator, denominator, target or None): the ratios summary.md reports, per family;
# the targets of issue 15 (GAT-Lip within 10 % of GAT, our GAT and GAT-Lip no slower
# than DGL's and PyG's GATConv).
RATIOS = {
    "gat": [
        ("gat-lip", "gat", 1.10),
        ("gat-lip-official", "gat", 1.10),
        ("gat", "dgl-gat", 1.0),
        ("gat-lip", "pyg-gat", 1.0),
    ],
    "gt": [
        ("gt-lip", "gt", 1.10),
        ("gt-lip-official", "gt", 1.10),
        ("gt", "pyg-transformer", None),
        ("gt-lip", "pyg-transformer", None),
    ],
}
GRADLOG_TARGET = 1.05
SLOPE_TARGET = 1.1
# Step time over the dense-GEMM floor (`gemm_floor`): the target holds for the case
# (dataset, depth, heads, hidden) of the paper's deep wide models.
FLOOR_TARGET = 1.4
FLOOR_TARGET_CASE = ("cora", 10, 8, 64)


def paired_ratio(num: pd.Series, den: pd.Series, target: float | None) -> dict:
    """Times of the same rounds (indexed by round): the ratio of medians, the
    interquartile range of the per-round ratios, the rounds paired, the target check."""
    paired = (num / den).dropna()
    ratio = num.median() / den.median()
    return {
        "ratio": ratio, "paired_q25": paired.quantile(0.25), "paired_q75": paired.quantile(0.75),
        "rounds": len(paired), "target": target, "met": None if target is None else bool(ratio <= target),
    }


def ratio_table(times: pd.DataFrame) -> pd.DataFrame:
    """One row per (family, case, ratio): medians, ratio of medians, and the
    interquartile range of the per-round ratios, with the target check."""
    rows = []
    for key, group in times.groupby(CASE_KEYS, sort=False):
        by_impl = group.pivot_table(index="round", columns="implementation", values="value")
        for num, den, target in RATIOS[key[0]]:
            if num not in by_impl or den not in by_impl:
                continue
            stats = paired_ratio(by_impl[num], by_impl[den], target)
            rows.append({
                **dict(zip(CASE_KEYS, key)),
                "ratio": f"{num} / {den}",
                "median_ms_num": 1e3 * by_impl[num].median(),
                "median_ms_den": 1e3 * by_impl[den].median(),
                "value": stats.pop("ratio"),
                **stats,
            })
    return pd.DataFrame(rows)


def scaling_slopes(times: pd.DataFrame) -> pd.DataFrame:
    """Log-log slope of median step time vs edges (csbm sizes), per implementation,
    depth and width; and the time per layer (linear fit over depths), per graph."""
    medians = (
        times.groupby(["family", "dataset", "nodes", "edges", "depth", "heads", "hidden", "implementation"])
        ["value"].median().reset_index()
    )
    rows = []
    csbm = medians[medians["dataset"] == "csbm"]
    for key, group in csbm.groupby(["implementation", "depth", "heads", "hidden"]):
        if group["edges"].nunique() >= 2:
            slope = np.polyfit(np.log(group["edges"]), np.log(group["value"]), 1)[0]
            sizes = f"{group['edges'].min():.0e}..{group['edges'].max():.0e}"
            rows.append({"kind": "edges (log-log slope)", "implementation": key[0], "depth": key[1],
                         "heads": key[2], "hidden": key[3], "over": sizes, "value": slope})
    for key, group in medians.groupby(["implementation", "edges", "heads", "hidden"]):
        if group["depth"].nunique() >= 2:
            per_layer, _ = np.polyfit(group["depth"], group["value"], 1)
            shallow, deep = group.loc[group["depth"].idxmin()], group.loc[group["depth"].idxmax()]
            rows.append({"kind": "ms per layer (linear fit)", "implementation": key[0], "depth": None,
                         "heads": key[2], "hidden": key[3], "over": f"{key[1]} edges",
                         "value": 1e3 * per_layer,
                         "deep_over_shallow": deep["value"] / shallow["value"]})
    return pd.DataFrame(rows)


def _markdown(frame: pd.DataFrame, floatfmt: str = ".3g") -> str:
    """A GitHub table (`lipnorm.results.tables.markdown.markdown`) of `frame`, floats as `floatfmt`."""
    from lipnorm.results.tables.markdown import markdown

    def cell(value):
        if isinstance(value, float):
            return "" if math.isnan(value) else format(value, floatfmt)
        return "" if value is None else str(value)

    return "\n".join(markdown(frame.map(cell)))


def environment(
    threads: int, command: str, load_start: tuple, load_end: tuple, device: str = "cpu", flush_denormal: bool = False
) -> str:
    import dgl
    import torch
    import torch_geometric

    return "\n".join([
        f"- command: `{command}`",
        f"- device: {device}",
        f"- machine: {platform.machine()}, {os.cpu_count()} CPU(s), {platform.processor() or platform.platform()}",
        f"- threads: torch {threads}, DGL same",
        f"- flush denormal: {'on' if flush_denormal else 'off'} (`torch.set_flush_denormal`)",
        f"- load average (1, 5, 15 min): start {', '.join(f'{x:.2f}' for x in load_start)}; "
        f"end {', '.join(f'{x:.2f}' for x in load_end)}",
        f"- versions: python {platform.python_version()}, torch {torch.__version__}, dgl {dgl.__version__}, "
        f"torch_geometric {torch_geometric.__version__}, numpy {np.__version__}",
    ])


def layer_times(frame: pd.DataFrame) -> pd.DataFrame:
    """The step times of the layer comparisons (not of the gradient-logging check or
    the epochs of `lipnorm train`)."""
    return frame[(frame["metric"] == "step_seconds") & frame["family"].isin(list(RATIOS))]


def floor_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per case and implementation: median step and GEMM-floor ms of the same
    rounds, step / floor (ratio of medians) with the quartiles of the per-round ratios,
    and the target check (`FLOOR_TARGET`, for `FLOOR_TARGET_CASE` only)."""
    times = layer_times(frame).groupby(CASE_KEYS, sort=False)
    rows = []
    for key, floor in frame[frame["metric"] == "floor_seconds"].groupby(CASE_KEYS, sort=False):
        case = dict(zip(CASE_KEYS, key))
        floor = floor.set_index("round")["value"]
        target = FLOOR_TARGET if (case["dataset"], case["depth"], case["heads"], case["hidden"]) == FLOOR_TARGET_CASE else None
        for impl, group in times.get_group(key).groupby("implementation", sort=False):
            step = group.set_index("round")["value"]
            rows.append({
                **case, "implementation": impl, "step_ms": 1e3 * step.median(), "floor_ms": 1e3 * floor.median(),
                **paired_ratio(step, floor, target),
            })
    return pd.DataFrame(rows)


def floor_rows(frame: pd.DataFrame) -> list[dict]:
    """`step_over_floor` rows (one per case and implementation) of `floor_table`."""
    return [
        row
        for record in floor_table(frame).to_dict("records")
        for row in measurement_rows(Case(*(record[key] for key in CASE_KEYS)), record["implementation"],
                         "step_over_floor", [(None, record["ratio"])])
    ]


def epoch_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per epoch case: medians of the step, of the epoch with the layer
    statistics logged every `grad_log_every` (default) epochs, amortised per round as
    (logged + (K - 1) x unlogged) / K, of the evaluation and of the training forward."""
    from lipnorm.settings.train_config import TrainConfig

    every = TrainConfig.grad_log_every
    epochs = frame[frame["family"] == "epoch"]
    rows = []
    for key, group in epochs.groupby([*CASE_KEYS, "implementation"], sort=False):
        by = group.pivot_table(index="round", columns="metric", values="value")
        epoch = (by["logged_epoch_seconds"] + (every - 1) * by["epoch_seconds"]) / every
        med = {part: by[f"{part}_seconds"].median() for part in EPOCH_PARTS}
        rows.append({
            **dict(zip(CASE_KEYS[1:], key[1:-1])), "model": key[-1],
            "step_ms": 1e3 * med["step"], f"epoch_ms (log every {every})": 1e3 * epoch.median(),
            "epoch / step": epoch.median() / med["step"], "logged_epoch_ms": 1e3 * med["logged_epoch"],
            "evaluate_ms": 1e3 * med["evaluate"], "train_forward_ms": 1e3 * med["train_forward"],
            "evaluate / train_forward": med["evaluate"] / med["train_forward"], "rounds": len(by),
        })
    return pd.DataFrame(rows)


def write_summary(
    frame: pd.DataFrame, profile_ops: pd.DataFrame, skipped: list[str], env: str, path: Path, device_type: str = "cpu"
) -> None:
    times = layer_times(frame)
    ratios = ratio_table(times)
    parts = ["# Benchmark: the cost of LipschitzNorm", "", env, ""]
    parts += [
        "## Step-time ratios (ratio of medians; paired = per-round ratios, 25th-75th percentile)", "",
        _markdown(ratios.drop(columns=["family"])), "",
    ]
    memory = frame[frame["metric"].isin(["peak_rss_mb", "step_rss_mb", "peak_cuda_mb", "layer_saved_mb"])]
    if not memory.empty:
        table = memory.pivot_table(
            index=["family", "dataset", "edges", "depth", "heads", "hidden", "implementation"],
            columns="metric", values="value",
        ).reset_index()
        parts += ["## Memory (MB): peak RSS of one step, its rise over the RSS before it, "
                  "and what one layer alone saves for backward", ""]
        if "peak_cuda_mb" in table:
            parts += ["peak_cuda_mb: the most torch's tensors occupied on the GPU during one step "
                      "with this implementation alone there (its model, Adam's state, the graph "
                      "and inputs; not the allocator's cache or the CUDA context).", ""]
        parts += [_markdown(table, ".4g"), ""]
    gradlog = frame[frame["family"] == "gradlog"]
    if not gradlog.empty:
        rows = []
        for (dataset, depth), group in gradlog.groupby(["dataset", "depth"]):
            by = group.pivot_table(index="round", columns="implementation", values="value")
            ratio = by["logged"].median() / by["unlogged"].median()
            rows.append({"dataset": dataset, "depth": depth, "model": "gat-lip 8x8",
                         "logged_ms": 1e3 * by["logged"].median(), "unlogged_ms": 1e3 * by["unlogged"].median(),
                         "ratio": ratio, "target": GRADLOG_TARGET, "met": bool(ratio <= GRADLOG_TARGET)})
        parts += ["## Gradient-norm logging overhead (`Trainer.train_step(instrument=True/False)`)", "",
                  _markdown(pd.DataFrame(rows)), ""]
    floors = floor_table(frame)
    if not floors.empty:
        parts += [
            "## Step time over the GEMM floor (ratio of medians; paired = per-round ratios, "
            "25th-75th percentile)", "",
            "The floor: per training step, the dense matrix products of the case's model (per "
            "projection of each attention layer X.W, dY.W^T and X^T.dY of (N, H x D) by "
            "(H x D, H x D); the input and output Linears' too) as plain `torch.mm` calls, "
            "timed in the same rounds as the steps (`lipnorm.bench.floor_gemms`).", "",
            _markdown(floors.drop(columns=["family"]), ".4g"), "",
        ]
    epochs = epoch_table(frame)
    if not epochs.empty:
        parts += [
            "## Epoch of `lipnorm train` beside its step (its Trainer and model; medians)", "",
            "epoch = train step + evaluation, with layer statistics every K-th epoch, amortised "
            "per round as (logged epoch + (K - 1) epochs) / K; evaluate / train_forward: the "
            "evaluation (no autograd) over a training-mode forward with autograd recording.", "",
            _markdown(epochs, ".4g"), "",
        ]
    slopes = scaling_slopes(times)
    if not slopes.empty:
        parts += [f"## Scaling (target: edges slope <= {SLOPE_TARGET})", "", _markdown(slopes), ""]
    if skipped:
        parts += ["## Skipped (estimated work per training step over the budget)", ""]
        parts += [f"- {line}" for line in skipped] + [""]
    clock = "self GPU kernel ms" if device_type == "cuda" else "self CPU ms"
    parts += [f"## Where LipschitzNorm's extra time goes (gat-lip minus gat, {clock} per step)", "",
              "Full tables: `profile_gat_8x8.txt`.", "", _markdown(profile_ops.head(15)), ""]
    path.write_text("\n".join(parts))
