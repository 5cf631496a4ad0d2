"""A new built-in part is one module (issue 51, item 3): a toy architecture dropped into
the package of lipnorm's own architectures (`lipnorm.architectures`), a toy
normalisation into `lipnorm.normalisations`, a toy dataset into `lipnorm.datasets` and
a toy experiment into `lipnorm.experiments`, each one file written here, are found the
way lipnorm's own are (`registry.import_parts`) and appear everywhere the registry
feeds: the workflow schema's enums and experiments, model names, the CLI's help,
labels, colours, the plan's data, the docs' tables, `lipnorm.data`'s sources and pinned
sums, building and training a model, loading, tables. Each is removed again after its
test (`registry.unregister`, `experiments.unregister_experiment`). And every module of
those packages imports no torch, numpy or DGL, imported first in a fresh interpreter.

The files are written to a temporary folder added to the package's `__path__`, so no
file is written inside `src/lipnorm`.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import pkgutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pandas as pd
import pytest
import yaml

import lipnorm.architectures
import lipnorm.architectures.gat
import lipnorm.architectures.gcn
import lipnorm.datasets
import lipnorm.normalisations
import lipnorm.normalisations.dgn
from lipnorm import cli, data, experiments, grid, plan, registry
from lipnorm.data import DatasetError
from lipnorm.data.sources import PINNED_SHA256, SOURCES
from lipnorm.plan.sizes import dataset_sizes
from lipnorm.registry.catalogue import catalogue
from lipnorm.results import aggregate
from lipnorm.settings.constants import PLANETOID
from lipnorm.settings.model_config import ModelConfig

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
DATASETS_ENUM = ("grid_experiment", "properties", "grid", "properties", "datasets", "items")

MODELS_ENUM = ("grid_experiment", "properties", "grid", "properties", "models", "items")
NORMS_ENUM = ("grid_experiment", "properties", "grid", "properties", "norms", "items")

OWN_ARCHITECTURES = ("gat", "gt", "gat-classic", "gcn")
OWN_NORMS = ("pairnorm", "batchnorm", "dgn")
OWN_DATASETS = ("cora", "citeseer", "pubmed", "coauthor-cs", "ppi", "ogbn-arxiv", "csbm")
OWN_EXPERIMENTS = ("depth", "gradients", "alpha", "transformer", "lipschitz", "classic", "diagnose", "remedies")

# The toy dataset's one raw file: a ring of 6 nodes, "src dst" per line, then one
# "label" line per node.
RING = "0 1\n1 2\n2 3\n3 4\n4 5\n5 0\n" + "labels 0 1 0 1 0 1\n"

TOY_DATASET = '''
"""toy-ring: a built-in dataset in one module, as lipnorm's own are."""

from lipnorm.registry.entries import DatasetSizes, RawFiles
from lipnorm.registry.register import register_dataset


def read(folder):
    import torch

    from lipnorm.data.dataset import build_node_dataset

    lines = (folder / "ring.txt").read_text().splitlines()
    edges = [tuple(int(v) for v in line.split()) for line in lines if not line.startswith("labels")]
    labels = torch.tensor([int(v) for v in lines[-1].split()[1:]])
    n = len(labels)
    src, dst = torch.tensor([e[0] for e in edges]), torch.tensor([e[1] for e in edges])
    masks = (torch.arange(n) < 2, (torch.arange(n) >= 2) & (torch.arange(n) < 4), torch.arange(n) >= 4)
    return build_node_dataset(
        "toy-ring", torch.cat([src, dst]), torch.cat([dst, src]), n, torch.eye(n)[:, :3], labels,
        masks, 2, multilabel=False, metric="accuracy",
    )


register_dataset(
    "toy-ring", label="ToyRing", colour="#123abc",
    sizes=DatasetSizes(nodes=6, edges=12 + 6, features=3, classes=2, train_nodes=2),
    raw=RawFiles("dgl", "toy_ring", ("ring.txt",), {{"ring.txt": "{digest}"}}),
    read=read,
)
'''

TOY_EXPERIMENT = '''
"""toy-count: a built-in experiment in one module (its builders need no lipnorm helper)."""

from lipnorm.experiments.registry import Output, register_experiment


