"""Synthetic run directories, written exactly as docs/architecture.md documents the
output of `lipnorm train`, for the aggregation, table and figure tests.

Every writer returns the records it wrote (settings, status, test and final training
metric; the gradient norms and layer statistics are functions of the settings,
`attention_grad_norm` and `layer_stat`) so that the tests can compute the expected
numbers independently.
"""

from __future__ import annotations

import itertools
import json
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

BASE_CONFIG = {
    "dataset": "cora",
    "model": "gat",
    "depth": 2,
    "alpha": 1.0,
    "heads": 1,
    "hidden": 8,
    "missing_rate": 0,
    "seed": 0,
    "epochs": 3,
    "lr": 0.005,
    "weight_decay": 0.0005,
    "protocol": "planetoid",
    "patience": 100,
    "variant": "v1",
    "threads": 1,
    "grad_log_every": 1,
    "feat_drop": 0.0,
    "attn_drop": 0.0,
}


def attention_grad_norm(model: str, layer: int, epoch: int) -> float:
    """Gradient norm of attention layer `layer` (1-based): plain GAT's vanish with
    depth (factor 10 per layer), GAT-Lip's stay within a factor 2."""
    decay = 10.0 if model == "gat" else 2.0 ** (1 / 8)
    return float((1.0 + 0.1 * epoch) * decay ** (-layer))


LAYER_METRICS = (
    "dirichlet_energy", "mean_average_distance", "rayleigh_quotient", "attention_entropy",
    "output_norm",
)
OVERSMOOTHED_FROM = 5  # plain GAT's Dirichlet energy is exactly 0 from this layer on


def layer_stat(metric: str, *, model: str, layer: int, epoch: int, seed: int,
               feat_drop: float = 0.0, alpha: float = 1.0, **_) -> float:
    """The `layerstats.parquet` value of attention layer `layer` (1-based): every metric
    differs between seeds, epochs, dropouts and α; plain GAT's energy and MAD decay by
    10 per layer (its energy is exactly 0 from layer OVERSMOOTHED_FROM on: log axes
    must cope), the other models' by 2^(1/8). Extra keyword arguments are ignored, so
    a run's record can be passed as `**record`."""
    scale = (1.0 + 0.5 * seed) * (1.0 + feat_drop) * alpha ** 0.25
    decay = 10.0 if model == "gat" else 2.0 ** (1 / 8)
    if metric == "dirichlet_energy":
        if model == "gat" and layer >= OVERSMOOTHED_FROM:
            return 0.0
        return float(scale * (1.0 + 0.1 * epoch) * decay ** -layer)
    if metric == "mean_average_distance":
        return float(0.5 * scale * decay ** -layer / (1.0 + epoch))
    if metric == "rayleigh_quotient":
        return float(2.0 * scale * decay ** (-layer / 2))
    if metric == "attention_entropy":  # within [0, 1]; plain GAT's saturates faster
        sharpening = 0.3 if model == "gat" else 0.1
        return float(1.0 / (1.0 + sharpening * layer * scale + 0.05 * epoch))
    if metric == "output_norm":
        return float(scale * (layer + epoch + 1))
    raise ValueError(f"unknown layer metric {metric!r}")


def final_train_metric(test_metric: float) -> float:
    """The training metric of a run's last epoch (its summary's `final.train`)."""
    return round(min(1.0, 0.2 + test_metric), 4)


