"""`lipnorm.kernels`: each compiled kernel equals the layer's DGL or torch path and the
dense reference, values and gradients, with DropEdge masks and attention dropout."""

from __future__ import annotations

import dgl
import pytest
import torch

from lipnorm import kernels
from lipnorm.kernels import gat_attention, grouped_linear
from lipnorm.nn import GATConv
from tests.nn.test_gat import GRAPHS, make_graph, randomise, reference_gat
from tests.tolerance import UNIT_ROUNDOFF, assert_within

INPUTS = ("random", "all-zero", "zero-rows")

# Tolerances: the error model of tests/tolerance.py (rtol = 2 k u, atol = rtol * scale; for
# gradients the scale is the largest of the layer's: attn_r's is zero but for rounding where
# the LeakyReLU is linear over a node's in-edges). Each k is a power of two >= 2x the largest
# |float32 path - float64| / (u (|x| + scale)) measured, every float32 path against the same
# computation in float64, over all the test's parametrisations under 6 summation orders of
# torch and MKL (ATEN_CPU_CAPABILITY default, AVX2, AVX-512; MKL_CBWR COMPATIBLE, AVX2; 1 and
# 2 threads); a float64 comparison takes the same k at u = 2^-53 (its measured |difference|,
# stated beside it, within that k). The kernels' own bits are the same on every CPU.


def gradient_scale(gradients) -> float:
    return max(grad.abs().max().item() for grad in gradients)


def features(kind: str, nodes: int, size: int, dtype: torch.dtype) -> torch.Tensor:
    """Random, all-zero (the missing-features setting's worst case: every bound is 0),
    random with every other row zero (nodes whose projections are 0 beside others'), or
    random and wide (exponentials below float32's range: the kernel's exp gives 0)."""
    feat = torch.randn(nodes, size, dtype=dtype)
    if kind == "all-zero":
        return torch.zeros_like(feat)
    if kind == "zero-rows":
        feat[::2] = 0
    if kind == "wide":  # scores hundreds apart: softmax weights below float32's range
        feat = feat * 60
    return feat


def layer_pair(in_feats, out_feats, heads, norm, dtype, **options) -> GATConv:
    layer = GATConv(in_feats, out_feats, heads, norm=norm, fused=True, **options)
    randomise(layer)
    return layer.to(dtype)


def run(layer: GATConv, graph, feat, fused_path: bool, **attend):
    """Output and gradients of (fc, attn_l, attn_r, bias) of a fixed weighted sum."""
    layer.fused = fused_path
    layer.zero_grad()
    if attend:
        with graph.local_scope():
            _, ft = layer._project(graph, feat)
            out, _ = layer._attend(graph, ft, **attend)
    else:
        out = layer(graph, feat)
    weights = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view(out.shape)
    (out * weights).sum().backward()
    return out.detach(), [p.grad.clone() for p in layer.parameters() if p.grad is not None]


def test_the_kernel_builds_here():
    # The suite's machines have a C compiler; the fast path is what the grids use.
    assert kernels.unavailable() is None


# k measured: output 5.2, and 18 where the inputs are wide (scores hundreds apart: a
# score's rounding, u |score|, is magnified by exp for the runner-up neighbours); the
# gradients 71 (attn_l on the star, three heads of 6: the softmax's backward
# a_ij (g_ij - sum_k a_ik g_ik) cancels over the centre's ten in-edges; wide 57). In
# float64 the paths differ by at most 2.9 (output) and 34 (gradients).
FUSED_CONDITION = {"output": 16, "wide output": 64, "gradients": 256}


