"""lipnorm.registry: every name list derived from it, the model axes, plugins, a user's
architecture, normalisation and dataset through `lipnorm train` and the workflow."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import dgl
import pandas as pd
import pytest
import torch
import yaml
from torch import nn

from lipnorm import cli, data, grid, plan, registry, train
from lipnorm.nn import functional
from lipnorm.nn.models import deep, numbering
from lipnorm.nn.models.build import build_model
from lipnorm.nn.models.numbering import gradient_groups
from lipnorm.results import aggregate, figures
from lipnorm.settings import train_config
from lipnorm.settings import model_config
from lipnorm.settings.model_config import ModelConfig
from lipnorm.train.trainer import prepare

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
EXAMPLE = REPO / "examples" / "plugins" / "gatv2.py"
BIN = Path(sys.executable).parent

# What these lists were before the registry (commit c21f51b), spelt out.
LEGACY_MODELS = ("gat", "gat-lip", "gat-pairnorm", "gat-lip-pairnorm", "gt", "gt-lip", "gat-classic")
LEGACY_PALETTE = {
    "gat": "#0173b2", "gat-lip": "#de8f05", "gat-pairnorm": "#029e73", "gat-lip-pairnorm": "#d55e00",
    "gt": "#cc78bc", "gt-lip": "#ca9161", "gat-classic": "#949494",
}
LEGACY_LABELS = {
    "gat": "GAT", "gat-lip": "GAT-Lip", "gat-pairnorm": "GAT+PairNorm",
    "gat-lip-pairnorm": "GAT-Lip+PairNorm", "gt": "GT", "gt-lip": "GT-Lip", "gat-classic": "GAT (classic)",
}
LEGACY_DATASET_LABELS = {
    "cora": "Cora", "citeseer": "CiteSeer", "pubmed": "PubMed", "coauthor-cs": "CoauthorCS",
    "ppi": "PPI", "ogbn-arxiv": "ogbn-arxiv", "csbm": "CSBM",
}
LEGACY_PARTS = {
    "gat": ("gat", "none", "none"), "gat-lip": ("gat", "lip", "none"), "gat-pairnorm": ("gat", "none", "pairnorm"),
    "gat-lip-pairnorm": ("gat", "lip", "pairnorm"), "gt": ("gt", "none", "none"), "gt-lip": ("gt", "lip", "none"),
}


# --- a user's entries, registered by this test module ---------------------------------


class MeanConv(nn.Module):
    """Mean of the in-neighbours' projected features: (N, heads, out) outputs, no
    attention; its projection is `lin`, a name lipnorm's grouping rules do not know."""

    def __init__(self, in_feats, out_feats, heads):
        super().__init__()
        self.heads, self.out_feats = heads, out_feats
        self.lin = nn.Linear(in_feats, heads * out_feats)

    def forward(self, graph, h):
        with graph.local_scope():
            graph.ndata["h"] = self.lin(h)
            graph.update_all(dgl.function.copy_u("h", "m"), dgl.function.mean("m", "h"))
            return graph.ndata["h"].view(-1, self.heads, self.out_feats)


def mean_conv(in_feats, out_feats, heads, **options):
    return MeanConv(in_feats, out_feats, heads)


class Centre(nn.Module):
    """Subtract the node mean, times a learnable gain (a normalisation with a parameter)."""

    def __init__(self):
        super().__init__()
        self.gain = nn.Parameter(torch.full((), 2.0))

    def forward(self, graph, h):
        return self.gain * (h - h.mean(0))


def tiny_graph_parts():
    graph = dgl.graph(([0, 1, 2, 3, 4, 5, 6, 7], [1, 2, 3, 4, 5, 6, 7, 0]), num_nodes=8)
    labels = torch.tensor([0, 1] * 4)
    return {
        "graph": dgl.to_bidirected(graph),
        "features": torch.eye(8)[:, :3] + labels[:, None].float(),
        "labels": labels,
        "train_mask": torch.arange(8) < 4,
        "val_mask": (torch.arange(8) >= 4) & (torch.arange(8) < 6),
        "test_mask": torch.arange(8) >= 6,
    }


@pytest.fixture
def user_entries():
    """A user's architecture, normalisation and dataset, registered for one test."""
    entries = [
        ("architecture", registry.register_architecture(
            "test-mean", label="Mean", colour="#123456", layer=mean_conv, attention=False,
            dropout=(0.1, 0.0), parameter_groups={"lin.weight": "fc"},
        )),
        ("norm", registry.register_norm(
            "test-centre", label="Centre", colour="#654321", lip_colour="#abcdef",
            factory=lambda width, config: Centre(),
        )),
        ("dataset", registry.register_dataset(
            "test-ring", label="Ring", colour="#111111", load=tiny_graph_parts,
        )),
    ]
    yield
    for kind, entry in entries:
        registry.unregister(kind, entry.name)


# --- every derived list is the registry's -----------------------------------------------


# The remedies for deep GNNs registered beside them (lipnorm.nn.norm, lipnorm.nn.conv.gcn).
BASELINE_MODELS = (
    "gat-batchnorm", "gat-lip-batchnorm", "gat-dgn", "gat-lip-dgn", "gcn", "gcn-pairnorm", "gcn-batchnorm", "gcn-dgn",
)


def test_lipnorms_own_lists_keep_what_they_were_and_add_the_baselines():
    names = registry.model_names()
    assert [name for name in names if name in LEGACY_MODELS] == list(LEGACY_MODELS)
    assert sorted(set(names) - set(LEGACY_MODELS)) == sorted(BASELINE_MODELS)
    assert model_config.MODEL_NAMES == names
    assert {name: registry.parse_model(name) for name in LEGACY_PARTS} == LEGACY_PARTS
    assert all(registry.compose_model(*parts) == name for name, parts in LEGACY_PARTS.items())
    assert registry.norm_names() == ("none", "pairnorm", "batchnorm", "dgn")
    assert model_config._DEFAULT_DROPOUT == {
        "gat": (0.6, 0.3), "gt": (0.5, 0.3), "gat-classic": (0.6, 0.6), "gcn": (0.5, 0.0),
    }
    assert train_config.NORM_EXTRAS == ("pairnorm", "batchnorm", "dgn")
    assert registry.ATTENTION_NORMS == functional.NORMS
    assert registry.dataset_names() == data.DATASETS
    assert figures.PALETTE == registry.palette("model")
    assert {name: figures.PALETTE[name] for name in LEGACY_MODELS} == LEGACY_PALETTE
    assert registry.palette("attention_norm") == {"none": LEGACY_PALETTE["gat"], "lip": LEGACY_PALETTE["gat-lip"]}
    assert registry.palette("norm") == {
        "none": "#949494", "pairnorm": LEGACY_PALETTE["gat-pairnorm"], "batchnorm": "#56b4e9", "dgn": "#fbafe4",
    }
    assert list(registry.palette("dataset")) == list(data.DATASETS)
    assert registry.palette("architecture") == {
        "gat": "#0173b2", "gt": "#cc78bc", "gat-classic": "#949494", "gcn": "#000000",
    }
    assert {m: aggregate.label("model", m) for m in LEGACY_MODELS} == LEGACY_LABELS
    assert {d: aggregate.label("dataset", d) for d in data.DATASETS} == LEGACY_DATASET_LABELS


