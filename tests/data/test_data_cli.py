"""`lipnorm data fetch|info|mask` through the real entry point (in process)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lipnorm.cli import main
from lipnorm.data import load_dataset, missing_features_mask


def test_info_json_with_mirror_from_environment(planetoid_root, data_mirror, no_network, monkeypatch, capsys):
    monkeypatch.setenv("LIPNORM_DATA_MIRROR", str(data_mirror))
    assert main(["data", "info", "cora", "--root", str(planetoid_root), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info == {
        "name": "cora", "nodes": 2708, "edges": 10556, "graph_edges": 10556 + 2708,
        "features": 1433, "classes": 7, "train": 140, "val": 500, "test": 1000,
        "multilabel": False, "metric": "accuracy",
    }


def test_info_text(planetoid_root, data_mirror, no_network, capsys):
    main(["data", "info", "citeseer", "--root", str(planetoid_root), "--mirror", str(data_mirror)])
    lines = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    assert (lines["nodes"], lines["features"], lines["classes"]) == ("3327", "3703", "6")
    assert (lines["edges"], lines["graph_edges"]) == ("9228", str(9228 - 124 + 3327))
    assert (lines["train"], lines["val"], lines["test"]) == ("120", "500", "1000")


def test_fetch_prints_the_folder(tmp_path, data_mirror, no_network, capsys):
    assert main(["data", "fetch", "cora", "--root", str(tmp_path), "--mirror", str(data_mirror)]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "cora_v2_d697a464")


def test_fetch_no_verify_flag(tmp_path, data_mirror, no_network, capsys):
    folder = tmp_path / "cora_v2_d697a464"
    main(["data", "fetch", "cora", "--root", str(tmp_path), "--mirror", str(data_mirror)])
    (folder / "ind.cora_v2.y").write_bytes(b"changed")
    with pytest.raises(SystemExit) as exit_info:
        main(["data", "fetch", "cora", "--root", str(tmp_path), "--mirror", str(data_mirror)])
    assert exit_info.value.code == 2
    assert "lipnorm data fetch: error: checksum mismatch for" in capsys.readouterr().err
    assert main(["data", "fetch", "cora", "--root", str(tmp_path), "--no-verify"]) == 0


def test_mask_writes_npy(planetoid_root, data_mirror, tmp_path, no_network, capsys):
    out = tmp_path / "masks" / "cora_50_7.npy"
    args = ["data", "mask", "cora", "--rate", "50", "--seed", "7", "--out", str(out)]
    assert main(args + ["--root", str(planetoid_root), "--mirror", str(data_mirror)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    mask = np.load(out)
    train = load_dataset("cora", root=planetoid_root, mirror=data_mirror).train_mask.numpy()
    assert np.array_equal(mask, missing_features_mask(train, 50, 7))
    assert mask.sum() == (2708 - 140) // 2


def test_mask_of_the_evaluation_pool(planetoid_root, data_mirror, tmp_path, no_network, capsys):
    out = tmp_path / "masks" / "cora_eval.npy"
    args = ["data", "mask", "cora", "--rate", "100", "--seed", "0", "--pool", "evaluation", "--out", str(out)]
    assert main(args + ["--root", str(planetoid_root), "--mirror", str(data_mirror)]) == 0
    dataset = load_dataset("cora", root=planetoid_root, mirror=data_mirror)
    assert np.array_equal(np.load(out), (dataset.val_mask | dataset.test_mask).numpy())
    with pytest.raises(SystemExit):
        main(["data", "mask", "cora", "--rate", "1", "--seed", "0", "--pool", "train", "--out", str(out)])
    assert "argument --pool: invalid choice: 'train' (choose from 'unlabelled', 'evaluation')" in capsys.readouterr().err


def test_mask_for_csbm_spec(tmp_path, capsys):
    out = tmp_path / "csbm.npy"
    main(["data", "mask", "csbm", "--csbm", "nodes=200,classes=4", "--rate", "100", "--seed", "0", "--out", str(out)])
    mask = np.load(out)
    assert mask.shape == (200,) and mask.sum() == 200 - 4 * 10  # 10 = a fifth of 50 nodes per class


@pytest.mark.parametrize(
    "args, message",
    [
        (["data", "info", "cora-ml"], "lipnorm data info: error: unknown dataset 'cora-ml'; allowed: cora, citeseer"),
        (["data", "mask", "csbm", "--rate", "120", "--seed", "0", "--out", "x.npy"],
         "lipnorm data mask: error: missing-features rate 120.0 must be a number from 0 to 100"),
        (["data", "info", "csbm", "--csbm", "nodes=ten"], "lipnorm data info: error: csbm nodes='ten' is not a valid int"),
    ],
)
def test_errors_exit_2_with_message(args, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(args + ["--root", str(tmp_path / "root")])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "root").exists()
