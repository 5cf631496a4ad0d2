"""`--device` of `lipnorm train`, `probe` and `bench`: parsing, `auto`, and CUDA refused
cleanly (exit 2, a message naming the device and DGL's CUDA wheels, nothing written).

This machine has no GPU and a CPU-only DGL: the GPU path itself is not run here.
"""

from __future__ import annotations

import json

import pytest
import torch

from lipnorm import cli, data
from lipnorm.settings import train_config
from lipnorm.train import device

TINY_CSBM = "nodes=60,classes=3,feature_dim=8,avg_degree=4"


def tiny_train_args(tmp_path, *extra) -> list[str]:
    return [
        "train", "--dataset", "csbm", "--csbm", TINY_CSBM, "--depth", "2", "--heads", "2",
        "--hidden", "4", "--epochs", "2", "--data-root", str(tmp_path / "datasets"), *extra,
    ]


def no_gpu(monkeypatch):
    """torch sees no GPU (as here), whatever the machine running the test has."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


# --- parsing and resolution ------------------------------------------------------


@pytest.mark.parametrize("text", ["cpu", "cuda", "cuda:0", "cuda:12", "auto"])
def test_accepted_device_strings(text):
    assert train_config.check_device(text) == text


@pytest.mark.parametrize("text", ["gpu", "cuda:x", "cuda:", "CUDA", "cuda:-1", "cpu:0", ""])
def test_malformed_device_names_the_value_and_the_allowed_forms(text):
    with pytest.raises(ValueError) as err:
        device.resolve_device(text)
    assert str(err.value) == f"unknown device {text!r}; allowed: {train_config.DEVICE_FORMS}"


def test_auto_is_cpu_when_cuda_is_not_usable():
    # Here torch sees no GPU and DGL is a CPU build: auto is the CPU.
    assert device.cuda_problem() is not None
    assert device.resolve_device("auto") == torch.device("cpu")


def test_installed_dgl_build_is_probed_through_its_cuda_device_api():
    from dgl._ffi.function import get_global_func

    # Every DGL build registers its CPU device API; only CUDA builds the CUDA one.
    assert get_global_func("device_api.cpu", allow_missing=True) is not None
    assert device.dgl_has_cuda() is (get_global_func("device_api.cuda", allow_missing=True) is not None)


def test_cuda_without_a_gpu_names_the_device_and_dgls_cuda_wheels(monkeypatch):
    no_gpu(monkeypatch)
    with pytest.raises(ValueError) as err:
        device.resolve_device("cuda:1")
    message = str(err.value)
    assert message.startswith("device 'cuda:1' cannot be used: torch ")
    assert "sees no CUDA device" in message
    assert "https://data.dgl.ai/wheels/torch-2.2/cu121/repo.html" in message
    assert "--device cpu" in message


def test_cuda_with_a_gpu_but_cpu_only_dgl_names_dgl(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(device, "dgl_has_cuda", lambda: False)
    with pytest.raises(ValueError, match=r"device 'cuda' cannot be used: DGL \S+ is a CPU-only build"):
        device.resolve_device("cuda")
    assert device.resolve_device("auto") == torch.device("cpu")
    with pytest.raises(ValueError, match=r"device 'cuda:3' cannot be used: torch sees 1 CUDA device\(s\)"):
        device.resolve_device("cuda:3")


def test_cpu_peak_memory_is_the_resident_set():
    import resource

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    assert device.peak_memory_mb(torch.device("cpu")) == pytest.approx(rss, rel=0.05)


# --- lipnorm train ---------------------------------------------------------------


@pytest.mark.parametrize("flag", ["cpu", "auto"])
def test_train_on_the_cpu_records_the_device(tmp_path, flag):
    out = tmp_path / "run"
    assert cli.main(tiny_train_args(tmp_path, "--device", flag, "--out", str(out))) == 0
    summary = json.loads((out / "summary.json").read_text())
    # The settings as asked (`auto` too); the device it resolved to beside them.
    assert summary["device"] == "cpu" and summary["config"]["device"] == flag
    assert summary["status"] == "ok" and summary["epochs_run"] == 2
    assert summary["peak_memory_mb"] > 0


def test_train_device_from_the_config_file(tmp_path):
    (tmp_path / "run.yaml").write_text("dataset: csbm\ndevice: auto\n")
    assert train_config.load_config(tmp_path / "run.yaml", {}).device == "auto"
    assert train_config.load_config(tmp_path / "run.yaml", {"device": "cpu"}).device == "cpu"


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("cuda", "device 'cuda' cannot be used: torch"),
        ("cuda:0", "device 'cuda:0' cannot be used: torch"),
        ("gpu", f"unknown device 'gpu'; allowed: {train_config.DEVICE_FORMS}"),
        ("cuda:x", f"unknown device 'cuda:x'; allowed: {train_config.DEVICE_FORMS}"),
    ],
)
def test_train_refuses_an_unusable_device_before_writing_or_loading(tmp_path, monkeypatch, capsys, flag, message):
    no_gpu(monkeypatch)

    def must_not_load(*args, **kwargs):
        raise AssertionError("dataset loaded before the device was checked")

    monkeypatch.setattr(data, "load_dataset", must_not_load)
    out = tmp_path / "runs" / "run"
    with pytest.raises(SystemExit) as exit_info:
        cli.main(tiny_train_args(tmp_path, "--device", flag, "--out", str(out)))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"lipnorm train: error: {message}" in err
    assert not (tmp_path / "runs").exists() and not (tmp_path / "datasets").exists()


def test_train_refuses_cuda_from_a_config_file(tmp_path, monkeypatch, capsys):
    no_gpu(monkeypatch)
    (tmp_path / "run.json").write_text(json.dumps({"device": "cuda"}))
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        cli.main(tiny_train_args(tmp_path, "--config", str(tmp_path / "run.json"), "--out", str(out)))
    assert exit_info.value.code == 2
    assert "device 'cuda' cannot be used" in capsys.readouterr().err
    assert not out.exists()


# --- lipnorm probe and bench -----------------------------------------------------


def test_probe_on_cpu_and_auto_give_the_same_table(tmp_path):
    from lipnorm.lipschitz_probe import probe_table

    assert cli.main(["probe", "--out-dir", str(tmp_path / "a"), "--scales", "10", "--iters", "20", "--device", "auto"]) == 0
    import pandas as pd

    written = pd.read_parquet(tmp_path / "a" / "probe.parquet")
    pd.testing.assert_frame_equal(written, probe_table(scales=(10.0,), iters=20, device="cpu"))


@pytest.mark.parametrize(
    ("command", "out_flag"), [("probe", "--out-dir"), ("bench", "--out")]
)
@pytest.mark.parametrize(
    ("flag", "message"),
    [("cuda", "device 'cuda' cannot be used: torch"), ("gpu", "unknown device 'gpu'; allowed: cpu, cuda, cuda:N")],
)
def test_probe_and_bench_refuse_an_unusable_device(tmp_path, monkeypatch, capsys, command, out_flag, flag, message):
    no_gpu(monkeypatch)
    out = tmp_path / "out"
    argv = [command, out_flag, str(out), "--device", flag]
    if command == "bench":
        argv += ["--quick", "--data-root", str(tmp_path / "datasets")]
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"lipnorm {command}: error: {message}" in err
    assert not out.exists() and not (tmp_path / "datasets").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "--dataset", "csbm", "--out", "{tmp}/out"],
        ["probe", "--out-dir", "{tmp}/out"],
        ["bench", "--quick", "--out", "{tmp}/out", "--data-root", "{tmp}/datasets"],
    ],
    ids=["train", "probe", "bench"],
)
def test_cuda_is_refused_on_this_machine_as_it_is(tmp_path, capsys, argv):
    """Unpatched: this machine's torch sees no GPU and its DGL is the CPU build."""
    assert not torch.cuda.is_available() and not device.dgl_has_cuda()
    with pytest.raises(SystemExit) as exit_info:
        cli.main([arg.format(tmp=tmp_path) for arg in argv] + ["--device", "cuda"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"lipnorm {argv[0]}: error: device 'cuda' cannot be used: torch" in err
    assert device.DGL_CUDA_INSTALL in err
    assert list(tmp_path.iterdir()) == []
