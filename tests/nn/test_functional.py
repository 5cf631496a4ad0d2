"""LipschitzNorm as functions (`lipnorm.nn.functional`): a user's own layer made
Lipschitz with them (docs/layers.md's example), bipartite graphs and blocks, bad inputs; and
the helpers the layers share (the safe 1/sqrt, the neighbour max, the squared norm)."""

import re
from pathlib import Path

import dgl
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lipnorm.nn import GATConv
from lipnorm.nn.functional import (
    VARIANTS,
    inverse_sqrt,
    lipschitz_norm_dot_product,
    lipschitz_norm_linear,
    neighbour_max,
    squared_norm,
)


def test_squared_norm_equals_x_times_x_summed_and_has_the_exact_gradient():
    x = torch.randn(5, 3, 4, dtype=torch.float64, requires_grad=True)
    result = squared_norm(x)
    assert result.shape == (5, 3)
    assert torch.equal(result, (x * x).sum(dim=-1))
    weights = torch.randn(5, 3, dtype=torch.float64)
    (result * weights).sum().backward()
    torch.testing.assert_close(x.grad, 2 * x.detach() * weights.unsqueeze(-1))
    assert torch.autograd.gradcheck(squared_norm, (x.detach().requires_grad_(),))
    assert torch.autograd.gradgradcheck(squared_norm, (x.detach().requires_grad_(),))


def test_inverse_sqrt_is_exact_above_eps_and_zero_with_zero_gradient_at_or_below():
    # eps = 0.5: 0 and 0.25 = eps^2 are neutral (0, gradient 0); 4 and 0.36 are exact.
    squared = torch.tensor([0.0, 0.25, 4.0, 0.36], requires_grad=True)
    result = inverse_sqrt(squared, 0.5)
    result.sum().backward()
    torch.testing.assert_close(result, torch.tensor([0.0, 0.0, 0.5, 1 / 0.6]))
    # d/ds s^(-1/2) = -0.5 s^(-3/2)
    torch.testing.assert_close(squared.grad, torch.tensor([0.0, 0.0, -0.5 / 8, -0.5 / 0.216]))
    above = torch.tensor([4.0, 0.36, 2.0], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda s: inverse_sqrt(s, 0.5), (above,))


def test_inverse_sqrt_with_eps_zero_maps_only_zero_to_zero():
    squared = torch.tensor([0.0, 1e-20, 1.0], requires_grad=True)
    result = inverse_sqrt(squared, 0.0)
    result.sum().backward()
    torch.testing.assert_close(result, torch.tensor([0.0, 1e10, 1.0]))
    assert squared.grad[0] == 0.0 and torch.isfinite(squared.grad).all()


def test_neighbour_max_takes_in_neighbours_and_gives_zero_without_any():
    # Edges 0->1, 2->1, 3->0; node 2 and 3 have no in-edges.
    graph = dgl.graph((torch.tensor([0, 2, 3]), torch.tensor([1, 1, 0])), num_nodes=4)
    values = torch.tensor([[1.0, 7.0], [5.0, 0.0], [3.0, 2.0], [9.0, 4.0]])
    expected = torch.tensor([[9.0, 4.0], [3.0, 7.0], [0.0, 0.0], [0.0, 0.0]])
    assert torch.equal(neighbour_max(graph, values), expected)
    assert not graph.ndata


def test_neighbour_max_gradient_reaches_only_the_argmax_sources():
    # Same graph: node 1's max comes from sources 2 (column 0) and 0 (column 1), node 0's
    # from source 3; nodes 2 and 3 have no in-edges and must send no gradient anywhere
    # (DGL's raw kernel would route theirs to source 0).
    graph = dgl.graph((torch.tensor([0, 2, 3]), torch.tensor([1, 1, 0])), num_nodes=4)
    values = torch.tensor([[1.0, 7.0], [5.0, 0.0], [3.0, 2.0], [9.0, 4.0]], requires_grad=True)
    weights = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]])
    (neighbour_max(graph, values) * weights).sum().backward()
    expected = torch.tensor([[0.0, 4.0], [0.0, 0.0], [3.0, 0.0], [1.0, 2.0]])
    assert torch.equal(values.grad, expected)


# --- LipschitzNorm as functions: a user's own layer (docs/layers.md's) ----------------------

LAYERS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "layers.md"
HEADS = [2, 4, 8]
DIMS = [(5, 3), (6, 1)]


def readme_layer_class():
    """`MyGATLayer` exactly as docs/layers.md prints it (its first python block after the
    heading), so the documented example cannot drift from what is tested."""
    text = LAYERS_PAGE.read_text()
    section = text[text.index("## LipschitzNorm in your own attention layer") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, str(LAYERS_PAGE), "exec"), namespace)
    return namespace["MyGATLayer"]


