"""Cluster-GCN batches (`batching="cluster"`, `lipnorm.train.cluster_batches`): each epoch's
batches cover every training node once, the METIS partition is cached, the evaluation is
the whole graph's, and the settings are checked and passed through."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import dgl
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from lipnorm import cli, data, train
from lipnorm.train.diagnostics import GraphDiagnostics
from lipnorm.nn.models.numbering import attention_layers
from lipnorm.settings.train_config import cluster_counts
from lipnorm.train import TrainConfig, cluster_batches
from lipnorm.train.cluster_batches import ClusterBatches
from lipnorm.train.trainer import Trainer, prepare

TINY_CSBM = "nodes=60,classes=3,feature_dim=8,avg_degree=4"
FRAMES = ("metrics", "gradnorms", "outnorms", "layerstats")


def config_of(tmp_path: Path, **changes) -> TrainConfig:
    settings = {
        "dataset": "csbm", "csbm": TINY_CSBM, "model": "gat-lip", "depth": 3, "heads": 2, "hidden": 4,
        "epochs": 3, "data_root": str(tmp_path / "datasets"), "batching": "cluster", "partitions": 6,
        "batch_partitions": 2, **changes,
    }
    return TrainConfig(**settings).resolved()


def trainer_of(config: TrainConfig) -> Trainer:
    return Trainer(prepare(config), config)


# --- the batches -------------------------------------------------------------------


@pytest.mark.parametrize(("partitions", "batch_partitions"), [(6, 1), (6, 4), (7, 3), (10, 10), (20, 6)])
def test_every_training_node_is_in_exactly_one_batch_per_epoch(tmp_path, partitions, batch_partitions):
    setup = prepare(config_of(tmp_path, partitions=partitions, batch_partitions=batch_partitions))
    batches, graph = setup.batches, setup.dataset.graph
    sampler = batches.sampler
    parts = [
        set(sampler.partition_node_ids[start:stop].tolist())
        for start, stop in zip(sampler.partition_offset[:-1].tolist(), sampler.partition_offset[1:].tolist())
    ]
    train_nodes = sorted(setup.splits[0].tolist())
    compositions = []
    for _ in range(4):
        seen_train, seen_nodes, epoch = [], [], []
        for batch in batches.epoch():
            nodes = batch.nodes.tolist()
            # The union of whole partitions, as many as asked (the last batch: the rest).
            members = [i for i, part in enumerate(parts) if part & set(nodes)]
            assert set(nodes) == set().union(*(parts[i] for i in members))
            epoch.append(frozenset(members))
            # The subgraph those nodes induce, in the batch's node order.
            reference = dgl.node_subgraph(graph, batch.nodes)
            assert torch.equal(batch.graph.ndata[dgl.NID], batch.nodes)
            assert sorted(zip(*(t.tolist() for t in batch.graph.edges()))) == sorted(
                zip(*(t.tolist() for t in reference.edges()))
            )
            assert torch.equal(batch.nodes[batch.train_rows], batch.train_nodes)
            assert batch.num_train == len(batch.train_nodes) and batch.has_training_nodes == (batch.num_train > 0)
            seen_train += batch.train_nodes.tolist()
            seen_nodes += nodes
        sizes = sorted(len(members) for members in epoch)
        expected = [batch_partitions] * (partitions // batch_partitions)
        expected += [partitions % batch_partitions] if partitions % batch_partitions else []
        assert sizes == sorted(expected)
        assert sorted(seen_train) == train_nodes
        assert sorted(seen_nodes) == list(range(graph.num_nodes()))
        compositions.append(epoch)
    if batch_partitions < partitions:  # the order is drawn afresh every epoch
        assert len({tuple(epoch) for epoch in compositions}) > 1


def test_the_batch_order_is_seeded_and_restored_by_its_state(tmp_path):
    def orders(batches: ClusterBatches, epochs: int) -> list[list[int]]:
        return [[batch.nodes[0].item() for batch in batches.epoch()] for _ in range(epochs)]

    setup = prepare(config_of(tmp_path, seed=3))
    state = setup.batches.state_dict()
    expected = orders(setup.batches, 3)
    assert orders(prepare(config_of(tmp_path, seed=3)).batches, 3) == expected
    assert orders(prepare(config_of(tmp_path, seed=4)).batches, 3) != expected
    setup.batches.load_state_dict(state)
    assert orders(setup.batches, 3) == expected
    other = prepare(config_of(tmp_path, batch_partitions=3)).batches
    with pytest.raises(ValueError, match="cluster-batch state of 6 partitions, 2 per batch, loaded into one of 6, 3"):
        other.load_state_dict(state)


def test_the_partition_is_cached_beside_the_dataset_and_reused(tmp_path, monkeypatch):
    config = config_of(tmp_path)
    first = prepare(config).batches.sampler
    path = tmp_path / "datasets" / (
        "csbm-nodes60-classes3-avg_degree4-homophily0.8-feature_dim8-signal1-seed0-metis-k6.pkl"
    )
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no temporary file left

    def no_metis(*args, **kwargs):
        raise AssertionError("METIS ran again")

    monkeypatch.setattr(dgl.dataloading.cluster_gcn, "metis_partition_assignment", no_metis)
    again = prepare(config).batches.sampler
    assert torch.equal(again.partition_node_ids, first.partition_node_ids)
    assert torch.equal(again.partition_offset, first.partition_offset)
    # Another K is another partition: computed (here: refused by the patch).
    with pytest.raises(AssertionError, match="METIS ran again"):
        prepare(dataclasses.replace(config, partitions=5))
    assert not (path.parent / path.name.replace("-k6", "-k5")).exists()


def test_the_cache_name_holds_the_dataset_and_k(tmp_path):
    assert cluster_batches.cache_path(tmp_path, "cora", 32) == tmp_path / "cora-metis-k32.pkl"


# --- training and evaluation --------------------------------------------------------


def test_an_epoch_takes_one_step_per_batch_with_training_nodes_and_combines_their_numbers(tmp_path, monkeypatch):
    """Against a loop written out here: the same batches, one Adam step each (batches
    without training nodes skipped), the loss averaged over the training nodes, the
    gradient-group norms over the steps, the output norms over every step's nodes."""
    config = config_of(tmp_path, partitions=12, batch_partitions=2, feat_drop=0.0, attn_drop=0.0)
    # METIS's assignment differs between processes, and so did whether some batch had no
    # training node: a fixed one instead, the training nodes in parts 0 and 1 and every
    # other node in parts 2-11, so that at least 4 of the 6 batches have none.
    train_mask = data.load_dataset("csbm", root=config.data_root, csbm=data.csbm_params(TINY_CSBM)).train_mask
    nodes = torch.arange(len(train_mask))

    def fixed_partition(graph, k, **kwargs):
        return torch.where(train_mask, nodes % 2, 2 + nodes % (k - 2))

    monkeypatch.setattr(dgl.dataloading.cluster_gcn, "metis_partition_assignment", fixed_partition)
    # Two trainers alike (the same seed), one epoch in each: Adam's state now exists.
    trainer, reference = trainer_of(config), trainer_of(config)
    assert trainer.train_step().loss.dtype == torch.float64
    reference.train_step()
    step = trainer.train_step()

    losses, counts, grads, squares = [], [], [], 0
    outputs: list[torch.Tensor] = []
    handles = [m.register_forward_hook(lambda m, i, o: outputs.append(o)) for _, m in attention_layers(reference.model)]
    batches = list(reference.batches.epoch())
    assert any(not batch.has_training_nodes for batch in batches)  # the case is exercised
    for batch in batches:
        if not batch.has_training_nodes:
            continue
        outputs.clear()
        reference.model.train()
        reference.optimizer.zero_grad()
        logits = reference.model(batch.graph, reference.features[batch.nodes])
        loss = F.cross_entropy(logits[batch.train_rows], reference.labels[batch.train_nodes])
        loss.backward()
        grads.append(reference.gradient_norms())
        squares = squares + torch.stack([torch.linalg.vector_norm(o.detach()) for o in outputs]).double() ** 2
        reference.optimizer.step()
        losses.append(loss.item())
        counts.append(len(batch.train_nodes))
    for handle in handles:
        handle.remove()
    expected_loss = sum(loss * count for loss, count in zip(losses, counts)) / sum(counts)
    assert step.loss.item() == pytest.approx(expected_loss, rel=1e-12)
    torch.testing.assert_close(step.grad_norms, torch.stack(grads).mean(0), rtol=1e-12, atol=0)
    torch.testing.assert_close(step.output_norms, squares.sqrt(), rtol=1e-12, atol=0)
    for param, expected in zip(trainer.model.parameters(), reference.model.parameters()):
        assert torch.equal(param, expected)


