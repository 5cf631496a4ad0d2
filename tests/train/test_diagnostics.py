"""Layer diagnostics against dense float64 loop references, their limits and checks."""

from __future__ import annotations

import math

import dgl
import numpy as np
import pytest
import torch
from dgl.nn.functional import edge_softmax

from lipnorm.train import diagnostics
from lipnorm.train.diagnostics import (
    GraphDiagnostics,
    attention_entropy,
    dirichlet_energy,
    mean_average_distance,
    rayleigh_quotient,
)
from lipnorm.nn.conv.gat import GATConv

ISOLATED = 2  # the last nodes of `random_graph` have no edge at all
ZERO_ROW = 1  # the node whose features `node_features` sets to 0


def random_graph(num_nodes: int, num_edges: int, seed: int) -> dgl.DGLGraph:
    """Random edges among the first nodes, plus self-loops on nodes 0-2, a multi-edge
    (the first edge twice more) and an edge in both directions; the last ISOLATED nodes
    have no edge."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_nodes - ISOLATED, size=num_edges).tolist()
    dst = rng.integers(0, num_nodes - ISOLATED, size=num_edges).tolist()
    src += [0, 1, 2, src[0], src[0], 3, 4]
    dst += [0, 1, 2, dst[0], dst[0], 4, 3]
    return dgl.graph((torch.tensor(src), torch.tensor(dst)), num_nodes=num_nodes)


# (nodes, random edges, seed): sparse with many in-degree-1 nodes, denser, in between.
GRAPHS = [(12, 10, 0), (20, 70, 1), (30, 45, 2)]
# Trailing shapes of h: one feature vector, heads x features (H, D), a single head.
SHAPES = [(5,), (3, 4), (1, 6)]


def node_features(graph: dgl.DGLGraph, shape: tuple, dtype=torch.float64, seed: int = 0) -> torch.Tensor:
    """Random rows, offset so that cosines are not all near 0; row ZERO_ROW is zero."""
    generator = torch.Generator().manual_seed(seed)
    h = torch.randn(graph.num_nodes(), *shape, generator=generator, dtype=torch.float64) + 0.5
    h[ZERO_ROW] = 0
    return h.to(dtype)


def random_attention(graph: dgl.DGLGraph, heads: int, seed: int = 0) -> torch.Tensor:
    """(E, H, 1) softmax-normalised per destination and head, as GATConv returns it."""
    generator = torch.Generator().manual_seed(seed)
    logits = 2 * torch.randn(graph.num_edges(), heads, 1, generator=generator, dtype=torch.float64)
    return edge_softmax(graph, logits)


# --- dense references: loops over edges and nodes, float64 numpy ---------------------


def edge_list(graph: dgl.DGLGraph) -> list[tuple[int, int]]:
    src, dst = graph.edges(order="eid")
    return list(zip(src.tolist(), dst.tolist()))


def as_rows(graph: dgl.DGLGraph, h: torch.Tensor) -> np.ndarray:
    return h.detach().to(torch.float64).numpy().reshape(graph.num_nodes(), -1)


def reference_energy(graph, h) -> float:
    rows = as_rows(graph, h)
    total = sum(float(np.sum((rows[u] - rows[v]) ** 2)) for u, v in edge_list(graph) if u != v)
    return total / graph.num_nodes()


def reference_mad(graph, h) -> float:
    rows = as_rows(graph, h)
    values = []
    for u, v in edge_list(graph):
        norm_u, norm_v = np.linalg.norm(rows[u]), np.linalg.norm(rows[v])
        if u != v and norm_u > 0 and norm_v > 0:
            values.append(1 - float(rows[u] @ rows[v]) / (norm_u * norm_v))
    return float(np.mean(values)) if values else math.nan


def reference_rayleigh(graph, h) -> float:
    rows = as_rows(graph, h)
    numerator = sum(float(np.sum((rows[u] - rows[v]) ** 2)) for u, v in edge_list(graph) if u != v)
    mean = rows.mean(axis=0)
    denominator = sum(float(np.sum((row - mean) ** 2)) for row in rows)
    return 0.0 if numerator == 0 else numerator / denominator


def reference_entropy(graph, attention) -> float:
    weights = attention.detach().to(torch.float64).numpy().reshape(graph.num_edges(), -1)
    edges = edge_list(graph)
    values = []
    for node in range(graph.num_nodes()):
        in_edges = [eid for eid, (_, v) in enumerate(edges) if v == node]
        if len(in_edges) < 2:
            continue
        for head in range(weights.shape[1]):
            entropy = -sum(a * math.log(a) for a in weights[in_edges, head] if a > 0)
            values.append(entropy / math.log(len(in_edges)))
    return float(np.mean(values)) if values else math.nan


def assert_close(actual: float, expected: float, rel: float) -> None:
    assert isinstance(actual, float)
    assert actual == pytest.approx(expected, rel=rel, abs=0)


# --- against the references --------------------------------------------------------


@pytest.mark.parametrize("graph_case", GRAPHS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype, rel", [(torch.float64, 1e-10), (torch.float32, 1e-5)])
def test_node_metrics_match_loop_reference(graph_case, shape, dtype, rel):
    graph = random_graph(*graph_case)
    h = node_features(graph, shape, dtype)
    diag = GraphDiagnostics(graph)
    assert_close(diag.dirichlet_energy(h), reference_energy(graph, h), rel)
    assert_close(diag.mean_average_distance(h), reference_mad(graph, h), rel)
    assert_close(diag.rayleigh_quotient(h), reference_rayleigh(graph, h), rel)


@pytest.mark.parametrize("graph_case", GRAPHS)
@pytest.mark.parametrize("heads", [1, 3])
@pytest.mark.parametrize("form", ["(E, H, 1)", "(E, H)"])
@pytest.mark.parametrize("dtype, rel", [(torch.float64, 1e-10), (torch.float32, 1e-5)])
def test_attention_entropy_matches_loop_reference(graph_case, heads, form, dtype, rel):
    graph = random_graph(*graph_case)
    attention = random_attention(graph, heads).to(dtype)
    if form == "(E, H)":
        attention = attention.squeeze(-1)
    result = GraphDiagnostics(graph).attention_entropy(attention)
    assert 0 < result < 1
    assert_close(result, reference_entropy(graph, attention), rel)


def test_results_do_not_depend_on_the_block_size(monkeypatch):
    # Blocks of 7 elements: several blocks per pass, each of 1 or 2 rows.
    graph = random_graph(20, 70, 1)
    h = node_features(graph, (3, 4))
    attention = random_attention(graph, 3)
    expected = GraphDiagnostics(graph).layer_stats(h, attention)
    monkeypatch.setitem(diagnostics.BLOCK_ELEMENTS, "cpu", 7)
    result = GraphDiagnostics(graph).layer_stats(h, attention)
    assert result == pytest.approx(expected, rel=1e-12)


def test_nearly_identical_rows_keep_their_precision():
    """Float32 rows 1e-6 apart (1 - cos ~ 1e-13): the metrics match float64 references
    of the same float32 values to 1e-6. `1 - cos` from the cosine, even in float64, is
    off by ~1e-3 here, and from float32 unit rows by ~1e-2."""
    graph = random_graph(30, 45, 2)
    generator = torch.Generator().manual_seed(3)
    common = torch.randn(1, 16, generator=generator, dtype=torch.float64) + 3
    noise = torch.randn(graph.num_nodes(), 16, generator=generator, dtype=torch.float64)
    h = (common + 1e-6 * noise).float()
    rows = as_rows(graph, h)
    units = rows / np.linalg.norm(rows, axis=1, keepdims=True)  # float64: exact enough
    loopless = [(u, v) for u, v in edge_list(graph) if u != v]
    expected_mad = np.mean([0.5 * np.sum((units[u] - units[v]) ** 2) for u, v in loopless])
    diag = GraphDiagnostics(graph)
    assert expected_mad < 1e-12
    assert_close(diag.dirichlet_energy(h), reference_energy(graph, h), 1e-6)
    assert_close(diag.mean_average_distance(h), expected_mad, 1e-6)
    assert_close(diag.rayleigh_quotient(h), reference_rayleigh(graph, h), 1e-6)
    assert reference_mad(graph, h) != pytest.approx(expected_mad, rel=1e-4, abs=0)  # the naive way


def test_entropy_of_gatconv_attention_matches_reference():
    graph = dgl.add_self_loop(dgl.remove_self_loop(random_graph(20, 70, 1)))
    conv = GATConv(4, 3, 2)
    feat = torch.randn(graph.num_nodes(), 4, generator=torch.Generator().manual_seed(0))
    h, attention = conv(graph, feat, get_attention=True)
    assert attention.shape == (graph.num_edges(), 2, 1)
    stats = GraphDiagnostics(graph).layer_stats(h, attention)
    assert_close(stats["attention_entropy"], reference_entropy(graph, attention), 1e-5)
    assert_close(stats["dirichlet_energy"], reference_energy(graph, h), 1e-5)


# --- limits ------------------------------------------------------------------------


def test_uniform_attention_has_entropy_one_and_one_hot_zero():
    graph = random_graph(20, 70, 1)
    _, dst = graph.edges(order="eid")
    in_degrees = graph.in_degrees().to(torch.float32)
    uniform = (1 / in_degrees[dst]).unsqueeze(1).repeat(1, 4)
    assert GraphDiagnostics(graph).attention_entropy(uniform) == pytest.approx(1, abs=1e-6)
    # One-hot: all of each node's attention on its in-edge of largest ID.
    one_hot = torch.zeros(graph.num_edges(), 4, 1)
    last_in_edge = {node: eid for eid, node in enumerate(dst.tolist())}
    one_hot[list(last_in_edge.values())] = 1
    assert GraphDiagnostics(graph).attention_entropy(one_hot) == 0


def test_nodes_of_in_degree_one_are_left_out_of_the_entropy():
    graph = random_graph(12, 10, 0)
    _, dst = graph.edges(order="eid")
    single = graph.in_degrees()[dst] == 1
    assert single.any() and not single.all()
    attention = random_attention(graph, 2)
    changed = attention.clone()
    changed[single] = torch.rand(int(single.sum()), 2, 1, dtype=torch.float64)
    diag = GraphDiagnostics(graph)
    assert diag.attention_entropy(changed) == diag.attention_entropy(attention)


@pytest.mark.parametrize("shape", SHAPES)
def test_identical_rows_give_zero_energy_mad_and_rayleigh(shape):
    graph = random_graph(20, 70, 1)
    row = torch.randn(1, *shape, dtype=torch.float32) + 1
    h = row.repeat(graph.num_nodes(), *[1] * len(shape))
    stats = GraphDiagnostics(graph).layer_stats(h)
    assert stats["dirichlet_energy"] == 0
    assert stats["mean_average_distance"] == 0
    assert stats["rayleigh_quotient"] == 0
    assert stats["output_norm"] == pytest.approx(math.sqrt(graph.num_nodes()) * float(row.norm()), rel=1e-6)


def test_graph_with_only_self_loops():
    nodes = torch.arange(5)
    graph = dgl.graph((nodes, nodes), num_nodes=5)
    h = torch.randn(5, 3)
    diag = GraphDiagnostics(graph)
    assert diag.dirichlet_energy(h) == 0
    assert diag.rayleigh_quotient(h) == 0
    assert math.isnan(diag.mean_average_distance(h))  # no edge between two nodes
    assert math.isnan(diag.attention_entropy(torch.ones(5, 2, 1)))  # in-degrees are 1


def test_mad_leaves_out_edges_to_zero_rows_and_is_nan_without_others():
    # Star into node 0, plus 1 -> 2: with row 0 zero only 1 -> 2 counts.
    graph = dgl.graph((torch.tensor([1, 2, 3, 1]), torch.tensor([0, 0, 0, 2])), num_nodes=4)
    h = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0], [5.0, 5.0]])
    assert mean_average_distance(graph, h) == pytest.approx(1.0)
    h[2] = 0
    assert math.isnan(mean_average_distance(graph, h))


def test_multi_edges_and_both_directions_count_each_time():
    # 0 -> 1 twice and 1 -> 0: three edges of squared distance 25; 1 -> 2 of 4.
    graph = dgl.graph((torch.tensor([0, 0, 1, 1]), torch.tensor([1, 1, 0, 2])), num_nodes=3)
    h = torch.tensor([[0.0, 0.0], [3.0, 4.0], [3.0, 6.0]], dtype=torch.float64)
    assert dirichlet_energy(graph, h) == pytest.approx((3 * 25 + 4) / 3, rel=1e-12)
    mean = h.mean(dim=0)
    assert rayleigh_quotient(graph, h) == pytest.approx(79 / float(((h - mean) ** 2).sum()), rel=1e-12)


def test_nan_in_h_gives_nan():
    graph = random_graph(12, 10, 0)
    h = node_features(graph, (3,))
    h[0, 0] = math.nan
    stats = GraphDiagnostics(graph).layer_stats(h)
    assert all(math.isnan(value) for value in stats.values())


# --- the API -----------------------------------------------------------------------


def test_free_functions_equal_the_methods():
    graph = random_graph(20, 70, 1)
    h = node_features(graph, (3, 4), torch.float32)
    attention = random_attention(graph, 3).float()
    diag = GraphDiagnostics(graph)
    assert dirichlet_energy(graph, h) == diag.dirichlet_energy(h)
    assert mean_average_distance(graph, h) == diag.mean_average_distance(h)
    assert rayleigh_quotient(graph, h) == diag.rayleigh_quotient(h)
    assert attention_entropy(graph, attention) == diag.attention_entropy(attention)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_layer_stats_equals_the_methods(dtype):
    graph = random_graph(20, 70, 1)
    h = node_features(graph, (3, 4), dtype)
    attention = random_attention(graph, 3).to(dtype)
    diag = GraphDiagnostics(graph)
    stats = diag.layer_stats(h, attention)
    assert list(stats) == [
        "dirichlet_energy",
        "mean_average_distance",
        "rayleigh_quotient",
        "attention_entropy",
        "output_norm",
    ]
    assert all(isinstance(value, float) for value in stats.values())
    assert stats["dirichlet_energy"] == diag.dirichlet_energy(h)
    assert stats["mean_average_distance"] == diag.mean_average_distance(h)
    assert stats["rayleigh_quotient"] == diag.rayleigh_quotient(h)
    assert stats["attention_entropy"] == diag.attention_entropy(attention)
    assert stats["output_norm"] == pytest.approx(float(h.double().norm()), rel=1e-6)
    assert "attention_entropy" not in diag.layer_stats(h)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_inputs_are_left_unchanged_and_may_require_grad(dtype):
    graph = random_graph(20, 70, 1)
    h = node_features(graph, (3, 4), dtype).requires_grad_()
    attention = random_attention(graph, 3).to(dtype).squeeze(-1).requires_grad_()
    h_before, attention_before = h.detach().clone(), attention.detach().clone()
    GraphDiagnostics(graph).layer_stats(h, attention)
    assert torch.equal(h, h_before) and torch.equal(attention, attention_before)
    assert h.grad is None and attention.grad is None


def test_half_precision_is_computed_in_float32():
    graph = random_graph(20, 70, 1)
    h = node_features(graph, (3, 4), torch.float16)
    diag = GraphDiagnostics(graph)
    assert diag.layer_stats(h) == diag.layer_stats(h.float())


def test_input_errors_name_the_offending_value():
    graph = dgl.graph((torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0])), num_nodes=7)
    diag = GraphDiagnostics(graph)
    with pytest.raises(ValueError, match="h has 5 rows, the graph has 7 nodes"):
        diag.dirichlet_energy(torch.zeros(5, 3))
    with pytest.raises(ValueError, match="h must be a floating-point tensor, got dtype torch.int64"):
        diag.mean_average_distance(torch.zeros(7, 3, dtype=torch.int64))
    with pytest.raises(ValueError, match="h must have one row per node, got a 0-d tensor"):
        diag.rayleigh_quotient(torch.tensor(1.0))
    with pytest.raises(ValueError, match="h must be a torch.Tensor, got ndarray"):
        diag.layer_stats(np.zeros((7, 3)))
    with pytest.raises(ValueError, match=r"attention has 4 rows, the graph has 3 edges"):
        diag.attention_entropy(torch.ones(4, 2, 1))
    with pytest.raises(ValueError, match=r"attention must have shape \(E, H, 1\) or \(E, H\), got \(3, 2, 2\)"):
        diag.attention_entropy(torch.ones(3, 2, 2))
    with pytest.raises(ValueError, match=r"attention must have shape \(E, H, 1\) or \(E, H\), got \(3,\)"):
        diag.layer_stats(torch.zeros(7, 3), torch.ones(3))
    with pytest.raises(ValueError, match=r"attention has no heads: shape \(3, 0\)"):
        diag.attention_entropy(torch.ones(3, 0))
    with pytest.raises(ValueError, match="the graph has no nodes"):
        GraphDiagnostics(dgl.graph(([], []), num_nodes=0))
    hetero = dgl.heterograph({("a", "r", "b"): (torch.tensor([0]), torch.tensor([0]))})
    with pytest.raises(ValueError, match="graph must be homogeneous"):
        GraphDiagnostics(hetero)


@pytest.mark.parametrize("with_attention", [True, False])
def test_layer_stats_of_sets_are_each_sets_own(with_attention):
    """S layers' outputs side by side (seeds trained together): each set's statistics are
    those of its own output and attention alone, and a NaN set leaves the others alone."""
    dgl.seed(3)
    graph = dgl.add_self_loop(dgl.rand_graph(25, 90))
    torch.manual_seed(0)
    sets, heads, dim = 3, 2, 4
    h = torch.randn(graph.num_nodes(), sets * heads, dim)
    h[:, heads:2 * heads] *= 1e-3  # a set of another scale
    attention = torch.rand(graph.num_edges(), sets * heads, 1) if with_attention else None
    h[4, -1] = float("nan")  # the last set's output has a NaN
    diagnostics = GraphDiagnostics(graph)
    together = diagnostics.layer_stats_of_sets(h, attention, sets=sets)
    assert all(values.shape == (sets,) for values in together.values())
    for s in range(sets):
        own = slice(s * heads, (s + 1) * heads)
        alone = diagnostics.layer_stats_tensors(h[:, own], None if attention is None else attention[:, own])
        assert together.keys() == alone.keys()
        for name, value in alone.items():
            if s == sets - 1 and name != "attention_entropy":
                assert together[name][s].isnan() and value.isnan(), name
            else:
                torch.testing.assert_close(together[name][s], value, rtol=1e-12, atol=0, msg=name)
    with pytest.raises(ValueError, match="h has 24 values per node, not 5 equal sets of them"):
        diagnostics.layer_stats_of_sets(h, None, sets=5)
