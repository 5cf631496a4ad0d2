"""What `lipnorm train` checks before it trains (`lipnorm.train.targets`): a bad setting
is refused before torch and DGL are imported, and a run directory holding a finished
run is kept as it is unless `--overwrite` replaces it; an interrupted run still resumes."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import lipnorm
from lipnorm import cli

SRC = str(Path(lipnorm.__file__).resolve().parents[1])
TINY_CSBM = "nodes=60,classes=3,feature_dim=8,avg_degree=4"
# Runs `lipnorm ARGS`, then prints which of torch and DGL it imported (at exit, which an
# error reaches as SystemExit).
PROBE = (
    "import atexit, json, sys; atexit.register(lambda: print(json.dumps(sorted({'torch', 'dgl'} & set(sys.modules)))));"
    "from lipnorm import cli; sys.exit(cli.main(sys.argv[1:]))"
)


def lipnorm_train_probe(*args: str) -> tuple[int, list[str], str]:
    """`lipnorm train ARGS` in a fresh process: exit status, heavy modules imported, stderr."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", PROBE, "train", *args], capture_output=True, text=True, env=env)
    return done.returncode, json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def tiny_flags(root: Path, epochs: int = 2) -> list[str]:
    return ["--dataset", "csbm", "--csbm", TINY_CSBM, "--heads", "2", "--hidden", "4", "--epochs", str(epochs),
            "--data-root", str(root / "datasets")]


def snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file under `folder`: its content's SHA-256 and its modification time (ns)."""
    return {
        path.relative_to(folder).as_posix(): (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns)
        for path in sorted(folder.rglob("*")) if path.is_file()
    }


# --- settings refused before the heavy imports ----------------------------------------------


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--patience", "0"], "patience must be >= 1, got 0"),
        (["--epochs", "0"], "epochs must be >= 1, got 0"),
        (["--lr", "-1"], "lr must be a finite number > 0, got -1.0"),
        (["--dropedge", "1.5"], "dropedge must be a rate in [0, 1) (0: off), got 1.5"),
        (["--missing-rate", "150"], "missing_rate must be in [0, 100] (percent), got 150.0"),
        (["--heads", "0"], "heads must be an integer >= 1, got 0"),
        (["--variant", "other"], "unknown variant 'other'; allowed: paper, official"),
        (["--device", "gpu"], "unknown device 'gpu'; allowed: cpu, cuda, cuda:N"),
        (["--dataset", "coraa"], "unknown dataset 'coraa'; allowed: cora, citeseer"),
        (["--model", "gcn-lip"], "unknown model 'gcn-lip'; allowed: gat, gat-lip,"),
        (["--batching", "cluster", "--partitions", "4", "--batch-partitions", "8"],
         "batch_partitions=8 must be at most partitions=4"),
        (["--dataset", "csbm", "--csbm", "nodes=x"], "csbm nodes='x' is not a valid int"),
        (["--recipe", "official", "--model", "gcn"], "recipe 'official' builds the authors' DeepGAT, which has no model 'gcn'"),
        (["--seeds", "0,0"], "seeds [0, 0] repeat [0]: each seed is one run"),
        (["--seeds", "0,1"], "--out 'never-written' must contain {seed} to name each of the seeds [0, 1]"),
    ],
)
def test_a_bad_setting_is_refused_without_importing_torch(flags, message):
    code, heavy, stderr = lipnorm_train_probe("--out", "never-written", *flags)
    assert code == 2 and heavy == [], stderr
    assert message in stderr
    assert stderr.count("lipnorm train: error: ") == 1
    assert not Path("never-written").exists()


def test_a_bad_setting_from_the_config_file_is_refused_without_importing_torch(tmp_path):
    (tmp_path / "run.yaml").write_text("patience: 0\n")
    code, heavy, stderr = lipnorm_train_probe("--config", str(tmp_path / "run.yaml"), "--out", str(tmp_path / "run"))
    assert (code, heavy) == (2, [])
    assert stderr.endswith("lipnorm train: error: patience must be >= 1, got 0\n")


