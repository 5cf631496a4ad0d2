"""examples/minibatch_neighbor_sampling.py: a deep GAT-Lip trained on sampled blocks."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from lipnorm.data.csbm import CSBMParams, generate_csbm

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "minibatch_neighbor_sampling.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("minibatch_neighbor_sampling", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def data():
    """A small two-community graph (self-loops included) whose labels the features carry."""
    return generate_csbm(CSBMParams(nodes=120, classes=3, avg_degree=4.0, feature_dim=8, signal=2.0, seed=1))


def test_layerwise_inference_equals_the_full_graph_forward(example, data):
    torch.manual_seed(0)
    model = example.build_gat_lip(8, 3, depth=3, heads=2, hidden=4).eval()
    # Batches of 50 destinations: the nodes are split over three blocks per layer.
    logits = example.layerwise_inference(model, data.graph, data.features, batch_size=50)
    with torch.no_grad():
        expected = model(data.graph, data.features)
    torch.testing.assert_close(logits, expected, rtol=1e-5, atol=1e-5)


def test_training_on_sampled_blocks_lowers_the_loss(example, data):
    # Light dropout, so that 18 steps show the trend. DGL samples each thread with its own
    # generator, so with several threads the blocks, hence the losses, vary from run to
    # run: over 16 seeds the last epoch's loss was 0.25-0.62 of the first's.
    torch.manual_seed(0)
    model = example.build_gat_lip(8, 3, depth=4, heads=2, hidden=4, feat_drop=0.1, attn_drop=0.0)
    train_nids = torch.nonzero(torch.as_tensor(data.train_mask)).flatten()
    losses = example.train(
        model, data.graph, data.features, data.labels, train_nids, fanout=3, batch_size=8, epochs=6, lr=1e-2
    )
    assert len(losses) == 6 and all(loss > 0 for loss in losses)
    assert losses[-1] < 0.8 * losses[0]


def test_models_with_pairnorm_are_refused(example, data):
    model = example.build_model(example.ModelConfig(model="gat-lip-pairnorm", in_feats=8, num_classes=3))
    with pytest.raises(ValueError, match="PairNorm normalises over the nodes of a batch"):
        example.forward_blocks(model, [data.graph] * 2, data.features)


def test_main_trains_and_reports_full_graph_accuracy(example, tmp_path, capsys):
    example.main(["--dataset", "csbm", "--root", str(tmp_path), "--depth", "2", "--heads", "2", "--hidden", "4", "--epochs", "2"])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in lines[:2]] == [["epoch", "1"], ["epoch", "2"]]
    for line, split in zip(lines[2:], ("train", "val", "test")):
        assert line.startswith(f"{split} accuracy (full graph, layer-wise): ")
        assert 0.0 <= float(line.rsplit(" ", 1)[1]) <= 1.0
