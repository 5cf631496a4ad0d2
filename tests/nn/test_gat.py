"""GATConv: plain GAT equals DGL's GATConv; LipschitzNorm equals a dense loop reference."""

from __future__ import annotations

import math
import re

import dgl
import numpy as np
import pytest
import torch
from dgl.base import DGLError
from hypothesis import given, settings
from hypothesis import strategies as st

from lipnorm.nn.conv.gat import GATConv
from lipnorm.nn.functional import VARIANTS
from lipnorm.nn.row_pruned import RowPruned, nonzero_rows, row_pruned

NUM_NODES = 10
NUM_ISOLATED = 2  # the last nodes of `random_graph` have no edge at all


def random_graph(seed: int = 0) -> dgl.DGLGraph:
    rng = np.random.default_rng(seed)
    src = rng.integers(0, NUM_NODES - NUM_ISOLATED, size=25)
    dst = rng.integers(0, NUM_NODES - NUM_ISOLATED, size=25)
    return dgl.graph((torch.tensor(src), torch.tensor(dst)), num_nodes=NUM_NODES)


def star_graph() -> dgl.DGLGraph:
    """Every leaf points to the centre 0: one node with a large in-neighbourhood."""
    leaves = torch.arange(1, NUM_NODES)
    return dgl.graph((leaves, torch.zeros_like(leaves)), num_nodes=NUM_NODES)


def chain_graph() -> dgl.DGLGraph:
    nodes = torch.arange(NUM_NODES - 1)
    return dgl.graph((nodes, nodes + 1), num_nodes=NUM_NODES)


GRAPHS = {"random": random_graph, "star": star_graph, "chain": chain_graph}


def make_graph(name: str, self_loops: bool) -> dgl.DGLGraph:
    graph = dgl.remove_self_loop(GRAPHS[name]())
    return dgl.add_self_loop(graph) if self_loops else graph


def randomise(module: torch.nn.Module) -> None:
    """Normal weights everywhere, so that biases are not zero and heads differ."""
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.normal_()


# --- plain GAT is DGL's GATConv ------------------------------------------------------


