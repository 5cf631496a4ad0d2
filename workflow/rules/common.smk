"""Validate the config, turn it into target paths; all other logic lives in src/lipnorm."""

import json
import os
import shlex
import sys

from snakemake.utils import validate

from lipnorm import experiments, grid, plan, registry, yaml_numbers
from lipnorm.train import seed_batch_plan
from lipnorm.results.aggregate import AGGREGATE_TABLES
from lipnorm.settings.recipes import MISSING_POOLS

# `make run` calls .venv/bin/snakemake without activating the venv: the `lipnorm`
# entry point sits beside the interpreter running Snakemake, so jobs find it first.
shell.prefix(f'export PATH={shlex.quote(os.path.dirname(sys.executable))}:"$PATH"; ')


# The config's plugins register their names first; the schema's name enums and
# experiments are then what the registries hold (lipnorm.grid.schema_with_registry: the
# file lists lipnorm's own, the validated copy a plugin's too). Numbers as people write them (`lr: 5e-4`,
# which YAML 1.1 reads as a string) become numbers wherever the schema expects one;
# then the schema checks everything.
PLUGINS = config.get("plugins") or []
if not isinstance(PLUGINS, list):
    raise ValueError(
        f"config plugins must be a list of files or modules, got {PLUGINS!r}"
    )
# A plugin file's path is relative to the config file's folder (the last --configfile,
# else the Snakefile's `configfile:`), wherever Snakemake runs.
_CONFIGFILES = workflow.overwrite_configfiles or workflow.configfiles
PLUGINS = registry.plugins_relative_to(
    PLUGINS,
    os.path.dirname(os.path.abspath(_CONFIGFILES[-1])) if _CONFIGFILES else os.getcwd(),
)
registry.load_plugins(PLUGINS)
# Beside this file, also when the workflow is a module of another Snakefile.
SCHEMA = os.path.join(
    str(workflow.current_basedir), "..", "schemas", "config.schema.yaml"
)
DERIVED_SCHEMA = os.path.abspath(
    os.path.join(".snakemake", "lipnorm", "config.schema.yaml")
)
_schema = grid.schema_with_registry(yaml_numbers.read_schema(SCHEMA))
os.makedirs(os.path.dirname(DERIVED_SCHEMA), exist_ok=True)
with open(DERIVED_SCHEMA, "w") as _file:
    json.dump(_schema, _file)
yaml_numbers.coerce_numbers(config, _schema)
# One line per problem (its key path, what is allowed); Snakemake's validate then only
# fills the schema's defaults.
try:
    grid.check_config(config, _schema)
except ValueError as _problems:
    sys.exit(f"lipnorm: {_problems}")
validate(config, DERIVED_SCHEMA)
# `--plugin P ...`: every job that reads registered names loads them too.
PLUGIN_ARGS = grid.plugin_args(PLUGINS)


RESULTS = config["results"]
RESOURCES = config["resources"]
EXPERIMENTS = config["experiments"]
# Experiments that train one run per grid point (`lipschitz` only probes: registered
# without training runs, lipnorm.experiments), and their groups of runs (one per
# experiment, or one per arm: `diagnose/no-dropout`).
GRID_EXPERIMENTS = [name for name in EXPERIMENTS if experiments.experiment(name).trains]
RUN_GROUPS = grid.run_groups(EXPERIMENTS)
# A grid's combinations an architecture does not have (gat-classic with lip) are left
# out, one line per run group saying which.
for _line in grid.left_out_lines(RUN_GROUPS):
    print(_line, file=sys.stderr)

DATASET_ROOT = f"{RESOURCES}/datasets"
DATASET_READY = f"{DATASET_ROOT}/{{dataset}}.ok"
# A mask of the pool "unlabelled" lies in its dataset's folder, one of another pool in a
# folder of the pool's name (`run_mask`, `lipnorm.data.masks.mask_path`).
MASK = f"{RESOURCES}/masks/{{dataset}}/rate{{rate}}_seed{{seed}}.npy"
POOL_MASK = f"{RESOURCES}/masks/{{dataset}}/{{pool}}/rate{{rate}}_seed{{seed}}.npy"
RUN_DIR = f"{RESULTS}/{{run_group}}/runs/{grid.RUN_SUBDIR}"
RUN_LOG = f"{RESULTS}/{{run_group}}/logs/runs/{grid.RUN_SUBDIR}.log"
# The run groups whose seeds one job trains (rule train_seeds, `lipnorm train --seeds`),
# with the seed list they share; the others: one job per run (rule train).
SEED_LIST, SEED_GROUPS = seed_batch_plan.workflow_seed_groups(config)
SEPARATE_GROUPS = [group for group in RUN_GROUPS if group not in SEED_GROUPS]
# A run directory but its seed's part: a train_seeds job writes every seed's below it,
# and logs beside them.
SEEDS_SUBDIR = grid.RUN_SUBDIR.rsplit("/", 1)[0]
SEEDS_DIR = f"{RESULTS}/{{run_group}}/runs/{SEEDS_SUBDIR}"
SEEDS_LOG = f"{RESULTS}/{{run_group}}/logs/runs/{SEEDS_SUBDIR}/seeds-{'-'.join(map(str, SEED_LIST))}.log"
# Every run directory of an experiment (all its arms), one per line: `lipnorm aggregate
# --runs-from` reads it.
RUN_LIST = f"{RESULTS}/{{experiment}}/aggregate/run_dirs.txt"