def _schema_enum(schema, path):
    node = schema["$defs"]
    for key in path:
        node = node[key]
    return node["enum"]


def test_schema_enums_are_the_registry_names():
    schema = yaml.safe_load(SCHEMA.read_text())
    assert set(grid.SCHEMA_ENUMS.values()) == {"dataset", "model", "attention_norm", "norm"}
    derived = grid.schema_with_registry(schema)
    for path, kind in grid.SCHEMA_ENUMS.items():
        node = schema["$defs"]
        for key in path:
            node = node[key]
        assert node == {}, path  # the file lists no names: a new built-in edits nothing here
        assert _schema_enum(derived, path) == list(registry.names(kind)), path
    assert _schema_enum(derived, next(iter(grid.SCHEMA_ENUMS))) == list(data.DATASETS)


def test_cli_help_lists_the_registered_names(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "10000")  # argparse wraps at hyphens otherwise
    with pytest.raises(SystemExit):
        cli.main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for kind in ("dataset", "model", "architecture", "norm"):
        assert ", ".join(registry.names(kind)) in text, kind


def test_a_registered_entry_appears_in_every_derived_list(user_entries):
    added = ["gat-test-centre", "gat-lip-test-centre", "test-mean", "test-mean-pairnorm", "test-mean-test-centre"]
    for name in added:
        assert name in model_config.MODEL_NAMES and name in registry.model_names()
    assert registry.parse_model("gat-lip-test-centre") == ("gat", "lip", "test-centre")
    assert registry.norm_names()[-1] == "test-centre"
    assert model_config._DEFAULT_DROPOUT["test-mean"] == (0.1, 0.0)
    assert train_config.NORM_EXTRAS == ("pairnorm", "batchnorm", "dgn", "test-centre")
    assert figures.PALETTE["test-mean"] == "#123456"
    assert figures.PALETTE["test-mean-test-centre"] == "#654321"
    assert figures.PALETTE["gat-lip-test-centre"] == "#abcdef"
    assert aggregate.label("model", "gat-lip-test-centre") == "GAT-Lip+Centre"
    assert aggregate.label("dataset", "test-ring") == "Ring"
    assert aggregate.ordered("model", ["test-mean", "gat-test-centre", "gat"]) == ["gat", "gat-test-centre", "test-mean"]
    derived = grid.schema_with_registry(yaml.safe_load(SCHEMA.read_text()))
    for path, kind in grid.SCHEMA_ENUMS.items():
        assert _schema_enum(derived, path) == list(registry.names(kind))
    assert "test-ring" in _schema_enum(derived, next(iter(grid.SCHEMA_ENUMS)))


def test_a_figures_models_get_distinct_colours_and_lipnorms_keep_theirs(user_entries):
    assert registry.figure_palette(LEGACY_MODELS) == LEGACY_PALETTE
    shared = ["gat-test-centre", "test-mean-test-centre", "test-mean", "gat"]
    colours = registry.figure_palette(shared)
    assert list(colours) == shared and len(set(colours.values())) == 4
    # The first of two sharing a colour keeps it; the second gets the first spare colour
    # no model of the figure has.
    assert colours["gat-test-centre"] == "#654321" and colours["gat"] == LEGACY_PALETTE["gat"]
    assert colours["test-mean-test-centre"] == next(
        c for c in registry.SPARE_COLOURS if c not in {"#654321", "#123456", LEGACY_PALETTE["gat"]}
    )


# --- model names and axes -----------------------------------------------------------------


@pytest.mark.parametrize("name", LEGACY_MODELS)
def test_model_names_parse_into_their_axes_and_back(name):
    parts = registry.parse_model(name)
    assert registry.compose_model(*parts) == name
    assert parts == {
        "gat": ("gat", "none", "none"), "gat-lip": ("gat", "lip", "none"),
        "gat-pairnorm": ("gat", "none", "pairnorm"), "gat-lip-pairnorm": ("gat", "lip", "pairnorm"),
        "gt": ("gt", "none", "none"), "gt-lip": ("gt", "lip", "none"),
        "gat-classic": ("gat-classic", "none", "none"),
    }[name]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: registry.parse_model("gin"), "unknown model 'gin'; allowed: gat, gat-lip, gat-pairnorm"),
        (lambda: registry.architecture("gin"), "unknown architecture 'gin'; allowed: gat, gt, gat-classic"),
        (lambda: registry.norm("batch"), "unknown norm 'batch'; allowed: none, pairnorm"),
        (lambda: registry.dataset("mnist"), "unknown dataset 'mnist'; allowed: cora, citeseer"),
        (lambda: registry.compose_model("gat-classic", "lip"),
         "architecture 'gat-classic' has no attention_norm 'lip'; allowed: none"),
        (lambda: registry.compose_model("gt", "none", "pairnorm"),
         "architecture 'gt' takes no representation normalisation; got norm 'pairnorm'"),
        (lambda: registry.label("colour", "x"), "unknown kind 'colour'"),
    ],
)
def test_unknown_names_and_combinations_are_errors_naming_what_is_allowed(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(name="gat", label="G", colour="#000000", layer=mean_conv), "architecture 'gat' is registered already"),
        (dict(name="x", label="X", colour="#000000"), "give exactly one of layer= and model="),
        (dict(name="x", label="X", colour="#000000", layer=mean_conv, model=mean_conv), "give exactly one of"),
        (dict(name="x", label="X", colour="#000000", layer=42), "layer must be a callable or a 'module:attribute'"),
        (dict(name="x", label="X", colour="#000000", layer=mean_conv, lip=True), "lip=True needs lip_colour"),
        (dict(name="x", label="X", colour="#000000", layer=mean_conv, parameter_groups={"w": "weights"}),
         "unknown gradient group(s) {'w': 'weights'}; allowed: fc, attn, bias, res, norm"),
        (dict(name="x", label="X", colour="#000000", layer=mean_conv, dropout=(1.0, 0.0)),
         "feature dropout must be in [0, 1), got 1.0"),
        (dict(name="Big Net", label="X", colour="#000000", layer=mean_conv), "must be a non-empty lower-case"),
        (dict(name="a+b", label="X", colour="#000000", layer=mean_conv), "name 'a+b' must be a non-empty"),
        # gat + lip is the model gat-lip already: a new architecture of that name is ambiguous.
        (dict(name="gat-lip", label="X", colour="#000000", layer=mean_conv),
         "model name 'gat-lip' would mean both ('gat', 'lip', 'none') and ('gat-lip', 'none', 'none')"),
    ],
)
def test_bad_registrations_are_errors_and_register_nothing(kwargs, message):
    before = registry.model_names()
    with pytest.raises(ValueError, match=re.escape(message)):
        registry.register_architecture(kwargs.pop("name"), **kwargs)
    assert registry.model_names() == before


