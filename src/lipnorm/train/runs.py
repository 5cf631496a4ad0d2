"""The entry points that train: `run(config, out)`, one run; `run_seeds(config, seeds,
out)`, the runs of several seeds in one process; `train_targets(targets)`, what `lipnorm
train` calls with the runs `lipnorm.train.targets.run_targets` checked.

The road of a setting (docs/architecture.md): the command line, a config file or the
Python API make one `TrainConfig` (`lipnorm.settings.train_config.load_config`, or the
constructor); `run_targets` resolves it once per run (`TrainConfig.resolved`: validated,
every default filled); the run (`lipnorm.train.run_directory.RunDirectory`) reads that
resolved config as it is: `prepare` derives the model's settings from it
(`TrainConfig.model_config`), `Trainer` its optimiser and protocol, `train_loop` its
epochs and logging, and summary.json records it unchanged (what loading decides, the
device `auto` resolved to and the cluster batches' K and B, is recorded beside it).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Sequence

from lipnorm.settings.train_config import TrainConfig
from lipnorm.train.run_directory import RunDirectory, train_run
from lipnorm.train.targets import run_targets

__all__ = ["run", "run_seeds", "train_targets"]


def run(config: TrainConfig, out: str | Path) -> dict[str, Any]:
    """Train as `config` says and write the run directory `out`; returns the summary.

    Settings are validated before anything is loaded or created. A non-finite training
    loss, gradient norm or validation loss ends the run early with status "diverged"
    (not an error). Any exception leaves no `out` behind; a finished run in `out` is
    replaced (the command line refuses it unless given --overwrite).

    The training state is saved to `run_state.state_path(out)` every `save_every` epochs
    and, after the epoch under way, on SIGTERM or SIGINT, which then raise
    `run_state.RunInterrupted`. A call that finds a state resumes from it and deletes it
    once `out` is written; a state saved by other settings or versions is a ValueError
    naming them, an unreadable one is logged and the run starts over.
    """
    return train_targets(run_targets(config, str(out), overwrite=True))[0]


def run_seeds(config: TrainConfig, seeds: Sequence[int], out: str) -> list[dict[str, Any]]:
    """Train `config` for each of `seeds` in this process and write each seed's run
    directory (`out` with ``{seed}`` replaced; so is the mask path); the summaries.
    Seeds whose architecture registers a `seed_batch` network train as one network
    (`lipnorm.train.seed_batch`), the others one after another.

    A seed whose settings are invalid fails before anything is written, as a separate run.
    """
    return train_targets(run_targets(config, out, seeds, overwrite=True), seed_list=True)


def train_targets(targets: Sequence[tuple[TrainConfig, str]], seed_list: bool = False) -> list[dict[str, Any]]:
    """Train `targets`, `(resolved settings, run directory)` pairs from `run_targets`:
    one run alone, or (several, or `seed_list`: the command named its seeds) the seeds of
    one configuration in this process (`lipnorm.train.seed_batch.train_seeds`); the
    summaries."""
    if len(targets) == 1 and not seed_list:
        (config, out), = targets
        return [train_run(RunDirectory(config, out, time.perf_counter()))]
    from lipnorm.train.seed_batch import train_seeds

    return train_seeds(targets)
