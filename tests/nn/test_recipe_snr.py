"""The "snr" recipe: SNR's own protocol (github.com/jingbo02/PSNR-GNN at 93e4e0d). Its
network (`SNRGAT`) against SNR's GAT written out here from their code with DGL's own
GATConv, weights and outputs bit for bit; its defaults; the models it refuses; its
missing-features pool (validation and test nodes) through `prepare`."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from dgl.nn import GATConv as DGLGATConv
from torch import nn

from lipnorm.nn.conv.gat import GATConv
from lipnorm.nn.models.build import build_model
from lipnorm.nn.models.numbering import gradient_groups
from lipnorm.nn.models.snr import SNRGAT
from lipnorm.settings.model_config import ModelConfig
from lipnorm.settings.recipes import recipe_defaults
from lipnorm.settings.train_config import TrainConfig
from tests.nn.test_models import IN_FEATS, NUM_CLASSES, NUM_NODES, features, small_graph

HIDDEN = 5


def snr_config(model: str = "gat", **settings) -> ModelConfig:
    settings = {"depth": 3, "heads": 1, "hidden": HIDDEN, "feat_drop": 0.5, "attn_drop": 0.0,
                "recipe": "snr", "residual": True, **settings}
    return ModelConfig(model=model, in_feats=IN_FEATS, num_classes=NUM_CLASSES, **settings)


class TheirGAT(nn.Module):
    """SNR's `psnrgnn/models/gat.py` GAT with residual "res" (their earlier
    `dataprocess.py`: ``hidden_list[-1] + x``) or "none", no normalisation, ELU, dropout
    [0.5, 0], written out with DGL's GATConv: modules made and reset in their order."""

    def __init__(self, depth: int, heads: int, residual: bool):
        super().__init__()
        self.residual = residual
        self.convs = nn.ModuleList()
        self.in_fc = nn.Linear(IN_FEATS, HIDDEN)
        self.convs.append(DGLGATConv(HIDDEN, HIDDEN, num_heads=heads))
        for _ in range(depth - 1):
            self.convs.append(DGLGATConv(HIDDEN, HIDDEN, heads))
        self.out_fc = nn.Linear(HIDDEN, NUM_CLASSES)
        for conv in self.convs:
            conv.reset_parameters()
        self.out_fc.reset_parameters()
        self.in_fc.reset_parameters()

    def forward(self, graph, x, convs=None):
        """Their forward; `convs` in place of theirs (lipnorm's layers, of the same weights:
        their attention scores sum in another order, by a float32 rounding,
        tests/nn/test_dgl_parity.py)."""
        convs = self.convs if convs is None else convs
        hidden_list = []
        h = F.elu(self.in_fc(F.dropout(x, p=0.5, training=self.training)))
        hidden_list.append(h)
        h = convs[0](graph, F.dropout(h, p=0.5, training=self.training)).mean(1)
        h = hidden_list[-1] + h if self.residual else h
        h = F.elu(h)
        hidden_list.append(h)
        for i in range(1, len(convs)):
            h = convs[i](graph, F.dropout(h, p=0.5, training=self.training)).mean(1)
            h = hidden_list[-1] + h if self.residual else h
            hidden_list.append(h)
        return self.out_fc(h)


@pytest.mark.parametrize("residual", [True, False])
@pytest.mark.parametrize("heads", [1, 2])
@pytest.mark.parametrize("depth", [1, 2, 4])
def test_snr_gat_is_theirs_bit_for_bit(depth, heads, residual):
    """The same seed gives their initial weights (the same draws in the same order), and
    the same dropout draws give their outputs and gradients, in training and evaluation:
    only if every dropout, skip and ELU sits where theirs does (their forward run on
    lipnorm's attention layers: the layers against DGL's are tests/nn/test_dgl_parity.py's
    and tests/kernels/test_values.py's)."""
    torch.manual_seed(3)
    net = build_model(snr_config(depth=depth, heads=heads, residual=residual))
    torch.manual_seed(3)
    theirs = TheirGAT(depth, heads, residual)
    assert isinstance(net, SNRGAT)
    ours = [p.detach() for p in net.parameters()]
    reference = [theirs.in_fc.weight, theirs.in_fc.bias]
    for conv in theirs.convs:
        reference += [conv.attn_l, conv.attn_r, conv.bias, conv.fc.weight]
    reference += [theirs.out_fc.weight, theirs.out_fc.bias]
    assert sorted(p.shape for p in ours) == sorted(p.shape for p in reference)
    by_name = dict(net.named_parameters())
    pairs = [(by_name["input_fc.weight"], theirs.in_fc.weight), (by_name["output_fc.weight"], theirs.out_fc.weight)]
    for i, conv in enumerate(theirs.convs):
        pairs += [(by_name[f"layers.{i}.{name}"], getattr(conv, name)) for name in ("attn_l", "attn_r", "bias")]
        pairs.append((by_name[f"layers.{i}.fc.weight"], conv.fc.weight))
    for got, expected in pairs:
        assert torch.equal(got, expected)
    graph, x = small_graph(), features()
    reference = build_model(snr_config(depth=depth, heads=heads, residual=residual))
    reference.load_state_dict(net.state_dict())
    theirs.in_fc, theirs.out_fc = reference.input_fc, reference.output_fc
    for training in (True, False):
        net.train(training)
        theirs.train(training)
        torch.manual_seed(5)
        out = net(graph, x)
        torch.manual_seed(5)
        expected = theirs(graph, x, convs=reference.layers)
        assert torch.equal(out, expected)
        if training:
            out.square().sum().backward()
            expected.square().sum().backward()
            for (name, param), ref in zip(net.named_parameters(), reference.parameters()):
                assert torch.equal(param.grad, ref.grad), name


