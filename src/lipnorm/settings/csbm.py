"""The parameters of the csbm graph (`lipnorm.data.csbm` generates it): `CSBMParams`,
checked on construction, and `csbm_params`, which reads them from a mapping or a
`key=value,...` spec. Pure Python, so that a run's settings are checked before any
array library is imported.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass


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
