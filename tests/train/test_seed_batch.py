"""`lipnorm train --seeds`: S seeds in one process write the S run directories that S
separate runs write (`lipnorm.train.seed_batch`), trained as one network where the
architecture has one (`seed_batch`), else one after another, saying why; a group
stopped by a signal resumes each of its runs."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import signal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from lipnorm import cli, registry, train
from lipnorm.train import TrainConfig, run_state, runs, seed_batch
from lipnorm.train.trainer import Trainer

TINY_CSBM = "nodes=60,classes=3,feature_dim=8,avg_degree=4"
FRAMES = ("metrics", "gradnorms", "outnorms", "layerstats")
# The batched network sums in other orders than the separate runs (its projections in the
# grouped kernel or over the non-zero entries where theirs are MKL GEMMs, forward and backward;
# the attention terms per seed; BatchNorm over S*W columns; the loss means and norms over
# (S, .) rows): float32 rounding, u = 2^-24. Either path's number x lies within k u |x| of its
# exact value, k its condition (how much the step magnifies unit roundings: a property of the
# numbers, not of the CPU), so the two differ by at most 2 k u |x|: rtol = 2 k u, no atol.
# k per frame: a power of two >= 2x the largest |float32 - float64| / (u |x|) measured, each
# path against the same run in float64 from the same initial point, on every number of the 12
# cases below (3 seeds) under 31 summation orders (torch's CPU kernels default/AVX2/AVX-512 x
# MKL's branches x the compiled kernels for x86-64/x86-64-v3/native): losses (a forward of
# short sums) 5.6 -> 16; output norms 10 -> 32; layer statistics 54 -> 128 (mean average
# distance, near-parallel rows); gradient norms 523 -> 1024: the attention softmax's backward
# a_ij (g_ij - sum_k a_ik g_ik) cancels over a node's alike neighbours (gat-0.1-4, seed 7,
# epoch 1: Dirichlet energy 1e-3). Largest at epoch 1, no growth over the epochs (Adam moves a
# weight by lr times its gradient's relative error). |together - separate| used at most 0.17,
# 0.15, 0.13, 0.26 of these bounds (in CONDITION's order) over those orders; in float64 the two
# paths agree to 5e-15, rounding alone (the same k at u = 2^-53).
UNIT_ROUNDOFF = 2.0**-24
CONDITION = {"metrics": 16, "gradnorms": 1024, "outnorms": 32, "layerstats": 128}
TOLERANCE = {name: 2 * condition * UNIT_ROUNDOFF for name, condition in CONDITION.items()}


def literature(tmp_path: Path, **settings) -> TrainConfig:
    """The literature GAT (recipe dgn) on a tiny CSBM graph, every epoch logged."""
    base = dict(
        dataset="csbm", csbm=TINY_CSBM, recipe="dgn", depth=3, epochs=6, grad_log_every=2,
        data_root=str(tmp_path / "datasets"), missing_rate=50,
    )
    return TrainConfig(**{**base, **settings})


def separate_runs(config: TrainConfig, seeds, root: Path) -> list[Path]:
    outs = []
    for seed in seeds:
        out = root / "alone" / f"s{seed}"
        train.run(dataclasses.replace(config, seed=seed), out)
        outs.append(out)
    return outs


def assert_seed_batch_writes_separate_runs(config: TrainConfig, seeds, root: Path) -> list[dict]:
    """`run_seeds` trains `seeds` as one network and writes, for each, the run directory
    its separate run writes; the summaries."""
    summaries = runs.run_seeds(config, seeds, str(root / "together" / "s{seed}"))
    assert [summary["config"]["seed"] for summary in summaries] == seeds
    for seed, alone in zip(seeds, separate_runs(config, seeds, root)):
        together = root / "together" / f"s{seed}"
        assert_same_run(together, alone)
        assert f"trained together with seeds {seeds} as one network" in (together / "train.log").read_text()
    return summaries


def assert_same_run(together: Path, alone: Path) -> None:
    """The two run directories hold the same numbers, row by row."""
    assert sorted(path.name for path in together.iterdir()) == sorted(path.name for path in alone.iterdir())
    for name in FRAMES:
        ours, theirs = (pd.read_parquet(path / f"{name}.parquet") for path in (together, alone))
        assert list(ours.columns) == list(theirs.columns) and len(ours) == len(theirs) > 0, name
        for column in ours.columns:
            if column == "seconds":
                continue
            if ours[column].dtype.kind == "f":
                np.testing.assert_allclose(
                    ours[column], theirs[column], rtol=TOLERANCE[name], atol=0, err_msg=f"{name}.{column}"
                )
            else:
                assert ours[column].tolist() == theirs[column].tolist(), f"{name}.{column}"
    ours, theirs = (json.loads((path / "summary.json").read_text()) for path in (together, alone))
    for key in ("status", "diverged_epoch", "best_epoch", "epochs_run", "num_params", "metric"):
        assert ours[key] == theirs[key], key
    assert ours["test_metric"] == pytest.approx(theirs["test_metric"], rel=1e-6)
    assert ours["config"] == theirs["config"]


@pytest.mark.parametrize(
    "settings",
    [
        {"model": "gat"},
        {"model": "gat-lip"},
        {"model": "gat-batchnorm"},
        {"model": "gat-lip-batchnorm", "epochs": 3},
        {"model": "gat-pairnorm"},
        {"model": "gat-lip-dgn"},
        {"model": "gat-dgn", "missing_rate": 100},
        {"model": "gat-lip", "residual": True, "depth": 4},
        {"model": "gat", "initial_residual": 0.1, "depth": 4},
        {"model": "gat-lip", "depth": 1},
        {"model": "gat-batchnorm", "dropedge": 0.3},
        {"model": "gat-lip", "dropedge": 0.5, "residual": True, "depth": 4},
    ],
    ids=lambda settings: "-".join(f"{value}" for value in settings.values()),
)
def test_seed_batch_write_the_separate_runs(tmp_path, settings):
    """Every remedy the batched network holds (DropEdge: each seed's edges a mask over
    the one graph), LipschitzNorm on and off, per-seed masks (missing rate 50) and one
    shared input (100): the same selected epoch, metrics,
    gradient and output norms and layer statistics as the separate runs."""
    config = literature(tmp_path, **settings)
    summaries = assert_seed_batch_writes_separate_runs(config, [3, 0, 7], tmp_path)
    # Each run's time is its share of the group's.
    assert all(summary["wall_time_s"] > 0 for summary in summaries)


@pytest.mark.parametrize("recipe", ["dgn", "lipnorm"], ids=["together", "one-after-another"])
def test_the_seeds_load_their_dataset_once(tmp_path, monkeypatch, recipe):
    """One load per process, whichever way the seeds train: the first seed's dataset
    serves the others (their configuration differs by the seed only)."""
    from lipnorm import data

    loads = []
    load = data.load_dataset
    monkeypatch.setattr(data, "load_dataset", lambda *args, **kwargs: loads.append(args) or load(*args, **kwargs))
    settings = {} if recipe == "dgn" else {"heads": 2, "hidden": 4}
    config = literature(tmp_path, recipe=recipe, model="gat", epochs=2, **settings)
    summaries = runs.run_seeds(config, [0, 1, 2], str(tmp_path / "together" / "s{seed}"))
    assert len(loads) == 1 and [summary["status"] for summary in summaries] == ["ok"] * 3


@pytest.mark.parametrize("seed_major", [True, False], ids=["one-norm-per-parameter", "gathered-per-seed"])
def test_the_gradient_norms_of_a_seed_batch(tmp_path, monkeypatch, seed_major):
    """The batched GAT's parameters hold seed s's part as row s: one norm per parameter
    serves every seed (no per-seed gathers). A network whose parts lie otherwise (here
    made to look so) gets each seed's parts gathered: the same numbers either way."""
    from lipnorm.train.hooks import GradientNorms

    gathered = []
    of = GradientNorms.of
    monkeypatch.setattr(GradientNorms, "of", lambda self, grads: gathered.append(1) or of(self, grads))
    if not seed_major:
        monkeypatch.setattr(seed_batch.SeedBatch, "_seed_major_gradients", lambda self: None)
    config = literature(tmp_path, model="gat-lip-batchnorm", epochs=3)
    runs.run_seeds(config, [0, 1], str(tmp_path / "together" / "s{seed}"))
    assert bool(gathered) is not seed_major
    for seed, alone in zip([0, 1], separate_runs(config, [0, 1], tmp_path)):
        assert_same_run(tmp_path / "together" / f"s{seed}", alone)


