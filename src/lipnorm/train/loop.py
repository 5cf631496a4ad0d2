"""The epoch loop of a training run: train, evaluate and record each epoch into its
`History` (the rows of the per-epoch parquet files, and where training stands), save
the training state every `save_every` epochs, stop after a divergence, an early stop or
a stop signal, and measure the last epoch's layer statistics.

`lipnorm.train.run_directory` runs it for one run; `lipnorm.train.seed_batch` calls its
parts (`progress_bar`, `logged_epoch`, `record_epoch`, `end_training`) for several seeds
trained as one network.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import sys
import time
from dataclasses import dataclass
from typing import Callable

from tqdm import tqdm

from lipnorm.settings.train_config import TrainConfig
from lipnorm.train.run_state import StopSignals
from lipnorm.train.trainer import Epoch, Trainer, gather, select_epoch

# Every run's messages: its train.log and stderr (`lipnorm.train.run_directory`).
log = logging.getLogger("lipnorm.train")


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


def train_loop(
    config: TrainConfig,
    trainer: Trainer,
    history: History | None = None,
    save: Callable[[History], None] | None = None,
    stop: StopSignals | None = None,
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


def end_training(config: TrainConfig, trainer: Trainer, history: History, stop: StopSignals | None) -> None:
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
    diverged = not step.converging
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


def _needs_last_stats(config: TrainConfig, history: History, stop: StopSignals | None) -> bool:
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