@pytest.mark.parametrize(
    "dtype, inputs, out_feats",
    [(torch.float64, kind, 3) for kind in INPUTS]
    + [(torch.float32, "random", 16), (torch.float32, "wide", 16)]
    # the sizes compiled apart besides 16: the output layer's on Cora and CiteSeer
    + [(dtype, "random", size) for dtype in (torch.float64, torch.float32) for size in (7, 6)],
    ids=[f"f64-{kind}" for kind in INPUTS] + ["f32-random-D16", "f32-wide-D16"]
    + [f"{name}-random-D{size}" for name in ("f64", "f32") for size in (7, 6)],
)
@pytest.mark.parametrize("norm, alpha", [("none", 1.0), ("lip", 1.0), ("lip", 0.3)])
@pytest.mark.parametrize("num_heads", [1, 3])
@pytest.mark.parametrize("graph_name", GRAPHS)
def test_fused_equals_the_dgl_path_values_and_gradients(graph_name, num_heads, norm, alpha, dtype, inputs, out_feats):
    graph = make_graph(graph_name, self_loops=True)
    torch.manual_seed(0)
    layer = layer_pair(5, out_feats, num_heads, norm, dtype, alpha=alpha, negative_slope=0.1)
    feat = features(inputs, graph.num_nodes(), 5, dtype)
    plain, plain_grads = run(layer, graph, feat, fused_path=False)
    fast, fast_grads = run(layer, graph, feat, fused_path=True)
    assert_within(fast, plain, FUSED_CONDITION["wide output" if inputs == "wide" else "output"])
    assert len(fast_grads) == len(plain_grads) == 4
    scale = gradient_scale(plain_grads)
    for got, expected in zip(fast_grads, plain_grads):
        assert_within(got, expected, FUSED_CONDITION["gradients"], scale)


@pytest.mark.parametrize("num_heads", [1, 2])
@pytest.mark.parametrize("norm", ["none", "lip"])
@pytest.mark.parametrize("graph_name", GRAPHS)
def test_fused_equals_the_dense_reference(graph_name, norm, num_heads):
    graph = make_graph(graph_name, self_loops=True)
    torch.manual_seed(2)
    layer = layer_pair(5, 3, num_heads, norm, torch.float64, alpha=2.5)
    layer.eval()
    feat = torch.randn(graph.num_nodes(), 5, dtype=torch.float64)
    expected, _, _ = reference_gat(layer, graph, feat)
    # k measured: the kernel 0.92, DGL's path 1.7 (float32); the loops' float64 reference
    # and the kernel differ by 1.1 -> 4.
    assert_within(layer(graph, feat), expected, 4)


@pytest.mark.parametrize("training", [False, True], ids=["eval", "train-dropout"])
@pytest.mark.parametrize("norm", ["none", "lip"])
@pytest.mark.parametrize("graph_name", GRAPHS)
def test_attention_without_autograd_equals_the_dgl_paths(graph_name, norm, training):
    """Where autograd does not record (the layer statistics' evaluation), the kernel
    returns the attention too: DGL's, by edge ID, after dropout (the same mask)."""
    graph = make_graph(graph_name, self_loops=True)
    torch.manual_seed(7)
    layer = layer_pair(5, 4, 3, norm, torch.float64, attn_drop=0.5)
    layer.train(training)
    feat = torch.randn(graph.num_nodes(), 5, dtype=torch.float64)
    results = {}
    for fused_path in (False, True):
        layer.fused = fused_path
        torch.manual_seed(11)
        with torch.no_grad():
            results[fused_path] = layer(graph, feat, get_attention=True)
    (plain, plain_attention), (fast, fast_attention) = results[False], results[True]
    assert fast_attention.shape == (graph.num_edges(), 3, 1)
    # k measured (float32, the same masks): attention 2.6, output 3.1 -> 8; in float64 the
    # paths differ by 0.7 and 1.2.
    assert_within(fast_attention, plain_attention, 8)
    assert_within(fast, plain, 8)


