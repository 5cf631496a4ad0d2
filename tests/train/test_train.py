"""`lipnorm train`: the run directory, gradient logging, divergence, protocols, settings."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from lipnorm import cli, data, train
from lipnorm.nn.models.numbering import attention_layers, gradient_groups
from lipnorm.settings.model_config import MODEL_NAMES
from lipnorm.settings.recipes import official_epochs
from lipnorm.settings.train_config import load_config
from lipnorm.train import TrainConfig, diagnostics
from lipnorm.train import trainer as trainer_module
from lipnorm.train.hooks import GradientNorms
from lipnorm.train.run_directory import GRADNORMS_COLUMNS, LAYERSTATS_COLUMNS, METRICS_COLUMNS, OUTNORMS_COLUMNS
from lipnorm.train.trainer import Trainer, compute_metric, prepare, select_epoch
from lipnorm.train.process import set_flush_denormal

TINY_CSBM = "nodes=60,classes=3,feature_dim=8,avg_degree=4"
SUMMARY_KEYS = {
    "config", "status", "diverged_epoch", "metric", "test_metric", "final", "best_val",
    "best_epoch", "epochs_run", "wall_time_s", "mean_epoch_s", "peak_memory_mb",
    "num_params", "versions", "kernels", "device", "threads", "resumed_from_epochs", "cluster_batches",
}


def tiny(tmp_path: Path, **settings) -> TrainConfig:
    base = dict(
        dataset="csbm", csbm=TINY_CSBM, depth=2, heads=2, hidden=4, epochs=3, grad_log_every=1,
        data_root=str(tmp_path / "datasets"),
    )
    return TrainConfig(**{**base, **settings})


def read_run(out: Path) -> tuple[dict, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    summary = json.loads((out / "summary.json").read_text())
    frames = [pd.read_parquet(out / f"{name}.parquet") for name in ("metrics", "gradnorms", "outnorms")]
    return (summary, *frames)


def mirror_folder() -> str:
    mirror = os.environ.get("LIPNORM_DATA_MIRROR")
    if not mirror or not Path(mirror).is_dir():
        pytest.fail(
            f"LIPNORM_DATA_MIRROR={mirror!r} is not a folder: set it to the dataset mirror "
            "(e.g. ../shared/datasets) to run the Cora tests"
        )
    return mirror


@pytest.mark.parametrize("model", MODEL_NAMES)
def test_run_writes_every_file_with_documented_columns(tmp_path, model):
    out = tmp_path / "run"
    summary = train.run(tiny(tmp_path, model=model, missing_rate=50), out)
    assert sorted(p.name for p in out.iterdir()) == [
        "gradnorms.parquet", "layerstats.parquet", "metrics.parquet", "outnorms.parquet",
        "summary.json", "train.log",
    ]
    written, metrics, gradnorms, outnorms = read_run(out)
    assert written == json.loads(json.dumps(summary))
    assert set(written) == SUMMARY_KEYS
    assert written["status"] == "ok" and written["diverged_epoch"] is None
    assert written["epochs_run"] == 3 and written["metric"] == "accuracy"
    assert written["config"]["model"] == model
    # Defaults are resolved: the model's dropouts are recorded, not null.
    assert written["config"]["feat_drop"] is not None and written["config"]["attn_drop"] is not None
    assert set(written["versions"]) == {"lipnorm", "torch", "dgl", "numpy", "python"}
    assert {"mode", "paths", "cpu", "machine"} <= set(written["kernels"])  # tests/kernels/test_build.py has the rest
    assert written["threads"] == 1 and written["device"] == "cpu"

    assert list(metrics.columns) == METRICS_COLUMNS
    assert metrics["epoch"].tolist() == [1, 2, 3]
    assert list(gradnorms.columns) == GRADNORMS_COLUMNS
    assert list(outnorms.columns) == OUTNORMS_COLUMNS

    setup = prepare(tiny(tmp_path, model=model).resolved())
    groups = gradient_groups(setup.model)
    assert len(gradnorms) == 3 * len(groups)
    assert not gradnorms.duplicated(["epoch", "layer", "group"]).any()
    layers = [index for index, _ in attention_layers(setup.model)]
    assert outnorms["layer"].tolist() == layers * 3
    assert (gradnorms["grad_norm"] > 0).all() and (outnorms["output_norm"] > 0).all()
    assert "epoch 3 loss" in (out / "train.log").read_text()

    stats = pd.read_parquet(out / "layerstats.parquet")
    assert list(stats.columns) == LAYERSTATS_COLUMNS
    # Layers without attention (GCN) have no attention entropy.
    expected = [m for m in LAYER_METRICS if registry_attention(model) or m != "attention_entropy"]
    assert set(stats["metric"]) == set(expected)
    # Every graph layer, every metric, every epoch once (grad_log_every=1).
    assert len(stats) == 3 * len(layers) * len(expected)
    assert not stats.duplicated(["epoch", "layer", "metric"]).any()
    assert sorted(stats["layer"].unique()) == layers and sorted(stats["epoch"].unique()) == [1, 2, 3]


def registry_attention(model: str) -> bool:
    from lipnorm import registry

    return registry.architecture(registry.parse_model(model)[0]).attention


def independent_first_step(config: TrainConfig) -> tuple[float, dict, dict]:
    """Epoch 1 redone outside the trainer: loss, group norms from `p.grad`, output norms."""
    setup = prepare(config.resolved())
    dataset, model = setup.dataset, setup.model
    outputs = {}
    for index, module in attention_layers(model):
        module.register_forward_hook(
            lambda _m, _i, out, index=index: outputs.__setitem__(index, out.detach().double())
        )
    model.train()
    logits = model(dataset.graph, setup.features)
    train_mask = dataset.train_mask
    if dataset.multilabel:
        loss = F.binary_cross_entropy_with_logits(logits[train_mask], dataset.labels[train_mask])
    else:
        loss = F.cross_entropy(logits[train_mask], dataset.labels[train_mask])
    loss.backward()
    grad_norms = {
        (layer, group): math.sqrt(sum((p.grad.double() ** 2).sum().item() for p in params))
        for layer, _, group, params in gradient_groups(model)
    }
    output_norms = {index: out.pow(2).sum().sqrt().item() for index, out in outputs.items()}
    return loss.item(), grad_norms, output_norms


@pytest.mark.parametrize("model", ["gat-lip-pairnorm", "gt-lip", "gat-classic"])
def test_logged_norms_equal_norms_recomputed_from_the_gradients(tmp_path, model):
    config = tiny(tmp_path, model=model, depth=3, epochs=5, grad_log_every=2)
    train.run(config, tmp_path / "run")
    _, metrics, gradnorms, outnorms = read_run(tmp_path / "run")
    assert sorted(gradnorms["epoch"].unique()) == [1, 3, 5]
    assert sorted(outnorms["epoch"].unique()) == [1, 3, 5]

    loss, grad_norms, output_norms = independent_first_step(config)
    assert metrics["train_loss"].iloc[0] == pytest.approx(loss, rel=1e-6)
    first = gradnorms[gradnorms["epoch"] == 1]
    logged = dict(zip(zip(first["layer"], first["group"]), first["grad_norm"]))
    assert logged.keys() == grad_norms.keys()
    for key, expected in grad_norms.items():
        assert logged[key] == pytest.approx(expected, rel=1e-5), key
    first_out = outnorms[outnorms["epoch"] == 1]
    logged_out = dict(zip(first_out["layer"], first_out["output_norm"]))
    assert logged_out == pytest.approx(output_norms, rel=1e-5)


LAYER_METRICS = (
    "dirichlet_energy", "mean_average_distance", "rayleigh_quotient", "attention_entropy", "output_norm"
)


def read_layerstats(out: Path) -> dict[tuple[int, int, str], float]:
    stats = pd.read_parquet(out / "layerstats.parquet")
    return {(e, l, m): v for e, l, m, v in stats.itertuples(index=False)}


@pytest.mark.parametrize("model", ["gat-lip", "gat-lip-pairnorm", "gt-lip", "gat-classic"])
def test_layer_statistics_equal_an_independent_eval_forward_after_the_first_step(tmp_path, model):
    """Epoch 1's statistics: one Adam step as the trainer takes it, then an eval-mode
    forward with `get_attention=True` called by hand, fed to the free functions."""
    config = tiny(tmp_path, model=model, depth=3, epochs=1, missing_rate=50)
    train.run(config, tmp_path / "run")
    logged = read_layerstats(tmp_path / "run")

    resolved = config.resolved()
    setup = prepare(resolved)
    graph, model_ = setup.dataset.graph, setup.model
    optimizer = torch.optim.Adam(model_.parameters(), lr=resolved.lr, weight_decay=resolved.weight_decay)
    model_.train()
    logits = model_(graph, setup.features)
    mask = setup.dataset.train_mask
    F.cross_entropy(logits[mask], setup.dataset.labels[mask]).backward()
    optimizer.step()
    model_.eval()
    captured = {}
    for index, module in attention_layers(model_):
        def call(graph_, feat, module=module, index=index, original=module.forward):
            out, attention = original(graph_, feat, get_attention=True)
            captured[index] = (out, attention)
            return out
        module.forward = call
    with torch.no_grad():
        model_(graph, setup.features)
    assert len(captured) == len(attention_layers(model_))
    for layer, (out, attention) in captured.items():
        expected = {
            "dirichlet_energy": diagnostics.dirichlet_energy(graph, out),
            "mean_average_distance": diagnostics.mean_average_distance(graph, out),
            "rayleigh_quotient": diagnostics.rayleigh_quotient(graph, out),
            "attention_entropy": diagnostics.attention_entropy(graph, attention),
            "output_norm": out.double().norm().item(),
        }
        for metric, value in expected.items():
            assert logged[(1, layer, metric)] == pytest.approx(value, rel=1e-5, abs=1e-12), (layer, metric)


def test_layer_statistics_at_the_logged_epochs_and_the_last_one(tmp_path):
    out = tmp_path / "run"
    train.run(tiny(tmp_path, model="gat-lip", depth=3, epochs=6, grad_log_every=4), out)
    epochs = sorted({e for e, _, _ in read_layerstats(out)})
    assert epochs == [1, 5, 6]  # logged every 4 epochs from 1, and the last
    gradnorms = pd.read_parquet(out / "gradnorms.parquet")
    assert sorted(gradnorms["epoch"].unique()) == [1, 5]


def test_patience_stop_records_the_statistics_of_the_epoch_it_stopped_at(tmp_path):
    out = tmp_path / "run"
    summary = train.run(
        tiny(tmp_path, model="gat", depth=2, epochs=200, patience=3, grad_log_every=50, lr=1e-9), out
    )
    last = summary["epochs_run"]
    assert last < 200
    assert sorted({e for e, _, _ in read_layerstats(out)}) == sorted({1, last})


def test_layer_statistics_do_not_change_the_training_numbers(tmp_path):
    runs = {}
    for name, layer_stats in (("with", True), ("without", False)):
        config = tiny(tmp_path, model="gat-lip-pairnorm", depth=3, epochs=4, seed=5, layer_stats=layer_stats)
        train.run(config, tmp_path / name)
        runs[name] = read_run(tmp_path / name)
    (summary_with, *frames_with), (summary_without, *frames_without) = runs["with"], runs["without"]
    for with_, without in zip(frames_with, frames_without):
        pd.testing.assert_frame_equal(
            with_.drop(columns="seconds", errors="ignore"),
            without.drop(columns="seconds", errors="ignore"),
            check_exact=True,
        )
    assert summary_with["test_metric"] == summary_without["test_metric"]
    assert summary_without["config"]["layer_stats"] is False
    assert read_layerstats(tmp_path / "without") == {}
    assert len(read_layerstats(tmp_path / "with")) > 0


def test_cli_no_layer_stats_flag(tmp_path):
    out = tmp_path / "run"
    code = cli.main([
        "train", "--dataset", "csbm", "--csbm", TINY_CSBM, "--epochs", "1", "--heads", "2",
        "--hidden", "4", "--no-layer-stats", "--data-root", str(tmp_path / "datasets"), "--out", str(out),
    ])
    assert code == 0
    assert json.loads((out / "summary.json").read_text())["config"]["layer_stats"] is False
    assert read_layerstats(out) == {}


def _flushes_denormals() -> bool:
    return (torch.tensor([1e-40]) * 1.0).item() == 0.0  # 1e-40 is subnormal in float32


def test_cli_flush_denormal_flag_sets_torch_and_is_recorded(tmp_path):
    flags = [
        "train", "--dataset", "csbm", "--csbm", TINY_CSBM, "--epochs", "1", "--heads", "2",
        "--hidden", "4", "--data-root", str(tmp_path / "datasets"),
    ]
    try:
        assert cli.main([*flags, "--flush-denormal", "--out", str(tmp_path / "flush")]) == 0
        assert json.loads((tmp_path / "flush" / "summary.json").read_text())["config"]["flush_denormal"] is True
        assert _flushes_denormals()
        # Off by default, whatever an earlier run in the process set.
        assert cli.main([*flags, "--out", str(tmp_path / "default")]) == 0
        assert json.loads((tmp_path / "default" / "summary.json").read_text())["config"]["flush_denormal"] is False
        assert not _flushes_denormals()
    finally:
        torch.set_flush_denormal(False)


def test_flush_denormal_on_a_cpu_without_it_is_an_error(monkeypatch):
    monkeypatch.setattr(torch, "set_flush_denormal", lambda on: False)
    with pytest.raises(ValueError, match="flush_denormal is not supported on this CPU"):
        set_flush_denormal(True)
    set_flush_denormal(False)  # asking for the default is never an error


def test_multilabel_dataset_trains_with_bce_and_reports_micro_f1(tmp_path, monkeypatch):
    from lipnorm.data import csbm_params, generate_csbm
    from lipnorm.data.dataset import build_node_dataset

    base = generate_csbm(csbm_params(TINY_CSBM))
    src, dst = base.graph.edges()
    rng = np.random.default_rng(0)
    labels = (rng.random((base.num_nodes, 4)) < 0.4).astype(np.float32)
    multilabel = build_node_dataset(
        "ppi", src, dst, base.num_nodes, base.features, labels,
        (base.train_mask, base.val_mask, base.test_mask), 4, multilabel=True, metric="micro-f1",
    )
    monkeypatch.setattr(data, "load_dataset", lambda *args, **kwargs: multilabel)
    config = tiny(tmp_path, dataset="ppi", csbm=None, epochs=2)
    summary = train.run(config, tmp_path / "run")
    assert summary["metric"] == "micro-f1"
    _, metrics, _, _ = read_run(tmp_path / "run")
    loss, _, _ = independent_first_step(config)
    assert metrics["train_loss"].iloc[0] == pytest.approx(loss, rel=1e-6)


def test_metrics_against_hand_computed_values():
    logits = torch.tensor([[2.0, -1.0], [0.5, 1.5], [-0.2, 0.1], [3.0, 0.0]])
    classes = torch.tensor([0, 1, 0, 1])
    # 0-d float64 tensors, left where the logits are (no host synchronisation).
    accuracy = compute_metric("accuracy", logits, classes)
    assert accuracy.shape == () and accuracy.dtype == torch.float64 and accuracy.item() == 0.5
    assert compute_metric("ogb-accuracy", logits, classes).item() == 0.5
    # Predicted positive where logit > 0: tp = 4, fp = 1, fn = 1 -> F1 = 8 / 10.
    multi = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [1.0, 0.0]])
    assert compute_metric("micro-f1", logits, multi).item() == 8 / 10
    # Nothing predicted and nothing to find: 0, not 0/0.
    assert compute_metric("micro-f1", -logits.abs() - 1, torch.zeros(4, 2)).item() == 0.0
    with pytest.raises(ValueError, match="unknown metric 'auc'"):
        compute_metric("auc", logits, classes)


@pytest.mark.parametrize("seed", range(5))
def test_ogb_accuracy_equals_ogbs_evaluator(seed):
    from ogb.nodeproppred import Evaluator

    generator = torch.Generator().manual_seed(seed)
    nodes = int(torch.randint(1, 500, (1,), generator=generator))
    logits = torch.randn(nodes, 40, generator=generator)
    labels = torch.randint(0, 40, (nodes,), generator=generator)
    expected = Evaluator("ogbn-arxiv").eval({"y_true": labels.view(-1, 1), "y_pred": logits.argmax(1, keepdim=True)})
    assert compute_metric("ogb-accuracy", logits, labels).item() == expected["acc"]


def test_micro_f1_equals_the_exact_fraction():
    from fractions import Fraction

    generator = torch.Generator().manual_seed(0)
    logits, labels = torch.randn(300, 7, generator=generator), (torch.rand(300, 7, generator=generator) > 0.7).float()
    predicted, actual = (logits > 0).numpy(), (labels > 0.5).numpy()
    tp, fp, fn = (int(x.sum()) for x in (predicted & actual, predicted & ~actual, ~predicted & actual))
    assert compute_metric("micro-f1", logits, labels).item() == float(Fraction(2 * tp, 2 * tp + fp + fn))


def test_a_diverging_run_ends_diverged_with_its_files_and_exit_code_0(tmp_path, capsys):
    out = tmp_path / "run"
    code = cli.main([
        "train", "--dataset", "csbm", "--csbm", TINY_CSBM, "--model", "gat", "--depth", "10",
        "--heads", "2", "--hidden", "4", "--lr", "1e6", "--epochs", "30",
        "--data-root", str(tmp_path / "datasets"), "--out", str(out),
    ])
    assert code == 0
    summary, metrics, gradnorms, _ = read_run(out)
    assert summary["status"] == "diverged"
    epoch = summary["diverged_epoch"]
    assert 1 <= epoch <= 30
    assert metrics["epoch"].tolist() == list(range(1, epoch))
    assert summary["epochs_run"] == epoch - 1
    # The diverged epoch's gradient norms are kept: they show what blew up.
    assert gradnorms["epoch"].max() == epoch
    assert f"diverged at epoch {epoch}" in capsys.readouterr().err


def test_injected_nan_gradient_ends_the_run_at_that_epoch(tmp_path, monkeypatch):
    original = GradientNorms.__call__
    calls = []

    def nan_at_second_epoch(self):
        calls.append(1)
        norms = original(self)
        return norms * math.nan if len(calls) == 2 else norms

    monkeypatch.setattr(GradientNorms, "__call__", nan_at_second_epoch)
    summary = train.run(tiny(tmp_path, epochs=4), tmp_path / "run")
    assert summary["status"] == "diverged" and summary["diverged_epoch"] == 2
    assert summary["epochs_run"] == 1 and summary["final"]["epoch"] == 1


def test_same_settings_give_identical_metrics_and_another_seed_differs(tmp_path):
    runs = {}
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        train.run(tiny(tmp_path, model="gat-lip", seed=seed, missing_rate=30), tmp_path / name)
        runs[name] = read_run(tmp_path / name)
    metrics_a, metrics_b, metrics_c = (runs[k][1].drop(columns="seconds") for k in "abc")
    pd.testing.assert_frame_equal(metrics_a, metrics_b, check_exact=True)
    pd.testing.assert_frame_equal(runs["a"][2], runs["b"][2], check_exact=True)
    assert not np.array_equal(metrics_a["train_loss"], metrics_c["train_loss"])


def test_select_epoch_best_val_takes_the_first_maximum_and_official_the_last():
    val = [0.2, 0.7, 0.5, 0.7, 0.6]
    assert select_epoch("best-val", val) == 1
    assert select_epoch("official", val) == 4
    assert select_epoch("best-val", [0.3]) == 0
    with pytest.raises(ValueError, match="unknown protocol 'last'"):
        select_epoch("last", val)
    with pytest.raises(ValueError, match="no epochs"):
        select_epoch("best-val", [])


def test_best_val_reports_the_test_metric_of_the_first_best_val_epoch(tmp_path):
    summary = train.run(tiny(tmp_path, epochs=8, lr=0.05), tmp_path / "run")
    _, metrics, _, _ = read_run(tmp_path / "run")
    best = metrics.loc[metrics["val_metric"].idxmax()]  # idxmax: first occurrence
    assert summary["best_epoch"] == best["epoch"]
    assert summary["test_metric"] == best["test_metric"]
    assert summary["best_val"] == {
        "epoch": best["epoch"], "train": best["train_metric"], "val": best["val_metric"],
        "test": best["test_metric"],
    }
    assert summary["final"]["epoch"] == 8
    assert (metrics["lr"] == 0.05).all()


def test_official_protocol_cuts_the_lr_tenfold_after_a_plateau(tmp_path):
    # An lr this small leaves the weights unchanged in float32, so the validation loss
    # is flat: better at epoch 1, then 11 epochs without improvement (> patience 10).
    summary = train.run(
        tiny(tmp_path, protocol="official", lr=1e-30, weight_decay=0.0, epochs=14),
        tmp_path / "run",
    )
    _, metrics, _, _ = read_run(tmp_path / "run")
    assert metrics["val_loss"].nunique() == 1
    assert metrics["lr"].tolist() == [1e-30] * 12 + [pytest.approx(1e-31, rel=1e-9)] * 2
    assert summary["test_metric"] == metrics["test_metric"].iloc[-1]
    assert summary["final"]["epoch"] == 14


def test_patience_stops_best_val_after_that_many_epochs_without_improvement(tmp_path):
    summary = train.run(
        tiny(tmp_path, lr=1e-30, weight_decay=0.0, epochs=20, patience=3), tmp_path / "run"
    )
    assert summary["epochs_run"] == 4 and summary["best_epoch"] == 1


def test_missing_features_mask_from_file_is_used(tmp_path):
    from lipnorm.data import csbm_params, generate_csbm

    num_nodes = generate_csbm(csbm_params(TINY_CSBM)).num_nodes
    mask = np.zeros(num_nodes, dtype=bool)
    mask[:7] = True
    np.save(tmp_path / "mask.npy", mask)
    train.run(tiny(tmp_path, mask=str(tmp_path / "mask.npy"), epochs=1), tmp_path / "run")
    assert "7 feature rows erased" in (tmp_path / "run" / "train.log").read_text()
    np.save(tmp_path / "short.npy", mask[:10])
    with pytest.raises(ValueError, match=r"short.npy has dtype bool and shape \(10,\); expected bool of shape \(60,\)"):
        train.run(tiny(tmp_path, mask=str(tmp_path / "short.npy")), tmp_path / "bad")
    assert not (tmp_path / "bad").exists()


def test_a_crash_leaves_no_run_directory(tmp_path, monkeypatch):
    def crash(self, layer_stats=False):
        raise RuntimeError("simulated crash")

    monkeypatch.setattr(Trainer, "evaluate", crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        train.run(tiny(tmp_path), tmp_path / "runs" / "run")
    assert list((tmp_path / "runs").iterdir()) == []


BAD_SETTINGS = [
    ({"dataset": "corra"}, "unknown dataset 'corra'"),
    ({"model": "gatt"}, "unknown model 'gatt'"),
    ({"model": "gt", "norm_extra": "pairnorm"}, "cannot be added to model 'gt'"),
    ({"norm_extra": "layernorm"}, "unknown norm_extra 'layernorm'"),
    ({"depth": 0}, "depth must be an integer >= 1, got 0"),
    ({"alpha": -0.5}, "alpha must be >= 0, got -0.5"),
    ({"heads": 0}, "heads must be an integer >= 1, got 0"),
    ({"hidden": 0}, "hidden must be an integer >= 1, got 0"),
    ({"epochs": 0}, "epochs must be >= 1, got 0"),
    ({"missing_rate": 100.5}, r"missing_rate must be in \[0, 100\] \(percent\), got 100.5"),
    ({"missing_rate": -1}, r"missing_rate must be in \[0, 100\] \(percent\), got -1"),
    ({"protocol": "last"}, "unknown protocol 'last'"),
    ({"variant": "mine"}, "unknown variant 'mine'"),
    ({"protocol": "official", "patience": 5}, "patience=5 applies to protocol 'best-val' only"),
    ({"lr": 0}, "lr must be a finite number > 0, got 0"),
    ({"save_every": 0}, "save_every must be >= 1, got 0"),
    ({"depth": "3"}, "depth must be an integer, got '3'"),
    ({"csbm": "nodes=ten"}, "csbm nodes='ten' is not a valid int"),
    ({"mask": "nowhere.npy"}, "mask file 'nowhere.npy' does not exist"),
    ({"recipe": "pyg"}, "unknown recipe 'pyg'; allowed: lipnorm, official, dgn, snr"),
    ({"flush_denormal": "yes"}, "flush_denormal must be true or false, got 'yes'"),
    ({"flush_denormal": 1}, "flush_denormal must be true or false, got 1"),
    ({"recipe": "official", "model": "gt-lip"}, "recipe 'official' builds the authors' DeepGAT, which has no model 'gt-lip'"),
    ({"recipe": "official", "patience": 5}, "patience=5 applies to protocol 'best-val' only, not 'official'"),
    ({"recipe": "official", "heads": 0}, "heads must be an integer >= 1, got 0"),
]


@pytest.mark.parametrize(("settings", "message"), BAD_SETTINGS)
def test_bad_settings_are_rejected_before_loading_anything(tmp_path, monkeypatch, settings, message):
    def must_not_load(*args, **kwargs):
        raise AssertionError("dataset loaded before the settings were validated")

    monkeypatch.setattr(data, "load_dataset", must_not_load)
    with pytest.raises(ValueError, match=message):
        train.run(tiny(tmp_path, **settings), tmp_path / "runs" / "run")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--depth", "0"], "depth must be an integer >= 1, got 0"),
        (["--model", "gatt"], "unknown model 'gatt'"),
        (["--missing-rate", "120"], "missing_rate must be in"),
        (["--protocol", "last"], "unknown protocol 'last'"),
    ],
)
def test_cli_rejects_bad_settings_with_exit_code_2(tmp_path, capsys, flags, message):
    out = tmp_path / "runs" / "run"
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "--dataset", "csbm", *flags, "--out", str(out)])
    assert exit_info.value.code == 2
    assert f"lipnorm train: error: {message}" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_cli_recipe_choices_are_the_library_recipes(tmp_path, capsys):
    from lipnorm.settings.recipes import RECIPES

    assert cli.train.RECIPES == RECIPES
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "--recipe", "pyg", "--out", str(tmp_path / "run")])
    assert exit_info.value.code == 2
    assert "error: argument --recipe: invalid choice: 'pyg' (choose from 'lipnorm', 'official', 'dgn', 'snr')" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_config_file_settings_with_flags_overriding(tmp_path):
    (tmp_path / "run.yaml").write_text("dataset: csbm\ndepth: 3\nlr: 0.01\nmissing-rate: 20\n")
    config = load_config(tmp_path / "run.yaml", {"depth": 4})
    assert (config.dataset, config.depth, config.lr, config.missing_rate) == ("csbm", 4, 0.01, 20)
    (tmp_path / "run.json").write_text(json.dumps({"model": "gat", "norm_extra": "pairnorm"}))
    assert load_config(tmp_path / "run.json", {}).resolved().model == "gat-pairnorm"
    (tmp_path / "bad.yaml").write_text("dataset: csbm\ndept: 3\n")
    with pytest.raises(ValueError, match="unknown training setting.*'dept'"):
        load_config(tmp_path / "bad.yaml", {})


def test_cli_reads_the_config_file_and_names_an_unknown_key(tmp_path, capsys):
    (tmp_path / "run.yaml").write_text(
        f"dataset: csbm\ncsbm: '{TINY_CSBM}'\nheads: 2\nhidden: 4\nepochs: 5\n"
        f"data_root: {tmp_path / 'datasets'}\n"
    )
    out = tmp_path / "run"
    assert cli.main(["train", "--config", str(tmp_path / "run.yaml"), "--epochs", "2", "--out", str(out)]) == 0
    summary, metrics, _, _ = read_run(out)
    assert summary["config"]["heads"] == 2 and len(metrics) == 2
    (tmp_path / "bad.yaml").write_text("epoch: 3\n")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "--config", str(tmp_path / "bad.yaml"), "--out", str(tmp_path / "x")])
    assert exit_info.value.code == 2
    assert "'epoch'" in capsys.readouterr().err


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_config_file_numbers_as_people_write_them(tmp_path, suffix):
    text = (
        "lr: 5e-3\nweight_decay: 5e-4\nalpha: 1E1\n" if suffix == ".yaml"
        else '{"lr": 5e-3, "weight_decay": 5e-4, "alpha": 1E1}'
    )
    (tmp_path / f"run{suffix}").write_text(text)
    out = tmp_path / "run"
    args = ["train", "--config", str(tmp_path / f"run{suffix}"), "--dataset", "csbm", "--csbm", TINY_CSBM,
            "--heads", "2", "--hidden", "4", "--epochs", "2", "--data-root", str(tmp_path / "datasets")]
    assert cli.main([*args, "--out", str(out)]) == 0
    config = json.loads((out / "summary.json").read_text())["config"]
    assert (config["lr"], config["weight_decay"], config["alpha"]) == (0.005, 0.0005, 10.0)


def test_config_file_non_numbers_are_errors_naming_the_key(tmp_path, capsys):
    (tmp_path / "run.yaml").write_text("lr: abc\n")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "--config", str(tmp_path / "run.yaml"), "--out", str(tmp_path / "run")])
    assert exit_info.value.code == 2
    assert "lipnorm train: error: lr must be a number or null, got 'abc'" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.fixture(scope="module")
def cora_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("datasets")


def test_classic_gat_on_cora_lowers_its_loss(tmp_path, cora_root):
    config = TrainConfig(
        dataset="cora", model="gat-classic", epochs=5, data_root=str(cora_root),
        mirror=mirror_folder(), threads=2,
    )
    summary = train.run(config, tmp_path / "run")
    _, metrics, _, _ = read_run(tmp_path / "run")
    assert summary["status"] == "ok" and summary["threads"] == 2
    assert metrics["train_loss"].iloc[-1] < metrics["train_loss"].iloc[0]


@pytest.mark.slow
def test_classic_gat_on_cora_reaches_the_published_accuracy(tmp_path, cora_root):
    config = TrainConfig(
        dataset="cora", model="gat-classic", epochs=200, data_root=str(cora_root),
        mirror=mirror_folder(), threads=2,
    )
    summary = train.run(config, tmp_path / "run")
    assert summary["test_metric"] >= 0.78


# --- recipes -------------------------------------------------------------------------


def test_official_epochs_follow_the_authors_launcher():
    depths = [1, 2, 4, 5, 7, 8, 10, 30]
    assert [official_epochs(d) for d in depths] == [1000, 1000, 1000, 1500, 1500, 2500, 2500, 2500]
    assert [TrainConfig(recipe="official", depth=d).resolved().epochs for d in (1, 4, 5, 7, 8, 30)] == [
        1000, 1000, 1500, 1500, 2500, 2500
    ]


RECIPE_FIELDS = ("epochs", "lr", "weight_decay", "heads", "hidden", "protocol", "variant")


def test_recipes_fill_the_unset_settings_and_explicit_ones_win():
    def chosen(config):
        return {name: getattr(config.resolved(), name) for name in RECIPE_FIELDS}

    # lipnorm: the defaults these settings had before recipes existed.
    assert chosen(TrainConfig()) == {
        "epochs": 200, "lr": 0.005, "weight_decay": 5e-4, "heads": 8, "hidden": 8,
        "protocol": "best-val", "variant": "paper",
    }
    assert chosen(TrainConfig(recipe="official", depth=6)) == {
        "epochs": 1500, "lr": 0.01, "weight_decay": 5e-4, "heads": 8, "hidden": 64,
        "protocol": "official", "variant": "official",
    }
    explicit = TrainConfig(recipe="official", depth=6, epochs=150, lr=0.005, hidden=8, protocol="best-val", patience=20)
    assert chosen(explicit) == {
        "epochs": 150, "lr": 0.005, "weight_decay": 5e-4, "heads": 8, "hidden": 8,
        "protocol": "best-val", "variant": "official",
    }
    resolved = explicit.resolved()
    assert resolved.resolved() == resolved and resolved.recipe == "official"
    assert all(getattr(resolved, name) is not None for name in RECIPE_FIELDS)
    assert TrainConfig.from_mapping({"recipe": "official", "weight-decay": 0}).resolved().weight_decay == 0.0


def test_official_recipe_trains_with_adam_and_torchs_plateau_scheduler(tmp_path):
    config = tiny(tmp_path, recipe="official", heads=None, hidden=None, epochs=None).resolved()
    assert (config.heads, config.hidden, config.epochs) == (8, 64, 1000)
    setup = prepare(config)
    assert setup.model.recipe == "official"
    assert setup.model.input_fc.out_features == 64
    assert {layer.variant for layer in setup.model.layers} == {"official"}
    trainer = Trainer(setup, config)
    assert isinstance(trainer.optimizer, torch.optim.Adam)
    assert trainer.optimizer.defaults["lr"] == 0.01 and trainer.optimizer.defaults["weight_decay"] == 5e-4
    scheduler = trainer.scheduler
    assert type(scheduler) is torch.optim.lr_scheduler.ReduceLROnPlateau
    # Their ReduceLROnPlateau(optimizer): every setting at torch's default.
    reference = torch.optim.lr_scheduler.ReduceLROnPlateau(torch.optim.Adam([torch.zeros(1, requires_grad=True)]))
    for name in ("mode", "factor", "patience", "threshold", "threshold_mode", "cooldown", "min_lrs", "eps"):
        assert getattr(scheduler, name) == getattr(reference, name), name
    assert Trainer(setup, dataclasses.replace(config, protocol=TrainConfig().resolved().protocol)).scheduler is None


def test_official_recipe_trains_on_the_stored_planetoid_features(cora_root):
    base = dict(dataset="cora", depth=2, data_root=str(cora_root), mirror=mirror_folder())
    official = TrainConfig(recipe="official", model="gat-lip", **base).resolved()
    lipnorm = TrainConfig(model="gat-lip", **base).resolved()
    assert official.raw_features and not lipnorm.raw_features
    raw = prepare(official).features
    normalised = prepare(lipnorm).features
    assert set(raw.unique().tolist()) == {0.0, 1.0}
    torch.testing.assert_close(normalised, raw / raw.sum(dim=1, keepdim=True), rtol=1e-6, atol=0)
    assert not TrainConfig(recipe="official", dataset="csbm").raw_features


def test_cli_official_recipe_on_cora_records_its_settings(tmp_path, cora_root):
    out = tmp_path / "run"
    code = cli.main([
        "train", "--recipe", "official", "--epochs", "2", "--depth", "2", "--dataset", "cora",
        "--model", "gat-lip", "--data-root", str(cora_root), "--mirror", mirror_folder(),
        "--threads", "2", "--out", str(out),
    ])
    assert code == 0
    summary, metrics, gradnorms, _ = read_run(out)
    config = summary["config"]
    assert {key: config[key] for key in ("recipe", "heads", "hidden", "lr", "weight_decay", "protocol", "variant", "epochs")} == {
        "recipe": "official", "heads": 8, "hidden": 64, "lr": 0.01, "weight_decay": 5e-4,
        "protocol": "official", "variant": "official", "epochs": 2,
    }
    assert (config["feat_drop"], config["attn_drop"]) == (0.6, 0.3)
    assert summary["status"] == "ok" and summary["epochs_run"] == 2
    assert summary["test_metric"] == metrics["test_metric"].iloc[-1]  # the last epoch's
    assert metrics["lr"].tolist() == [0.01, 0.01]
    # Their DeepGAT on Cora: Linear(1433, 64), layer 1 (64 -> 8 x 64), layer 2 (512 -> 8 x 64),
    # each with attention vectors 2 x 512 and bias 512, Linear(512, 7).
    assert summary["num_params"] == (1433 * 64 + 64) + (64 * 512 + 1024 + 512) + (512 * 512 + 1024 + 512) + (512 * 7 + 7)
    assert "recipe official, features as stored (not row-normalised)" in (out / "train.log").read_text()
    assert sorted(gradnorms["layer"].unique()) == [0, 1, 2, 3]


RETAIN_PROBE = """
import ctypes, json, sys, torch
from lipnorm.train.process import retain_freed_memory
class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
if sys.argv[1] != "default":
    assert retain_freed_memory(map_large_tensors=sys.argv[1] == "map-large")
