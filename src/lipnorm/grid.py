"""Turn the workflow config into exact target paths and command-line arguments.

The Snakemake workflow imports this module only: the set of run directories is a
pure function of the config, and numbers are spelt in paths the same way every time
(`0.1` never becomes `0.30000000000000004`, `1e-05` is written `0.00001`).
"""

from __future__ import annotations

import itertools
import math
import re
import shlex
from decimal import Decimal
from typing import Iterable, Mapping

# Grid axes, in path order: the config key of each and the path segment prefix.
AXES = (
    ("datasets", "dataset", ""),
    ("models", "model", ""),
    ("depths", "depth", "L"),
    ("alphas", "alpha", "a"),
    ("missing_rates", "rate", "r"),
    ("seeds", "seed", "s"),
)

# The wildcard pattern of a run directory below `<results>/<experiment>/runs/`.
RUN_SUBDIR = "/".join(f"{prefix}{{{wildcard}}}" for _, wildcard, prefix in AXES)

# What `format_number` produces for the grid's numbers (all >= 0): no exponent.
NUMBER_REGEX = r"\d+(\.\d+)?"


def format_number(value: float | int) -> str:
    """Spell a number for a path or a command line: shortest exact decimal, no exponent.

    >>> [format_number(v) for v in (1, 1.0, 0.1, 1e-05, 0.25, 100)]
    ['1', '1', '0.1', '0.00001', '0.25', '100']
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"expected a number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {value!r}")
    # repr is the shortest string that round-trips; Decimal re-spells it without
    # an exponent.
    text = format(Decimal(repr(value)), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def run_subdirs(grid: Mapping[str, Iterable]) -> list[str]:
    """Every run directory of a grid, relative to `<results>/<experiment>/runs/`.

    Duplicate values on an axis give one directory, in first-seen order.
    """
    axes = []
    for key, _, prefix in AXES:
        spelt = [str(v) if key in ("datasets", "models") else format_number(v) for v in grid[key]]
        axes.append([f"{prefix}{v}" for v in dict.fromkeys(spelt)])
    return ["/".join(parts) for parts in itertools.product(*axes)]


def run_groups(experiments: Mapping[str, Mapping]) -> dict[str, Mapping]:
    """Every group of runs that shares one `grid` and one `train` block, by its folder.

    A grid experiment is one group, named after it (`depth`); an experiment with `arms`
    has one group per arm, named `<experiment>/<arm>` (`diagnose/no-dropout`). A group's
    runs live in `<results>/<group>/runs/`; the experiment's aggregate gathers all its
    groups. The probe experiment `lipschitz` has no runs.

    >>> sorted(run_groups({"depth": {"grid": 1, "train": 2}, "x": {"arms": {"a": {"grid": 3}}}}))
    ['depth', 'x/a']
    """
    groups: dict[str, Mapping] = {}
    for name, spec in experiments.items():
        if name == "lipschitz":
            continue
        if "arms" in spec:
            groups.update({f"{name}/{arm}": block for arm, block in spec["arms"].items()})
        else:
            groups[name] = spec
    return groups


def option_args(settings: Mapping[str, object]) -> str:
    """`{"weight_decay": 5e-4, "protocol": "best-val"}` -> `--weight-decay 0.0005 --protocol best-val`."""
    args: list[str] = []
    for key, value in settings.items():
        spelt = value if isinstance(value, str) else format_number(value)
        args += [f"--{key.replace('_', '-')}", spelt]
    return shlex.join(args)


def csbm_spec(params: Mapping[str, object]) -> str:
    """The `--csbm` value: `key=value,...` over the CSBM parameters, numbers spelt exactly."""
    return ",".join(
        f"{key}={value if isinstance(value, str) else format_number(value)}"
        for key, value in params.items()
    )


def alternatives_regex(names: Iterable[str]) -> str:
    """A wildcard constraint matching exactly one of `names` (longest first)."""
    ordered = sorted(set(names), key=lambda name: (-len(name), name))
    if not ordered:
        raise ValueError("expected at least one name for a wildcard constraint")
    return "|".join(re.escape(name) for name in ordered)