def random_graph(num_nodes: int, seed: int) -> dgl.DGLGraph:
    """Random edges plus one self-loop per node (every node has an in-edge)."""
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, num_nodes, size=(2, 3 * num_nodes))
    graph = dgl.graph((torch.tensor(src), torch.tensor(dst)), num_nodes=num_nodes)
    return dgl.add_self_loop(dgl.remove_self_loop(graph))


def readme_scores(layer, graph, feat):
    with graph.local_scope():
        return layer.edge_attention(graph, layer.fc(feat).view(-1, layer.num_heads, layer.out_feats))


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    heads=st.sampled_from(HEADS),
    alpha=st.floats(0.0, 100.0),
    feat_exponent=st.floats(-3.0, 4.0),
)
def test_readme_layer_scores_are_bounded_by_alpha(seed, heads, alpha, feat_exponent):
    graph = random_graph(12, seed)
    torch.manual_seed(seed)
    layer = readme_layer_class()(5, 3, heads, alpha=alpha)
    feat = torch.randn(graph.num_nodes(), 5) * 10**feat_exponent
    scores = readme_scores(layer, graph, feat)
    assert scores.shape == (graph.num_edges(), heads, 1)
    assert torch.isfinite(scores).all()
    # float32 rounds e and u v separately: a few ulps beyond alpha (as float32) at most.
    assert scores.abs().max().item() <= torch.tensor(alpha, dtype=torch.float32).item() * (1 + 1e-5)


def readme_layer_and_gatconv(in_feats, out_feats, heads, alpha, dtype=torch.float32):
    """The documented layer and our GATConv (no bias) with the same weights."""
    torch.manual_seed(0)
    mine = readme_layer_class()(in_feats, out_feats, heads, alpha=alpha).to(dtype)
    ours = GATConv(in_feats, out_feats, heads, norm="lip", alpha=alpha, bias=False).to(dtype)
    with torch.no_grad():
        ours.fc.weight.copy_(mine.fc.weight)
        ours.attn_l.copy_(mine.attn_l.view(1, heads, out_feats))
        ours.attn_r.copy_(mine.attn_r.view(1, heads, out_feats))
    return mine, ours


