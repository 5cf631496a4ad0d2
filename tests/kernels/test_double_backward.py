"""Double backward through the compiled kernels: a kernel's gradient differentiated again
(create_graph=True) goes through its torch form, so the public layers and normalisations
pass `gradgradcheck` on the CPU with the kernels running (checked: they ran)."""

from __future__ import annotations

import dgl
import pytest
import torch

from lipnorm import kernels
from lipnorm.kernels import dispatch
from lipnorm.nn import GATConv, PairNorm
from lipnorm.nn.norm.dgn import DiffGroupNorm


@pytest.fixture(autouse=True)
def kernels_run():
    """Each test checks, after its checks, that the kernel it is about ran."""
    assert kernels.unavailable() is None, "the suite's machines build the kernels"
    dispatch.reset(paths_only=True)
    yield
    assert all(paths == ["compiled"] for paths in kernels.record()["paths"].values()), kernels.record()["paths"]


def graph_with_self_loops(nodes: int = 9, edges: int = 24) -> dgl.DGLGraph:
    torch.manual_seed(3)
    return dgl.add_self_loop(dgl.remove_self_loop(dgl.rand_graph(nodes, edges)))


@pytest.mark.parametrize("norm", ["none", "lip"])
@pytest.mark.parametrize("heads", [1, 2])
def test_gatconv_gradgradcheck(norm, heads):
    graph = graph_with_self_loops()
    layer = GATConv(4, 3, heads, norm=norm, alpha=0.7, fused=True).double()
    feat = torch.randn(graph.num_nodes(), 4, dtype=torch.float64, requires_grad=True)
    names = ["fc.weight", "attn_l", "attn_r"]
    values = [layer.get_parameter(name).detach().clone().requires_grad_() for name in names]

    def forward(feat, *values):
        return torch.func.functional_call(layer, dict(zip(names, values)), (graph, feat))

    assert torch.autograd.gradgradcheck(forward, (feat, *values))
    assert kernels.record()["paths"] == {"gat_attention": ["compiled"]}


@pytest.mark.parametrize("norm", ["none", "lip"])
def test_gat_attention_gradgradcheck_with_masks_and_dropout(norm):
    graph = graph_with_self_loops(8, 20)
    ft = torch.randn(8, 4, 3, dtype=torch.float64, requires_grad=True)
    attn_l = torch.randn(1, 4, 3, dtype=torch.float64, requires_grad=True)
    attn_r = torch.randn(1, 4, 3, dtype=torch.float64, requires_grad=True)
    kept = torch.rand(graph.num_edges(), 2) < 0.7
    kept[:3] = False  # some rows may lose every in-edge
    drop = (torch.rand(graph.num_edges(), 4, 1) < 0.5).double() * 2

    def attention(ft, attn_l, attn_r):
        return kernels.gat_attention(graph, ft, attn_l, attn_r, norm=norm, alpha=0.7, kept=kept, heads_per_seed=2,
                                     drop=drop)

    assert torch.autograd.gradgradcheck(attention, (ft, attn_l, attn_r))


def test_pairnorm_gradgradcheck():
    layer = PairNorm(scale=1.3)
    x = torch.randn(10, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda x: layer(None, x), (x,))


@pytest.mark.parametrize("training", [True, False], ids=["batch-statistics", "running-statistics"])
def test_dgn_gradgradcheck(training):
    torch.manual_seed(4)
    layer = DiffGroupNorm(4, num_groups=3).double().train(training)
    with torch.no_grad():
        layer.bn.weight.uniform_(0.5, 1.5)
        layer.bn.bias.normal_()
        layer.bn.running_var.uniform_(0.5, 2.0)
    x = (torch.randn(12, 4, dtype=torch.float64) + 1).requires_grad_()
    state = {name: tensor.clone() for name, tensor in layer.state_dict().items()}

    def forward(x):  # the running statistics as at the start, for every evaluation
        return torch.func.functional_call(layer, {name: t.clone() for name, t in state.items()}, (None, x))

    assert torch.autograd.gradgradcheck(forward, (x,))


def test_grouped_linear_gradgradcheck():
    x = torch.randn(6, 2, 3, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(2, 4, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradgradcheck(kernels.grouped_linear, (x, weight))


def test_first_order_gradients_stay_the_kernels():
    """Without create_graph the kernel's own backward runs, not the torch form: the
    torch form is not called."""
    x = torch.randn(10, 1, 5, dtype=torch.float64, requires_grad=True)
    called = []
    original = kernels.reference.pairnorm
    try:
        kernels.reference.pairnorm = lambda *args: called.append(1) or original(*args)
        kernels.pairnorm(x, 1.0, 1e-6).sum().backward()
        assert not called and x.grad is not None
        (grad,) = torch.autograd.grad(kernels.pairnorm(x, 1.0, 1e-6).square().sum(), x, create_graph=True)
        grad.sum().backward()
        assert called
    finally:
        kernels.reference.pairnorm = original