def test_a_norm_cannot_be_named_like_an_attention_norm():
    with pytest.raises(ValueError, match="norm name 'lip' is an attention_norm value"):
        registry.register_norm("lip", label="L", colour="#000000", lip_colour="#000001", factory=lambda w, c: None)


def test_a_dataset_needs_a_load_function():
    with pytest.raises(ValueError, match="dataset 'mine': give load="):
        registry.register_dataset("mine", label="Mine", colour="#000000")


# --- old names give the same models and numbers as before ------------------------------

# Computed with the code of commit c21f51b (before the registry): the sha256 (first 16
# hex digits) of every state-dict key and tensor's bytes of the model built with
# torch.manual_seed(0), ModelConfig(model, in_feats=5, num_classes=3, depth=3, heads=2,
# hidden=3, residual); and of `train.run` on a small csbm (`GOLDEN_RUN`), the test
# metric, final train and val metric, parameter count and per-epoch training losses.
#
# The losses are float32 sums whose order depends on the CPU. On an AVX-512 CPU (an AMD
# EPYC, seen here) one epoch's loss of five models differs from the recorded one by 1-2
# float32 ulps (2.4e-7 at most); the metrics, parameter counts and other losses stay exact.
# For `gat` the cause is MKL's sparse product (see tests/nn/test_neighbour_sum.py): under
# MKL_CBWR=COMPATIBLE, where MKL sums in order on every CPU, its losses are the recorded ones
# bit for bit. The other four differ under every setting tried (MKL_CBWR, MKL's, oneDNN's
# and PyTorch's instruction-set caps, one thread, DGL without libxsmm). So the losses are
# compared to 1e-6, the rest exactly, and `gat`'s losses exactly where MKL sums in order.
GOLDEN_MODELS = {
    ("gat", False): "396993df371c78b6", ("gat", True): "396993df371c78b6",
    ("gat-lip", False): "396993df371c78b6", ("gat-lip", True): "396993df371c78b6",
    ("gat-pairnorm", False): "396993df371c78b6", ("gat-pairnorm", True): "396993df371c78b6",
    ("gat-lip-pairnorm", False): "396993df371c78b6", ("gat-lip-pairnorm", True): "396993df371c78b6",
    ("gt", False): "260dec58951fbad7", ("gt-lip", False): "260dec58951fbad7",
    ("gat-classic", False): "3bb2c629e42b3411", ("gat-classic", True): "fbd95dbdc7f1a5b2",
}
GOLDEN_RUN = dict(
    dataset="csbm", depth=2, heads=2, hidden=4, epochs=3, missing_rate=50, grad_log_every=1,
    csbm="nodes=60,classes=3,avg_degree=4,feature_dim=8",
)
GOLDEN_RUNS = {
    "gat": ([0.36666666666666664, 0.5, 0.2, 275], [1.3421101570129395, 1.1729754209518433, 1.2011655569076538]),
    "gat-lip": ([0.4, 0.4166666666666667, 0.3333333333333333, 275], [1.1433895826339722, 1.1020759344100952, 1.1882652044296265]),
    "gat-pairnorm": ([0.16666666666666666, 0.25, 0.13333333333333333, 275], [0.9925898909568787, 1.0988537073135376, 1.161568284034729]),
    "gat-lip-pairnorm": ([0.23333333333333334, 0.25, 0.13333333333333333, 275], [1.0440984964370728, 1.0869091749191284, 1.1504406929016113]),
    "gt": ([0.4, 0.3333333333333333, 0.26666666666666666, 675], [1.2907474040985107, 1.257049322128296, 1.1612180471420288]),
    "gt-lip": ([0.4, 0.3333333333333333, 0.26666666666666666, 675], [1.2938448190689087, 1.2518973350524902, 1.1587929725646973]),
    "gat-classic": ([0.23333333333333334, 0.3333333333333333, 0.4666666666666667, 121], [1.4836419820785522, 1.2817243337631226, 1.1495310068130493]),
}

# Set before MKL loads (in the environment of the process), as MKL reads it once.
MKL_IN_ORDER = os.environ.get("MKL_CBWR", "").upper().startswith("COMPATIBLE")
# The models whose recorded losses MKL_CBWR=COMPATIBLE reproduces bit for bit on AVX-512 too.
SUMS_IN_ORDER_UNDER_MKL_CBWR = ("gat",)


