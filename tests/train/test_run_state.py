"""A stopped run resumes where it stopped (`lipnorm.train.run_state`, `lipnorm.train.run`).

The subprocess tests send a real signal to a real `python -m lipnorm train` once its
first state file appears; the in-process ones signal the test's own process from inside
a training step, which makes the stopping epoch exact.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import dgl
import numpy as np
import pandas as pd
import pytest
import torch

import lipnorm
from lipnorm import train
from lipnorm.nn.dropedge import DropEdge
from lipnorm.train import TrainConfig, run_state
from lipnorm.train.trainer import Trainer, gather, prepare


@pytest.fixture(autouse=True)
def interactive_sigint():
    """SIGINT as an interactive process has it (Python's KeyboardInterrupt handler): a
    process started in the background by a non-interactive shell, as CI may run the
    suite, inherits SIGINT ignored, which the run keeps ignoring (tested below)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)

TINY_CSBM = "nodes=60,classes=3,feature_dim=8,avg_degree=4"
CLUSTER = {"batching": "cluster", "partitions": 6, "batch_partitions": 2}
FRAMES = ("metrics", "gradnorms", "outnorms", "layerstats")
# What may differ between a resumed run's summary and an uninterrupted one's.
TIMINGS = ("wall_time_s", "mean_epoch_s", "peak_memory_mb")
SRC = str(Path(lipnorm.__file__).resolve().parents[1])

# A model with dropout and PairNorm; the official recipe with its plateau scheduler, whose
# lr 0.1 is cut from epoch 20 on (a stop at the first save, epoch 25, falls within a plateau).
CASES = {
    "gat-lip-pairnorm": {"model": "gat-lip-pairnorm", "epochs": 100, "grad_log_every": 3, "save_every": 25},
    "official": {"recipe": "official", "model": "gat-pairnorm", "lr": 0.1, "epochs": 100, "save_every": 25},
}


def settings(tmp_path: Path, **changes) -> dict:
    base = {"dataset": "csbm", "csbm": TINY_CSBM, "heads": 2, "hidden": 4, "data_root": str(tmp_path / "datasets")}
    return {**base, **changes}


def flags(config: dict) -> list[str]:
    return [part for key, value in config.items() for part in (f"--{key.replace('_', '-')}", str(value))]


def read_run(out: Path) -> tuple[dict, dict[str, pd.DataFrame]]:
    summary = json.loads((out / "summary.json").read_text())
    frames = {name: pd.read_parquet(out / f"{name}.parquet") for name in FRAMES}
    frames["metrics"] = frames["metrics"].drop(columns="seconds")
    return summary, frames


def assert_same_run(resumed: Path, uninterrupted: Path) -> dict:
    """Identical rows and summary (timings and the resumes excepted); the resumed summary."""
    summary, frames = read_run(resumed)
    reference_summary, reference_frames = read_run(uninterrupted)
    for name in FRAMES:
        assert len(frames[name]) > 0, name
        pd.testing.assert_frame_equal(frames[name], reference_frames[name], check_exact=True, obj=name)
    for run in (summary, reference_summary):  # a resumed run may save at other epochs
        run["config"].pop("save_every")
    ignored = (*TIMINGS, "resumed_from_epochs")
    assert {k: v for k, v in summary.items() if k not in ignored} == {
        k: v for k, v in reference_summary.items() if k not in ignored
    }
    return summary


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """Each case run once without interruption, in this process: {case: run directory}."""
    folder = tmp_path_factory.mktemp("uninterrupted")
    runs = {}
    for case, changes in CASES.items():
        runs[case] = folder / case
        train.run(TrainConfig(**settings(folder, **changes)), runs[case])
    return runs