def test_an_architecture_without_a_seed_batch_falls_back(tmp_path, monkeypatch):
    """A plugin's architecture that registers no `seed_batch` (here: GAT's entry
    without it) gets its seeds trained one after another, with its reason logged."""
    entry = registry.architecture("gat")
    monkeypatch.setitem(registry.ARCHITECTURES, "gat", dataclasses.replace(entry, seed_batch=None))
    config = literature(tmp_path, model="gat-lip", epochs=3)
    runs.run_seeds(config, [0, 1], str(tmp_path / "together" / "s{seed}"))
    for seed, alone in zip([0, 1], separate_runs(config, [0, 1], tmp_path)):
        together = tmp_path / "together" / f"s{seed}"
        assert_same_run(together, alone)
        assert "architecture 'gat' registers no seed_batch network" in (together / "train.log").read_text()


def test_a_network_the_factory_refuses_falls_back_with_its_reason(tmp_path):
    """The lipnorm recipe's DeepGAT has no seed-batched form: one after another."""
    config = literature(tmp_path, recipe="lipnorm", model="gat", heads=2, hidden=4, epochs=2)
    runs.run_seeds(config, [0, 1], str(tmp_path / "together" / "s{seed}"))
    log = (tmp_path / "together" / "s1" / "train.log").read_text()
    assert "cannot batch these seeds: DeepGAT is not the literature GAT (recipe dgn)" in log


