"""The kernels as autograd functions: each forward and backward is one compiled call.

A kernel's backward runs once. Where its gradient is itself differentiated
(``create_graph=True``: double backward, Hessian-vector products, the Lipschitz probe),
the backward is taken instead through the kernel's torch form (`lipnorm.kernels.reference`)
on the same inputs, which autograd differentiates again; so every kernel supports double
backward, at the torch form's cost for that backward only.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence

import torch

from lipnorm.kernels import reference
from lipnorm.kernels.dispatch import library

__all__ = ["gat_attention_call", "grouped_linear_call", "dgn_output_call", "pairnorm_call"]

_REAL = {torch.float32: ("f32", ctypes.c_float), torch.float64: ("f64", ctypes.c_double)}


def _kernel(name: str, dtype: torch.dtype):
    return getattr(library().handle, f"{name}_{_REAL[dtype][0]}")


def _address(tensor: torch.Tensor | None) -> int | None:
    return None if tensor is None else tensor.data_ptr()


def _twice_differentiable(
    form: Callable[..., torch.Tensor], inputs: Sequence[torch.Tensor | None], grad_output: torch.Tensor
) -> tuple[torch.Tensor | None, ...]:
    """The gradients of `form(*inputs)` against `grad_output`, for the inputs that need
    one, as a graph autograd can differentiate again (the backward under create_graph)."""
    wanted = [tensor for tensor in inputs if tensor is not None and tensor.requires_grad]
    with torch.enable_grad():
        output = form(*inputs)
    grads = iter(torch.autograd.grad(output, wanted, grad_output, create_graph=True, allow_unused=True))
    return tuple(next(grads) if tensor is not None and tensor.requires_grad else None for tensor in inputs)


class _GATAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, ft, attn_l, attn_r, in_edges, kept, drop, heads_per_seed, lip, alpha, eps, slope, get_attention):
        nodes, groups, dim = ft.shape
        real = _REAL[ft.dtype][1]
        structure, widest = in_edges
        ctx.options = (structure, widest, kept, drop, heads_per_seed, lip, alpha, eps, slope)
        # Kept for the backward, group-major (the kernel walks one group at a time).
        per_node = [ft.new_empty(groups, nodes) for _ in range(5)]  # el, er, sq, maxsq, scale
        argmax = torch.empty(groups, nodes, dtype=torch.int64)
        att = ft.new_empty(groups, structure[1].numel())
        out = ft.new_empty(nodes, groups, dim)
        inputs = [t.contiguous() for t in (ft, attn_l, attn_r)]
        _kernel("gat_attention_forward", ft.dtype)(
            *_GATAttention.common(ctx, inputs, real), *(t.data_ptr() for t in per_node), argmax.data_ptr(),
            att.data_ptr(), out.data_ptr(),
        )
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
    def common(ctx, inputs: Sequence[torch.Tensor], real) -> tuple:
        """The arguments both kernels take first: sizes, graph, inputs, options."""
        ft, attn_l, attn_r = inputs
        structure, _, kept, drop, heads_per_seed, lip, alpha, eps, slope = ctx.options
        nodes, groups, dim = ft.shape
        return (
            nodes, groups, dim, heads_per_seed, *(t.data_ptr() for t in structure), ft.data_ptr(), attn_l.data_ptr(),
            attn_r.data_ptr(), _address(kept), _address(drop), int(lip), real(alpha), real(eps), real(slope),
        )

    @staticmethod
    def backward(ctx, grad_out, _grad_attention):
        ft, attn_l, attn_r, *per_node, argmax, att = ctx.saved_tensors
        structure, widest, kept, drop, heads_per_seed, lip, alpha, eps, slope = ctx.options
        if torch.is_grad_enabled():  # create_graph: through the torch form
            def form(ft, attn_l, attn_r):
                return reference.gat_attention(
                    structure, ft, attn_l, attn_r, lip=lip, alpha=alpha, eps=eps, negative_slope=slope,
                    kept=None if kept is None else kept.view(torch.bool), heads_per_seed=heads_per_seed, drop=drop,
                )

            return (*_twice_differentiable(form, (ft, attn_l, attn_r), grad_out), *[None] * 9)
        nodes, groups, dim = ft.shape
        inputs = [t.contiguous() for t in (ft, attn_l, attn_r)]
        grad_out = grad_out.contiguous()
        grad_ft, grad_l, grad_r = (torch.empty_like(t) for t in inputs)
        work = ft.new_empty(4 * nodes + widest + 1)
        _kernel("gat_attention_backward", ft.dtype)(
            *_GATAttention.common(ctx, inputs, _REAL[ft.dtype][1]), *(t.data_ptr() for t in per_node),
            argmax.data_ptr(), att.data_ptr(), grad_out.data_ptr(), grad_ft.data_ptr(), grad_l.data_ptr(),
            grad_r.data_ptr(), work.data_ptr(),
        )
        return grad_ft, grad_l, grad_r, *[None] * 9


def gat_attention_call(ft, attn_l, attn_r, in_edges, kept, drop, heads_per_seed, lip, alpha, eps, slope, get_attention):
    """`_GATAttention` on checked inputs (`lipnorm.kernels.gat_attention` checks them)."""
    return _GATAttention.apply(
        ft, attn_l, attn_r, in_edges, kept, drop, heads_per_seed, lip, alpha, eps, slope, get_attention
    )


class _GroupedLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight):
        nodes, groups, size_in = x.shape
        size_out = weight.shape[1]
        out = x.new_empty(nodes, groups, size_out)
        weight_t = weight.transpose(1, 2).contiguous()
        x_c = x.contiguous()  # held while the kernel reads it (a temporary's memory is freed at once)
        _kernel("grouped_linear_forward", x.dtype)(
            nodes, groups, size_in, size_out, x_c.data_ptr(), weight_t.data_ptr(), out.data_ptr()
        )
        ctx.save_for_backward(x, weight)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        x, weight = ctx.saved_tensors
        if torch.is_grad_enabled():
            return _twice_differentiable(reference.grouped_linear, (x, weight), grad_out)
        nodes, groups, size_in = x.shape
        x, weight, grad_out = x.contiguous(), weight.contiguous(), grad_out.contiguous()
        grad_x, grad_weight = torch.empty_like(x), torch.empty_like(weight)
        _kernel("grouped_linear_backward", x.dtype)(
            nodes, groups, size_in, weight.shape[1], x.data_ptr(), weight.data_ptr(), grad_out.data_ptr(),
            grad_x.data_ptr(), grad_weight.data_ptr(),
        )
        return grad_x, grad_weight


def grouped_linear_call(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return _GroupedLinear.apply(x, weight)


class _DGNOutput(torch.autograd.Function):
    """`reference.dgn_output` in the kernel: a pass over the nodes for the statistics
    (training), one for the output, two for the backward (the sums over the nodes, then
    the inputs' gradients), the (S, G, W) factors in float64 between them, lambda folded
    into them."""

    @staticmethod
    def forward(ctx, a, x, weight, bias, running_mean, running_var, eps, skip_weight):
        sets, groups, nodes = a.shape
        width = x.shape[2]
        ac, xc = a.contiguous(), x.contiguous()
        double = dict(dtype=torch.float64, device=x.device)
        raw_var = None
        if running_mean is None:  # batch statistics
            sums = torch.empty(2, sets, groups, width, **double)
            _kernel("dgn_sums", x.dtype)(
                nodes, sets, groups, width, ac.data_ptr(), xc.data_ptr(), None, sums[0].data_ptr(), sums[1].data_ptr()
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
        out = torch.empty_like(xc)
        _kernel("dgn_apply", x.dtype)(
            nodes, sets, groups, width, ac.data_ptr(), xc.data_ptr(), scale.data_ptr(), shift_sum.data_ptr(),
            out.data_ptr(),
        )
        ctx.save_for_backward(a, x, weight, bias, running_mean, running_var, scale, r, mean, raw_var, gamma)
        ctx.eps, ctx.skip_weight = eps, skip_weight
        ctx.mark_non_differentiable(mean, var)
        return out, mean, var

    @staticmethod
    def backward(ctx, grad_out, _grad_mean, _grad_var):
        a, x, weight, bias, running_mean, running_var, scale, r, mean, raw_var, gamma = ctx.saved_tensors
        if torch.is_grad_enabled():
            running = None if running_mean is None else (running_mean, running_var)

            def form(a, x, weight, bias):
                return reference.dgn_output(a, x, weight, bias, ctx.eps, ctx.skip_weight, running)[0]

            return (*_twice_differentiable(form, (a, x, weight, bias), grad_out), *[None] * 4)
        sets, groups, nodes = a.shape
        width = x.shape[2]
        a, x, grad_out = a.contiguous(), x.contiguous(), grad_out.contiguous()
        sums = torch.empty(2, sets, groups, width, dtype=torch.float64, device=x.device)
        _kernel("dgn_sums", x.dtype)(
            nodes, sets, groups, width, a.data_ptr(), x.data_ptr(), grad_out.data_ptr(), sums[0].data_ptr(),
            sums[1].data_ptr(),
        )
        # Of the factors before lambda: scale = gamma r, shift = gamma (-(mean r)) + beta
        # (gamma = 1, beta = 0 without affine), each group's shift summed into the output.
        grad_scale = ctx.skip_weight * sums[0]
        grad_shift = ctx.skip_weight * sums[1, :, :1].expand(sets, groups, width)
        grad_weight = grad_bias = None
        if weight is not None:
            grad_weight = (grad_scale * r - grad_shift * (mean * r)).reshape(-1).to(weight.dtype)
            grad_bias = grad_shift.reshape(-1).to(weight.dtype)
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
        _kernel("dgn_backward", x.dtype)(
            nodes, sets, groups, width, a.data_ptr(), x.data_ptr(), scale.data_ptr(), grad_out.data_ptr(),
            _address(k1), _address(k2), grad_x.data_ptr(), grad_a.data_ptr(),
        )
        return grad_a, grad_x, grad_weight, grad_bias, None, None, None, None


def dgn_output_call(assignment, h, weight, bias, eps, skip_weight, running):
    running_mean, running_var = running if running is not None else (None, None)
    return _DGNOutput.apply(assignment, h, weight, bias, running_mean, running_var, eps, float(skip_weight))


class _PairNorm(torch.autograd.Function):
    """`reference.pairnorm` in the kernel: three passes over the nodes forward (means,
    centred squares, output), two backward; statistics in float64."""

    @staticmethod
    def forward(ctx, x, scale, eps):
        nodes, sets, width = x.shape
        mean = torch.empty(sets, width, dtype=torch.float64)
        inv = torch.empty(sets, dtype=torch.float64)
        xc = x.contiguous()
        out = torch.empty_like(xc)
        _kernel("pairnorm_forward", x.dtype)(
            nodes, sets, width, xc.data_ptr(), scale, eps, mean.data_ptr(), inv.data_ptr(), out.data_ptr()
        )
        ctx.save_for_backward(x, mean, inv)
        ctx.scale, ctx.eps = scale, eps
        return out

    @staticmethod
    def backward(ctx, grad_out):
        x, mean, inv = ctx.saved_tensors
        if torch.is_grad_enabled():
            form = lambda x: reference.pairnorm(x, ctx.scale, ctx.eps)  # noqa: E731
            return (*_twice_differentiable(form, (x,), grad_out), None, None)
        nodes, sets, width = x.shape
        x, grad_out = x.contiguous(), grad_out.contiguous()
        work = torch.empty(sets * (width + 1), dtype=torch.float64)
        grad_x = torch.empty_like(x)
        _kernel("pairnorm_backward", x.dtype)(
            nodes, sets, width, x.data_ptr(), grad_out.data_ptr(), ctx.scale, mean.data_ptr(), inv.data_ptr(),
            work.data_ptr(), grad_x.data_ptr(),
        )
        return grad_x, None, None


def pairnorm_call(x: torch.Tensor, scale: float, eps: float) -> torch.Tensor:
    return _PairNorm.apply(x, float(scale), float(eps))
