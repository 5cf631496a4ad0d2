"""Compiled CPU kernels for grids of small runs (issue: grids of small runs): GAT's
attention, the seeds' projections, DGN's grouped BatchNorm and PairNorm.

On the literature protocol's networks (1 head x 16 features, Cora-sized graphs) a GAT
layer does almost no arithmetic: its cost is the dozen graph and element-wise calls
between the projection and the output (scores, LipschitzNorm's maxima, LeakyReLU, edge
softmax, attention dropout, neighbour sum, and as many backward), each of which walks
the edges or the nodes once more. `gat_attention` does all of them in one call, forward
and backward, walking each head (group) over the destinations' in-edges in turn, so that
the head's slice of the features stays in the cache its gathers hit:

    out_i = sum_{j -> i, kept} softmax_j(LeakyReLU(s_ij)) m_ij W h_j,
    s_ij = (a_l . W h_j + a_r . W h_i)              (norm "none")
    s_ij = alpha (a_l . W h_j + a_r . W h_i) c_i      (LipschitzNorm, the paper's variant:
           c_i = 1 / (u v_i), 0 where u v_i <= eps; see `lipschitz_norm_linear`)

per head (group) g, with m the attention-dropout multiplier (mask / (1 - p)) and "kept"
the edges a seed's DropEdge kept. The numbers are `GATConv`'s (scores, softmax, sum in
the same order; float rounding apart: the kernel's exp and dot products are its own, and
float32's exp is a polynomial within about 1 ulp that gives 0 below -87.3, where libm's
gives a denormal). `grouped_linear` is the seeds' per-seed projections on node-major
features, `dgn_output_kernel` DGN's output, its input plus the weighted sum of its
groups' BatchNorms (`lipnorm.nn.norm.dgn.dgn_output`), and `pairnorm_kernel` PairNorm's
"PN" (`lipnorm.nn.norm.pairnorm.pairnorm_pn`), each in a few passes over the nodes.

The kernels (`kernels.c`) are compiled with the machine's C compiler on first use
and cached by source and machine (`LIPNORM_KERNEL_CACHE`, default
``~/.cache/lipnorm/kernels``); where none can be built, `kernel_unavailable` says why
and callers take their torch or DGL path. They run on one thread, on CPU tensors,
float32 or float64 (GAT's attention over a whole homogeneous graph).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

import dgl
import torch

from lipnorm.nn.sparse import per_structure

__all__ = [
    "gat_attention", "grouped_linear", "dgn_output_kernel", "pairnorm_kernel", "kernel_unavailable", "kernels_off", "fusable",
]

_SOURCE = Path(__file__).with_name("kernels.c")
_FLAGS = ["-O3", "-march=native", "-fopenmp-simd", "-fno-trapping-math", "-shared", "-fPIC", "-std=c99"]
_TYPES = {
    torch.float32: ("f", "float", "exp_poly", "sqrtf", "fmaf", ctypes.c_float),
    torch.float64: ("d", "double", "exp", "sqrt", "fma", ctypes.c_double),
}


def _source_text(template: str) -> str:
    """`kernels.c`'s template once per type of `_TYPES`, its placeholders replaced."""
    parts = []
    for suffix, real, exp, sqrt, fma, _ in _TYPES.values():
        parts.append(
            template.replace("SFX", suffix).replace("REAL", real).replace("EXP(", f"{exp}(").replace("SQRT(", f"{sqrt}(")
            .replace("FMA(", f"{fma}(")
        )
    return "\n".join(parts)