def count_table(runs):
    import numpy as np

    text = runs.groupby("model").size().astype(str).to_frame("Runs")
    text.index.name = "Model"
    return text, np.zeros(text.shape, dtype=bool)


def count_figure(runs):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    counts = runs.groupby("model").size()
    ax.bar(list(counts.index), list(counts.values))
    return fig


def count_section(folder, runs):
    return ["Runs per model."]


register_experiment(
    "toy-count",
    title="runs per model",
    tables=(Output("toy_count_table", "lipnorm.experiments.toy_count:count_table"),),
    figures=(Output("toy_count_figure", "lipnorm.experiments.toy_count:count_figure"),),
    section="lipnorm.experiments.toy_count:count_section",
)
'''


TOY_ARCHITECTURE = '''
"""toy-graph: a built-in architecture in one module, built from an existing layer (DGL's
GraphConv), imported inside its factory as lipnorm's own are."""

from lipnorm.registry.register import register_architecture


def graph_layer(in_feats, out_feats, heads, *, attention_norm, residual, **options):
    from dgl.nn import GraphConv

    return GraphConv(in_feats, heads * out_feats, allow_zero_in_degree=True)


register_architecture(
    "toy-graph", label="ToyGraph", colour="#345def", layer=graph_layer, attention=False,
    dropout=(0.5, 0.0), projections=2,
)
'''

TOY_NORM = '''
"""toy-scale: a built-in normalisation in one module (a learnt gain on each feature)."""

from lipnorm.registry.register import register_norm


