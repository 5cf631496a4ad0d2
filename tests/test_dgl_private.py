"""Each of DGL's private APIs lipnorm uses (`lipnorm.dgl_private`) against DGL's public
behaviour, and a missing one named in the error: a DGL upgrade that changes one fails here."""

from __future__ import annotations

import dgl
import dgl.backend.pytorch.sparse
import dgl.data.citation_graph
import numpy as np
import pytest
import scipy.sparse as sp
import torch
from dgl.nn.functional import edge_softmax

from lipnorm.dgl_private import (
    DGLPrivateAPIError,
    citation_features_replaced,
    graph_structure,
    gsddmm,
    gspmm,
    has_device_api,
    reverse_structure,
    twice_differentiable_edge_softmax,
)


def small_graph() -> dgl.DGLGraph:
    """Six nodes, every node with an in-edge, edge IDs not in destination order."""
    src = torch.tensor([1, 2, 0, 3, 4, 5, 0, 2, 5, 1])
    dst = torch.tensor([0, 0, 1, 2, 3, 4, 5, 5, 3, 2])
    return dgl.graph((src, dst), num_nodes=6)


def randn(*shape: int, grad: bool = False) -> torch.Tensor:
    return torch.randn(*shape, dtype=torch.float64, requires_grad=grad)


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(0)


def test_graph_structure_is_one_object_until_the_graph_changes_in_place():
    graph = small_graph()
    structure = graph_structure(graph)
    assert graph_structure(graph) is structure
    assert graph_structure(graph.local_var()) is structure  # a view shares it
    graph.add_edges(torch.tensor([3]), torch.tensor([1]))
    assert graph_structure(graph) is not structure


def test_gspmm_is_u_mul_e_sum_and_differentiable_twice():
    graph = small_graph()
    x, weights = randn(6, 2, 3, grad=True), randn(10, 2, 1, grad=True)
    structure = graph_structure(graph)
    torch.testing.assert_close(gspmm(structure, "mul", "sum", x, weights),
                               dgl.ops.u_mul_e_sum(graph, x, weights))
    torch.testing.assert_close(gspmm(structure, "copy_rhs", "sum", None, weights),
                               dgl.ops.copy_e_sum(graph, weights))
    assert torch.autograd.gradgradcheck(lambda a, w: gspmm(structure, "mul", "sum", a, w), (x, weights))


def test_reverse_structure_is_the_reversed_graph():
    graph = small_graph()
    x, weights = randn(6, 2, 3), randn(10, 2, 1)
    reversed_structure = reverse_structure(graph_structure(graph))
    torch.testing.assert_close(gspmm(reversed_structure, "mul", "sum", x, weights),
                               dgl.ops.u_mul_e_sum(dgl.reverse(graph), x, weights))


def test_gsddmm_is_u_dot_v_and_e_mul_v_and_differentiable_twice():
    graph = small_graph()
    x, y = randn(6, 2, 3, grad=True), randn(6, 2, 3, grad=True)
    structure = graph_structure(graph)
    torch.testing.assert_close(gsddmm(structure, "dot", x, y), dgl.ops.u_dot_v(graph, x, y))
    edges, nodes = randn(10, 2, 1), randn(6, 2, 1)
    torch.testing.assert_close(gsddmm(structure, "mul", edges, nodes, "e", "v"),
                               dgl.ops.e_mul_v(graph, edges, nodes))
    assert torch.autograd.gradgradcheck(lambda a, b: gsddmm(structure, "dot", a, b), (x, y))


def dense_edge_softmax(graph: dgl.DGLGraph, scores: torch.Tensor) -> torch.Tensor:
    """Per destination node, the softmax of its in-edges' scores (an independent reference)."""
    _, dst = graph.edges()
    out = torch.empty_like(scores)
    for node in dst.unique():
        edges = (dst == node).nonzero().flatten()
        out[edges] = torch.softmax(scores[edges], dim=0)
    return out


def test_twice_differentiable_edge_softmax_keeps_the_values_and_is_restored():
    graph = small_graph()
    scores = randn(10, 2, 1, grad=True)
    original = dgl.backend.pytorch.sparse.EdgeSoftmax
    with twice_differentiable_edge_softmax():
        assert dgl.backend.pytorch.sparse.EdgeSoftmax is not original
        torch.testing.assert_close(edge_softmax(graph, scores), dense_edge_softmax(graph, scores))
        assert torch.autograd.gradgradcheck(lambda s: edge_softmax(graph, s), (scores,))
    assert dgl.backend.pytorch.sparse.EdgeSoftmax is original
    # DGL's own backward is not differentiable: the context is what the probe needs.
    (grad,) = torch.autograd.grad(edge_softmax(graph, scores).pow(3).sum(), scores, create_graph=True)
    assert not grad.requires_grad


