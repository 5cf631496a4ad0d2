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

from lipnorm import experiments, registry
from lipnorm.settings.recipes import recipe_defaults

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

    Examples
    --------
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


def grid_models(grid: Mapping[str, Iterable]) -> list[str]:
    """The model names of a grid: each of `models`, with its attention normalisation
    replaced by each of `attention_norms` and its representation normalisation by each
    of `norms` where the grid has those axes (`gat` x [none, lip] x [none, pairnorm]:
    gat, gat-pairnorm, gat-lip, gat-lip-pairnorm). A combination an architecture does
    not have (gat-classic with lip) is left out (`left_out_models`); a grid left with
    none, or naming an unknown value, is a ValueError. Duplicates once, in first-seen
    order."""
    names, left_out = _expand_models(grid)
    if not names:
        raise ValueError(
            f"no model of the grid has these combinations: {', '.join(left_out)} "
            "(their architectures have no LipschitzNorm variant or take no normalisation)"
        )
    return names


def left_out_models(grid: Mapping[str, Iterable]) -> list[str]:
    """The combinations of a grid's model axes that their architecture does not have,
    spelt `architecture + attention_norm + norm` (`gat-classic + lip`), in first-seen order."""
    return _expand_models(grid)[1]


def left_out_lines(groups: Mapping[str, Mapping]) -> list[str]:
    """One line for each run group (`run_groups`) whose grid leaves combinations out:
    how many, and which."""
    lines = []
    for group, spec in groups.items():
        names, left_out = _expand_models(spec["grid"])
        if left_out:
            lines.append(
                f"lipnorm: {group}: {len(left_out)} of {len(names) + len(left_out)} model combinations left "
                f"out, which their architecture does not have: {', '.join(left_out)}"
            )
    return lines


def _expand_models(grid: Mapping[str, Iterable]) -> tuple[list[str], list[str]]:
    """(the grid's models, the combinations left out), each once, in first-seen order."""
    names, left_out = [], []
    for model in grid["models"]:
        architecture, own_attention_norm, own_norm = registry.parse_model(model)
        for attention_norm, norm in itertools.product(grid.get("attention_norms", [None]), grid.get("norms", [None])):
            parts = (architecture, attention_norm or own_attention_norm, norm or own_norm)
            if registry.has_model(*parts):
                names.append(registry.compose_model(*parts))
            else:
                left_out.append(" + ".join(part for part in parts if part != registry.NO_NORM))
    return list(dict.fromkeys(names)), list(dict.fromkeys(left_out))


def run_subdirs(grid: Mapping[str, Iterable]) -> list[str]:
    """Every run directory of a grid, relative to `<results>/<experiment>/runs/`.

    Duplicate values on an axis give one directory, in first-seen order. The model
    axis is `grid_models`.
    """
    axes = []
    for key, _, prefix in AXES:
        values = grid_models(grid) if key == "models" else grid[key]
        spelt = [str(v) if key in ("datasets", "models") else format_number(v) for v in values]
        axes.append([f"{prefix}{v}" for v in dict.fromkeys(spelt)])
    return ["/".join(parts) for parts in itertools.product(*axes)]


def run_groups(configured: Mapping[str, Mapping]) -> dict[str, Mapping]:
    """Every group of runs that shares one `grid` and one `train` block, by its folder.

    A grid experiment is one group, named after it (`depth`); an experiment with `arms`
    has one group per arm, named `<experiment>/<arm>` (`diagnose/no-dropout`). A group's
    runs live in `<results>/<group>/runs/`; the experiment's aggregate gathers all its
    groups. An experiment registered without training runs (`lipschitz`, the probe) has
    no group.

    >>> sorted(run_groups({"depth": {"grid": 1, "train": 2}, "diagnose": {"arms": {"a": {"grid": 3}}}}))
    ['depth', 'diagnose/a']
    """
    groups: dict[str, Mapping] = {}
    for name, spec in configured.items():
        if not experiments.experiment(name).trains:
            continue
        if "arms" in spec:
            groups.update({f"{name}/{arm}": block for arm, block in spec["arms"].items()})
        else:
            groups[name] = spec
    return groups


def option_args(settings: Mapping[str, object]) -> str:
    """`{"weight_decay": 5e-4, "protocol": "best-val", "residual": True}` ->
    `--weight-decay 0.0005 --protocol best-val --residual` (False: `--no-residual`)."""
    args: list[str] = []
    for key, value in settings.items():
        flag = key.replace("_", "-")
        if isinstance(value, bool):
            args.append(f"--{flag}" if value else f"--no-{flag}")
            continue
        spelt = value if isinstance(value, str) else format_number(value)
        args += [f"--{flag}", spelt]
    return shlex.join(args)


