"""What a `lipnorm train` command will write, checked before anything is imported or
trained: each run's settings and run directory, one, or one per seed (`--seeds`: `out`
and the mask path name each seed's with ``{seed}``), every setting validated and
resolved (`TrainConfig.resolved`), and no finished run replaced unless `--overwrite`
says so. `lipnorm.train.runs.train_targets` trains what `run_targets` returns.

Torch-free (as `lipnorm.settings`): a bad setting or a finished run's folder is refused
before `lipnorm train` imports torch and DGL.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Sequence

from lipnorm.settings.train_config import TrainConfig

__all__ = ["FINISHED_MARK", "SEED_FIELD", "check_seeds", "finished", "refuse_finished", "run_targets", "seed_paths"]

SEED_FIELD = "{seed}"
# Written last into a run directory (`lipnorm.train.run_directory`): a run directory
# holding it is a finished run; one without it is unfinished, and a rerun replaces it.
FINISHED_MARK = "summary.json"


def seed_paths(pattern: str, seeds: Sequence[int], what: str) -> list[str]:
    """`pattern` with ``{seed}`` replaced by each seed; `what` names it in errors."""
    if len(seeds) > 1 and SEED_FIELD not in pattern:
        raise ValueError(f"{what} {pattern!r} must contain {SEED_FIELD} to name each of the seeds {list(seeds)}")
    return [pattern.replace(SEED_FIELD, str(seed)) for seed in seeds]


def check_seeds(seeds: Sequence[int]) -> list[int]:
    """`seeds` as a list, else ValueError for none or a repeated one."""
    seeds = list(seeds)
    if not seeds:
        raise ValueError("seeds: got none; give one or more, e.g. 0,1,2,3,4")
    repeated = sorted({seed for seed in seeds if seeds.count(seed) > 1})
    if repeated:
        raise ValueError(f"seeds {seeds} repeat {repeated}: each seed is one run")
    return seeds


def seed_configs(config: TrainConfig, seeds: Sequence[int], out: str) -> list[tuple[TrainConfig, str]]:
    """`(settings, run directory)` of each of `seeds`: `config` with that seed (and its
    mask path), `out` with ``{seed}`` replaced."""
    seeds = check_seeds(seeds)
    outs = seed_paths(str(out), seeds, "--out")
    masks = seed_paths(config.mask, seeds, "--mask") if config.mask is not None else [None] * len(seeds)
    return [(dataclasses.replace(config, seed=seed, mask=mask), path) for seed, mask, path in zip(seeds, masks, outs)]


def finished(out: str | Path) -> bool:
    """Whether the run directory `out` holds a finished run (its `FINISHED_MARK`)."""
    return (Path(out) / FINISHED_MARK).is_file()


def refuse_finished(out: str | Path) -> None:
    """ValueError naming `out` if it holds a finished run: `lipnorm train` keeps it
    unless given `--overwrite`."""
    if finished(out):
        raise ValueError(
            f"run directory {str(out)!r} holds a finished run ({FINISHED_MARK} present); it is left as it is. "
            "Give --overwrite to replace it, or another --out"
        )


def run_targets(
    config: TrainConfig, out: str, seeds: Sequence[int] | None = None, overwrite: bool = False
) -> list[tuple[TrainConfig, str]]:
    """`(settings, run directory)` of every run of a `lipnorm train` command (`seeds`
    None: the one run of `config`), the settings resolved (`TrainConfig.resolved`: the
    one place they are validated and their defaults filled; the run reads them as they
    are); without `overwrite`, a ValueError for any that holds a finished run, before
    anything is trained."""
    targets = [(config, str(out))] if seeds is None else seed_configs(config, seeds, out)
    resolved = [(settings.resolved(), path) for settings, path in targets]
    if not overwrite:
        for _, path in resolved:
            refuse_finished(path)
    return resolved
