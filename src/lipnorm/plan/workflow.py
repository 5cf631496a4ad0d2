"""The workflow's training jobs, planned: each job's memory and runtime requests, the
checkpointing or cluster batches the plan gives a job over `max_mem_mb`, and the report
of a workflow config (`lipnorm plan --configfile`)."""

from __future__ import annotations

import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from lipnorm import grid, registry
from lipnorm.plan.model import Coefficients, Estimate, RunShape
from lipnorm.plan.sizes import dataset_sizes
from lipnorm.registry import DatasetSizes

# Margins of the workflow's requests over the plan, times Snakemake's `attempt`.
MEMORY_MARGIN = 1.25
TIME_MARGIN = 1.5
# Seconds of a job outside its epochs (start-up, loading the data, writing the run).
STARTUP_S = 120


def _number(where: str, value: Any, integer: bool = True) -> Any:
    """A config number (YAML 1.1 may leave `1e3` a string) as int (or float)."""
    from lipnorm.yaml_numbers import parse_number

    number = parse_number(value) if isinstance(value, str) else value
    if isinstance(number, bool) or not isinstance(number, (int, float)) or (integer and number != int(number)):
        raise ValueError(f"{where}={value!r} must be {'a whole number' if integer else 'a number'}")
    return int(number) if integer else float(number)


_CLUSTER_COUNTS = ("partitions", "batch_partitions")


def _cluster_counts(where: str, settings: Mapping[str, Any], sizes: DatasetSizes) -> dict[str, int]:
    """K and B of a job on cluster batches: those `settings` give, the others sized by
    the graph as the run sizes them (`lipnorm.settings.train_config.cluster_counts`)."""
    from lipnorm.settings.train_config import cluster_counts

    given = {
        key: None if settings.get(key) is None else _number(f"{where} {key}", settings[key]) for key in _CLUSTER_COUNTS
    }
    counts = cluster_counts(sizes.nodes, **given)
    return {"partitions": counts.partitions, "batch_partitions": counts.batch_partitions}


@dataclass(frozen=True)
class Job:
    """One training job of the workflow, planned: its run group and run directory below
    it, its settings (the config's, the run group's, and what the plan added in
    `changed`), its epochs and its `Estimate`."""

    run_group: str
    subdir: str
    wildcards: Mapping[str, str]
    settings: Mapping[str, Any]
    changed: Mapping[str, Any]
    epochs: int
    estimate: Estimate

    @property
    def run_dir(self) -> str:
        """`<run_group>/runs/<subdir>`, below the config's `results`."""
        return f"{self.run_group}/runs/{self.subdir}"

    def mem_mb(self, attempt: int = 1) -> int:
        """Memory to request (MB): the estimate x `MEMORY_MARGIN` x `attempt`."""
        return math.ceil(self.estimate.memory_mb * MEMORY_MARGIN * attempt)

    def runtime_min(self, attempt: int = 1) -> int:
        """Runtime to request (minutes): (epochs x epoch time + `STARTUP_S`) x
        `TIME_MARGIN` x `attempt`."""
        return math.ceil((self.epochs * self.estimate.epoch_s + STARTUP_S) * TIME_MARGIN * attempt / 60)

    @property
    def cpu_hours(self) -> float:
        """Epochs x epoch time, in hours (times the calibration's threads for CPU-hours)."""
        return self.epochs * self.estimate.epoch_s / 3600


def _describe(job_dir: str, wildcards: Mapping[str, str]) -> str:
    return f"train job {job_dir} ({', '.join(f'{k}={v}' for k, v in wildcards.items())})"


def _subdir_wildcards(subdir: str) -> dict[str, str]:
    parts = subdir.split("/")
    return {wildcard: part[len(prefix):] for (_, wildcard, prefix), part in zip(grid.AXES, parts)}


def input_rows(recipe: str, sizes: DatasetSizes, missing_rate: float) -> int | None:
    """The feature rows a run's first layer drops out and projects: under recipe "dgn"
    (`LiteratureGAT`, row-pruned) the training nodes' and the non-training nodes' that
    `missing_rate` % erasure leaves, where the dataset's `train_nodes` are known; else
    None, all of them."""
    if recipe != "dgn" or sizes.train_nodes is None:
        return None
    return sizes.train_nodes + round((1 - missing_rate / 100) * (sizes.nodes - sizes.train_nodes))


