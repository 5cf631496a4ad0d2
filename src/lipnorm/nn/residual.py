"""Initial residual (GCNII: Chen, Wei, Huang, Ding, Li, "Simple and Deep Graph Convolutional
Networks", ICML 2020), for a deep model's forward to call after each layer.

GCNII's layer l (the authors' code, github.com/chennnM/GCNII, `model.py`,
`GraphConvolution.forward`, variant=False) is

    support = (1 - alpha) * P h_{l-1} + alpha * h_0
    h_l     = act(theta_l * support W_l + (1 - theta_l) * support),
    theta_l = log(lambda / l + 1),

with P the normalised adjacency and h_0 = ReLU(Linear(x)), the output of the input
layer (their `_layers[0]`). Two ingredients: the *initial residual* (mixing in h_0) and
the *identity mapping* (the theta_l blend of W_l with the identity). The first is what
this module is: it mixes h_0 into a layer's output,

    h_l = (1 - alpha) * f_l(h_{l-1}) + alpha * h_0,

where f_l is the whole attention (or GCN) layer. GCNII mixes before the weight, i.e. into
the propagated P h_{l-1}; an attention layer projects before it propagates (W h, then the
attention-weighted sum), so there is no such point inside it, and the mix goes after the
layer, before the activation (as GCNII's mix is inside `act(...)`). The identity mapping
is not taken: it is a change of the layer's weight, not a connection between layers.
alpha = 0.1 is their default (`train.py`, ``--alpha``); h_0 of the deep models here is the
input Linear's output, which has the attention layers' width.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["InitialResidual", "initial_residual"]


def initial_residual(h: torch.Tensor, h0: torch.Tensor, alpha: float) -> torch.Tensor:
    """``(1 - alpha) * h + alpha * h0``, `h0` reshaped to `h`'s shape.

    `h` is a layer's output, `(N, W)` or `(N, H, D)`; `h0` the first hidden representation,
    with the same N nodes and W = H * D features each (in either shape).
    """
    if h0.shape[0] != h.shape[0] or h0.numel() != h.numel():
        raise ValueError(
            f"initial residual: the first representation of shape {tuple(h0.shape)} does not "
            f"match the layer output of shape {tuple(h.shape)}; allowed: the same nodes and "
            "the same number of features per node"
        )
    return (1.0 - alpha) * h + alpha * h0.reshape(h.shape)


class InitialResidual(nn.Module):
    """`forward(h, h0)` = `initial_residual(h, h0, alpha)` (see the module docstring).

    Parameters
    ----------
    alpha : float
        Weight of the first representation, in [0, 1] (GCNII's default 0.1; 0 is no
        initial residual).
    """

    def __init__(self, alpha: float = 0.1):
        super().__init__()
        if not (math.isfinite(alpha) and 0 <= alpha <= 1):
            raise ValueError(f"initial residual alpha must be a number in [0, 1], got {alpha}")
        self.alpha = alpha

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"

    def forward(self, h: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
        return initial_residual(h, h0, self.alpha)
