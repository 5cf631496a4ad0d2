"""Plugins that explain themselves (issue 37, item 2): a wrapped DGL layer's parameters
placed or the fix shown, a grid that leaves out the combinations an architecture does
not have, an unknown name that points at plugins, `--help` after `--plugin`, the
subcommand's usage on an error, and one line per config problem."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import dgl
import pytest
import torch
from torch import nn

from lipnorm import cli, registry
from lipnorm.nn.models.build import build_model
from lipnorm.nn.models.numbering import gradient_groups
from lipnorm.settings.model_config import ModelConfig


# --- a wrapped DGL layer's gradient groups ------------------------------------------------


def gin_layer(in_feats, out_feats, heads, *, learn_eps=False, **options):
    """dgl.nn.GINConv around a two-layer MLP, heads x out_feats wide."""
    mlp = nn.Sequential(nn.Linear(in_feats, heads * out_feats), nn.ReLU(), nn.Linear(heads * out_feats, heads * out_feats))
    return dgl.nn.GINConv(mlp, "sum", learn_eps=learn_eps)


class Scaled(nn.Module):
    """A Linear times a learnable scale: `scale` is no Linear's parameter."""

    def __init__(self, width):
        super().__init__()
        self.linear = nn.Linear(width, width)
        self.scale = nn.Parameter(torch.ones(()))

    def forward(self, h):
        return self.scale * self.linear(h)


@pytest.fixture
def gin():
    registry.register_architecture("test-gin", label="GIN", colour="#123456", layer=gin_layer, attention=False)
    yield
    registry.unregister("architecture", "test-gin")


def test_a_wrapped_dgl_layers_mlp_weights_are_fc_and_biases_bias(gin):
    net = build_model(ModelConfig(model="test-gin", in_feats=3, num_classes=2, depth=2, heads=1, hidden=4))
    groups = {(index, group): {id(p) for p in params} for index, _, group, params in gradient_groups(net)}
    for index, layer in enumerate(net.layers, start=1):
        mlp = layer.apply_func
        assert groups[index, "fc"] == {id(mlp[0].weight), id(mlp[2].weight)}
        assert groups[index, "bias"] == {id(mlp[0].bias), id(mlp[2].bias)}
        assert groups[index, "all"] == {id(p) for p in layer.parameters()}


@pytest.mark.parametrize(
    "layer, fix",
    [
        # GINConv's learnable epsilon: a parameter of the layer itself, placed by its name.
        (lambda i, o, h, **options: gin_layer(i, o, h, learn_eps=True), "parameter_groups={'eps': GROUP}"),
        # A parameter inside a submodule: placed by the submodule's prefix.
        (lambda i, o, h, **options: dgl.nn.GINConv(Scaled(i), "sum"), "parameter_groups={'apply_func.': GROUP}"),
    ],
)
def test_a_parameter_no_rule_places_is_an_error_showing_the_registration_that_does(layer, fix):
    registry.register_architecture("test-gin", label="GIN", colour="#123456", layer=layer, attention=False)
    try:
        net = build_model(ModelConfig(model="test-gin", in_feats=3, num_classes=2, depth=1, heads=1, hidden=3))
        name = "eps" if "eps" in fix else "apply_func.scale"
        message = (
            f"parameter '{name}' has no gradient group (lipnorm's rules place res_fc.*, fc_skip.*, attn_l, "
            "attn_r, *bias, fc*.weight and any nn.Linear's weight); place it when registering: "
            f"register_architecture('test-gin', ..., {fix}), GROUP one of fc, attn, bias, res, norm (docs/models.md)"
        )
        with pytest.raises(ValueError, match=re.escape(message)):
            gradient_groups(net)
    finally:
        registry.unregister("architecture", "test-gin")


# --- an unknown name points at plugins ---------------------------------------------------------

HINT = "(a plugin's names need --plugin PATH_OR_MODULE, or plugins: [PATH_OR_MODULE] in the workflow config)"


@pytest.fixture
def no_plugins(monkeypatch):
    """No plugin loaded (others' tests load some), restored afterwards."""
    from lipnorm.registry import plugins

    monkeypatch.setattr(plugins, "_LOADED_PLUGINS", {})


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: registry.parse_model("gin"), "unknown model 'gin'; allowed: gat, gat-lip,"),
        (lambda: registry.architecture("gin"), "unknown architecture 'gin'; allowed: gat, gt, gat-classic, gcn"),
        (lambda: registry.norm("nodenorm"), "unknown norm 'nodenorm'; allowed: none, pairnorm, batchnorm, dgn"),
        (lambda: registry.dataset("karate"), "unknown dataset 'karate'; allowed: cora, citeseer,"),
    ],
)
def test_an_unknown_name_says_no_plugin_is_loaded_and_how_to_load_one(no_plugins, call, message):
    with pytest.raises(ValueError) as error:
        call()
    assert str(error.value).startswith(message)
    assert str(error.value).endswith(f"; plugins loaded: none {HINT}")


def test_an_unknown_name_names_the_plugins_that_were_loaded(no_plugins, tmp_path, capsys):
    plugin = tmp_path / "empty_plugin.py"
    plugin.write_text("# registers nothing\n")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["data", "info", "karate", "--plugin", str(plugin)])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "lipnorm data info: error: unknown dataset 'karate'; allowed: "
        f"{', '.join(registry.dataset_names())}; plugins loaded: {plugin} {HINT}"
    )