@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("in_feats", [5, "heads*out"], ids=["in5", "in=heads*out"])
@pytest.mark.parametrize("out_feats", [1, 3])
@pytest.mark.parametrize("num_heads", [1, 4, 8])
@pytest.mark.parametrize("self_loops", [False, True], ids=["no-loops", "self-loops"])
@pytest.mark.parametrize("graph_name", GRAPHS)
def test_plain_gat_equals_dgl_gatconv(graph_name, self_loops, num_heads, out_feats, in_feats, residual):
    graph = make_graph(graph_name, self_loops)
    in_feats = num_heads * out_feats if in_feats == "heads*out" else in_feats
    torch.manual_seed(0)
    expected_layer = dgl.nn.GATConv(in_feats, out_feats, num_heads, residual=residual, allow_zero_in_degree=True)
    randomise(expected_layer)
    layer = GATConv(in_feats, out_feats, num_heads, residual=residual, allow_zero_in_degree=True)
    layer.load_state_dict(expected_layer.state_dict())  # strict: same parameter names and shapes
    feat = torch.randn(graph.num_nodes(), in_feats)

    out, attention = layer(graph, feat, get_attention=True)
    expected_out, expected_attention = expected_layer(graph, feat, get_attention=True)

    assert out.shape == (graph.num_nodes(), num_heads, out_feats)
    assert attention.shape == (graph.num_edges(), num_heads, 1)
    torch.testing.assert_close(out, expected_out, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(attention, expected_attention, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("residual, in_feats", [(False, 5), (True, 5), (True, 6)])
def test_initialisation_draws_the_same_weights_as_dgl(residual, in_feats):
    torch.manual_seed(3)
    expected = dgl.nn.GATConv(in_feats, 3, 2, residual=residual).state_dict()
    torch.manual_seed(3)
    got = GATConv(in_feats, 3, 2, residual=residual).state_dict()
    assert got.keys() == expected.keys()
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=0, atol=0)


def test_dropout_in_training_matches_dgl_under_the_same_seed():
    graph = make_graph("random", self_loops=True)
    torch.manual_seed(0)
    expected_layer = dgl.nn.GATConv(5, 3, 4, feat_drop=0.4, attn_drop=0.3, residual=True)
    layer = GATConv(5, 3, 4, feat_drop=0.4, attn_drop=0.3, residual=True)
    layer.load_state_dict(expected_layer.state_dict())
    feat = torch.randn(graph.num_nodes(), 5)
    torch.manual_seed(1)
    out, attention = layer(graph, feat, get_attention=True)
    torch.manual_seed(1)
    expected_out, expected_attention = expected_layer(graph, feat, get_attention=True)
    torch.testing.assert_close(out, expected_out, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(attention, expected_attention, rtol=1e-6, atol=1e-6)
    layer.eval()
    assert not torch.allclose(layer(graph, feat), out)


@pytest.mark.parametrize("norm", ["none", "lip"])
def test_zero_in_degree_is_rejected_by_default_as_dgl_does(norm):
    graph = make_graph("chain", self_loops=False)
    feat = torch.randn(graph.num_nodes(), 4)
    with pytest.raises(DGLError, match="0-in-degree"):
        dgl.nn.GATConv(4, 2, 2)(graph, feat)
    with pytest.raises(ValueError, match="1 node\\(s\\) with in-degree 0.*allow_zero_in_degree=True"):
        GATConv(4, 2, 2, norm=norm)(graph, feat)
    with pytest.raises(ValueError, match="in-degree 0"):
        GATConv(4, 2, 2, norm=norm).normalized_scores(graph, feat)


# --- LipschitzNorm against a dense reference -------------------------------------------


def reference_gat(layer: GATConv, graph: dgl.DGLGraph, feat: torch.Tensor, public_code_max_indexing=False):
    """GATConv's forward (eval, no residual) from the formulas, with loops, in float64.

    Returns the output `(N, H, D)`, the attention and the pre-LeakyReLU scores `(E, H, 1)`.
    `public_code_max_indexing` reproduces the public code's neighbour max for H > 1: the
    `(N, H)` maxima flattened and indexed by destination node, shared by all heads.
    """
    heads, dim = layer.num_heads, layer.out_feats
    weight = layer.fc.weight.detach().double().numpy()
    attn_l = layer.attn_l.detach().double().numpy()[0]
    attn_r = layer.attn_r.detach().double().numpy()[0]
    bias = np.zeros((heads, dim)) if layer.bias is None else layer.bias.detach().double().numpy().reshape(heads, dim)
    projected = (feat.detach().double().numpy() @ weight.T).reshape(-1, heads, dim)
    src, dst = (t.tolist() for t in graph.edges())
    num_nodes, num_edges = graph.num_nodes(), graph.num_edges()

    def squared_norm(node, head):
        return float(np.sum(projected[node, head] ** 2))

    def max_squared_norm(node, head):  # over in-neighbours, 0 without any (as scatter/DGL)
        return max((squared_norm(src[k], head) for k in range(num_edges) if dst[k] == node), default=0.0)

    out = np.zeros((num_nodes, heads, dim))
    attention = np.zeros((num_edges, heads, 1))
    scores = np.zeros((num_edges, heads, 1))
    all_heads_attn_norm = math.sqrt(np.sum(attn_l**2) + np.sum(attn_r**2))
    for i in range(num_nodes):
        edges = [k for k in range(num_edges) if dst[k] == i]
        for h in range(heads):
            neighbour_max = max_squared_norm(i // heads, i % heads) if public_code_max_indexing else max_squared_norm(i, h)
            logits = []
            for k in edges:
                j = src[k]
                e = attn_l[h] @ projected[j, h] + attn_r[h] @ projected[i, h]
                if layer.norm == "lip":
                    if layer.variant == "paper":
                        u = math.sqrt(np.sum(attn_l[h] ** 2) + np.sum(attn_r[h] ** 2))
                        v = math.sqrt(squared_norm(i, h) + neighbour_max)
                    else:
                        u = 4 * all_heads_attn_norm
                        v = math.sqrt(neighbour_max + squared_norm(j, h))
                    e = layer.alpha * e / (u * v) if u * v > layer.eps else 0.0
                scores[k, h, 0] = e
                logits.append(e if e > 0 else layer.leaky_relu.negative_slope * e)
            weights = np.exp(np.array(logits) - max(logits, default=0.0))
            for k, w in zip(edges, weights / weights.sum()):
                attention[k, h, 0] = w
                out[i, h] += w * projected[src[k], h]
            out[i, h] += bias[h]
    return tuple(torch.from_numpy(array) for array in (out, attention, scores))


TOLERANCES = {torch.float64: dict(rtol=1e-10, atol=1e-10), torch.float32: dict(rtol=1e-5, atol=1e-5)}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("out_feats", [1, 3])
@pytest.mark.parametrize("num_heads", [1, 2, 4])
@pytest.mark.parametrize("graph_name", GRAPHS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_lipschitz_gat_equals_dense_reference(variant, graph_name, num_heads, out_feats, dtype):
    graph = make_graph(graph_name, self_loops=True)
    torch.manual_seed(1)
    layer = GATConv(5, out_feats, num_heads, norm="lip", variant=variant, alpha=2.5, negative_slope=0.1)
    randomise(layer)
    layer.to(dtype)
    feat = torch.randn(graph.num_nodes(), 5, dtype=dtype)

    out, attention = layer(graph, feat, get_attention=True)
    scores = layer.normalized_scores(graph, feat)
    expected_out, expected_attention, expected_scores = reference_gat(layer, graph, feat)

    for got, expected in ((out, expected_out), (attention, expected_attention), (scores, expected_scores)):
        assert got.dtype == dtype
        torch.testing.assert_close(got.double(), expected, **TOLERANCES[dtype])


@pytest.mark.parametrize("variant", VARIANTS)
def test_lipschitz_gat_with_isolated_nodes_equals_dense_reference(variant):
    graph = make_graph("random", self_loops=False)
    torch.manual_seed(2)
    layer = GATConv(5, 3, 2, norm="lip", variant=variant, allow_zero_in_degree=True).double()
    randomise(layer)
    feat = torch.randn(graph.num_nodes(), 5, dtype=torch.float64)
    out, attention = layer(graph, feat, get_attention=True)
    expected_out, expected_attention, _ = reference_gat(layer, graph, feat)
    torch.testing.assert_close(out, expected_out, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(attention, expected_attention, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("num_heads", [2, 4])
@pytest.mark.parametrize("variant", VARIANTS)
def test_neighbour_max_is_per_head_not_mixed_across_heads_as_in_the_public_code(variant, num_heads):
    graph = make_graph("random", self_loops=True)
    torch.manual_seed(4)
    layer = GATConv(5, 3, num_heads, norm="lip", variant=variant).double()
    with torch.no_grad():
        # Head h's projection is 10**h times larger, so per-head norms differ by decades.
        layer.fc.weight.view(num_heads, 3, 5).mul_(10.0 ** torch.arange(num_heads).view(-1, 1, 1))
    feat = torch.randn(graph.num_nodes(), 5, dtype=torch.float64)

    scores = layer.normalized_scores(graph, feat)
    per_head = reference_gat(layer, graph, feat)[2]
    mixed = reference_gat(layer, graph, feat, public_code_max_indexing=True)[2]

    torch.testing.assert_close(scores, per_head, rtol=1e-10, atol=1e-10)
    assert (scores - mixed).abs().max() > 0.1


def test_alpha_scales_the_normalised_scores_linearly():
    graph = make_graph("star", self_loops=True)
    torch.manual_seed(5)
    feat = torch.randn(graph.num_nodes(), 4)
    layer = GATConv(4, 2, 3, norm="lip", alpha=1.0)
    unit = layer.normalized_scores(graph, feat)
    layer.alpha = 7.0
    torch.testing.assert_close(layer.normalized_scores(graph, feat), 7.0 * unit)
    layer.alpha = 0.0
    out, attention = layer(graph, feat, get_attention=True)
    # alpha = 0: all scores 0, so attention is uniform over each in-neighbourhood.
    in_degree = graph.in_degrees().float()[graph.edges()[1]]
    torch.testing.assert_close(attention, (1 / in_degree).view(-1, 1, 1).expand(-1, 3, 1))


# --- the bound |score| <= alpha -------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    feat_exponent=st.floats(-3, 4),
    attn_exponent=st.floats(-3, 4),
    alpha=st.floats(0, 100),
    num_heads=st.integers(1, 8),
    seed=st.integers(0, 10_000),
)
def test_paper_scores_are_bounded_by_alpha_at_any_scale(feat_exponent, attn_exponent, alpha, num_heads, seed):
    graph = dgl.add_self_loop(random_graph(seed))
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    layer = GATConv(6, 4, num_heads, norm="lip", alpha=alpha)
    with torch.no_grad():
        layer.attn_l.mul_(10**attn_exponent)
        layer.attn_r.mul_(10**attn_exponent)
    feat = torch.randn(graph.num_nodes(), 6, generator=generator) * 10**feat_exponent

    scores = layer.normalized_scores(graph, feat)

    assert scores.shape == (graph.num_edges(), num_heads, 1)
    # float32 rounds e and u v separately: allow a few ulps beyond the exact bound.
    assert scores.abs().max() <= alpha * (1 + 1e-5)


def test_plain_gat_scores_are_not_bounded():
    """The bound above is LipschitzNorm's doing: plain scores grow with the input."""
    graph = make_graph("random", self_loops=True)
    torch.manual_seed(0)
    feat = 1e3 * torch.randn(graph.num_nodes(), 6)
    assert GATConv(6, 4, 2).normalized_scores(graph, feat).abs().max() > 100


# --- gradients and the 0/0 case -------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_lipschitz_gat_passes_gradcheck(variant):
    graph = dgl.add_self_loop(dgl.graph(([0, 1, 2, 3, 0], [1, 2, 3, 0, 2]), num_nodes=4))
    torch.manual_seed(6)
    layer = GATConv(3, 2, 2, norm="lip", variant=variant, alpha=1.5, residual=True).double()
    randomise(layer)
    names = [name for name, _ in layer.named_parameters()]
    values = [p.detach().clone().requires_grad_() for p in layer.parameters()]
    feat = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)

    def forward(feat, *parameters):
        return torch.func.functional_call(layer, dict(zip(names, parameters)), (graph, feat))

    # fast_mode compares the Jacobians along random directions: a wrong gradient still
    # fails (almost surely), with far fewer passes.
    assert torch.autograd.gradcheck(forward, (feat, *values), fast_mode=True)


NORM_SETTINGS = [("none", "paper"), ("lip", "paper"), ("lip", "official")]


@pytest.mark.parametrize("norm, variant", NORM_SETTINGS)
def test_zero_features_and_isolated_nodes_give_finite_outputs_and_gradients(norm, variant):
    # Self-loops everywhere except on the isolated nodes, which keep in-degree 0.
    graph = make_graph("random", self_loops=False)
    connected = torch.arange(NUM_NODES - NUM_ISOLATED)
    graph.add_edges(connected, connected)
    torch.manual_seed(7)
    layer = GATConv(5, 3, 4, norm=norm, variant=variant, allow_zero_in_degree=True)
    randomise(layer)
    feat = torch.zeros(graph.num_nodes(), 5, requires_grad=True)

    out, attention = layer(graph, feat, get_attention=True)
    (out * torch.randn_like(out)).sum().backward()

    assert torch.isfinite(out).all() and torch.isfinite(attention).all()
    assert torch.isfinite(feat.grad).all()
    for name, parameter in layer.named_parameters():
        assert parameter.grad is not None and torch.isfinite(parameter.grad).all(), name
    # All scores are 0 (0/0 mapped to 0), so attention is uniform over each in-neighbourhood.
    in_degree = graph.in_degrees().float()[graph.edges()[1]]
    torch.testing.assert_close(attention, (1 / in_degree).view(-1, 1, 1).expand(-1, 4, 1))
    # No message reaches an isolated node: its output is the bias alone.
    torch.testing.assert_close(out[-NUM_ISOLATED:], layer.bias.view(1, 4, 3).expand(NUM_ISOLATED, 4, 3))


@pytest.mark.parametrize("norm, variant", NORM_SETTINGS)
def test_missing_feature_rows_give_finite_gradients_and_match_reference(norm, variant):
    graph = make_graph("chain", self_loops=True)
    torch.manual_seed(8)
    layer = GATConv(5, 3, 2, norm=norm, variant=variant).double()
    randomise(layer)
    feat = torch.randn(graph.num_nodes(), 5, dtype=torch.float64)
    feat[:4] = 0  # nodes 0-3 and their in-neighbours are all zero: bound u v_i = 0
    feat.requires_grad_()

    out, attention = layer(graph, feat, get_attention=True)
    out.pow(2).sum().backward()

    assert torch.isfinite(feat.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in layer.parameters())
    expected_out, expected_attention, _ = reference_gat(layer, graph, feat)
    torch.testing.assert_close(out, expected_out, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(attention, expected_attention, rtol=1e-10, atol=1e-10)


# --- bad arguments --------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"alpha": -0.5}, "alpha must be a finite number >= 0, got -0.5"),
        ({"alpha": float("nan")}, "alpha must be a finite number >= 0, got nan"),
        ({"norm": "batch"}, "unknown norm 'batch'; allowed: none, lip"),
        ({"variant": "pyg"}, "unknown variant 'pyg'; allowed: paper, official"),
        ({"num_heads": 0}, "num_heads must be at least 1, got 0"),
        ({"out_feats": -2}, "out_feats must be at least 1, got -2"),
        ({"eps": -1e-3}, "eps must be a finite number >= 0, got -0.001"),
    ],
)
def test_bad_arguments_raise_value_error_naming_the_value(kwargs, message):
    arguments = {"in_feats": 4, "out_feats": 2, "num_heads": 2, "norm": "lip"} | kwargs
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        GATConv(**arguments)


# --- a row-pruned input (lipnorm.nn.row_pruned) -----------------------------------------


@pytest.mark.parametrize("rows", ["some", "all", "none"])
@pytest.mark.parametrize("norm, variant", NORM_SETTINGS)
@pytest.mark.parametrize("num_heads, out_feats", [(1, 1), (2, 3), (4, 2)])
@pytest.mark.parametrize("graph_name", GRAPHS)
def test_row_pruned_input_equals_the_dense_input(graph_name, num_heads, out_feats, norm, variant, rows):
    """The layer on a `RowPruned` input (its product on the non-zero rows only) gives
    the dense input's output and gradients, with some, all or no rows non-zero; in
    training mode its feature dropout draws a mask over those rows only."""
    graph = make_graph(graph_name, self_loops=True)
    torch.manual_seed(0)
    layer = GATConv(5, out_feats, num_heads, norm=norm, variant=variant)
    randomise(layer)
    x = torch.randn(NUM_NODES, 5)
    nonzero = {"some": [1, 4, 5, 8], "all": list(range(NUM_NODES)), "none": []}[rows]
    x[[row for row in range(NUM_NODES) if row not in nonzero]] = 0
    pruned = row_pruned(x)
    assert pruned.rows.tolist() == nonzero and pruned.num_nodes == NUM_NODES
    torch.testing.assert_close(pruned.dense(), x, rtol=0, atol=0)
    dense_in = x.clone().requires_grad_()
    pruned_values = pruned.values.clone().requires_grad_()
    out = layer(graph, pruned._replace(values=pruned_values))
    expected = layer(graph, dense_in)
    torch.testing.assert_close(out, expected, rtol=1e-6, atol=1e-6)
    weights = torch.randn_like(out)
    grads = torch.autograd.grad((out * weights).sum(), [pruned_values, *layer.parameters()])
    expected_grads = torch.autograd.grad((expected * weights).sum(), [dense_in, *layer.parameters()])
    torch.testing.assert_close(grads[0], expected_grads[0][nonzero], rtol=1e-5, atol=1e-6)
    for grad, expected_grad in zip(grads[1:], expected_grads[1:]):
        torch.testing.assert_close(grad, expected_grad, rtol=1e-5, atol=1e-6)


def test_row_pruned_input_drops_out_its_rows_only():
    """In training, `feat_drop` on a row-pruned input draws an (R, F) mask: the dense
    input dropped out with that mask set into its rows gives the same output."""
    graph = make_graph("random", self_loops=True)
    torch.manual_seed(0)
    layer = GATConv(5, 3, 2, feat_drop=0.5).train()
    x = torch.randn(NUM_NODES, 5)
    x[[0, 2, 3, 6, 7, 9]] = 0
    pruned = row_pruned(x)
    torch.manual_seed(1)
    out = layer(graph, pruned)
    torch.manual_seed(1)
    mask = torch.zeros_like(x)
    mask[pruned.rows] = torch.nn.functional.dropout(torch.ones_like(pruned.values), p=0.5)
    plain = GATConv(5, 3, 2)
    plain.load_state_dict(layer.state_dict())
    plain.attn_drop = layer.attn_drop  # the same attention-dropout draw follows
    torch.testing.assert_close(out, plain.train()(graph, x * mask), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("case", ["residual", "block", "pair-projections", "seed-values"])
def test_row_pruned_input_is_refused_where_it_cannot_be_projected(case):
    graph = make_graph("random", self_loops=True)
    layer = GATConv((5, 5) if case == "pair-projections" else 5, 3, 2, residual=case == "residual")
    pruned = row_pruned(torch.randn(NUM_NODES, 5))
    if case == "block":
        graph = dgl.to_block(graph)
    if case == "seed-values":
        pruned = RowPruned(pruned.rows, pruned.values.expand(2, -1, -1), NUM_NODES)
    with pytest.raises(ValueError, match=r"a row-pruned input needs one projection fc, a whole graph, no residual"):
        layer(graph, pruned)


def test_nonzero_rows_are_found_again_after_an_in_place_change():
    """`nonzero_rows` remembers the last tensor's rows, but not past an in-place change."""
    x = torch.zeros(6, 3)
    x[[1, 4]] = 1.0
    assert nonzero_rows(x).tolist() == [1, 4]
    x[2, 0] = 5.0
    assert nonzero_rows(x).tolist() == [1, 2, 4]
    assert nonzero_rows(torch.stack([x, torch.eye(6, 3)])).tolist() == [0, 1, 2, 4]
    with pytest.raises(ValueError, match=r"features must be \(N, F\) or \(S, N, F\); got shape \(6,\)"):
        row_pruned(torch.zeros(6))