def test_evaluation_is_the_whole_graphs_forward_of_the_same_weights(tmp_path):
    trainer = trainer_of(config_of(tmp_path))
    for _ in range(2):
        trainer.train_step()
    evaluation = trainer.evaluate(layer_stats=True)
    trainer.model.eval()
    with torch.no_grad():
        logits = trainer.model(trainer.graph, trainer.features)
    val, labels = trainer.splits[1], trainer.labels
    expected = [F.cross_entropy(logits[val], labels[val]).double()]
    expected += [(logits[split].argmax(1) == labels[split]).double().mean() for split in trainer.splits]
    assert torch.equal(evaluation, torch.stack(expected))


def test_layer_statistics_are_reduced_per_layer_to_the_same_numbers(tmp_path):
    """The evaluation keeps each layer's statistics only (0-d tensors), and they are what
    the diagnostics give for that layer's output and attention on the whole graph."""
    trainer = trainer_of(config_of(tmp_path, model="gat-lip-pairnorm", depth=4))
    trainer.train_step()
    seen = []
    handles = [
        module.register_forward_hook(lambda m, i, o: seen.append(tuple(t.detach() for t in o)), prepend=True)
        for _, module in attention_layers(trainer.model)
    ]
    trainer.evaluate(layer_stats=True)
    for handle in handles:
        handle.remove()
    assert all(value.dim() == 0 for stats in trainer.layer_stats.captured for value in stats.values())
    rows = trainer.layer_stats.rows(7)
    diagnostics = GraphDiagnostics(trainer.graph)
    expected = [
        (7, layer, metric, value)
        for layer, (h, attention) in zip(trainer.layer_stats.layers, seen)
        for metric, value in diagnostics.layer_stats(h, attention).items()
    ]
    assert rows == expected and len(seen) == 4


