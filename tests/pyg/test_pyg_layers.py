"""lipnorm.pyg: PyG's GATConv / TransformerConv with LipschitzNorm.

(a) norm=None is PyG's layer: same outputs and gradients with the same weights.
(b) norm="lip" equals lipnorm's DGL layers (GATConv / GTConv, norm="lip") with the same
    weights on the same graph, and an independent dense float64 loop reference.
(c) GAT's normalised scores are bounded by alpha.
(d) return_attention_weights forms, shapes, repr, bad arguments.

Tolerances, from an error model:
- (a) exact equality (rtol = atol = 0): with norm=None every call is PyG's own code
  (forward, edge_update / message) on the same inputs, op for op, in the same order, so
  the float32 results are bitwise identical.
- (b) float64, rtol = atol = 1e-10: both sides compute the same formula with O(D + deg)
  roundings of u = 2^-53 ~ 1.1e-16 each, in different orders (PyG's gathers and
  scatter vs DGL's SpMM kernels; the dense reference in numpy). The normaliser makes
  the scores O(1) and the softmax / weighted sums are well conditioned on these small
  graphs (condition numbers << 1e4), so the differences are far below
  1e4 * 1e2 * u ~ 1e-12; 1e-10 leaves two orders of margin and still catches any
  formula error (which shows at 1e-2 or so).
"""

from __future__ import annotations

import math
import subprocess
import sys

import dgl
import numpy as np
import pytest
import torch
import torch_geometric.nn as pyg_nn

from lipnorm.nn import GATConv as DGLGATConv
from lipnorm.nn import GTConv
from lipnorm.pyg import GATConv, TransformerConv

F64 = dict(rtol=1e-10, atol=1e-10)
EXACT = dict(rtol=0.0, atol=0.0)
HEADS = [1, 2, 8]
GRAPHS = ["random", "bipartite", "isolated"]


def make_graph(kind: str):
    """``(edge_index, num_src, num_dst)``, no duplicate edges.

    random: 7 nodes, some self-loops already in the list; bipartite: 6 sources, 4
    destinations; isolated: node 5 has no edge at all, node 6 only sends.
    """
    rng = np.random.default_rng({"random": 0, "bipartite": 1, "isolated": 2}[kind])
    num_src, num_dst = {"random": (7, 7), "bipartite": (6, 4), "isolated": (5, 5)}[kind]
    src, dst = np.nonzero(rng.random((num_src, num_dst)) < 0.4)
    if kind == "isolated":
        src, dst, num_src, num_dst = np.append(src, 6), np.append(dst, 0), 7, 7
    return torch.tensor(np.stack([src, dst]), dtype=torch.long), num_src, num_dst


def inputs(kind: str, in_src: int, in_dst: int, dtype=torch.float64, seed: int = 1, scale: float = 1.0):
    """``(x, edge_index, num_dst)``: one feature tensor, or a pair for the bipartite graph."""
    edge_index, num_src, num_dst = make_graph(kind)
    generator = torch.Generator().manual_seed(seed)
    x_src = torch.randn(num_src, in_src, generator=generator, dtype=dtype) * scale
    if kind != "bipartite":
        return x_src, edge_index, num_dst
    return (x_src, torch.randn(num_dst, in_dst, generator=generator, dtype=dtype) * scale), edge_index, num_dst