floats = int(sys.argv[2]) // 4
before = libc.mallinfo2()
tensor = torch.ones(floats)
alive = libc.mallinfo2()
del tensor
freed = libc.mallinfo2()
for _ in range(20):
    torch.ones(floats)  # allocated, written, freed
settled = libc.mallinfo2()
for _ in range(10):
    torch.ones(floats)
again = libc.mallinfo2()
print(json.dumps({name: [getattr(info, name) for info in (before, alive, freed, settled, again)]
                  for name in ("hblkhd", "arena", "uordblks", "fordblks")}))
"""

# Above glibc's largest dynamic mmap threshold (32 MiB), and below it.
LARGE_TENSOR_BYTES, SMALL_TENSOR_BYTES = 64 << 20, 16 << 20


def _malloc_stats(mode: str, tensor_bytes: int) -> dict:
    # glibc's own accounting (mallinfo2), not page-fault counts, which the kernel's page
    # reclaim makes vary from run to run.
    done = subprocess.run(
        [sys.executable, "-c", RETAIN_PROBE, mode, str(tensor_bytes)], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.splitlines()[-1])


def _mapped_then_unmapped(stats: dict, tensor_bytes: int) -> bool:
    mapped_before, mapped_alive, mapped_freed, _, mapped_last = stats["hblkhd"]
    return mapped_alive - mapped_before >= tensor_bytes and mapped_freed == mapped_last == mapped_before


def _reused_from_the_heap(stats: dict, tensor_bytes: int) -> bool:
    # The tensor comes from the heap (whose free space may serve a little of it: count
    # bytes in use), its bytes stay there as free space when freed, and once the heap has
    # settled (it grew by a few tensors over the first ~12 on this machine, run to run),
    # ten more tensors reuse its free space without growing it.
    return (
        stats["hblkhd"][1] == stats["hblkhd"][0] == stats["hblkhd"][4]
        and stats["uordblks"][1] - stats["uordblks"][0] >= tensor_bytes
        and stats["fordblks"][2] >= tensor_bytes
        and stats["arena"][4] == stats["arena"][3]
    )


@pytest.mark.parametrize("tensor_bytes", [SMALL_TENSOR_BYTES, LARGE_TENSOR_BYTES])
def test_retain_freed_memory_reuses_freed_tensors_instead_of_mapping_fresh_pages(tensor_bytes):
    # glibc's default: a tensor above 32 MiB is a mapping of its own (hblkhd), unmapped
    # when freed, so its pages are faulted in anew each time (one below it may be too,
    # depending on what was freed before: glibc's threshold is dynamic).
    assert _mapped_then_unmapped(_malloc_stats("default", LARGE_TENSOR_BYTES), LARGE_TENSOR_BYTES)
    assert _reused_from_the_heap(_malloc_stats("retain", tensor_bytes), tensor_bytes)


def test_retain_freed_memory_can_map_large_tensors_so_they_do_not_fragment_the_heap():
    # Under checkpointing: a large graph's (N, H*D) tensors (32 MiB and more) are mapped
    # and unmapped each and the heap does not grow by them; smaller ones are still reused.
    large = _malloc_stats("map-large", LARGE_TENSOR_BYTES)
    assert _mapped_then_unmapped(large, LARGE_TENSOR_BYTES)
    assert large["arena"][4] - large["arena"][0] < LARGE_TENSOR_BYTES
    assert _reused_from_the_heap(_malloc_stats("map-large", SMALL_TENSOR_BYTES), SMALL_TENSOR_BYTES)


@pytest.mark.parametrize(
    ("settings", "mapped"),
    [
        ({}, False),
        ({"checkpoint": True}, True),
        ({"batching": "cluster", "partitions": 4, "batch_partitions": 2}, True),
        ({"batching": "cluster", "partitions": 4, "batch_partitions": 2, "checkpoint": True}, True),
    ],
)
def test_prepare_maps_large_tensors_under_checkpointing_and_cluster_batches(tmp_path, monkeypatch, settings, mapped):
    calls = []
    monkeypatch.setattr(trainer_module, "retain_freed_memory", lambda **options: calls.append(options))
    prepare(tiny(tmp_path, **settings).resolved())
    assert calls == [{"map_large_tensors": mapped}]


# A command's handler replaced by one that reports whether this process's CPU tensors are
# page-aligned, which PyTorch does exactly when it was asked for huge pages (every CPU
# tensor then starts on a page; else on 64 bytes, a page by chance once in 64).
HUGE_PAGES_PROBE = """
import json, sys, torch
from lipnorm import cli
from lipnorm.cli import plan, train
def probe(args):
    small = [torch.empty(3) for _ in range(16)]
    large = torch.ones(64 << 18)  # 64 MiB
    huge_kb = [int(line.split()[1]) for line in open("/proc/self/smaps_rollup") if line.startswith("AnonHugePages")]
    print(json.dumps({"aligned": all(t.data_ptr() % 4096 == 0 for t in small), "huge_kb": huge_kb[0]}))
    return 0