def scale_layer(width, config):
    import torch

    class Scale(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gain = torch.nn.Parameter(torch.full((width,), 2.0))

        def forward(self, graph, h):
            return (h.reshape(h.shape[0], width) * self.gain).reshape(h.shape)

    return Scale()


register_norm("toy-scale", label="ToyScale", colour="#abc123", lip_colour="#def456", factory=scale_layer)
'''


def drop_module(package, folder: Path, name: str, text: str, monkeypatch) -> tuple[str, ...]:
    """Write `text` as module `name` of `package` (in `folder`, added to its `__path__`)
    and discover the package's modules as lipnorm does; return what was imported."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text(textwrap.dedent(text))
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(folder)])
    importlib.invalidate_caches()
    return registry.import_parts(package.__name__)


@pytest.fixture
def toy_architecture(tmp_path, monkeypatch):
    imported = drop_module(
        lipnorm.architectures, tmp_path / "architectures", "toy_graph", TOY_ARCHITECTURE, monkeypatch
    )
    yield imported
    registry.unregister("architecture", "toy-graph")
    sys.modules.pop("lipnorm.architectures.toy_graph", None)


@pytest.fixture
def toy_norm(tmp_path, monkeypatch):
    imported = drop_module(lipnorm.normalisations, tmp_path / "normalisations", "toy_scale", TOY_NORM, monkeypatch)
    yield imported
    registry.unregister("norm", "toy-scale")
    sys.modules.pop("lipnorm.normalisations.toy_scale", None)


@pytest.fixture
def toy_dataset(tmp_path, monkeypatch):
    digest = hashlib.sha256(RING.encode()).hexdigest()
    imported = drop_module(
        lipnorm.datasets, tmp_path / "parts", "toy_ring", TOY_DATASET.format(digest=digest), monkeypatch
    )
    yield imported
    registry.unregister("dataset", "toy-ring")
    sys.modules.pop("lipnorm.datasets.toy_ring", None)


@pytest.fixture
def toy_experiment(tmp_path, monkeypatch):
    imported = drop_module(experiments, tmp_path / "parts", "toy_count", TOY_EXPERIMENT, monkeypatch)
    yield imported
    experiments.unregister_experiment("toy-count")
    sys.modules.pop("lipnorm.experiments.toy_count", None)


@pytest.fixture
def ring_mirror(tmp_path):
    """A mirror holding DGL's archive path for the toy: dataset/toy_ring.zip."""
    mirror = tmp_path / "mirror"
    (mirror / "dataset").mkdir(parents=True)
    with zipfile.ZipFile(mirror / "dataset" / "toy_ring.zip", "w") as archive:
        archive.writestr("ring.txt", RING)
    return mirror


def help_text(capsys, monkeypatch, *args) -> str:
    monkeypatch.setenv("COLUMNS", "10000")  # argparse wraps at hyphens otherwise
    with pytest.raises(SystemExit):
        cli.main([*args, "--help"])
    return " ".join(capsys.readouterr().out.split())


def schema_enum(path: tuple[str, ...]) -> list[str]:
    node = grid.schema_with_registry(yaml.safe_load(SCHEMA.read_text()))["$defs"]
    for key in path:
        node = node[key]
    return node["enum"]


def tiny_graph():
    """A ring of 5 nodes, both directions and a self-loop each, and 3 features a node."""
    import dgl
    import torch

    ring = dgl.graph(([0, 1, 2, 3, 4], [1, 2, 3, 4, 0]), num_nodes=5)
    return dgl.add_self_loop(dgl.to_bidirected(ring)), torch.eye(5)[:, :3] + 0.5


def test_lipnorms_own_architectures_and_normalisations_are_found_in_their_order():
    assert registry.import_parts("lipnorm.architectures") == tuple(
        f"lipnorm.architectures.{module}" for module in ("gat", "gt", "gat_classic", "gcn")
    )
    assert registry.import_parts("lipnorm.normalisations") == tuple(
        f"lipnorm.normalisations.{module}" for module in ("pairnorm", "batchnorm", "dgn")
    )
    assert registry.architecture_names() == OWN_ARCHITECTURES
    assert registry.norm_names() == ("none", *OWN_NORMS)
    # Each registers its module's own factory and checks.
    assert registry.architecture("gcn").layer is lipnorm.architectures.gcn.gcn_layer
    assert registry.architecture("gat").seed_batch_check is lipnorm.architectures.gat.literature_gat_seed_batch_check
    assert registry.norm("dgn").factory is lipnorm.normalisations.dgn.dgn_layer
    assert [registry.colour("architecture", name) for name in OWN_ARCHITECTURES] == [
        "#0173b2", "#cc78bc", "#949494", "#000000"
    ]
    assert [(registry.colour("norm", name), registry.model_colour(f"gat-lip-{name}")) for name in OWN_NORMS] == [
        ("#029e73", "#d55e00"), ("#56b4e9", "#0072b2"), ("#fbafe4", "#cc79a7")
    ]


def package_modules() -> list[str]:
    return [
        f"{package.__name__}.{info.name}"
        for package in (lipnorm.architectures, lipnorm.normalisations, lipnorm.datasets)
        for info in pkgutil.iter_modules(package.__path__)
    ]


@pytest.mark.parametrize("module", package_modules())
def test_each_built_in_module_imported_first_imports_no_torch_and_registers_every_part(module):
    """Imported first in a fresh interpreter (so also free of import cycles): the registry
    it imports registers every built-in part, and nothing loads torch, numpy or DGL."""
    code = (
        f"import sys, json, {module}; from lipnorm import registry; "
        "print(json.dumps([sorted({'torch', 'dgl', 'numpy'} & set(sys.modules)), registry.architecture_names(), "
        "registry.norm_names(), registry.dataset_names()]))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert json.loads(done.stdout) == [[], list(OWN_ARCHITECTURES), ["none", *OWN_NORMS], list(OWN_DATASETS)]


def test_an_architecture_and_a_normalisation_dropped_into_their_packages_are_everywhere(
    toy_architecture, toy_norm, capsys, monkeypatch
):
    assert toy_architecture[-1] == "lipnorm.architectures.toy_graph"
    assert toy_norm[-1] == "lipnorm.normalisations.toy_scale"
    assert registry.architecture_names() == (*OWN_ARCHITECTURES, "toy-graph")
    assert registry.norm_names() == ("none", *OWN_NORMS, "toy-scale")
    # Model names: composed with lipnorm's own where the capabilities allow.
    names = registry.model_names()
    assert names[-5:] == ("toy-graph", "toy-graph-pairnorm", "toy-graph-batchnorm", "toy-graph-dgn",
                          "toy-graph-toy-scale")
    assert {"gat-toy-scale", "gat-lip-toy-scale", "gcn-toy-scale"} <= set(names)
    assert not {"toy-graph-lip", "gt-toy-scale", "gat-classic-toy-scale"} & set(names)
    assert registry.parse_model("gat-lip-toy-scale") == ("gat", "lip", "toy-scale")
    # Labels and colours.
    assert registry.label("architecture", "toy-graph") == aggregate.label("architecture", "toy-graph") == "ToyGraph"
    assert registry.label("norm", "toy-scale") == "ToyScale"
    assert registry.label("model", "toy-graph-toy-scale") == "ToyGraph+ToyScale"
    assert registry.label("model", "gat-lip-toy-scale") == "GAT-Lip+ToyScale"
    assert registry.palette("architecture")["toy-graph"] == registry.model_colour("toy-graph") == "#345def"
    assert registry.palette("norm")["toy-scale"] == registry.model_colour("toy-graph-toy-scale") == "#abc123"
    assert registry.palette("model")["gat-lip-toy-scale"] == "#def456"
    figure = registry.figure_palette(["gat-toy-scale", "toy-graph-toy-scale", "toy-graph"])
    assert figure["gat-toy-scale"] == "#abc123" and figure["toy-graph"] == "#345def"
    assert figure["toy-graph-toy-scale"] not in ("#abc123", "#345def")  # a spare: its own is taken
    # The workflow schema's enums.
    assert schema_enum(MODELS_ENUM) == list(names)
    assert schema_enum(NORMS_ENUM) == ["none", *OWN_NORMS, "toy-scale"]
    # The CLI's help.
    train_help = help_text(capsys, monkeypatch, "train")
    assert f"{', '.join(names)} (or a plugin's)" in train_help
    assert f"{', '.join(OWN_ARCHITECTURES)}, toy-graph (or a plugin's)" in train_help
    assert f"none, {', '.join(OWN_NORMS)}, toy-scale (or a plugin's)" in train_help
    # The plan's data: the projections a layer computes.
    assert plan.projections_of("toy-graph-toy-scale") == 2 and plan.projections_of("gat-toy-scale") == 1
    row = {"nodes": 6, "edges": 18, "features": 3, "classes": 2, "depth": 2, "heads": 2, "hidden": 3,
           "checkpoint": False, "model": "toy-graph"}
    assert plan.shape_of(row).projections == 2
    # The docs' tables (docs/models.md, lipnorm.registry.catalogue).
    architectures = catalogue("architectures")
    assert (
        "| `toy-graph` | ToyGraph | `lipnorm.architectures.toy_graph:graph_layer` | no | yes | 0.5 / 0 | yes | yes "
        "| no | `toy-graph`, `toy-graph-pairnorm`, `toy-graph-batchnorm`, `toy-graph-dgn`, `toy-graph-toy-scale` |"
    ) in architectures
    assert "`gat-toy-scale`, `gat-lip-toy-scale` |" in architectures
    assert "| `toy-scale` | ToyScale | `lipnorm.normalisations.toy_scale:scale_layer` |" in catalogue("norms")
    # GAT's seed batch has no form of it: the torch-free check says so.
    config = ModelConfig(model="gat-toy-scale", in_feats=3, num_classes=2, recipe="dgn").resolved()
    assert lipnorm.architectures.gat.literature_gat_seed_batch_check(config) == (
        "its normalisation 'toy-scale' has no seed-batched form"
    )


@pytest.mark.parametrize("model", ["toy-graph-toy-scale", "toy-graph", "gat-lip-toy-scale", "gcn-toy-scale"])
def test_a_dropped_architecture_and_normalisation_build_models_that_run(toy_architecture, toy_norm, model):
    import torch
    from dgl.nn import GraphConv

    from lipnorm.nn.models.build import build_model

    torch.manual_seed(0)
    net = build_model(ModelConfig(model=model, in_feats=3, num_classes=4, depth=2, heads=2, hidden=3)).eval()
    graph, feat = tiny_graph()
    logits = net(graph, feat)
    assert logits.shape == (5, 4) and torch.isfinite(logits).all()
    architecture, _, norm = registry.parse_model(model)
    if architecture == "toy-graph":
        assert [type(layer) for layer in net.layers] == [GraphConv, GraphConv]
        assert [layer.weight.shape for layer in net.layers] == [(6, 6), (6, 6)]  # width heads * hidden
    norms = getattr(net, "norms", None)
    if norm == "toy-scale":
        assert [type(module).__name__ for module in norms] == ["Scale", "Scale"]
        assert all(torch.equal(module.gain, torch.full((6,), 2.0)) for module in norms)
    else:
        assert net.norm_attribute is None


def test_a_dropped_architecture_and_normalisation_train_through_lipnorm_train(toy_architecture, toy_norm, tmp_path):
    out = tmp_path / "run"
    assert cli.main([
        "train", "--dataset", "csbm", "--csbm", "nodes=30,classes=2,feature_dim=4", "--model", "toy-graph-toy-scale",
        "--depth", "2", "--heads", "2", "--hidden", "3", "--epochs", "2", "--out", str(out),
    ]) == 0
    config = json.loads((out / "summary.json").read_text())["config"]
    assert (config["model"], config["architecture"], config["norm"], config["feat_drop"]) == (
        "toy-graph-toy-scale", "toy-graph", "toy-scale", 0.5
    )


def test_a_dropped_architecture_and_normalisation_are_gone_after_unregister(tmp_path, monkeypatch):
    drop_module(lipnorm.architectures, tmp_path / "architectures", "toy_graph", TOY_ARCHITECTURE, monkeypatch)
    drop_module(lipnorm.normalisations, tmp_path / "normalisations", "toy_scale", TOY_NORM, monkeypatch)
    registry.unregister("norm", "toy-scale")
    registry.unregister("architecture", "toy-graph")
    sys.modules.pop("lipnorm.architectures.toy_graph")
    sys.modules.pop("lipnorm.normalisations.toy_scale")
    assert registry.architecture_names() == OWN_ARCHITECTURES
    assert registry.norm_names() == ("none", *OWN_NORMS)
    assert not any("toy" in name for name in registry.model_names())


def test_lipnorms_own_datasets_and_experiments_are_found_in_their_order():
    assert registry.BUILTIN_DATASETS == OWN_DATASETS == data.DATASETS
    assert registry.dataset_names() == OWN_DATASETS
    assert registry.import_parts("lipnorm.datasets") == tuple(
        f"lipnorm.datasets.{module}" for module in ("planetoid", "coauthor_cs", "ppi", "ogbn_arxiv", "csbm")
    )
    assert experiments.names() == OWN_EXPERIMENTS
    # The datasets whose loader normalises the features are those that take raw_features.
    assert tuple(name for name in OWN_DATASETS if "raw_features" in registry.dataset(name).options) == PLANETOID
    assert [name for name in OWN_DATASETS if registry.dataset(name).raw is None] == ["csbm"]
    assert list(SOURCES) == list(OWN_DATASETS[:-1]) and list(PINNED_SHA256) == ["cora", "citeseer"]


def test_a_dataset_module_dropped_into_the_package_is_everywhere(toy_dataset, capsys, monkeypatch):
    assert toy_dataset[-1] == "lipnorm.datasets.toy_ring"
    assert registry.dataset_names() == (*OWN_DATASETS, "toy-ring")
    assert registry.BUILTIN_DATASETS == OWN_DATASETS  # lipnorm's own: before any test or plugin
    assert registry.label("dataset", "toy-ring") == aggregate.label("dataset", "toy-ring") == "ToyRing"
    assert registry.palette("dataset")["toy-ring"] == "#123abc"
    derived = grid.schema_with_registry(yaml.safe_load(SCHEMA.read_text()))
    node = derived["$defs"]
    for key in DATASETS_ENUM:
        node = node[key]
    assert node["enum"] == [*OWN_DATASETS, "toy-ring"]
    assert f"{', '.join(OWN_DATASETS)}, toy-ring (or a plugin's)" in help_text(capsys, monkeypatch, "train")
    assert f"{', '.join(OWN_DATASETS)}, toy-ring (or a plugin's)" in help_text(capsys, monkeypatch, "data", "info")
    assert dataset_sizes("toy-ring") == registry.DatasetSizes(nodes=6, edges=18, features=3, classes=2, train_nodes=2)
    assert SOURCES["toy-ring"].required == ("ring.txt",) and SOURCES["toy-ring"].base_name == "toy_ring"
    assert PINNED_SHA256["toy-ring"] == {"ring.txt": hashlib.sha256(RING.encode()).hexdigest()}
    # the docs' list (docs/datasets.md's table, lipnorm.registry.catalogue)
    assert "| `toy-ring` | ToyRing | 6 | 18 | 3 | 2 | raw files, verified | – |" in catalogue("datasets")


def test_a_dropped_dataset_is_fetched_verified_and_loaded_by_its_reader(toy_dataset, ring_mirror, tmp_path, capsys):
    root = tmp_path / "root"
    folder = data.fetch_dataset("toy-ring", root, ring_mirror)
    assert folder == root / SOURCES["toy-ring"].folder_name() and (folder / "ring.txt").read_text() == RING
    loaded = data.load_dataset("toy-ring", root, ring_mirror)
    assert loaded.graph.num_nodes() == 6 and loaded.graph.num_edges() == 18  # both directions, one self-loop each
    assert loaded.labels.tolist() == [0, 1, 0, 1, 0, 1]
    assert loaded.train_mask.tolist() == [True, True, False, False, False, False]
    assert cli.main(["data", "info", "toy-ring", "--root", str(root), "--mirror", str(ring_mirror)]) == 0
    assert "nodes       6" in capsys.readouterr().out
    with pytest.raises(ValueError, match=r"raw_features=True applies to the planetoid datasets \(cora, citeseer, "
                                         r"pubmed\), .*; 'toy-ring' is loaded"):
        data.load_dataset("toy-ring", root, ring_mirror, raw_features=True)
    with pytest.raises(ValueError, match="csbm parameters were given for dataset 'toy-ring'"):
        data.load_dataset("toy-ring", root, ring_mirror, csbm="nodes=30")
    # The sums the module pins are checked: an edited raw file is refused.
    (folder / "ring.txt").write_text(RING.replace("5 0", "5 1"))
    with pytest.raises(DatasetError, match=f"checksum mismatch for {folder / 'ring.txt'}"):
        data.load_dataset("toy-ring", root, ring_mirror)


def test_a_dropped_dataset_is_gone_after_unregister(tmp_path, monkeypatch):
    digest = hashlib.sha256(RING.encode()).hexdigest()
    drop_module(lipnorm.datasets, tmp_path / "parts", "toy_ring", TOY_DATASET.format(digest=digest), monkeypatch)
    registry.unregister("dataset", "toy-ring")
    sys.modules.pop("lipnorm.datasets.toy_ring")
    assert registry.dataset_names() == OWN_DATASETS
    assert "toy-ring" not in SOURCES and "toy-ring" not in PINNED_SHA256


def test_an_experiment_module_dropped_into_the_package_is_everywhere(toy_experiment, tmp_path, capsys, monkeypatch):
    assert toy_experiment[-1] == "lipnorm.experiments.toy_count"
    assert experiments.names() == (*OWN_EXPERIMENTS, "toy-count")
    assert experiments.tables()["toy-count"] == ["toy_count_table"]
    assert experiments.figures()["toy-count"] == ["toy_count_figure"]
    derived = grid.schema_with_registry(yaml.safe_load(SCHEMA.read_text()))
    assert derived["properties"]["experiments"]["properties"]["toy-count"] == {"$ref": "#/$defs/grid_experiment"}
    for command in ("tables", "plots"):
        assert f"{', '.join(OWN_EXPERIMENTS)}, toy-count (or a plugin's" in help_text(capsys, monkeypatch, command)
    aggregate_dir, out = tmp_path / "aggregate", tmp_path / "tables"
    aggregate_dir.mkdir()
    pd.DataFrame({"model": ["gat", "gat", "gat-lip"], "seed": [0, 1, 0]}).to_parquet(aggregate_dir / "runs.parquet")
    assert cli.main(["tables", "toy-count", "--aggregate-dir", str(aggregate_dir), "--out-dir", str(out)]) == 0
    table = (out / "toy_count_table.tex").read_text()
    assert "gat & 2" in table and "gat-lip & 1" in table
