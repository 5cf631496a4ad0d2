"""Lipschitz probe: against the SVD of the full Jacobian; scale invariance of the Lip layers;
growth of GAT/GT at tied inputs; the table and the CLI."""

from __future__ import annotations

import contextlib
import importlib
import sys

import dgl
import dgl.backend.pytorch.sparse as dgl_sparse
import pandas as pd
import pytest
import torch

from lipnorm import lipschitz_probe
from lipnorm.cli import main
from lipnorm.lipschitz_probe import (
    PROBE_IN_FEATS,
    PROBE_MODELS,
    estimate_lipschitz,
    probe_graph,
    probe_layer,
    probe_table,
    random_probe_input,
    tied_probe_input,
)
from lipnorm.nn.models.build import build_model
from lipnorm.settings.model_config import ModelConfig

TINY_NODES = 6


@pytest.fixture(autouse=True)
def one_thread():
    """The reference Jacobians are tiny too: threads only slow them down (see _probe_context)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tiny_graph() -> dgl.DGLGraph:
    return probe_graph(num_nodes=TINY_NODES, num_edges=10, seed=3)


def probe_input(kind: str, layer, num_nodes: int, scale: float = 1.0):
    if kind == "tied":
        return tied_probe_input(layer, num_nodes, scale=scale, seed=5)
    return random_probe_input(num_nodes, PROBE_IN_FEATS, scale=scale, seed=5)


def full_jacobian_norm(layer, graph, feat) -> float:
    """Independent reference: SVD of the whole Jacobian, built row by row."""
    layer = layer.double().eval()
    jacobian = torch.autograd.functional.jacobian(lambda x: layer(graph, x).reshape(-1), feat)
    return float(torch.linalg.matrix_norm(jacobian.reshape(-1, feat.numel()), ord=2))


@pytest.mark.parametrize("kind", ["random", "tied"])
@pytest.mark.parametrize("model", PROBE_MODELS)
def test_estimate_matches_full_jacobian(model, kind):
    layer, graph = probe_layer(model, seed=2), tiny_graph()
    feat = probe_input(kind, layer, TINY_NODES, scale=3.0)
    expected = full_jacobian_norm(layer, graph, feat)
    assert estimate_lipschitz(layer, graph, feat, seed=4) == pytest.approx(expected, rel=1e-4)


@pytest.mark.parametrize(
    "settings",
    [
        {"model": "gat-lip-pairnorm", "heads": 2, "hidden": 4},
        # The literature GAT, whose layers and norms run in compiled kernels in training:
        # the probe takes their torch and DGL paths (kernels_off).
        {"model": "gat", "heads": 1, "hidden": 16, "recipe": "dgn", "norm": "dgn"},
        {"model": "gat", "heads": 1, "hidden": 16, "recipe": "dgn", "norm": "pairnorm", "attention_norm": "lip"},
    ],
    ids=["gat-lip-pairnorm", "literature-dgn", "literature-lip-pairnorm"],
)
def test_estimate_of_a_whole_model_matches_full_jacobian(settings):
    """Any module called as module(graph, feat): here deep GATs with a normalisation."""
    torch.manual_seed(0)
    settings = dict(settings)
    net = build_model(ModelConfig(settings.pop("model"), PROBE_IN_FEATS, 3, depth=3, **settings))
    graph, feat = tiny_graph(), random_probe_input(TINY_NODES, PROBE_IN_FEATS)
    expected = full_jacobian_norm(net, graph, feat)
    assert estimate_lipschitz(net, graph, feat) == pytest.approx(expected, rel=1e-4)


@pytest.mark.parametrize("layer_softmax", ["lipnorm", "dgl"])
@pytest.mark.parametrize("probe_swap", [True, False], ids=["probe-swap", "no-swap"])
def test_estimate_needs_a_twice_differentiable_edge_softmax(monkeypatch, layer_softmax, probe_swap):
    """DGL's own edge softmax drops its part of J v, so the estimate would be wrong with it.
    lipnorm's layers take `lipnorm.dgl_private.edge_softmax`, differentiable again; the
    probe's swap of DGL's (for a plugin's layer calling it directly) makes DGL's right too."""
    from dgl.nn.functional import edge_softmax as dgl_edge_softmax

    from lipnorm.nn.conv import gat

    layer, graph = probe_layer("gat", seed=2), tiny_graph()
    feat = random_probe_input(TINY_NODES, PROBE_IN_FEATS, seed=5)
    expected = full_jacobian_norm(layer, graph, feat)
    if layer_softmax == "dgl":
        monkeypatch.setattr(gat, "edge_softmax", dgl_edge_softmax)
    if not probe_swap:
        monkeypatch.setattr(lipschitz_probe, "twice_differentiable_edge_softmax", contextlib.nullcontext)
    estimate = estimate_lipschitz(layer, graph, feat)
    if layer_softmax == "dgl" and not probe_swap:
        assert estimate != pytest.approx(expected, rel=1e-2)
    else:
        assert estimate == pytest.approx(expected, rel=1e-4)


def test_estimate_restores_dgl_and_leaves_the_layer_alone():
    layer = probe_layer("gt-lip").float().train()
    before = {name: value.clone() for name, value in layer.state_dict().items()}
    original = dgl_sparse.EdgeSoftmax
    torch.set_num_threads(2)
    estimate_lipschitz(layer, tiny_graph(), random_probe_input(TINY_NODES, PROBE_IN_FEATS), iters=3)
    assert dgl_sparse.EdgeSoftmax is original
    assert torch.get_num_threads() == 2
    assert layer.training and layer.fc_q.weight.dtype == torch.float32
    for name, value in layer.state_dict().items():
        assert torch.equal(value, before[name]), name
    # The layer rejects the input (one row too many) inside the estimate.
    with pytest.raises(ValueError, match=r"feat has shape \(7, \d+\); expected \(6, \d+\)"):
        estimate_lipschitz(layer, tiny_graph(), torch.zeros(TINY_NODES + 1, PROBE_IN_FEATS))
    assert dgl_sparse.EdgeSoftmax is original


@pytest.mark.parametrize("model", ["gat-lip", "gt-lip"])
@pytest.mark.parametrize("kind", ["random", "tied"])
def test_lip_layers_are_scale_invariant(model, kind):
    layer, graph = probe_layer(model), probe_graph()
    at_one = estimate_lipschitz(layer, graph, probe_input(kind, layer, graph.num_nodes()))
    for s in (10.0, 100.0, 1000.0):
        scaled = probe_input(kind, layer, graph.num_nodes(), scale=s)
        assert estimate_lipschitz(layer, graph, scaled) == pytest.approx(at_one, rel=1e-3), s


@pytest.mark.parametrize("model", ["gat", "gt"])
def test_plain_layers_are_not_scale_invariant(model):
    layer, graph = probe_layer(model), probe_graph()
    at_one = estimate_lipschitz(layer, graph, probe_input("random", layer, graph.num_nodes()))
    at_ten = estimate_lipschitz(layer, graph, probe_input("random", layer, graph.num_nodes(), 10.0))
    assert abs(at_ten / at_one - 1) > 0.1


@pytest.mark.parametrize("model, growth", [("gat", 20.0), ("gt", 1e4)])
def test_tied_inputs_blow_up_plain_layers(model, growth):
    """GAT grows like s, GT like s^2: at least 20x resp. 1e4x from s = 1 to 1000."""
    layer, graph = probe_layer(model), probe_graph()
    at_one = estimate_lipschitz(layer, graph, probe_input("tied", layer, graph.num_nodes()))
    at_1000 = estimate_lipschitz(layer, graph, probe_input("tied", layer, graph.num_nodes(), 1000.0))
    assert at_1000 >= growth * at_one


@pytest.mark.parametrize("model", ["gat", "gat-lip"])
def test_tied_gat_input_ties_the_scores_of_each_neighbourhood(model):
    layer, graph = probe_layer(model), probe_graph()
    scores = layer.normalized_scores(graph, tied_probe_input(layer, graph.num_nodes(), scale=100.0))
    _, dst = graph.edges()
    for node in range(graph.num_nodes()):
        incoming = scores[dst == node, :, 0]  # (in-degree, H)
        torch.testing.assert_close(incoming, incoming[:1].expand_as(incoming), rtol=1e-9, atol=0)
    assert (scores.abs() > 1e-3).all()  # away from LeakyReLU's kink at 0


@pytest.mark.parametrize("model", ["gt", "gt-lip"])
def test_tied_gt_input_zeroes_every_key_and_score(model):
    layer, graph = probe_layer(model), probe_graph()
    feat = tied_probe_input(layer, graph.num_nodes(), scale=100.0)
    assert layer.fc_k(feat).abs().max() < 1e-10
    assert layer.normalized_scores(graph, feat).abs().max() < 1e-10
    assert layer.fc_q(feat).abs().max() > 1.0


def test_tied_input_needs_room_outside_the_score_directions():
    layer = probe_layer("gt", in_feats=8, hidden=4, heads=2)
    with pytest.raises(ValueError, match="span all 8 input features"):
        tied_probe_input(layer, 5)
    with pytest.raises(ValueError, match="no tied probe input for Linear; allowed: GATConv, GTConv"):
        tied_probe_input(torch.nn.Linear(3, 3), 5)


def test_probe_rejects_bad_arguments():
    layer, graph = probe_layer("gat"), tiny_graph()
    with pytest.raises(ValueError, match="iters must be at least 1, got 0"):
        estimate_lipschitz(layer, graph, random_probe_input(TINY_NODES, PROBE_IN_FEATS), iters=0)
    with pytest.raises(ValueError, match="unknown probe model 'gcn'; allowed: gat, gat-lip, gt, gt-lip"):
        probe_layer("gcn")
    with pytest.raises(ValueError, match="scales must be finite and positive, got -1"):
        probe_table(scales=(1.0, -1))
    with pytest.raises(ValueError, match="unknown probe input kind 'worst'; allowed: random, tied"):
        probe_table(kinds=("worst",))


def test_probe_table_rows():
    table = probe_table(seed=0, scales=(1.0, 10.0), iters=60)
    assert list(table.columns) == ["model", "s", "kind", "estimate"]
    expected = [(m, s, k) for m in PROBE_MODELS for k in ("random", "tied") for s in (1.0, 10.0)]
    assert list(table[["model", "s", "kind"]].itertuples(index=False, name=None)) == expected
    graph, layer = probe_graph(seed=0), probe_layer("gt", seed=0)
    feat = tied_probe_input(layer, graph.num_nodes(), scale=10.0, seed=0)
    row = table[(table.model == "gt") & (table.s == 10.0) & (table.kind == "tied")]
    assert row.estimate.item() == estimate_lipschitz(layer, graph, feat, iters=60, seed=0)


def test_probe_cli(tmp_path, capsys):
    out = tmp_path / "aggregate"
    assert main(["probe", "--out-dir", str(out), "--seed", "1", "--scales", "100", "--iters", "40"]) == 0
    parquet = pd.read_parquet(out / "probe.parquet")
    pd.testing.assert_frame_equal(parquet, pd.read_csv(out / "probe.csv"))
    pd.testing.assert_frame_equal(parquet, probe_table(seed=1, scales=(100.0,), iters=40))
    assert sorted(path.name for path in out.iterdir()) == ["probe.csv", "probe.parquet"]
    assert capsys.readouterr().out.split() == [str(out / "probe.parquet"), str(out / "probe.csv")]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--scales", "1,ten"], "'1,ten' is not a comma-separated list of numbers"),
        (["--scales", "0,10"], "scales must be finite and positive, got 0.0"),
        (["--iters", "0"], "iters must be at least 1, got 0"),
    ],
)
def test_probe_cli_errors(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["probe", "--out-dir", str(tmp_path / "out"), *argv])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err and message in err
    assert not (tmp_path / "out").exists()


def test_the_old_name_lipnorm_lipschitz_warns_naming_the_new_and_gives_its_names(monkeypatch):
    monkeypatch.delitem(sys.modules, "lipnorm.lipschitz", raising=False)
    with pytest.warns(DeprecationWarning, match=r"import lipnorm\.lipschitz_probe instead"):
        old = importlib.import_module("lipnorm.lipschitz")
    assert old.estimate_lipschitz is estimate_lipschitz and old.write_probe is lipschitz_probe.write_probe
    assert old._probe_context is lipschitz_probe._probe_context
