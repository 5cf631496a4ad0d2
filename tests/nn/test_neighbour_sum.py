"""neighbour_weighted_sum: DGL's u_mul_e + sum message passing, bit for bit, and its errors.

Bit for bit where MKL's sparse product (what `torch.sparse.mm` runs on the CPU) sums each
row's terms in order: under MKL's conditional numerical reproducibility
(`MKL_CBWR=COMPATIBLE`), and by default on some CPUs. On others (AVX-512 Xeons, seen here)
its vectorised kernel sums them in another order, and the results differ from DGL's by
float32 rounding. The comparisons below are exact under MKL_CBWR=COMPATIBLE and to 1e-6
otherwise; `test_bit_for_bit_in_mkls_compatible_mode` reruns them in that mode.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import dgl
import dgl.function as fn
import pytest
import torch

import lipnorm.nn.neighbour_sum
from lipnorm.nn.neighbour_sum import BLOCK_MIN_FEATURES, neighbour_weighted_sum

# Set before MKL loads (in the environment of the process), as MKL reads it once.
MKL_IN_ORDER = os.environ.get("MKL_CBWR", "").upper().startswith("COMPATIBLE")


def assert_as_dgl(ours: torch.Tensor, expected: torch.Tensor) -> None:
    """Equal bit for bit where MKL sums in order (see the module docstring), else to
    float32 rounding."""
    if MKL_IN_ORDER:
        assert torch.equal(ours, expected)
    else:
        torch.testing.assert_close(ours, expected, rtol=1e-6, atol=1e-6)


def reference(graph: dgl.DGLGraph, x: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """What GATConv writes with DGL's builtins."""
    with graph.local_scope():
        graph.srcdata["x"] = x
        graph.edata["a"] = weights
        graph.update_all(fn.u_mul_e("x", "a", "m"), fn.sum("m", "out"))
        return graph.dstdata["out"]


def random_graph() -> dgl.DGLGraph:
    """Duplicate edges, self-loops and nodes without in-edges (isolated 10-11)."""
    generator = torch.Generator().manual_seed(0)
    src = torch.randint(0, 10, (40,), generator=generator)
    dst = torch.randint(0, 10, (40,), generator=generator)
    return dgl.graph((src, dst), num_nodes=12)


def shuffled_edge_ids() -> dgl.DGLGraph:
    """Edge IDs in no order of source or destination."""
    generator = torch.Generator().manual_seed(1)
    graph = dgl.add_self_loop(dgl.rand_graph(15, 50))
    order = torch.randperm(graph.num_edges(), generator=generator)
    src, dst = graph.edges()
    return dgl.graph((src[order], dst[order]), num_nodes=15)


def bipartite() -> dgl.DGLGraph:
    return dgl.heterograph({("user", "rates", "item"): ([0, 1, 2, 2, 3, 0], [1, 1, 0, 3, 2, 4])}, {"user": 4, "item": 6})


def block() -> dgl.DGLGraph:
    graph = dgl.add_self_loop(dgl.rand_graph(20, 60))
    seeds = torch.arange(6)
    return dgl.to_block(dgl.in_subgraph(graph, seeds), seeds)


def no_edges() -> dgl.DGLGraph:
    return dgl.graph(([], []), num_nodes=5)


GRAPHS = {"random": random_graph, "shuffled": shuffled_edge_ids, "bipartite": bipartite, "block": block, "no-edges": no_edges}


def inputs(graph: dgl.DGLGraph, heads: int, dim: int, dtype=torch.float32):
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(graph.num_src_nodes(), heads, dim, generator=generator, dtype=dtype, requires_grad=True)
    weights = torch.rand(graph.num_edges(), heads, 1, generator=generator, dtype=dtype, requires_grad=True)
    return x, weights


@pytest.mark.parametrize("graph_name", GRAPHS)
@pytest.mark.parametrize("heads", [1, 3, 8])
@pytest.mark.parametrize("dim", [1, 5, 64])
def test_equals_dgl_update_all(graph_name, heads, dim):
    graph = GRAPHS[graph_name]()
    x, weights = inputs(graph, heads, dim)
    out = neighbour_weighted_sum(graph, x, weights)
    expected = reference(graph, x, weights)
    assert out.shape == (graph.num_dst_nodes(), heads, dim)
    # Same summation order as DGL's kernel: the same bits, forward and d/dx.
    assert_as_dgl(out, expected)
    grad_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(3))
    grad_x, grad_weights = torch.autograd.grad(out, (x, weights), grad_out)
    expected_x, expected_weights = torch.autograd.grad(expected, (x, weights), grad_out)
    assert_as_dgl(grad_x, expected_x)
    # d/dweights sums each D-term dot product in its own order: equal to float32
    # rounding of a sum of D products of size ~1 (D = 64: 2.6e-6 seen).
    torch.testing.assert_close(grad_weights, expected_weights, rtol=1e-5, atol=1e-5)


def test_nodes_without_in_edges_get_zero_and_send_no_gradient():
    graph = random_graph()
    x, weights = inputs(graph, 2, 3)
    out = neighbour_weighted_sum(graph, x, weights)
    assert torch.equal(out[10:], torch.zeros(2, 2, 3))
    (grad_x,) = torch.autograd.grad(out.sum(), x)
    # Nodes 10 and 11 have no out-edges either: nothing depends on their features.
    assert torch.equal(grad_x[10:], torch.zeros(2, 2, 3))


def test_passes_gradcheck_in_float64():
    graph = shuffled_edge_ids()
    x, weights = inputs(graph, 3, 4, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda x, w: neighbour_weighted_sum(graph, x, w), (x, weights))


