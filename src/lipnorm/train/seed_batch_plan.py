"""Which runs' seeds train as one network (a seed batch), decided from their settings
alone: why a run's seeds cannot be one network (`why_not_seed_batched`), and which run
groups of a workflow config the workflow trains one job per seed list
(`workflow_seed_groups`).

Torch-free: the workflow decides at every Snakemake start, from the settings and the
registry's capability flags (an architecture's `seed_batch` and its torch-free
`seed_batch_check`), without building a network. `lipnorm train --seeds`
(`lipnorm.train.seed_batch`) decides again on the networks it built, so a job whose
networks cannot be one after all trains its seeds one after another, and says so.
"""

from __future__ import annotations

from typing import Any, Mapping

from lipnorm import grid, registry
from lipnorm.settings.train_config import TrainConfig

__all__ = ["SEED_GROUPINGS", "settings_reason", "why_not_seed_batched", "workflow_seed_groups"]

# What the workflow gives one job (config `seed_groups`): the seeds of a run that trains
# them as one network ("together", the default), the seeds of every run ("all": one
# start-up, seeds one after another where they cannot be one network), or one seed ("none").
SEED_GROUPINGS = ("together", "all", "none")


def settings_reason(config: TrainConfig) -> str | None:
    """Why the seeds of `config` (resolved) cannot be one network whatever its layers (a
    setting that differs per seed, or an architecture without `seed_batch`), a
    sentence; else None."""
    reasons = [
        (config.batching != "full", f"batching {config.batching!r}: its batches differ per seed"),
        (config.patience is not None, f"patience {config.patience}: each seed would stop at its own epoch"),
        (config.protocol == "official", "protocol official: a learning-rate schedule per seed"),
        (config.checkpoint, "activation checkpointing has no seed-batched form"),
        (not config.device.startswith("cpu"), f"device {config.device}: seeds are batched on the CPU only"),
    ]
    for applies, reason in reasons:
        if applies:
            return reason
    architecture = registry.architecture(config.architecture)
    if architecture.seed_batch is None:
        return f"architecture {architecture.name!r} registers no seed_batch network (lipnorm.registry)"
    return None


def why_not_seed_batched(config: TrainConfig) -> str | None:
    """None if the seeds of `config` (resolved) can be trained as one network, as far as
    its settings tell (`settings_reason`, then the architecture's `seed_batch_check`
    of its model settings; an architecture without that check holds every one); else
    why not, a sentence."""
    reason = settings_reason(config)
    if reason is not None:
        return reason
    check = registry.architecture(config.architecture).seed_batch_check
    return None if check is None else registry.resolve(check)(config.model_config(4, 2).resolved())


def workflow_seed_groups(config: Mapping[str, Any]) -> tuple[tuple[int, ...], list[str]]:
    """`(seeds, run groups)`: the run groups (experiments or arms, `lipnorm.grid.run_groups`)
    of a workflow config whose runs the workflow trains one job per seed list (`lipnorm
    train --seeds`), and that seed list, as config `seed_groups` says (default
    "together"; see `SEED_GROUPINGS`).

    Grouped are the run groups with the seed list most of them have (two seeds or more;
    one list, so that one rule, `train_seeds`, serves them all), and, for "together",
    every one of whose models trains its seeds as one network (`why_not_seed_batched` of its
    settings at the grid's first depth; a job that cannot after all, e.g. one the plan
    gives checkpointing or cluster batches, trains its seeds one after another, and says
    so). `((), [])` where none is grouped.
    """
    grouping = config.get("seed_groups", "together")
    if grouping not in SEED_GROUPINGS:
        raise ValueError(f"seed_groups {grouping!r} is not one of {', '.join(SEED_GROUPINGS)}")
    candidates: dict[str, tuple[int, ...]] = {}
    for name, spec in grid.run_groups(config.get("experiments") or {}).items():
        seeds = tuple(dict.fromkeys(spec["grid"]["seeds"]))
        if grouping == "none" or len(seeds) < 2:
            continue
        if grouping == "together":
            settings = {**(config.get("train") or {}), **(spec.get("train") or {})}
            # One depth stands for the others: no setting that decides it varies with depth.
            depth = spec["grid"]["depths"][0]
            configs = [
                TrainConfig.from_mapping({**settings, "dataset": dataset, "model": model, "depth": depth})
                for dataset in spec["grid"]["datasets"] for model in grid.grid_models(spec["grid"])
            ]
            if any(why_not_seed_batched(config_.resolved()) for config_ in configs):
                continue
        candidates[name] = seeds
    if not candidates:
        return (), []
    lists = list(candidates.values())
    seeds = max(dict.fromkeys(lists), key=lists.count)
    return seeds, [name for name, group_seeds in candidates.items() if group_seeds == seeds]