def _cpu_signature() -> str:
    """What -march=native compiles for: the CPU's model and flags (a cache shared by
    machines of different CPUs, e.g. a cluster's home folder, keeps one build each)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor()
    wanted = [line for line in lines if line.startswith(("model name", "flags"))][:2]
    return "\n".join(wanted)


def _cache_dir() -> Path:
    return Path(os.environ.get("LIPNORM_KERNEL_CACHE") or Path.home() / ".cache" / "lipnorm" / "kernels")


@functools.lru_cache(maxsize=1)
def _library() -> ctypes.CDLL | str:
    """The compiled kernel, or why there is none (a sentence)."""
    return _build(_SOURCE, _cache_dir())


def _build(template: Path, cache: Path) -> ctypes.CDLL | str:
    """The kernels compiled from the C template `template` (`kernels.c`, or another
    revision of it: benchmarks/attention_kernel.py) and cached in `cache` by source and
    machine, or why there are none (a sentence)."""
    named = os.environ.get("CC")
    compiler = shutil.which(named) if named else shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return f"the C compiler CC={named!r} was not found" if named else "no C compiler found (set CC or install gcc)"
    source = _source_text(template.read_text())
    key = hashlib.sha256("\0".join([source, " ".join(_FLAGS), compiler, platform.machine(), _cpu_signature()]).encode())
    target = cache / f"kernels-{key.hexdigest()[:16]}.so"
    if not target.exists():
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=target.parent) as work:
                c_file = Path(work) / "kernels.c"
                c_file.write_text(source)
                built = Path(work) / target.name
                result = subprocess.run(
                    [compiler, *_FLAGS, "-o", str(built), str(c_file), "-lm"], capture_output=True, text=True
                )
                if result.returncode != 0:
                    return f"{compiler} failed to build the kernel: {result.stderr.strip()[:500]}"
                os.replace(built, target)  # whole or not at all, also beside a concurrent build
        except OSError as error:
            return f"cannot build the kernel in {target.parent}: {error}"
    library = ctypes.CDLL(str(target))
    pointer, size = ctypes.c_void_p, ctypes.c_int64
    for suffix, *_, real in _TYPES.values():
        head = [size] * 4 + [pointer] * 3 + [pointer] * 3 + [pointer] * 2 + [ctypes.c_int, real, real, real]
        getattr(library, f"gat_attention_forward_{suffix}").argtypes = head + [pointer] * 8
        getattr(library, f"gat_attention_backward_{suffix}").argtypes = head + [pointer] * 6 + [pointer] * 2 + [pointer] * 4
        getattr(library, f"grouped_linear_forward_{suffix}").argtypes = [size] * 4 + [pointer] * 3
        getattr(library, f"grouped_linear_backward_{suffix}").argtypes = [size] * 4 + [pointer] * 5
        getattr(library, f"dgn_sums_{suffix}").argtypes = [size] * 4 + [pointer] * 5
        getattr(library, f"dgn_apply_{suffix}").argtypes = [size] * 4 + [pointer] * 5
        getattr(library, f"dgn_backward_{suffix}").argtypes = [size] * 4 + [pointer] * 8
        getattr(library, f"pairnorm_forward_{suffix}").argtypes = [size] * 3 + [pointer] + [ctypes.c_double] * 2 + [pointer] * 3
        getattr(library, f"pairnorm_backward_{suffix}").argtypes = [size] * 3 + [pointer] * 2 + [ctypes.c_double] + [pointer] * 4
    return library


_OFF: list[str] = []  # why the kernels are off meanwhile (`kernels_off`), innermost last


@contextlib.contextmanager
def kernels_off(reason: str):
    """Inside: `kernel_unavailable()` gives `reason`, so that every caller takes its torch
    or DGL path, e.g. where gradients are differentiated again (`create_graph=True`, the
    Lipschitz probe), which the kernels' backwards are not. One thread of Python at a time."""
    _OFF.append(reason)
    try:
        yield
    finally:
        _OFF.pop()


def kernel_unavailable() -> str | None:
    """None if the kernel is (or can be) compiled here and not switched off; else why not."""
    if _OFF:
        return _OFF[-1]
    library = _library()
    return library if isinstance(library, str) else None


def _first_order(name: str) -> None:
    """A kernel's backward runs once: a gradient of it (`create_graph=True`, when autograd
    records inside the backward) needs the torch path, which `kernels_off` gives."""
    if torch.is_grad_enabled():
        raise RuntimeError(
            f"the compiled {name} kernel's backward is not differentiable again (create_graph=True); "
            "take gradients of gradients inside lipnorm.nn.fused.kernels_off(...), as lipnorm.lipschitz's probe does"
        )


