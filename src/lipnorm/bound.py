"""The pieces of LipschitzNorm's bound that need neither DGL nor PyG: squared norms, the
inverse of the bound, and the scale applied last. `lipnorm.nn.functional` (DGL) and
`lipnorm.pyg` (PyG) build their normalisers from them, so both give the same numbers.

Each has its own backward (fewer and smaller ops than autograd's, which counts on the
small per-node tensors of a layer) and, under TorchScript, which compiles no
`torch.autograd.Function`, autograd's form of the same values.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["squared_norm", "inverse_sqrt", "scaled"]


class _SquaredNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return (x * x).sum(dim=-1)

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return x * (2 * grad).unsqueeze(-1)


@torch.jit.unused
def _squared_norm_function(x: Tensor) -> Tensor:
    return _SquaredNorm.apply(x)


def squared_norm(x: Tensor) -> Tensor:
    """`(x * x).sum(-1)`, the squared norm over the last dimension, with a one-multiply
    backward (`2 grad x`).

    Autograd's own backward of `x * x` takes two multiplies of x's size and their sum;
    on the (N, H, D) projections of a layer that was the largest part of LipschitzNorm's
    cost at D = 64 (3.1 vs 4.7 ms fwd+bwd at Cora, 8 x 64). Values are identical.
    """
    if torch.jit.is_scripting():
        return (x * x).sum(dim=-1)
    else:
        return _squared_norm_function(x)


class _InverseSqrt(torch.autograd.Function):
    @staticmethod
    def forward(ctx, squared: Tensor, eps: float) -> Tensor:
        # rsqrt(0) = inf, replaced by the 0 it gets; no NaN is ever formed.
        result = torch.rsqrt(squared).masked_fill_(squared <= eps * eps, 0.0)
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad: Tensor):
        (result,) = ctx.saved_tensors
        # d/ds s^(-1/2) = -s^(-3/2) / 2 = -result^3 / 2, which is 0 where result is.
        return grad * result.pow(3) * -0.5, None


@torch.jit.unused
def _inverse_sqrt_function(squared: Tensor, eps: float) -> Tensor:
    return _InverseSqrt.apply(squared, eps)


def inverse_sqrt(squared: Tensor, eps: float) -> Tensor:
    """`1 / sqrt(squared)` where `sqrt(squared) > eps`, and 0 elsewhere, with gradient 0 there.

    `squared` is the squared bound (u v)^2 >= e^2, so a bound at or below eps only meets a
    score of the same size, whose direction is numerically meaningless: it gets the
    neutral score 0 (uniform attention). Elsewhere the value is exact (no `bound + eps`).
    Working on squares means no sqrt is ever taken, and eps > 0 bounds the result, hence
    the gradients, by 1 / eps. Its own backward (`-result^3 / 2`, the formula of
    `torch.rsqrt`'s) replaces autograd's through a `torch.where` on each side of the
    rsqrt: 3 ops forward and 3 backward instead of 5 and 7.
    """
    if torch.jit.is_scripting():
        keep = squared > eps * eps
        safe = torch.where(keep, squared, torch.ones_like(squared))
        return torch.where(keep, torch.rsqrt(safe), torch.zeros_like(squared))
    else:
        return _inverse_sqrt_function(squared, eps)


def scaled(scores: Tensor, scale: float) -> Tensor:
    """`scale * scores`, the scale applied last.

    The scores are bounded by 1 in exact arithmetic before it (paper variants), so the
    float result is bounded by `scale` up to an ulp of the division, even for a tiny
    scale; a scale folded into 1 / bound first rounds to a subnormal there (alpha =
    1.2e-38 gave a score above alpha). Multiplying by 1 is exact, so it is skipped.
    """
    return scores if scale == 1.0 else scale * scores
