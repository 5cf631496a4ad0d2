"""The `--device cuda` path on a machine without a GPU: torch's CUDA entry points replaced by
recording fakes (which check their arguments as torch 2.2.1 does), and `lipnorm.train.device.move`
by one that leaves everything on the CPU, so that `lipnorm train --device cuda` and the
benchmark's GPU branch run here and every device call they make is checked.

What this cannot show (no GPU, no CUDA build of DGL here): that DGL's CUDA kernels run,
and timings or memory of a real GPU.
"""

from __future__ import annotations

import gc
import json
import weakref

import pandas as pd
import pytest
import torch

from lipnorm import bench, cli
from lipnorm.bench import measure
from lipnorm.bench.measure import measurement_rows
from lipnorm.train import device

TINY_CSBM = "nodes=60,classes=3,feature_dim=8,avg_degree=4"


class FakeCuda:
    """Records the CUDA calls of `lipnorm.train.device` (and what `move` was asked to move)."""

    def __init__(self, current: int = 0, count: int = 1):
        self.current, self.count = current, count
        self.calls: list[tuple] = []
        self.moved: list[tuple[str, torch.device]] = []

    def set_device(self, dev) -> None:
        # What torch.cuda.set_device does first; it raises for torch.device("cuda").
        index = torch.cuda._utils._get_device_index(dev)
        self.calls.append(("set_device", index))
        self.current = index

    def record(self, name: str, result=None):
        def call(*args, **kwargs):
            self.calls.append((name, *args))
            return result

        return call

    def move(self, item, target: torch.device):
        assert target.type == "cuda" and target.index is not None, f"moved to {target!r}"
        self.moved.append((type(item).__name__, target))
        return item

    def names(self) -> list[str]:
        return [call[0] for call in self.calls]


@pytest.fixture
def fake_cuda(monkeypatch):
    fake = FakeCuda()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: fake.count)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: fake.current)
    monkeypatch.setattr(torch.cuda, "set_device", fake.set_device)
    monkeypatch.setattr(torch.cuda, "synchronize", fake.record("synchronize"))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", fake.record("reset_peak_memory_stats"))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", fake.record("max_memory_allocated", 3 * 2**20))
    monkeypatch.setattr(torch.cuda, "empty_cache", fake.record("empty_cache"))
    # What torch's optimisers ask once torch.cuda.is_available() is True.
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    # Process-wide switches: recorded instead of set, so other tests keep the defaults.
    monkeypatch.setattr(torch, "use_deterministic_algorithms", fake.record("use_deterministic_algorithms"))
    monkeypatch.setattr(torch.backends.cudnn, "deterministic", False)
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", True)
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    monkeypatch.setattr(device, "dgl_has_cuda", lambda: True)
    monkeypatch.setattr(device, "move", fake.move)
    return fake


def test_the_fake_refuses_an_unindexed_device_as_torch_does(fake_cuda):
    """The bug of `--device cuda`: torch.device("cuda") passed on to set_device."""
    with pytest.raises(ValueError, match="Expected a torch.device with a specified index or an integer"):
        torch.cuda.set_device(torch.device("cuda"))


@pytest.mark.parametrize(("text", "current", "expected"), [
    ("cuda", 0, torch.device("cuda", 0)),
    ("cuda", 1, torch.device("cuda", 1)),
    ("auto", 0, torch.device("cuda", 0)),
    ("cuda:1", 0, torch.device("cuda", 1)),
])
def test_cuda_and_auto_resolve_to_an_indexed_device(fake_cuda, text, current, expected):
    fake_cuda.current, fake_cuda.count = current, 2
    resolved = device.resolve_device(text)
    assert resolved == expected and resolved.index is not None
    device.use_device(resolved)
    assert fake_cuda.calls == [
        ("set_device", expected.index),
        ("use_deterministic_algorithms", True),
        ("reset_peak_memory_stats", expected),
    ]
    assert torch.backends.cudnn.deterministic is True and torch.backends.cudnn.benchmark is False
    import os

    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"


def test_device_functions_call_cuda_with_the_device_and_do_nothing_on_the_cpu(fake_cuda):
    cuda, cpu = torch.device("cuda", 0), torch.device("cpu")
    for fn in (device.synchronize, device.reset_peak_memory, device.release_memory):
        fn(cpu)
    assert fake_cuda.calls == []
    device.synchronize(cuda)
    device.reset_peak_memory(cuda)
    device.release_memory(cuda)
    assert device.peak_memory_mb(cuda) == 3.0
    assert fake_cuda.calls == [
        ("synchronize", cuda), ("reset_peak_memory_stats", cuda), ("empty_cache",), ("max_memory_allocated", cuda),
    ]


