"""GATConv and GTConv take every input dgl.nn.GATConv takes: DGL's graph cases for GATConv.

Parametrised as DGL's test_nn.py (graph cases, id types, heads, output sizes): homogeneous
graphs, blocks (a sampled message-flow graph, destination features = the first rows of the
source features) and bipartite graphs with a feature pair (one shared projection, or
in_feats as a pair with fc_src/fc_dst). norm="none" must equal dgl.nn.GATConv with the same
weights; norm="lip" on a block or bipartite graph must equal the same layer on the
homogeneous graph that holds the same edges (tested against dense references in
test_gat.py and test_gt.py), whose neighbour maxima are then over each destination's
in-edges of the graph given.
"""

from __future__ import annotations

import io
import pickle
import re

import dgl
import pytest
import torch
from dgl.base import DGLError

from lipnorm.nn import GATConv, GTConv
from lipnorm.nn.conv.base import DGL_ZERO_IN_DEGREE_MESSAGE, ZeroInDegreeError

IN_FEATS = 5
IN_DST_FEATS = 7  # the destinations' input size where in_feats is a pair
IDTYPES = [torch.int32, torch.int64]
HEADS = [1, 4]
OUT_FEATS = [1, 5]
# Graph cases: how the graph is made, and whether the layer takes in_feats as a pair.
CASES = ["homo", "block-bipartite", "bipartite", "bipartite-sizes"]
NORM_SETTINGS = [("none", "paper"), ("lip", "paper"), ("lip", "official")]


def homogeneous_graph(idtype: torch.dtype) -> dgl.DGLGraph:
    generator = torch.Generator().manual_seed(0)
    src, dst = torch.randint(0, 12, (30,), generator=generator), torch.randint(0, 12, (30,), generator=generator)
    return dgl.add_self_loop(dgl.graph((src, dst), num_nodes=12, idtype=idtype))


def sampled_block(idtype: torch.dtype) -> dgl.DGLGraph:
    """A block as a neighbour sampler makes it: at most 3 of each seed's in-edges."""
    dgl.seed(0)
    seeds = torch.tensor([0, 3, 5, 7, 8], dtype=idtype)
    frontier = dgl.sampling.sample_neighbors(homogeneous_graph(idtype), seeds, 3)
    return dgl.to_block(frontier, seeds)


def bipartite_graph(idtype: torch.dtype) -> dgl.DGLGraph:
    """7 users rate 5 items; every item has a rating, item 4 twice from user 6."""
    users, items = [0, 1, 2, 2, 3, 4, 5, 6, 6, 0, 6], [0, 0, 1, 2, 2, 3, 4, 4, 4, 3, 1]
    return dgl.heterograph({("user", "rates", "item"): (users, items)}, {"user": 7, "item": 5}, idtype=idtype)


def make_case(case: str, idtype: torch.dtype, seed: int = 1):
    """`(graph, feat, in_feats)` of a graph case, features as `forward` takes them."""
    generator = torch.Generator().manual_seed(seed)
    if case == "homo":
        graph = homogeneous_graph(idtype)
    elif case == "block-bipartite":
        graph = sampled_block(idtype)
    else:
        graph = bipartite_graph(idtype)
    if case in ("homo", "block-bipartite"):
        return graph, torch.randn(graph.num_src_nodes(), IN_FEATS, generator=generator), IN_FEATS
    in_dst = IN_DST_FEATS if case == "bipartite-sizes" else IN_FEATS
    feat = (
        torch.randn(graph.num_src_nodes(), IN_FEATS, generator=generator),
        torch.randn(graph.num_dst_nodes(), in_dst, generator=generator),
    )
    return graph, feat, (IN_FEATS, IN_DST_FEATS) if case == "bipartite-sizes" else IN_FEATS


def randomise(module: torch.nn.Module) -> None:
    """Normal weights everywhere, so that biases are not zero and heads differ."""
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.normal_()


def homogeneous_equivalent(graph: dgl.DGLGraph, feat):
    """The same edges on one node set, its features, and which rows are the destinations.

    A block's destination i is its source i; a bipartite graph's sources come first, its
    destinations after them, and a feature pair of two sizes becomes rows
    ``[feat_src, 0]`` and ``[0, feat_dst]``.
    """
    src, dst = graph.edges()
    if graph.is_block:
        return dgl.graph((src, dst), num_nodes=graph.num_src_nodes()), feat, slice(0, graph.num_dst_nodes())
    num_src = graph.num_src_nodes()
    equivalent = dgl.graph((src, dst + num_src), num_nodes=num_src + graph.num_dst_nodes())
    feat_src, feat_dst = feat
    if feat_src.shape[1] != feat_dst.shape[1]:
        feat_src = torch.cat([feat_src, feat_src.new_zeros(num_src, feat_dst.shape[1])], dim=1)
        feat_dst = torch.cat([feat_dst.new_zeros(len(feat_dst), IN_FEATS), feat_dst], dim=1)
    return equivalent, torch.cat([feat_src, feat_dst]), slice(num_src, None)


