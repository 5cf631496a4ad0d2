"""Float tolerances from an error model, shared by the tests that compare two paths.

Each path's number x lies within k u (|x| + scale) of its exact value: u the unit
roundoff of the dtype, k the condition of the quantity on the test's inputs (how much the
computation magnifies unit roundings: its sums, a softmax's or a normalisation's
cancellations; a property of the numbers, not of the CPU), scale the tensor's largest |x|
(or, for gradients, the largest of the layer's). So two paths differ by at most
2 k u (|x| + scale): rtol = 2 k u, atol = rtol * scale. Each test states its k beside it,
measured against float64 (or long double) with a margin of at least 2.
"""

from __future__ import annotations

import torch

UNIT_ROUNDOFF = {torch.float32: 2.0**-24, torch.float64: 2.0**-53}


def assert_within(got, expected, condition: float, scale: float | None = None, unit: float | None = None, **kwargs):
    """|got - expected| <= 2 k u (|expected| + scale), k = `condition`, u the unit roundoff
    of their dtype (or `unit`), scale max |expected| unless given; tensors or arrays."""
    got, expected = torch.as_tensor(got), torch.as_tensor(expected)
    rtol = 2 * condition * (unit or UNIT_ROUNDOFF[expected.dtype])
    if scale is None:
        scale = expected.abs().max().item() if expected.numel() else 0.0
    torch.testing.assert_close(got, expected, rtol=rtol, atol=rtol * scale, **kwargs)