def randomise(module: torch.nn.Module, seed: int = 0) -> None:
    """Every parameter drawn from N(0, 1) (biases non-zero, so they are tested too)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator, dtype=parameter.dtype))


def gradients(out: torch.Tensor, tensors) -> tuple[torch.Tensor, ...]:
    weights = torch.linspace(-1.0, 1.0, out.numel(), dtype=out.dtype).view(out.shape)
    return torch.autograd.grad((out * weights).sum(), tensors, allow_unused=True)


def leaves(x) -> list[torch.Tensor]:
    return [t for t in (x if isinstance(x, tuple) else (x,))]


def with_grad(x):
    return tuple(t.clone().requires_grad_() for t in x) if isinstance(x, tuple) else x.clone().requires_grad_()


# --- (a) norm=None is PyG's layer ------------------------------------------------------


def pair_of_layers(cls, pyg_cls, *args, **kwargs):
    ours = cls(*args, **kwargs)
    theirs = pyg_cls(*args, **kwargs)
    theirs.load_state_dict(ours.state_dict())
    return ours, theirs


@pytest.mark.parametrize("self_loops", [True, False], ids=["loops", "no-loops"])
@pytest.mark.parametrize("heads", HEADS)
@pytest.mark.parametrize("kind", GRAPHS)
@pytest.mark.parametrize("dims", [(5, 3), (3, 1)])
def test_gat_without_norm_is_pyg(kind, heads, self_loops, dims):
    in_feats, out_feats = dims
    channels = (in_feats, in_feats + 1) if kind == "bipartite" else in_feats
    ours, theirs = pair_of_layers(GATConv, pyg_nn.GATConv, channels, out_feats, heads, add_self_loops=self_loops)
    x, edge_index, _ = inputs(kind, in_feats, in_feats + 1, dtype=torch.float32)
    results = []
    for layer in (ours, theirs):
        xg = with_grad(x)
        out, (edges, attention) = layer(xg, edge_index, return_attention_weights=True)
        results.append((out, edges, attention, gradients(out, [*leaves(xg), *layer.parameters()])))
    for got, expected in zip(results[0][:3], results[1][:3]):
        torch.testing.assert_close(got, expected, **EXACT)
    for got, expected in zip(results[0][3], results[1][3]):
        torch.testing.assert_close(got, expected, **EXACT)


@pytest.mark.parametrize("heads", HEADS)
@pytest.mark.parametrize("kind", GRAPHS)
@pytest.mark.parametrize("options", [{}, {"concat": False, "beta": True}, {"edge_dim": 2}], ids=["plain", "beta", "edge"])
def test_transformer_without_norm_is_pyg(kind, heads, options):
    channels = (4, 5) if kind == "bipartite" else 4
    ours, theirs = pair_of_layers(TransformerConv, pyg_nn.TransformerConv, channels, 3, heads, **options)
    x, edge_index, _ = inputs(kind, 4, 5, dtype=torch.float32)
    edge_attr = torch.randn(edge_index.shape[1], 2) if "edge_dim" in options else None
    results = []
    for layer in (ours, theirs):
        xg = with_grad(x)
        out, (edges, attention) = layer(xg, edge_index, edge_attr, return_attention_weights=True)
        results.append((out, edges, attention, *gradients(out, [*leaves(xg), *layer.parameters()])))
    for got, expected in zip(*results):
        torch.testing.assert_close(got, expected, **EXACT)


# --- (b) norm="lip" equals lipnorm's DGL layers and a dense reference ------------------


def dgl_graph(edge_index: torch.Tensor, num_src: int, num_dst: int, bipartite: bool) -> dgl.DGLGraph:
    src, dst = edge_index
    if bipartite:
        return dgl.heterograph({("_U", "_E", "_V"): (src, dst)}, {"_U": num_src, "_V": num_dst})
    return dgl.graph((src, dst), num_nodes=num_src)


def dgl_gat_like(layer: GATConv) -> DGLGATConv:
    """lipnorm's DGL GATConv(norm="lip") with `layer`'s weights (float64)."""
    bipartite = layer.lin is None
    in_feats = tuple(layer.in_channels) if bipartite else layer.in_channels
    twin = DGLGATConv(
        in_feats, layer.out_channels, layer.heads, negative_slope=layer.negative_slope, allow_zero_in_degree=True,
        bias=layer.bias is not None, norm="lip", alpha=layer.alpha, eps=layer.eps,
    ).double()
    with torch.no_grad():
        if bipartite:
            twin.fc_src.weight.copy_(layer.lin_src.weight)
            twin.fc_dst.weight.copy_(layer.lin_dst.weight)
        else:
            twin.fc.weight.copy_(layer.lin.weight)
        twin.attn_l.copy_(layer.att_src)
        twin.attn_r.copy_(layer.att_dst)
        if layer.bias is not None:
            twin.bias.copy_(layer.bias)
    return twin


def reference_gat(layer: GATConv, x, edge_index, num_dst, edge_attr=None):
    """Scores (E, H), attention (E, H) and output (N_dst, H*D) by loops, float64 numpy,
    on the edges given (self-loops already in them)."""
    heads, dim = layer.heads, layer.out_channels
    x_src, x_dst = x if isinstance(x, tuple) else (x, x)
    lin_src, lin_dst = (layer.lin, layer.lin) if layer.lin is not None else (layer.lin_src, layer.lin_dst)
    hs = (x_src.detach().numpy() @ lin_src.weight.detach().numpy().T).reshape(-1, heads, dim)
    hd = (x_dst.detach().numpy() @ lin_dst.weight.detach().numpy().T).reshape(-1, heads, dim)
    a_s, a_d = layer.att_src.detach().numpy()[0], layer.att_dst.detach().numpy()[0]
    he = None
    if edge_attr is not None:
        he = (edge_attr.numpy() @ layer.lin_edge.weight.detach().numpy().T).reshape(-1, heads, dim)
        a_e = layer.att_edge.detach().numpy()[0]
    src, dst = edge_index.numpy()
    scores, attention = np.zeros((len(src), heads)), np.zeros((len(src), heads))
    out = np.zeros((num_dst, heads, dim))
    for i in range(num_dst):
        edges = np.flatnonzero(dst == i)
        for h in range(heads):
            u2 = a_s[h] @ a_s[h] + a_d[h] @ a_d[h] + (a_e[h] @ a_e[h] if he is not None else 0.0)
            source_side = [hs[src[k], h] @ hs[src[k], h] + (he[k, h] @ he[k, h] if he is not None else 0.0) for k in edges]
            v2 = hd[i, h] @ hd[i, h] + max(source_side, default=0.0)
            for k in edges:
                e = a_s[h] @ hs[src[k], h] + a_d[h] @ hd[i, h] + (a_e[h] @ he[k, h] if he is not None else 0.0)
                bound = math.sqrt(u2 * v2)
                scores[k, h] = layer.alpha * e / bound if bound > layer.eps else 0.0
            if len(edges):
                logits = np.where(scores[edges, h] > 0, scores[edges, h], layer.negative_slope * scores[edges, h])
                w = np.exp(logits - logits.max())
                attention[edges, h] = w / w.sum()
                out[i, h] = attention[edges, h] @ hs[src[edges], h]
    out = out.reshape(num_dst, heads * dim)
    if layer.bias is not None:
        out = out + layer.bias.detach().numpy()
    return (torch.from_numpy(a) for a in (scores, attention, out))


@pytest.mark.parametrize("self_loops", [True, False], ids=["loops", "no-loops"])
@pytest.mark.parametrize("heads", HEADS)
@pytest.mark.parametrize("kind", GRAPHS)
@pytest.mark.parametrize("dims", [(5, 3), (3, 1)])
def test_lipschitz_gat_equals_dgl_layer_and_dense_reference(kind, heads, self_loops, dims):
    in_feats, out_feats = dims
    bipartite = kind == "bipartite"
    channels = (in_feats, in_feats + 1) if bipartite else in_feats
    layer = GATConv(channels, out_feats, heads, add_self_loops=self_loops, norm="lip", alpha=2.5, negative_slope=0.1)
    layer.double()
    randomise(layer)
    x, edge_index, num_dst = inputs(kind, in_feats, in_feats + 1)
    xg = with_grad(x)
    out, (edges, attention) = layer(xg, edge_index, return_attention_weights=True)
    scores = layer.normalized_scores(x, edge_index)
    got_grads = gradients(out, [*leaves(xg), layer.att_src, layer.att_dst])

    # lipnorm's DGL layer on the edges PyG attended over (self-loops included).
    twin = dgl_gat_like(layer)
    graph = dgl_graph(edges, leaves(x)[0].shape[0], num_dst, bipartite)
    xd = with_grad(x)
    dgl_out, dgl_attention = twin(graph, xd, get_attention=True)
    dgl_out = dgl_out.flatten(1)
    torch.testing.assert_close(out, dgl_out, **F64)
    torch.testing.assert_close(attention, dgl_attention[..., 0], **F64)
    torch.testing.assert_close(scores, twin.normalized_scores(graph, x)[..., 0], **F64)
    for got, expected in zip(got_grads, gradients(dgl_out, [*leaves(xd), twin.attn_l, twin.attn_r])):
        torch.testing.assert_close(got, expected, **F64)

    ref_scores, ref_attention, ref_out = reference_gat(layer, x, edges, num_dst)
    for got, expected in ((scores, ref_scores), (attention, ref_attention), (out, ref_out)):
        torch.testing.assert_close(got, expected, **F64)


@pytest.mark.parametrize("heads", [1, 8])
def test_lipschitz_gat_with_edge_features_equals_dense_reference(heads):
    """With edge_dim the edge embedding joins u and v (see GATConv's docstring)."""
    layer = GATConv(5, 3, heads, edge_dim=2, add_self_loops=False, norm="lip", alpha=1.5).double()
    randomise(layer)
    x, edge_index, num_dst = inputs("random", 5, 5)
    edge_attr = torch.randn(edge_index.shape[1], 2, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    out, (_, attention) = layer(x, edge_index, edge_attr, return_attention_weights=True)
    scores = layer.normalized_scores(x, edge_index, edge_attr)
    ref_scores, ref_attention, ref_out = reference_gat(layer, x, edge_index, num_dst, edge_attr)
    for got, expected in ((scores, ref_scores), (attention, ref_attention), (out, ref_out)):
        torch.testing.assert_close(got, expected, **F64)


def gt_like(layer: TransformerConv) -> GTConv:
    """lipnorm's DGL GTConv(norm="lip") with `layer`'s weights (float64)."""
    in_feats = tuple(layer.in_channels) if isinstance(layer.in_channels, tuple) else layer.in_channels
    twin = GTConv(in_feats, layer.out_channels, layer.heads, norm="lip", alpha=layer.alpha).double()
    with torch.no_grad():
        for mine, theirs in (("fc_q", "lin_query"), ("fc_k", "lin_key"), ("fc_v", "lin_value"), ("fc_skip", "lin_skip")):
            getattr(twin, mine).weight.copy_(getattr(layer, theirs).weight)
            getattr(twin, mine).bias.copy_(getattr(layer, theirs).bias)
    return twin


def reference_transformer(layer: TransformerConv, x, edge_index, num_dst, edge_attr=None):
    """Scores, attention (E, H) and output (N_dst, H*D) by loops, float64 numpy (concat,
    root weight, no beta)."""
    heads, dim = layer.heads, layer.out_channels
    x_src, x_dst = x if isinstance(x, tuple) else (x, x)

    def project(lin, features):
        bias = lin.bias.detach().numpy() if lin.bias is not None else 0.0
        return features.detach().numpy() @ lin.weight.detach().numpy().T + bias

    q = project(layer.lin_query, x_dst).reshape(-1, heads, dim)
    k = project(layer.lin_key, x_src).reshape(-1, heads, dim)
    val = project(layer.lin_value, x_src).reshape(-1, heads, dim)
    src, dst = edge_index.numpy()
    keys, values = k[src], val[src]
    if edge_attr is not None:
        embedded = project(layer.lin_edge, edge_attr).reshape(-1, heads, dim)
        keys, values = keys + embedded, values + embedded
    scores, attention = np.zeros((len(src), heads)), np.zeros((len(src), heads))
    out = np.zeros((num_dst, heads, dim))
    for i in range(num_dst):
        edges = np.flatnonzero(dst == i)
        if len(edges) == 0:
            continue
        for h in range(heads):
            u = np.linalg.norm(q[i, h])
            v = max(np.linalg.norm(keys[e, h]) for e in edges)
            w = max(np.linalg.norm(values[e, h]) for e in edges)
            bound = max(u * v, u * w, v * w)
            s = np.array([layer.alpha * (q[i, h] @ keys[e, h]) / bound if bound > 0 else 0.0 for e in edges])
            a = np.exp(s - s.max())
            scores[edges, h], attention[edges, h] = s, a / a.sum()
            out[i, h] = attention[edges, h] @ values[edges, h]
    out = out.reshape(num_dst, heads * dim) + project(layer.lin_skip, x_dst)
    return (torch.from_numpy(a) for a in (scores, attention, out))


@pytest.mark.parametrize("heads", HEADS)
@pytest.mark.parametrize("kind", [*GRAPHS, "random+loops"])
@pytest.mark.parametrize("dims", [(5, 3), (3, 1)])
def test_lipschitz_transformer_equals_gt_layer_and_dense_reference(kind, heads, dims):
    in_feats, out_feats = dims
    bipartite = kind == "bipartite"
    channels = (in_feats, in_feats + 1) if bipartite else in_feats
    layer = TransformerConv(channels, out_feats, heads, norm="lip", alpha=2.5).double()
    randomise(layer)
    x, edge_index, num_dst = inputs(kind.split("+")[0], in_feats, in_feats + 1)
    if kind == "random+loops":  # PyG users add them themselves: torch_geometric.utils.add_self_loops
        from torch_geometric.utils import add_self_loops, remove_self_loops

        edge_index, _ = add_self_loops(remove_self_loops(edge_index)[0], num_nodes=num_dst)
    xg = with_grad(x)
    out, (_, attention) = layer(xg, edge_index, return_attention_weights=True)
    scores = layer.normalized_scores(x, edge_index)

    twin = gt_like(layer)
    graph = dgl_graph(edge_index, leaves(x)[0].shape[0], num_dst, bipartite)
    xd = with_grad(x)
    dgl_out, dgl_attention = twin(graph, xd, get_attention=True)
    dgl_out = dgl_out.flatten(1)
    torch.testing.assert_close(out, dgl_out, **F64)
    torch.testing.assert_close(attention, dgl_attention[..., 0], **F64)
    torch.testing.assert_close(scores, twin.normalized_scores(graph, x)[..., 0], **F64)
    pairs = [("lin_query", "fc_q"), ("lin_key", "fc_k"), ("lin_value", "fc_v")]
    ours = gradients(out, [*leaves(xg), *(getattr(layer, a).weight for a, _ in pairs)])
    theirs = gradients(dgl_out, [*leaves(xd), *(getattr(twin, b).weight for _, b in pairs)])
    for got, expected in zip(ours, theirs):
        torch.testing.assert_close(got, expected, **F64)

    ref_scores, ref_attention, ref_out = reference_transformer(layer, x, edge_index, num_dst)
    for got, expected in ((scores, ref_scores), (attention, ref_attention), (out, ref_out)):
        torch.testing.assert_close(got, expected, **F64)


def test_lipschitz_transformer_with_edge_features_equals_dense_reference():
    layer = TransformerConv(5, 3, 2, edge_dim=2, norm="lip").double()
    randomise(layer)
    x, edge_index, num_dst = inputs("random", 5, 5)
    edge_attr = torch.randn(edge_index.shape[1], 2, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    out, (_, attention) = layer(x, edge_index, edge_attr, return_attention_weights=True)
    scores = layer.normalized_scores(x, edge_index, edge_attr)
    assert scores.abs().max() <= 1.0
    ref_scores, ref_attention, ref_out = reference_transformer(layer, x, edge_index, num_dst, edge_attr)
    for got, expected in ((scores, ref_scores), (attention, ref_attention), (out, ref_out)):
        torch.testing.assert_close(got, expected, **F64)


def test_heads_are_normalised_separately():
    """Scaling head 1's projection leaves head 0's normalised scores unchanged (the
    authors' PyG code mixes the heads; here each head has its own u and v)."""
    layer = GATConv(5, 3, 2, norm="lip").double()
    randomise(layer)
    x, edge_index, _ = inputs("random", 5, 5)
    before = layer.normalized_scores(x, edge_index)
    with torch.no_grad():
        layer.lin.weight[3:] *= 100.0
    after = layer.normalized_scores(x, edge_index)
    torch.testing.assert_close(after[:, 0], before[:, 0], **F64)
    torch.testing.assert_close(after[:, 1], before[:, 1], **F64)  # scale-invariant too


# --- (c) the bound ---------------------------------------------------------------------


@pytest.mark.parametrize("scale", [1e-3, 1e3])
@pytest.mark.parametrize("alpha", [0.5, 1.0])
@pytest.mark.parametrize("heads", HEADS)
@pytest.mark.parametrize("kind", GRAPHS)
def test_gat_scores_are_bounded_by_alpha(kind, heads, alpha, scale):
    channels = (4, 5) if kind == "bipartite" else 4
    layer = GATConv(channels, 3, heads, edge_dim=2, norm="lip", alpha=alpha)
    randomise(layer, seed=heads)
    x, edge_index, _ = inputs(kind, 4, 5, dtype=torch.float32, scale=scale)
    edge_attr = torch.randn(edge_index.shape[1], 2) * scale
    for attr in (None, edge_attr):
        scores = layer.normalized_scores(x, edge_index, attr)
        # float32: the score is e * rsqrt(bound^2) with |e| <= bound exactly, a few
        # roundings of 2^-24 each: 8 ulps of margin.
        assert scores.abs().max() <= alpha * (1 + 8 * 2.0**-24)
    plain = GATConv(channels, 3, heads)
    randomise(plain, seed=heads)
    if scale > 1.0:  # the plain scores are not bounded
        assert plain.normalized_scores(x, edge_index).abs().max() > alpha


def test_zero_features_and_isolated_nodes_give_finite_outputs_and_gradients():
    x = torch.zeros(7, 4, requires_grad=True)
    edge_index, _, _ = make_graph("isolated")
    for layer in (GATConv(4, 3, 2, norm="lip"), GATConv(4, 3, 2, norm="lip", add_self_loops=False),
                  TransformerConv(4, 3, 2, norm="lip", bias=False)):
        out = layer(x, edge_index)
        grads = torch.autograd.grad(out.sum(), [x, *layer.parameters()], allow_unused=True)
        assert torch.isfinite(out).all()
        assert all(torch.isfinite(g).all() for g in grads if g is not None)


# --- (d) forms, shapes, repr, arguments ------------------------------------------------


@pytest.mark.parametrize("norm", [None, "lip"])
def test_return_forms_and_shapes(norm):
    x, edge_index, _ = inputs("random", 4, 4, dtype=torch.float32)
    num_edges = edge_index.shape[1]
    gat = GATConv(4, 3, heads=2, norm=norm)
    assert gat(x, edge_index).shape == (7, 6)
    out, (edges, attention) = gat(x, edge_index, return_attention_weights=True)
    assert out.shape == (7, 6) and edges.shape[0] == 2 and attention.shape == (edges.shape[1], 2)
    assert GATConv(4, 3, heads=2, concat=False, norm=norm)(x, edge_index).shape == (7, 3)
    # a destination-less pair: sources only, as PyG allows
    assert GATConv(4, 3, heads=2, norm=norm)((x, None), edge_index).shape == (7, 6)
    transformer = TransformerConv(4, 3, heads=2, norm=norm)
    out, (edges, attention) = transformer(x, edge_index, return_attention_weights=True)
    assert out.shape == (7, 6) and torch.equal(edges, edge_index) and attention.shape == (num_edges, 2)

    # torch.sparse adjacency (PyG's transposed CSR): PyG reads it back as the edge list, so
    # the same calls on the same values: the same bits; attention as a sparse tensor
    from torch_geometric.utils import to_torch_csc_tensor

    adj = to_torch_csc_tensor(edge_index, size=(7, 7)).t()
    gat_plain = GATConv(4, 3, heads=2, add_self_loops=False, norm=norm)
    expected = gat_plain(x, edge_index)
    out, (sparse_adj, attention) = gat_plain(x, adj, return_attention_weights=True)
    torch.testing.assert_close(out, expected, **EXACT)
    assert sparse_adj.is_sparse_csr or sparse_adj.layout != torch.strided
    torch.testing.assert_close(transformer(x, adj), transformer(x, edge_index), **EXACT)


@pytest.mark.parametrize("norm", [None, "lip"])
def test_an_empty_edge_list_and_an_explicit_size(norm):
    """As PyG's own tests: no edges at all (GAT then attends over the self-loops it adds,
    the transformer over nothing: its skip only), and `size=` for a bipartite pair."""
    x = torch.randn(5, 4)
    empty = torch.empty(2, 0, dtype=torch.long)
    for layer in (GATConv(4, 3, heads=2, norm=norm), TransformerConv(4, 3, heads=2, norm=norm)):
        out = layer(x, empty)
        assert out.shape == (5, 6) and torch.isfinite(out).all()
    torch.testing.assert_close(TransformerConv(4, 3, heads=2, root_weight=False, norm=norm)(x, empty),
                               torch.zeros(5, 6), **EXACT)
    x_src, x_dst = torch.randn(6, 4), torch.randn(3, 4)
    edge_index = torch.tensor([[0, 1, 5, 2], [0, 0, 1, 2]])
    bipartite = GATConv((4, 4), 3, heads=2, add_self_loops=False, norm=norm)
    assert bipartite((x_src, x_dst), edge_index, size=(6, 3)).shape == (3, 6)
    assert TransformerConv((4, 4), 3, heads=2, norm=norm)((x_src, x_dst), edge_index).shape == (3, 6)


def test_repr_is_pygs_whatever_the_norm():
    for norm in (None, "lip"):
        assert repr(GATConv(4, 3, heads=2, norm=norm)) == "GATConv(4, 3, heads=2)" == repr(pyg_nn.GATConv(4, 3, 2))
        assert repr(GATConv((4, 5), 3, norm=norm)) == "GATConv((4, 5), 3, heads=1)"
        assert repr(TransformerConv(4, 3, heads=2, norm=norm)) == "TransformerConv(4, 3, heads=2)"
    layer = GATConv(4, 3, norm="lip", alpha=2)
    assert (layer.norm, layer.alpha, layer.eps) == ("lip", 2.0, 1e-12)
    assert TransformerConv(4, 3, norm="lip").eps == 0.0


def test_same_parameters_as_pyg():
    for ours, theirs in ((GATConv(4, 3, 2, edge_dim=2, norm="lip"), pyg_nn.GATConv(4, 3, 2, edge_dim=2)),
                         (TransformerConv(4, 3, 2, beta=True, norm="lip"), pyg_nn.TransformerConv(4, 3, 2, beta=True))):
        assert isinstance(ours, type(theirs))
        assert {n: p.shape for n, p in ours.named_parameters()} == {n: p.shape for n, p in theirs.named_parameters()}


@pytest.mark.parametrize("cls", [GATConv, TransformerConv])
@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(norm="lipschitz"), "'lipschitz'"),
        (dict(norm="LIP"), "'LIP'"),
        (dict(alpha=-1.0), "-1.0"),
        (dict(alpha=float("nan")), "nan"),
        (dict(eps=-1e-3), "-0.001"),
        (dict(eps=float("inf")), "inf"),
    ],
)
def test_bad_arguments_raise_value_error_naming_the_value(cls, kwargs, message):
    with pytest.raises(ValueError, match=message):
        cls(4, 3, 2, **kwargs)