def _grid_values(key):
    return [value for spec in RUN_GROUPS.values() for value in spec["grid"][key]]


wildcard_constraints:
    experiment=grid.alternatives_regex(GRID_EXPERIMENTS or ["lipschitz"]),
    run_group=grid.alternatives_regex(RUN_GROUPS or ["lipschitz"]),
    dataset=grid.alternatives_regex(_grid_values("datasets") or ["csbm"]),
    model=grid.alternatives_regex(
        [m for spec in RUN_GROUPS.values() for m in grid.grid_models(spec["grid"])]
        or ["gat"]
    ),
    depth=r"\d+",
    alpha=grid.NUMBER_REGEX,
    rate=grid.NUMBER_REGEX,
    seed=r"\d+",
    pool=grid.alternatives_regex(MISSING_POOLS[1:]),


def mirror_args():
    """`--mirror DIR` from config `data.mirror`, else from $LIPNORM_DATA_MIRROR."""
    mirror = config.get("data", {}).get("mirror") or os.environ.get(
        "LIPNORM_DATA_MIRROR"
    )
    return f"--mirror {mirror}" if mirror else ""


def dataset_root(wildcards):
    return DATASET_ROOT


def csbm_args(wildcards):
    """`--csbm SPEC` from config `datasets.csbm` for the generated dataset, else nothing."""
    params = config.get("datasets", {}).get("csbm") or {}
    if wildcards.dataset != "csbm" or not params:
        return ""
    return f"--csbm {grid.csbm_spec(params)}"


def dataset_ready(wildcards):
    """The download marker of a dataset; one without raw files to fetch (csbm, generated;
    a plugin's, loaded by its `load`: `registry.Dataset.raw` None) needs none.

    Ancient: re-verifying a download must not retrain everything downstream.
    """
    if registry.dataset(wildcards.dataset).raw is None:
        return []
    return ancient(DATASET_READY.format(dataset=wildcards.dataset))


# Every training job planned (lipnorm.plan): memory and runtime estimates, and the
# checkpointing or cluster batches given to a job over the config's max_mem_mb; a job
# that fits nothing stops the workflow here, named. Coefficients: the file in
# $LIPNORM_PLAN_COEFFICIENTS, else lipnorm's own (docs/cluster.md).
TRAIN_PLAN = plan.plan_workflow(config, plan.load_coefficients())


def planned_job(wildcards):
    return TRAIN_PLAN[
        wildcards.run_group, grid.RUN_SUBDIR.format(**dict(wildcards.items()))
    ]


def train_args(wildcards):
    """The run group's `train` settings over the config's top-level ones (e.g. device),
    and what the plan added (checkpoint, cluster batches)."""
    settings = planned_job(wildcards).settings
    return " ".join(filter(None, [PLUGIN_ARGS, grid.option_args(settings)]))


def seed_jobs(wildcards):
    """The planned jobs of a train_seeds job's runs, one per seed of SEED_LIST."""
    return [
        TRAIN_PLAN[
            wildcards.run_group,
            grid.RUN_SUBDIR.format(**dict(wildcards.items()), seed=seed),
        ]
        for seed in SEED_LIST
    ]


def seeds_args(wildcards):
    """The settings of a train_seeds job: its first seed's (the plan gives them all
    the same, but for the seed)."""
    settings = seed_jobs(wildcards)[0].settings
    return " ".join(filter(None, [PLUGIN_ARGS, grid.option_args(settings)]))


def seeds_mem_mb(wildcards, attempt):
    """The sum of its runs' memory (lipnorm.plan.Job.mem_mb): S networks side by side."""
    return sum(job.mem_mb(attempt) for job in seed_jobs(wildcards))