def poison_seed_before_step(monkeypatch, seed: int, step: int) -> None:
    """The group's training step number `step` first makes seed `seed`'s second layer's
    weights NaN (a diverging seed), the other seeds' left as they are."""
    real_step = seed_batch.SeedBatch._train_step
    calls = {"n": 0}

    def poison_then_step(self):
        calls["n"] += 1
        if calls["n"] == step:
            tensor, index = self.model.seed_views(seed)["layers.1.fc.weight"]
            with torch.no_grad():
                tensor[index] = float("nan")
        return real_step(self)

    monkeypatch.setattr(seed_batch.SeedBatch, "_train_step", poison_then_step)


def test_a_diverging_seed_ends_alone_and_the_others_train_on(tmp_path, monkeypatch):
    """Seed 1's weights made NaN before its third step: its run ends there, diverged,
    with its first two epochs; seed 0's run is its separate run's in every number,
    untouched by the other's NaN (no operation mixes the seeds)."""
    config = literature(tmp_path, model="gat-lip-dgn", epochs=5)
    poison_seed_before_step(monkeypatch, seed=1, step=3)
    summaries = runs.run_seeds(config, [0, 1], str(tmp_path / "together" / "s{seed}"))
    assert [summary["status"] for summary in summaries] == ["ok", "diverged"]
    assert summaries[1]["diverged_epoch"] == 3 and summaries[1]["epochs_run"] == 2
    alone = separate_runs(config, [0, 1], tmp_path)
    assert_same_run(tmp_path / "together" / "s0", alone[0])
    ours, theirs = (pd.read_parquet(path / "metrics.parquet") for path in (tmp_path / "together" / "s1", alone[1]))
    np.testing.assert_allclose(ours["val_loss"], theirs["val_loss"][:2], rtol=TOLERANCE["metrics"], atol=0)
    assert "diverged at epoch 3" in (tmp_path / "together" / "s1" / "train.log").read_text()