def state_digest(model: nn.Module) -> str:
    digest = hashlib.sha256()
    for key, value in model.state_dict().items():
        digest.update(key.encode())
        digest.update(value.detach().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def seeded(cfg: ModelConfig) -> nn.Module:
    torch.manual_seed(0)
    return build_model(cfg)


@pytest.mark.parametrize("model, residual", GOLDEN_MODELS)
def test_old_names_build_the_models_they_built_before(model, residual):
    cfg = ModelConfig(model=model, in_feats=5, num_classes=3, depth=3, heads=2, hidden=3, residual=residual)
    assert state_digest(seeded(cfg)) == GOLDEN_MODELS[(model, residual)]


@pytest.mark.parametrize("model", LEGACY_MODELS)
def test_old_names_train_to_the_numbers_they_gave_before(tmp_path, model):
    summary = train.run(train.TrainConfig(model=model, **GOLDEN_RUN), tmp_path / "run")
    numbers = [summary["test_metric"], summary["final"]["train"], summary["final"]["val"], summary["num_params"]]
    losses = pd.read_parquet(tmp_path / "run" / "metrics.parquet")["train_loss"].tolist()
    recorded_numbers, recorded_losses = GOLDEN_RUNS[model]
    assert numbers == recorded_numbers
    if model in SUMS_IN_ORDER_UNDER_MKL_CBWR and MKL_IN_ORDER:
        assert losses == recorded_losses
    else:
        assert losses == pytest.approx(recorded_losses, rel=1e-6, abs=0)


@pytest.mark.slow
def test_gat_trains_bit_for_bit_where_mkl_sums_in_order():
    """The recorded run of `gat`, rerun where MKL sums in order: all its losses exact."""
    env = {**os.environ, "MKL_CBWR": "COMPATIBLE"}
    cases = [f"{__file__}::test_old_names_train_to_the_numbers_they_gave_before[{model}]" for model in SUMS_IN_ORDER_UNDER_MKL_CBWR]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *cases, "-q", "-p", "no:cacheprovider"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(rf"\b{len(cases)} passed\b", done.stdout) and " failed" not in done.stdout


@pytest.mark.parametrize(
    "name, axes",
    [
        ("gat-lip-pairnorm", dict(model="gat", attention_norm="lip", norm="pairnorm")),
        ("gat-pairnorm", dict(model="gat-lip", attention_norm="none", norm="pairnorm")),
        ("gt-lip", dict(model="gat", architecture="gt", attention_norm="lip")),
        ("gat", dict(model="gat-lip-pairnorm", attention_norm="none", norm="none")),
    ],
)
def test_the_axes_spell_the_same_models_as_the_names(name, axes):
    by_name = ModelConfig(in_feats=5, num_classes=3, depth=3, heads=2, hidden=3, model=name)
    by_axes = ModelConfig(in_feats=5, num_classes=3, depth=3, heads=2, hidden=3, **axes)
    assert by_axes.resolved() == by_name.resolved()
    assert by_name.resolved().parts() == registry.parse_model(name)
    graph = dgl.add_self_loop(dgl.graph(([0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 6]), num_nodes=7))
    feat = torch.randn(7, 5)
    first, second = seeded(by_name).eval(), seeded(by_axes).eval()
    assert state_digest(first) == state_digest(second)
    assert torch.equal(first(graph, feat), second(graph, feat))
    train_name = train.TrainConfig(model=name).resolved()
    train_axes = train.TrainConfig(**axes).resolved()
    assert train_axes == train_name
    assert (train_name.model, train_name.architecture, train_name.attention_norm, train_name.norm) == (
        name, *registry.parse_model(name)
    )


def test_norm_extra_is_the_older_spelling_of_norm():
    older = train.TrainConfig(model="gat-lip", norm_extra="pairnorm").resolved()
    assert older == train.TrainConfig(model="gat-lip", norm="pairnorm").resolved()
    assert older.model == "gat-lip-pairnorm" and older.norm_extra is None
    with pytest.raises(ValueError, match="norm_extra='pairnorm' and norm='none' disagree"):
        train.TrainConfig(model="gat", norm_extra="pairnorm", norm="none").validate()


def test_residual_is_a_setting_that_reaches_the_model(tmp_path, capsys):
    out = tmp_path / "run"
    cli.main([
        "train", "--dataset", "csbm", "--csbm", "nodes=30,classes=2,feature_dim=4", "--model", "gat-classic",
        "--depth", "2", "--epochs", "1", "--residual", "--out", str(out),
    ])
    assert json.loads((out / "summary.json").read_text())["config"]["residual"] is True
    setup = prepare(train.TrainConfig(
        dataset="csbm", csbm="nodes=30,classes=2,feature_dim=4", model="gat-classic", residual=True,
    ).resolved())
    assert all(layer.res_fc is not None for layer in setup.model.layers)
    assert train.TrainConfig(model="gat-classic").resolved().residual is False


# --- a user's architecture, normalisation and dataset ------------------------------------


def test_a_users_linear_needs_no_declared_parameter_group(user_entries):
    # MeanConv's projection `lin` is an nn.Linear: its weight is fc by default, its bias bias.
    registry.unregister("architecture", "test-mean")
    registry.register_architecture("test-mean", label="Mean", colour="#123456", layer=mean_conv, attention=False)
    net = build_model(ModelConfig(model="test-mean", in_feats=3, num_classes=2, depth=2))
    groups = {(index, group): params for index, kind, group, params in gradient_groups(net)}
    for index in (1, 2):
        assert [id(p) for p in groups[index, "fc"]] == [id(net.layers[index - 1].lin.weight)]
        assert [id(p) for p in groups[index, "bias"]] == [id(net.layers[index - 1].lin.bias)]


def test_declared_parameter_groups_come_before_the_rules():
    declared = {"proj.": "res", "attn": "attn"}
    assert [numbering._group_of(name, declared) for name in ("proj.weight", "proj.bias", "attn", "fc.bias")] == [
        "res", "res", "attn", "bias"
    ]


def test_a_users_model_is_stacked_as_the_deep_models(user_entries):
    cfg = ModelConfig(model="test-mean-test-centre", in_feats=3, num_classes=2, depth=2, heads=2, hidden=3)
    net = seeded(cfg).eval()
    assert isinstance(net, deep.DeepNet) and net.feat_drop == 0.1
    assert [type(layer) for layer in net.layers] == [MeanConv, MeanConv]
    assert [type(norm) for norm in net.norms] == [Centre, Centre]
    parts = tiny_graph_parts()
    graph, feat = parts["graph"], parts["features"]
    # Reference: input Linear, [layer, ELU (not after the last), centre] per layer, output Linear.
    h = net.input_fc(feat)
    for i, (layer, norm) in enumerate(zip(net.layers, net.norms)):
        h = layer(graph, h).flatten(1)
        h = torch.nn.functional.elu(h) if i == 0 else h
        h = 2.0 * (h - h.mean(0))
    assert torch.allclose(net(graph, feat), net.output_fc(h))
    groups = {(index, kind, group): [id(p) for p in params] for index, kind, group, params in gradient_groups(net)}
    assert groups[(1, "attention", "fc")] == [id(net.layers[0].lin.weight)]
    assert groups[(1, "attention", "bias")] == [id(net.layers[0].lin.bias)]
    assert groups[(2, "attention", "norm")] == [id(net.norms[1].gain)]


def test_a_users_model_trains_through_lipnorm_train(user_entries, tmp_path):
    out = tmp_path / "run"
    assert cli.main([
        "train", "--dataset", "test-ring", "--architecture", "test-mean", "--norm", "test-centre",
        "--depth", "3", "--heads", "2", "--hidden", "2", "--epochs", "4", "--grad-log-every", "2",
        "--out", str(out),
    ]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "ok"
    assert {k: summary["config"][k] for k in ("model", "architecture", "attention_norm", "norm", "dataset")} == {
        "model": "test-mean-test-centre", "architecture": "test-mean", "attention_norm": "none",
        "norm": "test-centre", "dataset": "test-ring",
    }
    gradnorms = pd.read_parquet(out / "gradnorms.parquet")
    assert sorted(gradnorms["epoch"].unique()) == [1, 3]
    assert sorted(gradnorms["layer"].unique()) == [0, 1, 2, 3, 4]
    assert set(gradnorms.loc[gradnorms["layer"] == 2, "group"]) == {"fc", "bias", "norm", "all"}
    outnorms = pd.read_parquet(out / "outnorms.parquet")
    assert sorted(outnorms["layer"].unique()) == [1, 2, 3]
    stats = pd.read_parquet(out / "layerstats.parquet")
    assert sorted(stats["epoch"].unique()) == [1, 3, 4]
    # No attention: every statistic but the attention entropy.
    assert set(stats["metric"]) == {"dirichlet_energy", "mean_average_distance", "rayleigh_quotient", "output_norm"}
    tables = aggregate.aggregate_runs([out])
    assert tables["runs"].loc[0, ["architecture", "attention_norm", "norm"]].tolist() == [
        "test-mean", "none", "test-centre"
    ]
    assert set(tables["gradnorms"]["norm"]) == {"test-centre"}


def test_an_attention_layer_that_returns_no_attention_is_named(user_entries, tmp_path):
    registry.unregister("architecture", "test-mean")
    registry.register_architecture(
        "test-mean", label="Mean", colour="#123456", layer=mean_conv, parameter_groups={"lin.weight": "fc"}
    )
    with pytest.raises(TypeError, match="get_attention"):
        train.run(train.TrainConfig(dataset="test-ring", model="test-mean", epochs=1), tmp_path / "run")


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda p: p.pop("labels"), "missing ['labels']"),
        (lambda p: p.update(extra=1), "unknown ['extra']"),
        (lambda p: p.update(graph="edges"), "graph of type str; expected a homogeneous dgl.DGLGraph"),
        (lambda p: p.update(features=torch.ones(7, 3)), r"features of shape (7, 3) and dtype torch.float32; expected floats of shape (8, F)"),
        (lambda p: p.update(labels=torch.ones(8)), "labels of shape (8,) and dtype torch.float32; expected integers"),
        (lambda p: p.update(labels=torch.tensor([0, 1] * 3 + [5, -1])), "labels in [-1, 5]; expected them in [0, 6)"),
        (lambda p: p.update(val_mask=torch.ones(8)), "val_mask of shape (8,) and dtype torch.float32; expected bool"),
        (lambda p: p.update(train_mask=torch.zeros(8, dtype=torch.bool)), "an empty train_mask"),
    ],
)
def test_a_users_dataset_is_checked_naming_the_bad_part(edit, message):
    parts = tiny_graph_parts()
    edit(parts)
    with pytest.raises(ValueError, match=re.escape(f"dataset 'mine': load() returned") + ".*" + re.escape(message)):
        data.dataset_from_parts("mine", parts)


