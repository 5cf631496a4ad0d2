"""Cora and CiteSeer from the mirror, loaded through DGL with the network unreachable."""

from __future__ import annotations

import hashlib
import pickle
import warnings

import numpy as np
import pytest

from lipnorm.data.sources import PINNED_SHA256, SOURCES

# (nodes, DGL's edge count, features, classes, train, val, test): the published counts.
PUBLISHED = {
    "cora": (2708, 10556, 1433, 7, 140, 500, 1000),
    "citeseer": (3327, 9228, 3703, 6, 120, 500, 1000),
}


def _raw_edges(folder, dgl_name):
    """Directed edge set of the raw planetoid adjacency dict, read independently of DGL."""
    with open(folder / f"ind.{dgl_name}.graph", "rb") as handle:
        adjacency = pickle.load(handle, encoding="latin1")
    return {(u, v) for u, nbrs in adjacency.items() for v in nbrs} | {
        (v, u) for u, nbrs in adjacency.items() for v in nbrs
    }


@pytest.mark.parametrize("name", ["cora", "citeseer"])
def test_planetoid_counts_from_mirror_without_network(name, offline_loader, planetoid_root):
    ds = offline_loader(name)
    nodes, dgl_edges, feats, classes, train, val, test = PUBLISHED[name]
    folder = planetoid_root / SOURCES[name].folder_name()
    raw = _raw_edges(folder, SOURCES[name].base_name)
    raw_self_loops = sum(u == v for u, v in raw)
    # DGL's count keeps the raw self-loops (CiteSeer has 124, Cora none); ours drops
    # them and adds exactly one per node.
    assert len(raw) == dgl_edges
    assert raw_self_loops == {"cora": 0, "citeseer": 124}[name]
    assert ds.graph.num_nodes() == nodes
    assert ds.graph.num_edges() == dgl_edges - raw_self_loops + nodes
    src, dst = (t.numpy() for t in ds.graph.edges())
    assert set(zip(src[src != dst].tolist(), dst[src != dst].tolist())) == {
        (u, v) for u, v in raw if u != v
    }
    assert np.array_equal(np.sort(src[src == dst]), np.arange(nodes))

    assert tuple(ds.features.shape) == (nodes, feats) and str(ds.features.dtype) == "torch.float32"
    assert ds.num_classes == classes and not ds.multilabel and ds.metric == "accuracy"
    assert str(ds.labels.dtype) == "torch.int64" and set(ds.labels.unique().tolist()) == set(range(classes))
    masks = [ds.train_mask, ds.val_mask, ds.test_mask]
    assert [int(m.sum()) for m in masks] == [train, val, test]
    assert not (ds.train_mask & ds.val_mask).any() and not (ds.val_mask & ds.test_mask).any()
    assert ds.info() == {
        "name": name, "nodes": nodes, "edges": dgl_edges, "graph_edges": dgl_edges - raw_self_loops + nodes, "features": feats, "classes": classes, "train": train,
        "val": val, "test": test, "multilabel": False, "metric": "accuracy",
    }


def test_folder_is_dgls_raw_path(offline_loader, planetoid_root, no_network):
    """DGL itself finds the extracted folder: it loads with no download."""
    from dgl.data import CoraGraphDataset

    offline_loader("cora")
    dgl_data = CoraGraphDataset(raw_dir=str(planetoid_root), verbose=False)
    assert dgl_data.raw_path == str(planetoid_root / SOURCES["cora"].folder_name())
    assert dgl_data.raw_path.endswith("cora_v2_d697a464")  # the mirror README's folder