def plan_job(
    run_group: str,
    subdir: str,
    settings: Mapping[str, Any],
    sizes: DatasetSizes,
    coefficients: Coefficients,
    max_mem_mb: float | None = None,
    max_runtime: float | None = None,
    cluster: Mapping[str, Any] | None = None,
) -> Job:
    """Plan one training job (`subdir` below `run_group`'s runs, with `settings`).

    A job whose first-attempt request (`Job.mem_mb`) exceeds `max_mem_mb` is given
    checkpointing (the same numbers) if its architecture is registered checkpointable and
    that fits; else, where `cluster` (`partitions`, `batch_partitions`) allows it and the
    architecture is not full-batch only, cluster batches (without, then with
    checkpointing); else ValueError naming the job, its estimate and the limit.
    A job whose runtime request exceeds `max_runtime` (minutes) is a ValueError too.
    """
    from lipnorm.settings.recipes import recipe_defaults

    wildcards = _subdir_wildcards(subdir)
    depth = int(wildcards["depth"])
    defaults = recipe_defaults(
        settings.get("recipe", "lipnorm"), depth, wildcards["dataset"], float(wildcards["rate"])
    )
    resolved = {**defaults, **settings}
    where = f"{run_group} train"
    epochs = _number(f"{where} epochs", resolved["epochs"])
    architecture = registry.architecture(registry.parse_model(wildcards["model"])[0])
    base = {
        "depth": depth,
        "heads": _number(f"{where} heads", resolved["heads"]),
        "hidden": _number(f"{where} hidden", resolved["hidden"]),
        "checkpoint": bool(resolved.get("checkpoint", False)),
        "batching": resolved.get("batching", "full"),
        **(_cluster_counts(where, resolved, sizes) if resolved.get("batching") == "cluster" else {}),
        "projections": architecture.projections,
        "input_rows": input_rows(resolved.get("recipe", "lipnorm"), sizes, float(wildcards["rate"])),
    }
    # What the plan may change, in order: nothing, checkpointing, cluster batches.
    may_checkpoint = not base["checkpoint"] and architecture.checkpointable
    candidates: list[dict[str, Any]] = [{}] + ([{"checkpoint": True}] if may_checkpoint else [])
    if cluster is not None and base["batching"] == "full" and not architecture.full_batch_only:
        # K and B as the plan config gives them; the others are left to the run, which
        # sizes them by the graph as `_cluster_counts` does here.
        batches = {"batching": "cluster", **{key: cluster[key] for key in _CLUSTER_COUNTS if key in cluster}}
        candidates += [batches] + ([{**batches, "checkpoint": True}] if may_checkpoint else [])
    tried = []
    for changed in candidates:
        counts = _cluster_counts(f"{run_group} plan.cluster", {**resolved, **changed}, sizes) if changed.get("batching") else {}
        shape = RunShape(sizes, **{**base, **changed, **counts})
        job = Job(run_group, subdir, wildcards, {**settings, **changed}, changed, epochs, coefficients.estimate(shape))
        tried.append(job)
        if max_mem_mb is None or job.mem_mb() <= max_mem_mb:
            break
    else:
        attempts = "; ".join(
            f"{', '.join(f'{k}={v}' for k, v in t.changed.items()) or 'as configured'}: {t.mem_mb()} MB" for t in tried
        )
        if architecture.full_batch_only:
            hint = f" (architecture {architecture.name!r} is registered with full_batch_only=True: no cluster batches)"
        elif cluster is None:
            hint = f" (cluster batches are not allowed: set plan: cluster: {{}} (K and B by the graph) or {{partitions: K, batch_partitions: B}} in {run_group.split('/')[0]})"
        else:
            hint = ""
        raise ValueError(
            f"{_describe(job.run_dir, wildcards)} needs more memory than max_mem_mb={max_mem_mb:g}: "
            f"estimate {tried[0].estimate.memory_mb:.0f} MB, request x{MEMORY_MARGIN} = {attempts}{hint}"
        )
    if max_runtime is not None and job.runtime_min() > max_runtime:
        raise ValueError(
            f"{_describe(job.run_dir, wildcards)} needs a runtime over max_runtime={max_runtime:g} min: estimate "
            f"{job.epochs} epochs x {job.estimate.epoch_s:.2f} s, request x{TIME_MARGIN} = {job.runtime_min()} min; "
            "lower its epochs or raise max_runtime"
        )
    return job


def plan_workflow(config: Mapping[str, Any], coefficients: Coefficients) -> dict[tuple[str, str], Job]:
    """Every training job of the workflow `config`, planned (`plan_job`), by (run
    group, run subdirectory): the jobs of `lipnorm.grid.run_groups` and
    `lipnorm.grid.run_subdirs`, the workflow's own expansion."""
    max_mem = config.get("max_mem_mb")
    max_runtime = config.get("max_runtime")
    max_mem = None if max_mem is None else _number("max_mem_mb", max_mem, integer=False)
    max_runtime = None if max_runtime is None else _number("max_runtime", max_runtime, integer=False)
    csbm = (config.get("datasets") or {}).get("csbm") or {}
    root = f"{config.get('resources', 'resources')}/datasets"
    mirror = (config.get("data") or {}).get("mirror") or os.environ.get("LIPNORM_DATA_MIRROR")
    jobs: dict[tuple[str, str], Job] = {}
    for group, spec in grid.run_groups(config["experiments"]).items():
        settings = {**(config.get("train") or {}), **(spec.get("train") or {})}
        cluster = (spec.get("plan") or {}).get("cluster")
        for subdir in grid.run_subdirs(spec["grid"]):
            dataset = subdir.split("/", 1)[0]
            sizes = dataset_sizes(dataset, csbm, root=root, mirror=mirror)
            jobs[group, subdir] = plan_job(group, subdir, settings, sizes, coefficients, max_mem, max_runtime, cluster)
    return jobs