def read_run(out: Path) -> tuple[dict, dict[str, pd.DataFrame]]:
    frames = {name: pd.read_parquet(out / f"{name}.parquet").drop(columns="seconds", errors="ignore") for name in FRAMES}
    return json.loads((out / "summary.json").read_text()), frames


@pytest.mark.parametrize("model", ["gat-lip-pairnorm", "gt-lip"])
def test_cli_passes_the_settings_and_checkpointing_changes_no_number(tmp_path, model):
    common = [
        "train", "--dataset", "csbm", "--csbm", TINY_CSBM, "--model", model, "--depth", "3", "--heads", "2",
        "--hidden", "4", "--epochs", "3", "--grad-log-every", "1", "--seed", "4",
        "--data-root", str(tmp_path / "datasets"), "--batching", "cluster", "--partitions", "5",
        "--batch-partitions", "2",
    ]
    assert cli.main([*common, "--out", str(tmp_path / "cluster")]) == 0
    assert cli.main([*common, "--checkpoint", "--out", str(tmp_path / "checkpointed")]) == 0
    (summary, frames), (checkpointed_summary, checkpointed) = (
        read_run(tmp_path / run) for run in ("cluster", "checkpointed")
    )
    assert {key: summary["config"][key] for key in ("batching", "partitions", "batch_partitions")} == {
        "batching": "cluster", "partitions": 5, "batch_partitions": 2,
    }
    for name in FRAMES:
        assert len(frames[name]) > 0, name
        pd.testing.assert_frame_equal(frames[name], checkpointed[name], check_exact=True, obj=name)
    assert summary["test_metric"] == checkpointed_summary["test_metric"]
    assert "cluster batches: 5 METIS partitions" in (tmp_path / "cluster" / "train.log").read_text()


def test_cluster_batches_differ_from_full_batch(tmp_path):
    """The setting reaches training: another step schedule, other numbers."""
    full = trainer_of(config_of(tmp_path, batching="full"))
    cluster = trainer_of(config_of(tmp_path))
    assert full.batches is None and cluster.batches is not None
    assert "cluster_batches" in cluster.random_streams.streams
    assert full.train_step().loss.item() != cluster.train_step().loss.item()