@pytest.mark.parametrize("gap", [0.0, 0.1, 1.0, 3.3, 10.0, 42.0, 80.0, 87.0, 88.0, 100.0, 200.0])
def test_float32_softmax_weights_against_float64(gap):
    """The kernel's float32 exp (a polynomial, not libm's): node 0's two in-edges scored 0
    and -gap get softmax weights within 1 ulp-scale of float64's; weights below float32's
    normal range (gap > 87.3) are 0, where libm gives a denormal (< 1e-38)."""
    graph = dgl.graph(([1, 2], [0, 0]), num_nodes=3)
    ft = torch.zeros(3, 1, 2)
    ft[2, 0, 0] = -gap  # score_j = a_l . ft_j = ft_j[0], a_r = 0, slope 1: no LeakyReLU
    attn_l, attn_r = torch.tensor([[[1.0, 0.0]]]), torch.zeros(1, 1, 2)
    with torch.no_grad():
        _, attention = gat_attention(graph, ft, attn_l, attn_r, negative_slope=1.0, get_attention=True)
    small = ft[2, 0, 0].double().exp()  # of the float32 score the kernel sees
    expected = torch.stack([1 / (1 + small), small / (1 + small)])  # float64: exact here
    if gap > 87.34:
        assert attention[1].item() == 0 and expected[1].item() < 1e-37
        assert attention[0].item() == 1
    else:
        # One path against the exact weights, relative (no floor: each weight to its own
        # digits): within k u, u = 2^-24, k = 2 >= 2x the 0.81 measured over these gaps
        # (the exp's polynomial, the sum and the division; the kernel's bits are the same
        # on every CPU).
        torch.testing.assert_close(attention.view(2).double(), expected, rtol=2 * UNIT_ROUNDOFF[torch.float32], atol=0)


def test_attention_under_autograd_stays_differentiable():
    """With autograd recording, get_attention takes DGL's path: its attention has a gradient."""
    graph = make_graph("random", self_loops=True)
    layer = layer_pair(5, 4, 2, "lip", torch.float64)
    _, attention = layer(graph, torch.randn(graph.num_nodes(), 5, dtype=torch.float64), get_attention=True)
    attention.sum().backward()
    assert layer.attn_l.grad is not None


@pytest.mark.parametrize("seeds, heads_per_seed", [(2, 1), (3, 2)])
@pytest.mark.parametrize("norm", ["none", "lip"])
def test_per_seed_edge_masks_equal_the_dgl_path(norm, seeds, heads_per_seed):
    """DropEdge of seeds trained together: head group s sees the edges `kept[:, s]` only."""
    dgl.seed(3)  # the graph the tolerances below were measured on
    graph = dgl.add_self_loop(dgl.remove_self_loop(dgl.rand_graph(30, 120)))
    torch.manual_seed(3)
    layer = layer_pair(4, 6, seeds * heads_per_seed, norm, torch.float64)
    feat = torch.randn(30, 4, dtype=torch.float64)
    kept = torch.rand(graph.num_edges(), seeds) < 0.6
    src, dst = graph.edges()
    kept[src == dst] = True  # DropEdge keeps every node's self-loop
    plain, plain_grads = run(layer, graph, feat, fused_path=False, head_mask=kept)
    fast, fast_grads = run(layer, graph, feat, fused_path=True, head_mask=kept)
    # k measured (float32): output 2.8 -> 8, gradients 43 -> 128; in float64 the paths
    # differ by 1.6 and 12. (Over 60 other random graphs: up to 6.6 and 46.)
    assert_within(fast, plain, 8)
    scale = gradient_scale(plain_grads)
    for got, expected in zip(fast_grads, plain_grads):
        assert_within(got, expected, 128, scale)
    # and seed 0 alone on the graph of its kept edges gives its heads' numbers
    alone = GATConv(4, 6, heads_per_seed, norm=norm, bias=False).double()
    with torch.no_grad():
        alone.fc.weight.copy_(layer.fc.weight[: heads_per_seed * 6])
        alone.attn_l.copy_(layer.attn_l[:, :heads_per_seed])
        alone.attn_r.copy_(layer.attn_r[:, :heads_per_seed])
    subgraph = dgl.edge_subgraph(graph, kept[:, 0], relabel_nodes=False)
    # k measured: 3.5 (DGL's path on the subgraph, float32) -> 8; in float64 they differ by 1.4
    assert_within(fast[:, :heads_per_seed], alone(subgraph, feat), 8)