def _kernels_take(first: torch.Tensor, *others: torch.Tensor) -> bool:
    """Whether the kernels take these tensors: on the CPU, of one type they are built for
    (float32 or float64), and the kernels compiled here and not switched off."""
    return (
        first.dtype in _TYPES
        and all(tensor.device.type == "cpu" and tensor.dtype == first.dtype for tensor in (first, *others))
        and kernel_unavailable() is None
    )


def fusable(graph: dgl.DGLGraph, ft: torch.Tensor) -> bool:
    """Whether `gat_attention` takes this graph and these projections."""
    return not graph.is_block and graph.num_src_nodes() == graph.num_dst_nodes() and _kernels_take(ft)


def _in_edges(graph: dgl.DGLGraph) -> tuple[tuple[torch.Tensor, torch.Tensor, torch.Tensor], int]:
    """The graph's in-edge (CSC) index `(indptr, src, eid)` and its widest in-degree."""
    def build(graph):
        structure = tuple(t.to(torch.int64).contiguous() for t in graph.adj_tensors("csc"))
        widest = int(structure[0].diff().max()) if graph.num_nodes() else 0
        return structure, widest

    return per_structure(graph, "fused-csc", build)


def _address(tensor: torch.Tensor | None) -> int | None:
    return None if tensor is None else tensor.data_ptr()


