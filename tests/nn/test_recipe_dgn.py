"""The "dgn" recipe: the deep-GNN literature's GAT protocol (DGN's code, which DeCorr's
follows): the network (`LiteratureGAT`) against hand-built references, its
initialisation, and the recipe's defaults per dataset, overridden by explicit settings."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lipnorm import train
from lipnorm.nn.models.build import build_model
from lipnorm.nn.models.literature import LiteratureGAT
from lipnorm.nn.models.numbering import gradient_groups
from lipnorm.nn.norm.batchnorm import BatchNorm
from lipnorm.nn.norm.dgn import DiffGroupNorm
from lipnorm.nn.norm.pairnorm import PairNorm
from lipnorm.settings.model_config import ModelConfig
from lipnorm.settings.recipes import dgn_skip_weight, recipe_defaults
from lipnorm.settings.train_config import TrainConfig
from lipnorm.train.trainer import Trainer, prepare
from tests.nn.test_models import IN_FEATS, NUM_CLASSES, NUM_NODES, features, small_graph


def dgn_config(model: str = "gat", **settings) -> ModelConfig:
    """A model config as the recipe resolves it (1 x 16, dropouts 0.6, momentum 0.3)."""
    settings = {
        "depth": 4, "heads": 1, "hidden": 16, "feat_drop": 0.6, "attn_drop": 0.6,
        "batchnorm_momentum": 0.3, "recipe": "dgn", **settings,
    }
    return ModelConfig(model=model, in_feats=IN_FEATS, num_classes=NUM_CLASSES, **settings)


NORM_TYPES = {"none": type(None), "batchnorm": BatchNorm, "pairnorm": PairNorm, "dgn": DiffGroupNorm}


# --- the network ------------------------------------------------------------------


@pytest.mark.parametrize("depth", [1, 2, 3, 6])
@pytest.mark.parametrize("norm", list(NORM_TYPES))
@pytest.mark.parametrize("attention_norm", ["none", "lip"])
def test_literature_gat_is_attention_layers_only(depth, norm, attention_norm):
    """L attention layers (features -> 16 -> ... -> classes), one head, no bias, no
    Linear; attention dropout 0.6 in the layer, no feature dropout inside it; one
    normalisation per layer, of that layer's width."""
    cfg = dgn_config(depth=depth, norm=norm, attention_norm=attention_norm)
    net = build_model(cfg)
    assert isinstance(net, LiteratureGAT)
    assert len(net.layers) == depth
    widths = [IN_FEATS] + [16] * (depth - 1) + [NUM_CLASSES]
    assert [(layer.in_feats, layer.out_feats * layer.num_heads) for layer in net.layers] == list(zip(widths, widths[1:]))
    for layer in net.layers:
        assert layer.num_heads == 1 and layer.bias is None and layer.res_fc is None
        assert (layer.feat_drop.p, layer.attn_drop.p) == (0.0, 0.6)
        assert layer.norm == attention_norm
    assert not any(isinstance(module, nn.Linear) and "cluster" not in name
                   for name, module in net.named_modules() if not name.startswith("layers."))
    norms = net._norms()
    if norm == "none":
        assert norms is None
    else:
        assert [type(module) for module in norms] == [NORM_TYPES[norm]] * depth
        if norm != "pairnorm":
            assert [module.width for module in norms] == widths[1:]
    if norm == "batchnorm":
        assert {module.bn.momentum for module in norms} == {0.3}
    assert net(small_graph(), features()).shape == (NUM_NODES, NUM_CLASSES)


def reference_forward(net: LiteratureGAT, graph, x, *, training: bool, output_relu: bool = True) -> torch.Tensor:
    """DGN's `GAT.forward`, written out: dropout before the first and the last layer only,
    then conv -> normalisation -> ReLU for every layer, the last included; dense
    throughout. The first mask is drawn over the rows of `x` with a non-zero entry (what
    a zero row gets is irrelevant: it drops out to zero), set into a dense `(N, F)` one."""
    norms = net._norms()
    last = len(net.layers) - 1
    h = x
    for i, layer in enumerate(net.layers):
        if i == 0:
            rows = [row for row in range(x.shape[0]) if x[row].abs().sum() > 0]
            mask = torch.zeros_like(x)
            mask[rows] = F.dropout(torch.ones(len(rows), x.shape[1]), p=0.6, training=training)
            h = x * mask
        elif i == last:
            h = F.dropout(h, p=0.6, training=training)
        h = layer(graph, h).flatten(1)
        if norms is not None:
            h = norms[i](graph, h)
        if i < last or output_relu:  # DeCorr's GAT: no ReLU on the logits
            h = F.relu(h)
    return h


