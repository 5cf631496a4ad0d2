"""lipnorm.pyg's layers on CUDA tensors, on a machine without a GPU: the faked-CUDA
approach of tests/train/test_gpu_path.py (its `fake_cuda` fixture and `SyncRecorder`).

A layer runs on CUDA tensors when it makes every tensor where its inputs are (a factory
call without ``device=`` lands on the default device, the CPU, and the next op mixing it
with a CUDA tensor raises) and calls no CUDA entry point itself. Here, with torch's CUDA
entry points replaced by recording fakes, the default device is set to "meta", a device
neither the inputs nor the parameters are on: any tensor a layer makes without following
its inputs then fails the same way, on the CPU. The lip path's host synchronisations (a
CUDA tensor's value read on the host, a size that depends on data) are checked to be
exactly PyG's own, so that norm="lip" adds no GPU stall. Where a GPU exists, the last
test runs the layers on it and compares with the CPU.

What this cannot show without a GPU: that the CUDA kernels of the ops used (scatter
max, index_select, softmax) run, and their speed.
"""

from __future__ import annotations

import pytest
import torch

import lipnorm.pyg
from lipnorm.pyg import GATConv, TransformerConv
from tests.train.test_gpu_path import SyncRecorder, fake_cuda  # noqa: F401  (fixture)

LAYERS = {"gat": GATConv, "transformer": TransformerConv}
NORMS = [None, "lip"]


def default_device(name: str) -> torch.device:
    """Factory calls without ``device=`` make tensors on `name` inside ``with`` (torch's
    device context: on leaving, no default-device mode is left behind)."""
    return torch.device(name)


def graph(seed: int = 0):
    """``(x, edge_index, edge_attr)``: 6 nodes, 7 edges (one self-loop), 3 edge features."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(6, 5, generator=generator)
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 5, 1], [1, 2, 3, 4, 5, 0, 1]])
    return x, edge_index, torch.randn(7, 3, generator=generator)


def step(layer, x, edge_index, edge_attr=None, **options):
    """A forward with the attention weights and a backward; everything the layer returns."""
    out, (attended, attention) = layer(x, edge_index, edge_attr, return_attention_weights=True, **options)
    (out.square().sum() + attention.sum()).backward()
    return [out, attended, attention] + [p.grad for p in layer.parameters()]


def cases(kind: str, norm):
    """``(name, layer, args)`` of the forms a layer takes: plain, edge features, bipartite."""
    cls = LAYERS[kind]
    x, edge_index, edge_attr = graph()
    torch.manual_seed(0)
    yield "plain", cls(5, 4, heads=2, norm=norm), (x, edge_index)
    yield "edge features", cls(5, 4, heads=2, edge_dim=3, norm=norm), (x, edge_index, edge_attr)
    x_dst = torch.randn(4, 3)
    bipartite = torch.tensor([[0, 1, 2, 5, 4], [0, 1, 1, 2, 3]])
    extra = {"add_self_loops": False} if kind == "gat" else {}
    yield "bipartite", cls((5, 3), 4, heads=2, norm=norm, **extra), ((x, x_dst), bipartite)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_layers_make_every_tensor_on_their_inputs_device(fake_cuda, kind, norm):
    for name, layer, args in cases(kind, norm):
        with default_device("meta"):
            results = step(layer, *args)
            scores = layer.normalized_scores(*args)
        assert {t.device.type for t in results + [scores]} == {"cpu"}, name
        assert all(torch.isfinite(t).all() for t in results + [scores]), name
    # The layers call no CUDA entry point themselves (device handling is the caller's).
    assert fake_cuda.calls == [] and fake_cuda.moved == []


@pytest.mark.parametrize("norm", NORMS)
def test_gat_on_a_sparse_adjacency_makes_every_tensor_on_its_inputs_device(fake_cuda, norm):
    from torch_geometric.utils import to_torch_csc_tensor

    x, edge_index, _ = graph()
    torch.manual_seed(0)
    layer = GATConv(5, 4, heads=2, norm=norm)
    adjacency = to_torch_csc_tensor(edge_index, size=(6, 6)).t()
    with default_device("meta"):
        out = layer(x, adjacency)
        out.sum().backward()
    assert out.device.type == "cpu" and torch.isfinite(out).all()


def test_the_check_sees_a_tensor_made_on_the_default_device(monkeypatch):
    """The check above fails where a layer makes a tensor without its inputs' device."""
    monkeypatch.setattr(lipnorm.pyg, "scaled", lambda scores, alpha: scores * torch.tensor(alpha))
    x, edge_index, _ = graph()
    layer = GATConv(5, 4, heads=2, norm="lip", alpha=2.0)
    with default_device("meta"), pytest.raises(RuntimeError, match="device"):
        layer(x, edge_index)
    layer(x, edge_index)  # on the CPU alone it runs


def synchronising_calls(monkeypatch, layer, args) -> list[str]:
    recorder = SyncRecorder(monkeypatch)
    recorder.active = True
    step(layer, *args)
    recorder.active = False
    return recorder.calls


@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_lip_adds_no_host_synchronisation_to_pyg_layers(monkeypatch, kind):
    """norm="lip" waits for the GPU exactly where PyG's layer does (GAT: PyG's
    `remove_self_loops` selects edges by a boolean mask; Transformer: nowhere)."""
    for (name, plain, args), (_, lip, _) in zip(cases(kind, None), cases(kind, "lip")):
        with monkeypatch.context() as patch:
            expected = synchronising_calls(patch, plain, args)
        with monkeypatch.context() as patch:
            assert synchronising_calls(patch, lip, args) == expected, name
    if kind == "transformer":
        assert expected == []


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_on_a_real_gpu_the_layers_give_the_cpus_numbers(kind, norm):
    cuda = torch.device("cuda", torch.cuda.current_device())
    for name, layer, args in cases(kind, norm):
        expected = step(layer, *args)
        layer.zero_grad()
        moved = [tuple(t.to(cuda) for t in arg) if isinstance(arg, tuple) else arg.to(cuda) for arg in args]
        got = step(layer.to(cuda), *moved)
        for g, e in zip(got, expected):
            assert g.device == cuda, name
            torch.testing.assert_close(g.cpu(), e, rtol=1e-5, atol=1e-5)
