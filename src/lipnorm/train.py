"""One training run: node classification, full batch or on Cluster-GCN batches
(`batching`, `lipnorm.cluster_batches`), with per-layer gradient logging: the epoch loop
and the run directory. Its parts live one concern a module, their names importable from
here too: the settings (`lipnorm.train_config`), the model and data made ready and the
training steps (`lipnorm.trainer`), the logging hooks (`lipnorm.train_hooks`) and the
process-wide tuning (`lipnorm.tuning`).

`run(config, out)` validates the settings, loads the dataset, erases the feature rows of
the missing-features mask, trains with Adam and evaluates every epoch, and writes the
run directory of docs/architecture.md (`summary.json`, `metrics.parquet`,
`gradnorms.parquet`, `outnorms.parquet`, `layerstats.parquet`, `train.log`) atomically.

Training state (`lipnorm.run_state`): every `save_every` epochs, and when SIGTERM or SIGINT
arrives (at the end of the epoch under way), the model, optimizer, scheduler, random
streams, the rows so far and the log are saved beside `out` (`run_state.state_path`). The
same call finds that state, refuses it if another configuration or version saved it, and
continues: the run directory is the one an uninterrupted run writes (timings excepted).
After a signal the run raises `run_state.RunInterrupted` (the CLI's exit code 128 + N).

Per-layer representation diagnostics (`lipnorm.diagnostics`: Dirichlet energy, MAD,
Rayleigh quotient, attention entropy, output norm) are measured on the eval-mode
forward of the epochs whose gradient norms are logged, and once more after the last
epoch of a run that did not diverge. They read the forward `evaluate` runs anyway (one
extra eval forward at the end) and draw no random numbers, so a run's training numbers
are the same with and without them (`layer_stats=False`).

Protocols:
- "best-val": the test metric at the epoch of best validation metric (ties: the earlier
  epoch); `patience` stops training after that many epochs without a new best.
- "official": as the authors' public code: `ReduceLROnPlateau` (factor 0.1, patience 10)
  stepped on the validation loss every epoch, and the test metric of the last epoch.

Recipes (`TrainConfig.recipe`) supply the defaults of the settings left unset (None):
- "lipnorm" (default): this project's settings, `LIPNORM_DEFAULTS`.
- "official": what the authors' `train_deepgat_missing.py` runs (`OFFICIAL_DEFAULTS`,
  `official_epochs`): their DeepGAT (`ModelConfig.recipe`), 8 heads x 64, LipschitzNorm
  variant "official", Adam lr 0.01 with weight decay 5e-4, protocol "official", epochs by
  depth as their launcher, and the planetoid datasets' features as stored (PyG's
  `Planetoid` does not row-normalise them; DGL's loader does, see
  `lipnorm.data.load_dataset(raw_features=...)`); other datasets are loaded as always,
  their loaders not normalising.
A setting given explicitly wins over the recipe's default, e.g. `epochs=150` for a
reduced official run.
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
from typing import Any, Callable

import dgl
import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

import lipnorm
from lipnorm import data, run_state  # noqa: F401 (data: the loaders, patched in tests)
from lipnorm import device as devices
from lipnorm.device import resolve_device
from lipnorm.io import atomic_dir, write_json, write_parquet

# What a run is made of, one concern a module; their names stay importable from here.
from lipnorm.nn.models import attention_layers  # noqa: F401
from lipnorm.recipes import LIPNORM_DEFAULTS, OFFICIAL_DEFAULTS, RECIPES, official_epochs, recipe_defaults  # noqa: F401
from lipnorm.train_config import (  # noqa: F401
    MODEL_SETTINGS,
    PROTOCOLS,
    RESUME_INDIFFERENT,
    SAVE_EVERY,
    TrainConfig,
    load_config,
    norm_extras,
)
from lipnorm.train_hooks import GradientNorms, LayerStats, OutputNorms  # noqa: F401
from lipnorm.trainer import (  # noqa: F401
    PLATEAU_FACTOR,
    PLATEAU_PATIENCE,
    Epoch,
    Setup,
    StepResult,
    Trainer,
    compute_metric,
    gather,
    make_scheduler,
    prepare,
    select_epoch,
)
from lipnorm.tuning import (  # noqa: F401
    M_MMAP_THRESHOLD,
    M_TRIM_THRESHOLD,
    RETAINED_ALLOCATION_BYTES,
    retain_freed_memory,
    seed_everything,
    set_flush_denormal,
)


def __getattr__(name: str):
    # `NORM_EXTRAS`: computed on access, since plugins register more.
    if name == "NORM_EXTRAS":
        return norm_extras()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

METRICS_COLUMNS = [
    "epoch", "train_loss", "train_metric", "val_loss", "val_metric", "test_metric", "lr", "seconds"
]
GRADNORMS_COLUMNS = ["epoch", "layer", "kind", "group", "grad_norm"]
OUTNORMS_COLUMNS = ["epoch", "layer", "output_norm"]
LAYERSTATS_COLUMNS = ["epoch", "layer", "metric", "value"]

log = logging.getLogger("lipnorm.train")


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


def run(config: TrainConfig, out: str | Path) -> dict[str, Any]:
    """Train as `config` says and write the run directory `out`; returns the summary.

    Settings are validated before anything is loaded or created. A non-finite training
    loss, gradient norm or validation loss ends the run early with status "diverged"
    (not an error). Any exception leaves no `out` behind.

    The training state is saved to `run_state.state_path(out)` every `save_every` epochs
    and, after the epoch under way, on SIGTERM or SIGINT, which then raise
    `run_state.RunInterrupted`. A call that finds a state resumes from it and deletes it
    once `out` is written; a state saved by other settings or versions is a ValueError
    naming them, an unreadable one is logged and the run starts over.
    """
    return train_run(RunDirectory(config, out, time.perf_counter()))


def train_run(job: RunDirectory, note: str | None = None) -> dict[str, Any]:
    """Train `job` alone, from its start or its saved state, and write its directory;
    `note` is logged after its settings (e.g. why a group trains it alone)."""
    with contextlib.ExitStack() as stack:
        job.open(stack)
        if note:
            job.logger.info("%s", note)
        with run_state.StopSignals() as stop:
            job.history = _train_loop(job.config, job.trainer, job.history, job.save, stop, job.logger)
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
                 logger: logging.Logger = log, label: str = "", own_streams: bool = False):
        self.started, self.logger, self.label, self.out = started, logger, label, Path(out)
        config = config.resolved()
        # `auto` becomes the device it resolved to; an unusable one fails here, before any file.
        config = dataclasses.replace(config, device=str(resolve_device(config.device)))
        self.setup = prepare(config)
        self.config = dataclasses.replace(
            config, feat_drop=self.setup.model_config.feat_drop, attn_drop=self.setup.model_config.attn_drop
        )
        self.trainer = Trainer(
            self.setup, config.lr, config.weight_decay, config.protocol, dropedge=config.dropedge, seed=config.seed
        )
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
                "cluster batches: %d METIS partitions (%s), %d per batch, %d batches an epoch",
                setup.batches.partitions, setup.batches.cache_path, setup.batches.batch_partitions,
                math.ceil(setup.batches.partitions / setup.batches.batch_partitions),
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
    """`saver(history)` writes the training state of a run to `path` (`lipnorm.run_state`):
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