def lipnorm_train(config: dict, out: Path, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    with open(log, "w") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "lipnorm", "train", *flags(config), "--out", str(out)],
            stdout=subprocess.DEVNULL, stderr=stderr, env=env,
        )


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"the run ended (exit {proc.returncode}) before {path.name} appeared"
        assert time.monotonic() < deadline, f"{path.name} did not appear within {timeout} s"
        time.sleep(0.005)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_sigterm_then_rerun_ends_as_the_uninterrupted_run(tmp_path, uninterrupted, case):
    config = settings(uninterrupted[case].parent, **CASES[case])  # the same data_root
    out = tmp_path / "run"
    state = run_state.state_path(out)
    proc = lipnorm_train(config, out, tmp_path / "attempt1.log")
    wait_for(state, proc)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 143
    stopped_at = run_state.read_state(state)["history"]["epochs_done"]
    assert CASES[case]["save_every"] <= stopped_at < CASES[case]["epochs"]
    log = (tmp_path / "attempt1.log").read_text()
    assert f"SIGTERM received: saving the training state after epoch {stopped_at} to {state}" in log
    assert "exit code 143 (a failure, so that Snakemake and SLURM retry the job)" in log
    assert not out.exists()

    rerun = lipnorm_train(config, out, tmp_path / "attempt2.log")
    assert rerun.wait(timeout=120) == 0, (tmp_path / "attempt2.log").read_text()

    summary = assert_same_run(out, uninterrupted[case])
    assert summary["resumed_from_epochs"] == [stopped_at]
    assert not state.exists()
    # train.log tells both attempts.
    train_log = (out / "train.log").read_text()
    assert "SIGTERM received" in train_log
    assert f"resuming after epoch {stopped_at} from the training state {state}" in train_log
    assert train_log.count(f"DEBUG epoch {stopped_at} ") == 1


@pytest.mark.slow
def test_kill_9_between_saves_loses_at_most_the_epochs_since_the_last_save(tmp_path, uninterrupted):
    case = "gat-lip-pairnorm"
    save_every = 5
    config = settings(uninterrupted[case].parent, **{**CASES[case], "save_every": save_every})
    out = tmp_path / "run"
    state = run_state.state_path(out)
    proc = lipnorm_train(config, out, tmp_path / "attempt1.log")
    wait_for(state, proc)
    time.sleep(0.05)  # a few epochs on
    proc.kill()
    proc.wait(timeout=60)
    saved = run_state.read_state(state)["history"]["epochs_done"]
    assert saved % save_every == 0
    # The killed attempt's unfinished folder holds its log: the epochs it had trained.
    (unfinished,) = [path for path in tmp_path.glob(".run.*.tmp") if path.is_dir()]
    reached = max(int(line.split()[4]) for line in (unfinished / "train.log").read_text().splitlines() if " DEBUG epoch " in line)
    assert saved <= reached <= saved + save_every

    # The rerun in this process (a subprocess rerun is tested above): it resumes from there.
    train.run(TrainConfig(**config), out)
    summary = assert_same_run(out, uninterrupted[case])
    assert summary["resumed_from_epochs"] == [saved]
    assert not state.exists() and not list(tmp_path.glob(".run.*"))


def signal_in_step(monkeypatch, epoch: int, signum: int = signal.SIGTERM) -> None:
    """The process sends itself `signum` during the training step of `epoch`."""
    real_step = Trainer.train_step
    calls = itertools.count(1)

    def step(self, *args, **kwargs):
        if next(calls) == epoch:
            os.kill(os.getpid(), signum)
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(Trainer, "train_step", step)


def interrupted_state(tmp_path: Path, monkeypatch, config: TrainConfig, epoch: int) -> Path:
    """Run `config` into `tmp_path/run` until SIGTERM in `epoch`; the state file."""
    with monkeypatch.context() as patch:
        signal_in_step(patch, epoch)
        with pytest.raises(run_state.RunInterrupted, match=f"stopped by SIGTERM after epoch {epoch}") as stopped:
            train.run(config, tmp_path / "run")
    assert stopped.value.exit_code == 143
    assert not (tmp_path / "run").exists()
    return stopped.value.path


def tiny(tmp_path: Path, **changes) -> TrainConfig:
    return TrainConfig(**settings(tmp_path, **{"model": "gat-lip-pairnorm", "epochs": 6, "grad_log_every": 2, **changes}))


@pytest.mark.parametrize(
    ("stop_epoch", "signum"), [(3, signal.SIGTERM), (6, signal.SIGTERM), (2, signal.SIGINT)], ids=["3-TERM", "6-TERM", "2-INT"]
)
def test_signal_in_process_then_rerun_equals_the_uninterrupted_run(tmp_path, monkeypatch, stop_epoch, signum):
    """Also a stop in the last epoch (6): the rerun only adds the last layer statistics."""
    config = tiny(tmp_path)
    train.run(config, tmp_path / "uninterrupted")
    with monkeypatch.context() as patch:
        signal_in_step(patch, stop_epoch, signum)
        with pytest.raises(run_state.RunInterrupted) as stopped:
            train.run(config, tmp_path / "run")
    assert stopped.value.exit_code == 128 + signum
    state = run_state.read_state(stopped.value.path)
    assert state["history"]["epochs_done"] == stop_epoch
    assert state["history"]["finished"] is (stop_epoch == config.epochs)
    summary = train.run(config, tmp_path / "run")
    assert summary["resumed_from_epochs"] == [stop_epoch]
    assert_same_run(tmp_path / "run", tmp_path / "uninterrupted")


