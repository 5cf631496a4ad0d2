"""The attention-weighted sum over in-neighbours as one sparse x dense matrix product.

Every attention layer here ends with, per destination node i and head h,

    out_ih = sum_{j -> i} a_jih x_jh        (a: (E, H, 1) weights, x: (N, H, D) features)

which DGL writes ``graph.update_all(fn.u_mul_e("x", "a", "m"), fn.sum("m", "out"))``.
DGL's CPU g-SpMM kernel broadcasts each scalar weight over D itself: at Cora, 8 heads x
64, 17 ms forward and backward per layer, a third of a training step beyond its GEMMs.
Ordered so that row ``i * H + h`` of a sparse matrix holds head h's weights of node i's
in-edges, the same sum is one CSR x dense product with the features viewed as
``(N * H, D)`` (no copy), which PyTorch's sparse kernel vectorises over D: 7.8 ms
forward and backward (2.4 -> 1.1 ms at 8 x 8). It adds a node's in-edges in the order
of DGL's in-edge (CSC) index, as DGL does, so the output and its gradient in x are
bit-identical to DGL's where MKL's sparse product sums in that order (under
`MKL_CBWR=COMPATIBLE`; by default AVX-512 Xeons' kernel reorders, float32 rounding apart); the gradient in the weights (a dot product over D per edge)
equals DGL's to float rounding (tested).

Homogeneous graphs, bipartite graphs and blocks all take this path, with one exception:
a block of fewer than `BLOCK_MIN_FEATURES` features per head takes DGL's kernel. In
mini-batch training every step brings new blocks, whose two layouts (forward and
backward) are built for one forward and backward; on the input block of a sampled Cora
batch (7.4k edges, 8 heads) that pays for itself from D = 32 on: DGL / ours per fwd+bwd
0.69 at D = 8, 0.94 at 16, 1.02 at 32, 1.38 at 64 (`benchmarks/sampled_blocks.py`).
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import dgl
import torch

from lipnorm.dgl_private import graph_structure, gsddmm, gspmm, per_structure, reverse_structure

__all__ = ["neighbour_weighted_sum"]

# PyTorch warns, once per process, that its CSR tensors are beta; only the long-standing
# CSR x dense products are used here, so that warning is spent here, silently.
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    torch.sparse_csr_tensor(torch.zeros(2, dtype=torch.int64), torch.zeros(0, dtype=torch.int64), torch.zeros(0), (1, 1))


class _Layout(NamedTuple):
    """A CSR matrix of `rows * heads` x `cols * heads` whose row ``i * heads + h`` holds
    head h of row i's edges: its index arrays, where each stored value comes from in the
    flattened ``(E, H)`` weights (`source`), and where each weight is stored (`target`)."""

    crow: torch.Tensor
    col: torch.Tensor
    source: torch.Tensor
    target: torch.Tensor
    shape: tuple[int, int]

    def matrix(self, weights: torch.Tensor) -> torch.Tensor:
        return torch.sparse_csr_tensor(self.crow, self.col, weights.reshape(-1).index_select(0, self.source), self.shape)


def _head_interleaved(indptr, indices, eids, heads: int, num_cols: int) -> _Layout:
    """`_Layout` from a compressed adjacency (`indptr` over rows, column `indices`, edge
    IDs `eids`, as `DGLGraph.adj_tensors` returns), each row's entries kept in order.

    Built in 32-bit integers where the sizes allow (half the memory, and the sparse
    kernels take them as they are), scattered with the 64-bit indices `scatter_` takes,
    4x faster than indexed assignment: mini-batch training builds two layouts for every
    new block (0.9 -> 0.3 ms each at 8 heads on a sampled Cora block of 7.4k edges).
    """
    device = indptr.device
    num_rows, num_edges = indptr.numel() - 1, indices.numel()
    dtype = torch.int32 if heads * max(num_rows, num_cols, num_edges) < 2**31 else torch.int64
    indptr, indices, eids = indptr.to(dtype), indices.to(dtype), eids.to(dtype)
    degree = indptr[1:] - indptr[:-1]
    row = torch.repeat_interleave(torch.arange(num_rows, dtype=dtype, device=device), degree, output_size=num_edges)
    head = torch.arange(heads, dtype=dtype, device=device)
    # Entry k of row i moves to heads * start_i + h * degree_i + (k - start_i) for head h.
    base = torch.arange(num_edges, dtype=dtype, device=device).add_(indptr.index_select(0, row), alpha=heads - 1)
    position = torch.addcmul(base.unsqueeze(1), degree.index_select(0, row).unsqueeze(1), head).flatten()
    weight_index = (eids.unsqueeze(1) * heads + head).flatten()  # into the flattened (E, H)
    scatter_position = position.long()
    col = torch.empty_like(position).scatter_(0, scatter_position, (indices.unsqueeze(1) * heads + head).flatten())
    source = torch.empty_like(position).scatter_(0, scatter_position, weight_index)
    target = torch.empty_like(position).scatter_(0, weight_index.long(), position)
    crow = torch.cat([indptr.new_zeros(1), degree.repeat_interleave(heads).cumsum(0, dtype=dtype)])
    return _Layout(crow, col, source, target, (num_rows * heads, num_cols * heads))


def _layout(graph: dgl.DGLGraph, heads: int, transposed: bool) -> _Layout:
    def build(graph: dgl.DGLGraph) -> _Layout:
        if transposed:  # rows = source nodes, columns = destination nodes
            return _head_interleaved(*graph.adj_tensors("csr"), heads, graph.num_dst_nodes())
        return _head_interleaved(*graph.adj_tensors("csc"), heads, graph.num_src_nodes())

    return per_structure(graph, ("layout", heads, transposed), build)


def _product(layout: _Layout, weights: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    rows = layout.shape[0] // x.shape[1]
    return torch.sparse.mm(layout.matrix(weights), x.reshape(-1, x.shape[-1])).view(rows, *x.shape[1:])


class _NeighbourWeightedSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, graph, x, weights):
        ctx.graph = graph
        ctx.save_for_backward(x, weights)
        return _product(_layout(graph, x.shape[1], transposed=False), weights, x)

    @staticmethod
    def backward(ctx, grad):
        x, weights = ctx.saved_tensors
        if torch.is_grad_enabled():
            return (None, *_differentiable_backward(ctx, x, weights, grad))
        grad = grad.contiguous()
        grad_x = grad_weights = None
        if ctx.needs_input_grad[1]:
            # d out / d x: the same sum over the reversed edges.
            grad_x = _product(_layout(ctx.graph, x.shape[1], transposed=True), weights, grad)
        if ctx.needs_input_grad[2]:
            # d out_ih / d a_jih = x_jh: per edge and head, the dot product of x_jh and
            # the gradient of out_ih, over the forward matrix's stored entries, back in
            # edge-ID order. (DGL's u_dot_v gives the same up to the order of the D-term
            # sums, at 1/3.5 of the time at D = 64 and about the same at D = 8.)
            layout = _layout(ctx.graph, x.shape[1], transposed=False)
            products = torch.sparse.sampled_addmm(
                layout.matrix(weights), grad.view(-1, grad.shape[-1]), x.view(-1, x.shape[-1]).t(), beta=0.0
            )
            grad_weights = products.values().index_select(0, layout.target).view(weights.shape)
        return None, grad_x, grad_weights


def _differentiable_backward(ctx, x, weights, grad):
    """The gradients by DGL's own formulas, as differentiable DGL ops.

    Under ``create_graph=True`` (double backward: the Lipschitz probe's Jacobian
    products) the gradients must have derivatives, which the CSR products lack. These are
    the two operations DGL's g-SpMM backward uses (the sum over the reversed edges, a dot
    product per edge), each an autograd function of its own. First-order training never
    comes here.
    """
    structure = graph_structure(ctx.graph)
    grad_x = gspmm(reverse_structure(structure), "mul", "sum", grad, weights) if ctx.needs_input_grad[1] else None
    grad_weights = gsddmm(structure, "dot", x, grad) if ctx.needs_input_grad[2] else None
    return grad_x, grad_weights


# Fewest features per head for which a block takes the CSR product (module docstring).
BLOCK_MIN_FEATURES = 32


def neighbour_weighted_sum(graph: dgl.DGLGraph, x: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Per destination node and head, the sum of source features weighted per edge.

    ``out[i, h] = sum over edges e = (j -> i) of weights[e, h] * x[j, h]``, what
    ``graph.update_all(fn.u_mul_e("x", "a", "m"), fn.sum("m", "out"))`` computes, with the
    same bits, as one sparse x dense product on the CPU (see the module docstring; on
    other devices, where that speed-up was not measured, and on blocks of fewer than
    `BLOCK_MIN_FEATURES` features per head, where it does not pay, it is DGL's kernel).
    Nodes without in-edges get 0. Gradients flow to `x` and `weights`.

    Parameters
    ----------
    graph : DGLGraph
        Homogeneous, bipartite or a block (one edge type).
    x : (num_src_nodes, H, D) tensor
    weights : (E, H, 1) tensor, in edge-ID order, of x's dtype and device

    Returns
    -------
    (num_dst_nodes, H, D) tensor
    """
    if x.dim() != 3 or x.shape[0] != graph.num_src_nodes():
        raise ValueError(f"x has shape {tuple(x.shape)}; expected (num_src_nodes, H, D) with num_src_nodes = {graph.num_src_nodes()}")
    if tuple(weights.shape) != (graph.num_edges(), x.shape[1], 1):
        raise ValueError(f"weights has shape {tuple(weights.shape)}; expected (E, H, 1) = {(graph.num_edges(), x.shape[1], 1)}")
    if weights.dtype != x.dtype:
        raise ValueError(f"weights are {weights.dtype} and x is {x.dtype}; they must have the same dtype")
    if x.device.type != "cpu" or (graph.is_block and x.shape[-1] < BLOCK_MIN_FEATURES):
        return dgl.ops.u_mul_e_sum(graph, x, weights)
    return _NeighbourWeightedSum.apply(graph, x.contiguous(), weights)