def test_device_apis_are_looked_up_as_dgls_runtime_does():
    assert has_device_api("cpu") is True
    assert has_device_api("no-such-device") is False


def test_citation_features_replaced_swaps_dgls_feature_processing_and_restores_it():
    rows = sp.csr_matrix(np.array([[1.0, 3.0, 0.0], [0.0, 0.0, 2.0], [0.0, 0.0, 0.0]]))
    original = dgl.data.citation_graph._preprocess_features
    # What is replaced: DGL's row normalisation, then dense (an all-zero row stays zero).
    np.testing.assert_allclose(np.asarray(original(rows)),
                               [[0.25, 0.75, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])

    def dense(features):
        return np.asarray(features.todense())

    with citation_features_replaced(dense):
        assert dgl.data.citation_graph._preprocess_features is dense
    assert dgl.data.citation_graph._preprocess_features is original


def test_a_missing_private_api_is_named(monkeypatch):
    class NotADGLGraph:
        pass

    with pytest.raises(DGLPrivateAPIError, match=r"has no DGLGraph\._graph .*lipnorm\.dgl_private"):
        graph_structure(NotADGLGraph())
    with pytest.raises(DGLPrivateAPIError, match=r"has no NotADGLGraph\.reverse"):
        reverse_structure(NotADGLGraph())
    structure = graph_structure(small_graph())
    for name in ("gspmm", "gsddmm", "EdgeSoftmax"):
        monkeypatch.delattr(dgl.backend.pytorch.sparse, name)
    with pytest.raises(DGLPrivateAPIError, match=r"has no dgl\.backend\.pytorch\.sparse\.gspmm"):
        gspmm(structure, "copy_rhs", "sum", None, randn(10, 1))
    with pytest.raises(DGLPrivateAPIError, match=r"has no dgl\.backend\.pytorch\.sparse\.gsddmm"):
        gsddmm(structure, "dot", randn(6, 1), randn(6, 1))
    with pytest.raises(DGLPrivateAPIError, match=r"has no dgl\.backend\.pytorch\.sparse\.EdgeSoftmax"):
        with twice_differentiable_edge_softmax():
            pass
    monkeypatch.delattr(dgl._ffi.function, "get_global_func")
    with pytest.raises(DGLPrivateAPIError, match=r"has no dgl\._ffi\.function\.get_global_func"):
        has_device_api("cpu")
    monkeypatch.delattr(dgl.data.citation_graph, "_preprocess_features")
    with pytest.raises(DGLPrivateAPIError,
                       match=r"has no dgl\.data\.citation_graph\._preprocess_features"):
        with citation_features_replaced(np.asarray):
            pass


@pytest.mark.parametrize("norm", ["none", "lip"])
@pytest.mark.parametrize("layer_class", ["gat-dgl", "gt"])
def test_the_dgl_paths_gradgradcheck(layer_class, norm):
    """GATConv without the kernel and GTConv: DGL's edge softmax with a backward that is
    differentiable again (`lipnorm.dgl_private.edge_softmax`)."""
    from lipnorm.nn import GATConv, GTConv

    torch.manual_seed(3)
    graph = dgl.add_self_loop(dgl.remove_self_loop(dgl.rand_graph(9, 24)))
    torch.manual_seed(5)
    layer = (GATConv(4, 3, 2, norm=norm, alpha=0.7) if layer_class == "gat-dgl" else GTConv(4, 3, 2, norm=norm)).double()
    feat = torch.randn(graph.num_nodes(), 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda feat: layer(graph, feat), (feat,))


def test_the_edge_softmaxs_first_order_gradient_is_dgls_bit_for_bit():
    from dgl.nn.functional import edge_softmax as dgl_edge_softmax

    from lipnorm.dgl_private import edge_softmax

    torch.manual_seed(3)
    graph = dgl.add_self_loop(dgl.remove_self_loop(dgl.rand_graph(30, 120)))
    scores = torch.randn(graph.num_edges(), 3, 1, requires_grad=True)
    upstream = torch.randn(graph.num_edges(), 3, 1)
    ours, theirs = edge_softmax(graph, scores), dgl_edge_softmax(graph, scores)
    assert torch.equal(ours, theirs)
    assert torch.equal(*(torch.autograd.grad(out, scores, upstream)[0] for out in (ours, theirs)))
