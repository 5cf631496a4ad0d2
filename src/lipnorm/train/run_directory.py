"""One training run and its run directory `out` (docs/architecture.md: `summary.json`,
`metrics.parquet`, `gradnorms.parquet`, `outnorms.parquet`, `layerstats.parquet`,
`train.log`), written atomically, resuming from and saving the training state beside it
(`lipnorm.train.run_state`). The entry points are `lipnorm.train.runs`.

`RunDirectory` is one run set up (its resolved settings, model and data ready, its
trainer) and what its directory is made of while it trains; `train_run` trains it
through the epoch loop (`lipnorm.train.loop`); `StateSaver` writes its training state.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dgl
import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

import lipnorm
from lipnorm import kernels
from lipnorm.io import atomic_dir, write_json, write_parquet
from lipnorm.settings.train_config import RESUME_INDIFFERENT, TrainConfig
from lipnorm.train import device as devices
from lipnorm.train import run_state
from lipnorm.train.loop import History, log, train_loop
from lipnorm.train.trainer import Setup, Trainer, prepare, select_epoch

METRICS_COLUMNS = [
    "epoch", "train_loss", "train_metric", "val_loss", "val_metric", "test_metric", "lr", "seconds"
]
GRADNORMS_COLUMNS = ["epoch", "layer", "kind", "group", "grad_norm"]
OUTNORMS_COLUMNS = ["epoch", "layer", "output_norm"]
LAYERSTATS_COLUMNS = ["epoch", "layer", "metric", "value"]


def _versions() -> dict[str, str]:
    return {
        "lipnorm": lipnorm.__version__,
        "torch": str(torch.__version__),  # a TorchVersion, which a state file would pickle as a class
        "dgl": dgl.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
    }


class _TqdmHandler(logging.Handler):
    """Messages to stderr without breaking the progress bar."""

    def emit(self, record: logging.LogRecord) -> None:
        tqdm.write(self.format(record), file=sys.stderr)


def _attach_log(path: Path, logger: logging.Logger = log, label: str = "") -> list[logging.Handler]:
    """train.log gets every message and one line per epoch; stderr the messages (each
    prefixed with `label`, e.g. "seed 3", where one process writes several runs)."""
    file_handler = logging.FileHandler(path)
    file_handler.setLevel(logging.DEBUG)
    file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    stderr_handler = _TqdmHandler()
    stderr_handler.setLevel(logging.INFO)
    prefix = f"lipnorm train [{label}]: " if label else "lipnorm train: "
    stderr_handler.setFormatter(logging.Formatter(prefix + "%(message)s"))
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    for handler in (file_handler, stderr_handler):
        logger.addHandler(handler)
    return [file_handler, stderr_handler]


def _detach_log(handlers: list[logging.Handler], logger: logging.Logger = log) -> None:
    for handler in handlers:
        logger.removeHandler(handler)
        handler.close()


def _epoch_record(row: dict[str, float] | None) -> dict[str, float] | None:
    if row is None:
        return None
    return {
        "epoch": row["epoch"],
        "train": row["train_metric"],
        "val": row["val_metric"],
        "test": row["test_metric"],
    }


def train_run(job: RunDirectory, note: str | None = None) -> dict[str, Any]:
    """Train `job` alone, from its start or its saved state, and write its directory;
    `note` is logged after its settings (e.g. why a group trains it alone)."""
    with contextlib.ExitStack() as stack:
        job.open(stack)
        if note:
            job.logger.info("%s", note)
        with run_state.StopSignals() as stop:
            job.history = train_loop(job.config, job.trainer, job.history, job.save, stop, job.logger)
        if stop.requested:
            raise job.interrupted(stop)
        summary = job.finish()
    job.state_file.unlink(missing_ok=True)
    return summary


class RunDirectory:
    """One run: its settings resolved, its model and data ready (`prepare`), its trainer,
    and what its directory `out` is made of while it trains: the history so far (from
    its saved state, if any), its log, its state saver.

    `open(stack)` starts writing (a temporary directory renamed onto `out` when `stack`
    closes without an error; train.log attached to `logger`) and resumes the saved
    state (or, with `own_streams`, for runs set up side by side in one process, the
    random streams its own set-up left); `finish()` writes the summary and the parquet
    files; `interrupted(stop)` saves the state after a stop signal and gives the
    exception to raise.
    """

    def __init__(self, config: TrainConfig, out: str | Path, started: float,
                 logger: logging.Logger = log, label: str = "", own_streams: bool = False, dataset=None):
        """`config`: resolved (`lipnorm.train.targets.run_targets`), read as it is and
        recorded as it is. `dataset`: `config`'s, loaded already (by another seed's run
        in this process)."""
        self.started, self.logger, self.label, self.out = started, logger, label, Path(out)
        kernels.reset(paths_only=True)  # the summary records the paths this run's calls take
        self.config = config
        # An unusable device fails in `prepare`, before any file is written.
        self.setup = prepare(config, dataset)
        self.trainer = Trainer(self.setup, config)
        self.state_file = run_state.state_path(out)
        self.saved, self.unreadable = _saved_state(self.state_file, self.config)
        self.history, self.resumed_from_epochs, self.earlier_s = History(), [], 0.0
        self.tmp: Path | None = None
        self.save: StateSaver | None = None
        # Where several runs are set up in one process (`own_streams`), every random stream
        # as `prepare` left this one, restored by `open`: they share the global streams.
        self.prepared_streams = self.trainer.random_streams.state_dict() if own_streams else None
        # The state of torch's stream that its training draws from (after `prepare` or
        # the resumed state): what seeds trained together draw each seed's from.
        self.torch_state = torch.get_rng_state()
        # The part of the process's time that is this run's (1/S for S seeds trained together).
        self.time_share = 1.0

    def open(self, stack: contextlib.ExitStack) -> None:
        config, setup, logger = self.config, self.setup, self.logger
        self.tmp = stack.enter_context(atomic_dir(self.out))
        log_path = self.tmp / "train.log"
        if self.saved is not None:
            log_path.write_text(self.saved["log"])  # the earlier attempts' log, continued
        stack.callback(_detach_log, _attach_log(log_path, logger, self.label), logger)
        if self.unreadable is not None:
            logger.warning("%s: not resuming from it, starting the run over", self.unreadable)
        logger.info(
            "%s on %s (%d nodes, %d classes, metric %s), %d feature rows erased, "
            "%d parameters, %d thread(s), recipe %s, features %s",
            config.model, config.dataset, setup.features.shape[0],
            setup.dataset.num_classes, setup.dataset.metric, setup.erased,
            _num_params(setup.model), config.threads, config.recipe,
            "as stored (not row-normalised)" if config.raw_features else "as loaded",
        )
        logger.info("settings: %s", json.dumps(dataclasses.asdict(config), sort_keys=True))
        if setup.batches is not None:
            logger.info(
                "cluster batches: %d METIS partitions (%s), %d per batch, %d batches an epoch; %s",
                setup.batches.partitions, setup.batches.cache_path, setup.batches.batch_partitions,
                math.ceil(setup.batches.partitions / setup.batches.batch_partitions), setup.batches.reason,
            )
        if self.saved is None:
            if self.prepared_streams is not None:
                self.trainer.random_streams.load_state_dict(self.prepared_streams)
        else:
            self.trainer.load_state_dict(self.saved["trainer"])
            self.history = History(**self.saved["history"])
            self.resumed_from_epochs = [*self.saved["resumed_from_epochs"], self.history.epochs_done]
            self.earlier_s = self.saved["elapsed_s"]
            logger.info("resuming after epoch %d from the training state %s", self.history.epochs_done, self.state_file)
            self.torch_state = torch.get_rng_state()
        self.save = StateSaver(
            self.state_file, config, self.trainer, log_path, self.resumed_from_epochs, self.earlier_s, self.started,
            self.time_share,
        )
        run_state.remove_stale_temporaries(self.state_file)

    def interrupted(self, stop: run_state.StopSignals) -> run_state.RunInterrupted:
        """Save the state after a stop signal; the exception that ends the run."""
        epochs = self.history.epochs_done
        self.logger.warning("%s received: saving the training state after epoch %d to %s", stop.name, epochs, self.state_file)
        self.save(self.history)
        interrupted = run_state.RunInterrupted(stop.signal_number, epochs, self.state_file)
        self.logger.warning(
            "stopped; exit code %d (a failure, so that Snakemake and SLURM retry the job): "
            "the same command resumes after epoch %d",
            interrupted.exit_code, epochs,
        )
        return interrupted

    def finish(self) -> dict[str, Any]:
        """Write the summary and the parquet files into the open directory; the summary."""
        config, history = self.config, self.history
        elapsed = self.earlier_s + self.time_share * (time.perf_counter() - self.started)
        summary = _summary(config, self.setup, history, elapsed, self.resumed_from_epochs)
        self.logger.info(
            "%s after %d epoch(s): test %s %s (protocol %s), best val epoch %s",
            summary["status"], summary["epochs_run"], summary["metric"],
            summary["test_metric"], config.protocol, summary["best_epoch"],
        )
        frames = {
            "metrics.parquet": pd.DataFrame(history.metrics, columns=METRICS_COLUMNS),
            "gradnorms.parquet": pd.DataFrame(history.gradnorms, columns=GRADNORMS_COLUMNS),
            "outnorms.parquet": pd.DataFrame(history.outnorms, columns=OUTNORMS_COLUMNS),
            "layerstats.parquet": pd.DataFrame(history.layerstats, columns=LAYERSTATS_COLUMNS),
        }
        for name, frame in frames.items():
            write_parquet(self.tmp / name, frame)
        write_json(self.tmp / "summary.json", summary)  # last: its presence marks a finished run
        return summary


@dataclass
class StateSaver:
    """`saver(history)` writes the training state of a run to `path` (`lipnorm.train.run_state`):
    what `run` resumes from."""

    path: Path
    config: TrainConfig
    trainer: Trainer
    log_path: Path  # the run's train.log so far
    resumed_from_epochs: list[int]
    earlier_s: float  # wall time of the earlier attempts, up to their last save
    started: float  # `time.perf_counter()` when this attempt started
    time_share: float = 1.0  # the part of the process's time that is this run's

    def __call__(self, history: History) -> None:
        run_state.write_state(self.path, {
            "config": dataclasses.asdict(self.config),
            "versions": _versions(),
            "trainer": self.trainer.state_dict(),
            "history": dict(vars(history)),  # shallow: the rows are pickled as they are
            "resumed_from_epochs": self.resumed_from_epochs,
            "elapsed_s": self.earlier_s + self.time_share * (time.perf_counter() - self.started),
            "log": self.log_path.read_text(),
        })


def _saved_state(path: Path, config: TrainConfig) -> tuple[dict[str, Any] | None, str | None]:
    """`(state, None)` for a state at `path` that this run may resume from, `(None, reason)`
    for an unreadable one, `(None, None)` for none; ValueError for one saved by other
    settings or versions (`run_state.check_resumable`)."""
    if not path.exists():
        return None, None
    try:
        state = run_state.read_state(path)
    except run_state.UnreadableState as err:
        return None, str(err)
    run_state.check_resumable(
        state, dataclasses.asdict(config), _versions(), path, ignored=RESUME_INDIFFERENT
    )
    return state, None


def _num_params(model: torch.nn.Module) -> int:
    return sum(param.numel() for param in model.parameters() if param.requires_grad)


def _summary(
    config: TrainConfig,
    setup: Setup,
    history: History,
    wall_time_s: float,
    resumed_from_epochs: list[int],
) -> dict[str, Any]:
    rows, diverged_epoch = history.metrics, history.diverged_epoch
    val_metrics = [row["val_metric"] for row in rows]
    best = rows[select_epoch("best-val", val_metrics)] if rows else None
    reported = rows[select_epoch(config.protocol, val_metrics)] if rows else None
    return {
        "config": dataclasses.asdict(config),
        "status": "ok" if diverged_epoch is None else "diverged",
        "diverged_epoch": diverged_epoch,
        "metric": setup.dataset.metric,
        "test_metric": reported["test_metric"] if reported else None,
        "final": _epoch_record(rows[-1] if rows else None),
        "best_val": _epoch_record(best),
        "best_epoch": best["epoch"] if best else None,
        "epochs_run": len(rows),
        "wall_time_s": wall_time_s,
        "resumed_from_epochs": resumed_from_epochs,
        "mean_epoch_s": float(np.mean([row["seconds"] for row in rows])) if rows else None,
        "peak_memory_mb": devices.peak_memory_mb(setup.device),
        "num_params": _num_params(setup.model),
        "versions": _versions(),
        "kernels": kernels.record(),  # which path each kernel family took, and the build
        "device": str(setup.device),  # what `config.device` resolved to (`auto`: cuda or cpu)
        "threads": torch.get_num_threads(),
        # K and B of `batching="cluster"` as used: the config's, or sized by the graph where it left them None
        "cluster_batches": None if setup.batches is None else {
            "partitions": setup.batches.partitions, "batch_partitions": setup.batches.batch_partitions,
            "reason": setup.batches.reason,
        },
    }
