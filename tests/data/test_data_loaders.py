"""PubMed, Coauthor-CS, PPI and ogbn-arxiv: their real files are not on this machine,
so each test writes a tiny dataset in the loader's real raw layout, zips it where the
data server has it, and loads it through lipnorm -> the mirror -> DGL's / OGB's code."""

from __future__ import annotations

import gzip
import json
import pickle
import zipfile
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from networkx.readwrite import json_graph

from lipnorm.data import UnpinnedChecksumWarning, load_dataset
from lipnorm.data.sources import LOCK_NAME, SOURCES


def _zip(path: Path, files: dict[str, bytes]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)


def _load(name, tmp_path):
    with pytest.warns(UnpinnedChecksumWarning, match=f"dataset '{name}'"):
        return load_dataset(name, root=tmp_path / "root", mirror=tmp_path / "mirror")


def _edge_set(ds) -> set[tuple[int, int]]:
    src, dst = (t.numpy() for t in ds.graph.edges())
    assert np.array_equal(np.sort(src[src == dst]), np.arange(ds.graph.num_nodes()))
    keep = src != dst
    return set(zip(src[keep].tolist(), dst[keep].tolist()))


def _both_ways(pairs) -> set[tuple[int, int]]:
    return {(int(u), int(v)) for u, v in pairs} | {(int(v), int(u)) for u, v in pairs}


def _random_pairs(rng, n, count):
    pairs = {tuple(sorted(p)) for p in rng.integers(n, size=(count, 2)).tolist() if p[0] != p[1]}
    return sorted(pairs)


def _pickle(obj) -> bytes:
    return pickle.dumps(obj, protocol=2)


def test_pubmed_planetoid_pickles(tmp_path, no_network):
    """Planetoid layout: train rows first, 500 validation rows next, test rows listed
    (shuffled) in test.index and stored in that order in tx / ty."""
    rng = np.random.default_rng(0)
    n, n_train, n_test, classes = 560, 9, 50, 3
    features = rng.integers(0, 4, size=(n, 5)).astype(np.float64)
    features[:, 0] += 1  # no empty rows, so row normalisation is well defined
    labels = np.arange(n) % classes
    onehot = np.eye(classes)[labels]
    test_index = rng.permutation(np.arange(n - n_test, n))
    pairs = _random_pairs(rng, n, 1500)
    adjacency = {i: [] for i in range(n)}
    for u, v in pairs:
        adjacency[u].append(v)
    files = {
        "x": _pickle(sp.csr_matrix(features[:n_train])),
        "y": _pickle(onehot[:n_train]),
        "allx": _pickle(sp.csr_matrix(features[: n - n_test])),
        "ally": _pickle(onehot[: n - n_test]),
        "tx": _pickle(sp.csr_matrix(features[test_index])),
        "ty": _pickle(onehot[test_index]),
        "graph": _pickle(adjacency),
        "test.index": "".join(f"{i}\n" for i in test_index).encode(),
    }
    _zip(tmp_path / "mirror/dataset/pubmed.zip", {f"ind.pubmed.{k}": v for k, v in files.items()})

    ds = _load("pubmed", tmp_path)
    assert (tmp_path / "root" / SOURCES["pubmed"].folder_name() / LOCK_NAME).is_file()
    assert ds.graph.num_nodes() == n and ds.num_classes == classes and ds.metric == "accuracy"
    np.testing.assert_allclose(ds.features.numpy(), features / features.sum(1, keepdims=True), rtol=1e-6)
    assert np.array_equal(ds.labels.numpy(), labels)
    assert np.array_equal(np.flatnonzero(ds.train_mask.numpy()), np.arange(n_train))
    assert np.array_equal(np.flatnonzero(ds.val_mask.numpy()), np.arange(n_train, n_train + 500))
    assert np.array_equal(np.flatnonzero(ds.test_mask.numpy()), np.arange(n - n_test, n))
    assert _edge_set(ds) == _both_ways(pairs)