@dataclass
class History:
    """Rows of the per-epoch parquet files, and where training stands: what a resumed run
    continues from."""

    metrics: list[dict[str, float]] = dataclasses.field(default_factory=list)
    gradnorms: list[tuple] = dataclasses.field(default_factory=list)
    outnorms: list[tuple] = dataclasses.field(default_factory=list)
    layerstats: list[tuple] = dataclasses.field(default_factory=list)
    diverged_epoch: int | None = None
    stats_epoch: int | None = None  # the last epoch whose layer statistics were recorded
    epochs_done: int = 0  # epochs trained, a diverged one included
    finished: bool = False  # no epoch left: the last one, an early stop or a divergence


def _train_loop(
    config: TrainConfig,
    trainer: Trainer,
    history: History | None = None,
    save: Callable[[History], None] | None = None,
    stop: run_state.StopSignals | None = None,
    logger: logging.Logger = log,
) -> History:
    """Train the epochs after `history.epochs_done` (a fresh `History`: all of them).

    `save(history)` is called every `config.save_every` epochs that training goes on
    after. When `stop` is requested, the loop ends after the epoch under way, without the
    last epoch's layer statistics, which the resumed run adds.
    """
    history = History() if history is None else history
    bar = progress_bar(config, history)
    for epoch in bar:
        epoch_start = time.perf_counter()
        lr = trainer.lr
        with_stats = logged_epoch(config, epoch) and config.layer_stats
        step = gather(trainer.train_step(), trainer.evaluate(with_stats))
        if record_epoch(config, trainer, history, epoch, step, lr, time.perf_counter() - epoch_start, with_stats, logger):
            break
        bar.set_postfix(loss=f"{step.loss:.4f}", val=f"{step.val_metric:.4f}", refresh=False)
        if stop is not None and stop.requested:
            break
        if save is not None and not history.finished and epoch % config.save_every == 0:
            save(history)
    bar.close()
    end_training(config, trainer, history, stop)
    return history