def test_two_resumes_are_both_recorded(tmp_path, monkeypatch):
    config = tiny(tmp_path)
    train.run(config, tmp_path / "uninterrupted")
    interrupted_state(tmp_path, monkeypatch, config, 2)
    with monkeypatch.context() as patch:
        signal_in_step(patch, 2)  # the resumed run's second epoch: epoch 4
        with pytest.raises(run_state.RunInterrupted, match="after epoch 4"):
            train.run(config, tmp_path / "run")
    assert train.run(config, tmp_path / "run")["resumed_from_epochs"] == [2, 4]
    assert_same_run(tmp_path / "run", tmp_path / "uninterrupted")


def test_periodic_saves_every_n_epochs_and_none_after_the_last(tmp_path, monkeypatch):
    saved_at = []
    real_write = run_state.write_state
    monkeypatch.setattr(
        run_state, "write_state",
        lambda path, state: (saved_at.append(state["history"]["epochs_done"]), real_write(path, state)),
    )
    train.run(tiny(tmp_path, epochs=7, save_every=3), tmp_path / "run")
    assert saved_at == [3, 6]
    assert not run_state.state_path(tmp_path / "run").exists()  # deleted once the run is written


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"lr": 0.01}, "lr: 0.005 in the state, 0.01 now"),
        ({"epochs": 8}, "epochs: 6 in the state, 8 now"),
        ({"model": "gat-pairnorm"}, "model: 'gat-lip-pairnorm' in the state, 'gat-pairnorm' now"),
    ],
)
def test_a_state_of_another_configuration_is_refused_naming_the_setting(tmp_path, monkeypatch, change, named):
    state = interrupted_state(tmp_path, monkeypatch, tiny(tmp_path), 2)
    before = state.read_bytes()
    with pytest.raises(ValueError, match=f"training state {state} was saved by a run with other settings") as refused:
        train.run(tiny(tmp_path, **change), tmp_path / "run")
    assert named in str(refused.value)
    assert "delete it to start the run over" in str(refused.value)
    assert state.read_bytes() == before  # neither reused nor discarded
    assert not (tmp_path / "run").exists()


def test_save_every_may_differ_on_resume(tmp_path, monkeypatch):
    interrupted_state(tmp_path, monkeypatch, tiny(tmp_path), 2)
    summary = train.run(tiny(tmp_path, save_every=2), tmp_path / "run")
    assert summary["resumed_from_epochs"] == [2]


def test_a_run_stopped_without_checkpointing_resumes_with_it_to_the_same_numbers(tmp_path, monkeypatch):
    """Activation checkpointing changes no number: a state saved without it resumes with
    it (gat-batchnorm: its running statistics continue too)."""
    config = tiny(tmp_path, model="gat-batchnorm")
    train.run(config, tmp_path / "uninterrupted")
    interrupted_state(tmp_path, monkeypatch, config, 3)
    summary = train.run(dataclasses.replace(config, checkpoint=True), tmp_path / "run")
    assert summary["resumed_from_epochs"] == [3] and summary["config"]["checkpoint"] is True
    frames, reference = read_run(tmp_path / "run")[1], read_run(tmp_path / "uninterrupted")[1]
    for name in FRAMES:
        pd.testing.assert_frame_equal(frames[name], reference[name], check_exact=True, obj=name)


def test_a_run_stopped_with_full_batches_does_not_resume_with_cluster_batches(tmp_path, monkeypatch):
    """Cluster batches change the numbers: not a setting a run may resume across."""
    config = tiny(tmp_path)
    state = interrupted_state(tmp_path, monkeypatch, config, 2)
    with pytest.raises(
        ValueError,
        match=r"batch_partitions: None in the state, 2 now; batching: 'full' in the state, 'cluster' now; "
        r".*partitions: None in the state, 6 now",
    ):
        train.run(dataclasses.replace(config, **CLUSTER), tmp_path / "run")
    assert state.exists() and not (tmp_path / "run").exists()


def test_a_state_of_another_lipnorm_version_is_refused_naming_it(tmp_path, monkeypatch):
    state = interrupted_state(tmp_path, monkeypatch, tiny(tmp_path), 2)
    saved_version = lipnorm.__version__
    monkeypatch.setattr(lipnorm, "__version__", "99.0")
    with pytest.raises(ValueError, match=f"versions.lipnorm: '{saved_version}' in the state, '99.0' now"):
        train.run(tiny(tmp_path), tmp_path / "run")
    assert state.exists()