def from_sources(weight: torch.Tensor) -> torch.Tensor:
    """A weight on source features `(out, IN_FEATS)` as one on padded rows `[x_src, 0]`."""
    return torch.cat([weight, weight.new_zeros(len(weight), IN_DST_FEATS)], dim=1)


def from_destinations(weight: torch.Tensor) -> torch.Tensor:
    """A weight on destination features `(out, IN_DST_FEATS)` as one on rows `[0, x_dst]`."""
    return torch.cat([weight.new_zeros(len(weight), IN_FEATS), weight], dim=1)


def equivalent_gat(layer: GATConv) -> GATConv:
    """The homogeneous GATConv that computes `layer` on `homogeneous_equivalent` inputs."""
    options = dict(norm=layer.norm, variant=layer.variant, alpha=layer.alpha, allow_zero_in_degree=True)
    if layer.fc is not None:
        equivalent = GATConv(layer.in_feats, layer.out_feats, layer.num_heads, **options)
        equivalent.load_state_dict(layer.state_dict())
        return equivalent
    equivalent = GATConv(IN_FEATS + IN_DST_FEATS, layer.out_feats, layer.num_heads, **options)
    with torch.no_grad():
        equivalent.fc.weight.copy_(from_sources(layer.fc_src.weight) + from_destinations(layer.fc_dst.weight))
        for name in ("attn_l", "attn_r", "bias"):
            getattr(equivalent, name).copy_(getattr(layer, name))
    return equivalent


def equivalent_gt(layer: GTConv) -> GTConv:
    """The homogeneous GTConv that computes `layer` on `homogeneous_equivalent` inputs."""
    options = dict(norm=layer.norm, variant=layer.variant, alpha=layer.alpha)
    if not isinstance(layer.in_feats, tuple):
        equivalent = GTConv(layer.in_feats, layer.out_feats, layer.num_heads, **options)
        equivalent.load_state_dict(layer.state_dict())
        return equivalent
    equivalent = GTConv(IN_FEATS + IN_DST_FEATS, layer.out_feats, layer.num_heads, **options)
    with torch.no_grad():
        for name, pad in (("fc_q", from_destinations), ("fc_k", from_sources), ("fc_v", from_sources), ("fc_skip", from_destinations)):
            getattr(equivalent, name).weight.copy_(pad(getattr(layer, name).weight))
            getattr(equivalent, name).bias.copy_(getattr(layer, name).bias)
    return equivalent


# --- norm="none" is dgl.nn.GATConv ---------------------------------------------------