def seeds_runtime(wildcards, attempt):
    """The sum of its runs' minutes: an upper bound (as one network they take less)."""
    return sum(job.runtime_min(attempt) for job in seed_jobs(wildcards))


# Run files of every seed of SEED_LIST below a SEEDS_DIR.
SEED_FILES = {
    name: expand(
        f"{SEEDS_DIR}/s{{seed}}/{name}.{ext}", seed=SEED_LIST, allow_missing=True
    )
    for name, ext in [
        ("summary", "json"),
        ("metrics", "parquet"),
        ("gradnorms", "parquet"),
        ("outnorms", "parquet"),
        ("layerstats", "parquet"),
    ]
}


def seeds_out(wildcards):
    """`lipnorm train --seeds --out`: the run directories, `{seed}` left for it to fill."""
    return os.path.join(SEEDS_DIR.format(**dict(wildcards.items())), "s{seed}")


def _mask(wildcards, settings, **values):
    """The mask pattern of a run group with these `train` settings (its pool, given or
    its recipe's), formatted with `wildcards` and `values`."""
    pool = grid.missing_pool(settings)
    pattern = MASK if pool == "unlabelled" else POOL_MASK
    return pattern.format(**{**dict(wildcards.items()), "pool": pool, **values})


def run_mask(wildcards):
    return _mask(wildcards, planned_job(wildcards).settings)


def seeds_mask(wildcards):
    """`lipnorm train --seeds --mask`: the masks, `{seed}` left for it to fill."""
    return _mask(wildcards, seed_jobs(wildcards)[0].settings, seed="{seed}")


def seed_masks(wildcards):
    settings = seed_jobs(wildcards)[0].settings
    return [_mask(wildcards, settings, seed=seed) for seed in SEED_LIST]


def train_mem_mb(wildcards, attempt):
    """The plan's memory estimate x 1.25 x attempt (lipnorm.plan.Job.mem_mb)."""
    return planned_job(wildcards).mem_mb(attempt)


def train_runtime(wildcards, attempt):
    """Minutes: (epochs x the plan's epoch time + start-up) x 1.5 x attempt."""
    return planned_job(wildcards).runtime_min(attempt)


def run_dirs(wildcards):
    """Every run directory of a grid experiment (all its arms)."""
    experiment = wildcards.experiment
    return [
        f"{RESULTS}/{group}/runs/{subdir}"
        for group, spec in RUN_GROUPS.items()
        if group.split("/")[0] == experiment
        for subdir in grid.run_subdirs(spec["grid"])
    ]


def run_summaries(wildcards):
    """The summary.json of every run of a grid experiment (all its arms)."""
    return [f"{run_dir}/summary.json" for run_dir in run_dirs(wildcards)]


def write_run_list(path, dirs, log):
    """`lipnorm.results.aggregate.write_run_list`, and one line in the rule's log."""
    from lipnorm.results.aggregate import write_run_list as write

    write(path, dirs)
    with open(log, "w") as file:
        print(f"{len(dirs)} run directories listed in {path}", file=file)


def aggregate_files(experiment):
    """`lipnorm aggregate`'s tables, or those of an experiment without training runs."""
    entry = experiments.experiment(experiment)
    folder = f"{RESULTS}/{experiment}/aggregate"
    stems = AGGREGATE_TABLES if entry.trains else entry.aggregate_tables
    return [f"{folder}/{stem}.{ext}" for stem in stems for ext in ("parquet", "csv")]


# A table's or figure's caption in the report: its registered one (a plugin's), else
# lipnorm's workflow/report/<stem>.rst; an output with neither is shown without one.
REPORT_CAPTIONS = os.path.join(str(workflow.current_basedir), "..", "report")


def report_caption(output):
    if output.caption is not None:
        return output.caption
    own = os.path.join(REPORT_CAPTIONS, f"{output.stem}.rst")
    return own if os.path.isfile(own) else None


def table_files(experiment):
    return [
        f"{RESULTS}/{experiment}/tables/{stem}.tex"
        for stem in experiments.experiment(experiment).table_stems
    ]


def figure_files(experiment, ext):
    return [
        f"{RESULTS}/{experiment}/figures/{stem}.{ext}"
        for stem in experiments.experiment(experiment).figure_stems
    ]


def final_targets():
    return [
        path
        for experiment in EXPERIMENTS
        for path in table_files(experiment)
        + figure_files(experiment, "pdf")
        + figure_files(experiment, "png")
    ]
