"""PairNorm against a numpy transcription of the paper's formulas."""

import dgl
import numpy as np
import pytest
import torch

from lipnorm import kernels
from lipnorm.nn.norm import pairnorm
from lipnorm.nn.norm.pairnorm import PairNorm
from tests.tolerance import UNIT_ROUNDOFF, assert_within

MODES = ["PN", "PN-SI", "PN-SCS"]

# Tolerances from an error model. Each path's number x (the layer's, in the kernel ("PN")
# or in torch; the numpy reference's) lies within k u (|x| + scale) of its exact value: u
# the unit roundoff of the dtype, k the condition of the quantity on the test's inputs (a
# property of the numbers, not of the CPU), scale the tensor's largest |x|. So two paths
# differ by at most 2 k u (|x| + scale): rtol = 2 k u, atol = rtol * scale. Each k is a
# power of two >= 2x the largest |path - exact| / (u (|x| + scale)) measured over all the
# test's parametrisations, the exact values the formulas in numpy's long double (64-bit
# significand), under 6 summation orders of torch and MKL (ATEN_CPU_CAPABILITY default,
# AVX2, AVX-512; MKL_CBWR COMPATIBLE, AVX2; 1 and 2 threads).
# The layer's values in every mode, and the reference's: k measured 1.1 (PN-SI, PN-SCS
# with heads flattened; the kernel's PN 0.76) -> 4.
VALUES = 4


def reference(x, mode, s):
    """PairNorm of a (N, F) float64 array; eps = 1e-6 inside the square roots."""
    mean = x.mean(axis=0)
    centred = x - mean
    if mode == "PN":
        return s * centred / np.sqrt(1e-6 + np.mean(np.sum(centred**2, axis=1)))
    if mode == "PN-SI":
        return s * centred / np.sqrt(1e-6 + np.sum(centred**2, axis=1, keepdims=True))
    return s * x / np.sqrt(1e-6 + np.sum(x**2, axis=1, keepdims=True)) - mean


def node_features(*shape, seed=0):
    # Offset so that centring changes the values substantially.
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 3 + 2


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scale", [1.0, 0.1, 10.0])
def test_pairnorm_matches_reference(mode, scale):
    x = node_features(9, 5)
    got = PairNorm(mode, scale)(None, x)
    assert_within(got.numpy(), reference(x.numpy(), mode, scale), VALUES)


@pytest.mark.parametrize("mode", MODES)
def test_pairnorm_flattens_heads(mode):
    x = node_features(7, 4, 3)
    got = PairNorm(mode, 2.0)(None, x)
    assert got.shape == (7, 4, 3)
    expected = reference(x.reshape(7, 12).numpy(), mode, 2.0).reshape(7, 4, 3)
    assert_within(got.numpy(), expected, VALUES)


def test_pn_centres_and_fixes_the_mean_squared_row_norm():
    x = node_features(11, 6)
    out = PairNorm("PN", 3.0)(None, x)
    # Against exact values: the columns' means are 0 to k u max |out| (k measured 0.32 ->
    # 2); the mean squared row norm is scale^2 m / (eps + m), m the input's mean squared
    # centred row norm, to 2 k u of it (k measured against long double: this one 2.8, the
    # float64 value of the formula 0.78 -> 8).
    unit = UNIT_ROUNDOFF[torch.float64]
    torch.testing.assert_close(out.mean(dim=0), torch.zeros(6, dtype=torch.float64), rtol=0,
                               atol=2 * unit * out.abs().max().item())
    m = (x - x.mean(dim=0)).pow(2).sum(dim=1).mean()
    torch.testing.assert_close(out.pow(2).sum(dim=1).mean(), 9.0 * m / (1e-6 + m), rtol=2 * 8 * unit, atol=0)


def test_pn_si_gives_every_row_norm_scale():
    out = PairNorm("PN-SI", 2.5)(None, node_features(10, 4, 2))
    torch.testing.assert_close(out.reshape(10, -1).norm(dim=1), torch.full((10,), 2.5, dtype=torch.float64))


@pytest.mark.parametrize("mode", [None, "None"])
def test_mode_none_is_identity(mode):
    x = node_features(5, 3)
    assert PairNorm(mode)(None, x) is x


@pytest.mark.parametrize("mode", MODES)
def test_zero_features_stay_finite(mode):
    x = torch.zeros(6, 4, requires_grad=True)
    out = PairNorm(mode)(None, x)
    out.sum().backward()
    assert torch.equal(out, torch.zeros_like(out))
    assert torch.isfinite(x.grad).all()


@pytest.mark.parametrize("mode", MODES)
def test_batched_graph_is_normalised_as_one_graph_by_default(mode):
    graph = dgl.batch([dgl.rand_graph(4, 6), dgl.rand_graph(5, 8)])
    x = node_features(9, 3)
    assert_within(PairNorm(mode)(graph, x).numpy(), reference(x.numpy(), mode, 1.0), VALUES)


@pytest.mark.parametrize("mode", MODES)
def test_per_graph_normalises_each_graph_of_a_batch_alone(mode):
    graph = dgl.batch([dgl.rand_graph(4, 6), dgl.rand_graph(5, 8)])
    x = node_features(9, 2, 3)
    got = PairNorm(mode, 1.5, per_graph=True)(graph, x).reshape(9, 6).numpy()
    flat = x.reshape(9, 6).numpy()
    expected = np.concatenate([reference(flat[:4], mode, 1.5), reference(flat[4:], mode, 1.5)])
    assert_within(got, expected, VALUES)


