"""Training: one run of node classification, full batch or on Cluster-GCN batches
(`batching`, `lipnorm.train.cluster_batches`), with per-layer gradient logging.

The public face is `run(config, out)` and `run_seeds(config, seeds, out)` (`runs`, the
entry points, which also say the road a setting takes) and their settings, `TrainConfig`
(whose home is `lipnorm.settings.train_config`, with `load_config`; the recipes' defaults
are `lipnorm.settings.recipes`).
The parts live one concern a module of this package: the entry points (`runs`), a run
and its directory (`run_directory`), the epoch loop (`loop`), the model and data made ready and the
training steps (`trainer`), the logging hooks (`hooks`), the saved training state
(`run_state`), the process-wide settings (`process`), the device (`device`), the cluster
batches (`cluster_batches`) and several seeds in one process (`seed_batch`, `lipnorm
train --seeds`). Torch-free: what a command will write, checked before it trains
(`targets`), and which runs' seeds train as one seed batch, from their settings
(`seed_batch_plan`).

`run(config, out)` validates the settings, loads the dataset, erases the feature rows of
the missing-features mask, trains with Adam and evaluates every epoch, and writes the
run directory of docs/architecture.md (`summary.json`, `metrics.parquet`,
`gradnorms.parquet`, `outnorms.parquet`, `layerstats.parquet`, `train.log`) atomically.

Training state (`lipnorm.train.run_state`): every `save_every` epochs, and when SIGTERM
or SIGINT arrives (at the end of the epoch under way), the model, optimizer, scheduler,
random streams, the rows so far and the log are saved beside `out` (`run_state.state_path`).
The same call finds that state, refuses it if another configuration or version saved it,
and continues: the run directory is the one an uninterrupted run writes (timings
excepted). After a signal the run raises `run_state.RunInterrupted` (the CLI's exit code
128 + N).

Per-layer representation diagnostics (`lipnorm.train.diagnostics`: Dirichlet energy, MAD,
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
- "lipnorm" (default): this project's settings, `lipnorm.settings.recipes.LIPNORM_DEFAULTS`.
- "official": what the authors' `train_deepgat_missing.py` runs (`lipnorm.settings.recipes`:
  `OFFICIAL_DEFAULTS`, `official_epochs`): their DeepGAT (`ModelConfig.recipe`), 8 heads
  x 64, LipschitzNorm variant "official", Adam lr 0.01 with weight decay 5e-4, protocol
  "official", epochs by depth as their launcher, and the planetoid datasets' features as
  stored (PyG's `Planetoid` does not row-normalise them; DGL's loader does, see
  `lipnorm.data.load_dataset(raw_features=...)`); other datasets are loaded as always,
  their loaders not normalising.
A setting given explicitly wins over the recipe's default, e.g. `epochs=150` for a
reduced official run.
"""

from lipnorm.settings.train_config import TrainConfig

__all__ = ["TrainConfig", "run", "run_seeds"]


def __getattr__(name: str):
    # `run` and `run_seeds` on first access: their modules import torch and DGL, which the
    # torch-free modules of this package (`targets`, `seed_batch_plan`) and their readers
    # (the CLI before it trains, the workflow's parsing) do without.
    if name in ("run", "run_seeds"):
        from lipnorm.train import runs

        globals()[name] = getattr(runs, name)  # later accesses skip this function
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
