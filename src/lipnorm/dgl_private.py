"""Every use of DGL's private API (not in its documentation, free to change in any
release), each behind one small named function.

- `graph_structure`, `reverse_structure`: a `DGLGraph`'s structure object
  (`DGLGraph._graph`, a `HeteroGraphIndex`) and its reversal, which the sparse kernels
  below take; `lipnorm.nn.neighbour_sum` caches per structure object (DGL replaces it
  whenever edges or nodes change in place).
- `gspmm`, `gsddmm`: DGL's differentiable g-SpMM and g-SDDMM
  (`dgl.backend.pytorch.sparse`), whose own gradients are differentiable again.
- `twice_differentiable_edge_softmax`: DGL's edge softmax (the autograd function
  `dgl.backend.pytorch.sparse.EdgeSoftmax`, reading its structure from
  `ctx.backward_cache`) with a backward that autograd can differentiate, for the
  Lipschitz probe's Jacobian products.
- `has_device_api`: whether DGL's C library registered a device API
  (`dgl._ffi.function.get_global_func("device_api.<kind>")`): a CUDA build has `cuda`.
- `citation_features_replaced`: DGL's planetoid loader with its feature
  post-processing (`dgl.data.citation_graph._preprocess_features`) replaced.

A DGL release without one of these raises `DGLPrivateAPIError` naming it, where it is
used; `tests/test_dgl_private.py` checks each against DGL's public behaviour, so an
upgrade that changes one fails there first.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import weakref
from collections.abc import Callable, Hashable, Iterator
from typing import Any

import dgl
import torch

__all__ = [
    "DGLPrivateAPIError",
    "citation_features_replaced",
    "edge_softmax",
    "graph_structure",
    "gsddmm",
    "gspmm",
    "has_device_api",
    "per_structure",
    "reverse_structure",
    "twice_differentiable_edge_softmax",
]

SPARSE_MODULE = "dgl.backend.pytorch.sparse"
CITATION_MODULE = "dgl.data.citation_graph"


class DGLPrivateAPIError(RuntimeError):
    """The installed DGL lacks a private API lipnorm uses."""


def _missing(name: str, error: Exception) -> DGLPrivateAPIError:
    return DGLPrivateAPIError(
        f"DGL {dgl.__version__} has no {name} ({type(error).__name__}: {error}); lipnorm uses "
        "this private DGL API (lipnorm.dgl_private): install the DGL version of "
        "constraints.txt, or adapt lipnorm.dgl_private to this one"
    )


def _private(module: str, attribute: str) -> Any:
    """`module.attribute`, or DGLPrivateAPIError naming it."""
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as error:
        raise _missing(f"{module}.{attribute}", error) from None


def graph_structure(graph: dgl.DGLGraph) -> Any:
    """The structure object of `graph` (`DGLGraph._graph`): the same object as long as
    no edge or node is added or removed in place, a new one after."""
    try:
        return graph._graph
    except AttributeError as error:
        raise _missing("DGLGraph._graph", error) from None


def reverse_structure(structure: Any) -> Any:
    """The structure with every edge reversed, edge IDs kept (`HeteroGraphIndex.reverse`)."""
    try:
        reverse = structure.reverse
    except AttributeError as error:
        raise _missing(f"{type(structure).__name__}.reverse", error) from None
    return reverse()


def gspmm(structure: Any, op: str, reduce_op: str, lhs: torch.Tensor | None,
          rhs: torch.Tensor | None) -> torch.Tensor:
    """DGL's differentiable g-SpMM on a structure: per destination node, `reduce_op` over
    its in-edges of `op(lhs[src], rhs[edge])` (`"mul", "sum"` is `dgl.ops.u_mul_e_sum`)."""
    return _private(SPARSE_MODULE, "gspmm")(structure, op, reduce_op, lhs, rhs)


def gsddmm(structure: Any, op: str, lhs: torch.Tensor, rhs: torch.Tensor,
           lhs_target: str = "u", rhs_target: str = "v") -> torch.Tensor:
    """DGL's differentiable g-SDDMM on a structure: per edge, `op` of `lhs` and `rhs` at
    their targets (`u` source, `v` destination, `e` edge; `"dot"` is `dgl.ops.u_dot_v`)."""
    return _private(SPARSE_MODULE, "gsddmm")(structure, op, lhs, rhs, lhs_target, rhs_target)


@functools.lru_cache(maxsize=1)
def _twice_differentiable_edge_softmax_class() -> type:
    edge_softmax = _private(SPARSE_MODULE, "EdgeSoftmax")

    class TwiceDifferentiableEdgeSoftmax(edge_softmax):
        """DGL's edge softmax with a backward that autograd can differentiate again: DGL's
        own backward (the same bits) for a first-order gradient, its formula in
        differentiable g-SpMM and g-SDDMM calls where the gradient is itself recorded
        (create_graph=True)."""

        @staticmethod
        def backward(ctx, grad_out):
            if not torch.is_grad_enabled():
                return edge_softmax.backward(ctx, grad_out)
            try:
                structure = ctx.backward_cache
            except AttributeError as error:
                raise _missing(f"{SPARSE_MODULE}.EdgeSoftmax's ctx.backward_cache", error) from None
            (out,) = ctx.saved_tensors
            weighted = out * grad_out
            total = gspmm(structure, "copy_rhs", "sum", None, weighted)
            grad_score = weighted - gsddmm(structure, "mul", out, total, "e", "v")
            return None, grad_score, None, None

    return TwiceDifferentiableEdgeSoftmax


def edge_softmax(graph: dgl.DGLGraph, scores: torch.Tensor) -> torch.Tensor:
    """`dgl.nn.functional.edge_softmax(graph, scores)` (over each destination's in-edges,
    one edge type), whose backward autograd can differentiate again (double backward,
    Hessian-vector products); first-order gradients are DGL's own, bit for bit."""
    module = importlib.import_module(SPARSE_MODULE)
    try:
        gidx, cast, no_autocast = graph._graph, module._cast_if_autocast_enabled, module._disable_autocast_if_enabled
    except AttributeError as error:
        raise _missing(f"DGLGraph._graph and {SPARSE_MODULE}'s autocast helpers", error) from None
    if gidx.number_of_etypes() != 1:
        raise ValueError(f"edge_softmax takes a graph of one edge type; this one has {gidx.number_of_etypes()}")
    args = cast(gidx, scores, dgl.base.ALL, "dst")
    with no_autocast():
        return _twice_differentiable_edge_softmax_class().apply(*args)