def test_an_attention_norm_is_no_plugins_business():
    with pytest.raises(ValueError) as error:
        registry.label("attention_norm", "lipschitz")
    assert str(error.value) == "unknown attention_norm 'lipschitz'; allowed: none, lip"


# --- the command line: --help after --plugin, the subcommand's usage -----------------------------

# Names only: no test here builds the model or loads the data.
GIN_PLUGIN = """
from lipnorm.registry import register_architecture, register_dataset

register_architecture("test-cli-gin", label="GIN", colour="#123456", layer="dgl.nn:GINConv", attention=False)
register_dataset("test-cli-karate", label="Karate", colour="#654321", load="networkx:karate_club_graph")
"""


@pytest.fixture
def gin_plugin(tmp_path):
    path = tmp_path / "gin_plugin.py"
    path.write_text(GIN_PLUGIN)
    yield path
    for kind, name in (("architecture", "test-cli-gin"), ("dataset", "test-cli-karate")):
        if name in registry.names(kind):
            registry.unregister(kind, name)


def test_help_after_plugin_lists_the_plugins_names(gin_plugin, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "10000")  # argparse wraps at hyphens otherwise
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "--plugin", str(gin_plugin), "--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert f"--dataset DATASET {', '.join(registry.dataset_names())} (or a plugin's)" in text
    assert registry.dataset_names()[-1] == "test-cli-karate"
    assert "--architecture ARCHITECTURE instead of the model's: gat, gt, gat-classic, gcn, test-cli-gin (or" in text
    assert "test-cli-gin-pairnorm" in text


def test_help_with_a_plugin_that_fails_says_so(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", f"--plugin={tmp_path / 'missing.py'}", "--help"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == f"lipnorm: error: plugin file '{tmp_path / 'missing.py'}' does not exist\n"


def test_the_cli_imports_no_torch_without_a_plugin():
    code = (
        "import sys, contextlib, io\n"
        "from lipnorm import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try: cli.main(['train', '--help'])\n"
        "    except SystemExit: pass\n"
        "print('torch' in sys.modules, 'dgl' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False False"


def test_a_commands_error_prints_that_commands_usage(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "--plugin", str(tmp_path / "missing.py"), "--out", str(tmp_path / "run")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: lipnorm train [-h] [--plugin PATH_OR_MODULE]")
    assert err.endswith(f"lipnorm train: error: plugin file '{tmp_path / 'missing.py'}' does not exist\n")


# --- a graph from another library as a dataset: examples/plugins/karate.py ----------------------

KARATE = Path(__file__).resolve().parents[2] / "examples" / "plugins" / "karate.py"


@pytest.fixture
def karate(monkeypatch):
    """The karate example loaded in this process, and removed afterwards."""
    from lipnorm.registry import plugins

    monkeypatch.setattr(plugins, "_LOADED_PLUGINS", {})
    registry.load_plugin(str(KARATE))
    yield
    registry.unregister("architecture", "gin")
    registry.unregister("dataset", "karate-club")


def test_the_karate_club_from_networkx_loads_as_a_node_dataset(karate, tmp_path):
    import networkx

    from lipnorm.data import load_dataset

    club = networkx.karate_club_graph()
    dataset = load_dataset("karate-club", root=tmp_path)
    assert dataset.graph.num_nodes() == 34 and dataset.graph.num_edges() == 2 * club.number_of_edges() + 34
    src, dst = dataset.graph.edges()
    edges = {(int(u), int(v)) for u, v in zip(src, dst) if u != v}
    assert edges == {(u, v) for u, v in club.edges()} | {(v, u) for u, v in club.edges()}
    assert dataset.labels.tolist() == [int(club.nodes[n]["club"] == "Officer") for n in range(34)]
    assert torch.nonzero(dataset.train_mask).flatten().tolist() == [0, 33]
    assert int(dataset.val_mask.sum()) == 8 and int(dataset.test_mask.sum()) == 24
    assert not (dataset.train_mask & dataset.val_mask).any() and not (dataset.val_mask & dataset.test_mask).any()
    # The sizes the plugin declares for `lipnorm plan` are the loaded dataset's.
    sizes = registry.dataset("karate-club").sizes
    assert (sizes.nodes, sizes.edges, sizes.features, sizes.classes, sizes.train_nodes) == (
        34, dataset.graph.num_edges(), dataset.features.shape[1], dataset.num_classes, 2
    )


def test_the_karate_example_trains_gin_as_printed(tmp_path):
    import json

    import pandas as pd

    (command,) = [line.split() for line in KARATE.read_text().splitlines() if line.strip().startswith("lipnorm train")]
    (tmp_path / "examples").symlink_to(KARATE.parents[1])
    lipnorm = Path(sys.executable).parent / "lipnorm"
    # The lipnorm under test (this checkout's src), whatever the working directory.
    env = {**os.environ, "PYTHONPATH": str(Path(registry.__file__).resolve().parents[2])}
    done = subprocess.run([str(lipnorm), *command[1:]], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "runs" / "karate" / "summary.json").read_text())
    assert (summary["status"], summary["config"]["architecture"], summary["config"]["dataset"]) == (
        "ok", "gin", "karate-club"
    )
    groups = pd.read_parquet(tmp_path / "runs" / "karate" / "gradnorms.parquet")
    # GINConv's MLP: its Linears' weights fc, their biases bias; nothing declared.
    assert set(groups.loc[groups["kind"] == "attention", "group"]) == {"fc", "bias", "all"}
