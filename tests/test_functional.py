"""Shared helpers of the attention layers: the safe scaled 1/sqrt and the neighbour max."""

import dgl
import torch

from lipnorm.nn.functional import neighbour_max, scaled_inverse_sqrt, squared_norm


def test_squared_norm_equals_x_times_x_summed_and_has_the_exact_gradient():
    x = torch.randn(5, 3, 4, dtype=torch.float64, requires_grad=True)
    result = squared_norm(x)
    assert result.shape == (5, 3)
    assert torch.equal(result, (x * x).sum(dim=-1))
    weights = torch.randn(5, 3, dtype=torch.float64)
    (result * weights).sum().backward()
    torch.testing.assert_close(x.grad, 2 * x.detach() * weights.unsqueeze(-1))
    assert torch.autograd.gradcheck(squared_norm, (x.detach().requires_grad_(),))
    assert torch.autograd.gradgradcheck(squared_norm, (x.detach().requires_grad_(),))


def test_scaled_inverse_sqrt_is_exact_above_eps_and_zero_with_zero_gradient_at_or_below():
    # eps = 0.5: 0 and 0.25 = eps^2 are neutral (0, gradient 0); 4 and 0.36 are exact.
    squared = torch.tensor([0.0, 0.25, 4.0, 0.36], requires_grad=True)
    result = scaled_inverse_sqrt(squared, 3.0, 0.5)
    result.sum().backward()
    torch.testing.assert_close(result, torch.tensor([0.0, 0.0, 1.5, 5.0]))
    # d/ds 3 s^(-1/2) = -1.5 s^(-3/2)
    torch.testing.assert_close(squared.grad, torch.tensor([0.0, 0.0, -1.5 / 8, -1.5 / 0.216]))


def test_scaled_inverse_sqrt_with_eps_zero_maps_only_zero_to_zero():
    squared = torch.tensor([0.0, 1e-20, 1.0], requires_grad=True)
    result = scaled_inverse_sqrt(squared, 2.0, 0.0)
    result.sum().backward()
    torch.testing.assert_close(result, torch.tensor([0.0, 2e10, 2.0]))
    assert squared.grad[0] == 0.0 and torch.isfinite(squared.grad).all()


def test_neighbour_max_takes_in_neighbours_and_gives_zero_without_any():
    # Edges 0->1, 2->1, 3->0; node 2 and 3 have no in-edges.
    graph = dgl.graph((torch.tensor([0, 2, 3]), torch.tensor([1, 1, 0])), num_nodes=4)
    values = torch.tensor([[1.0, 7.0], [5.0, 0.0], [3.0, 2.0], [9.0, 4.0]])
    expected = torch.tensor([[9.0, 4.0], [3.0, 7.0], [0.0, 0.0], [0.0, 0.0]])
    assert torch.equal(neighbour_max(graph, values), expected)
    assert not graph.ndata


def test_neighbour_max_gradient_reaches_only_the_argmax_sources():
    # Same graph: node 1's max comes from sources 2 (column 0) and 0 (column 1), node 0's
    # from source 3; nodes 2 and 3 have no in-edges and must send no gradient anywhere
    # (DGL's raw kernel would route theirs to source 0).
    graph = dgl.graph((torch.tensor([0, 2, 3]), torch.tensor([1, 1, 0])), num_nodes=4)
    values = torch.tensor([[1.0, 7.0], [5.0, 0.0], [3.0, 2.0], [9.0, 4.0]], requires_grad=True)
    weights = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]])
    (neighbour_max(graph, values) * weights).sum().backward()
    expected = torch.tensor([[0.0, 4.0], [0.0, 0.0], [3.0, 0.0], [1.0, 2.0]])
    assert torch.equal(values.grad, expected)