# --- no finished run lost ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """A finished run of 2 epochs, written by `lipnorm train`."""
    root = tmp_path_factory.mktemp("finished")
    assert cli.main(["train", *tiny_flags(root), "--out", str(root / "run")]) == 0
    assert (root / "run" / "summary.json").is_file()
    return root / "run"


def test_out_onto_a_finished_run_is_refused_and_changes_nothing(finished_run):
    before = snapshot(finished_run.parent)
    code, heavy, stderr = lipnorm_train_probe(*tiny_flags(finished_run.parent, epochs=3), "--out", str(finished_run))
    assert (code, heavy) == (2, [])
    assert stderr.endswith(
        f"lipnorm train: error: run directory {str(finished_run)!r} holds a finished run (summary.json present); "
        "it is left as it is. Give --overwrite to replace it, or another --out\n"
    )
    assert snapshot(finished_run.parent) == before  # byte for byte, and not touched


def test_overwrite_replaces_a_finished_run(tmp_path, finished_run):
    out = tmp_path / "run"
    (tmp_path / "datasets").symlink_to(finished_run.parent / "datasets")
    assert cli.main(["train", *tiny_flags(tmp_path), "--out", str(out)]) == 0
    first = json.loads((out / "summary.json").read_text())
    assert cli.main(["train", *tiny_flags(tmp_path, epochs=3), "--out", str(out), "--overwrite"]) == 0
    second = json.loads((out / "summary.json").read_text())
    assert (first["epochs_run"], second["epochs_run"]) == (2, 3)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["datasets", "run"]  # no temporary left
    assert (out / "train.log").read_text().count("settings: ") == 1  # the new run's log only


def test_seeds_refuse_if_any_seeds_folder_holds_a_finished_run(tmp_path, finished_run):
    (tmp_path / "datasets").symlink_to(finished_run.parent / "datasets")
    assert cli.main(["train", *tiny_flags(tmp_path), "--seed", "1", "--out", str(tmp_path / "s1")]) == 0
    before = snapshot(tmp_path / "s1")
    code, heavy, stderr = lipnorm_train_probe(
        *tiny_flags(tmp_path), "--seeds", "0,1,2", "--out", str(tmp_path / "s{seed}")
    )
    assert (code, heavy) == (2, [])
    assert f"run directory {str(tmp_path / 's1')!r} holds a finished run" in stderr and "--overwrite" in stderr
    assert snapshot(tmp_path / "s1") == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["datasets", "s1"]  # seeds 0 and 2 not started
    assert cli.main(["train", *tiny_flags(tmp_path), "--seeds", "0,1", "--out", str(tmp_path / "s{seed}"),
                     "--overwrite"]) == 0
    assert [json.loads((tmp_path / f"s{seed}" / "summary.json").read_text())["config"]["seed"] for seed in (0, 1)] == [0, 1]


def test_an_interrupted_run_resumes_and_a_finished_one_is_then_kept(tmp_path, monkeypatch, capsys, finished_run):
    from lipnorm.train import run_state
    from lipnorm.train.trainer import Trainer

    (tmp_path / "datasets").symlink_to(finished_run.parent / "datasets")
    out = tmp_path / "run"
    command = ["train", *tiny_flags(tmp_path, epochs=4), "--out", str(out)]
    real_step, calls = Trainer.train_step, itertools.count(1)

    def step_then_signal(self, *args, **kwargs):
        if next(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return real_step(self, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "train_step", step_then_signal)
        assert cli.main(command) == 143
    assert not out.exists() and run_state.state_path(out).is_file()
    assert cli.main(command) == 0  # the same command resumes
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["resumed_from_epochs"], summary["epochs_run"]) == ([2], 4)
    assert not run_state.state_path(out).exists()
    capsys.readouterr()
    with pytest.raises(SystemExit) as refused:
        cli.main(command)
    assert refused.value.code == 2
    assert f"run directory {str(out)!r} holds a finished run" in capsys.readouterr().err