def test_a_users_dataset_loads_as_a_node_dataset(user_entries):
    dataset = data.load_dataset("test-ring")
    parts = tiny_graph_parts()
    assert dataset.num_classes == 2 and dataset.metric == "accuracy" and not dataset.multilabel
    assert torch.equal(dataset.labels, parts["labels"]) and torch.equal(dataset.features, parts["features"])
    # Self-loops added once per node, the user's edges kept.
    assert dataset.graph.num_edges() == parts["graph"].num_edges() + 8
    assert data.fetch_dataset("test-ring") is None
    assert data.missing_features_mask(dataset.train_mask.numpy(), 100, 0).sum() == 4


# --- what a user's architecture may take: checkpointing, cluster batches ------------------

TINY_CSBM = "nodes=40,classes=2,avg_degree=3,feature_dim=4"


class CheckpointedMean(nn.Module):
    """A whole-model factory's network that keeps `checkpointable=True`'s contract: with
    `config.checkpoint` it recomputes each block but the last in the backward pass, and
    says so with a true `checkpoint`. Input Linear, `depth` MeanConv blocks (ELU between),
    output Linear."""

    blocks_run = 0  # every block's forward, recomputations included

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        width = cfg.heads * cfg.hidden
        self.checkpoint = cfg.checkpoint
        self.returns_attention = False
        self.parameter_groups = {"lin.weight": "fc"}
        self.input_fc = nn.Linear(cfg.in_feats, width)
        self.layers = nn.ModuleList(MeanConv(width, cfg.hidden, cfg.heads) for _ in range(cfg.depth))
        self.output_fc = nn.Linear(width, cfg.num_classes)

    def _block(self, i, graph, h):
        type(self).blocks_run += 1
        h = self.layers[i](graph, h).flatten(1)
        return torch.nn.functional.elu(h) if i < len(self.layers) - 1 else h

    def forward(self, graph, feat):
        h = self.input_fc(feat)
        recompute = self.checkpoint and self.training and torch.is_grad_enabled()
        for i in range(len(self.layers)):
            if recompute and i < len(self.layers) - 1:
                h = torch.utils.checkpoint.checkpoint(self._block, i, graph, h, use_reentrant=False)
            else:
                h = self._block(i, graph, h)
        return self.output_fc(h)

    def numbered_layers(self):
        last = len(self.layers) + 1
        return [
            numbering.NumberedLayer(0, "input", self.input_fc, None),
            *(numbering.NumberedLayer(i + 1, "attention", layer, None, graph_layer=True) for i, layer in enumerate(self.layers)),
            numbering.NumberedLayer(last, "output", self.output_fc, None),
        ]