@pytest.mark.parametrize("dims", DIMS)
@pytest.mark.parametrize("heads", HEADS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_readme_layer_equals_gatconv_with_the_same_weights(seed, heads, dims):
    graph = random_graph(10, seed)
    mine, ours = readme_layer_and_gatconv(*dims, heads, alpha=2.5)
    feat = torch.randn(graph.num_nodes(), dims[0])
    # GATConv takes a_l . W h and a_r . W h as one GEMM: equal up to float32 rounding.
    torch.testing.assert_close(readme_scores(mine, graph, feat), ours.normalized_scores(graph, feat), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(mine(graph, feat), ours(graph, feat), rtol=1e-6, atol=1e-6)


def test_readme_layer_gradients_are_finite_non_zero_and_pass_gradcheck():
    graph = random_graph(10, seed=3)
    mine, _ = readme_layer_and_gatconv(5, 3, 4, alpha=1.5)
    feat = torch.randn(graph.num_nodes(), 5, requires_grad=True)
    mine(graph, feat).pow(2).sum().backward()
    for name, grad in [("feat", feat.grad), *((n, p.grad) for n, p in mine.named_parameters())]:
        assert torch.isfinite(grad).all() and grad.abs().sum() > 0, name

    tiny = dgl.add_self_loop(dgl.graph(([0, 1, 2, 3, 0], [1, 2, 3, 0, 2]), num_nodes=4))
    mine, _ = readme_layer_and_gatconv(3, 2, 2, alpha=1.5, dtype=torch.float64)
    names = [name for name, _ in mine.named_parameters()]
    values = [p.detach().clone().requires_grad_() for p in mine.parameters()]
    feat = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)

    def forward(feat, *parameters):
        return torch.func.functional_call(mine, dict(zip(names, parameters)), (tiny, feat))

    assert torch.autograd.gradcheck(forward, (feat, *values))


# --- the functions on bipartite graphs and blocks, against dense loops ------------------


def bipartite_graph(seed: int = 0) -> dgl.DGLGraph:
    """7 source and 5 destination nodes; destination 4 has no in-edge."""
    rng = np.random.default_rng(seed)
    src = torch.tensor(rng.integers(0, 7, size=14))
    dst = torch.tensor(rng.integers(0, 4, size=14))
    return dgl.heterograph({("user", "rates", "item"): (src, dst)}, {"user": 7, "item": 5})


def norms(x: torch.Tensor) -> torch.Tensor:
    return x.double().pow(2).sum(-1)


@pytest.mark.parametrize("heads", [1, 3])
def test_linear_paper_variant_on_a_bipartite_graph_uses_the_destination_norm(heads):
    graph = bipartite_graph()
    torch.manual_seed(0)
    ft_src, ft_dst = torch.randn(7, heads, 4, dtype=torch.float64), torch.randn(5, heads, 4, dtype=torch.float64)
    attn_l, attn_r = torch.randn(heads, 4, dtype=torch.float64), torch.randn(1, heads, 4, dtype=torch.float64)
    e = torch.randn(graph.num_edges(), heads, 1, dtype=torch.float64)

    got = lipschitz_norm_linear(graph, e, (ft_src, ft_dst), attn_l, attn_r, alpha=2.0)

    src, dst = (t.tolist() for t in graph.edges())
    u = (norms(attn_l) + norms(attn_r[0])).sqrt()  # (H,)
    for edge, (j, i) in enumerate(zip(src, dst)):
        neighbour_max = torch.stack([norms(ft_src[k]) for k, d in zip(src, dst) if d == i]).max(0).values
        v = (norms(ft_dst[i]) + neighbour_max).sqrt()
        torch.testing.assert_close(got[edge, :, 0], 2.0 * e[edge, :, 0] / (u * v), rtol=1e-12, atol=0)


def block_of(graph: dgl.DGLGraph, dst_nodes: list[int]):
    """The message-flow block into `dst_nodes`, its source nodes' and its edges' IDs in
    `graph` (to_block wants the frontier: the in-edges of `dst_nodes` only)."""
    frontier = dgl.in_subgraph(graph, torch.tensor(dst_nodes))
    block = dgl.to_block(frontier, dst_nodes=torch.tensor(dst_nodes))
    return block, block.srcdata[dgl.NID], frontier.edata[dgl.EID][block.edata[dgl.EID]]


@pytest.mark.parametrize("variant", VARIANTS)
def test_on_a_block_the_linear_scores_are_those_of_the_full_graph(variant):
    graph = random_graph(10, seed=4)
    block, nodes, edges = block_of(graph, [1, 3, 5])
    torch.manual_seed(1)
    ft = torch.randn(10, 2, 3, dtype=torch.float64)
    attn_l, attn_r = torch.randn(1, 2, 3, dtype=torch.float64), torch.randn(2, 3, dtype=torch.float64)
    e = torch.randn(graph.num_edges(), 2, 1, dtype=torch.float64)
    options = dict(variant=variant, alpha=1.5)

    full = lipschitz_norm_linear(graph, e, ft, attn_l, attn_r, **options)
    # One tensor on a block: its first num_dst_nodes rows are the destinations.
    single = lipschitz_norm_linear(block, e[edges], ft[nodes], attn_l, attn_r, **options)
    pair = (ft[nodes], ft[nodes][: block.num_dst_nodes()])
    assert torch.equal(single, lipschitz_norm_linear(block, e[edges], pair, attn_l, attn_r, **options))
    torch.testing.assert_close(single, full[edges], rtol=1e-12, atol=0)


def test_on_a_block_the_paper_dot_product_scores_are_those_of_the_full_graph():
    graph = random_graph(10, seed=5)
    block, nodes, edges = block_of(graph, [0, 2, 7])
    torch.manual_seed(2)
    q, k, v = (torch.randn(10, 2, 3, dtype=torch.float64) for _ in range(3))
    dot = torch.randn(graph.num_edges(), 2, 1, dtype=torch.float64)

    full = lipschitz_norm_dot_product(graph, dot, q, k, v, alpha=0.5)
    got = lipschitz_norm_dot_product(block, dot[edges], q[block.dstdata[dgl.NID]], k[nodes], v[nodes], alpha=0.5)
    torch.testing.assert_close(got, full[edges], rtol=1e-12, atol=0)


# --- bad inputs -------------------------------------------------------------------------

SMALL = dgl.graph(([0, 1, 2, 3, 0], [1, 2, 3, 0, 2]), num_nodes=4)  # N = 4, E = 5


def linear_inputs(graph, heads=2, dim=3):
    return dict(
        e=torch.zeros(graph.num_edges(), heads, 1),
        ft=torch.zeros(graph.num_nodes(), heads, dim),
        attn_l=torch.zeros(1, heads, dim),
        attn_r=torch.zeros(heads, dim),
    )


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("heads", [1, 3])
@pytest.mark.parametrize("seed", [0, 1])
def test_an_edge_mask_gives_each_head_the_scores_of_its_kept_edges_graph(seed, heads, variant):
    """Head h with `edge_mask[:, h]` scores its kept edges as on the graph of those edges
    (`dgl.edge_subgraph`, self-loops kept), its neighbour maxima over them only."""
    graph = random_graph(12, seed)
    generator = torch.Generator().manual_seed(seed)
    ft = torch.randn(graph.num_nodes(), heads, 4, generator=generator) * torch.rand(graph.num_nodes(), 1, 1, generator=generator)
    attn_l, attn_r = torch.randn(2, 1, heads, 4, generator=generator)
    e = torch.randn(graph.num_edges(), heads, 1, generator=generator)
    src, dst = graph.edges()
    mask = (torch.rand(graph.num_edges(), heads, 1, generator=generator) < 0.5) | (src == dst).view(-1, 1, 1)
    masked = lipschitz_norm_linear(graph, e, ft, attn_l, attn_r, alpha=0.7, variant=variant, edge_mask=mask)
    assert masked.shape == e.shape
    for head in range(heads):
        kept = torch.nonzero(mask[:, head, 0]).squeeze(1)
        subgraph = dgl.edge_subgraph(graph, kept, relabel_nodes=False)
        alone = lipschitz_norm_linear(subgraph, e[kept], ft, attn_l, attn_r, alpha=0.7, variant=variant)
        torch.testing.assert_close(masked[kept, head], alone[:, head], rtol=0, atol=0)
    # Every edge kept: the unmasked scores.
    everything = torch.ones_like(mask)
    torch.testing.assert_close(
        lipschitz_norm_linear(graph, e, ft, attn_l, attn_r, variant=variant, edge_mask=everything),
        lipschitz_norm_linear(graph, e, ft, attn_l, attn_r, variant=variant), rtol=0, atol=0,
    )


@pytest.mark.parametrize(
    "change, message",
    [
        ({"e": torch.zeros(4, 2, 1)}, "e has shape (4, 2, 1); expected (5, 2, 1) for this graph and ft"),
        ({"e": torch.zeros(5, 2)}, "e has shape (5, 2); expected (5, 2, 1) for this graph and ft"),
        ({"ft": torch.zeros(3, 2, 3)}, "ft has shape (3, 2, 3); expected (4, 2, 3) for this graph and ft"),
        ({"ft": torch.zeros(4, 6)}, "ft has shape (4, 6); expected 3 dimensions (N, H, D)"),
        (
            {"attn_l": torch.zeros(1, 2, 4)},
            "attn_l has shape (1, 2, 4); allowed: (1, H, D) = (1, 2, 3) or (H, D) = (2, 3), H and D as in ft",
        ),
        (
            {"attn_r": torch.zeros(3, 3)},
            "attn_r has shape (3, 3); allowed: (1, H, D) = (1, 2, 3) or (H, D) = (2, 3), H and D as in ft",
        ),
        (
            {"ft": (torch.zeros(4, 2, 3), torch.zeros(4, 2, 4))},
            "ft_dst has shape (4, 2, 4); expected (4, 2, 3) for this graph and ft",
        ),
        (
            {"ft": (torch.zeros(4, 2, 3),)},
            "ft must be a tensor or a pair (ft_src, ft_dst), got a sequence of 1",
        ),
        ({"variant": "pyg"}, "unknown variant 'pyg'; allowed: paper, official"),
        ({"alpha": -1.0}, "alpha must be a finite number >= 0, got -1.0"),
        ({"eps": float("inf")}, "eps must be a finite number >= 0, got inf"),
        (
            {"edge_mask": torch.ones(5, 2, dtype=torch.bool)},
            "edge_mask has shape (5, 2); expected (5, 2, 1) for this graph and ft",
        ),
        ({"edge_mask": torch.ones(5, 2, 1)}, "edge_mask must be a bool tensor, got torch.float32"),
    ],
)
def test_lipschitz_norm_linear_rejects_bad_inputs_naming_them(change, message):
    arguments = linear_inputs(SMALL) | change
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        lipschitz_norm_linear(SMALL, **arguments)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"dot": torch.zeros(5, 2, 3)}, "dot has shape (5, 2, 3); expected (5, 2, 1) for this graph and ft"),
        ({"q": torch.zeros(4, 1, 3)}, "q has shape (4, 1, 3); expected (4, 2, 3) for this graph and ft"),
        ({"v": torch.zeros(3, 2, 3)}, "v has shape (3, 2, 3); expected (4, 2, 3) for this graph and ft"),
        ({"k": torch.zeros(4, 6)}, "k has shape (4, 6); expected 3 dimensions (N, H, D)"),
        ({"variant": "paper2"}, "unknown variant 'paper2'; allowed: paper, official"),
        ({"alpha": float("nan")}, "alpha must be a finite number >= 0, got nan"),
    ],
)
def test_lipschitz_norm_dot_product_rejects_bad_inputs_naming_them(change, message):
    arguments = dict(
        dot=torch.zeros(5, 2, 1), q=torch.zeros(4, 2, 3), k=torch.zeros(4, 2, 3), v=torch.zeros(4, 2, 3)
    ) | change
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        lipschitz_norm_dot_product(SMALL, **arguments)
