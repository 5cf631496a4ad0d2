"""One model on one dataset, ready to train (`prepare`: seeded, data loaded, features
erased, model built, all on the device) and its training steps and evaluation (`Trainer`:
full batch or cluster batches), with the protocols' epoch selection and the metrics."""

from __future__ import annotations

import math
from typing import Any, Mapping, NamedTuple, Sequence

import dgl
import numpy as np
import torch
import torch.nn.functional as F

from lipnorm import data
from lipnorm.nn.dropedge import DropEdge
from lipnorm.nn.models.build import build_model
from lipnorm.settings.train_config import PROTOCOLS, TrainConfig, cluster_counts
from lipnorm.train import cluster_batches
from lipnorm.train import device as devices
from lipnorm.train import run_state
from lipnorm.train.cluster_batches import ClusterBatches
from lipnorm.train.device import resolve_device
from lipnorm.train.hooks import GradientNorms, LayerStats, OutputNorms
from lipnorm.train.process import retain_freed_memory, seed_everything, set_flush_denormal

# The authors' code uses `ReduceLROnPlateau(optimizer)`, i.e. torch's defaults.
PLATEAU_FACTOR = 0.1
PLATEAU_PATIENCE = 10


def select_epoch(protocol: str, val_metrics: Sequence[float]) -> int:
    """Index of the epoch whose test metric `protocol` reports.

    "best-val": the first maximum of the validation metric; "official": the last epoch.
    """
    if not val_metrics:
        raise ValueError("no epochs to select from")
    if protocol == "official":
        return len(val_metrics) - 1
    if protocol == "best-val":
        return max(range(len(val_metrics)), key=val_metrics.__getitem__)
    raise ValueError(f"unknown protocol {protocol!r}; allowed: {', '.join(PROTOCOLS)}")


def make_scheduler(protocol: str, optimizer: torch.optim.Optimizer):
    """The learning-rate scheduler of `protocol` (None: a constant learning rate)."""
    if protocol == "official":
        return torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer, mode="min", factor=PLATEAU_FACTOR, patience=PLATEAU_PATIENCE
        )
    return None


