"""csbm: seeded, with the requested homophily, degree, signal and a planetoid-like split."""

from __future__ import annotations

import numpy as np
import pytest

from lipnorm.data import CSBMParams, csbm_params, load_dataset


def _undirected(ds) -> np.ndarray:
    src, dst = (t.numpy() for t in ds.graph.edges())
    keep = src < dst
    return np.stack([src[keep], dst[keep]], axis=1)


def test_same_seed_same_graph_other_seed_other_graph():
    first = load_dataset("csbm", csbm={"nodes": 300, "seed": 4})
    again = load_dataset("csbm", csbm=CSBMParams(nodes=300, seed=4))
    other = load_dataset("csbm", csbm="nodes=300,seed=5")
    for field in ("features", "labels", "train_mask", "val_mask", "test_mask"):
        assert np.array_equal(getattr(first, field).numpy(), getattr(again, field).numpy())
    assert np.array_equal(_undirected(first), _undirected(again))
    assert not np.array_equal(first.labels.numpy(), other.labels.numpy())
    assert not np.array_equal(_undirected(first), _undirected(other))


@pytest.mark.parametrize("homophily, degree", [(0.9, 4.0), (0.5, 6.0), (0.1, 10.0)])
def test_measured_homophily_and_degree(homophily, degree):
    params = CSBMParams(nodes=2000, classes=4, avg_degree=degree, homophily=homophily, seed=1)
    ds = load_dataset("csbm", csbm=params)
    edges = _undirected(ds)
    labels = ds.labels.numpy()
    src, dst = (t.numpy() for t in ds.graph.edges())
    # Simple symmetric graph: no duplicate edge, each edge both ways, one self-loop per node.
    assert len(np.unique(edges, axis=0)) == len(edges)
    assert len(src) == 2 * len(edges) + 2000 and (src == dst).sum() == 2000
    assert 2 * len(edges) / 2000 == pytest.approx(degree, abs=1e-3)
    assert np.mean(labels[edges[:, 0]] == labels[edges[:, 1]]) == pytest.approx(homophily, abs=1e-3)
    assert np.bincount(labels).tolist() == [500] * 4


def test_signal_sets_class_mean_norm():
    """Class means of the features sit at distance `signal` from the origin (unit
    centres scaled by signal; noise averages out)."""
    ds = load_dataset("csbm", csbm={"nodes": 3000, "classes": 3, "signal": 2.0, "feature_dim": 16})
    features, labels = ds.features.numpy(), ds.labels.numpy()
    norms = [np.linalg.norm(features[labels == c].mean(0)) for c in range(3)]
    assert norms == pytest.approx([2.0] * 3, abs=0.05)
    assert ds.features.shape == (3000, 16)
    per_node_noise = np.linalg.norm(features - features[labels == labels[0]].mean(0), axis=1)[labels == labels[0]]
    assert per_node_noise.mean() == pytest.approx(1.0, abs=0.05)


@pytest.mark.parametrize(
    "nodes, classes, train_per_class, val, test",
    [(5000, 5, 20, 500, 1000), (500, 3, 20, 125, 250), (60, 3, 4, 15, 30)],
)
def test_planetoid_like_split(nodes, classes, train_per_class, val, test):
    ds = load_dataset("csbm", csbm={"nodes": nodes, "classes": classes, "avg_degree": 3})
    train, valid, tst = (m.numpy() for m in (ds.train_mask, ds.val_mask, ds.test_mask))
    assert np.bincount(ds.labels.numpy()[train], minlength=classes).tolist() == [train_per_class] * classes
    assert (valid.sum(), tst.sum()) == (val, test)
    assert (train.astype(int) + valid + tst <= 1).all()
    assert ds.num_classes == classes and ds.metric == "accuracy" and not ds.multilabel


def test_defaults_and_spec_parsing():
    assert csbm_params(None) == CSBMParams()
    assert csbm_params(" nodes=100 , homophily=0.25,seed=3") == CSBMParams(nodes=100, homophily=0.25, seed=3)
    assert csbm_params("") == CSBMParams()


@pytest.mark.parametrize(
    "spec, message",
    [
        ("nodes=100,colour=red", r"unknown csbm parameter\(s\) \['colour'\]; allowed: nodes, classes, avg_degree, homophily, feature_dim, signal, seed"),
        ("nodes", r"csbm spec item 'nodes' is not key=value"),
        ("nodes=many", r"csbm nodes='many' is not a valid int"),
        ("nodes=10.5", r"csbm nodes='10.5' is not a valid int"),
        ({"nodes": 10.5}, r"csbm nodes=10.5 must be a whole number"),
        ("homophily=1.5", r"csbm homophily=1.5 must be between 0 and 1"),
        ("classes=1", r"csbm classes=1 must be at least 2"),
        ("nodes=5,classes=3", r"csbm nodes=5 must be at least 2 \* classes = 6"),
        # 150 edges, 120 within classes of 7, 7 and 6 nodes: 21 + 21 + 15 = 57 pairs exist.
        ("nodes=20,avg_degree=15", r"csbm asks for 120 intra-class edges but only 57 exist; at most half \(28\)"),
    ],
)
def test_bad_parameters(spec, message):
    with pytest.raises(ValueError, match=message):
        load_dataset("csbm", csbm=spec)