def erased_features(kind: str) -> torch.Tensor:
    """`features()` whole ("dense"), with the rows of 8 of the 12 nodes erased as the
    missing-features mask erases them ("erased"), or all zero ("zero")."""
    x = features()
    if kind == "erased":
        x[torch.tensor([0, 2, 3, 5, 6, 7, 9, 11])] = 0
    elif kind == "zero":
        x.zero_()
    return x


@pytest.mark.parametrize("inputs", ["dense", "erased", "zero"])
@pytest.mark.parametrize("norm", list(NORM_TYPES))
@pytest.mark.parametrize("depth", [1, 2, 5])
def test_literature_gat_forward_is_dgns_in_train_and_eval_mode(norm, depth, inputs):
    """The same random draws in the same order (feature dropout twice, attention dropout
    in every layer) give the same output only if dropout sits where DGN's code has it;
    the first layer's row-pruned product and dropout (`lipnorm.nn.row_pruned`) give the
    dense forward's numbers, forward and backward."""
    torch.manual_seed(0)
    net = build_model(dgn_config(depth=depth, norm=norm))
    reference = build_model(dgn_config(depth=depth, norm=norm))
    reference.load_state_dict(net.state_dict())
    graph, x = small_graph(), erased_features(inputs)
    for training in (True, False):
        net.train(training)
        reference.train(training)
        torch.manual_seed(1)
        out = net(graph, x)
        torch.manual_seed(1)
        expected = reference_forward(reference, graph, x, training=training)
        torch.testing.assert_close(out, expected, rtol=1e-6, atol=1e-7)
        if training:
            out.square().sum().backward()
            expected.square().sum().backward()
            for (name, param), ref in zip(net.named_parameters(), reference.parameters()):
                torch.testing.assert_close(param.grad, ref.grad, rtol=1e-5, atol=1e-7, msg=name)
    # The logits are ReLU'd (DGN's last ReLU).
    assert (out >= 0).all()


@pytest.mark.parametrize("depth", [1, 3])
def test_without_output_relu_the_logits_are_decorrs(depth):
    """``output_relu=False``: DeCorr's GAT (``if i != self.num_layers-1: x = F.relu(x)``),
    the same network but the last ReLU, in training mode too."""
    torch.manual_seed(0)
    net = build_model(dgn_config(depth=depth, norm="batchnorm", output_relu=False))
    reference = build_model(dgn_config(depth=depth, norm="batchnorm", output_relu=False))
    reference.load_state_dict(net.state_dict())
    graph, x = small_graph(), features()
    for training in (True, False):
        net.train(training)
        reference.train(training)
        torch.manual_seed(1)
        out = net(graph, x)
        torch.manual_seed(1)
        assert torch.equal(out, reference_forward(reference, graph, x, training=training, output_relu=False))
    assert (out < 0).any()
    with pytest.raises(ValueError, match="output_relu=False applies to recipe 'dgn' .* not 'snr', whose network has none"):
        build_model(ModelConfig("gat", IN_FEATS, NUM_CLASSES, recipe="snr", output_relu=False))


def test_feature_dropout_before_every_layer_would_differ():
    """The test above can fail: dropout on the input of a hidden layer changes the output."""
    torch.manual_seed(0)
    net = build_model(dgn_config(depth=4)).train()
    graph, x = small_graph(), features()
    torch.manual_seed(1)
    out = net(graph, x)
    torch.manual_seed(1)
    h = x
    for i, layer in enumerate(net.layers):
        h = F.relu(layer(graph, F.dropout(h, p=0.6)).flatten(1))
    assert not torch.allclose(out, h)