class _GATAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, ft, attn_l, attn_r, in_edges, kept, drop, heads_per_seed, lip, alpha, eps, slope, get_attention):
        nodes, groups, dim = ft.shape
        suffix, real = _TYPES[ft.dtype][0], _TYPES[ft.dtype][-1]
        ft, attn_l, attn_r = ft.contiguous(), attn_l.contiguous(), attn_r.contiguous()
        structure, ctx.widest = in_edges
        # Kept for the backward, group-major (the kernel walks one group at a time).
        per_node = [ft.new_empty(groups, nodes) for _ in range(5)]  # el, er, sq, maxsq, scale
        argmax = torch.empty(groups, nodes, dtype=torch.int64)
        att = ft.new_empty(groups, structure[1].numel())
        out = ft.new_empty(nodes, groups, dim)
        common = (
            nodes, groups, dim, heads_per_seed, *(t.data_ptr() for t in structure), ft.data_ptr(), attn_l.data_ptr(),
            attn_r.data_ptr(), _address(kept), _address(drop), int(lip), real(alpha), real(eps), real(slope),
        )
        getattr(_library(), f"gat_attention_forward_{suffix}")(
            *common, *(t.data_ptr() for t in per_node), argmax.data_ptr(), att.data_ptr(), out.data_ptr()
        )
        ctx.common = common
        ctx.keep = (structure, kept, drop)  # the pointers in `common` point into these
        ctx.save_for_backward(ft, attn_l, attn_r, *per_node, argmax, att)
        if not get_attention:
            return out, None
        # (E, G, 1) by edge ID, after dropout, as GATConv's get_attention gives it.
        attention = ft.new_empty(att.shape[1], groups)
        attention[structure[2]] = att.t()
        if drop is not None:
            attention = attention.view(-1, groups // heads_per_seed, heads_per_seed).mul_(drop.transpose(0, 1))
        ctx.mark_non_differentiable(attention)
        return out, attention.view(-1, groups, 1)

    @staticmethod
    def backward(ctx, grad_out, _grad_attention):
        _first_order("GAT attention")
        ft, attn_l, attn_r, *per_node, argmax, att = ctx.saved_tensors
        nodes, groups, dim = ft.shape
        grad_out = grad_out.contiguous()
        grad_ft, grad_l, grad_r = torch.empty_like(ft), torch.empty_like(attn_l), torch.empty_like(attn_r)
        work = ft.new_empty(4 * nodes + ctx.widest + 1)
        getattr(_library(), f"gat_attention_backward_{_TYPES[ft.dtype][0]}")(
            *ctx.common, *(t.data_ptr() for t in per_node), argmax.data_ptr(), att.data_ptr(), grad_out.data_ptr(),
            grad_ft.data_ptr(), grad_l.data_ptr(), grad_r.data_ptr(), work.data_ptr(),
        )
        return grad_ft, grad_l, grad_r, None, None, None, None, None, None, None, None, None


def gat_attention(
    graph: dgl.DGLGraph,
    ft: torch.Tensor,
    attn_l: torch.Tensor,
    attn_r: torch.Tensor,
    *,
    norm: str = "none",
    alpha: float = 1.0,
    eps: float = 1e-12,
    negative_slope: float = 0.2,
    kept: torch.Tensor | None = None,
    heads_per_seed: int | None = None,
    drop: torch.Tensor | None = None,
    get_attention: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """`GATConv`'s attention and neighbour sum on projections `ft` `(N, G, D)`: `(N, G, D)`,
    and with `get_attention` the attention `(E, G, 1)` by edge ID (after dropout, as
    `GATConv` returns it; for inspection: no gradient flows back through it).

    Parameters
    ----------
    graph : DGLGraph
        A whole homogeneous graph (`fusable`).
    ft : (N, G, D) tensor
        The projected features W h, G heads (S seeds x H heads when seeds train together).
    attn_l, attn_r : (1, G, D) or (G, D) tensors
    norm : "none" or "lip"
        Plain scores, or LipschitzNorm's (the paper's variant) with `alpha` and `eps`.
    kept : (E, S) bool tensor, optional
        The edges each seed kept (DropEdge), by edge ID; head g belongs to seed
        ``g // heads_per_seed``. None: every edge for every head.
    drop : (S, E, G / S) tensor, optional
        The attention-dropout multiplier (mask / (1 - p)), seed-major, by edge ID, with
        S = G / heads_per_seed (any shape of those values in that order, e.g.
        `(E, G, 1)` for one seed); None: no dropout.
    """
    nodes, groups, dim = ft.shape
    if norm not in ("none", "lip"):
        raise ValueError(f"unknown norm {norm!r}; allowed: none, lip")
    if nodes != graph.num_nodes():
        raise ValueError(f"ft has shape {tuple(ft.shape)}; expected {graph.num_nodes()} rows, one per node")
    heads_per_seed = heads_per_seed or groups
    if groups % heads_per_seed:
        raise ValueError(f"{groups} heads are not whole seeds of {heads_per_seed} heads each")
    if kept is not None:
        seeds = groups // heads_per_seed
        if kept.dtype != torch.bool or tuple(kept.shape) != (graph.num_edges(), seeds):
            raise ValueError(f"kept is a {kept.dtype} tensor of shape {tuple(kept.shape)}; expected bool (E, S) = "
                             f"({graph.num_edges()}, {seeds})")
        kept = kept.contiguous().view(torch.uint8)
    if drop is not None:
        drop = drop.reshape(groups // heads_per_seed, graph.num_edges(), heads_per_seed).to(ft.dtype).contiguous()
    attn_l, attn_r = (a.reshape(groups, dim) for a in (attn_l, attn_r))
    out, attention = _GATAttention.apply(
        ft, attn_l, attn_r, _in_edges(graph), kept, drop, heads_per_seed, norm == "lip", alpha, eps, negative_slope,
        get_attention,
    )
    return (out, attention) if get_attention else out


class _GroupedLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight):
        nodes, groups, size_in = x.shape
        size_out = weight.shape[1]
        x, weight = x.contiguous(), weight.contiguous()
        out = x.new_empty(nodes, groups, size_out)
        weight_t = weight.transpose(1, 2).contiguous()  # held: the kernel reads it through a pointer
        getattr(_library(), f"grouped_linear_forward_{_TYPES[x.dtype][0]}")(
            nodes, groups, size_in, size_out, x.data_ptr(), weight_t.data_ptr(), out.data_ptr()
        )
        ctx.save_for_backward(x, weight)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        _first_order("grouped linear")
        x, weight = ctx.saved_tensors
        nodes, groups, size_in = x.shape
        grad_out = grad_out.contiguous()
        grad_x, grad_weight = torch.empty_like(x), torch.empty_like(weight)
        getattr(_library(), f"grouped_linear_backward_{_TYPES[x.dtype][0]}")(
            nodes, groups, size_in, weight.shape[1], x.data_ptr(), weight.data_ptr(), grad_out.data_ptr(),
            grad_x.data_ptr(), grad_weight.data_ptr(),
        )
        return grad_x, grad_weight


def grouped_linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """`out[n, s] = weight[s] @ x[n, s]`: `(N, S, O)` from node-major `x` `(N, S, I)` and
    `weight` `(S, O, I)` (S seeds' projections of one layer, each its own matrix), as
    ``torch.einsum("nsi,soi->nso", x, weight)``, in the compiled kernel where it can be
    built (CPU, float32/float64), else by that einsum."""
    if x.dim() != 3 or weight.dim() != 3 or weight.shape[0] != x.shape[1] or weight.shape[2] != x.shape[2]:
        raise ValueError(
            f"x has shape {tuple(x.shape)} and weight {tuple(weight.shape)}; expected (N, S, I) and (S, O, I)"
        )
    if not _kernels_take(x, weight):
        return torch.einsum("nsi,soi->nso", x, weight)
    return _GroupedLinear.apply(x, weight)


class _DGNOutput(torch.autograd.Function):
    """`lipnorm.nn.norm.dgn.dgn_output` in the kernel: a pass over the nodes for the
    statistics (training), one for the output, two for the backward (the sums over the
    nodes, then the inputs' gradients), the (S, G, W) factors in float64 between them,
    lambda folded into them."""

    @staticmethod
    def forward(ctx, a, x, weight, bias, running_mean, running_var, eps, skip_weight):
        sets, groups, nodes = a.shape
        width = x.shape[2]
        library, suffix = _library(), _TYPES[x.dtype][0]
        a, x = a.contiguous(), x.contiguous()
        double = dict(dtype=torch.float64, device=x.device)
        raw_var = None
        if running_mean is None:  # batch statistics
            sums = torch.empty(2, sets, groups, width, **double)
            getattr(library, f"dgn_sums_{suffix}")(
                nodes, sets, groups, width, a.data_ptr(), x.data_ptr(), None, sums[0].data_ptr(), sums[1].data_ptr()
            )
            mean = sums[0] / nodes
            raw_var = sums[1] / nodes - mean.square()
            var = raw_var.clamp_min(0)
        else:
            mean = running_mean.double().view(sets, groups, width)
            var = running_var.double().view(sets, groups, width)
        r = torch.rsqrt(var + eps)
        scale, shift = r, -(mean * r)
        gamma = None
        if weight is not None:
            gamma = weight.double().view(sets, groups, width)
            scale, shift = gamma * scale, gamma * shift + bias.double().view(sets, groups, width)
        # x + lambda (x sum_g a_g scale_g + sum_g shift_g) = x (1 + sum_g a_g lambda scale_g) + lambda sum_g shift_g
        scale = (skip_weight * scale).contiguous()
        shift_sum = (skip_weight * shift.sum(dim=1)).contiguous()
        out = torch.empty_like(x)
        getattr(library, f"dgn_apply_{suffix}")(
            nodes, sets, groups, width, a.data_ptr(), x.data_ptr(), scale.data_ptr(), shift_sum.data_ptr(), out.data_ptr()
        )
        ctx.save_for_backward(a, x, scale, r, mean, raw_var, gamma)
        ctx.affine, ctx.dtype, ctx.skip_weight = weight is not None, None if weight is None else weight.dtype, skip_weight
        ctx.mark_non_differentiable(mean, var)
        return out, mean, var

    @staticmethod
    def backward(ctx, grad_out, _grad_mean, _grad_var):
        _first_order("DGN")
        a, x, scale, r, mean, raw_var, gamma = ctx.saved_tensors
        sets, groups, nodes = a.shape
        width = x.shape[2]
        library, suffix = _library(), _TYPES[x.dtype][0]
        grad_out = grad_out.contiguous()
        sums = torch.empty(2, sets, groups, width, dtype=torch.float64, device=x.device)
        getattr(library, f"dgn_sums_{suffix}")(
            nodes, sets, groups, width, a.data_ptr(), x.data_ptr(), grad_out.data_ptr(), sums[0].data_ptr(), sums[1].data_ptr()
        )
        # Of the factors before lambda: scale = gamma r, shift = gamma (-(mean r)) + beta
        # (gamma = 1, beta = 0 without affine), each group's shift summed into the output.
        grad_scale = ctx.skip_weight * sums[0]
        grad_shift = ctx.skip_weight * sums[1, :, :1].expand(sets, groups, width)
        grad_weight = grad_bias = None
        if ctx.affine:
            grad_weight = (grad_scale * r - grad_shift * (mean * r)).reshape(-1).to(ctx.dtype)
            grad_bias = grad_shift.reshape(-1).to(ctx.dtype)
            grad_r = gamma * (grad_scale - grad_shift * mean)
            grad_mean = -(grad_shift * gamma * r)
        else:
            grad_r = grad_scale - grad_shift * mean
            grad_mean = -(grad_shift * r)
        k1 = k2 = None
        if raw_var is not None:  # through the batch statistics: mean = sum1 / N, var = sum2 / N - mean^2
            grad_var = grad_r * (-0.5 * r.pow(3)) * (raw_var >= 0)  # clamp_min(0)'s gradient
            k1 = ((grad_mean - 2 * mean * grad_var) / nodes).contiguous()
            k2 = (grad_var / nodes).contiguous()
        grad_x, grad_a = torch.empty_like(x), torch.empty_like(a)
        getattr(library, f"dgn_backward_{suffix}")(
            nodes, sets, groups, width, a.data_ptr(), x.data_ptr(), scale.data_ptr(), grad_out.data_ptr(),
            None if k1 is None else k1.data_ptr(), None if k2 is None else k2.data_ptr(),
            grad_x.data_ptr(), grad_a.data_ptr(),
        )
        return grad_a, grad_x, grad_weight, grad_bias, None, None, None, None


def dgn_output_kernel(
    assignment: torch.Tensor, h: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None,
    eps: float, skip_weight: float, running: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """DGN's ``h + skip_weight * sum_g BN(assignment[g] h)`` (`lipnorm.nn.norm.dgn.dgn_output`)
    in the compiled kernel: `(out (N, S, W), mean, var)`, the statistics `(S, G, W)`
    float64 (the batch's where `running` is None, else `running` = (mean, var) as given),
    for its caller's running-statistics update; None where the kernel does not apply
    (then the caller takes its torch path)."""
    if not _kernels_take(h, assignment):
        return None
    running_mean, running_var = running if running is not None else (None, None)
    return _DGNOutput.apply(assignment, h, weight, bias, running_mean, running_var, eps, float(skip_weight))


class _PairNorm(torch.autograd.Function):
    """`lipnorm.nn.norm.pairnorm.pairnorm_pn` in the kernel: three passes over the nodes
    forward (means, centred squares, output), two backward; statistics in float64."""

    @staticmethod
    def forward(ctx, x, scale, eps):
        nodes, sets, width = x.shape
        library, suffix = _library(), _TYPES[x.dtype][0]
        x = x.contiguous()
        mean = torch.empty(sets, width, dtype=torch.float64)
        inv = torch.empty(sets, dtype=torch.float64)
        out = torch.empty_like(x)
        getattr(library, f"pairnorm_forward_{suffix}")(
            nodes, sets, width, x.data_ptr(), scale, eps, mean.data_ptr(), inv.data_ptr(), out.data_ptr()
        )
        ctx.save_for_backward(x, mean, inv)
        ctx.scale = scale
        return out

    @staticmethod
    def backward(ctx, grad_out):
        _first_order("PairNorm")
        x, mean, inv = ctx.saved_tensors
        nodes, sets, width = x.shape
        library, suffix = _library(), _TYPES[x.dtype][0]
        grad_out = grad_out.contiguous()
        work = torch.empty(sets * (width + 1), dtype=torch.float64)
        grad_x = torch.empty_like(x)
        getattr(library, f"pairnorm_backward_{suffix}")(
            nodes, sets, width, x.data_ptr(), grad_out.data_ptr(), ctx.scale, mean.data_ptr(), inv.data_ptr(),
            work.data_ptr(), grad_x.data_ptr(),
        )
        return grad_x, None, None


def pairnorm_kernel(x: torch.Tensor, scale: float, eps: float) -> torch.Tensor | None:
    """PairNorm's "PN" of S sets `x` `(N, S, W)` (`lipnorm.nn.norm.pairnorm.pairnorm_pn`) in
    the compiled kernel; None where it does not apply (then the caller takes its torch path)."""
    if not _kernels_take(x):
        return None
    return _PairNorm.apply(x, float(scale), float(eps))