def test_folder_follows_dgl_repo(tmp_path, data_mirror, no_network, monkeypatch):
    """With DGL_REPO set, DGL hashes another URL; our folder follows, so DGL still
    finds the files without downloading."""
    from dgl.data import CoraGraphDataset

    from lipnorm.data import fetch_dataset

    monkeypatch.setenv("DGL_REPO", "https://mirror.example.org/dgl")
    folder = fetch_dataset("cora", root=tmp_path, mirror=data_mirror)
    assert folder.name != "cora_v2_d697a464"
    dgl_data = CoraGraphDataset(raw_dir=str(tmp_path), verbose=False)
    assert dgl_data.raw_path == str(folder)
    assert dgl_data[0].num_nodes() == 2708


def test_pinned_sums_match_the_mirror_list(data_mirror):
    listed = {}
    for line in (data_mirror / "SHA256SUMS").read_text().splitlines():
        digest, rel = line.split()
        folder, filename = rel.split("/")
        listed.setdefault({"cora_v2": "cora"}.get(folder, folder), {})[filename] = digest
    assert PINNED_SHA256 == listed


@pytest.mark.parametrize("name", ["cora", "citeseer"])
def test_extracted_raw_files_match_pinned_sums(name, offline_loader, planetoid_root):
    offline_loader(name)
    folder = planetoid_root / SOURCES[name].folder_name()
    for rel, digest in PINNED_SHA256[name].items():
        assert hashlib.sha256((folder / rel).read_bytes()).hexdigest() == digest


@pytest.mark.parametrize("name", ["cora", "citeseer"])
def test_raw_features_are_the_stored_rows_whose_normalisation_is_dgls(
    name, offline_loader, planetoid_root, data_mirror, no_network
):
    """raw_features=True: the planetoid rows as stored (binary bag-of-words for Cora and
    CiteSeer, as PyG's Planetoid gives them); row-normalising them gives DGL's features."""
    import torch

    from lipnorm.data import load_dataset

    normalised = offline_loader(name)
    raw = load_dataset(name, root=planetoid_root, mirror=data_mirror, raw_features=True)
    assert raw.features.dtype == torch.float32 and raw.features.shape == normalised.features.shape
    assert set(raw.features.unique().tolist()) == {0.0, 1.0}
    sums = raw.features.sum(dim=1, keepdim=True)
    if name == "cora":
        assert (sums > 0).all() and torch.allclose(normalised.features.sum(dim=1), torch.ones(2708))
    expected = torch.where(sums > 0, raw.features / sums.clamp(min=1), 0.0)
    torch.testing.assert_close(normalised.features, expected, rtol=1e-6, atol=0)
    # Only the features differ: same graph, labels and split.
    assert torch.equal(torch.stack(raw.graph.edges()), torch.stack(normalised.graph.edges()))
    for field in ("labels", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(raw, field), getattr(normalised, field)), field

    # Independently of DGL's code: the first rows are the pickled `allx` matrix as stored.
    folder = planetoid_root / SOURCES[name].folder_name()
    with open(folder / f"ind.{SOURCES[name].base_name}.allx", "rb") as handle, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # scipy.sparse.csr in the pickle
        allx = pickle.load(handle, encoding="latin1")
    assert np.array_equal(raw.features[: allx.shape[0]].numpy(), np.asarray(allx.todense(), dtype=np.float32))

    # The raw rows have their own processed cache; DGL's normalised one is untouched.
    assert (folder / f"{SOURCES[name].base_name}_dgl_graph_raw_features.bin").is_file()
    again = load_dataset(name, root=planetoid_root, mirror=data_mirror, raw_features=True)
    assert torch.equal(again.features, raw.features)
    assert torch.equal(offline_loader(name).features, normalised.features)


@pytest.mark.parametrize("name", ["csbm", "coauthor-cs", "ppi", "ogbn-arxiv"])
def test_raw_features_are_refused_where_nothing_normalises_them(name, tmp_path, no_network):
    from lipnorm.data import load_dataset

    with pytest.raises(ValueError, match=f"raw_features=True applies to the planetoid datasets .*; '{name}' is loaded"):
        load_dataset(name, root=tmp_path, raw_features=True)
    assert list(tmp_path.iterdir()) == []