def end_training(config: TrainConfig, trainer: Trainer, history: History, stop: run_state.StopSignals | None) -> None:
    """What a run does once its epochs end: measure the last epoch's layer statistics
    where they are still to be measured (`_needs_last_stats`), remove its hooks."""
    if _needs_last_stats(config, history, stop):
        trainer.evaluate(layer_stats=True)
        history.layerstats += trainer.layer_stats.rows(history.metrics[-1]["epoch"])
    trainer.output_norms.remove()
    trainer.layer_stats.remove()


def progress_bar(config: TrainConfig, history: History, label: str = "train") -> tqdm:
    """The epochs left after `history`, as a progress bar on stderr."""
    return tqdm(
        range(history.epochs_done + 1, 0 if history.finished else config.epochs + 1),
        desc=label, unit="epoch", file=sys.stderr, mininterval=1.0, dynamic_ncols=True,
        initial=history.epochs_done, total=config.epochs,
    )


def logged_epoch(config: TrainConfig, epoch: int) -> bool:
    """Whether `epoch` logs its gradient norms (and layer statistics): epoch 1 always,
    since the gradients at initialisation matter most, then every `grad_log_every`."""
    return (epoch - 1) % config.grad_log_every == 0


def record_epoch(
    config: TrainConfig, trainer: Trainer, history: History, epoch: int, step: Epoch, lr: float,
    seconds: float, with_stats: bool, logger: logging.Logger = log,
) -> bool:
    """Add epoch `epoch` (its training step and evaluation `step`, taken at learning rate
    `lr` in `seconds`; `with_stats`: its layer statistics are in `trainer.layer_stats`) to `history`,
    step the scheduler, log it; True when training ends here (the last epoch, a
    divergence, an early stop)."""
    history.epochs_done = epoch
    val_loss, train_metric, val_metric, test_metric = step.val_loss, step.train_metric, step.val_metric, step.test_metric
    if not step.finite:  # the evaluation saw the model after a non-finite step
        val_loss = train_metric = val_metric = test_metric = math.nan
        trainer.layer_stats.captured.clear()
    elif with_stats:
        history.layerstats += trainer.layer_stats.rows(epoch)
        history.stats_epoch = epoch
    diverged = not math.isfinite(val_loss)
    # The diverged epoch's gradient norms are kept whatever the interval: they show
    # what blew up.
    if logged_epoch(config, epoch) or diverged:
        history.gradnorms += [
            (epoch, *key, norm) for key, norm in zip(trainer.gradient_norms.keys, step.grad_norms)
        ]
        history.outnorms += [
            (epoch, layer, norm) for layer, norm in zip(trainer.output_norms.layers, step.output_norms)
        ]
    if diverged:
        history.diverged_epoch = epoch
        history.finished = True
        logger.warning(
            "diverged at epoch %d: train loss %r, largest gradient-group norm %r, "
            "validation loss %r",
            epoch, step.loss, max(step.grad_norms, key=_nan_last), val_loss,
        )
        return True
    if trainer.scheduler is not None:
        trainer.scheduler.step(val_loss)
    history.metrics.append(
        {
            "epoch": epoch,
            "train_loss": step.loss,
            "train_metric": train_metric,
            "val_loss": val_loss,
            "val_metric": val_metric,
            "test_metric": test_metric,
            "lr": lr,
            "seconds": seconds,
        }
    )
    logger.debug(
        "epoch %d loss %.6g train %.4f val_loss %.6g val %.4f test %.4f lr %.3g",
        epoch, step.loss, train_metric, val_loss, val_metric, test_metric, lr,
    )
    history.finished = epoch == config.epochs
    if config.patience is not None:
        val_metrics = [row["val_metric"] for row in history.metrics]
        best_epoch = history.metrics[select_epoch("best-val", val_metrics)]["epoch"]
        if epoch - best_epoch >= config.patience:
            logger.info("early stop at epoch %d: no better val metric since epoch %d", epoch, best_epoch)
            history.finished = True
    return history.finished


def _needs_last_stats(config: TrainConfig, history: History, stop: run_state.StopSignals | None) -> bool:
    """Whether the last epoch's representations are still to be measured: unless that
    epoch was logged (the forward of `evaluate` is deterministic, so repeating it gives
    the ones that epoch saw), the run was stopped by a signal, or it diverged (the model
    is no longer the last epoch's)."""
    last_epoch = history.metrics[-1]["epoch"] if history.metrics else None
    return (
        config.layer_stats
        and not (stop is not None and stop.requested)
        and history.diverged_epoch is None
        and last_epoch is not None
        and last_epoch != history.stats_epoch
    )


def _nan_last(value: float) -> float:
    """Sort key putting NaN above everything, so `max` reports it."""
    return math.inf if math.isnan(value) else value


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
        "device": str(setup.device),
        "threads": torch.get_num_threads(),
    }