def compute_metric(metric: str, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """`metric` of the predictions `logits` against `labels` (rows already selected), as a
    0-d float64 tensor on their device: computed there, with no host synchronisation.

    "ogb-accuracy" is OGB's `Evaluator("ogbn-arxiv")` (the share of correct labels, the
    same float64 division; tested against it), computed without its copy to numpy.
    """
    if metric in ("accuracy", "ogb-accuracy"):
        return (logits.argmax(1) == labels).double().mean()
    if metric == "micro-f1":
        predicted, actual = logits > 0, labels > 0.5
        true_pos = (predicted & actual).sum().double()
        false_pos = (predicted & ~actual).sum().double()
        false_neg = (~predicted & actual).sum().double()
        denominator = 2 * true_pos + false_pos + false_neg
        # No positives predicted or present: 0 (the division's 0/0 is not taken).
        return torch.where(denominator > 0, 2 * true_pos / denominator.clamp(min=1), 0.0)
    raise ValueError(f"unknown metric {metric!r}; allowed: accuracy, micro-f1, ogb-accuracy")


class Setup(NamedTuple):
    """Everything a run trains on, built deterministically from the config's seed."""

    dataset: Any  # lipnorm.data.NodeDataset, on the CPU as loaded
    features: torch.Tensor  # with the missing rows erased, on `device`
    model: torch.nn.Module  # on `device`
    erased: int  # number of feature rows erased
    graph: dgl.DGLGraph  # the dataset's graph on `device`
    labels: torch.Tensor  # on `device`
    splits: tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # train/val/test node indices on `device`
    device: torch.device
    batches: ClusterBatches | None = None  # the training batches of `batching="cluster"`


def prepare(config: TrainConfig, dataset: data.NodeDataset | None = None) -> Setup:
    """Seed, load the data, apply the missing-features mask, build the model, and move
    what training uses to `config.device`: the graph, the erased features, the labels, the
    split masks as node indices, the model (not the unerased features or the masks).
    `dataset`, if given, is `config`'s dataset loaded already (the seeds of one
    configuration trained in one process load it once and share its graph, whose
    per-structure caches then serve them all); it is not changed here.
    With `batching="cluster"`, the METIS partition too (`lipnorm.train.cluster_batches`: read from
    its cache under `data_root`, else computed and cached), of K and B as given or, unset,
    sized by the loaded graph (`lipnorm.settings.train_config.cluster_counts`); the batches stay on
    the CPU until each is used."""
    # First: an unusable device is refused before anything is loaded.
    device = resolve_device(config.device)
    devices.use_device(device)
    # DGL's kernels run on their own OpenMP pool: limit both.
    torch.set_num_threads(config.threads)
    dgl.utils.set_num_threads(config.threads)
    set_flush_denormal(config.flush_denormal)
    # Where memory is the point: checkpointing, and cluster batches (whose whole-graph
    # evaluation is the run's peak).
    retain_freed_memory(map_large_tensors=config.checkpoint or config.batching == "cluster")
    seed_everything(config.seed)
    csbm = None if config.csbm is None else data.csbm_params(config.csbm)
    if dataset is None:
        dataset = data.load_dataset(
            config.dataset, root=config.data_root, mirror=config.mirror, csbm=csbm,
            raw_features=config.raw_features,
        )
    if config.mask is not None:
        mask = data.load_mask(config.mask, dataset.num_nodes)
    else:
        erasable = data.erasable_nodes(config.missing_pool, dataset.train_mask, dataset.val_mask, dataset.test_mask)
        mask = data.missing_features_mask(dataset.train_mask.numpy(), config.missing_rate, config.seed, erasable)
    features = data.apply_missing_features(dataset.features, mask)
    # The model's settings derive from the resolved config (its parts and dropouts
    # filled); `build_model` checks them.
    model = build_model(config.model_config(dataset.features.shape[1], dataset.num_classes))
    erased = int(np.count_nonzero(mask))
    # Indices, made on the CPU: selecting rows by a boolean mask on a GPU waits for the
    # GPU to count them (a host synchronisation) at every use.
    masks = (dataset.train_mask, dataset.val_mask, dataset.test_mask)
    cpu_splits = [torch.nonzero(mask).squeeze(1) for mask in masks]
    batches = None
    if config.batching == "cluster":
        counts = cluster_counts(dataset.num_nodes, config.partitions, config.batch_partitions)
        path = cluster_batches.cache_path(config.data_root, config.dataset, counts.partitions, csbm)
        sampler = cluster_batches.partition_sampler(dataset.graph, counts.partitions, path)
        batches = ClusterBatches(
            sampler, dataset.graph, cpu_splits[0], counts.batch_partitions, config.seed, device, path,
            reason=counts.reason,
        )
    return Setup(
        dataset, devices.move(features, device), devices.move(model, device), erased,
        graph=devices.move(dataset.graph, device), labels=devices.move(dataset.labels, device),
        splits=tuple(devices.move(split, device) for split in cpu_splits), device=device,
        batches=batches,
    )


class StepResult(NamedTuple):
    """What a training step measured, as tensors left on the device (see `Trainer.train_step`)."""

    loss: torch.Tensor  # 0-d
    grad_norms: torch.Tensor | None  # (len(GradientNorms.keys),) float64, None when not measured
    output_norms: torch.Tensor | None  # (attention layers,) float64, None when not measured


class Epoch(NamedTuple):
    """An epoch's step and evaluation as numbers on the host (`gather`)."""

    loss: float
    grad_norms: list[float]  # empty when not measured
    output_norms: list[float]
    val_loss: float
    train_metric: float
    val_metric: float
    test_metric: float

    @property
    def finite(self) -> bool:
        """Loss and gradient norms finite (else the run has diverged at this step)."""
        return math.isfinite(self.loss) and all(map(math.isfinite, self.grad_norms))

    @property
    def converging(self) -> bool:
        """Step and evaluation finite: False where `record_epoch` ends the run as diverged."""
        return self.finite and math.isfinite(self.val_loss)


def gather(step: StepResult, evaluation: torch.Tensor) -> Epoch:
    """The step's and the evaluation's tensors copied to the host at once: the one host
    synchronisation of an epoch."""
    parts = [step.loss.detach().double().reshape(1)]
    parts += [part for part in (step.grad_norms, step.output_norms) if part is not None]
    values = torch.cat([*parts, evaluation]).tolist()
    counts = [0 if part is None else len(part) for part in (step.grad_norms, step.output_norms)]
    grad_end = 1 + counts[0]
    output_end = grad_end + counts[1]
    return Epoch(values[0], values[1:grad_end], values[grad_end:output_end], *values[output_end:])


class Trainer:
    """Training epochs (full batch, or cluster batches where `setup.batches` has them) and
    whole-graph evaluation of one model on one dataset."""

    def __init__(self, setup: Setup, config: TrainConfig):
        """`setup` from `prepare(config)`; of the resolved `config`, Adam's `lr` and
        `weight_decay`, the `protocol`'s scheduler and `dropedge`: > 0, each training
        step sees a fresh DropEdge subset of the graph's edges, drawn from a stream of its
        own seeded with `seed` (evaluation: the whole graph; the subset is drawn on the
        host, so on a GPU such a step waits for it once). `setup.batches` (cluster
        batches): their shuffling stream is registered too."""
        dataset = setup.dataset
        self.model = setup.model
        self.graph = setup.graph
        self.features = setup.features
        self.labels = setup.labels
        self.splits = setup.splits  # train, val, test node indices
        self.device = setup.device
        self.metric = dataset.metric
        self.loss_fn = (
            F.binary_cross_entropy_with_logits if dataset.multilabel else F.cross_entropy
        )
        # foreach: one call per step for all parameters, where torch's CPU default loops over
        # them in Python (1.8 x faster at 40 tensors; the same bits, checked in the tests).
        self.optimizer = torch.optim.Adam(
            self.model.parameters(), lr=config.lr, weight_decay=config.weight_decay, foreach=True
        )
        self.scheduler = make_scheduler(config.protocol, self.optimizer)
        self.gradient_norms = GradientNorms(self.model)
        self.output_norms = OutputNorms(self.model)
        self.layer_stats = LayerStats(self.model, self.graph)
        # What a step draws from; a component with its own generator registers it here.
        self.random_streams = run_state.RandomStreams(self.device)
        self.dropedge = DropEdge(config.dropedge, config.seed) if config.dropedge else None
        if self.dropedge is not None:
            self.random_streams.register("dropedge", self.dropedge)
        self.batches = setup.batches
        if self.batches is not None:
            self.random_streams.register("cluster_batches", self.batches)

    @property
    def lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    def _rows(self, tensor: torch.Tensor, split: int) -> torch.Tensor:
        return tensor.index_select(0, self.splits[split])

    def state_dict(self) -> dict[str, Any]:
        """What the next training step depends on: the model, the optimizer, the scheduler
        and every random stream (`load_state_dict` restores it)."""
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": None if self.scheduler is None else self.scheduler.state_dict(),
            "random": self.random_streams.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        self.random_streams.load_state_dict(state["random"])

    def train_step(self, instrument: bool = True) -> StepResult:
        """An epoch's training: forward, backward and an optimizer step on the whole graph,
        or one per cluster batch (`Setup.batches`); the measurements stay on the device.

        `instrument` measures the gradient-group norms (which also detect a non-finite
        gradient) and the attention outputs' norms; False exists to time their cost.
        Nothing here waits for a GPU: the step is taken whatever the gradients are, since
        deciding on the host would synchronise every step; a non-finite loss or gradient
        norm ends the run at this epoch (`lipnorm.train.loop.train_loop`), so the model it
        leaves is not used.
        (Cluster batches are built on the host: each waits for its copy to the device and
        the layers' zero-in-degree check of its new graph.)

        With cluster batches, a batch without training nodes is skipped, and the epoch's
        measurements combine those of its steps: the loss is their mean weighted by the
        batches' training nodes (the mean over every training node, as on the whole
        graph), a gradient-group norm the mean of the steps' norms, a layer's output norm
        the Frobenius norm over the nodes of every step (`sqrt` of the sum of the steps'
        squares: with every batch trained on, each node's output counted once).
        """
        if self.batches is None:
            return self._step(self.graph, self.features, self.splits[0], self._rows(self.labels, 0), instrument)
        steps: list[StepResult] = []
        weights: list[int] = []
        for batch in self.batches.epoch():
            if not batch.has_training_nodes:
                continue
            steps.append(self._step(
                batch.graph, self.features.index_select(0, batch.nodes), batch.train_rows,
                self.labels.index_select(0, batch.train_nodes), instrument,
            ))
            weights.append(batch.num_train)
        if not steps:
            raise ValueError("no cluster batch has training nodes: the training split is empty")
        loss = sum(step.loss.double() * weight for step, weight in zip(steps, weights)) / sum(weights)
        grad_norms = output_norms = None
        if instrument:
            grad_norms = sum(step.grad_norms for step in steps) / len(steps)
            if steps[0].output_norms is not None:
                output_norms = sum(step.output_norms.square() for step in steps).sqrt()
        return StepResult(loss, grad_norms, output_norms)

    def _step(
        self, graph: dgl.DGLGraph, features: torch.Tensor, train_rows: torch.Tensor,
        train_labels: torch.Tensor, instrument: bool,
    ) -> StepResult:
        """One optimizer step on `graph` (DropEdge's subset of it, if on), the loss on its
        rows `train_rows`, whose labels are `train_labels`."""
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        self.output_norms.norms.clear()
        self.output_norms.active = instrument
        if self.dropedge is not None:
            graph = self.dropedge.graph_for_epoch(graph)
        try:
            logits = self.model(graph, features)
        finally:
            self.output_norms.active = False
        loss = self.loss_fn(logits.index_select(0, train_rows), train_labels)
        loss.backward()
        grad_norms = output_norms = None
        if instrument:
            grad_norms = self.gradient_norms()
            if self.output_norms.norms:
                output_norms = torch.stack(self.output_norms.norms).double()
        self.optimizer.step()
        return StepResult(loss.detach(), grad_norms, output_norms)

    # no_grad, not inference_mode: the latter measured no faster (docs/performance.md, Evaluation forward).
    @torch.no_grad()
    def evaluate(self, layer_stats: bool = False) -> torch.Tensor:
        """`(val_loss, train_metric, val_metric, test_metric)` in eval mode, as a float64
        tensor on the device (no host synchronisation; `gather` copies it).

        `layer_stats` keeps each attention layer's output and attention for
        `self.layer_stats.rows` (the forward itself is unchanged).
        """
        self.model.eval()
        self.layer_stats.active = layer_stats
        try:
            logits = self.model(self.graph, self.features)
        finally:
            self.layer_stats.active = False
        val_loss = self.loss_fn(self._rows(logits, 1), self._rows(self.labels, 1))
        metrics = [
            compute_metric(self.metric, self._rows(logits, split), self._rows(self.labels, split))
            for split in range(3)
        ]
        return torch.stack([val_loss.double(), *metrics])