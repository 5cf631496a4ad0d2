"""BatchNorm and DGN against numpy transcriptions of their published definitions.

BatchNorm (Ioffe & Szegedy 2015) over the nodes; DGN (Zhou et al., NeurIPS 2020):
out = h + lambda * sum_g BN_g(softmax(h W + b)[:, g] * h), one BatchNorm per group.
Training standardises with the batch mean and biased variance; the running mean and
unbiased variance, updated with `momentum`, standardise in evaluation.
"""

import copy
import re

import dgl
import numpy as np
import pytest
import torch
from torch import nn

from lipnorm import kernels

from lipnorm.nn.norm.batchnorm import BatchNorm
from lipnorm.nn.norm.dgn import DiffGroupNorm
from tests.tolerance import assert_within

EPS = 1e-5

# Tolerances from an error model. Each path's number x (the layer's, the numpy
# reference's, BatchNorm1d's over the grouped matrix) lies within k u (|x| + scale) of its
# exact value: u the unit roundoff of the dtype, k the condition of the quantity on the
# test's inputs (how much the computation magnifies unit roundings: its sums, the
# centring's cancellation; a property of the numbers, not of the CPU), scale the tensor's
# largest |x|. So two paths differ by at most 2 k u (|x| + scale): rtol = 2 k u,
# atol = rtol * scale. Each k is a power of two >= 2x the largest |path - exact| /
# (u (|x| + scale)) measured over all the test's parametrisations under 6 summation orders
# of torch and MKL (ATEN_CPU_CAPABILITY default, AVX2, AVX-512; MKL_CBWR COMPATIBLE, AVX2;
# 1 and 2 threads): float64 paths against the numpy formulas in long double (64-bit
# significand), float32 paths against the same computation in float64.


def node_features(*shape, seed=0):
    # Offset and scaled so that standardising changes the values substantially.
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=torch.float64) * 3 + 2


def randomise_affine(module):
    """Non-trivial gamma, beta (and DGN's assignment weights), so that they are tested."""
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator, dtype=parameter.dtype))


class ReferenceBatchNorm:
    """Columns of a (N, C) array: statistics and running statistics by hand."""

    def __init__(self, gamma, beta, momentum):
        self.gamma, self.beta, self.momentum = gamma, beta, momentum
        self.running_mean = np.zeros_like(gamma)
        self.running_var = np.ones_like(gamma)

    def train(self, x):
        n = x.shape[0]
        mean = x.sum(axis=0) / n
        biased_var = ((x - mean) ** 2).sum(axis=0) / n
        unbiased_var = ((x - mean) ** 2).sum(axis=0) / (n - 1)
        self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mean
        self.running_var = (1 - self.momentum) * self.running_var + self.momentum * unbiased_var
        return self.gamma * (x - mean) / np.sqrt(biased_var + EPS) + self.beta

    def eval(self, x):
        return self.gamma * (x - self.running_mean) / np.sqrt(self.running_var + EPS) + self.beta


def reference_dgn_groups(h, weight, bias):
    """softmax(h W^T + b) by hand, then the groups' features S[:, g] * h side by side."""
    scores = h @ weight.T + bias
    exp = np.exp(scores - scores.max(axis=1, keepdims=True))
    assignment = exp / exp.sum(axis=1, keepdims=True)
    return np.concatenate([assignment[:, [g]] * h for g in range(weight.shape[0])], axis=1)


def dgn_sum(h, normalised_groups, num_groups, skip_weight):
    width = h.shape[1]
    return h + skip_weight * sum(normalised_groups[:, g * width : (g + 1) * width] for g in range(num_groups))


def train_then_eval(module, inputs, evaluation_input):
    """The module's outputs on each training input in turn, then in eval mode."""
    module.train()
    outputs = [module(None, x) for x in inputs]
    module.eval()
    return outputs, module(None, evaluation_input)


@pytest.mark.parametrize("num_nodes", [2, 7, 30])
@pytest.mark.parametrize("shape", [(6,), (3, 2), (1, 4)], ids=["flat6", "3x2", "1x4"])
@pytest.mark.parametrize("momentum", [0.1, 0.3, 1.0])
def test_batchnorm_matches_reference_in_training_and_eval(num_nodes, shape, momentum):
    width = int(np.prod(shape))
    norm = BatchNorm(width, momentum=momentum).double()
    randomise_affine(norm)
    reference = ReferenceBatchNorm(norm.bn.weight.detach().numpy(), norm.bn.bias.detach().numpy(), momentum)
    inputs = [node_features(num_nodes, *shape, seed=seed) for seed in range(3)]
    evaluation_input = node_features(num_nodes + 3, *shape, seed=9)
    outputs, evaluated = train_then_eval(norm, inputs, evaluation_input)
    # k measured (float64, against long double): outputs 3.6 (torch's; the reference's
    # 3.0, two nodes) -> 8; running statistics 1.9 -> 4.
    for x, out in zip(inputs, outputs):
        assert out.shape == x.shape
        expected = reference.train(x.reshape(num_nodes, width).numpy()).reshape(x.shape)
        assert_within(out.detach().numpy(), expected, 8)
    assert_within(norm.bn.running_mean.numpy(), reference.running_mean, 4)
    assert_within(norm.bn.running_var.numpy(), reference.running_var, 4)
    expected = reference.eval(evaluation_input.reshape(-1, width).numpy()).reshape(evaluation_input.shape)
    assert_within(evaluated.detach().numpy(), expected, 8)


