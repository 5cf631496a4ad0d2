"""Residual sums: GCNII's initial residual, and the attention layer's residual connection
(DGL's: out = attention output + res_fc(x), res_fc the identity when widths agree)."""

import re

import dgl
import numpy as np
import pytest
import torch

from lipnorm.nn.conv.gat import GATConv
from lipnorm.nn.residual import InitialResidual, initial_residual


def tensor(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("alpha", [0.0, 0.1, 0.5, 1.0])
@pytest.mark.parametrize(
    "h_shape, h0_shape", [((6, 4), (6, 4)), ((6, 2, 3), (6, 6)), ((5, 6), (5, 3, 2)), ((4, 1, 5), (4, 1, 5))]
)
def test_initial_residual_is_the_convex_mix_of_gcnii(alpha, h_shape, h0_shape):
    h, h0 = tensor(*h_shape, seed=1), tensor(*h0_shape, seed=2)
    out = InitialResidual(alpha)(h, h0)
    assert out.shape == h.shape
    expected = (1 - alpha) * h.numpy().reshape(h.shape[0], -1) + alpha * h0.numpy().reshape(h0.shape[0], -1)
    np.testing.assert_allclose(out.numpy().reshape(h.shape[0], -1), expected, rtol=0, atol=1e-15)


def test_initial_residual_default_alpha_is_gcniis():
    assert InitialResidual().alpha == 0.1


def test_initial_residual_passes_gradients_to_both_inputs_in_proportion():
    h, h0 = tensor(5, 3).requires_grad_(), tensor(5, 3, seed=1).requires_grad_()
    initial_residual(h, h0, 0.25).sum().backward()
    torch.testing.assert_close(h.grad, torch.full_like(h, 0.75))
    torch.testing.assert_close(h0.grad, torch.full_like(h0, 0.25))


def test_a_deep_stack_keeps_a_share_of_the_first_representation():
    """Layers that forget their input entirely (f = 0) still give alpha * h0 after each:
    the point of the initial residual against over-smoothing."""
    h0 = tensor(4, 3)
    h, mix = h0, InitialResidual(0.2)
    for _ in range(30):
        h = mix(torch.zeros_like(h), h0)
    torch.testing.assert_close(h, 0.2 * h0)


@pytest.mark.parametrize("h0_shape", [(3, 12), (6, 5), (6, 2, 2)], ids=["nodes", "width5", "2x2"])
def test_mismatched_first_representation_is_a_value_error(h0_shape):
    message = re.escape(
        f"the first representation of shape {h0_shape} does not match the layer output of shape (6, 2, 3)"
    )
    with pytest.raises(ValueError, match=message):
        initial_residual(tensor(6, 2, 3), tensor(*h0_shape), 0.1)


@pytest.mark.parametrize("alpha", [-0.1, 1.5, float("nan")])
def test_bad_alpha_is_a_value_error_naming_it(alpha):
    with pytest.raises(
        ValueError, match=re.escape(f"initial residual alpha must be a number in [0, 1], got {alpha}")
    ):
        InitialResidual(alpha)


# --- the attention layer's residual ---------------------------------------------------


def graph_with_self_loops(num_nodes=8, seed=0):
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, num_nodes, size=(2, 20))
    return dgl.add_self_loop(
        dgl.remove_self_loop(dgl.graph((torch.tensor(src), torch.tensor(dst)), num_nodes=num_nodes))
    )


@pytest.mark.parametrize("norm", ["none", "lip"])
@pytest.mark.parametrize("in_feats", [5, 6], ids=["linear", "identity"])
@pytest.mark.parametrize("num_heads, out_feats", [(1, 6), (2, 3), (3, 2)])
def test_gat_residual_adds_the_input_or_its_projection(norm, in_feats, num_heads, out_feats):
    graph, x = graph_with_self_loops(), tensor(8, in_feats).float()
    torch.manual_seed(0)
    with_residual = GATConv(in_feats, out_feats, num_heads, norm=norm, residual=True)
    with torch.no_grad():
        for parameter in with_residual.parameters():
            parameter.add_(0.1)  # non-zero biases
    # The same attention layer without residual or bias: the attention output alone.
    without = GATConv(in_feats, out_feats, num_heads, norm=norm, residual=False, bias=False)
    shared = without.state_dict().keys()
    without.load_state_dict({name: value for name, value in with_residual.state_dict().items() if name in shared})
    if in_feats == num_heads * out_feats:
        assert isinstance(with_residual.res_fc, torch.nn.Identity)
        skip = x + with_residual.bias
    else:  # DGL's layout: the linear residual carries the bias
        assert with_residual.bias is None
        skip = x @ with_residual.res_fc.weight.T + with_residual.res_fc.bias
    expected = without(graph, x) + skip.view(-1, num_heads, out_feats)
    torch.testing.assert_close(with_residual(graph, x), expected)