def test_literature_gat_initialisation_is_pyg_1_3_glorot():
    """PyG 1.3.2's GATConv: glorot on weight (in, H*D), bound sqrt(6 / (in + H*D)), and on
    att (1, H, 2D), bound sqrt(6 / (H + 2D)), of which attn_l and attn_r are the halves."""
    heads, hidden, in_feats = 8, 64, 300
    torch.manual_seed(0)
    net = build_model(ModelConfig("gat", in_feats, NUM_CLASSES, depth=3, heads=heads, hidden=hidden,
                                  feat_drop=0.6, attn_drop=0.6, recipe="dgn"))
    for i, layer in enumerate(net.layers):
        out_feats, num_heads = layer.out_feats, layer.num_heads
        fc_bound = math.sqrt(6 / (layer.in_feats + num_heads * out_feats))
        attn_bound = math.sqrt(6 / (num_heads + 2 * out_feats))
        weight = layer.fc.weight.detach()
        assert weight.abs().max() <= fc_bound and weight.abs().max() > 0.99 * fc_bound
        assert weight.std().item() == pytest.approx(fc_bound / math.sqrt(3), rel=0.03)
        for attn in (layer.attn_l, layer.attn_r):
            assert attn.abs().max() <= attn_bound
        if i < 2:  # 512 values: the largest is within 1 % of the bound, the std within 12 %
            both = torch.cat([layer.attn_l.detach().flatten(), layer.attn_r.detach().flatten()])
            assert both.abs().max() > 0.99 * attn_bound
            assert both.std().item() == pytest.approx(attn_bound / math.sqrt(3), rel=0.12)
    # attn_bound is not pyg_glorot_ on a half, sqrt(6 / (H + D)), larger by a factor ~1.4.
    assert net.layers[1].attn_l.abs().max() < 0.75 * math.sqrt(6 / (heads + hidden))


def test_residual_skips_the_hidden_layers_only():
    torch.manual_seed(0)
    net = build_model(dgn_config(depth=4, residual=True, norm="pairnorm")).eval()
    assert [type(layer.res_fc) for layer in net.layers] == [type(None), nn.Identity, nn.Identity, type(None)]
    graph, x = small_graph(), features()
    norms = net._norms()
    h = x
    for i, layer in enumerate(net.layers):
        # GATConv(residual=True) with an identity skip: its attention output plus its input.
        h = F.relu(norms[i](graph, layer(graph, h).flatten(1)))
    torch.testing.assert_close(net(graph, x), h)
    plain = build_model(dgn_config(depth=4, norm="pairnorm")).eval()
    plain.load_state_dict(net.state_dict())
    hidden = net.layers[1]
    projected = hidden(graph, torch.ones(NUM_NODES, 16)).flatten(1)
    torch.testing.assert_close(projected - plain.layers[1](graph, torch.ones(NUM_NODES, 16)).flatten(1),
                               torch.ones(NUM_NODES, 16))


def test_initial_residual_mixes_the_first_layers_output_into_the_hidden_layers():
    a = 0.2
    torch.manual_seed(0)
    net = build_model(dgn_config(depth=4, initial_residual=a, norm="batchnorm")).eval()
    graph, x = small_graph(), features()
    norms = net._norms()
    h = F.relu(norms[0](graph, net.layers[0](graph, x).flatten(1)))
    h0 = h
    for i in (1, 2):
        h = F.relu(norms[i](graph, (1 - a) * net.layers[i](graph, h).flatten(1) + a * h0))
    h = F.relu(norms[3](graph, net.layers[3](graph, h).flatten(1)))
    torch.testing.assert_close(net(graph, x), h)


def test_gradient_groups_number_the_attention_layers_as_gat_classic():
    net = build_model(dgn_config(depth=3, norm="dgn"))
    kinds = sorted({(index, kind) for index, kind, _, _ in gradient_groups(net)})
    assert kinds == [(0, "attention"), (1, "attention"), (2, "output")]
    groups = {(index, group) for index, _, group, _ in gradient_groups(net)}
    assert (0, "bias") not in groups and (0, "norm") in groups and (2, "attn") in groups


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"model": "gt"}, "recipe 'dgn' builds the literature's GAT network \\(DGN's models/GAT.py\\), not model 'gt'"),
        ({"model": "gat-classic"}, "not model 'gat-classic'"),
        ({"checkpoint": True}, "checkpoint=True: model 'gat' has no checkpointed blocks"),
        ({"batchnorm_momentum": 1.5}, "batchnorm_momentum must be a number in \\[0, 1\\], got 1.5"),
        ({"dgn_skip_weight": math.inf}, "dgn_skip_weight must be a finite number, got inf"),
    ],
)
def test_dgn_recipe_rejects_what_it_does_not_build(settings, message):
    with pytest.raises(ValueError, match=message):
        build_model(dgn_config(**settings))


# --- the recipe's defaults ----------------------------------------------------------

