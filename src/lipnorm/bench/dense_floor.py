"""The dense-GEMM floor of a training step: the matrix products of a case's model as
plain `torch.mm` calls (`floor_gemms`, timed by `gemm_floor`), and the step's estimated
GFLOP (`estimated_step_gflop`) that the plans' budgets are held against.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lipnorm import registry
from lipnorm.bench.cases import Case


FLOOR = "gemm-floor"  # the floor's implementation name in measurements.csv


def estimated_step_gflop(
    nodes: int, edges: int, in_feats: int, depth: int, heads: int, hidden: int, family: str
) -> float:
    """Rough floating-point work of one training step (forward + backward ~ 3 x forward).

    Per attention layer: the projections (the family's registered `projections`: 1 for
    "gat", 4 for "gt": queries, keys, values, skip) of width W = heads x hidden, 2 N W^2
    each, and about 7 edge passes of width W; plus the input Linear. Used to keep the full run within its time budget.
    """
    width = heads * hidden
    projections = registry.architecture(family).projections
    per_layer = projections * 2 * nodes * width * width + 7 * edges * width
    return 3 * (depth * per_layer + 2 * nodes * in_feats * width) / 1e9


def floor_gemms(case: Case, in_feats: int, num_classes: int) -> list[tuple[int, int, int, bool]]:
    """The dense matrix products of one training step of the case's bench model, as
    `(rows, inner, cols, transposed)`: an `(rows, inner) x (inner, cols)` product whose
    left factor is a transposed view when `transposed` (as autograd's weight gradient).

    Per projection of every attention layer (the family's registered `projections`: 1
    for "gat", 4 for "gt": queries, keys, values, skip), with N nodes and W = heads x
    hidden: forward X.W `(N, W) x (W, W)`, backward dY.W^T `(N, W) x (W, W)` and X^T.dY `(W, N) x (N, W)`. The input Linear:
    forward and X^T.dY (the features need no gradient); the output Linear: all three.
    """
    nodes, width = case.nodes, case.heads * case.hidden
    projections = registry.architecture(case.family).projections

    def linear(fan_in: int, fan_out: int, input_grad: bool = True) -> list[tuple[int, int, int, bool]]:
        forward = (nodes, fan_in, fan_out, False)
        input_grad_gemm = [(nodes, fan_out, fan_in, False)] if input_grad else []
        return [forward, *input_grad_gemm, (fan_in, nodes, fan_out, True)]

    return (
        linear(in_feats, width, input_grad=False)
        + linear(width, width) * (projections * case.depth)
        + linear(width, num_classes)
    )


def gemm_floor(gemms: Sequence[tuple[int, int, int, bool]], device=None) -> Callable[[], None]:
    """A step of plain `torch.mm` calls of those shapes, on random operands made once
    (on `device`, default the CPU)."""
    import torch

    from lipnorm.train.device import move

    device = torch.device("cpu") if device is None else device
    operands = {}
    for rows, inner, cols, transposed in set(gemms):
        left = move(torch.randn(inner, rows), device).t() if transposed else move(torch.randn(rows, inner), device)
        operands[rows, inner, cols, transposed] = (left, move(torch.randn(inner, cols), device))
    calls = [operands[gemm] for gemm in gemms]

    def step() -> None:
        for left, right in calls:
            torch.mm(left, right)

    return step
