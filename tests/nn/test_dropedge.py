"""DropEdge: per-epoch masks of the authors' form (a fixed count of the non-self-loop edges,
uniformly, each direction on its own), self-loops kept, its own reproducible random stream."""

import math
import re
from fractions import Fraction

import dgl
import numpy as np
import pytest
import torch

from lipnorm.nn.dropedge import DropEdge


def undirected_graph(num_nodes=12, num_pairs=20, seed=0):
    """A symmetric graph (each edge both ways) with one self-loop per node, as the project's."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_nodes, size=num_pairs)
    dst = (src + rng.integers(1, num_nodes, size=num_pairs)) % num_nodes  # no self-loop
    graph = dgl.to_bidirected(dgl.graph((torch.tensor(src), torch.tensor(dst)), num_nodes=num_nodes))
    return dgl.add_self_loop(graph)


def star_graph(num_nodes=9):
    leaves = torch.arange(1, num_nodes)
    return dgl.add_self_loop(dgl.graph((leaves, torch.zeros_like(leaves)), num_nodes=num_nodes))


GRAPHS = {"undirected": undirected_graph, "star": star_graph, "star10": lambda: star_graph(11)}


def with_data(graph):
    graph.ndata["x"] = torch.arange(graph.num_nodes(), dtype=torch.float32).unsqueeze(1).repeat(1, 3)
    graph.edata["w"] = torch.arange(graph.num_edges(), dtype=torch.float32) * 10
    return graph


def kept_ids(dropped):
    return dropped.edata[dgl.EID]


def non_loop_count(graph):
    src, dst = graph.edges()
    return int((src != dst).sum())


@pytest.mark.parametrize("graph_name", GRAPHS)
@pytest.mark.parametrize("rate", [0.1, 0.25, 0.5, 0.9])
def test_each_epoch_keeps_every_self_loop_and_the_authors_count_of_the_others(graph_name, rate):
    graph = with_data(GRAPHS[graph_name]())
    drop = DropEdge(rate, seed=3)
    others = non_loop_count(graph)
    for _ in range(5):
        dropped = drop.graph_for_epoch(graph)
        ids = kept_ids(dropped)
        src, dst = graph.edges()
        loops = torch.nonzero(src == dst).squeeze(1)
        assert set(loops.tolist()) <= set(ids.tolist())
        # Their preserve_nnz = int(nnz * percent), percent = 1 - rate.
        assert len(ids) - len(loops) == math.floor(others * (1 - Fraction(str(rate))))


@pytest.mark.parametrize("graph_name", GRAPHS)
def test_dropped_graph_keeps_nodes_node_data_and_kept_edges_in_order(graph_name):
    graph = with_data(GRAPHS[graph_name]())
    dropped = DropEdge(0.4, seed=0).graph_for_epoch(graph)
    ids = kept_ids(dropped)
    assert dropped.num_nodes() == graph.num_nodes()
    assert torch.equal(dropped.ndata["x"], graph.ndata["x"])
    assert torch.all(ids[1:] > ids[:-1])  # ascending: the original edge order
    src, dst = graph.edges()
    new_src, new_dst = dropped.edges()
    assert torch.equal(new_src, src[ids]) and torch.equal(new_dst, dst[ids])
    assert torch.equal(dropped.edata["w"], graph.edata["w"][ids])


def test_masks_are_fresh_each_epoch_and_reproducible_for_a_seed():
    graph = undirected_graph()
    epochs = [kept_ids(DropEdge(0.5, seed=11).graph_for_epoch(graph)) for _ in range(2)]
    assert torch.equal(epochs[0], epochs[1])  # same seed, same first mask
    drop = DropEdge(0.5, seed=11)
    masks = [kept_ids(drop.graph_for_epoch(graph)).tolist() for _ in range(6)]
    assert masks[0] == epochs[0].tolist()
    assert len({tuple(mask) for mask in masks}) == 6  # C(~60, 30) masks: equal ones would be a bug
    other_seed = kept_ids(DropEdge(0.5, seed=12).graph_for_epoch(graph))
    assert not torch.equal(other_seed, epochs[0])


def test_each_edge_is_kept_with_probability_one_minus_rate():
    """Over many epochs each non-self-loop edge's keep count is Binomial(n, 1 - rate)-like:
    within 5 standard deviations of n (1 - rate) (a fixed count per epoch, uniformly)."""
    graph = undirected_graph()
    rate, epochs = 0.3, 400
    drop = DropEdge(rate, seed=0)
    counts = torch.zeros(graph.num_edges())
    for _ in range(epochs):
        counts[kept_ids(drop.graph_for_epoch(graph))] += 1
    src, dst = graph.edges()
    others = counts[src != dst]
    expected = epochs * (1 - rate)
    bound = 5 * math.sqrt(epochs * rate * (1 - rate))
    assert torch.all((others - expected).abs() <= bound), (others.min(), others.max())
    assert torch.all(counts[src == dst] == epochs)


def test_directions_of_an_undirected_edge_are_dropped_independently():
    """As the authors' sampler (entries of the symmetric adjacency): u -> v and v -> u are
    separate draws, so some epoch keeps one direction only."""
    graph = undirected_graph()
    drop = DropEdge(0.5, seed=0)
    src, dst = graph.edges()
    one_way = 0
    for _ in range(10):
        ids = kept_ids(drop.graph_for_epoch(graph))
        kept = set(zip(src[ids].tolist(), dst[ids].tolist()))
        one_way += sum((v, u) not in kept for u, v in kept)
    assert one_way > 0


def test_state_dict_restores_the_next_mask():
    graph = undirected_graph()
    drop = DropEdge(0.3, seed=5)
    drop.graph_for_epoch(graph)
    state = drop.state_dict()
    following = [kept_ids(drop.graph_for_epoch(graph)) for _ in range(3)]
    resumed = DropEdge(0.3, seed=999)
    resumed.load_state_dict(state)
    assert resumed.seed == 5
    for expected in following:
        assert torch.equal(kept_ids(resumed.graph_for_epoch(graph)), expected)


def test_masks_do_not_touch_the_global_random_stream():
    """The model's dropout draws from the global generator: DropEdge must not shift it."""
    torch.manual_seed(0)
    expected = torch.rand(5)
    torch.manual_seed(0)
    DropEdge(0.5, seed=0).graph_for_epoch(undirected_graph())
    assert torch.equal(torch.rand(5), expected)