@contextlib.contextmanager
def twice_differentiable_edge_softmax() -> Iterator[None]:
    """Inside: `dgl.nn.functional.edge_softmax` (same values) has a backward that is
    differentiable again (its gradient by DGL's formula, `out * g - out * sum(out * g)`,
    as g-SpMM and g-SDDMM). Swaps a module global: one thread of Python at a time."""
    module = importlib.import_module(SPARSE_MODULE)
    original = _private(SPARSE_MODULE, "EdgeSoftmax")
    module.EdgeSoftmax = _twice_differentiable_edge_softmax_class()
    try:
        yield
    finally:
        module.EdgeSoftmax = original


def has_device_api(kind: str) -> bool:
    """Whether DGL's C library registered device API `kind` (`cpu`; `cuda` in a CUDA
    build), as DGL's runtime looks it up (`device_api.<kind>`)."""
    get_global_func = _private("dgl._ffi.function", "get_global_func")
    return get_global_func(f"device_api.{kind}", allow_missing=True) is not None


@contextlib.contextmanager
def citation_features_replaced(process_features: Callable[[Any], Any]) -> Iterator[None]:
    """Inside: DGL's planetoid loader (`CitationGraphDataset.process`) turns its stacked
    scipy feature matrix into features with `process_features` instead of its own
    `_preprocess_features` (row normalisation, then dense). Swaps a module global: one
    dataset processed at a time."""
    module = importlib.import_module(CITATION_MODULE)
    original = _private(CITATION_MODULE, "_preprocess_features")
    module._preprocess_features = process_features
    try:
        yield
    finally:
        module._preprocess_features = original


# What is derived from a graph's structure alone (lipnorm.nn.neighbour_sum's layouts, the count
# of nodes without in-edges that GATConv checks, the kernels' in-edge index), per graph, built once: a graph's structure
# seldom changes, building a layout costs about as much as the product it serves (0.8 ms
# at Cora), and a count read into Python is a host-device synchronisation on a GPU.
_PER_STRUCTURE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def per_structure(graph: dgl.DGLGraph, key: Hashable, build: Callable[[dgl.DGLGraph], Any]) -> Any:
    """`build(graph)`, computed once per structure of `graph` and `key`, then reused.

    DGL replaces a graph's structure object (`dgl_private.graph_structure`) whenever
    edges or nodes are added or removed in place, so a value is reused only while that
    is the same object; the cache holds graphs weakly (it keeps none alive).
    """
    structure = graph_structure(graph)
    cached = _PER_STRUCTURE.get(graph)
    if cached is None or cached[0] is not structure:
        cached = (structure, {})
        _PER_STRUCTURE[graph] = cached
    if key not in cached[1]:
        cached[1][key] = build(graph)
    return cached[1][key]
