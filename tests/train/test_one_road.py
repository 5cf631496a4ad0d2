"""The road of a training setting (docs/architecture.md, "The road of a setting"): the
command line, a config file and the Python API build one `TrainConfig` in one step, it
is resolved once per run, the model's settings are derived from it once, and the run
records it as it was resolved, with nothing written back."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter

import pytest

from lipnorm import cli, train
from lipnorm.settings import model_config
from lipnorm.settings.train_config import TrainConfig, load_config
from lipnorm.train import run_directory

TINY_CSBM = "nodes=60,classes=3,feature_dim=8,avg_degree=4"


@pytest.fixture
def calls(monkeypatch):
    """How often each conversion on the road runs: `TrainConfig` built from a mapping,
    `TrainConfig.resolved`, `TrainConfig.model_config`, `ModelConfig.resolved`; and the
    config each `RunDirectory` was given."""
    counts: Counter[str] = Counter()  # Counter() == {...} compares the counted keys only
    given: list[TrainConfig] = []

    def counting(name, function):
        def wrapper(*args, **kwargs):
            counts[name] += 1
            return function(*args, **kwargs)
        return wrapper

    def derive(self, in_feats, num_classes):
        # (1, 1): `resolved` checking the model's settings before the data's sizes are
        # known (the result discarded); the dataset's sizes: the model the run builds.
        counts["model_config(1, 1)" if (in_feats, num_classes) == (1, 1) else "model_config"] += 1
        return real_model_config(self, in_feats, num_classes)

    real_model_config = TrainConfig.model_config

    monkeypatch.setattr(TrainConfig, "from_mapping", classmethod(counting("from_mapping", TrainConfig.from_mapping.__func__)))
    monkeypatch.setattr(TrainConfig, "resolved", counting("resolved", TrainConfig.resolved))
    monkeypatch.setattr(TrainConfig, "_validate_filled", counting("validated", TrainConfig._validate_filled))
    monkeypatch.setattr(TrainConfig, "model_config", derive)
    monkeypatch.setattr(model_config.ModelConfig, "resolved", counting("ModelConfig.resolved", model_config.ModelConfig.resolved))
    real_init = run_directory.RunDirectory.__init__

    def init(self, config, *args, **kwargs):
        given.append(config)
        real_init(self, config, *args, **kwargs)

    monkeypatch.setattr(run_directory.RunDirectory, "__init__", init)
    return counts, given


def tiny_args(tmp_path, *extra) -> list[str]:
    return [
        "train", "--dataset", "csbm", "--csbm", TINY_CSBM, "--depth", "2", "--heads", "2", "--hidden", "4",
        "--epochs", "2", "--data-root", str(tmp_path / "datasets"), *extra,
    ]


def test_flags_and_a_file_become_one_config_resolved_once_and_recorded_as_resolved(tmp_path, calls):
    counts, given = calls
    (tmp_path / "run.yaml").write_text("dropedge: 0.3\nlr: 1e-2\nfeat-drop: 0.5\n")
    out = tmp_path / "run"
    argv = tiny_args(tmp_path, "--config", str(tmp_path / "run.yaml"), "--lr", "0.02", "--out", str(out))
    assert cli.main(argv) == 0
    # flags and file -> TrainConfig -> resolved TrainConfig -> ModelConfig: each once
    # (the model's checks run once more inside `resolved`).
    assert counts == {"from_mapping": 1, "resolved": 1, "validated": 1, "model_config(1, 1)": 1, "model_config": 1,
                      "ModelConfig.resolved": 1}
    (config,) = given
    summary = json.loads((out / "summary.json").read_text())
    # Recorded as the run was given it: nothing written back from the model or the data.
    assert summary["config"] == json.loads(json.dumps(dataclasses.asdict(config)))
    # The flag wins over the file; the file's other settings and the recipe's defaults are there.
    assert (config.lr, config.dropedge, config.feat_drop) == (0.02, 0.3, 0.5)
    assert config.attn_drop == 0.3  # the architecture's (gat), which the recipe leaves unset
    # The settings a run reads are those `resolved` gives from the same sources.
    expected = load_config(tmp_path / "run.yaml", {"lr": 0.02, "dataset": "csbm", "csbm": TINY_CSBM, "depth": 2,
                                                    "heads": 2, "hidden": 4, "epochs": 2,
                                                    "data_root": str(tmp_path / "datasets")})
    assert config == TrainConfig.resolved(expected)


def test_seeds_are_resolved_once_each_and_the_model_settings_derived_once_each(tmp_path, calls):
    counts, given = calls
    out = str(tmp_path / "s{seed}")
    assert cli.main(tiny_args(tmp_path, "--recipe", "dgn", "--seeds", "0,1,2", "--out", out)) == 0
    assert counts == {"from_mapping": 1, "resolved": 3, "validated": 3, "model_config(1, 1)": 3, "model_config": 3,
                      "ModelConfig.resolved": 3}
    assert [config.seed for config in given] == [0, 1, 2]
    for config in given:
        summary = json.loads((tmp_path / f"s{config.seed}" / "summary.json").read_text())
        assert summary["config"] == json.loads(json.dumps(dataclasses.asdict(config)))


def test_the_python_api_takes_the_same_road(tmp_path, calls):
    counts, given = calls
    config = TrainConfig(dataset="csbm", csbm=TINY_CSBM, heads=2, hidden=4, epochs=2,
                         data_root=str(tmp_path / "datasets"), device="auto")
    summary = train.run(config, tmp_path / "run")
    assert counts == {"resolved": 1, "validated": 1, "model_config(1, 1)": 1, "model_config": 1, "ModelConfig.resolved": 1}
    assert given == [TrainConfig.resolved(config)]
    # The device as asked; what it resolved to, beside it.
    assert summary["config"]["device"] == "auto" and summary["device"] == "cpu"
    assert summary["cluster_batches"] is None


def test_resolving_fills_every_default_and_is_idempotent():
    """Nothing a run reads is left None but what stays optional (`patience`, `mask`,
    `mirror`, `csbm`, `norm_extra`, and the cluster counts, which the graph sizes)."""
    resolved = TrainConfig(dataset="cora", model="gat-pairnorm", recipe="dgn").resolved()
    unset = {field.name for field in dataclasses.fields(resolved) if getattr(resolved, field.name) is None}
    assert unset == {"patience", "mask", "mirror", "csbm", "norm_extra", "partitions", "batch_partitions"}
    assert resolved.resolved() == resolved
    # The dropouts: the recipe's where it has them (dgn: 0.6 and 0.6), else the
    # architecture's as registered (gcn: 0.5 and 0.0; gat: 0.6 and 0.3).
    assert (resolved.feat_drop, resolved.attn_drop) == (0.6, 0.6)
    assert (TrainConfig(model="gcn").resolved().feat_drop, TrainConfig(model="gcn").resolved().attn_drop) == (0.5, 0.0)
    assert (TrainConfig(attn_drop=0.1).resolved().feat_drop, TrainConfig(attn_drop=0.1).resolved().attn_drop) == (0.6, 0.1)


def test_the_command_line_module_lists_the_arguments_that_are_not_settings():
    """Every argument of `lipnorm train` is a `TrainConfig` field or one of NOT_SETTINGS."""
    from lipnorm.cli import train as cli_train

    fields = {field.name for field in dataclasses.fields(TrainConfig)}
    train_parser = cli.build_parser()._subparsers._group_actions[0].choices["train"]
    dests = {action.dest for action in train_parser._actions if action.dest != "help"}
    assert dests - fields == set(cli_train.NOT_SETTINGS) - {"command", "handler"}