def test_an_activation_after_every_layer_would_differ():
    """The test above can fail: ELU after the later layers too changes the output."""
    torch.manual_seed(0)
    net = build_model(snr_config(depth=3)).eval()
    graph, x = small_graph(), features()
    h = F.elu(net.input_fc(x))
    for layer in net.layers:
        h = F.elu(h + layer(graph, h).mean(1))
    assert not torch.allclose(net(graph, x), net.output_fc(h))


@pytest.mark.parametrize("attention_norm", ["none", "lip"])
def test_snr_gat_layers_and_gradient_groups(attention_norm):
    net = build_model(snr_config(depth=3, heads=2, attention_norm=attention_norm))
    assert [type(layer) for layer in net.layers] == [GATConv] * 3
    for layer in net.layers:
        assert (layer.num_heads, layer.out_feats, layer.norm) == (2, HIDDEN, attention_norm)
        assert layer.bias is not None and layer.attn_drop.p == 0.0 and layer.fused
    assert (net.input_fc.in_features, net.output_fc.out_features) == (IN_FEATS, NUM_CLASSES)
    assert [layer.kind for layer in net.numbered_layers()] == ["input"] + ["attention"] * 3 + ["output"]
    groups = {(index, kind, group): params for index, kind, group, params in gradient_groups(net)}
    assert {(index, group) for index, _, group in groups if group != "all"} == {
        (0, "fc"), (0, "bias"), (4, "fc"), (4, "bias"), *((i, g) for i in (1, 2, 3) for g in ("fc", "attn", "bias")),
    }
    assert sum(len(params) for (_, _, group), params in groups.items() if group == "all") == len(list(net.parameters()))
    assert net(small_graph(), features()).shape == (NUM_NODES, NUM_CLASSES)


def test_recipe_defaults_are_their_run_script():
    """run_transductive_mv.py: 1000 epochs, Adam lr 1e-2 (of 1e-2, 1e-3), weight decay
    5e-4, one head of 32, dropout 0.5, no attention dropout; validation and test erased."""
    defaults = recipe_defaults("snr", depth=6, dataset="citeseer", missing_rate=100)
    assert {key: defaults[key] for key in (
        "epochs", "lr", "weight_decay", "heads", "hidden", "feat_drop", "attn_drop", "protocol", "missing_pool",
    )} == {
        "epochs": 1000, "lr": 0.01, "weight_decay": 5e-4, "heads": 1, "hidden": 32, "feat_drop": 0.5,
        "attn_drop": 0.0, "protocol": "best-val", "missing_pool": "evaluation",
    }
    for recipe in ("lipnorm", "official", "dgn"):
        assert recipe_defaults(recipe, depth=6)["missing_pool"] == "unlabelled"
    resolved = TrainConfig(model="gat-lip", recipe="snr", lr=0.001, missing_pool="unlabelled").resolved()
    assert (resolved.lr, resolved.missing_pool, resolved.hidden) == (0.001, "unlabelled", 32)


@pytest.mark.parametrize("settings, message", [
    ({"model": "gat-pairnorm"}, "recipe 'snr' builds SNR's GAT network (their psnrgnn/models/gat.py, whose residual row has no normalisation), not model 'gat-pairnorm'; allowed with it: gat, gat-lip"),
    ({"model": "gt"}, "recipe 'snr' builds SNR's GAT network"),
    ({"initial_residual": 0.1}, "initial_residual=0.1 needs the deep models' input Linear as wide as the layers; model 'gat' with recipe 'snr' has none"),
    ({"checkpoint": True}, "checkpoint=True: model 'gat' has no checkpointed blocks: recipe 'snr' builds the literature's GAT network, which has none"),
    ({"missing_pool": "train"}, "unknown missing_pool 'train'; allowed: unlabelled, evaluation"),
])
def test_snr_refuses_what_their_network_lacks(settings, message):
    with pytest.raises(ValueError) as error:
        TrainConfig(recipe="snr", **settings).resolved()
    assert message in str(error.value)


def test_prepare_erases_validation_and_test_features_only(planetoid_root, data_mirror, no_network):
    """SNR's ``x[val_mask] = 0; x[test_mask] = 0``: with recipe snr and rate 100 exactly
    those rows are zero, the 1,068 unlabelled nodes outside both keep theirs."""
    from lipnorm.train.trainer import prepare

    config = TrainConfig(
        dataset="cora", recipe="snr", residual=True, depth=1, missing_rate=100, data_root=str(planetoid_root),
        mirror=str(data_mirror),
    ).resolved()
    setup = prepare(config)
    dataset = setup.dataset
    evaluation = (dataset.val_mask | dataset.test_mask).numpy()
    zero_rows = (setup.features.abs().sum(1) == 0).numpy()
    assert setup.erased == 1500 == evaluation.sum()
    assert np.array_equal(zero_rows & ~evaluation, np.zeros_like(evaluation))
    assert zero_rows[evaluation].all()
    kept = ~(dataset.train_mask.numpy() | evaluation)
    assert kept.sum() == 1068
    assert torch.equal(setup.features[torch.from_numpy(kept)], dataset.features[torch.from_numpy(kept)])