@pytest.fixture
def capability_entries():
    """Whole-model architectures: one checkpointable, one not, one full-batch only."""
    names = ("test-checkpointed", "test-plain", "test-whole")
    for name, flags in zip(names, ({"checkpointable": True}, {}, {"full_batch_only": True})):
        registry.register_architecture(
            name, label=name, colour="#123456", model=CheckpointedMean, attention=False, norms=False, **flags
        )
    yield
    for name in names:
        registry.unregister("architecture", name)


def test_capability_defaults_keep_lipnorms_own_architectures_as_they_were():
    flags = {name: (entry.checkpointable, entry.full_batch_only) for name, entry in registry.ARCHITECTURES.items()}
    assert {name: flags[name] for name in ("gat", "gt", "gat-classic", "gcn")} == {
        "gat": (True, False), "gt": (True, False), "gat-classic": (False, True), "gcn": (True, False),
    }
    # A layer factory is stacked (and checkpointed) by lipnorm, a whole-model factory is not.
    layer = registry.register_architecture("test-layer", label="L", colour="#000000", layer=mean_conv)
    model = registry.register_architecture("test-model", label="M", colour="#000000", model=CheckpointedMean)
    try:
        assert (layer.checkpointable, model.checkpointable) == (True, False)
        assert (layer.full_batch_only, model.full_batch_only) == (False, False)
    finally:
        registry.unregister("architecture", "test-layer")
        registry.unregister("architecture", "test-model")


def train_capability_run(out, model, *flags):
    return cli.main([
        "train", "--dataset", "csbm", "--csbm", TINY_CSBM, "--model", model, "--depth", "3", "--heads", "2",
        "--hidden", "2", "--epochs", "2", "--seed", "1", "--data-root", str(out.parent / "datasets"),
        "--out", str(out), *flags,
    ])


def test_a_checkpointable_model_plugin_trains_with_checkpoint_to_the_same_numbers(capability_entries, tmp_path):
    runs = {}
    for name, flags in (("plain", ()), ("checkpointed", ("--checkpoint",))):
        before = CheckpointedMean.blocks_run
        assert train_capability_run(tmp_path / name, "test-checkpointed", *flags) == 0
        summary = json.loads((tmp_path / name / "summary.json").read_text())
        runs[name] = (summary, pd.read_parquet(tmp_path / name / "metrics.parquet"), CheckpointedMean.blocks_run - before)
    (plain, plain_metrics, plain_blocks), (checkpointed, metrics, blocks) = runs["plain"], runs["checkpointed"]
    assert (plain["config"]["checkpoint"], checkpointed["config"]["checkpoint"]) == (False, True)
    # Each of the 2 training steps recomputed the 2 blocks before the last: 4 more block runs.
    assert blocks - plain_blocks == 2 * 2
    assert metrics["train_loss"].tolist() == plain_metrics["train_loss"].tolist()
    assert checkpointed["test_metric"] == plain["test_metric"]


def test_a_checkpointable_model_plugin_is_planned_with_checkpointing(capability_entries):
    shipped = plan.load_coefficients()
    arxiv = registry.dataset("ogbn-arxiv").sizes
    settings = {"heads": 8, "hidden": 64, "epochs": 10}
    subdir = "ogbn-arxiv/test-checkpointed/L10/a1/r0/s0"
    limit = plan.plan_job("depth", subdir, settings, arxiv, shipped).mem_mb() - 1
    job = plan.plan_job("depth", subdir, settings, arxiv, shipped, max_mem_mb=limit)
    assert job.changed == {"checkpoint": True} and job.settings == {**settings, "checkpoint": True}
    assert job.mem_mb() <= limit
    # Not declared: not offered.
    with pytest.raises(ValueError, match=r"request x1.25 = as configured: \d+ MB \(cluster batches are not allowed"):
        plan.plan_job("depth", subdir.replace("test-checkpointed", "test-plain"), settings, arxiv, shipped, max_mem_mb=limit)


def refusal(capsys, out, model, *flags) -> str:
    """The error line of a `lipnorm train` the CLI refused before writing anything."""
    with pytest.raises(SystemExit) as exit_info:
        train_capability_run(out, model, *flags)
    assert exit_info.value.code == 2 and not out.exists()
    return capsys.readouterr().err.splitlines()[-1]


def test_a_model_plugin_not_declared_checkpointable_is_refused_checkpoint(capability_entries, tmp_path, capsys):
    checkpointed = [name for name, entry in registry.ARCHITECTURES.items() if entry.checkpointable]
    assert checkpointed[:3] == ["gat", "gt", "gcn"] and "test-checkpointed" in checkpointed
    assert "gat-classic" not in checkpointed and "test-plain" not in checkpointed
    assert refusal(capsys, tmp_path / "run", "test-plain", "--checkpoint") == (
        "lipnorm train: error: checkpoint=True: model 'test-plain' has no checkpointed blocks: architecture "
        f"'test-plain' is not registered with checkpointable=True (those that are: {', '.join(checkpointed)})"
    )


def test_a_checkpointable_model_plugin_whose_network_does_not_checkpoint_is_named(capability_entries):
    registry.unregister("architecture", "test-checkpointed")
    registry.register_architecture(
        "test-checkpointed", label="C", colour="#123456", model=lambda cfg: CheckpointedMean(dataclasses.replace(cfg, checkpoint=False)),
        attention=False, norms=False, checkpointable=True,
    )
    with pytest.raises(ValueError) as error:
        build_model(ModelConfig(model="test-checkpointed", in_feats=3, num_classes=2, checkpoint=True))
    assert str(error.value) == (
        "checkpoint=True: model 'test-checkpointed' has no checkpointed blocks: architecture 'test-checkpointed' "
        "is registered with checkpointable=True, but its model factory built a CheckpointedMean without a true "
        "`checkpoint` attribute (the network's word that it recomputes its blocks in the backward pass)"
    )


def test_a_full_batch_only_plugin_is_refused_cluster_batches(capability_entries, tmp_path, capsys):
    batched = [name for name, entry in registry.ARCHITECTURES.items() if not entry.full_batch_only]
    assert batched[:3] == ["gat", "gt", "gcn"] and "test-whole" not in batched and "gat-classic" not in batched
    assert refusal(capsys, tmp_path / "run", "test-whole", "--batching", "cluster") == (
        "lipnorm train: error: batching='cluster': model 'test-whole' is trained on the whole graph only: architecture "
        f"'test-whole' is registered with full_batch_only=True (cluster batches apply to {', '.join(batched)})"
    )


