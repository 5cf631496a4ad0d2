"""A new built-in part is one module (issue 51, item 3): a toy dataset dropped into the
package of lipnorm's own datasets (`lipnorm.datasets`) and a toy experiment dropped
into `lipnorm.experiments`, each one file written here, are found the way lipnorm's own
are (`registry.import_parts`) and appear everywhere the registry feeds: the workflow
schema's enums and experiments, the CLI's help, labels, colours, the plan's sizes,
`lipnorm.data`'s sources and pinned sums, loading, tables. Each is removed again after
its test (`registry.unregister`, `experiments.unregister_experiment`).

The files are written to a temporary folder added to the package's `__path__`, so no
file is written inside `src/lipnorm`.
"""

from __future__ import annotations

import hashlib
import importlib
import sys
import textwrap
import zipfile
from pathlib import Path

import pandas as pd
import pytest
import yaml

import lipnorm.datasets
from lipnorm import cli, data, experiments, grid, registry
from lipnorm.data import DatasetError
from lipnorm.data.sources import PINNED_SHA256, SOURCES
from lipnorm.plan.sizes import dataset_sizes
from lipnorm.registry.catalogue import catalogue
from lipnorm.results import aggregate
from lipnorm.settings.constants import PLANETOID

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
DATASETS_ENUM = ("grid_experiment", "properties", "grid", "properties", "datasets", "items")

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


def drop_module(package, folder: Path, name: str, text: str, monkeypatch) -> tuple[str, ...]:
    """Write `text` as module `name` of `package` (in `folder`, added to its `__path__`)
    and discover the package's modules as lipnorm does; return what was imported."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text(textwrap.dedent(text))
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(folder)])
    importlib.invalidate_caches()
    return registry.import_parts(package.__name__)


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