def test_the_input_graph_is_untouched_for_evaluation():
    graph = with_data(undirected_graph())
    edges, data = graph.edges(), graph.edata["w"].clone()
    drop = DropEdge(0.6, seed=0)
    for _ in range(3):
        drop.graph_for_epoch(graph)
    assert all(torch.equal(a, b) for a, b in zip(graph.edges(), edges))
    assert torch.equal(graph.edata["w"], data) and dgl.EID not in graph.edata


def test_rate_zero_is_the_graph_itself_and_draws_nothing():
    graph = undirected_graph()
    drop = DropEdge(0.0, seed=0)
    state = drop.generator.get_state()
    assert drop.graph_for_epoch(graph) is graph
    assert torch.equal(drop.generator.get_state(), state)


def test_batched_graph_keeps_its_batch_sizes():
    parts = [undirected_graph(6, 8, seed=1), star_graph(5), undirected_graph(7, 10, seed=2)]
    graph = dgl.batch(parts)
    dropped = DropEdge(0.5, seed=0).graph_for_epoch(graph)
    assert torch.equal(dropped.batch_num_nodes(), graph.batch_num_nodes())
    ids = kept_ids(dropped)
    owner = torch.repeat_interleave(torch.arange(len(parts)), graph.batch_num_edges())[ids]
    assert torch.equal(dropped.batch_num_edges(), torch.bincount(owner, minlength=len(parts)))
    assert [part.num_nodes() for part in dgl.unbatch(dropped)] == [part.num_nodes() for part in parts]


@pytest.mark.parametrize("rate", [-0.1, 1.0, 1.5, float("nan"), "0.3"])
def test_bad_rate_is_a_value_error_naming_it(rate):
    with pytest.raises(ValueError, match=re.escape(f"DropEdge rate must be a number in [0, 1), got {rate!r}")):
        DropEdge(rate, seed=0)


def test_state_of_another_rate_is_refused():
    state = DropEdge(0.3, seed=0).state_dict()
    with pytest.raises(ValueError, match="DropEdge state of rate 0.3 loaded into a DropEdge of rate 0.5"):
        DropEdge(0.5, seed=0).load_state_dict(state)


def test_unordered_kept_edges_are_the_same_draw():
    """`ordered=False` (a mask's) keeps the same edges as the ascending IDs and moves the
    generator on the same way: the next draws agree too."""
    graph = undirected_graph(30, 60, seed=1)
    ordered, unordered = DropEdge(0.4, seed=3), DropEdge(0.4, seed=3)
    for _ in range(3):
        ascending, any_order = ordered.kept_edges(graph), unordered.kept_edges(graph, ordered=False)
        assert torch.equal(ascending, any_order.sort().values)
        assert torch.equal(ascending, ascending.sort().values) and len(ascending) < graph.num_edges()