@pytest.mark.parametrize("edge_weight", [False, True], ids=["no-weights", "edge-weights"])
@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("out_feats", OUT_FEATS)
@pytest.mark.parametrize("num_heads", HEADS)
@pytest.mark.parametrize("idtype", IDTYPES)
@pytest.mark.parametrize("case", CASES)
def test_plain_gat_equals_dgl_gatconv(case, idtype, num_heads, out_feats, residual, edge_weight):
    graph, feat, in_feats = make_case(case, idtype)
    expected_layer = dgl.nn.GATConv(in_feats, out_feats, num_heads, residual=residual)
    randomise(expected_layer)
    layer = GATConv(in_feats, out_feats, num_heads, residual=residual)
    layer.load_state_dict(expected_layer.state_dict())  # strict: DGL's names and shapes
    weights = torch.rand(graph.num_edges(), generator=torch.Generator().manual_seed(2)) if edge_weight else None

    out, attention = layer(graph, feat, edge_weight=weights, get_attention=True)
    expected_out, expected_attention = expected_layer(graph, feat, edge_weight=weights, get_attention=True)

    assert out.shape == (graph.num_dst_nodes(), num_heads, out_feats)
    assert attention.shape == (graph.num_edges(), num_heads, 1)
    torch.testing.assert_close(out, expected_out, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(attention, expected_attention, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("case", ["block-bipartite", "bipartite-sizes"])
def test_dropout_and_edge_weights_in_training_match_dgl_under_the_same_seed(case):
    """Dropout draws in DGL's order (source features, destination features, attention)."""
    graph, feat, in_feats = make_case(case, torch.int64)
    expected_layer = dgl.nn.GATConv(in_feats, 3, 4, feat_drop=0.4, attn_drop=0.3, residual=True)
    layer = GATConv(in_feats, 3, 4, feat_drop=0.4, attn_drop=0.3, residual=True)
    layer.load_state_dict(expected_layer.state_dict())
    weights = torch.rand(graph.num_edges(), generator=torch.Generator().manual_seed(2))
    torch.manual_seed(1)
    out, attention = layer(graph, feat, weights, get_attention=True)
    torch.manual_seed(1)
    expected_out, expected_attention = expected_layer(graph, feat, weights, get_attention=True)
    torch.testing.assert_close(out, expected_out, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(attention, expected_attention, rtol=1e-6, atol=1e-6)


def test_positional_arguments_are_dgls():
    """feat_drop, attn_drop, negative_slope, residual, activation, allow_zero_in_degree, bias."""
    graph, feat, _ = make_case("block-bipartite", torch.int64)
    arguments = (IN_FEATS, 3, 2, 0.0, 0.0, 0.3, True, torch.tanh, True, False)
    expected_layer = dgl.nn.GATConv(*arguments)
    layer = GATConv(*arguments)
    layer.load_state_dict(expected_layer.state_dict())
    torch.testing.assert_close(layer(graph, feat), expected_layer(graph, feat), rtol=1e-6, atol=1e-6)
    assert layer.bias is None and isinstance(layer.res_fc, torch.nn.Linear) and layer.res_fc.bias is None


def test_initialisation_with_a_pair_of_input_sizes_draws_dgls_weights():
    torch.manual_seed(3)
    expected = dgl.nn.GATConv((IN_FEATS, IN_DST_FEATS), 3, 2, residual=True).state_dict()
    torch.manual_seed(3)
    got = GATConv((IN_FEATS, IN_DST_FEATS), 3, 2, residual=True).state_dict()
    assert got.keys() == expected.keys()
    for name in expected:
        assert torch.equal(got[name], expected[name]), name


# --- norm="lip": the given graph's in-edges, and the bound ---------------------------


@pytest.mark.parametrize("norm, variant", NORM_SETTINGS)
@pytest.mark.parametrize("out_feats", OUT_FEATS)
@pytest.mark.parametrize("num_heads", HEADS)
@pytest.mark.parametrize("idtype", IDTYPES)
@pytest.mark.parametrize("case", CASES[1:])
@pytest.mark.parametrize("layer_class", [GATConv, GTConv], ids=["GATConv", "GTConv"])
def test_layer_equals_itself_on_the_homogeneous_graph_of_the_same_edges(
    layer_class, case, idtype, num_heads, out_feats, norm, variant
):
    """Blocks and bipartite graphs (GTConv: keys and values from the sources, queries
    from the destinations), LipschitzNorm's maxima over the given graph's in-edges."""
    graph, feat, in_feats = make_case(case, idtype)
    torch.manual_seed(4)
    layer = layer_class(in_feats, out_feats, num_heads, norm=norm, variant=variant, alpha=2.5)
    randomise(layer)
    equivalent_graph, equivalent_feat, destinations = homogeneous_equivalent(graph, feat)
    equivalent = equivalent_gat(layer) if layer_class is GATConv else equivalent_gt(layer)

    out, attention = layer(graph, feat, get_attention=True)
    expected_out, expected_attention = equivalent(equivalent_graph, equivalent_feat, get_attention=True)

    assert out.shape == (graph.num_dst_nodes(), num_heads, out_feats)
    assert attention.shape == (graph.num_edges(), num_heads, 1)
    torch.testing.assert_close(out, expected_out[destinations], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(attention, expected_attention, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(
        layer.normalized_scores(graph, feat), equivalent.normalized_scores(equivalent_graph, equivalent_feat)
    )


@pytest.mark.parametrize("alpha", [0.5, 3.0])
@pytest.mark.parametrize("num_heads", HEADS)
@pytest.mark.parametrize("idtype", IDTYPES)
@pytest.mark.parametrize("case", CASES)
def test_lip_scores_lie_in_minus_alpha_alpha_per_head(case, idtype, num_heads, alpha):
    graph, feat, in_feats = make_case(case, idtype)
    feat = tuple(1e3 * f for f in feat) if isinstance(feat, tuple) else 1e3 * feat
    torch.manual_seed(5)
    gat = GATConv(in_feats, 4, num_heads, norm="lip", alpha=alpha)
    gt = GTConv(in_feats, 4, num_heads, norm="lip", alpha=alpha)
    for layer in (gat, gt):
        with torch.no_grad():
            for parameter in layer.parameters():
                parameter.mul_(10.0)
        scores = layer.normalized_scores(graph, feat)
        assert scores.shape == (graph.num_edges(), num_heads, 1)
        # Per head: every head's largest score is bounded, float32 rounding aside.
        assert (scores.abs().amax(dim=(0, 2)) <= alpha * (1 + 1e-5)).all()
        # The unnormalised scores of these inputs are far beyond alpha.
        layer.norm = "none"
        assert layer.normalized_scores(graph, feat).abs().max() > 10 * alpha


def test_gt_keys_and_values_come_from_the_sources_and_queries_from_the_destinations():
    graph, (feat_src, feat_dst), _ = make_case("bipartite-sizes", torch.int64)
    torch.manual_seed(7)
    layer = GTConv((IN_FEATS, IN_DST_FEATS), 3, 2)
    assert layer.fc_k.in_features == layer.fc_v.in_features == IN_FEATS
    assert layer.fc_q.in_features == layer.fc_skip.in_features == IN_DST_FEATS
    out = layer(graph, (feat_src, feat_dst))
    # A destination feature moves its own output only (its query and skip term).
    changed = feat_dst.clone()
    changed[2] += 1.0
    difference = (layer(graph, (feat_src, changed)) - out).abs().sum(dim=(1, 2))
    assert difference[2] > 0 and torch.all(difference[torch.arange(5) != 2] == 0)


# --- shapes, pickling ----------------------------------------------------------------


def layers(in_feats, out_feats: int, num_heads: int, norm: str):
    return [
        GATConv(in_feats, out_feats, num_heads, norm=norm, residual=True),
        GTConv(in_feats, out_feats, num_heads, norm=norm),
    ]


@pytest.mark.parametrize("norm", ["none", "lip"])
@pytest.mark.parametrize("out_feats", OUT_FEATS)
@pytest.mark.parametrize("num_heads", HEADS)
@pytest.mark.parametrize("idtype", IDTYPES)
@pytest.mark.parametrize("case", CASES)
def test_shapes_and_pickling(case, idtype, num_heads, out_feats, norm):
    graph, feat, in_feats = make_case(case, idtype)
    for layer in layers(in_feats, out_feats, num_heads, norm):
        out, attention = layer(graph, feat, get_attention=True)
        assert out.shape == (graph.num_dst_nodes(), num_heads, out_feats)
        assert attention.shape == (graph.num_edges(), num_heads, 1)
        buffer = io.BytesIO()
        torch.save(layer, buffer)  # DGL's test: th.save of the module
        buffer.seek(0)
        for copy in (pickle.loads(pickle.dumps(layer)), torch.load(buffer)):
            assert torch.equal(copy(graph, feat), out)


# --- nodes without in-edges ----------------------------------------------------------


def zero_in_degree_case(case: str):
    """`(graph, feat, in_feats)` with a destination node that has no in-edge."""
    generator = torch.Generator().manual_seed(8)
    if case == "homo":
        graph = dgl.graph(([0, 1, 2], [1, 2, 3]), num_nodes=5)  # nodes 0 and 4
        return graph, torch.randn(5, IN_FEATS, generator=generator), IN_FEATS
    if case == "block-bipartite":
        base = dgl.graph(([0, 1, 2, 3], [1, 2, 3, 1]), num_nodes=5)
        graph = dgl.to_block(dgl.in_subgraph(base, [0, 1, 2]), torch.tensor([0, 1, 2]))  # seed 0
        return graph, torch.randn(graph.num_src_nodes(), IN_FEATS, generator=generator), IN_FEATS
    graph = dgl.heterograph({("user", "rates", "item"): ([0, 1, 2], [0, 0, 2])}, {"user": 3, "item": 4})
    feat = (torch.randn(3, IN_FEATS, generator=generator), torch.randn(4, IN_FEATS, generator=generator))
    return graph, feat, IN_FEATS


@pytest.mark.parametrize("norm", ["none", "lip"])
@pytest.mark.parametrize("case", ["homo", "block-bipartite", "bipartite"])
def test_zero_in_degree_raises_dgls_error(case, norm):
    graph, feat, in_feats = zero_in_degree_case(case)
    with pytest.raises(DGLError) as dgl_error:
        dgl.nn.GATConv(in_feats, 2, 2)(graph, feat)
    assert str(dgl_error.value) == DGL_ZERO_IN_DEGREE_MESSAGE
    layer = GATConv(in_feats, 2, 2, norm=norm)
    isolated = int((graph.in_degrees() == 0).sum())
    # DGL's error with DGL's message, which is also a ValueError saying how many.
    for call in (lambda: layer(graph, feat), lambda: layer.normalized_scores(graph, feat)):
        with pytest.raises(ZeroInDegreeError, match=f"^{re.escape(DGL_ZERO_IN_DEGREE_MESSAGE)}") as error:
            call()
        assert isinstance(error.value, DGLError) and isinstance(error.value, ValueError)
        assert f"Here: {isolated} node(s) with in-degree 0;" in str(error.value)
    layer.set_allow_zero_in_degree(True)
    assert layer(graph, feat).shape == (graph.num_dst_nodes(), 2, 2)


@pytest.mark.parametrize("case", ["homo", "block-bipartite", "bipartite"])
def test_zero_in_degree_allowed_equals_dgl(case):
    graph, feat, in_feats = zero_in_degree_case(case)
    expected_layer = dgl.nn.GATConv(in_feats, 3, 2, residual=True, allow_zero_in_degree=True)
    randomise(expected_layer)
    layer = GATConv(in_feats, 3, 2, residual=True, allow_zero_in_degree=True)
    layer.load_state_dict(expected_layer.state_dict())
    torch.testing.assert_close(layer(graph, feat), expected_layer(graph, feat), rtol=1e-6, atol=1e-6)


def test_nodes_without_in_edges_are_counted_once_per_graph_structure(monkeypatch):
    """No in-degree computation (a host-device sync on a GPU) after a graph's first
    forward, in any layer; a structure changed in place is counted anew."""
    graph = dgl.add_self_loop(dgl.graph(([0, 1, 2], [1, 2, 3]), num_nodes=4))
    calls = []
    in_degrees = graph.in_degrees
    monkeypatch.setattr(graph, "in_degrees", lambda *args: calls.append(args) or in_degrees(*args))
    first, second = GATConv(IN_FEATS, 2, 2), GATConv(2 * 2, 2, 2, norm="lip")
    feat = torch.randn(4, IN_FEATS)

    first(graph, feat)
    assert len(calls) == 1
    for _ in range(3):
        second(graph, first(graph, feat).flatten(1))
    assert len(calls) == 1

    graph.add_nodes(1)  # in place: node 4 has no in-edge
    feat = torch.randn(5, IN_FEATS)
    with pytest.raises(ZeroInDegreeError, match="Here: 1 node\\(s\\) with in-degree 0;"):
        first(graph, feat)
    assert len(calls) == 2
    graph.add_edges(4, 4)  # and now it has one
    assert first(graph, feat).shape == (5, 2, 2)
    first(graph, feat)
    assert len(calls) == 3


# --- bad input -----------------------------------------------------------------------


def test_bad_inputs_raise_value_errors_naming_them():
    graph, (feat_src, feat_dst), _ = make_case("bipartite-sizes", torch.int64)
    layer = GATConv((IN_FEATS, IN_DST_FEATS), 2, 2)
    message = "this layer has in_feats = (5, 7), a pair: it takes features as a pair (feat_src, feat_dst), got one tensor"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        layer(graph, feat_src)
    message = "feat_dst has shape (5, 5); expected (5, 7) for this graph and in_feats"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        layer(graph, (feat_src, feat_dst[:, :5]))
    message = "feat must be a tensor or a pair (feat_src, feat_dst), got a tuple of 3"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        GTConv((IN_FEATS, IN_DST_FEATS), 2, 2)(graph, (feat_src, feat_dst, feat_dst))
    message = "edge_weight has shape (11, 1); expected (E,) = (11,)"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        layer(graph, (feat_src, feat_dst), edge_weight=torch.ones(11, 1))
    block, feat, _ = make_case("block-bipartite", torch.int64)
    message = f"feat has shape (5, 5); expected ({block.num_src_nodes()}, 5) for this graph and in_feats"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        GTConv(IN_FEATS, 2, 2)(block, feat[: block.num_dst_nodes()])
    with pytest.raises(ValueError, match=re.escape("in_feats[1] must be at least 1, got 0")):
        GATConv((IN_FEATS, 0), 2, 2)