@pytest.mark.parametrize("flag", ["cuda", "auto"])
def test_train_with_cuda_reaches_training_on_the_indexed_device(tmp_path, fake_cuda, flag):
    out = tmp_path / "run"
    argv = [
        "train", "--dataset", "csbm", "--csbm", TINY_CSBM, "--depth", "2", "--heads", "2", "--hidden", "4",
        "--epochs", "3", "--data-root", str(tmp_path / "datasets"), "--device", flag, "--out", str(out),
    ]
    assert cli.main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["epochs_run"] == 3
    # The device it resolved to recorded beside the settings as asked; its memory is the
    # GPU's peak allocation.
    assert summary["device"] == "cuda:0" and summary["config"]["device"] == flag
    assert summary["peak_memory_mb"] == 3.0
    cuda = torch.device("cuda", 0)
    assert fake_cuda.calls[:3] == [
        ("set_device", 0), ("use_deterministic_algorithms", True), ("reset_peak_memory_stats", cuda),
    ]
    assert fake_cuda.calls[-1] == ("max_memory_allocated", cuda)
    # Only what training uses goes to the device: the erased features, the model, the
    # graph, the labels and the three splits' indices (not the unerased features, not the masks).
    assert sorted(name for name, _ in fake_cuda.moved) == sorted(
        ["Tensor", "DeepGAT", "DGLGraph", "Tensor", "Tensor", "Tensor", "Tensor"]
    )


def test_train_setup_moves_the_erased_features_and_index_splits(tmp_path, fake_cuda):
    from lipnorm.train import TrainConfig
    from lipnorm.train.trainer import prepare

    config = TrainConfig(
        dataset="csbm", csbm=TINY_CSBM, depth=1, heads=1, hidden=2, epochs=1, missing_rate=100,
        data_root=str(tmp_path), device="cuda",
    ).resolved()
    setup = prepare(config)
    assert setup.device == torch.device("cuda", 0)
    erased = ~setup.dataset.train_mask  # at 100 %: every node outside the training set
    assert setup.erased == int(erased.sum()) and not setup.features[erased].any()
    assert setup.dataset.features[erased].any()  # the unerased matrix, which stays behind
    for index, mask in zip(setup.splits, (setup.dataset.train_mask, setup.dataset.val_mask, setup.dataset.test_mask)):
        assert index.dtype == torch.long and torch.equal(index, torch.nonzero(mask).squeeze(1))


# --- lipnorm bench on CUDA ---------------------------------------------------------


def test_timed_regions_are_synchronised_on_both_sides(fake_cuda, monkeypatch):
    cuda = torch.device("cuda", 0)
    order = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda dev=None: order.append(("sync", dev)))
    measure.timed(lambda: order.append("step"), cuda)
    assert order == [("sync", cuda), "step", ("sync", cuda)]
    order.clear()
    plan = bench.QUICK
    steps = {"a": lambda: order.append("a"), "b": lambda: order.append("b")}
    list(bench.interleaved_rounds(steps, plan, rounds=2, device=cuda))
    timed = order[2 * plan.warmup_rounds:]  # warm-up steps are not timed
    assert timed == [("sync", cuda), "a", ("sync", cuda), ("sync", cuda), "b", ("sync", cuda)] + [
        ("sync", cuda), "b", ("sync", cuda), ("sync", cuda), "a", ("sync", cuda)
    ]


