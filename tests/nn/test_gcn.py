"""GCNLayer: DGL's GraphConv, a dense D_out^-1/2 A D_in^-1/2 H W reference, heads as a reshape."""

import re

import dgl
import numpy as np
import pytest
import torch
from dgl.nn import GraphConv

from lipnorm.nn.conv.base import ZeroInDegreeError
from lipnorm.nn.conv.gcn import GCNLayer

NUM_NODES = 9


def undirected_graph():
    rng = np.random.default_rng(0)
    src = rng.integers(0, NUM_NODES, size=14)
    dst = rng.integers(0, NUM_NODES, size=14)
    graph = dgl.to_bidirected(dgl.graph((torch.tensor(src), torch.tensor(dst)), num_nodes=NUM_NODES))
    return dgl.add_self_loop(dgl.remove_self_loop(graph))


def directed_graph():
    """Out- and in-degrees differ: GraphConv's "both" is D_out^-1/2 (source) and D_in^-1/2."""
    nodes = torch.arange(NUM_NODES - 1)
    leaves = torch.arange(1, NUM_NODES)
    graph = dgl.graph(
        (torch.cat([nodes, leaves]), torch.cat([nodes + 1, torch.zeros_like(leaves)])), num_nodes=NUM_NODES
    )
    return dgl.add_self_loop(dgl.remove_self_loop(graph))


GRAPHS = {"undirected": undirected_graph, "directed": directed_graph}


def features(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def randomise(module):
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator, dtype=parameter.dtype))


def dense_reference(graph, x, weight, bias):
    """sum_{j -> i} x_j W / sqrt(d_out(j) d_in(i)) + b, with a dense adjacency A[i, j]."""
    src, dst = graph.edges()
    adjacency = np.zeros((graph.num_nodes(), graph.num_nodes()))
    np.add.at(adjacency, (dst.numpy(), src.numpy()), 1.0)
    d_in, d_out = adjacency.sum(axis=1), adjacency.sum(axis=0)
    propagation = adjacency / np.sqrt(np.outer(d_in, d_out))
    out = propagation @ x @ weight
    return out if bias is None else out + bias


@pytest.mark.parametrize("graph_name", GRAPHS)
@pytest.mark.parametrize("in_feats", [4, 6])
@pytest.mark.parametrize("num_heads, out_feats", [(1, 3), (2, 3), (3, 2)])
@pytest.mark.parametrize("bias", [True, False])
def test_gcn_layer_equals_the_dense_normalised_adjacency_reference(
    graph_name, in_feats, num_heads, out_feats, bias
):
    graph, x = GRAPHS[graph_name](), features(NUM_NODES, in_feats)
    layer = GCNLayer(in_feats, out_feats, num_heads, bias=bias).double()
    randomise(layer)
    out = layer(graph, x)
    assert out.shape == (NUM_NODES, num_heads, out_feats)
    weight = layer.weight.detach().numpy()
    expected = dense_reference(graph, x.numpy(), weight, layer.bias.detach().numpy() if bias else None)
    np.testing.assert_allclose(out.detach().numpy().reshape(NUM_NODES, -1), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("graph_name", GRAPHS)
@pytest.mark.parametrize("in_feats, num_heads, out_feats", [(5, 1, 4), (5, 2, 4), (16, 8, 1)])
def test_gcn_layer_is_dgl_graphconv_under_the_same_seed(graph_name, in_feats, num_heads, out_feats):
    graph, x = GRAPHS[graph_name](), features(NUM_NODES, in_feats).float()
    torch.manual_seed(0)
    ours = GCNLayer(in_feats, out_feats, num_heads)
    torch.manual_seed(0)
    dgl_layer = GraphConv(in_feats, num_heads * out_feats, norm="both")
    assert torch.equal(ours.weight, dgl_layer.weight)  # same initialisation draws
    randomise(dgl_layer)
    ours.load_state_dict(dgl_layer.state_dict())
    assert torch.equal(ours(graph, x).reshape(NUM_NODES, -1), dgl_layer(graph, x))


@pytest.mark.parametrize("degree_norm", ["right", "left", "none"])
def test_degree_norm_is_graphconvs_norm(degree_norm):
    graph, x = directed_graph(), features(NUM_NODES, 4).float()
    ours = GCNLayer(4, 3, 2, degree_norm=degree_norm)
    dgl_layer = GraphConv(4, 6, norm=degree_norm)
    dgl_layer.load_state_dict(ours.state_dict())
    torch.testing.assert_close(ours(graph, x).reshape(NUM_NODES, -1), dgl_layer(graph, x), rtol=0, atol=0)


@pytest.mark.parametrize("graph_name", GRAPHS)
@pytest.mark.parametrize("in_feats", [5, 6], ids=["linear", "identity"])
@pytest.mark.parametrize("num_heads, out_feats", [(2, 3), (1, 6)])
def test_residual_adds_the_input_or_its_projection(graph_name, in_feats, num_heads, out_feats):
    graph, x = GRAPHS[graph_name](), features(NUM_NODES, in_feats)
    layer = GCNLayer(in_feats, out_feats, num_heads, residual=True).double()
    randomise(layer)
    weight = layer.weight.detach().numpy()
    if in_feats == num_heads * out_feats:
        assert isinstance(layer.res_fc, torch.nn.Identity)
        expected = dense_reference(graph, x.numpy(), weight, layer.bias.detach().numpy()) + x.numpy()
    else:  # DGL's layout: the linear residual carries the bias, GraphConv has none
        assert layer.bias is None
        res_fc = layer.res_fc
        skip = x.numpy() @ res_fc.weight.detach().numpy().T + res_fc.bias.detach().numpy()
        expected = dense_reference(graph, x.numpy(), weight, None) + skip
    out = layer(graph, x).detach().numpy().reshape(NUM_NODES, -1)
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)


