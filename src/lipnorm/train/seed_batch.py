"""Runs that differ only by their seed, trained in one process (`lipnorm train --seeds`),
as one network where they can: a seed batch (`SeedBatch`).

A grid repeats each configuration over seeds, and on small graphs a run's cost is its
process start-up and per-call overhead, not arithmetic (issue: grids of small runs).
`lipnorm.train.runs.run_seeds(config, seeds, out)` (here: `train_seeds`) pays the start-up once for S seeds and writes the S run
directories that S separate `lipnorm train --seed s` runs write (`out` and the mask path
name each seed's with ``{seed}``):

- where the architecture registers a network of several seeds (`seed_batch`,
  `lipnorm.registry`; GAT's is `lipnorm.nn.models.seed_batch.seed_batched`, which holds the
  literature GAT of ``--recipe dgn`` as `SeedBatchedGAT` and SNR's of ``--recipe snr`` as
  `lipnorm.nn.models.seed_batch_snr.SeedBatchedSNR`) that takes these models, and nothing else in the
  run differs per seed, the S seeds are that one network trained by one Adam
  (`SeedBatch`): each seed keeps its parameters, initialisation, dropout stream,
  optimiser state, BatchNorm statistics, DropEdge stream (its edges a mask over the one
  graph), best-validation epoch, gradient and output norms and layer statistics, equal
  to its separate run's to float rounding;
- otherwise (cluster batches, a learning-rate schedule, patience, a GPU, an
  architecture without that form, e.g. a plugin's), the seeds are trained one after
  another in this process, and each run's train.log says why.

Which runs' seeds the workflow groups is decided from their settings alone
(`lipnorm.train.seed_batch_plan`); here it is decided again on the networks built.

Each seed's run is its own `RunDirectory`: its own train.log, training state (saved
every `save_every` epochs and on SIGTERM, resumed by the same command) and directory,
renamed into place when the group ends. A seed that diverges ends at that epoch, as its
separate run does; its part of the network is zeroed, and the others train on.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F

from lipnorm import registry
from lipnorm.settings.train_config import TrainConfig
from lipnorm.train import run_state
from lipnorm.train.loop import end_training, logged_epoch, progress_bar, record_epoch
from lipnorm.train.run_directory import RunDirectory, train_run
from lipnorm.train.seed_batch_plan import settings_reason
from lipnorm.train.trainer import Epoch, StepResult, compute_metric, gather

__all__ = ["train_seeds", "SeedBatch"]


def _why_not_seed_batched(config: TrainConfig, models: Sequence[torch.nn.Module]) -> str | None:
    """None if the seeds of `config` (resolved), whose networks are `models`, can be
    trained as one network (the architecture's `seed_batch` of them); else why not."""
    reason = settings_reason(config)
    if reason is not None:
        return reason
    try:
        registry.resolve(registry.architecture(config.architecture).seed_batch)(list(models))
    except ValueError as err:
        return str(err)
    return None


def train_seeds(targets: Sequence[tuple[TrainConfig, str]]) -> list[dict[str, Any]]:
    """Train the runs `targets` (`(resolved settings, run directory)` of one configuration's
    seeds, from `lipnorm.train.targets.run_targets`) in this process, as one network where
    their architecture's `seed_batch` holds them, else one after another; the summaries."""
    seeds = [settings.seed for settings, _ in targets]
    started = time.perf_counter()

    def job(index: int) -> RunDirectory:
        seed = seeds[index]
        return RunDirectory(*targets[index], started, logging.getLogger(f"lipnorm.train.seed{seed}"),
                            label=f"seed {seed}" if len(seeds) > 1 else "", own_streams=True,
                            dataset=first.setup.dataset if index else None)  # loaded once

    first = job(0)
    reason = _why_not_seed_batched(first.config, [first.setup.model] * 2) if len(seeds) > 1 else None
    jobs = [first]
    if reason is None:
        jobs += [job(index) for index in range(1, len(seeds))]
        resumed = {(job_.saved or {}).get("history", {}).get("epochs_done", 0) for job_ in jobs}
        if len(resumed) > 1:
            reason = f"their saved states stopped after different epochs ({sorted(resumed)})"
    if reason is not None:
        note = f"seeds {seeds} trained one after another in one process, not as one network: {reason}"
        summaries = []
        for index in range(len(seeds)):
            # The runs already set up first, each let go once trained; the others set up in turn.
            current = jobs.pop(0) if jobs else job(index)
            current.started = time.perf_counter()
            summaries.append(train_run(current, note if len(seeds) > 1 else None))
        return summaries
    batched = registry.resolve(registry.architecture(first.config.architecture).seed_batch)
    return SeedBatch(jobs, batched).train()


class SeedBatch:
    """S runs of one configuration trained as one network (their architecture's
    `seed_batch`, e.g. `lipnorm.nn.models.seed_batch.SeedBatchedGAT`).

    Each run's own `Trainer` (`RunDirectory.trainer`, its separate model and optimizer)
    holds its state where the run starts, saves and ends: the batched network and
    optimizer are made from them (`_from_runs`) and written back to them (`_to_runs`).
    """

    def __init__(self, jobs: Sequence[RunDirectory], batched: Callable[[list[torch.nn.Module]], torch.nn.Module]):
        """`batched(models)`: the architecture's `seed_batch` network of the runs' models."""
        self.jobs, self.batched = list(jobs), batched
        first = self.jobs[0]
        self.config = first.config
        setup = first.setup
        self.graph, self.labels, self.splits = setup.graph, setup.labels, setup.splits
        self.metric, self.loss_fn = setup.dataset.metric, first.trainer.loss_fn
        self.split_labels = [self.labels.index_select(0, split) for split in self.splits]
        features = [job.setup.features for job in self.jobs]
        # One (N, F) input where the seeds' masks agree (e.g. 100 % missing features).
        same = all(torch.equal(features[0], other) for other in features[1:])
        self.features = features[0] if same else torch.stack(features)
        self.active = [True] * len(self.jobs)  # still training
        self.retired: set[int] = set()  # diverged: their part of the network is zeroed

    # --- state: the runs' trainers <-> the batched network ------------------------------

    def _parameter_views(self, seed: int) -> list[tuple[torch.nn.Parameter, torch.nn.Parameter, Any]]:
        """`(run's parameter, batched parameter, index)` for every parameter of run `seed`,
        in the order of its `GradientNorms.params`."""
        views = self.model.seed_views(seed)
        trainer = self.jobs[seed].trainer
        names = {param: name for name, param in trainer.model.named_parameters()}
        return [(param, *views[names[param]]) for param in trainer.gradient_norms.params]

    def _from_runs(self) -> None:
        """The batched network, optimizer and random streams from the runs' trainers."""
        trainers = [job.trainer for job in self.jobs]
        self.model = self.batched([trainer.model for trainer in trainers])
        self.model.set_generators([job.torch_state for job in self.jobs])
        optimizer = trainers[0].optimizer
        self.optimizer = torch.optim.Adam(self.model.parameters(), **{
            key: value for key, value in optimizer.param_groups[0].items() if key != "params"
        })
        self.views = [self._parameter_views(seed) for seed in range(len(self.jobs))]
        self.seed_major = self._seed_major_gradients()
        for batched in self.model.parameters():
            parts = [
                (trainers[seed].optimizer.state.get(param), index)
                for seed, views in enumerate(self.views) for param, tensor, index in views if tensor is batched
            ]
            if all(state is None or not state for state, _ in parts):
                continue
            state = {"step": parts[0][0]["step"].clone()}
            for key in ("exp_avg", "exp_avg_sq"):
                buffer = torch.zeros_like(batched)
                for part, index in parts:
                    buffer[index] = part[key]
                state[key] = buffer
            self.optimizer.state[batched] = state
        self.layer_outputs: list[torch.Tensor] = []  # the training forward's, until its epoch is recorded
        for layer in self.model.layers:
            layer.register_forward_hook(self._keep_output)

    def _seed_major_gradients(self) -> list[torch.Tensor] | None:
        """The batched parameters, in the order of each run's `GradientNorms.params`, if
        seed s's part of each is row s of it reshaped to `(S, -1)` (so one norm along
        dim 1 gives every seed's); None if not (each seed's parts are then gathered)."""
        seeds = len(self.jobs)
        batched = [tensor for _, tensor, _ in self.views[0]]
        for seed, views in enumerate(self.views):
            for position, (_, tensor, index) in enumerate(views):
                if tensor is not batched[position] or tensor.numel() % seeds:
                    return None
                numbers = torch.arange(tensor.numel()).view(tensor.shape)
                if not torch.equal(numbers[index].flatten(), numbers.reshape(seeds, -1)[seed]):
                    return None
        return batched

    def _gradient_norms(self) -> list[torch.Tensor | None]:
        """Each active seed's gradient-group norms (its run's `GradientNorms`), None for
        the others: one norm per batched parameter where its seeds' parts are its rows."""
        seeds = len(self.jobs)
        grads = None if self.seed_major is None else [tensor.grad for tensor in self.seed_major]
        if grads is None or any(grad is None for grad in grads):
            return [
                job.trainer.gradient_norms.of(
                    [None if batched.grad is None else batched.grad[index] for _, batched, index in self.views[seed]]
                ) if self.active[seed] else None
                for seed, job in enumerate(self.jobs)
            ]
        norms = self.jobs[0].trainer.gradient_norms
        per_param = torch.stack([torch.linalg.vector_norm(grad.reshape(seeds, -1), dim=1) for grad in grads])
        # Squares in float64, as `GradientNorms.of`: a float32 square overflows at ~1e19.
        totals = torch.zeros(len(norms.keys), seeds, dtype=torch.float64)
        totals.index_add_(0, norms.index, per_param.double().square())
        per_seed = totals.sqrt().t()
        return [per_seed[seed] if self.active[seed] else None for seed in range(seeds)]

    def _to_runs(self) -> None:
        """The runs' trainers (models, optimizers, torch streams) from the batched ones."""
        for seed, job in enumerate(self.jobs):
            if seed in self.retired:
                continue  # ended at its divergence: its trainer keeps that epoch's state
            job.trainer.model.load_state_dict(self.model.seed_state_dict(seed))
            for param, batched, index in self.views[seed]:
                state = self.optimizer.state.get(batched)
                if state:
                    job.trainer.optimizer.state[param] = {
                        "step": state["step"].clone(),
                        "exp_avg": state["exp_avg"][index].clone(),
                        "exp_avg_sq": state["exp_avg_sq"][index].clone(),
                    }
            job.torch_state = self.model.generators[seed].get_state()

    @staticmethod
    @contextlib.contextmanager
    def _streams_of(job: RunDirectory):
        """torch's global stream in `job`'s state meanwhile: what its saved state records
        as its "torch" stream, the one its separate run draws from."""
        global_state = torch.get_rng_state()
        torch.set_rng_state(job.torch_state)
        try:
            yield
        finally:
            torch.set_rng_state(global_state)

    def _save(self, jobs: Sequence[RunDirectory]) -> None:
        """Each of `jobs`' training states, as its separate run saves it."""
        self._to_runs()
        for job in jobs:
            with self._streams_of(job):
                job.save(job.history)

    def _retire(self, seed: int) -> None:
        """Seed `seed` diverged: its part of the network and of Adam's state is zeroed,
        so that it stays finite while the others train on (no gradient reaches it)."""
        self.active[seed] = False
        self.retired.add(seed)
        with torch.no_grad():
            for name, (tensor, index) in self.model.seed_views(seed).items():
                if name.endswith("running_var"):
                    tensor[index] = 1.0
                elif tensor.is_floating_point():
                    tensor[index] = 0.0
                    state = self.optimizer.state.get(tensor)
                    for key in ("exp_avg", "exp_avg_sq"):
                        if state:
                            state[key][index] = 0.0

    # --- an epoch ------------------------------------------------------------------------

    def _keep_output(self, module, inputs, output) -> None:
        if self.model.training:  # the separate runs' OutputNorms measure the training forward's
            self.layer_outputs.append(output.detach())

    def _output_norms(self) -> torch.Tensor:
        """`(S, layers)` float64: each seed's norm of each layer's output in this epoch's
        training forward, as its separate run's `OutputNorms` measures them."""
        norms = []
        for output in self.layer_outputs:
            # Column sums of squares, then each seed's columns: a contiguous reduction,
            # where a norm over dims (0, 2) of (N, S, W) takes 5x longer.
            columns = output.reshape(output.shape[0], -1).square().sum(dim=0)
            norms.append(columns.view(len(self.jobs), -1).sum(dim=1).sqrt())
        return torch.stack(norms).double().t()

    def _per_seed_loss(self, logits: torch.Tensor, split: int) -> torch.Tensor:
        """`(S,)` each seed's mean loss on the rows of `split`, in one call."""
        selected = logits.index_select(1, self.splits[split])  # (S, n, C)
        seeds, rows = selected.shape[:2]
        labels = self.split_labels[split]
        losses = self.loss_fn(
            selected.reshape(seeds * rows, -1), labels.repeat(seeds, *[1] * (labels.dim() - 1)), reduction="none"
        )
        return losses.view(seeds, -1).mean(dim=1)

    def _kept_edges(self) -> torch.Tensor | None:
        """`(E, S)`: the edges each active seed's DropEdge keeps this step, drawn from its
        own stream as its separate run draws its graph (None without DropEdge)."""
        if not self.config.dropedge:
            return None
        kept = torch.ones(self.graph.num_edges(), len(self.jobs), dtype=torch.bool)
        for seed, job in enumerate(self.jobs):
            if self.active[seed]:
                kept[:, seed] = False
                kept[job.trainer.dropedge.kept_edges(self.graph, ordered=False), seed] = True
        return kept

    def _train_step(self) -> list[StepResult]:
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        self.layer_outputs.clear()
        losses = self._per_seed_loss(self.model(self.graph, self.features, self._kept_edges()), 0)
        losses[torch.tensor(self.active)].sum().backward()
        steps = [  # the output norms measured once the epoch says it records them (`_epochs`)
            None if norms is None else StepResult(losses[seed].detach(), norms, None)
            for seed, norms in enumerate(self._gradient_norms())
        ]
        self.optimizer.step()
        return steps

    @torch.no_grad()
    def _evaluate(self, layer_stats: bool = False) -> torch.Tensor:
        """`(S, 4)`: each seed's `(val_loss, train, val, test metric)`, as `Trainer.evaluate`;
        with `layer_stats`, each active seed's layer statistics in its trainer's
        `layer_stats`, from its part of each batched layer's output and attention."""
        self.model.eval()
        outputs = [] if layer_stats else None
        logits = self.model(self.graph, self.features, layer_outputs=outputs)
        if outputs is not None:
            # Every seed's statistics of a layer in one pass (its heads are a set of them).
            diagnostics = self.jobs[0].trainer.layer_stats.diagnostics
            for rst, attention in outputs:
                per_seed = diagnostics.layer_stats_of_sets(rst, attention, sets=self.model.seeds)
                for seed, job in enumerate(self.jobs):
                    if self.active[seed]:
                        job.trainer.layer_stats.captured.append({name: value[seed] for name, value in per_seed.items()})
        val_losses = self._per_seed_loss(logits, 1)
        return torch.stack([
            torch.stack([val_losses[seed].double(), *(
                compute_metric(self.metric, seed_logits.index_select(0, split), labels)
                for split, labels in zip(self.splits, self.split_labels)
            )])
            for seed, seed_logits in enumerate(logits)
        ])

    def _epochs(self, steps: list[StepResult | None], evaluations: torch.Tensor, logged: bool) -> list[Epoch | None]:
        """Each active seed's epoch on the host (`gather`), with its layers' output norms
        where `record_epoch` records them: a logged epoch, or one where a seed diverged."""
        epochs = [None if step is None else gather(step, evaluation) for step, evaluation in zip(steps, evaluations)]
        if logged or any(epoch is not None and not epoch.converging for epoch in epochs):
            norms = self._output_norms().tolist()
            epochs = [None if epoch is None else epoch._replace(output_norms=norms[seed]) for seed, epoch in enumerate(epochs)]
        self.layer_outputs.clear()
        return epochs

    def train(self) -> list[dict[str, Any]]:
        """Train every seed to its end and write its run directory; the summaries."""
        with contextlib.ExitStack() as stack:
            for job in self.jobs:
                job.time_share = 1 / len(self.jobs)
                job.open(stack)  # resumes its saved state, if any, into its trainer
                job.logger.info(
                    "trained together with seeds %s as one network (lipnorm.train.seed_batch)",
                    [other.config.seed for other in self.jobs],
                )
                if job.history.finished:
                    self.active[self.jobs.index(job)] = False
            self._from_runs()
            with run_state.StopSignals() as stop:
                self._loop(stop)
            if stop.requested:
                self._to_runs()
                interrupted = []
                for job in self.jobs:
                    if not job.history.finished:
                        with self._streams_of(job):
                            interrupted.append(job.interrupted(stop))
                if interrupted:
                    raise interrupted[0]
            self._to_runs()
            summaries = []
            for job in self.jobs:
                end_training(job.config, job.trainer, job.history, None)
                summaries.append(job.finish())
        for job in self.jobs:
            job.state_file.unlink(missing_ok=True)
        return summaries

    def _loop(self, stop: run_state.StopSignals) -> None:
        config = self.config
        bar = progress_bar(config, self.jobs[0].history, label=f"train {len(self.jobs)} seeds")
        for epoch in bar:
            if not any(self.active):
                break
            epoch_start = time.perf_counter()
            lr = self.optimizer.param_groups[0]["lr"]
            logged = logged_epoch(config, epoch)
            with_stats = logged and config.layer_stats
            gathered = self._epochs(self._train_step(), self._evaluate(layer_stats=with_stats), logged)
            share = (time.perf_counter() - epoch_start) / sum(self.active)
            for seed, job in enumerate(self.jobs):
                if not self.active[seed]:
                    continue
                ended = record_epoch(
                    config, job.trainer, job.history, epoch, gathered[seed], lr, share, with_stats, job.logger
                )
                if ended:
                    if job.history.diverged_epoch is not None:
                        self._retire(seed)
                    self.active[seed] = False
            bar.set_postfix(seeds=sum(self.active), refresh=False)
            if stop.requested:
                break
            if epoch % config.save_every == 0 and any(self.active):
                self._save([job for seed, job in enumerate(self.jobs) if self.active[seed]])
        bar.close()