def test_batchnorm_in_training_gives_each_column_mean_zero_variance_one():
    out = BatchNorm(5).double()(None, node_features(40, 5))
    torch.testing.assert_close(out.mean(dim=0), torch.zeros(5, dtype=torch.float64))
    torch.testing.assert_close(
        out.var(dim=0, unbiased=False), torch.ones(5, dtype=torch.float64), rtol=1e-4, atol=0
    )


@pytest.mark.parametrize("num_nodes", [3, 12])
@pytest.mark.parametrize("shape", [(5,), (2, 3)], ids=["flat5", "2x3"])
@pytest.mark.parametrize("num_groups", [1, 2, 10])
@pytest.mark.parametrize("skip_weight", [0.005, 0.5, 1.0])
def test_dgn_matches_reference_in_training_and_eval(num_nodes, shape, num_groups, skip_weight):
    width = int(np.prod(shape))
    norm = DiffGroupNorm(width, num_groups=num_groups, skip_weight=skip_weight).double()
    randomise_affine(norm)
    weight, bias = norm.cluster.weight.detach().numpy(), norm.cluster.bias.detach().numpy()
    reference = ReferenceBatchNorm(norm.bn.weight.detach().numpy(), norm.bn.bias.detach().numpy(), 0.3)
    inputs = [node_features(num_nodes, *shape, seed=seed) for seed in range(3)]
    evaluation_input = node_features(num_nodes + 2, *shape, seed=5)
    outputs, evaluated = train_then_eval(norm, inputs, evaluation_input)
    # k measured (float64, against long double): the kernel 7.5 (3 nodes), the reference
    # 4.4 -> 16.
    for x, out in zip(inputs, outputs):
        h = x.reshape(num_nodes, width).numpy()
        normalised = reference.train(reference_dgn_groups(h, weight, bias))
        expected = dgn_sum(h, normalised, num_groups, skip_weight).reshape(x.shape)
        assert out.shape == x.shape
        assert_within(out.detach().numpy(), expected, 16)
    h = evaluation_input.reshape(-1, width).numpy()
    normalised = reference.eval(reference_dgn_groups(h, weight, bias))
    expected = dgn_sum(h, normalised, num_groups, skip_weight).reshape(evaluation_input.shape)
    assert_within(evaluated.detach().numpy(), expected, 16)


def test_dgn_groups_have_their_own_statistics():
    """Group g's BatchNorm standardises S[:, g] * h alone: mean 0, variance 1 per group."""
    width, num_groups = 4, 3
    norm = DiffGroupNorm(width, num_groups=num_groups, skip_weight=1.0).double()
    randomise_affine(norm)
    with torch.no_grad():
        norm.bn.weight.fill_(1.0)
        norm.bn.bias.zero_()
    h = node_features(50, width)
    grouped = torch.from_numpy(
        reference_dgn_groups(h.numpy(), norm.cluster.weight.detach().numpy(), norm.cluster.bias.detach().numpy())
    )
    normalised = norm.bn(grouped).view(50, num_groups, width)
    torch.testing.assert_close(normalised.mean(dim=0), torch.zeros(num_groups, width, dtype=torch.float64))
    variance = normalised.var(dim=0, unbiased=False)
    torch.testing.assert_close(variance, torch.ones(num_groups, width, dtype=torch.float64), rtol=1e-4, atol=0)


def test_dgn_defaults_are_the_authors():
    norm = DiffGroupNorm(16)
    assert (norm.num_groups, norm.skip_weight, norm.bn.momentum, norm.bn.eps) == (10, 0.005, 0.3, 1e-5)
    assert norm.bn.num_features == 160
    assert (norm.cluster.in_features, norm.cluster.out_features) == (16, 10)
    assert norm.cluster.bias is not None


def test_dgn_with_zero_skip_weight_is_identity():
    x = node_features(8, 2, 3)
    torch.testing.assert_close(DiffGroupNorm(6, skip_weight=0.0).double()(None, x), x)