def test_get_attention_returns_none_beside_the_output():
    graph, x = undirected_graph(), features(NUM_NODES, 4).float()
    layer = GCNLayer(4, 2, 3)
    out, attention = layer(graph, x, get_attention=True)
    assert attention is None
    assert torch.equal(out, layer(graph, x))


def test_parameters_are_graphconvs_names_and_residual_as_gatconv():
    names = [name for name, _ in GCNLayer(5, 2, 3, residual=True).named_parameters()]
    assert names == ["weight", "res_fc.weight", "res_fc.bias"]
    assert [name for name, _ in GCNLayer(5, 2, 3).named_parameters()] == ["weight", "bias"]


def test_reset_parameters_redraws_the_residual_projection():
    layer = GCNLayer(5, 2, 3, residual=True)
    with torch.no_grad():
        layer.res_fc.bias.fill_(1.0)
    layer.reset_parameters()
    assert torch.equal(layer.res_fc.bias, torch.zeros(6))


def test_feature_dropout_applies_in_training_only():
    graph, x = undirected_graph(), torch.ones(NUM_NODES, 4)
    layer = GCNLayer(4, 2, 2, feat_drop=0.5)
    torch.manual_seed(0)
    dropped = layer(graph, x)
    torch.manual_seed(0)
    mask = torch.nn.functional.dropout(x, 0.5)
    plain = GCNLayer(4, 2, 2)
    plain.load_state_dict(layer.state_dict())
    torch.testing.assert_close(dropped, plain(graph, mask))
    layer.eval()
    torch.testing.assert_close(layer(graph, x), plain(graph, x))


def test_zero_in_degree_is_a_value_error_unless_allowed():
    graph, x = dgl.graph(([0, 1], [1, 2]), num_nodes=4), torch.ones(4, 3)
    # GATConv's error: DGL's (DGLError, its message) and a ValueError.
    with pytest.raises(ZeroInDegreeError, match=re.escape("(Here: 2 node(s) with in-degree 0;")) as error:
        GCNLayer(3, 2, 1)(graph, x)
    assert isinstance(error.value, ValueError)
    layer = GCNLayer(3, 2, 1, allow_zero_in_degree=True)
    out = layer(graph, x)
    assert torch.equal(out[[0, 3]], layer.bias.expand(2, 2).unsqueeze(1).detach())
    layer.set_allow_zero_in_degree(False)
    with pytest.raises(ValueError, match="in-degree 0"):
        layer(graph, x)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"norm": "lip"}, "GCNLayer has no attention scores, so no norm 'lip'; allowed: none"),
        ({"degree_norm": "sym"}, "unknown degree_norm 'sym'; allowed: both, right, left, none"),
        ({"num_heads": 0}, "num_heads must be at least 1, got 0"),
        ({"out_feats": 0}, "out_feats must be at least 1, got 0"),
    ],
)
def test_bad_arguments_raise_value_error_naming_the_value(kwargs, message):
    arguments = {"in_feats": 4, "out_feats": 2, "num_heads": 2, **kwargs}
    with pytest.raises(ValueError, match=re.escape(message)):
        GCNLayer(**arguments)
