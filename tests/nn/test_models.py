"""Models: shapes for every name and depth, layer order against hand-built references,
state-dict round trip, gradient groups, configuration errors."""

from __future__ import annotations

import dataclasses
import math

import dgl
import pytest
import torch
import torch.nn.functional as F

from lipnorm import registry
from lipnorm.nn.conv.gat import GATConv
from lipnorm.nn.conv.gt import GTConv
from lipnorm.nn.models.build import build_model
from lipnorm.nn.models.classic import ClassicGAT
from lipnorm.nn.models.deep import DeepGAT, DeepGT
from lipnorm.nn.models.numbering import attention_layers, gradient_groups
from lipnorm.nn.norm.pairnorm import PairNorm
from lipnorm.settings.model_config import MODEL_NAMES, OFFICIAL_MODELS, ModelConfig

NUM_NODES = 12
IN_FEATS = 7
NUM_CLASSES = 3


def small_graph() -> dgl.DGLGraph:
    generator = torch.Generator().manual_seed(0)
    src = torch.randint(NUM_NODES, (30,), generator=generator)
    dst = torch.randint(NUM_NODES, (30,), generator=generator)
    graph = dgl.graph((src, dst), num_nodes=NUM_NODES)
    return dgl.add_self_loop(dgl.remove_self_loop(graph))


def features(seed: int = 1) -> torch.Tensor:
    return torch.randn(NUM_NODES, IN_FEATS, generator=torch.Generator().manual_seed(seed))


def config(model: str, **settings) -> ModelConfig:
    settings = {"heads": 2, "hidden": 3, **settings}
    return ModelConfig(model=model, in_feats=IN_FEATS, num_classes=NUM_CLASSES, **settings)