def test_each_implementations_gpu_peak_is_measured_with_it_alone(fake_cuda, monkeypatch):
    """peak_cuda_mb: a fresh model per implementation with every other model and the GEMM
    floor's operands freed, the cache released, the peak reset, a synchronised step."""
    cuda = torch.device("cuda", 0)
    graph = bench.load_graph("csbm-2000", "unused", None)
    case = bench.Case("gat", "csbm", graph.nodes, graph.edges, 1, 2, 4)
    alive_at_reading = []
    built = []  # weak references to every bench model measure_case builds
    build_bench_model = bench.build_bench_model

    def build(*args, **kwargs):
        model = build_bench_model(*args, **kwargs)
        built.append(weakref.ref(model))
        return model

    monkeypatch.setattr(measure, "build_bench_model", build)

    def max_memory_allocated(dev):
        gc.collect()
        alive_at_reading.append(sum(ref() is not None for ref in built))
        fake_cuda.calls.append(("max_memory_allocated", dev))
        return 5 * 2**20

    monkeypatch.setattr(torch.cuda, "max_memory_allocated", max_memory_allocated)
    plan = bench.QUICK
    names = ("gat", "gat-lip")
    rows = bench.measure_case(case, graph, plan, lambda message: None, names, device=cuda)
    peaks = {row["implementation"]: row["value"] for row in rows if row["metric"] == "peak_cuda_mb"}
    assert peaks == {"gat": 5.0, "gat-lip": 5.0}
    assert alive_at_reading == [1, 1]
    calls = fake_cuda.names()
    # Before each reading: release, synchronise, reset, (the step), synchronise.
    for end in [i for i, name in enumerate(calls) if name == "max_memory_allocated"]:
        assert calls[end - 4 : end] == ["empty_cache", "synchronize", "reset_peak_memory_stats", "synchronize"]
    # Every timed step (the floor's too) is synchronised before and after; each peak
    # reading adds two.
    timed_steps = sum(row["metric"] in ("step_seconds", "floor_seconds") for row in rows)
    assert timed_steps >= plan.min_rounds * (len(names) + 1)
    assert calls.count("synchronize") == 2 * timed_steps + 2 * len(names)


def test_the_gpu_skips_cases_by_its_own_budget():
    plan = bench.FULL
    assert plan.budget_gflop(torch.device("cpu")) == plan.step_budget_gflop == 60.0
    assert plan.budget_gflop(torch.device("cuda", 0)) == plan.cuda_step_budget_gflop
    largest = bench.estimated_step_gflop(100_000, 1_000_000, 32, 30, 8, 64, "gt")
    assert plan.step_budget_gflop < largest < plan.cuda_step_budget_gflop


def test_summary_names_the_profiles_clock_and_the_gpu_memory_column(tmp_path):
    frame = pd_frame_with_memory()
    ops = pd.DataFrame({"op": ["aten::mm"], "calls_gat": [1], "calls_gat_lip": [1], "ms_gat": [1.0],
                              "ms_gat_lip": [1.5], "extra_ms": [0.5]})
    for device_type, clock in (("cpu", "self CPU ms per step"), ("cuda", "self GPU kernel ms per step")):
        path = tmp_path / f"{device_type}.md"
        bench.write_summary(frame, ops, [], "- env", path, device_type)
        text = path.read_text()
        assert clock in text
        assert "peak_cuda_mb: the most torch's tensors occupied on the GPU" in text


def pd_frame_with_memory():
    case = bench.Case("gat", "csbm", 10, 100, 2, 8, 8)
    rows = []
    for impl in ("gat", "gat-lip"):
        rows += measurement_rows(case, impl, "step_seconds", [(0, 0.1), (1, 0.1)])
        rows += measurement_rows(case, impl, "peak_cuda_mb", [(None, 5.0)])
    return pd.DataFrame(rows, columns=bench.COLUMNS)


# --- no host synchronisation in a training step or an evaluation -----------------


class SyncRecorder:
    """Records the tensor calls that make the host wait for a GPU: reading a value
    (`item`, `tolist`, `cpu`, `numpy`, `bool`/`int`/`float` of a tensor), `nonzero`, and
    selection by a boolean mask (its size depends on the data)."""

    READS = ("item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__float__", "nonzero", "masked_select")

    def __init__(self, monkeypatch, ignore=()):
        self.calls: list[str] = []
        self.active = False
        self.ignore = {id(tensor) for tensor in ignore}
        for name in self.READS:
            monkeypatch.setattr(torch.Tensor, name, self._wrap(name, getattr(torch.Tensor, name)))
        for name in ("nonzero", "masked_select"):
            monkeypatch.setattr(torch, name, self._wrap(f"torch.{name}", getattr(torch, name)))
        getitem = torch.Tensor.__getitem__

        def indexed(tensor, index):
            parts = index if isinstance(index, tuple) else (index,)
            if self.active and any(isinstance(p, torch.Tensor) and p.dtype == torch.bool for p in parts):
                self.calls.append("boolean-mask indexing")
            return getitem(tensor, index)

        monkeypatch.setattr(torch.Tensor, "__getitem__", indexed)

    def _wrap(self, name, method):
        def recorded(tensor, *args, **kwargs):
            if self.active and id(tensor) not in self.ignore:
                self.calls.append(name)
            return method(tensor, *args, **kwargs)

        return recorded