# --- plugins ------------------------------------------------------------------------------


def test_a_plugin_file_registers_once(tmp_path):
    plugin = tmp_path / "my_plugin.py"
    plugin.write_text(
        "from lipnorm.registry import register_norm\n"
        "register_norm('test-plugin-norm', label='P', colour='#000001', lip_colour='#000002',\n"
        "              factory='lipnorm.normalisations.pairnorm:pairnorm_layer')\n"
    )
    try:
        module = registry.load_plugin(str(plugin))
        assert registry.load_plugins([str(plugin), str(plugin)]) == [module, module]
        assert "gat-lip-test-plugin-norm" in model_config.MODEL_NAMES
    finally:
        registry.unregister("norm", "test-plugin-norm")


@pytest.mark.parametrize(
    "source, message",
    [
        (None, "plugin file '{path}' does not exist"),
        ("raise RuntimeError('no GPU here')", "plugin file '{path}' failed to import: RuntimeError: no GPU here"),
        ("import not_a_module_xyz", "plugin file '{path}' failed to import: ModuleNotFoundError: No module named 'not_a_module_xyz'"),
    ],
)
def test_a_plugin_that_fails_says_which_file_and_why(tmp_path, source, message):
    path = tmp_path / "broken.py"
    if source is not None:
        path.write_text(source)
    with pytest.raises(ValueError, match=re.escape(message.format(path=path))):
        registry.load_plugin(str(path))


def test_a_plugin_module_that_does_not_exist_is_named(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "--plugin", "not_a_module_xyz", "--out", "nowhere"])
    assert exit_info.value.code == 2
    assert "plugin module 'not_a_module_xyz' is neither a file nor an importable module" in capsys.readouterr().err


# --- the workflow's model axes --------------------------------------------------------------


def test_grid_axes_recompose_the_models():
    spec = {"models": ["gat", "gt-lip"], "attention_norms": ["none", "lip"]}
    assert grid.grid_models(spec) == ["gat", "gat-lip", "gt", "gt-lip"]
    spec = {"models": ["gat"], "attention_norms": ["none", "lip"], "norms": ["none", "pairnorm"]}
    assert grid.grid_models(spec) == ["gat", "gat-pairnorm", "gat-lip", "gat-lip-pairnorm"]
    assert grid.grid_models({"models": ["gat-lip", "gat-lip"]}) == ["gat-lip"]
    # A combination an architecture does not have is left out; a grid of nothing else is an error.
    spec = {"models": ["gat", "gat-classic", "gt"], "attention_norms": ["none", "lip"], "norms": ["none", "pairnorm"]}
    assert grid.grid_models(spec) == ["gat", "gat-pairnorm", "gat-lip", "gat-lip-pairnorm", "gat-classic", "gt", "gt-lip"]
    assert grid.left_out_models(spec) == [
        "gat-classic + pairnorm", "gat-classic + lip", "gat-classic + lip + pairnorm", "gt + pairnorm", "gt + lip + pairnorm"
    ]
    with pytest.raises(ValueError, match=re.escape("no model of the grid has these combinations: gat-classic + lip (")):
        grid.grid_models({"models": ["gat-classic"], "attention_norms": ["lip"]})
    with pytest.raises(ValueError, match="unknown norm 'batch'"):
        grid.grid_models({"models": ["gat"], "norms": ["batch"]})
    assert grid.option_args({"residual": True, "epochs": 3, "layer_stats": False}) == (
        "--residual --epochs 3 --no-layer-stats"
    )
    assert grid.plugin_args(["a.py", "my.mod"]) == "--plugin a.py --plugin my.mod"


# --- the worked example, as printed ---------------------------------------------------------


def printed_commands(path: Path) -> list[list[str]]:
    """The `lipnorm train` commands of the example's docstring."""
    return [shlex.split(line.strip()) for line in path.read_text().splitlines() if line.strip().startswith("lipnorm train")]


@pytest.mark.slow
def test_the_example_plugin_trains_as_printed(tmp_path, data_mirror):
    commands = printed_commands(EXAMPLE)
    assert len(commands) == 2
    (tmp_path / "examples").symlink_to(REPO / "examples")
    for command in commands:
        done = subprocess.run(
            [str(BIN / "lipnorm"), *command[1:]], cwd=tmp_path, capture_output=True, text=True,
            env={**os.environ, "LIPNORM_DATA_MIRROR": data_mirror},
        )
        assert done.returncode == 0, done.stderr
    first = json.loads((tmp_path / "runs" / "one" / "summary.json").read_text())
    second = json.loads((tmp_path / "runs" / "two" / "summary.json").read_text())
    assert (first["config"]["architecture"], first["config"]["norm"], first["config"]["dataset"]) == (
        "gatv2", "layernorm", "two-communities"
    )
    assert (second["config"]["model"], second["config"]["dataset"]) == ("sage", "cora")
    assert first["status"] == second["status"] == "ok"
    stats = pd.read_parquet(tmp_path / "runs" / "one" / "layerstats.parquet")
    assert "attention_entropy" in set(stats["metric"])  # GATv2Conv returns its attention
    groups = pd.read_parquet(tmp_path / "runs" / "one" / "gradnorms.parquet")
    assert {"attn", "norm"} <= set(groups.loc[groups["kind"] == "attention", "group"])