def test_per_graph_needs_the_graph():
    with pytest.raises(ValueError, match=r"per_graph=True\) needs the graph, got None"):
        PairNorm("PN", per_graph=True)(None, node_features(3, 2))


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"mode": "SI"}, "unknown PairNorm mode 'SI'; allowed: None, PN, PN-SI, PN-SCS"),
        ({"scale": 0.0}, "scale must be positive, got 0.0"),
        ({"scale": -1.0}, "scale must be positive, got -1.0"),
    ],
)
def test_bad_arguments_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PairNorm(**kwargs)


@pytest.mark.parametrize("width", [4, 5, 7, 16])  # 4, 7 and 16 are compiled apart, 5 is not
@pytest.mark.parametrize("sets", [1, 3])
def test_pn_kernel_gradcheck(sets, width):
    """The compiled "PN" of S sets side by side: float64 gradients against finite
    differences (through the mean and the scale both)."""
    x = node_features(7, sets, width, seed=4).requires_grad_()
    assert torch.autograd.gradcheck(lambda h: kernels.pairnorm(h, 1.5, 1e-6), (x,))


# Centring rows offset by 5 and spread by `spread` cancels: a float64 path's error grows
# with c = max |x| / max |x - mean| (1.5-1.7 for spread 1, 510-540 for 1e-3), as
# k (1 + c) u64; the kernel's float32 output is one rounding of its float64 statistics,
# k (u32 + c u64). So the kernel in `dtype` and the torch form in float64 differ by at
# most 2 k (u + c u64) (|x| + scale). k measured against long double: float32 0.74 (the
# torch form's float64 share; the kernel's 0.45) -> 2; float64 4.7 (the kernel's outputs
# on the near-equal rows, the torch form's 2.9) -> 16.
PER_SET_CONDITION = {torch.float32: 2, torch.float64: 16}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("spread", [1.0, 1e-3], ids=["spread-rows", "near-equal-rows"])
def test_pn_kernel_equals_the_torch_form_per_set(spread, dtype, monkeypatch):
    """`pairnorm_pn` of S sets in the kernel equals, set by set, each set's own torch-form
    PN in float64 on the same input (values and gradients), to the rounding of `dtype`,
    also where the rows are all but equal (a deep layer's: float32's torch form would
    lose digits there, the kernel's float64 statistics do not)."""
    sets, nodes, width = 3, 30, 16
    x = (node_features(nodes, sets, width, seed=2) * spread + 5).to(dtype).requires_grad_()
    upstream = torch.randn(nodes, sets, width, generator=torch.Generator().manual_seed(1), dtype=dtype)
    out = pairnorm.pairnorm_pn(x, 2.0)
    (grad,) = torch.autograd.grad((out * upstream).sum(), x)
    assert out.dtype == grad.dtype == dtype
    monkeypatch.setenv("LIPNORM_KERNELS", "off")  # the reference: the torch form
    for s in range(sets):
        part = x.detach()[:, s : s + 1].double().requires_grad_()
        cancellation = (part.abs().max() / (part - part.mean(dim=0)).abs().max()).item()
        unit = UNIT_ROUNDOFF[dtype] + cancellation * UNIT_ROUNDOFF[torch.float64]
        expected = pairnorm.pairnorm_pn(part, 2.0)
        (expected_grad,) = torch.autograd.grad((expected * upstream[:, s : s + 1].double()).sum(), part)
        for got, want in ((out[:, s : s + 1], expected), (grad[:, s : s + 1], expected_grad)):
            assert_within(got.double(), want.detach(), PER_SET_CONDITION[dtype], unit=unit)


def test_pairnorm_pn_takes_the_kernel_on_cpu():
    kernels.reset(paths_only=True)
    x = node_features(6, 2, 3)
    out = PairNorm("PN", 1.0)(None, x.reshape(6, 6))
    assert kernels.record()["paths"] == {"pairnorm": ["compiled"]}
    assert_within(out.numpy(), reference(x.reshape(6, 6).numpy(), "PN", 1.0), VALUES)


def test_a_gradient_of_the_kernels_gradient_is_the_torch_forms():
    """The kernel's backward runs once; a gradient of it (create_graph=True) is taken
    through the torch form: the same first-order gradient, and a second order that
    gradgradcheck accepts (tests/kernels/test_double_backward.py has the others)."""
    x = node_features(6, 2, 3, seed=5).requires_grad_()
    (grad,) = torch.autograd.grad(pairnorm.pairnorm_pn(x, 1.5).pow(3).sum(), x)  # first order: the kernel
    (again,) = torch.autograd.grad(pairnorm.pairnorm_pn(x, 1.5).pow(3).sum(), x, create_graph=True)
    assert again.requires_grad
    assert torch.autograd.gradgradcheck(lambda h: pairnorm.pairnorm_pn(h, 1.5), (x,))
    # k measured against long double: the torch form's gradient 7.2, the kernel's 3.9 -> 16
    assert_within(again.detach(), grad, 16)