def write_run(run_dir: Path, *, test_metric: float, status: str = "ok", val_metric: float = 0.8,
              **settings) -> dict:
    """Write one finished run directory; returns its record. A diverged run has layer
    statistics of the epochs before the one it diverged at only (as `lipnorm train`).
    `val_metric` is the validation metric of its best-validation (and last) epoch."""
    config = {**BASE_CONFIG, **settings}
    rng = np.random.default_rng(zlib.crc32(str(run_dir).encode()))
    run_dir.mkdir(parents=True)
    epochs = config["epochs"]
    diverged_epoch = epochs - 1 if status == "diverged" else None
    train_loss = np.linspace(2.0, 0.5, epochs) + rng.uniform(0, 0.05, epochs)
    if diverged_epoch is not None:
        train_loss[diverged_epoch] = np.nan
    pd.DataFrame(
        {
            "epoch": np.arange(epochs),
            "train_loss": train_loss,
            "train_metric": rng.uniform(0.5, 1.0, epochs),
            "val_loss": rng.uniform(0.5, 2.0, epochs),
            "val_metric": rng.uniform(0.3, 0.9, epochs),
            "test_metric": rng.uniform(0.3, 0.9, epochs),
            "lr": np.full(epochs, config["lr"]),
            "seconds": rng.uniform(0.01, 0.02, epochs),
        }
    ).to_parquet(run_dir / "metrics.parquet", index=False)

    depth = config["depth"]
    grad_rows = []
    for epoch in range(epochs):
        layers = [(0, "input", 0.5), (depth + 1, "output", 0.25)] + [
            (layer, "attention", attention_grad_norm(config["model"], layer, epoch))
            for layer in range(1, depth + 1)
        ]
        for layer, kind, norm in layers:
            # `fc` and `attn` parts whose squares add up to the `all` norm.
            grad_rows += [
                (epoch, layer, kind, "fc", norm * 0.6),
                (epoch, layer, kind, "attn", norm * 0.8),
                (epoch, layer, kind, "all", norm),
            ]
    pd.DataFrame(grad_rows, columns=["epoch", "layer", "kind", "group", "grad_norm"]).to_parquet(
        run_dir / "gradnorms.parquet", index=False
    )
    pd.DataFrame(
        [(e, layer, float(layer + e)) for e in range(epochs) for layer in range(1, depth + 1)],
        columns=["epoch", "layer", "output_norm"],
    ).to_parquet(run_dir / "outnorms.parquet", index=False)

    stats_epochs = range(epochs if diverged_epoch is None else diverged_epoch)
    pd.DataFrame(
        [(e, layer, metric, layer_stat(metric, layer=layer, epoch=e, **config))
         for e in stats_epochs for layer in range(1, depth + 1) for metric in LAYER_METRICS],
        columns=["epoch", "layer", "metric", "value"],
    ).to_parquet(run_dir / "layerstats.parquet", index=False)

    final_train = final_train_metric(test_metric)
    scores = {"epoch": epochs - 1, "train": final_train, "val": val_metric, "test": test_metric}
    summary = {
        "config": config,
        "status": status,
        "diverged_epoch": diverged_epoch,
        "metric": "micro-f1" if config["dataset"] == "ppi" else "accuracy",
        "test_metric": None if status == "diverged" else test_metric,
        "final": scores,
        "best_val": scores,
        "best_epoch": epochs - 1,
        "epochs_run": epochs,
        "wall_time_s": 0.5,
        "mean_epoch_s": 0.1,
        "peak_memory_mb": 100.0,
        "num_params": 1234,
        "versions": {"torch": "2.2.1", "dgl": "2.1.0"},
        "device": "cpu",
        "threads": 1,
    }
    (run_dir / "summary.json").write_text(json.dumps(summary))
    return {**config, "status": status, "test_metric": test_metric, "final_train": final_train,
            "val_metric": val_metric, "run_dir": str(run_dir)}


def write_grid(root: Path, grid: dict[str, list], *, diverged=(), single_seed=(), seeds=(0, 1, 2),
               **fixed) -> list[dict]:
    """One run per combination of `grid` values and seed.

    `diverged`: setting tuples (in `grid` order, then the seed) whose run diverged;
    `single_seed`: setting tuples (without the seed) that only have seed 0.
    """
    rng = np.random.default_rng(0)
    records = []
    for values in itertools.product(*grid.values()):
        for seed in seeds:
            if values in single_seed and seed != 0:
                continue
            settings = {**fixed, **dict(zip(grid, values)), "seed": seed}
            name = "_".join(f"{k}={v}" for k, v in settings.items())
            records.append(
                write_run(
                    root / name,
                    test_metric=round(float(rng.uniform(0.3, 0.9)), 4),
                    status="diverged" if (*values, seed) in diverged else "ok",
                    **settings,
                )
            )
    return records