# --- K and B sized by the graph -----------------------------------------------------------


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [
        (2708, (64, 16)),  # Cora: the numbers measured on it (docs/performance.md), 4 batches
        (3327, (64, 16)),  # CiteSeer: still under 4 x 1700 nodes
        (19717, (72, 6)),  # ceil(19717 / 1700) = 12 batches; B = ceil(64 / 12) = 6
        (169343, (400, 4)),  # ogbn-arxiv's size: 100 batches of 4 parts, the measured K 400, B 4
        (2449029, (5764, 4)),  # 1441 batches of 4
        (34, (34, 9)),  # 64 parts cut to the 34 nodes; 4 batches of ceil(34 / 4) parts
    ],
)
def test_unset_counts_follow_the_graph(nodes, expected):
    counts = cluster_counts(nodes)
    assert (counts.partitions, counts.batch_partitions) == expected
    assert counts.reason.startswith(f"K and B by the graph's size ({nodes} nodes: ")


@pytest.mark.parametrize(
    ("given", "expected", "reason"),
    [
        ((10, 3), (10, 3), "as given"),
        ((500, 2), (500, 2), "as given"),  # more than the rule's 4 batches: given wins
        ((32, None), (32, 8), "K as given, B by the graph's size (2708 nodes: 4 batches an epoch"),
        ((None, 8), (32, 8), "B as given, K by the graph's size (2708 nodes: 4 batches an epoch"),
    ],
)
def test_given_counts_win(given, expected, reason):
    counts = cluster_counts(2708, *given)
    assert (counts.partitions, counts.batch_partitions) == expected
    assert counts.reason.startswith(reason)


def test_a_given_b_over_the_nodes_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"batch_partitions=40 must be at most partitions=30 \(the graph's 30 nodes"):
        cluster_counts(30, None, 40)


def test_a_run_without_counts_sizes_them_by_its_graph_and_says_so(tmp_path):
    out = tmp_path / "run"
    train.run(config_of(tmp_path, partitions=None, batch_partitions=None, epochs=1), out)
    summary = json.loads((out / "summary.json").read_text())
    # 60 nodes: 4 batches of 16 of 64 parts, the parts cut to 60, 15 a batch; recorded
    # beside the settings, which keep what was asked (None: sized by the graph).
    assert (summary["config"]["partitions"], summary["config"]["batch_partitions"]) == (None, None)
    assert summary["cluster_batches"] == {
        "partitions": 60, "batch_partitions": 15, "reason": "K and B by the graph's size (60 nodes: 4 batches an "
        "epoch, ceil(nodes / 1700) and at least 4, of at least 4 parts each and 64 parts in all)",
    }
    cache = cluster_batches.cache_path(tmp_path / "datasets", "csbm", 60, data.csbm_params(TINY_CSBM))
    assert (
        f"cluster batches: 60 METIS partitions ({cache}), 15 per batch, 4 batches an epoch; K and B by the "
        "graph's size (60 nodes: 4 batches an epoch, ceil(nodes / 1700) and at least 4, of at least 4 "
        "parts each and 64 parts in all)"
    ) in (out / "train.log").read_text()


# --- validation ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"batching": "minibatch"}, r"unknown batching 'minibatch'; allowed: full, cluster"),
        ({"partitions": 0}, r"partitions must be an integer >= 1, got 0"),
        ({"batch_partitions": -2}, r"batch_partitions must be an integer >= 1, got -2"),
        ({"partitions": 4, "batch_partitions": 5}, r"batch_partitions=5 must be at most partitions=4"),
        ({"batching": "cluster", "model": "gat-classic"},
         r"batching='cluster': model 'gat-classic' is trained on the whole graph only: architecture "
         r"'gat-classic' is registered with full_batch_only=True \(cluster batches apply to gat, gt, gcn"),
        ({"partitions": 2.0}, r"partitions must be an integer or null, got 2.0"),
        ({"batch_partitions": True}, r"batch_partitions must be an integer or null, got True"),
    ],
)
def test_bad_settings_are_refused_naming_them(changes, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**changes).validate()


def test_more_partitions_than_nodes_are_refused_before_any_file(tmp_path):
    config = config_of(tmp_path, partitions=61)
    with pytest.raises(ValueError, match="partitions=61 must be at most the graph's 60 nodes"):
        train.run(config, tmp_path / "run")
    assert not (tmp_path / "run").exists()
    assert not any((tmp_path / "datasets").glob("*.pkl"))
