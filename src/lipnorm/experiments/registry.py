"""The registry of experiments: what each experiment writes, publishes and accepts.

An experiment is one question of the paper (`depth`, `gradients`, ...), declared once by
`register_experiment` in its own module of `lipnorm.experiments` (or in a plugin:
`lipnorm.registry.load_plugin`, the `--plugin` option, the workflow's `plugins:`). Every
list that names experiments is derived from here: the workflow schema's experiment
entries (`lipnorm.grid.schema_with_registry`), the workflow's table and figure rules, the
files `lipnorm tables` and `lipnorm plots` write, what `lipnorm publish` stores and the
sections of its `summary.md`, and the CLI's help.

As in `lipnorm.registry`, this module imports no torch, numpy or pandas: builders and
renderers are `"module:attribute"` strings (or callables, for plugins) resolved when they
are called (`lipnorm.registry.resolve`).
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from typing import Any, Mapping

from lipnorm.registry import Factory, check_factory, check_new, resolve

# The settings that identify a cell of a published `runs.csv`, and its columns
# (`lipnorm.results.publish`), unless an experiment declares its own.
CELL_SETTINGS = ("dataset", "missing_rate", "model", "depth", "alpha")
RUN_KEYS = (*CELL_SETTINGS, "seed")
RUN_COLUMNS = (*RUN_KEYS, "status", "metric", "test_metric")

# An experiment's block under `experiments:` in the workflow config (a JSON schema,
# whose `$defs` are those of workflow/schemas/config.schema.yaml).
GRID_CONFIG: Mapping[str, Any] = {"$ref": "#/$defs/grid_experiment"}


def grid_or_arms_config(description: str) -> dict[str, Any]:
    """The config of an experiment given as one grid or as several arms."""
    return {
        "description": description,
        "oneOf": [dict(GRID_CONFIG), {"$ref": "#/$defs/armed_experiment"}],
    }


# A stem becomes a file name (`<stem>.tex`, `<stem>.pdf`) and a report caption's name.
STEM_PATTERN = re.compile(r"[a-z0-9][a-z0-9_]*")


@dataclass(frozen=True)
class Output:
    """A table or a figure of an experiment: its file stem, and `builder(*tables)`, the
    function that builds it from the aggregate tables named in `inputs`, in order (a
    table: `(text, bold)`, `lipnorm.results.tables.latex.render`; a figure: a matplotlib Figure).

    `caption` is the path of its caption in the workflow's report (a reStructuredText file;
    kept as an absolute path). Without one the report shows `workflow/report/<stem>.rst`,
    lipnorm's own outputs' captions, or no caption."""

    stem: str
    builder: Factory
    inputs: tuple[str, ...] = ("runs",)
    caption: str | os.PathLike | None = None


@dataclass(frozen=True)
class Experiment:
    """A registered experiment (see `register_experiment`)."""

    name: str
    title: str
    tables: tuple[Output, ...]
    figures: tuple[Output, ...]
    section: Factory
    config: Mapping[str, Any]
    trains: bool
    aggregate_tables: tuple[str, ...]
    run_keys: tuple[str, ...]
    run_columns: tuple[str, ...]
    prepare_runs: Factory | None
    store: Factory | None
    load_stored: Factory | None
    stored_files: tuple[str, ...]
    named_in_every_summary: bool

    @property
    def table_stems(self) -> list[str]:
        return [output.stem for output in self.tables]

    @property
    def figure_stems(self) -> list[str]:
        return [output.stem for output in self.figures]


REGISTERED: dict[str, Experiment] = {}


def _check_outputs(name: str, tables: Any, figures: Any) -> tuple[tuple[Output, ...], tuple[Output, ...]]:
    """`tables` and `figures` as tuples of Outputs; ValueError on a bad one or on a stem
    that another output has (of this experiment or of a registered one)."""
    taken = {stem: other.name for other in REGISTERED.values()
             for stem in (*other.table_stems, *other.figure_stems)}
    checked = []
    for kind, outputs in (("tables", tables), ("figures", figures)):
        outputs = tuple(outputs)
        for output in outputs:
            if not isinstance(output, Output):
                raise ValueError(f"experiment {name!r}: each of {kind} must be a lipnorm.experiments.Output, "
                                 f"got {output!r}")
            if not isinstance(output.stem, str) or not STEM_PATTERN.fullmatch(output.stem):
                raise ValueError(f"experiment {name!r}: stem {output.stem!r} must be lower-case letters, "
                                 "digits and '_'")
            if output.stem in taken:
                raise ValueError(f"experiment {name!r}: stem {output.stem!r} is taken by experiment "
                                 f"{taken[output.stem]!r}")
            taken[output.stem] = name
            check_factory("experiment", name, f"the builder of {output.stem!r}", output.builder)
            if not output.inputs or not all(isinstance(table, str) and table for table in output.inputs):
                raise ValueError(f"experiment {name!r}: {output.stem!r} needs the names of its input tables")
        checked.append(tuple(_with_absolute_caption(name, output) for output in outputs))
    return checked[0], checked[1]


def _with_absolute_caption(name: str, output: Output) -> Output:
    """`output` with its caption file's absolute path; ValueError if it names no file."""
    if output.caption is None:
        return output
    if not isinstance(output.caption, (str, os.PathLike)) or not os.path.isfile(output.caption):
        raise ValueError(f"experiment {name!r}: the caption of {output.stem!r} must be the path of an "
                         f"existing file, got {output.caption!r}")
    return dataclasses.replace(output, caption=os.path.abspath(output.caption))