def seeded_model(cfg: ModelConfig, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return build_model(cfg)


# --- shapes --------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [1, 5, 30])
@pytest.mark.parametrize("model", MODEL_NAMES)
def test_forward_backward_shapes(model, depth):
    net = seeded_model(config(model, depth=depth), seed=0)
    net.train()
    logits = net(small_graph(), features())
    assert logits.shape == (NUM_NODES, NUM_CLASSES)
    F.cross_entropy(logits, torch.arange(NUM_NODES) % NUM_CLASSES).backward()
    for name, param in net.named_parameters():
        assert param.grad is not None, name
        assert param.grad.shape == param.shape, name
        assert torch.isfinite(param.grad).all(), name


@pytest.mark.parametrize("model", MODEL_NAMES)
def test_default_width_forward(model):
    """The paper's 8 heads x 8 features."""
    cfg = ModelConfig(model=model, in_feats=IN_FEATS, num_classes=NUM_CLASSES)
    net = seeded_model(cfg, seed=0).eval()
    assert net(small_graph(), features()).shape == (NUM_NODES, NUM_CLASSES)
    assert attention_layers(net)[0][1].num_heads == 8
    assert attention_layers(net)[0][1].out_feats == 8


# --- architecture --------------------------------------------------------------------


@pytest.mark.parametrize(
    "model, layer_class, norm, pairnorm, feat_drop",
    [
        ("gat", GATConv, "none", False, 0.6),
        ("gat-lip", GATConv, "lip", False, 0.6),
        ("gat-pairnorm", GATConv, "none", True, 0.6),
        ("gat-lip-pairnorm", GATConv, "lip", True, 0.6),
        ("gt", GTConv, "none", False, 0.5),
        ("gt-lip", GTConv, "lip", False, 0.5),
    ],
)
def test_deep_model_layers(model, layer_class, norm, pairnorm, feat_drop):
    net = build_model(config(model, depth=4, alpha=0.5, variant="official"))
    assert isinstance(net, DeepGT if layer_class is GTConv else DeepGAT)
    assert (net.input_fc.in_features, net.input_fc.out_features) == (IN_FEATS, 6)
    assert (net.output_fc.in_features, net.output_fc.out_features) == (6, NUM_CLASSES)
    assert net.feat_drop == feat_drop
    assert len(net.layers) == 4
    for layer in net.layers:
        assert type(layer) is layer_class
        assert (layer.in_feats, layer.out_feats, layer.num_heads) == (6, 3, 2)
        assert (layer.norm, layer.alpha, layer.variant) == (norm, 0.5, "official")
        assert layer.attn_drop.p == 0.3
    assert (net.pairnorms is not None) == pairnorm


def pair_norm(x: torch.Tensor) -> torch.Tensor:
    """PairNorm "PN" with scale 1, written out (eps as the layer's)."""
    centred = x - x.mean(dim=0)
    return centred / (1e-6 + centred.pow(2).sum(dim=1).mean()).sqrt()


def assert_composed_by_hand(net, pairnorm: bool) -> None:
    """A depth-3 network's eval forward equals input Linear, its layers (ELU between the
    first ones, PairNorm after each if `pairnorm`), output Linear, written out."""
    graph, x = small_graph(), features()
    h = net.input_fc(x)
    for i, layer in enumerate(net.layers):
        h = layer(graph, h).flatten(1)
        if i < 2:
            h = F.elu(h)
        if pairnorm:
            h = pair_norm(h)
    torch.testing.assert_close(net(graph, x), net.output_fc(h), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("model", ["gat", "gat-lip-pairnorm", "gt", "gt-lip"])
def test_deep_model_composition(model):
    """Eval forward = input Linear, layers (ELU between, PairNorm after each), output Linear."""
    net = seeded_model(config(model, depth=3), seed=0).eval()
    assert_composed_by_hand(net, pairnorm=model.endswith("pairnorm"))


def test_classic_gat_equals_dgl_example():
    """gat-classic = DGL's Cora GAT: GATConv(8 heads, ELU), GATConv(1 head), mean of heads."""
    net = seeded_model(ModelConfig("gat-classic", IN_FEATS, NUM_CLASSES), seed=0).eval()
    assert [(layer.num_heads, layer.out_feats) for layer in net.layers] == [(8, 8), (1, NUM_CLASSES)]
    assert [(layer.feat_drop.p, layer.attn_drop.p) for layer in net.layers] == [(0.6, 0.6)] * 2
    reference = [
        dgl.nn.GATConv(IN_FEATS, 8, 8, activation=F.elu),
        dgl.nn.GATConv(64, NUM_CLASSES, 1),
    ]
    for ours, theirs in zip(net.layers, reference):
        with torch.no_grad():
            theirs.fc.weight.copy_(ours.fc.weight)
            theirs.attn_l.copy_(ours.attn_l)
            theirs.attn_r.copy_(ours.attn_r)
            theirs.bias.copy_(torch.randn(theirs.bias.shape))
            ours.bias.copy_(theirs.bias)
    graph, x = small_graph(), features()
    expected = reference[1](graph, reference[0](graph, x).flatten(1)).mean(1)
    torch.testing.assert_close(net(graph, x), expected, rtol=1e-5, atol=1e-6)


def test_classic_gat_depth_one_is_the_output_layer():
    net = build_model(config("gat-classic", depth=1))
    assert isinstance(net, ClassicGAT)
    assert [(layer.in_feats, layer.num_heads, layer.out_feats) for layer in net.layers] == [
        (IN_FEATS, 1, NUM_CLASSES)
    ]


@pytest.mark.parametrize(
    "model, feat_drop, attn_drop",
    [("gat", 0.6, 0.3), ("gat-lip-pairnorm", 0.6, 0.3), ("gt-lip", 0.5, 0.3), ("gat-classic", 0.6, 0.6)],
)
def test_resolved_fills_architecture_dropouts(model, feat_drop, attn_drop):
    cfg = config(model).resolved()
    assert (cfg.feat_drop, cfg.attn_drop) == (feat_drop, attn_drop)
    explicit = config(model, feat_drop=0.1, attn_drop=0.0).resolved()
    assert (explicit.feat_drop, explicit.attn_drop) == (0.1, 0.0)


# --- state dict ----------------------------------------------------------------------


@pytest.mark.parametrize("model", MODEL_NAMES)
def test_state_dict_round_trip(model, tmp_path):
    cfg = config(model, depth=3, residual=not model.startswith("gt"))
    graph, x = small_graph(), features()
    saved = seeded_model(cfg, seed=0).eval()
    torch.save(saved.state_dict(), tmp_path / "model.pt")
    fresh = seeded_model(cfg, seed=1).eval()
    assert not torch.allclose(fresh(graph, x), saved(graph, x))
    fresh.load_state_dict(torch.load(tmp_path / "model.pt"))
    torch.testing.assert_close(fresh(graph, x), saved(graph, x), rtol=0, atol=0)


# --- gradient groups -----------------------------------------------------------------


def names_by_group(net: torch.nn.Module) -> dict[tuple[int, str, str], list[str]]:
    name_of = {id(param): name for name, param in net.named_parameters()}
    return {
        (layer, kind, group): [name_of[id(param)] for param in params]
        for layer, kind, group, params in gradient_groups(net)
    }


def test_gradient_groups_of_deep_gat():
    net = build_model(config("gat", depth=2))
    assert names_by_group(net) == {
        (0, "input", "fc"): ["input_fc.weight"],
        (0, "input", "bias"): ["input_fc.bias"],
        (0, "input", "all"): ["input_fc.weight", "input_fc.bias"],
        **{
            (i, "attention", group): names
            for i in (1, 2)
            for group, names in (
                ("fc", [f"layers.{i - 1}.fc.weight"]),
                ("attn", [f"layers.{i - 1}.attn_l", f"layers.{i - 1}.attn_r"]),
                ("bias", [f"layers.{i - 1}.bias"]),
                (
                    "all",
                    [f"layers.{i - 1}.{name}" for name in ("fc.weight", "attn_l", "attn_r", "bias")],
                ),
            )
        },
        (3, "output", "fc"): ["output_fc.weight"],
        (3, "output", "bias"): ["output_fc.bias"],
        (3, "output", "all"): ["output_fc.weight", "output_fc.bias"],
    }


def test_gradient_groups_of_deep_gt_attention_layer():
    groups = names_by_group(build_model(config("gt-lip", depth=1)))
    projections = ("fc_q", "fc_k", "fc_v")
    assert groups[(1, "attention", "fc")] == [f"layers.0.{p}.weight" for p in projections]
    assert groups[(1, "attention", "bias")] == [f"layers.0.{p}.bias" for p in projections]
    assert groups[(1, "attention", "res")] == ["layers.0.fc_skip.weight", "layers.0.fc_skip.bias"]
    assert (1, "attention", "attn") not in groups


def test_gradient_groups_of_classic_gat_with_residual():
    """Kinds: hidden attention layers "attention", the last one "output"; the linear
    residuals (input width != 8 * 8, output width != 64) carry the layers' biases."""
    groups = names_by_group(build_model(ModelConfig("gat-classic", IN_FEATS, NUM_CLASSES, residual=True)))
    assert sorted({key[:2] for key in groups}) == [(0, "attention"), (1, "output")]
    for i, kind in ((0, "attention"), (1, "output")):
        assert groups[(i, kind, "res")] == [f"layers.{i}.res_fc.weight", f"layers.{i}.res_fc.bias"]
        assert groups[(i, kind, "fc")] == [f"layers.{i}.fc.weight"]
        assert (i, kind, "bias") not in groups


class ScaledPairNorm(PairNorm):
    """A PairNorm with a learnable gain, standing for normalisations with parameters."""

    def __init__(self):
        super().__init__("PN")
        self.gain = torch.nn.Parameter(torch.ones(()))

    def forward(self, graph, x):
        return self.gain * super().forward(graph, x)


def test_gradient_groups_put_pairnorm_parameters_in_norm():
    net = build_model(config("gat-pairnorm", depth=2))
    assert not any(group == "norm" for _, _, group, _ in gradient_groups(net))
    net.pairnorms = torch.nn.ModuleList(ScaledPairNorm() for _ in range(2))
    groups = names_by_group(net)
    for i in (1, 2):
        assert groups[(i, "attention", "norm")] == [f"pairnorms.{i - 1}.gain"]
        assert groups[(i, "attention", "all")][-1] == f"pairnorms.{i - 1}.gain"


@pytest.mark.parametrize(
    "model, residual",
    # GT models have no residual option (see test_residual_gt_is_rejected).
    [(model, residual) for model in MODEL_NAMES for residual in (False, True)
     if not (residual and model.startswith("gt"))],
)
def test_gradient_groups_partition_every_layer(model, residual):
    net = build_model(config(model, depth=3, residual=residual))
    groups = gradient_groups(net)
    layers = sorted({(layer, kind) for layer, kind, _, _ in groups})
    if model == "gat-classic":
        assert layers == [(0, "attention"), (1, "attention"), (2, "output")]
    else:
        assert layers == [(0, "input"), (1, "attention"), (2, "attention"), (3, "attention"), (4, "output")]
    everything = []
    for index, _ in layers:
        parts = {group: params for layer, _, group, params in groups if layer == index}
        every = [id(param) for param in parts.pop("all")]
        assert len(every) == len(set(every))
        assert sorted(every) == sorted(id(param) for params in parts.values() for param in params)
        assert all(params for params in parts.values())
        everything.extend(every)
    assert sorted(everything) == sorted(id(param) for param in net.parameters())


def test_gradient_groups_reject_other_modules():
    with pytest.raises(ValueError, match="Linear has no numbered layers"):
        gradient_groups(torch.nn.Linear(2, 2))


@pytest.mark.parametrize("model", MODEL_NAMES)
def test_attention_layers(model):
    net = build_model(config(model, depth=3))
    layers = attention_layers(net)
    first = 0 if model == "gat-classic" else 1
    assert [index for index, _ in layers] == [first, first + 1, first + 2]
    assert [module for _, module in layers] == list(net.layers)


# --- configuration -------------------------------------------------------------------


@pytest.mark.parametrize(
    "setting, value, message",
    [
        ("model", "gin", "unknown model 'gin'; allowed: gat, gat-lip,"),
        ("depth", 0, "depth must be an integer >= 1, got 0"),
        ("heads", 0, "heads must be an integer >= 1, got 0"),
        ("hidden", -2, "hidden must be an integer >= 1, got -2"),
        ("in_feats", 2.5, "in_feats must be an integer >= 1, got 2.5"),
        ("alpha", -0.1, "alpha must be >= 0, got -0.1"),
        ("variant", "pyg", "unknown variant 'pyg'; allowed: paper, official"),
        ("feat_drop", 1.0, r"feat_drop must be in \[0, 1\) or None \(default\), got 1.0"),
        ("attn_drop", -0.5, r"attn_drop must be in \[0, 1\) or None \(default\), got -0.5"),
        ("pairnorm_mode", "BN", "unknown PairNorm mode 'BN'"),
        ("recipe", "pyg", "unknown recipe 'pyg'; allowed: lipnorm, official, dgn, snr"),
    ],
)
def test_invalid_config(setting, value, message):
    cfg = dataclasses.replace(config("gat-lip-pairnorm"), **{setting: value})
    with pytest.raises(ValueError, match=message):
        cfg.validate()
    with pytest.raises(ValueError, match=message):
        build_model(cfg)


def test_residual_gt_is_rejected():
    with pytest.raises(ValueError, match="model .gt-lip.: residual=True is not available for GT models"):
        build_model(config("gt-lip", residual=True))
    with pytest.raises(ValueError, match="residual=True is not available for GT models"):
        DeepGT(IN_FEATS, NUM_CLASSES, residual=True)


def test_deep_model_rejects_unknown_norm():
    with pytest.raises(ValueError, match="unknown norm 'layernorm'; allowed: none, pairnorm, batchnorm, dgn"):
        DeepGAT(IN_FEATS, NUM_CLASSES, norm="layernorm")
    # The two normalisations are two arguments: no composite "lip+pairnorm" string.
    with pytest.raises(ValueError, match="unknown norm 'lip\\+pairnorm'"):
        DeepGAT(IN_FEATS, NUM_CLASSES, norm="lip+pairnorm")
    with pytest.raises(ValueError, match="architecture 'gt' has no attention_norm 'pairnorm'"):
        DeepGT(IN_FEATS, NUM_CLASSES, attention_norm="pairnorm")


@pytest.mark.parametrize("cls, model", [(DeepGAT, "gat-lip-pairnorm"), (DeepGAT, "gat-batchnorm"), (DeepGT, "gt-lip")])
def test_deep_model_of_separate_norms_is_the_one_its_name_builds(cls, model):
    _, attention_norm, norm = registry.parse_model(model)
    torch.manual_seed(3)
    direct = cls(IN_FEATS, NUM_CLASSES, depth=3, heads=2, hidden=3, attention_norm=attention_norm, norm=norm).eval()
    named = seeded_model(config(model, depth=3), seed=3).eval()
    assert type(named) is cls
    assert direct.state_dict().keys() == named.state_dict().keys()
    assert all(torch.equal(value, named.state_dict()[key]) for key, value in direct.state_dict().items())
    assert torch.equal(direct(small_graph(), features()), named(small_graph(), features()))


def test_deep_models_take_architecture_dropouts_by_default():
    assert DeepGAT(IN_FEATS, NUM_CLASSES).feat_drop == 0.6
    assert DeepGT(IN_FEATS, NUM_CLASSES).feat_drop == 0.5
    assert DeepGT(IN_FEATS, NUM_CLASSES, feat_drop=0.2).layers[0].attn_drop.p == 0.3


def test_from_dict():
    settings = {"model": "gt", "in_feats": 4, "num_classes": 2, "depth": 3}
    cfg = ModelConfig.from_dict(settings)
    assert cfg == ModelConfig("gt", 4, 2, depth=3)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match=r"unknown model setting\(s\) 'dropout', 'layers'; allowed: model,"):
        ModelConfig.from_dict({**settings, "layers": 2, "dropout": 0.1})
    with pytest.raises(ValueError, match=r"missing model setting\(s\): in_feats, num_classes"):
        ModelConfig.from_dict({"model": "gat"})


# --- the authors' recipe ---------------------------------------------------------------


@pytest.mark.parametrize("model", OFFICIAL_MODELS)
def test_official_recipe_shapes(model):
    """Their DeepGAT: Linear(in -> D), first layer D -> H x D, later H*D -> H x D,
    Linear(H*D -> classes)."""
    net = build_model(config(model, heads=8, hidden=64, depth=3, recipe="official", variant="official"))
    assert isinstance(net, DeepGAT) and net.recipe == "official"
    assert (net.input_fc.in_features, net.input_fc.out_features) == (IN_FEATS, 64)
    assert [layer.in_feats for layer in net.layers] == [64, 512, 512]
    assert [tuple(layer.fc.weight.shape) for layer in net.layers] == [(512, 64), (512, 512), (512, 512)]
    for layer in net.layers:
        assert (layer.out_feats, layer.num_heads, layer.variant) == (64, 8, "official")
        assert tuple(layer.attn_l.shape) == tuple(layer.attn_r.shape) == (1, 8, 64)
        assert tuple(layer.bias.shape) == (512,) and layer.res_fc is None
        assert (layer.feat_drop.p, layer.attn_drop.p) == (0.0, 0.3)
    assert net.feat_drop == 0.6
    assert (net.output_fc.in_features, net.output_fc.out_features) == (512, NUM_CLASSES)
    assert (net.pairnorms is not None) == (model == "gat-pairnorm")
    assert net(small_graph(), features()).shape == (NUM_NODES, NUM_CLASSES)


def test_official_recipe_composition():
    """Eval forward: input Linear, layers (ELU between, PairNorm after each), output Linear."""
    net = seeded_model(config("gat-pairnorm", depth=3, recipe="official"), seed=0).eval()
    assert_composed_by_hand(net, pairnorm=True)


def uniform_std(bound: float) -> float:
    return bound / math.sqrt(3)


def test_official_recipe_initialisation_is_pyg_glorot_and_torch_linear():
    """Attention layers: PyG's glorot, uniform +-sqrt(6 / (size(-2) + size(-1))) on the
    shapes PyG stores (lin.weight (H*D, in), att (1, H, D)); biases 0. Linears: torch's
    default, uniform +-1/sqrt(fan_in)."""
    in_feats, heads, hidden = 300, 8, 64
    torch.manual_seed(0)
    cfg = ModelConfig("gat-lip", in_feats, NUM_CLASSES, depth=2, heads=heads, hidden=hidden, recipe="official")
    net = build_model(cfg)
    for layer in net.layers:
        fan_in = layer.fc.weight.shape[1]
        for tensor, bound, tolerance in (
            (layer.fc.weight, math.sqrt(6 / (heads * hidden + fan_in)), 0.03),  # >= 32768 values
            (layer.attn_l, math.sqrt(6 / (heads + hidden)), 0.12),  # 512 values: std error ~2 %
            (layer.attn_r, math.sqrt(6 / (heads + hidden)), 0.12),
        ):
            values = tensor.detach()
            assert values.abs().max() <= bound
            assert values.abs().max() > 0.95 * bound
            assert values.std().item() == pytest.approx(uniform_std(bound), rel=tolerance)
        assert torch.equal(layer.bias.detach(), torch.zeros(heads * hidden))
    for linear in (net.input_fc, net.output_fc):
        bound = 1 / math.sqrt(linear.in_features)
        assert linear.weight.abs().max() <= bound and linear.bias.abs().max() <= bound
        assert linear.weight.std().item() == pytest.approx(uniform_std(bound), rel=0.05)
    # The default recipe keeps DGL's Xavier-normal (ReLU gain): std sqrt(2) times larger.
    torch.manual_seed(0)
    default = build_model(dataclasses.replace(cfg, recipe="lipnorm"))
    fc = default.layers[1].fc.weight.detach()
    assert fc.std().item() == pytest.approx(math.sqrt(2) * uniform_std(math.sqrt(6 / 1024)), rel=0.03)
    assert fc.abs().max() > math.sqrt(6 / 1024)


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"model": "gt-lip"}, "recipe 'official' builds the authors' DeepGAT, which has no model 'gt-lip'; allowed with it: gat, gat-lip, gat-pairnorm"),
        ({"model": "gat-classic"}, "has no model 'gat-classic'"),
        ({"model": "gat-lip-pairnorm"}, "has no model 'gat-lip-pairnorm'"),
        ({"model": "gat", "residual": True}, "recipe 'official' has no residual connections"),
    ],
)
def test_official_recipe_rejects_what_their_deepgat_lacks(settings, message):
    with pytest.raises(ValueError, match=message):
        build_model(config(recipe="official", **settings))
    with pytest.raises(ValueError, match="unknown recipe 'pyg'; allowed: lipnorm, official, dgn, snr"):
        DeepGAT(IN_FEATS, NUM_CLASSES, recipe="pyg")


def test_official_recipe_gradient_groups_and_config_round_trip():
    net = build_model(config("gat-lip", depth=2, recipe="official"))
    assert names_by_group(net)[(0, "input", "all")] == ["input_fc.weight", "input_fc.bias"]
    assert sorted({layer for layer, *_ in gradient_groups(net)}) == [0, 1, 2, 3]
    assert ModelConfig.from_dict(config("gat", recipe="official").to_dict()).recipe == "official"