def test_norm_none_spellings():
    assert GATConv(4, 3, norm="none").norm is None
    assert TransformerConv(4, 3).norm is None


class _Holder(torch.nn.Module):
    """What PyG's own TorchScript tests script: a module calling the layer."""

    def __init__(self, conv):
        super().__init__()
        self.conv = conv

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, (_, attention) = self.conv(x, edge_index, return_attention_weights=True)
        return out, attention


@pytest.mark.parametrize("cls", [GATConv, TransformerConv])
@pytest.mark.parametrize("norm", [None, "lip"])
def test_torchscript_compiles_and_gives_the_eager_numbers(cls, norm):
    """Scripted, the layers run PyG 2.5.3's forward body (no `super()` in TorchScript)
    and autograd's backward of the normaliser: the outputs are those of the eager layer
    (the same ops, exact here), gradients to float64 rounding."""
    layer = cls(4, 3, 2, norm=norm).double()
    randomise(layer)
    x, edge_index, _ = inputs("isolated", 4, 4)
    scripted = torch.jit.script(_Holder(layer))
    xs, xe = with_grad(x), with_grad(x)
    got, expected = scripted(xs, edge_index), _Holder(layer)(xe, edge_index)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, **EXACT)
    torch.testing.assert_close(gradients(got[0], [xs])[0], gradients(expected[0], [xe])[0], **F64)


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_importing_without_pyg_names_the_extra():
    done = _run("import sys; sys.modules['torch_geometric'] = None; import lipnorm.pyg")
    assert done.returncode != 0
    assert "lipnorm.pyg needs torch_geometric: pip install -c constraints.txt 'lipnorm[pyg]'" in done.stderr


def test_importing_imports_no_dgl():
    done = _run("import sys, lipnorm.pyg; print('dgl' in sys.modules)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