def register_experiment(
    name: str,
    *,
    title: str,
    section: Factory,
    tables: tuple[Output, ...] = (),
    figures: tuple[Output, ...] = (),
    config: Mapping[str, Any] = GRID_CONFIG,
    trains: bool = True,
    aggregate_tables: tuple[str, ...] = (),
    run_keys: tuple[str, ...] = RUN_KEYS,
    run_columns: tuple[str, ...] = RUN_COLUMNS,
    prepare_runs: Factory | None = None,
    store: Factory | None = None,
    load_stored: Factory | None = None,
    stored_files: tuple[str, ...] = (),
    named_in_every_summary: bool = False,
) -> Experiment:
    """Register an experiment under `name` (its results folder, `results/<name>/`, and
    its key under the workflow config's `experiments:`); returns its entry.

    - `title`: its heading in the published `summary.md` (`## <name>: <title>`).
    - `tables`, `figures`: its `Output`s, which `lipnorm tables` and `lipnorm plots`
      write (`<stem>.tex`; `<stem>.pdf` and `.png`) and the workflow declares; stems are
      unique over all experiments (the workflow's report caption of each is
      `workflow/report/<stem>.rst`).
    - `section`: ``section(folder, runs) -> list[str]``, the lines of its part of the
      published `summary.md`, rendered from its published folder alone (`runs`: its
      stored `runs.csv` as `lipnorm.results.publish.read_runs` reads it; None without runs).
    - `config`: the JSON schema of its block in the workflow config (default one grid,
      `GRID_CONFIG`; `grid_or_arms_config` for one grid or several arms).
    - `trains`: whether it trains one run per grid point (the workflow's train and
      aggregate jobs). One that does not (`lipschitz`) names `aggregate_tables`, the
      tables another command writes into its aggregate folder.
    - publishing (`lipnorm publish`): `run_keys` (the settings that identify a run,
      ending with the seed) and `run_columns` (those and the outcomes) of its stored
      `runs.csv`; `prepare_runs(runs) -> runs`, applied to the aggregate's runs before
      they are stored; `store(aggregate_dir, runs, folder)`, which writes its other
      stored files (`stored_files`) into its published folder, and
      `load_stored(folder, runs) -> {table: frame}`, which reads those the table
      builders take besides `runs`. `named_in_every_summary`: `summary.md`'s header
      names its `stored_files` even where it is not published (as lipnorm's first
      summaries did for `gradients` and `lipschitz`); otherwise where it is.
    """
    check_new("experiment", name, REGISTERED)
    if not isinstance(title, str) or not title.strip():
        raise ValueError(f"experiment {name!r}: title must be a non-empty string")
    check_factory("experiment", name, "section", section)
    for what, factory in (("prepare_runs", prepare_runs), ("store", store), ("load_stored", load_stored)):
        if factory is not None:
            check_factory("experiment", name, what, factory)
    if trains == bool(aggregate_tables):
        raise ValueError(
            f"experiment {name!r}: an experiment without training runs (trains=False) names its "
            "aggregate_tables, and only it (a training experiment's are `lipnorm aggregate`'s)"
        )
    run_keys, run_columns = tuple(run_keys), tuple(run_columns)
    if not run_keys or run_keys[-1] != "seed" or run_columns[: len(run_keys)] != run_keys:
        raise ValueError(f"experiment {name!r}: run_keys must end with 'seed' and begin run_columns")
    if not isinstance(config, Mapping):
        raise ValueError(f"experiment {name!r}: config must be a JSON schema (a mapping), got {config!r}")
    tables, figures = _check_outputs(name, tables, figures)
    entry = Experiment(
        name, title, tables, figures, section, dict(config), bool(trains), tuple(aggregate_tables),
        run_keys, run_columns, prepare_runs, store, load_stored, tuple(stored_files),
        bool(named_in_every_summary),
    )
    REGISTERED[name] = entry
    return entry


def unregister_experiment(name: str) -> None:
    """Remove a registered experiment (tests)."""
    if name not in REGISTERED:
        raise ValueError(f"no experiment {name!r} is registered")
    del REGISTERED[name]


def experiment(name: str) -> Experiment:
    """The entry of `name`; ValueError naming the known ones."""
    if name not in REGISTERED:
        raise ValueError(f"unknown experiment {name!r}; known: {', '.join(REGISTERED)}")
    return REGISTERED[name]


def names() -> tuple[str, ...]:
    """Every registered experiment, in the order of registration (of `summary.md`)."""
    return tuple(REGISTERED)


def tables() -> dict[str, list[str]]:
    """Experiment -> the stems of its tables."""
    return {name: entry.table_stems for name, entry in REGISTERED.items()}


def figures() -> dict[str, list[str]]:
    """Experiment -> the stems of its figures."""
    return {name: entry.figure_stems for name, entry in REGISTERED.items()}


def build(output: Output, load) -> Any:
    """`output`'s table or figure, its inputs read by `load(table name)`."""
    return resolve(output.builder)(*(load(table) for table in output.inputs))