def test_coauthor_cs_npz(tmp_path, no_network):
    """shchur/gnn-benchmark npz layout. DGL reorders nodes (RCMK), so column 0 of the
    features carries each node's original id to map the result back."""
    rng = np.random.default_rng(1)
    classes, per_class = 15, 52
    n = classes * per_class
    labels = rng.permutation(np.arange(n) % classes)
    attributes = np.hstack([np.arange(n)[:, None], rng.integers(0, 3, size=(n, 5))]).astype(np.float32)
    pairs = _random_pairs(rng, n, 2500)
    adjacency = sp.csr_matrix((np.ones(len(pairs)), tuple(np.array(pairs).T)), shape=(n, n))
    attr = sp.csr_matrix(attributes)
    buffer = _npz_bytes(
        adj_data=adjacency.data, adj_indices=adjacency.indices, adj_indptr=adjacency.indptr,
        adj_shape=np.array(adjacency.shape), attr_data=attr.data, attr_indices=attr.indices,
        attr_indptr=attr.indptr, attr_shape=np.array(attr.shape), labels=labels,
    )
    _zip(tmp_path / "mirror/dataset/coauthor_cs.zip", {"coauthor_cs.npz": buffer})

    ds = _load("coauthor-cs", tmp_path)
    original = ds.features[:, 0].numpy().astype(int)
    assert sorted(original) == list(range(n))
    np.testing.assert_array_equal(ds.features.numpy(), attributes[original])
    np.testing.assert_array_equal(ds.labels.numpy(), labels[original])
    assert {(original[u], original[v]) for u, v in _edge_set(ds)} == _both_ways(pairs)
    assert ds.num_classes == 15 and ds.metric == "accuracy" and not ds.multilabel

    # Shchur et al.'s split: 20 train and 30 validation nodes per class, the rest test.
    train, val, test = (m.numpy() for m in (ds.train_mask, ds.val_mask, ds.test_mask))
    assert (train.astype(int) + val + test == 1).all()
    y = ds.labels.numpy()
    assert np.bincount(y[train], minlength=classes).tolist() == [20] * classes
    assert np.bincount(y[val], minlength=classes).tolist() == [30] * classes
    assert int(test.sum()) == n - 50 * classes
    again = load_dataset("coauthor-cs", root=tmp_path / "root", mirror=tmp_path / "mirror")
    assert np.array_equal(again.train_mask.numpy(), train)  # the split is fixed


def _npz_bytes(**arrays) -> bytes:
    import io

    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _npy_bytes(array) -> bytes:
    import io

    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


# PPI graph ids per split, as DGL's PPIDataset reads them: 1-20 train, 21-22 valid, 23-24 test.
PPI_GRAPH_IDS = {"train": range(1, 21), "valid": range(21, 23), "test": range(23, 25)}


def test_ppi_json_npy_batched(tmp_path, no_network):
    """GraphSAGE layout (node-link json with "links", npy arrays). Graph ids are
    interleaved, so DGL's per-graph node order differs from the file order."""
    rng = np.random.default_rng(2)
    files, expected_feats, expected_labels, expected_edges, sizes = {}, [], [], set(), []
    offset = 0
    for split, graph_ids in PPI_GRAPH_IDS.items():
        nodes_per_graph = 3 if split == "train" else 4
        graph_id = np.repeat(np.array(graph_ids), nodes_per_graph)
        graph_id = graph_id[rng.permutation(len(graph_id))]
        n = len(graph_id)
        feats = rng.standard_normal((n, 6)).astype(np.float32)
        labels = rng.integers(0, 2, size=(n, 121)).astype(np.float32)
        graph = nx.Graph()
        graph.add_nodes_from(range(n))
        for g in graph_ids:  # a path through each graph's nodes
            members = np.flatnonzero(graph_id == g)
            graph.add_edges_from(zip(members[:-1].tolist(), members[1:].tolist()))
        data = json_graph.node_link_data(graph)
        assert "links" in data  # GraphSAGE's layout, which DGL's PPI loader reads
        files |= {
            f"{split}_graph.json": json.dumps(data).encode(),
            f"{split}_feats.npy": _npy_bytes(feats),
            f"{split}_labels.npy": _npy_bytes(labels),
            f"{split}_graph_id.npy": _npy_bytes(graph_id),
        }
        # DGL: one subgraph per id, in id order, each keeping its nodes' file order.
        order = np.concatenate([np.flatnonzero(graph_id == g) for g in graph_ids])
        position = np.empty(n, dtype=int)
        position[order] = np.arange(n) + offset
        expected_feats.append(feats[order])
        expected_labels.append(labels[order])
        expected_edges |= _both_ways([(position[u], position[v]) for u, v in graph.edges()])
        sizes.append(n)
        offset += n
    _zip(tmp_path / "mirror/dataset/ppi.zip", files)

    ds = _load("ppi", tmp_path)
    assert ds.graph.num_nodes() == sum(sizes) == 60 + 8 + 8
    np.testing.assert_array_equal(ds.features.numpy(), np.concatenate(expected_feats))
    np.testing.assert_array_equal(ds.labels.numpy(), np.concatenate(expected_labels))
    assert str(ds.labels.dtype) == "torch.float32" and ds.labels.shape == (76, 121)
    assert ds.multilabel and ds.metric == "micro-f1" and ds.num_classes == 121
    assert _edge_set(ds) == expected_edges
    split_of = np.repeat([0, 1, 2], sizes)
    for index, mask in enumerate((ds.train_mask, ds.val_mask, ds.test_mask)):
        assert np.array_equal(mask.numpy(), split_of == index)
    # Inductive: no edge joins two splits.
    assert all(split_of[u] == split_of[v] for u, v in expected_edges)

    cached = load_dataset("ppi", root=tmp_path / "root", mirror=tmp_path / "mirror")  # DGL's cache
    np.testing.assert_array_equal(cached.features.numpy(), ds.features.numpy())
    assert _edge_set(cached) == expected_edges


