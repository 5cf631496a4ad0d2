"""Cost of saving the training state (`lipnorm.train.run_state`) against the epochs between saves.

For cases of the paper grid whose epochs are the cheapest (the smallest models on Cora),
in one process: after a warm-up, rounds alternate a block of epochs (train step +
evaluation + gather + the layer statistics of logged epochs, as an epoch of `lipnorm
train`) with one save of the run's state as `lipnorm train` writes it (`StateSaver`:
model, optimizer, random streams, every row and the log, checksummed, fsync'd, renamed)
into `--state-dir`. The history saved is as long as at the end of the case's run (the
rows of the measured epochs repeated up to its epoch count), the largest a save gets.
Medians over the rounds; the cost of saving every N epochs is save / (N x epoch).

    .venv/bin/python benchmarks/run_state_cost.py --mirror ../shared/datasets

Not a test: it prints the figures and exits 0 whatever they are.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from lipnorm.train import TrainConfig
from lipnorm.train.loop import History
from lipnorm.train.run_directory import StateSaver
from lipnorm.train.trainer import Trainer, gather, prepare

# name -> settings: the paper preset's cheapest epochs (classic, depth 1) and the largest
# histories (gradients: every epoch logged at depth 30).
CASES = {
    "classic cora d2 8x8 (1000 ep)": dict(model="gat-classic", depth=2, heads=8, hidden=8, epochs=1000),
    "depth cora gat d1 8x64 (1000 ep)": dict(model="gat", depth=1, heads=8, hidden=64, epochs=1000),
    "depth cora gat-lip d10 8x64 (1000 ep)": dict(model="gat-lip", depth=10, heads=8, hidden=64, epochs=1000),
    "gradients cora gat d30 4x64, log every epoch (300 ep)": dict(
        model="gat", depth=30, heads=4, hidden=64, epochs=300, grad_log_every=1
    ),
}
CANDIDATES = (10, 25, 50, 100)


def epochs_block(config: TrainConfig, trainer: Trainer, history: History, first: int, count: int) -> float:
    """Mean wall seconds of `count` epochs from `first`, their rows added to `history`."""
    start = time.perf_counter()
    for epoch in range(first, first + count):
        logged = (epoch - 1) % config.grad_log_every == 0
        step = gather(trainer.train_step(), trainer.evaluate(logged))
        history.metrics.append({"epoch": epoch, "train_loss": step.loss, "train_metric": step.train_metric,
                                "val_loss": step.val_loss, "val_metric": step.val_metric,
                                "test_metric": step.test_metric, "lr": trainer.lr, "seconds": 0.0})
        if logged:
            history.gradnorms += [(epoch, *key, n) for key, n in zip(trainer.gradient_norms.keys, step.grad_norms)]
            history.outnorms += [(epoch, layer, n) for layer, n in zip(trainer.output_norms.layers, step.output_norms)]
            history.layerstats += trainer.layer_stats.rows(epoch)
    return (time.perf_counter() - start) / count


def full_length(history: History, measured: int, epochs: int) -> History:
    """`history` of `measured` epochs repeated to the length of a run of `epochs`."""
    times = -(-epochs // measured)
    return dataclasses.replace(
        history,
        metrics=(history.metrics * times)[:epochs],
        gradnorms=history.gradnorms * times,
        outnorms=history.outnorms * times,
        layerstats=history.layerstats * times,
        epochs_done=epochs,
    )


def measure(name: str, settings: dict, args: argparse.Namespace, state_dir: Path) -> dict[str, float]:
    config = TrainConfig(
        dataset="cora", mirror=args.mirror, data_root=args.data_root, threads=args.threads, **settings
    ).resolved()
    setup = prepare(config)
    trainer = Trainer(setup, config)
    history = History()
    epochs_block(config, trainer, history, 1, args.warmup)
    epoch_s, save_s = [], []
    log_path = state_dir / "train.log"
    line = "2026-01-01 00:00:00,000 DEBUG epoch 1000 loss 0.123456 train 0.9000 val_loss 0.654321 val 0.8000 test 0.8100 lr 0.01\n"
    log_path.write_text(line * config.epochs)
    saver = StateSaver(state_dir / "run.state.pt", config, trainer, log_path, [], 0.0, time.perf_counter())
    next_epoch = 1 + args.warmup
    for _ in range(args.rounds):
        epoch_s.append(epochs_block(config, trainer, history, next_epoch, args.block))
        next_epoch += args.block
        saved = full_length(history, next_epoch - 1, config.epochs)
        start = time.perf_counter()
        saver(saved)
        save_s.append(time.perf_counter() - start)
    size_mb = saver.path.stat().st_size / 1e6
    result = {"epoch_s": statistics.median(epoch_s), "save_s": statistics.median(save_s), "size_mb": size_mb}
    costs = "  ".join(f"every {n}: {100 * result['save_s'] / (n * result['epoch_s']):.2f} %" for n in CANDIDATES)
    print(
        f"{name}: epoch {1e3 * result['epoch_s']:.1f} ms, save {1e3 * result['save_s']:.1f} ms "
        f"({size_mb:.1f} MB) = {result['save_s'] / result['epoch_s']:.2f} epochs; cost {costs}",
        flush=True,
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", default=os.environ.get("LIPNORM_DATA_MIRROR"))
    parser.add_argument("--data-root", default="resources/datasets")
    parser.add_argument("--state-dir", default=".", help="folder for the state file (the results' filesystem)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--block", type=int, default=10, help="epochs between two saves measured")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--cases", nargs="*", default=list(CASES), help="names of CASES")
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load {load[0]:.2f}, "
          f"{args.threads} thread(s), state in {Path(args.state_dir).resolve()}")
    with tempfile.TemporaryDirectory(dir=args.state_dir, prefix=".run_state_cost.") as folder:
        for name in args.cases:
            measure(name, CASES[name], args, Path(folder))


if __name__ == "__main__":
    main()