DGN_FIELDS = ("epochs", "lr", "weight_decay", "heads", "hidden", "feat_drop", "attn_drop", "protocol",
              "patience", "batchnorm_momentum", "dgn_skip_weight")


def chosen(config: TrainConfig) -> dict:
    resolved = config.resolved()
    return {name: getattr(resolved, name) for name in DGN_FIELDS}


@pytest.mark.parametrize(
    "dataset, lr, weight_decay, skip_weight",
    [("cora", 0.005, 5e-4, 0.01), ("citeseer", 0.005, 5e-5, 0.01), ("pubmed", 0.01, 1e-3, 0.03),
     ("coauthor-cs", 0.005, 5e-5, 0.03), ("csbm", 0.005, 5e-4, 0.005)],
)
def test_dgn_recipe_defaults_per_dataset(dataset, lr, weight_decay, skip_weight):
    """DGN's base_options.py: 1000 epochs, 1 x 16, dropout 0.6, BatchNorm momentum 0.3,
    no early stopping; lr and weight decay per dataset (reset_model_parameter), lambda
    for GAT with 100 % missing features per dataset (reset_weight)."""
    assert chosen(TrainConfig(recipe="dgn", dataset=dataset, missing_rate=100, depth=8)) == {
        "epochs": 1000, "lr": lr, "weight_decay": weight_decay, "heads": 1, "hidden": 16,
        "feat_drop": 0.6, "attn_drop": 0.6, "protocol": "best-val", "patience": None,
        "batchnorm_momentum": 0.3, "dgn_skip_weight": skip_weight,
    }


def test_dgn_lambda_without_missing_features_depends_on_depth():
    assert [dgn_skip_weight("cora", depth, 0) for depth in (2, 5, 6, 30)] == [0.001, 0.001, 0.01, 0.01]
    assert [dgn_skip_weight("citeseer", depth, 0) for depth in (5, 6)] == [0.001, 0.005]
    assert dgn_skip_weight("cora", 6, 50) == 0.005  # neither of their settings: their default
    assert recipe_defaults("dgn", 4, "pubmed", 0.0)["dgn_skip_weight"] == 0.005


def test_dgn_recipe_explicit_settings_win():
    explicit = TrainConfig(
        recipe="dgn", dataset="citeseer", missing_rate=100, epochs=300, lr=0.01, weight_decay=0, heads=2,
        hidden=8, attn_drop=0.3, patience=50, batchnorm_momentum=0.1, dgn_skip_weight=0.05,
    )
    assert chosen(explicit) == {
        "epochs": 300, "lr": 0.01, "weight_decay": 0.0, "heads": 2, "hidden": 8, "feat_drop": 0.6,
        "attn_drop": 0.3, "protocol": "best-val", "patience": 50, "batchnorm_momentum": 0.1,
        "dgn_skip_weight": 0.05,
    }
    # The other recipes keep the momentum and lambda these settings had before.
    assert {name: getattr(TrainConfig().resolved(), name) for name in ("batchnorm_momentum", "dgn_skip_weight")} == {
        "batchnorm_momentum": 0.1, "dgn_skip_weight": 0.01,
    }


def test_dgn_recipe_trains_the_literature_network_with_adam(tmp_path):
    config = TrainConfig(
        dataset="csbm", csbm="nodes=60,feature_dim=5,classes=3", recipe="dgn", model="gat-lip-dgn", depth=3,
        missing_rate=100, epochs=2, data_root=str(tmp_path / "datasets"), dgn_skip_weight=0.02,
    ).resolved()
    setup = prepare(config)
    assert isinstance(setup.model, LiteratureGAT)
    assert {layer.norm for layer in setup.model.layers} == {"lip"}
    assert {module.skip_weight for module in setup.model._norms()} == {0.02}
    # 100 % missing: every row outside the training split is zero.
    train_rows = torch.zeros(setup.features.shape[0], dtype=torch.bool)
    train_rows[setup.splits[0]] = True
    assert (setup.features[~train_rows] == 0).all() and (setup.features[train_rows] != 0).any()
    trainer = Trainer(setup, config)
    assert isinstance(trainer.optimizer, torch.optim.Adam) and trainer.scheduler is None
    assert (trainer.optimizer.defaults["lr"], trainer.optimizer.defaults["weight_decay"]) == (0.005, 5e-4)
    summary = train.run(config, tmp_path / "run")
    assert summary["epochs_run"] == 2 and summary["config"]["recipe"] == "dgn"
