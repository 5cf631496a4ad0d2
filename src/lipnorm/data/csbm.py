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

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from lipnorm.data.dataset import NodeDataset, build_node_dataset, index_mask, sample_per_class


@dataclass(frozen=True)
class CSBMParams:
    nodes: int = 500
    classes: int = 3
    avg_degree: float = 5.0
    homophily: float = 0.8
    feature_dim: int = 32
    signal: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        checks = [
            ("classes", self.classes >= 2, "at least 2"),
            ("nodes", self.nodes >= 2 * self.classes, f"at least 2 * classes = {2 * self.classes}"),
            ("avg_degree", self.avg_degree > 0, "positive"),
            ("homophily", 0 <= self.homophily <= 1, "between 0 and 1"),
            ("feature_dim", self.feature_dim >= 1, "at least 1"),
            ("signal", self.signal >= 0, "non-negative"),
            ("seed", self.seed >= 0, "non-negative"),
        ]
        for field, ok, allowed in checks:
            if not ok:
                raise ValueError(f"csbm {field}={getattr(self, field)!r} must be {allowed}")

    def edge_counts(self) -> tuple[int, int]:
        """(intra-class, inter-class) undirected edge counts."""
        total = round(self.nodes * self.avg_degree / 2)
        intra = round(self.homophily * total)
        return intra, total - intra


def csbm_params(value: "CSBMParams | Mapping | str | None") -> CSBMParams:
    """Coerce a CSBMParams, a mapping or a `key=value,...` spec (None: defaults)."""
    if value is None:
        return CSBMParams()
    if isinstance(value, CSBMParams):
        return value
    if isinstance(value, str):
        value = _parse_spec(value)
    fields = {f.name: f for f in dataclasses.fields(CSBMParams)}
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise ValueError(f"unknown csbm parameter(s) {unknown}; allowed: {', '.join(fields)}")
    typed = {}
    for key, raw in value.items():
        kind = type(fields[key].default)
        try:
            number = kind(raw)
        except (TypeError, ValueError):
            raise ValueError(f"csbm {key}={raw!r} is not a valid {kind.__name__}") from None
        if kind is int and number != float(raw):
            raise ValueError(f"csbm {key}={raw!r} must be a whole number")
        typed[key] = number
    return CSBMParams(**typed)


def _parse_spec(spec: str) -> dict[str, str]:
    pairs = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        key, sep, val = item.partition("=")
        if not sep or not key.strip() or not val.strip():
            raise ValueError(f"csbm spec item {item!r} is not key=value (spec {spec!r})")
        pairs[key.strip()] = val.strip()
    return pairs


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