@pytest.mark.parametrize("norm", ["none", "lip"])
def test_attention_dropout_draws_nn_dropouts_masks(norm):
    """In training the fused layer draws the mask nn.Dropout draws, from the same stream."""
    graph = make_graph("random", self_loops=True)
    torch.manual_seed(4)
    layer = layer_pair(5, 4, 2, norm, torch.float32, attn_drop=0.5, feat_drop=0.2)
    layer.train()
    feat = torch.randn(graph.num_nodes(), 5)
    torch.manual_seed(10)
    plain, plain_grads = run(layer, graph, feat, fused_path=False)
    plain_stream = torch.get_rng_state()
    torch.manual_seed(10)
    fast, fast_grads = run(layer, graph, feat, fused_path=True)
    # k measured (float32 against float64 with the same masks): output 2.7 -> 8, gradients
    # 13 -> 32; in float64 the paths differ by 0.9 and 7.3.
    assert_within(fast, plain, 8)
    scale = gradient_scale(plain_grads)
    for got, expected in zip(fast_grads, plain_grads):
        assert_within(got, expected, 32, scale)
    assert torch.equal(torch.get_rng_state(), plain_stream)  # as many draws: later runs unchanged
    layer.eval()
    assert not torch.allclose(layer(graph, feat), fast)  # the masks dropped something


@pytest.mark.parametrize("norm", ["none", "lip"])
def test_gradcheck_with_masks_and_dropout(norm):
    graph = dgl.add_self_loop(dgl.remove_self_loop(dgl.rand_graph(12, 40)))
    torch.manual_seed(5)
    ft = torch.randn(12, 4, 3, dtype=torch.float64, requires_grad=True)
    attn_l = torch.randn(1, 4, 3, dtype=torch.float64, requires_grad=True)
    attn_r = torch.randn(1, 4, 3, dtype=torch.float64, requires_grad=True)
    kept = torch.rand(graph.num_edges(), 2) < 0.7
    src, dst = graph.edges()
    kept[src == dst] = True
    drop = (torch.rand(graph.num_edges(), 4, 1) < 0.5).double() * 2

    def attention(ft, attn_l, attn_r):
        return gat_attention(graph, ft, attn_l, attn_r, norm=norm, alpha=0.7, kept=kept, heads_per_seed=2, drop=drop)

    assert torch.autograd.gradcheck(attention, (ft, attn_l, attn_r))


def test_a_diverged_seed_leaves_the_others_alone():
    graph = dgl.add_self_loop(dgl.remove_self_loop(dgl.rand_graph(20, 60)))
    torch.manual_seed(6)
    ft = torch.randn(20, 2, 4)
    attn = torch.randn(1, 2, 4), torch.randn(1, 2, 4)
    clean = gat_attention(graph, ft, *attn, norm="lip")
    ft[3, 0] = float("nan")
    poisoned = gat_attention(graph, ft, *attn, norm="lip")
    torch.testing.assert_close(poisoned[:, 1], clean[:, 1], rtol=0, atol=0)
    assert poisoned[:, 0].isnan().any()


def test_bad_arguments_are_named():
    graph = dgl.add_self_loop(dgl.rand_graph(5, 8))
    ft, attn = torch.randn(5, 4, 2), torch.randn(1, 4, 2)
    with pytest.raises(ValueError, match=r"unknown norm 'pair'; allowed: none, lip"):
        gat_attention(graph, ft, attn, attn, norm="pair")
    with pytest.raises(ValueError, match=r"4 heads are not whole seeds of 3 heads each"):
        gat_attention(graph, ft, attn, attn, heads_per_seed=3)
    with pytest.raises(ValueError, match=r"kept is a torch.float32 tensor of shape \(13, 2\); expected bool \(E, S\) = \(13, 2\)"):
        gat_attention(graph, ft, attn, attn, heads_per_seed=2, kept=torch.ones(13, 2))
    with pytest.raises(ValueError, match=r"attn_r is a torch.float64 tensor of shape \(1, 4, 2\) on cpu; expected "
                       r"torch.float32 \(4, 2\) values on cpu, as ft"):
        gat_attention(graph, ft, attn, attn.double())  # the kernel would read float32 where float64 lies
    with pytest.raises(ValueError, match=r"attn_l is a torch.float32 tensor of shape \(1, 4, 3\)"):
        gat_attention(graph, ft, torch.randn(1, 4, 3), attn)
    with pytest.raises(ValueError, match=r"ft has shape \(6, 4, 2\); expected 5 rows, one per node"):
        gat_attention(graph, torch.randn(6, 4, 2), attn, attn)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