DIAGNOSE_GRID = {"model": ["gat", "gat-lip"], "depth": [2, 6], "feat_drop": [0.6, 0.0]}
DIAGNOSE_DIVERGED = ("gat", 6, 0.6, 1)  # the grid values, then the seed
DIAGNOSE_ALPHAS = [4.0, 16.0]  # GAT-Lip at depth 6, feature dropout 0
OFFICIAL = {"model": "gat-lip", "depth": 6, "feat_drop": 0.6, "heads": 8, "hidden": 64,
            "epochs": 2, "recipe": "official"}


def write_diagnose(root: Path) -> list[dict]:
    """A small diagnose experiment: the grid DIAGNOSE_GRID × seeds 0, 1 (one seed of
    DIAGNOSE_DIVERGED diverged), GAT-Lip at α DIAGNOSE_ALPHAS, and one run (seed 0) of
    the authors' recipe OFFICIAL; every run but that one has recipe "lipnorm"."""
    records = write_grid(root / "grid", DIAGNOSE_GRID, diverged={DIAGNOSE_DIVERGED},
                         seeds=(0, 1), recipe="lipnorm")
    records += write_grid(root / "alpha", {"alpha": DIAGNOSE_ALPHAS}, seeds=(0, 1),
                          model="gat-lip", depth=6, feat_drop=0.0, recipe="lipnorm")
    records.append(write_run(root / "official", test_metric=0.75, **OFFICIAL))
    return records


# The remedies experiment as `lipnorm train` writes it: the model axes as settings, one
# arm per remedy (remedy name -> its settings; the others off).
REMEDY_ARMS = {
    "none": {},
    "pairnorm": {"norm": "pairnorm"},
    "dropedge": {"dropedge": 0.3},
    "initial-residual": {"initial_residual": 0.1},
}
REMEDY_OFF = {"norm": "none", "residual": False, "initial_residual": 0.0, "dropedge": 0.0}
REMEDY_GRID = {"dataset": ["cora", "citeseer"], "attention_norm": ["none", "lip"], "depth": [2, 4]}
REMEDY_DIVERGED = ("citeseer", "lip", "dropedge", 4, 1)  # dataset, attention norm, remedy, depth, seed


def write_remedies(root: Path, seeds=(0, 1)) -> list[dict]:
    """A small remedies experiment: REMEDY_ARMS x REMEDY_GRID x `seeds`, 8 x 8, missing
    rate 100, with distinct validation and test metrics per run (so that choosing the
    depth by validation and by test differ somewhere); REMEDY_DIVERGED diverged. Each
    record also has its `remedy`."""
    rng = np.random.default_rng(22)
    records = []
    for remedy, arm in REMEDY_ARMS.items():
        for dataset, attention_norm, depth in itertools.product(*REMEDY_GRID.values()):
            for seed in seeds:
                settings = {**REMEDY_OFF, **arm, "dataset": dataset, "architecture": "gat",
                            "attention_norm": attention_norm, "depth": depth, "seed": seed,
                            "missing_rate": 100, "heads": 8, "hidden": 8}
                norm = settings["norm"]
                settings["model"] = "-".join(
                    ["gat", *(["lip"] if attention_norm == "lip" else []), *([norm] if norm != "none" else [])])
                status = "diverged" if (dataset, attention_norm, remedy, depth, seed) == REMEDY_DIVERGED else "ok"
                record = write_run(
                    root / remedy / f"{dataset}_{attention_norm}_L{depth}_s{seed}",
                    test_metric=round(float(rng.uniform(0.3, 0.9)), 4),
                    val_metric=round(float(rng.uniform(0.3, 0.9)), 4), status=status, **settings)
                records.append({**record, "remedy": remedy})
    return records