def test_gradients_are_differentiable_again_in_float64():
    # Double backward (create_graph=True), as the Lipschitz probe uses.
    graph = shuffled_edge_ids()
    x, weights = inputs(graph, 3, 4, dtype=torch.float64)
    assert torch.autograd.gradgradcheck(lambda x, w: neighbour_weighted_sum(graph, x, w), (x, weights))


def test_double_backward_equals_dgl_update_all():
    graph = random_graph()
    x, weights = inputs(graph, 2, 3)
    vector = torch.randn(x.shape, generator=torch.Generator().manual_seed(4))

    def hessian_vector(function):
        (grad_x,) = torch.autograd.grad(function(graph, x, weights).pow(2).sum(), x, create_graph=True)
        return torch.autograd.grad((grad_x * vector).sum(), (x, weights))

    for ours, expected in zip(hessian_vector(neighbour_weighted_sum), hessian_vector(reference)):
        assert_as_dgl(ours, expected)


def test_jacobian_vector_products_by_double_backward_equal_dgl():
    """The Lipschitz probe's J v = d/du <J^T u, v>, with weights that depend on x too
    (as attention does): both gradients must be the partial derivatives only."""
    graph = random_graph()
    x, weights = inputs(graph, 2, 3, dtype=torch.float64)
    vector = torch.randn(x.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)

    def jacobian_vector(function):
        out = function(graph, x, weights * x.sum())
        u = torch.zeros_like(out, requires_grad=True)
        (jt_u,) = torch.autograd.grad(out, x, u, create_graph=True)
        return torch.autograd.grad(jt_u, u, vector)[0]

    torch.testing.assert_close(jacobian_vector(neighbour_weighted_sum), jacobian_vector(reference), rtol=1e-12, atol=1e-12)


def test_a_graph_changed_in_place_is_summed_over_its_new_edges():
    graph = random_graph()
    x, weights = inputs(graph, 2, 3)
    neighbour_weighted_sum(graph, x, weights)  # caches the graph's layout
    graph.add_edges(torch.tensor([0, 11]), torch.tensor([10, 10]))
    x, weights = inputs(graph, 2, 3)
    out = neighbour_weighted_sum(graph, x, weights)
    assert_as_dgl(out, reference(graph, x, weights))
    assert out[10].abs().sum() > 0  # node 10 now has in-edges


@pytest.mark.parametrize(
    "graph_name, dim, csr",
    [
        ("block", BLOCK_MIN_FEATURES - 1, False),
        ("block", BLOCK_MIN_FEATURES, True),
        ("bipartite", 1, True),
        ("random", 1, True),
    ],
)
def test_only_blocks_with_few_features_per_head_take_dgls_kernel(monkeypatch, graph_name, dim, csr):
    """A new block's layouts cost more than they save below BLOCK_MIN_FEATURES."""
    graph = GRAPHS[graph_name]()
    x, weights = inputs(graph, 2, dim)
    built = []
    build = lipnorm.nn.neighbour_sum._head_interleaved
    monkeypatch.setattr(lipnorm.nn.neighbour_sum, "_head_interleaved", lambda *args: built.append(args) or build(*args))
    out = neighbour_weighted_sum(graph, x, weights)
    out.sum().backward()
    assert len(built) == (2 if csr else 0)  # forward and backward layouts
    torch.testing.assert_close(out, reference(graph, x, weights))


def test_gradients_only_for_the_inputs_that_need_them():
    graph = random_graph()
    x, weights = inputs(graph, 2, 3)
    (grad_weights,) = torch.autograd.grad(neighbour_weighted_sum(graph, x.detach(), weights).sum(), weights)
    torch.testing.assert_close(grad_weights, torch.autograd.grad(reference(graph, x.detach(), weights).sum(), weights)[0])
    with torch.no_grad():
        assert not neighbour_weighted_sum(graph, x, weights).requires_grad


@pytest.mark.parametrize(
    "x_shape, weights_shape, dtype, message",
    [
        ((12, 2), (40, 2, 1), torch.float32, "x has shape (12, 2); expected (num_src_nodes, H, D) with num_src_nodes = 12"),
        ((11, 2, 3), (40, 2, 1), torch.float32, "x has shape (11, 2, 3); expected (num_src_nodes, H, D) with num_src_nodes = 12"),
        ((12, 2, 3), (40, 2), torch.float32, "weights has shape (40, 2); expected (E, H, 1) = (40, 2, 1)"),
        ((12, 2, 3), (40, 3, 1), torch.float32, "weights has shape (40, 3, 1); expected (E, H, 1) = (40, 2, 1)"),
        ((12, 2, 3), (40, 2, 1), torch.float64, "weights are torch.float64 and x is torch.float32"),
    ],
)
def test_bad_shapes_and_dtypes_raise_naming_them(x_shape, weights_shape, dtype, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        neighbour_weighted_sum(random_graph(), torch.zeros(x_shape), torch.zeros(weights_shape, dtype=dtype))


@pytest.mark.slow
def test_bit_for_bit_in_mkls_compatible_mode():
    """This file's comparisons with DGL, rerun where MKL sums in order: all exact."""
    env = {**os.environ, "MKL_CBWR": "COMPATIBLE"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", __file__, "-q", "-p", "no:cacheprovider", "-k", "equals_dgl or changed_in_place"],
        env=env, capture_output=True, text=True,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"\b\d+ passed\b", done.stdout) and " failed" not in done.stdout