@pytest.mark.slow
def test_the_example_plugin_runs_through_the_workflow_to_a_table_and_a_figure(tmp_path):
    config = {
        "results": "results",
        "resources": "resources",
        "data": {"mirror": None},
        "plugins": [str(EXAMPLE)],
        "experiments": {
            "depth": {
                "grid": {
                    "datasets": ["two-communities"], "models": ["gatv2", "sage"],
                    "norms": ["none", "layernorm"], "depths": [1, 2], "alphas": [1],
                    "missing_rates": [0], "seeds": [0],
                },
                "train": {"epochs": 3, "heads": 2, "hidden": 4},
            },
        },
    }
    path = tmp_path / "plugin.yaml"
    path.write_text(yaml.safe_dump(config))
    cmd = [
        str(BIN / "snakemake"), "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path),
        "--workflow-profile", str(REPO / "profiles" / "default"), "--configfile", str(path), "--cores", "2",
    ]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    results = tmp_path / "results" / "depth"
    table = (results / "tables" / "depth_accuracy_table.tex").read_text()
    for text in ("GATv2", "GATv2+LayerNorm", "GraphSAGE", "GraphSAGE+LayerNorm", "Two communities"):
        assert text in table
    assert (results / "figures" / "depth_accuracy.pdf").stat().st_size > 0
    assert (results / "figures" / "depth_accuracy.png").stat().st_size > 0
    runs = pd.read_parquet(results / "aggregate" / "runs.parquet")
    assert sorted(zip(runs["architecture"], runs["norm"], runs["depth"])) == [
        (a, n, d) for a in ("gatv2", "sage") for n in ("layernorm", "none") for d in (1, 2)
    ]
    layerstats = pd.read_parquet(results / "aggregate" / "layerstats.parquet")
    assert set(layerstats["architecture"]) == {"gatv2", "sage"}


# --- the workflow's config: axes, residual, plugins (dry runs) -------------------------------


def dry_run(tmp_path, config: dict) -> subprocess.CompletedProcess:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    cmd = [
        str(BIN / "snakemake"), "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path),
        "--workflow-profile", str(REPO / "profiles" / "default"), "--configfile", str(path), "-n", "-p",
    ]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)


def axes_config(**grid_axes) -> dict:
    return {
        "results": "results", "resources": "resources", "data": {"mirror": None},
        "experiments": {"depth": {
            "grid": {"datasets": ["csbm"], "models": ["gat"], "depths": [2], "alphas": [1],
                     "missing_rates": [0], "seeds": [0], **grid_axes},
            "train": {"epochs": 2, "residual": True},
        }},
    }


def test_the_workflow_grid_crosses_the_model_axes_and_passes_residual(tmp_path):
    done = dry_run(tmp_path, axes_config(attention_norms=["none", "lip"], norms=["none", "pairnorm"]))
    assert done.returncode == 0, done.stdout + done.stderr
    commands = [line for line in done.stdout.splitlines() if "lipnorm train " in line]
    models_run = sorted(re.search(r"--model (\S+)", command)[1] for command in commands)
    assert models_run == ["gat", "gat-lip", "gat-lip-pairnorm", "gat-pairnorm"]
    assert all("--residual " in command for command in commands)


def test_a_grid_mixing_architectures_with_and_without_lip_runs_the_valid_ones_and_names_the_rest(tmp_path):
    done = dry_run(tmp_path, axes_config(models=["gat", "gat-classic"], attention_norms=["none", "lip"]))
    assert done.returncode == 0, done.stdout + done.stderr
    commands = [line for line in done.stdout.splitlines() if "lipnorm train " in line]
    assert sorted(re.search(r"--model (\S+)", command)[1] for command in commands) == ["gat", "gat-classic", "gat-lip"]
    left_out = [line for line in (done.stdout + done.stderr).splitlines() if "left out" in line]
    assert left_out == [
        "lipnorm: depth: 1 of 4 model combinations left out, which their architecture does not have: gat-classic + lip"
    ]


@pytest.mark.parametrize(
    "config, message",
    [
        (axes_config(norms=["batch"]), r"experiments.depth.grid.norms\[0\]: 'batch' is not allowed; allowed: none, pairnorm, batchnorm, dgn\n"),
        ({**axes_config(models=["gatv2"]), "plugins": []}, r"experiments.depth.grid.models\[0\]: 'gatv2' is not allowed; allowed: gat, .*\nplugins loaded: none"),
        # Relative to the config file's folder.
        ({**axes_config(), "plugins": ["no/such/plugin.py"]}, "plugin file '{tmp}/no/such/plugin.py' does not exist"),
    ],
)
def test_the_workflow_rejects_unregistered_names_and_missing_plugins(tmp_path, config, message):
    done = dry_run(tmp_path, config)
    assert done.returncode != 0
    message = message.replace("{tmp}", re.escape(str(tmp_path)))
    assert re.search(message, done.stdout + done.stderr), done.stdout + done.stderr


def test_a_plugin_in_the_workflow_config_makes_its_names_valid_and_reaches_every_job(tmp_path):
    config = axes_config(models=["gatv2", "sage"], norms=["none", "layernorm"])
    config["experiments"]["depth"]["grid"]["datasets"] = ["two-communities"]
    config["experiments"]["depth"]["train"] = {"epochs": 2}
    config["plugins"] = [str(EXAMPLE)]
    done = dry_run(tmp_path, config)
    assert done.returncode == 0, done.stdout + done.stderr
    # The train rule execs lipnorm train (so that a signal reaches it: lipnorm.train.run_state).
    jobs = [
        line.split("Shell command: ", 1)[1].removeprefix("exec ")
        for line in done.stdout.splitlines()
        if re.search(r"Shell command: (exec )?lipnorm ", line)
    ]
    kinds = {line.split()[1] for line in jobs}
    assert kinds == {"data", "train", "aggregate", "tables", "plots"}
    assert all(f"--plugin {EXAMPLE}" in line for line in jobs)
    # A plugin's dataset needs no download.
    assert "lipnorm data fetch" not in done.stdout


def test_a_config_of_experiments_alone_takes_results_resources_and_data_by_default(tmp_path):
    """A researcher's own config need not name the folders: results/ and resources/ of the
    folder the workflow runs in, the data mirror from LIPNORM_DATA_MIRROR or the internet."""
    config = axes_config()
    for key in ("results", "resources", "data"):
        del config[key]
    done = dry_run(tmp_path, config)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"--out results/depth/runs/csbm/gat/L2/a1/r0/s0\b", done.stdout), done.stdout


@pytest.mark.parametrize("old, new", sorted(registry.entries.MOVED_FACTORIES.items()))
def test_a_moved_factory_named_by_its_old_string_warns_naming_its_new_place(old, new):
    import importlib

    module_name, _, attribute = new.partition(":")
    moved = getattr(importlib.import_module(module_name), attribute)
    with pytest.warns(DeprecationWarning, match=f"factory '{old}' has moved: name '{new}'"):
        assert registry.resolve(old) is moved
    # the old place holds it no more: only the registry's string is kept working
    old_module, _, _ = old.partition(":")
    assert not hasattr(importlib.import_module(old_module), attribute)