def recorded_epoch(monkeypatch, trainer) -> tuple[SyncRecorder, object, torch.Tensor]:
    """A training step and an evaluation with layer statistics, their synchronising calls
    recorded: `(recorder, step, evaluation)`."""
    # Adam keeps its step counters on the host (not `capturable`), on a GPU too: reading
    # them waits for nothing.
    counters = [state["step"] for state in trainer.optimizer.state.values()]
    recorder = SyncRecorder(monkeypatch, ignore=counters)
    recorder.active = True
    step = trainer.train_step()
    evaluation = trainer.evaluate(layer_stats=True)
    recorder.active = False
    return recorder, step, evaluation


@pytest.mark.parametrize("model", ["gat-lip", "gat-pairnorm", "gt-lip", "gat-classic"])
def test_a_training_step_and_an_evaluation_make_no_synchronising_call(tmp_path, monkeypatch, model):
    from lipnorm.train import TrainConfig
    from lipnorm.train.trainer import Trainer, gather, prepare

    config = TrainConfig(
        dataset="csbm", csbm=TINY_CSBM, model=model, depth=2, heads=2, hidden=4, epochs=1, data_root=str(tmp_path),
    ).resolved()
    setup = prepare(config)
    trainer = Trainer(setup, config)
    trainer.train_step()  # Adam's state now exists
    trainer.evaluate(layer_stats=True)
    trainer.layer_stats.rows(1)
    recorder, step, evaluation = recorded_epoch(monkeypatch, trainer)
    assert recorder.calls == []
    # The epoch's one synchronisation, outside them, and what it gives.
    recorder.active = True
    epoch = gather(step, evaluation)
    recorder.active = False
    assert recorder.calls == ["tolist"]
    assert len(epoch.grad_norms) == len(trainer.gradient_norms.keys) and epoch.finite
    assert len(epoch.output_norms) == len(trainer.output_norms.layers)
    trainer.layer_stats.captured.clear()


def test_cluster_batch_steps_make_no_synchronising_call_once_their_graphs_are_built(tmp_path, monkeypatch):
    """With cluster batches, only building a batch (on the host, then copied) and the
    layers' zero-in-degree check of a new graph (once per graph) may wait: here the
    same batches' graphs, checked by a first epoch, are trained on again."""
    from lipnorm.train import TrainConfig
    from lipnorm.train.trainer import Trainer, gather, prepare

    config = TrainConfig(
        dataset="csbm", csbm=TINY_CSBM, model="gat-lip-pairnorm", depth=2, heads=2, hidden=4, epochs=1,
        data_root=str(tmp_path), batching="cluster", partitions=6, batch_partitions=2,
    ).resolved()
    trainer = Trainer(prepare(config), config)
    batches = list(trainer.batches.epoch())  # built before recording
    monkeypatch.setattr(trainer.batches, "epoch", lambda: iter(batches))
    trainer.train_step()
    trainer.evaluate()  # the whole graph's check
    recorder, step, evaluation = recorded_epoch(monkeypatch, trainer)
    assert recorder.calls == []
    assert gather(step, evaluation).finite and len(batches) == 3
    trainer.layer_stats.captured.clear()


def test_the_recorder_sees_the_synchronising_calls(monkeypatch):
    """The recorder above fails where the training code used to synchronise."""
    recorder = SyncRecorder(monkeypatch)
    recorder.active = True
    x, mask = torch.arange(4.0), torch.tensor([True, False, True, False])
    x[mask], x.sum().item(), int((x == 0).sum()), x.tolist(), x.nonzero()
    assert recorder.calls == ["boolean-mask indexing", "item", "__int__", "tolist", "nonzero"]


@pytest.mark.skipif(device.cuda_problem() is not None, reason="needs a CUDA GPU and DGL's CUDA build")
def test_on_a_real_gpu_a_step_and_an_evaluation_do_not_synchronise(tmp_path):
    """Where a GPU exists, torch itself raises on every synchronising call (the recorder
    above shows the same on the CPU, where this test cannot run)."""
    from lipnorm.train import TrainConfig
    from lipnorm.train.trainer import Trainer, gather, prepare

    config = TrainConfig(
        dataset="csbm", csbm=TINY_CSBM, model="gat-lip", depth=2, heads=2, hidden=4, epochs=1,
        data_root=str(tmp_path), device="cuda",
    ).resolved()
    setup = prepare(config)
    trainer = Trainer(setup, config)
    trainer.train_step()
    trainer.evaluate()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        step, evaluation = trainer.train_step(), trainer.evaluate()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert gather(step, evaluation).finite