@pytest.mark.parametrize("cls", [BatchNorm, DiffGroupNorm])
def test_gradients_reach_every_parameter_and_the_input(cls):
    norm = cls(6).double()
    x = node_features(9, 2, 3).requires_grad_()
    norm(dgl.rand_graph(9, 20), x).pow(2).sum().backward()
    assert torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0
    for name, parameter in norm.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


@pytest.mark.parametrize("cls", [BatchNorm, DiffGroupNorm])
@pytest.mark.parametrize("shape", [(5, 7), (5, 2, 2), (5,)], ids=["width7", "2x2", "1d"])
def test_wrong_width_is_a_value_error_naming_the_shape(cls, shape):
    with pytest.raises(ValueError, match=re.escape(f"of width 6 got features of shape {shape}; allowed: (N, 6)")):
        cls(6)(None, torch.zeros(shape))


@pytest.mark.parametrize(
    "cls, kwargs, message",
    [
        (BatchNorm, {"width": 0}, "width must be an integer >= 1, got 0"),
        (BatchNorm, {"width": 4, "momentum": 1.5}, r"momentum must be a number in \[0, 1\], got 1.5"),
        (BatchNorm, {"width": 4, "eps": 0.0}, "eps must be a finite number > 0, got 0.0"),
        (DiffGroupNorm, {"width": 4, "num_groups": 0}, "num_groups must be an integer >= 1, got 0"),
        (DiffGroupNorm, {"width": 4, "skip_weight": float("nan")}, "skip_weight must be a finite number, got nan"),
        (DiffGroupNorm, {"width": 4, "momentum": -0.1}, r"momentum must be a number in \[0, 1\], got -0.1"),
    ],
)
def test_bad_options_raise_value_error_naming_the_value(cls, kwargs, message):
    with pytest.raises(ValueError, match=message):
        cls(**kwargs)


@pytest.mark.parametrize("fused", [True, False], ids=["kernel", "torch"])
@pytest.mark.parametrize("affine", [True, False], ids=["affine", "plain"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("width", [5, 6, 7, 16])  # the kernel compiles 6, 7 and 16 apart
def test_dgn_gradients_and_running_stats_equal_batchnorm_over_the_grouped_matrix(
    width, training, dtype, affine, fused, monkeypatch
):
    """`dgn_output` (no (N, G * W) matrix), in the compiled kernel and by its
    torch products, against BatchNorm1d over that matrix."""
    monkeypatch.setenv("LIPNORM_KERNELS", "on" if fused else "off")
    kernels.reset(paths_only=True)
    torch.manual_seed(3)
    num_groups, nodes = 4, 30
    norm = DiffGroupNorm(width, num_groups=num_groups, skip_weight=0.5).to(dtype)
    if not affine:
        norm.bn = nn.BatchNorm1d(num_groups * width, affine=False, momentum=0.3).to(dtype)
    randomise_affine(norm)
    with torch.no_grad():  # running statistics of their own, for the evaluation
        norm.bn.running_mean.uniform_(-1, 1)
        norm.bn.running_var.uniform_(0.5, 2)
    reference = copy.deepcopy(norm)
    norm.train(training), reference.train(training)
    x = torch.randn(nodes, width, dtype=dtype, requires_grad=True)

    def materialised(module, h):
        assignment = torch.softmax(module.cluster(h), dim=1)
        grouped = (assignment.unsqueeze(2) * h.unsqueeze(1)).reshape(nodes, -1)
        return h + module.skip_weight * module.bn(grouped).view(nodes, num_groups, width).sum(dim=1)

    upstream = torch.randn(nodes, width, dtype=dtype)
    out, expected = norm(None, x), materialised(reference, x)
    # k measured, each path in float32 against the same computation in float64 (and in
    # float64 the paths' differences, in parentheses): output 3.0 (1.7) -> 8; gradients,
    # each to its own largest entry, 46 (29: the assignment's weight and bias, sums of
    # softmax derivatives that cancel over the groups) -> 128; running statistics 0.84
    # (0.41) -> 2. The kernel and the torch products take their statistics in float64.
    assert_within(out, expected, 8)
    got = torch.autograd.grad((out * upstream).sum(), [x, *norm.parameters()])
    want = torch.autograd.grad((expected * upstream).sum(), [x, *reference.parameters()])
    for a, b in zip(got, want):
        assert_within(a, b, 128)
    for name in ("running_mean", "running_var"):
        assert_within(getattr(norm.bn, name), getattr(reference.bn, name), 2)
    assert torch.equal(norm.bn.num_batches_tracked, reference.bn.num_batches_tracked)
    assert kernels.record()["paths"] == {"dgn": ["compiled" if fused else "torch"]}
