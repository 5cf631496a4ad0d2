"""Shared helpers of the attention layers: 0/0-safe division and neighbour max."""

import dgl
import torch

from lipnorm.nn.functional import neighbour_max, safe_divide


def test_safe_divide_maps_zero_denominator_to_zero_with_zero_gradient():
    numerator = torch.tensor([0.0, 3.0, -2.0], requires_grad=True)
    denominator = torch.tensor([0.0, 4.0, 8.0], requires_grad=True)
    result = safe_divide(numerator, denominator)
    result.sum().backward()
    torch.testing.assert_close(result, torch.tensor([0.0, 0.75, -0.25]))
    torch.testing.assert_close(numerator.grad, torch.tensor([0.0, 0.25, 0.125]))
    torch.testing.assert_close(denominator.grad, torch.tensor([0.0, -3 / 16, 2 / 64]))


def test_neighbour_max_takes_in_neighbours_and_gives_zero_without_any():
    # Edges 0->1, 2->1, 3->0; node 2 and 3 have no in-edges.
    graph = dgl.graph((torch.tensor([0, 2, 3]), torch.tensor([1, 1, 0])), num_nodes=4)
    values = torch.tensor([[1.0, 7.0], [5.0, 0.0], [3.0, 2.0], [9.0, 4.0]])
    expected = torch.tensor([[9.0, 4.0], [3.0, 7.0], [0.0, 0.0], [0.0, 0.0]])
    assert torch.equal(neighbour_max(graph, values), expected)
    assert "_value" not in graph.ndata