# 16 -> 16, 7 and 6 are compiled apart (a hidden layer; the output layer on Cora, CiteSeer)
@pytest.mark.parametrize("groups, size_in, size_out", [(1, 16, 16), (5, 16, 16), (5, 16, 7), (2, 16, 6), (3, 7, 2), (2, 7, 16)])
def test_grouped_linear_equals_each_groups_own_product(groups, size_in, size_out, dtype):
    torch.manual_seed(7)
    x = torch.randn(40, groups, size_in, dtype=dtype, requires_grad=True)
    weight = torch.randn(groups, size_out, size_in, dtype=dtype, requires_grad=True)
    out = grouped_linear(x, weight)
    # independent reference: each group's own nn.functional.linear
    expected = torch.stack([torch.nn.functional.linear(x[:, s], weight[s]) for s in range(groups)], dim=1)
    # Sums of I (values), O (the input's gradient) and N = 40 (the weight's) products: k
    # measured 3.2 (the weight's gradient; values 1.7) -> 8; in float64 the paths differ by
    # at most 0.85.
    assert_within(out, expected, 8)
    upstream = torch.randn_like(out)
    got = torch.autograd.grad((out * upstream).sum(), (x, weight))
    want = torch.autograd.grad((expected * upstream).sum(), (x, weight))
    for a, b in zip(got, want):
        assert_within(a, b, 8)


@pytest.mark.parametrize("nodes", [12, 3000])
def test_grouped_linear_of_a_non_contiguous_input_is_its_contiguous_copys(nodes):
    """A strided `x` (here seed-major memory seen node-major) is read from its contiguous
    copy, held while the kernel runs: the same bits as the contiguous input's."""
    torch.manual_seed(3)
    x = torch.randn(5, nodes, 16).transpose(0, 1)
    weight = torch.randn(5, 16, 16)
    assert not x.is_contiguous()
    for _ in range(3):  # the freed memory of a temporary copy would be reused by then
        assert torch.equal(grouped_linear(x, weight), grouped_linear(x.contiguous(), weight))


def test_grouped_linear_gradcheck_and_bad_shapes():
    x = torch.randn(6, 2, 3, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(2, 4, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(grouped_linear, (x, weight))
    with pytest.raises(ValueError, match=r"x has shape \(6, 2, 3\) and weight \(3, 4, 3\); expected \(N, S, I\) and \(S, O, I\)"):
        grouped_linear(x, torch.randn(3, 4, 3, dtype=torch.float64))


@pytest.mark.parametrize("width", [4, 6, 7, 16])  # 6, 7 and 16, the grids' widths, are compiled apart
@pytest.mark.parametrize("affine", [True, False], ids=["affine", "plain"])
@pytest.mark.parametrize("batch", [True, False], ids=["batch-statistics", "running-statistics"])
def test_dgn_kernel_gradcheck(batch, affine, width):
    """DGN's output (the input plus its groups' BatchNorms, weighted) in the kernel:
    float64 gradients of the assignment, the features and the affine parameters against
    finite differences, with the batch's statistics (their gradients too) or given ones."""
    torch.manual_seed(8)
    sets, groups, nodes = 2, 3, 7
    a = torch.softmax(torch.randn(sets, groups, nodes, dtype=torch.float64), dim=1).requires_grad_()
    x = (torch.randn(nodes, sets, width, dtype=torch.float64) * 2 + 1).requires_grad_()
    weight = torch.randn(sets * groups * width, dtype=torch.float64, requires_grad=True) if affine else None
    bias = torch.randn(sets * groups * width, dtype=torch.float64, requires_grad=True) if affine else None
    running = None if batch else (torch.rand(sets * groups * width, dtype=torch.float64),
                                  torch.rand(sets * groups * width, dtype=torch.float64) + 0.5)

    def terms(*inputs):
        affine_inputs = inputs[2:] if affine else (None, None)
        out, _, _ = kernels.dgn_output(*inputs[:2], *affine_inputs, 1e-5, 0.7, running)
        return out

    inputs = (a, x, weight, bias) if affine else (a, x)
    assert torch.autograd.gradcheck(terms, inputs)