def read_config(path: str | Path) -> dict[str, Any]:
    """A workflow config file (YAML), its plugins loaded."""
    from lipnorm.yaml_numbers import load_yaml

    try:
        config = load_yaml(Path(path).read_text())
    except OSError as error:
        raise ValueError(f"workflow config {str(path)!r}: cannot read ({error.strerror})") from None
    if not isinstance(config, dict) or not isinstance(config.get("experiments"), dict):
        raise ValueError(f"workflow config {str(path)!r} has no experiments mapping")
    registry.load_plugins(config.get("plugins") or [])
    return config


def kernels_expected() -> tuple[bool, str]:
    """Whether the runs will take the compiled kernels (`lipnorm.kernels`), and why: as
    ``LIPNORM_KERNELS`` says, and under ``auto`` where a C compiler is found here (where
    the runs will build them; without importing torch, as the rest of the plan)."""
    mode = os.environ.get("LIPNORM_KERNELS") or "auto"
    if mode in ("on", "off"):
        return mode == "on", f"LIPNORM_KERNELS={mode}"
    named = os.environ.get("CC")
    compiler = shutil.which(named) if named else shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return False, f"LIPNORM_KERNELS={mode}, no C compiler found here"
    return True, f"LIPNORM_KERNELS={mode}, a C compiler found here"


def config_report(config: Mapping[str, Any], coefficients: Coefficients) -> str:
    """Per experiment: jobs, CPU-hours (epochs x epoch time x the calibration's
    threads), the largest job's memory request and its run directory, the longest
    job's runtime request, and the jobs the plan gave checkpointing or cluster batches."""
    from lipnorm.train.seed_batch_plan import workflow_seed_groups

    jobs = plan_workflow(config, coefficients)
    experiments: dict[str, list[Job]] = {}
    for job in jobs.values():
        experiments.setdefault(job.run_group.split("/")[0], []).append(job)
    seeds, seed_groups = workflow_seed_groups(config)
    kernels, why = kernels_expected()
    share = coefficients.seed_batch_share_on(kernels)
    limit = config.get("max_mem_mb")
    lines = [
        f"coefficients: {coefficients.device}, {coefficients.threads} thread(s), {coefficients.machine} {coefficients.date}",
        f"requests: memory = estimate x {MEMORY_MARGIN} x attempt, runtime = (epochs x epoch time + {STARTUP_S} s) "
        f"x {TIME_MARGIN} x attempt; max_mem_mb: {limit if limit is not None else 'none'}",
        "jobs: one per run, or per seed list for seeds trained together; CPU-h: " + (
            "each run as if alone" if share == 1 else
            f"a run trained with its seeds at {share:.3g} of its cost alone (the coefficients' seeds_together, "
            f"{'with' if kernels else 'without'} the compiled kernels: {why})"
        ),
        f"{'experiment':<12} {'runs':>6} {'jobs':>6} {'CPU-h':>9} {'largest MB':>10} {'longest min':>11} {'ckpt':>5} {'cluster':>7}  largest job",
    ]

    def job_count(group: list[Job]) -> int:
        return sum(1 / len(seeds) if job.run_group in seed_groups else 1 for job in group)

    def cpu_hours(group: list[Job]) -> float:
        return sum(job.cpu_hours * (share if job.run_group in seed_groups else 1) for job in group) * coefficients.threads

    for name, group in experiments.items():
        largest = max(group, key=lambda job: job.mem_mb())
        longest = max(group, key=lambda job: job.runtime_min())
        checkpointed = sum(1 for job in group if job.changed.get("checkpoint"))
        clustered = sum(1 for job in group if job.changed.get("batching") == "cluster")
        lines.append(
            f"{name:<12} {len(group):>6} {round(job_count(group)):>6} {cpu_hours(group):>9.1f} {largest.mem_mb():>10} "
            f"{longest.runtime_min():>11} {checkpointed:>5} {clustered:>7}  {largest.run_dir}"
        )
    everything = list(jobs.values())
    lines.append(f"{'total':<12} {len(jobs):>6} {round(job_count(everything)):>6} {cpu_hours(everything):>9.1f}")
    return "\n".join(lines)