# Where the workflow schema takes registered names: path under `$defs` -> registry kind. The
# file (workflow/schemas/config.schema.yaml) lists none there, nor any experiment: they
# are filled in here, so a new dataset, model or experiment, built in or a plugin's, edits
# nothing in it.
SCHEMA_ENUMS = {
    ("grid_experiment", "properties", "grid", "properties", "datasets", "items"): "dataset",
    ("grid_experiment", "properties", "grid", "properties", "models", "items"): "model",
    ("grid_experiment", "properties", "grid", "properties", "attention_norms", "items"): "attention_norm",
    ("grid_experiment", "properties", "grid", "properties", "norms", "items"): "norm",
}


def schema_with_registry(schema: Mapping) -> dict:
    """A copy of the workflow schema whose name enums (`SCHEMA_ENUMS`) are what
    `lipnorm.registry` holds now, and whose experiments are those `lipnorm.experiments`
    holds, each with its registered config (a plugin's names and experiments included)."""
    import copy

    derived = copy.deepcopy(dict(schema))
    for path, kind in SCHEMA_ENUMS.items():
        node = derived["$defs"]
        for key in path:
            node = node[key]
        node["enum"] = list(registry.names(kind))
    derived["properties"]["experiments"]["properties"] = {
        name: copy.deepcopy(dict(experiments.experiment(name).config)) for name in experiments.names()
    }
    return derived


# The grid keys whose values a plugin can add to (a problem there gets the plugin hint).
_PLUGIN_KEYS = ("datasets", "models", "norms")


def check_config(config: Mapping, schema: Mapping) -> None:
    """ValueError unless `config` is valid under `schema` (`schema_with_registry`'s):
    a first line counting the problems, then one per problem naming its key path and,
    once, what is allowed there; after a name a plugin could register, which plugins
    are loaded."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    found = dict.fromkeys(problem for error in validator.iter_errors(config) for problem in _problems(error))
    if not found:
        return
    lines = [line for line, _ in found]
    if any(plugin_name for _, plugin_name in found):
        lines.append(registry.plugin_hint("model").removeprefix("; "))
    count = f"{len(found)} problem{'s' if len(found) > 1 else ''}"
    raise ValueError("\n".join([f"the workflow config has {count}:", *lines]))


def _problems(error) -> list[tuple[str, bool]]:
    """(line, whether the value may be a plugin's name) of one jsonschema error; of a
    `oneOf` (one grid, or arms), the alternative that came closest (fewest errors,
    then the deepest)."""
    if error.validator in ("oneOf", "anyOf") and error.context:
        branches: dict = {}
        for sub in error.context:
            branches.setdefault(sub.schema_path[0], []).append(sub)
        closest = min(branches.values(), key=lambda errors: (len(errors), -max(len(e.absolute_path) for e in errors)))
        return [problem for sub in closest for problem in _problems(sub)]
    where = _key_path(error.absolute_path)
    instance, value = error.instance, error.validator_value
    if error.validator == "enum":
        key = next((part for part in reversed(error.absolute_path) if isinstance(part, str)), "")
        return [(f"{where}: {instance!r} is not allowed; allowed: {', '.join(map(str, value))}", key in _PLUGIN_KEYS)]
    if error.validator == "additionalProperties" and isinstance(instance, Mapping):
        allowed = list(error.schema.get("properties", {}))
        return [
            (f"{where}: unknown key {key!r}; allowed: {', '.join(allowed)}", False)
            for key in instance if key not in allowed
        ]
    if error.validator == "required" and isinstance(instance, Mapping):
        return [(f"{where}: missing key {key!r}", False) for key in value if key not in instance]
    return [(f"{where}: {error.message}", False)]


def _key_path(path) -> str:
    """`experiments.depth.grid.models[0]`; the config's top level is `(top level)`."""
    text = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path).lstrip(".")
    return text or "(top level)"


def plugin_args(plugins: Iterable[str] | None) -> str:
    """`--plugin P` for each of the workflow config's `plugins`."""
    return shlex.join(arg for plugin in plugins or () for arg in ("--plugin", plugin))


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


def missing_pool(settings: Mapping) -> str:
    """The missing-features pool of a run group with these `train` settings: its
    `missing_pool`, else its recipe's (lipnorm.settings.recipes.MISSING_POOLS)."""
    return settings.get("missing_pool") or recipe_defaults(settings.get("recipe", "lipnorm"), 1)["missing_pool"]