def test_cli_refuses_another_configurations_state_with_exit_code_2(tmp_path, monkeypatch, capsys):
    from lipnorm import cli

    state = interrupted_state(tmp_path, monkeypatch, tiny(tmp_path), 2)
    args = ["train", *flags(settings(tmp_path, model="gat-lip-pairnorm", epochs=6, grad_log_every=2))]
    with pytest.raises(SystemExit) as exit_info:
        cli.main([*args, "--weight-decay", "0.001", "--out", str(tmp_path / "run")])
    assert exit_info.value.code == 2
    assert f"lipnorm train: error: training state {state} was saved by a run with other settings" in capsys.readouterr().err


def corrupt(path: Path, how: str) -> None:
    raw = bytearray(path.read_bytes())
    if how == "truncated":
        path.write_bytes(raw[: len(raw) // 2])
    elif how == "flipped byte":
        raw[-100] ^= 0xFF
        path.write_bytes(raw)
    elif how == "empty":
        path.write_bytes(b"")
    else:  # another file under the state's name
        path.write_text("not a state\n")


@pytest.mark.parametrize(
    ("how", "reason"),
    [
        ("truncated", "is truncated or overlong"),
        ("flipped byte", "is corrupt: its SHA-256 does not match its header"),
        ("empty", "is not a lipnorm training state"),
        ("text", "is not a lipnorm training state"),
    ],
)
def test_a_corrupt_or_truncated_state_is_refused_and_the_run_starts_over(tmp_path, monkeypatch, how, reason):
    config = tiny(tmp_path)
    train.run(config, tmp_path / "uninterrupted")
    state = interrupted_state(tmp_path, monkeypatch, config, 3)
    corrupt(state, how)
    with pytest.raises(run_state.UnreadableState, match=reason):
        run_state.read_state(state)
    summary = train.run(config, tmp_path / "run")
    assert summary["resumed_from_epochs"] == []
    assert_same_run(tmp_path / "run", tmp_path / "uninterrupted")
    log = (tmp_path / "run" / "train.log").read_text()
    assert f"WARNING {state} {reason}" in log and "not resuming from it, starting the run over" in log
    assert not state.exists()


def test_a_state_file_holds_data_not_code(tmp_path):
    """`weights_only` loading: a pickled object of an arbitrary class is refused."""
    path = tmp_path / "x.state.pt"
    run_state.write_state(path, {"object": Path("elsewhere")})
    with pytest.raises(run_state.UnreadableState, match="cannot be loaded"):
        run_state.read_state(path)


def test_a_state_of_another_file_format_is_refused(tmp_path):
    path = tmp_path / "x.state.pt"
    run_state.write_state(path, {"a": 1})
    header, payload = path.read_bytes().split(b"\n", 1)
    path.write_bytes(header.replace(b"run-state 1 ", b"run-state 2 ") + b"\n" + payload)
    with pytest.raises(ValueError, match="has file format 2, this lipnorm reads format 1: it is not reused"):
        run_state.read_state(path)


def test_write_state_is_atomic_and_removes_its_stale_temporaries(tmp_path, monkeypatch):
    path = tmp_path / "run.state.pt"
    run_state.write_state(path, {"epoch": 1})
    stale = tmp_path / ".run.state.pt.abc123.tmp"
    stale.write_bytes(b"half a save")
    monkeypatch.setattr(torch, "save", lambda *args, **kwargs: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError, match="disk full"):
        run_state.write_state(path, {"epoch": 2})
    assert run_state.read_state(path) == {"epoch": 1}
    run_state.remove_stale_temporaries(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.state.pt"]


def draws() -> tuple:
    return random.random(), float(np.random.rand()), torch.rand(3).tolist()


def test_random_streams_continue_where_they_were_saved_registered_ones_included(tmp_path):
    streams = run_state.RandomStreams(torch.device("cpu"))
    drop = DropEdge(0.5, seed=3)
    streams.register("dropedge", drop)
    graph = dgl.add_self_loop(dgl.rand_graph(20, 60))
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    draws(), drop.kept_edges(graph)
    path = tmp_path / "s.state.pt"
    run_state.write_state(path, {"random": streams.state_dict()})
    expected = draws(), drop.kept_edges(graph)
    random.seed(2), np.random.seed(2), torch.manual_seed(2), drop.kept_edges(graph)  # move every stream on
    streams.load_state_dict(run_state.read_state(path)["random"])
    again = draws(), drop.kept_edges(graph)
    assert again[0] == expected[0]
    assert torch.equal(again[1], expected[1])


def test_random_streams_refuse_a_duplicate_a_non_stream_and_other_saved_streams():
    streams = run_state.RandomStreams(torch.device("cpu"))
    with pytest.raises(ValueError, match="a random stream named 'torch' is already registered"):
        streams.register("torch", DropEdge(0.1, 0))
    with pytest.raises(ValueError, match=r"random stream 'g' \(.*\) has no state_dict\(\) method"):
        streams.register("g", torch.Generator())
    saved = streams.state_dict()
    streams.register("dropedge", DropEdge(0.1, 0))
    with pytest.raises(ValueError, match=r"saved random streams \['numpy', 'python', 'torch'\] are not this run's"):
        streams.load_state_dict(saved)


def test_the_trainer_saves_a_registered_stream(tmp_path):
    config = tiny(tmp_path).resolved()
    trainer = Trainer(prepare(config), config)
    drop = DropEdge(0.5, seed=0)
    trainer.random_streams.register("dropedge", drop)
    state = trainer.state_dict()
    first = drop.kept_edges(trainer.graph)
    trainer.load_state_dict(state)
    assert torch.equal(drop.kept_edges(trainer.graph), first)


def test_a_training_step_draws_nothing_from_dgls_generator(tmp_path):
    """DGL's generator has no state to save: a resumed run is exact only while training
    never draws from it. If this fails, give the new draws a torch.Generator registered
    with `Trainer.random_streams`."""
    config = TrainConfig(**settings(tmp_path, model="gat-lip-pairnorm", feat_drop=0.5, attn_drop=0.5)).resolved()
    trainer = Trainer(prepare(config), config)
    dgl.seed(7)
    untouched = dgl.random.choice(1000, 5).tolist()
    dgl.seed(7)
    gather(trainer.train_step(), trainer.evaluate(layer_stats=True))
    trainer.layer_stats.rows(1)
    assert dgl.random.choice(1000, 5).tolist() == untouched


def test_a_second_signal_has_its_usual_effect_and_handlers_are_restored():
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    with run_state.StopSignals() as stop:
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.requested and stop.name == "SIGINT"
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert {signum: signal.getsignal(signum) for signum in before} == before


def test_an_ignored_signal_stays_ignored():
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with run_state.StopSignals() as stop:
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGINT)
            assert not stop.requested
    finally:
        signal.signal(signal.SIGINT, previous)


def test_the_state_lives_beside_the_run_directory(tmp_path):
    assert run_state.state_path(tmp_path / "runs" / "seed0") == tmp_path / "runs" / "seed0.state.pt"
    assert run_state.state_path("runs/seed0/") == Path("runs/seed0.state.pt")


def test_on_a_gpu_the_devices_cuda_generator_is_saved_and_restored(monkeypatch):
    """Through recording fakes of torch's CUDA generator calls (no GPU here)."""
    calls = []
    monkeypatch.setattr(torch.cuda, "get_rng_state", lambda device: calls.append(("get", device)) or torch.tensor([7], dtype=torch.uint8))
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state, device: calls.append(("set", state.tolist(), device)))
    stream = run_state.TorchRandom(torch.device("cuda", 1))
    state = stream.state_dict()
    stream.load_state_dict(state)
    assert calls == [("get", torch.device("cuda", 1)), ("set", [7], torch.device("cuda", 1))]
    assert torch.equal(state["cpu"], torch.get_rng_state())
    assert "cuda" not in run_state.TorchRandom(torch.device("cpu")).state_dict()


@pytest.mark.parametrize(
    "changes",
    [{"dropedge": 0.3}, {"model": "gat-lip-dgn", "initial_residual": 0.1}, CLUSTER, {**CLUSTER, "dropedge": 0.3}],
    ids=["dropedge", "dgn-initial-residual", "cluster-batches", "cluster-batches-dropedge"],
)
def test_the_remedies_resume_as_the_uninterrupted_run(tmp_path, monkeypatch, changes):
    """DropEdge's and the cluster batches' own streams (registered random streams) and
    DGN's running statistics continue where they stopped: another mask, batch order or
    statistic would change the numbers."""
    config = tiny(tmp_path, **changes)
    train.run(config, tmp_path / "uninterrupted")
    interrupted_state(tmp_path, monkeypatch, config, 3)
    assert train.run(config, tmp_path / "run")["resumed_from_epochs"] == [3]
    assert_same_run(tmp_path / "run", tmp_path / "uninterrupted")
