"""csbm: a contextual stochastic block model graph, generated from parameters.

Needs no download; it serves tests and quick runs. Construction, all from
`numpy.random.default_rng(seed)`:

* labels: `nodes` nodes in `classes` balanced classes, randomly permuted;
* edges: exactly `round(nodes * avg_degree / 2)` distinct undirected edges, of which
  `round(homophily * edges)` join two nodes of the same class (so the measured edge
  homophily and average degree are the requested ones up to rounding); endpoints are
  drawn uniformly, the second one within / outside the first one's class;
* features: `signal * mu_y + noise`, with class centres `mu_c` random unit vectors in
  `feature_dim` dimensions and noise `N(0, I / feature_dim)` (unit expected norm), so
  `signal` is the ratio of centre norm to noise norm;
* split, planetoid-like: 20 training nodes per class (at most a fifth of the
  smallest class, at least 1), then `min(500, nodes // 4)` validation and
  `min(1000, nodes // 2)` test nodes drawn from the rest.
"""

from __future__ import annotations

import numpy as np

from lipnorm.data.dataset import NodeDataset, build_node_dataset, index_mask, sample_per_class
from lipnorm.settings.csbm import CSBMParams, csbm_params

__all__ = ["CSBMParams", "csbm_params", "generate_csbm"]


def generate_csbm(params: CSBMParams) -> NodeDataset:
    n, k = params.nodes, params.classes
    rng = np.random.default_rng(params.seed)
    labels = rng.permutation(np.arange(n) % k)
    intra, inter = params.edge_counts()
    edges = np.concatenate([
        _sample_edges(rng, labels, intra, same_class=True),
        _sample_edges(rng, labels, inter, same_class=False),
    ])
    lo, hi = edges // n, edges % n

    centres = rng.standard_normal((k, params.feature_dim))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    noise = rng.standard_normal((n, params.feature_dim)) / np.sqrt(params.feature_dim)
    features = params.signal * centres[labels] + noise

    smallest = np.bincount(labels, minlength=k).min()
    train = sample_per_class(np.arange(n), labels, max(1, min(20, smallest // 5)), rng)
    rest = rng.permutation(np.setdiff1d(np.arange(n), train))
    num_val, num_test = min(500, n // 4), min(1000, n // 2)
    val, test = rest[:num_val], rest[num_val:num_val + num_test]
    return build_node_dataset(
        "csbm", np.concatenate([lo, hi]), np.concatenate([hi, lo]), n,
        features, labels, (index_mask(n, train), index_mask(n, val), index_mask(n, test)),
        k, multilabel=False, metric="accuracy",
    )


def _sample_edges(rng: np.random.Generator, labels: np.ndarray, count: int, same_class: bool) -> np.ndarray:
    """`count` distinct undirected edges as keys `lo * n + hi` (lo < hi), in draw order."""
    n = len(labels)
    sizes = np.bincount(labels)
    pairs_within = int((sizes * (sizes - 1) // 2).sum())
    available = pairs_within if same_class else n * (n - 1) // 2 - pairs_within
    kind = "intra" if same_class else "inter"
    # Rejection sampling stays fast and uniform only while the graph is sparse.
    if count > available // 2:
        raise ValueError(
            f"csbm asks for {count} {kind}-class edges but only {available} exist; at most "
            f"half ({available // 2}) are allowed: lower avg_degree or raise nodes"
        )
    order = np.argsort(labels, kind="stable")
    starts = np.cumsum(sizes) - sizes
    keys = np.empty(0, dtype=np.int64)
    while len(keys) < count:
        batch = max(2 * (count - len(keys)), 64)
        u = rng.integers(n, size=batch)
        c = labels[u]
        if same_class:
            v = order[starts[c] + rng.integers(sizes[c])]
        else:
            j = rng.integers(n - sizes[c])
            v = order[np.where(j < starts[c], j, j + sizes[c])]
        u, v = u[u != v], v[u != v]
        keys = np.concatenate([keys, np.minimum(u, v) * n + np.maximum(u, v)])
        _, first = np.unique(keys, return_index=True)
        keys = keys[np.sort(first)]
    return keys[:count]