train._train = plan._plan = probe
cli.main(sys.argv[1:])
"""


def _huge_pages_probe(command: list[str], env_value: str | None = None) -> dict:
    env = {key: value for key, value in os.environ.items() if key != "THP_MEM_ALLOC_ENABLE"}
    if env_value is not None:
        env["THP_MEM_ALLOC_ENABLE"] = env_value
    done = subprocess.run(
        [sys.executable, "-c", HUGE_PAGES_PROBE, *command], capture_output=True, text=True, check=True, env=env
    )
    return json.loads(done.stdout.splitlines()[-1])


def _kernel_gives_huge_pages() -> bool:
    try:
        setting = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return False
    return "[always]" in setting or "[madvise]" in setting


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PyTorch's huge-page option is Linux's")
def test_train_asks_pytorch_for_huge_pages_before_its_first_tensor():
    trained = _huge_pages_probe(["train", "--dataset", "cora", "--out", "unused"])
    assert trained["aligned"]
    if _kernel_gives_huge_pages():
        assert trained["huge_kb"] >= 2048
    # Other commands leave PyTorch's allocator as it is, and so does a user's own setting.
    assert not _huge_pages_probe(["plan", "--dataset", "cora"])["aligned"]
    assert not _huge_pages_probe(["train", "--dataset", "cora", "--out", "unused"], env_value="0")["aligned"]


def test_the_trainers_adam_steps_as_torchs_default_cpu_adam_bit_for_bit(tmp_path):
    """The trainer's Adam takes all parameters in one call per step (foreach); on the CPU
    its steps are those of torch's default, which loops over them, to the last bit (what
    lets earlier runs' numbers stand)."""
    config = TrainConfig(dataset="csbm", csbm="nodes=40,classes=3,feature_dim=6,avg_degree=4", recipe="dgn",
                         depth=3, epochs=1, data_root=str(tmp_path))
    config = dataclasses.replace(config.resolved(), lr=0.01, weight_decay=5e-4, protocol="best-val")
    setup = trainer_module.prepare(config)
    trainer = trainer_module.Trainer(setup, config)
    assert trainer.optimizer.defaults["foreach"] is True
    params = list(setup.model.parameters())
    copies = [param.detach().clone().requires_grad_() for param in params]
    default = torch.optim.Adam(copies, lr=0.01, weight_decay=5e-4, foreach=False)
    torch.manual_seed(0)
    for _ in range(5):
        for param, copy in zip(params, copies):
            param.grad = torch.randn_like(param)
            copy.grad = param.grad.clone()
        trainer.optimizer.step()
        default.step()
    assert all(torch.equal(param, copy) for param, copy in zip(params, copies))