def _csv_gz(rows) -> bytes:
    return gzip.compress("".join(",".join(str(x) for x in np.atleast_1d(r)) + "\n" for r in rows).encode())


@pytest.mark.slow  # importing ogb.nodeproppred pulls in sklearn and torch_geometric
def test_ogbn_arxiv_csv_and_official_split(tmp_path, no_network):
    """OGB layout: `arxiv/` with RELEASE_v1.txt, raw/*.csv.gz and split/time/*.csv.gz,
    under the URL's path ogb/data/nodeproppred/arxiv.zip in the mirror."""
    rng = np.random.default_rng(3)
    n = 30
    directed = [tuple(p) for p in _random_pairs(rng, n, 50)]
    directed += [(directed[0][1], directed[0][0])]  # a reciprocal pair: merged, not doubled
    feats = rng.standard_normal((n, 4)).astype(np.float32)
    labels = rng.integers(0, 40, size=n)
    split = {"train": np.arange(0, 18), "valid": np.arange(18, 24), "test": np.arange(24, 30)}
    files = {
        "arxiv/": b"",
        "arxiv/RELEASE_v1.txt": b"ogbn-arxiv release v1\n",
        "arxiv/raw/edge.csv.gz": _csv_gz(directed),
        "arxiv/raw/node-feat.csv.gz": _csv_gz(feats.tolist()),
        "arxiv/raw/node-label.csv.gz": _csv_gz(labels),
        "arxiv/raw/node_year.csv.gz": _csv_gz(rng.integers(1990, 2021, size=n)),
        "arxiv/raw/num-node-list.csv.gz": _csv_gz([n]),
        "arxiv/raw/num-edge-list.csv.gz": _csv_gz([len(directed)]),
        **{f"arxiv/split/time/{k}.csv.gz": _csv_gz(v) for k, v in split.items()},
    }
    _zip(tmp_path / "mirror/ogb/data/nodeproppred/arxiv.zip", files)

    ds = _load("ogbn-arxiv", tmp_path)
    assert (tmp_path / "root/ogbn_arxiv/RELEASE_v1.txt").is_file()
    assert ds.graph.num_nodes() == n and ds.num_classes == 40 and ds.metric == "ogb-accuracy"
    np.testing.assert_allclose(ds.features.numpy(), feats, rtol=1e-6)
    assert np.array_equal(ds.labels.numpy(), labels) and ds.labels.ndim == 1
    assert _edge_set(ds) == _both_ways(directed)
    assert ds.graph.num_edges() == len(_both_ways(directed)) + n
    for mask, part in ((ds.train_mask, "train"), (ds.val_mask, "valid"), (ds.test_mask, "test")):
        assert np.array_equal(np.flatnonzero(mask.numpy()), split[part])