def test_a_seed_diverging_between_logged_epochs_keeps_that_epochs_norms(tmp_path, monkeypatch):
    """Output norms are measured for the epochs that record them only: a logged epoch (1
    and 3 here), or one where a seed diverges (epoch 2, seed 1's weights made NaN before
    its step): that run keeps epoch 2's gradient and output norms, as its separate run
    poisoned alike keeps them."""
    config = literature(tmp_path, model="gat-lip", epochs=4)
    real_step = Trainer.train_step
    calls = {"n": 0}

    def poisoned_step(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            with torch.no_grad():
                self.model.layers[1].fc.weight.fill_(float("nan"))
        return real_step(self, *args, **kwargs)

    poison_seed_before_step(monkeypatch, seed=1, step=2)
    summaries = runs.run_seeds(config, [0, 1], str(tmp_path / "together" / "s{seed}"))
    assert [summary["status"] for summary in summaries] == ["ok", "diverged"]
    monkeypatch.setattr(Trainer, "train_step", poisoned_step)
    (alone,) = separate_runs(config, [1], tmp_path)
    together = tmp_path / "together" / "s1"
    assert_same_run(together, alone)
    for name in ("outnorms", "gradnorms"):
        assert sorted(set(pd.read_parquet(together / f"{name}.parquet")["epoch"])) == [1, 2], name
    assert sorted(set(pd.read_parquet(tmp_path / "together" / "s0" / "outnorms.parquet")["epoch"])) == [1, 3]


@contextlib.contextmanager
def sigterm_at_step(monkeypatch, step: int):
    """Meanwhile the group's training step number `step` sends this process SIGTERM
    first (as SLURM at a time limit): the group stops after that epoch."""
    real_step = seed_batch.SeedBatch._train_step
    calls = {"n": 0}

    def step_then_signal(self):
        calls["n"] += 1
        if calls["n"] == step:
            os.kill(os.getpid(), signal.SIGTERM)
        return real_step(self)

    with monkeypatch.context() as patched:
        patched.setattr(seed_batch.SeedBatch, "_train_step", step_then_signal)
        yield


def test_a_stopped_group_resumes_each_run(tmp_path, monkeypatch):
    """SIGTERM during the group: every run saves its state and no directory is written;
    the same call resumes each and writes what an uninterrupted group writes."""
    config = literature(tmp_path, model="gat-batchnorm", epochs=6, save_every=2)
    pattern = str(tmp_path / "together" / "s{seed}")
    with pytest.raises(run_state.RunInterrupted) as stopped:
        with sigterm_at_step(monkeypatch, 3):
            runs.run_seeds(config, [0, 1], pattern)
    assert stopped.value.epoch == 3
    for seed in (0, 1):
        assert run_state.state_path(pattern.replace("{seed}", str(seed))).exists()
        assert not Path(pattern.replace("{seed}", str(seed))).exists()
    summaries = runs.run_seeds(config, [0, 1], pattern)
    assert [summary["resumed_from_epochs"] for summary in summaries] == [[3], [3]]
    for seed, alone in zip([0, 1], separate_runs(config, [0, 1], tmp_path)):
        together = Path(pattern.replace("{seed}", str(seed)))
        assert_same_run(together, alone)
        assert not run_state.state_path(together).exists()
        assert "resuming after epoch 3" in (together / "train.log").read_text()


def test_a_separate_run_resumes_a_state_its_group_saved(tmp_path, monkeypatch):
    """A group's saved state is a separate run's: `lipnorm train --seed 1` resumes it."""
    config = literature(tmp_path, model="gat-dgn", epochs=5)
    pattern = str(tmp_path / "together" / "s{seed}")
    with pytest.raises(run_state.RunInterrupted):
        with sigterm_at_step(monkeypatch, 2):
            runs.run_seeds(config, [0, 1], pattern)
    resumed = train.run(dataclasses.replace(config, seed=1), pattern.replace("{seed}", "1"))
    assert resumed["resumed_from_epochs"] == [2]
    (alone,) = separate_runs(config, [1], tmp_path)
    assert_same_run(Path(pattern.replace("{seed}", "1")), alone)


def test_seeds_resumed_from_different_epochs_train_one_after_another_each_from_its_own_streams(tmp_path, monkeypatch):
    """Seed 0 stopped alone after epoch 2, seed 1 never started: the group cannot be one
    network, so each trains on its own, seed 1 from the streams its own set-up left (not
    from those of the seed built after it), and both equal their separate runs."""
    config = literature(tmp_path, model="gat-lip-batchnorm", epochs=5)
    pattern = str(tmp_path / "together" / "s{seed}")
    with pytest.raises(run_state.RunInterrupted):
        with monkeypatch.context() as patched:
            real_step = Trainer.train_step
            calls = {"n": 0}

            def step_then_signal(self, *args, **kwargs):
                calls["n"] += 1
                if calls["n"] == 2:
                    os.kill(os.getpid(), signal.SIGTERM)
                return real_step(self, *args, **kwargs)

            patched.setattr(Trainer, "train_step", step_then_signal)
            train.run(dataclasses.replace(config, seed=0), pattern.replace("{seed}", "0"))
    summaries = runs.run_seeds(config, [0, 1], pattern)
    assert [summary["resumed_from_epochs"] for summary in summaries] == [[2], []]
    for seed, alone in zip([0, 1], separate_runs(config, [0, 1], tmp_path)):
        together = Path(pattern.replace("{seed}", str(seed)))
        assert_same_run(together, alone)
        assert "their saved states stopped after different epochs ([0, 2])" in (together / "train.log").read_text()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--seeds", "0,1", "--out", "runs/fixed"], r"--out 'runs/fixed' must contain \{seed\} to name each of the seeds \[0, 1\]"),
        (["--seeds", "0,1", "--seed", "2", "--out", "runs/s{seed}"], "--seed and --seeds exclude each other"),
        (["--seeds", "0,x", "--out", "runs/s{seed}"], "'0,x' is not a comma-separated list of integer seeds"),
        (["--seeds", "0,1,0", "--out", "runs/s{seed}"], r"seeds \[0, 1, 0\] repeat \[0\]: each seed is one run"),
        (["--seeds", "0,1", "--mask", "m.npy", "--out", "runs/s{seed}"], r"--mask 'm.npy' must contain \{seed\}"),
    ],
)
def test_bad_seed_settings_are_refused_before_anything_runs(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as exited:
        cli.main(["train", "--dataset", "csbm", *argv])
    assert exited.value.code == 2
    assert re.search(message, capsys.readouterr().err)
    assert not (tmp_path / "runs").exists()


def test_the_cli_trains_a_seed_batch(tmp_path):
    out = tmp_path / "runs" / "s{seed}"
    assert cli.main([
        "train", "--dataset", "csbm", "--csbm", TINY_CSBM, "--recipe", "dgn", "--model", "gat-lip",
        "--depth", "2", "--epochs", "2", "--missing-rate", "100", "--data-root", str(tmp_path / "datasets"),
        "--seeds", "0,1", "--out", str(out),
    ]) == 0
    for seed in (0, 1):
        summary = json.loads((tmp_path / "runs" / f"s{seed}" / "summary.json").read_text())
        assert summary["config"]["seed"] == seed and summary["epochs_run"] == 2


def snr(tmp_path: Path, **settings) -> TrainConfig:
    """SNR's GAT (recipe snr) on a tiny CSBM graph, every epoch logged."""
    base = dict(
        dataset="csbm", csbm=TINY_CSBM, recipe="snr", residual=True, depth=3, hidden=8, epochs=6, grad_log_every=2,
        data_root=str(tmp_path / "datasets"), missing_rate=100,
    )
    return TrainConfig(**{**base, **settings})


@pytest.mark.parametrize(
    "settings",
    [
        {"model": "gat"},
        {"model": "gat-lip"},
        {"model": "gat-lip", "heads": 2, "depth": 1},
        {"model": "gat", "residual": False, "missing_rate": 50},
        {"model": "gat-lip", "dropedge": 0.3, "depth": 4},
        {"model": "gat-lip", "input": "entries"},
        {"model": "gat", "residual": False, "missing_rate": 50, "input": "entries"},
        {"model": "gat-lip", "dropedge": 0.3, "depth": 4, "input": "entries"},
    ],
    ids=lambda settings: "-".join(f"{value}" for value in settings.values()),
)
def test_snr_seed_batch_write_the_separate_runs(tmp_path, monkeypatch, settings):
    """Recipe snr's seeds as one `SeedBatchedSNR`: the same selected epoch, metrics,
    gradient and output norms and layer statistics as the separate runs (tolerances as
    above, the same error model; here |together - separate| used at most 0.17, 0.016,
    0.15, 0.031 of them, in CONDITION's order, on one 2-core x86-64 VM). The tiny graph's
    features are dense (a quarter of the entries or more non-zero); "entries": its input
    Linear on their non-zero entries all the same, the path of Cora's sparse features."""
    from lipnorm.nn.models import seed_batch_snr

    settings = dict(settings)
    if settings.pop("input", None) == "entries":
        monkeypatch.setattr(seed_batch_snr, "SPARSE_INPUT", 1.0)
    config = snr(tmp_path, **settings)
    assert_seed_batch_writes_separate_runs(config, [0, 1, 2], tmp_path)
