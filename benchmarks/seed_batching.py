"""The literature protocol's epoch, per seed: today's path, the lean path, S seeds together.

Question (issue: grids of small runs): what does one epoch of the literature protocol's
network (`--recipe dgn`: Cora, 1 x 16, 100 % missing features) cost per seed

- on the path of 2026-12-04 morning ("dense": the first layer drops out and projects
  the whole (N, F) input, as `LiteratureGAT` did before `lipnorm.nn.row_pruned`, and the
  attention is DGL's calls),
- on the lean path ("lean": `LiteratureGAT` now, the first layer on its non-zero rows,
  the attention in the compiled kernel of `lipnorm.kernels`),
- with S seeds as one `SeedBatchedGAT`, its attention by DGL's calls ("together-dgl",
  what `lipnorm train --seeds` trained before the kernel) or by the kernel ("together",
  what it trains now),

and what LipschitzNorm adds on each (GAT-Lip / GAT)? With `--norm dgn` or `pairnorm`, the
normalisation is its torch form on the paths before ("dense", "together-dgl") and its
compiled kernel on the others. With `--dropedge RATE`, each seed's
training step sees its own DropEdge graph: a new subgraph per seed and epoch on the
separate paths, a per-seed edge mask over the one graph together. An epoch is what a run does: a
training step (forward, loss, backward, Adam) and an evaluation forward. The paths
alternate round by round in one process, so that a change of the machine's load falls
on all of them; each is timed on S seeds (the separate ones one after another).

    python benchmarks/seed_batching.py --depth 10 --seeds 5 --rounds 8 --mirror ../shared/datasets

With `--lanes 1,5,10,20`, only the seeds-together path is timed, for each of those
numbers of seeds in one network: what would more runs in one network (e.g. GAT and
GAT-Lip side by side) save per run?

With `--recipe snr`, SNR's protocol instead (`SNRGAT`: 1 x 32, residual, the validation
and test nodes' features erased): S separate networks' epochs one after another
("alone", what one run per seed trains) against one `SeedBatchedSNR` epoch of the S
seeds ("together", what `lipnorm train --seeds` trains), GAT and GAT-Lip:

    python benchmarks/seed_batching.py --recipe snr --depth 10 --seeds 10 --rounds 5 --mirror ../shared/datasets
"""
from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import time
from datetime import datetime, timezone
from typing import NamedTuple

import torch
import torch.nn.functional as F

from lipnorm import data, kernels
from lipnorm.nn.dropedge import DropEdge
from lipnorm.nn.models.build import build_model
from lipnorm.nn.models.literature import LiteratureGAT
from lipnorm.nn.models.seed_batch import SeedBatchedGAT, seed_batched
from lipnorm.settings.model_config import ModelConfig
from lipnorm.settings.recipes import recipe_defaults
from lipnorm.train.process import retain_freed_memory


class DenseInputGAT(LiteratureGAT):
    """`LiteratureGAT` as it was before the row-pruned first layer and the compiled
    attention kernel: dropout (and then the projection) of the whole input, DGL's calls."""

    def _first_input(self, feat):
        return F.dropout(feat, p=self.feat_drop, training=self.training)


# One seed at a time: the path before (dense first layer, DGL's calls), the lean path
# (row-pruned first layer, compiled attention); S seeds as one network with DGL's calls
# (what `--seeds` trained before the kernel) and with the kernel (now).
PATHS = ("dense", "lean", "together-dgl", "together")

# The representation normalisations with a compiled kernel (`lipnorm.kernels` families).
NORM_KERNELS = ("pairnorm", "dgn")


class Protocol(NamedTuple):
    """The literature protocol's inputs (Cora or CiteSeer, 100 % missing features, seed 0's
    mask) and its `--recipe dgn` settings at `depth`."""

    dataset: object
    features: torch.Tensor
    train_rows: torch.Tensor
    train_labels: torch.Tensor
    depth: int
    settings: dict


def load_protocol(args) -> Protocol:
    """`args.dataset` (from `args.data_root`, `args.mirror`) as the protocol of
    `args.recipe` has it (100 % of its missing-features pool erased)."""
    dataset = data.load_dataset(args.dataset, root=args.data_root, mirror=args.mirror)
    settings = recipe_defaults(args.recipe, args.depth, args.dataset, 100.0)
    erasable = data.erasable_nodes(
        settings.get("missing_pool", "unlabelled"), dataset.train_mask, dataset.val_mask, dataset.test_mask
    )
    mask = data.missing_features_mask(dataset.train_mask.numpy(), 100.0, 0, erasable)
    features = data.apply_missing_features(dataset.features, mask)
    train_rows = torch.nonzero(dataset.train_mask).squeeze(1)
    return Protocol(dataset, features, train_rows, dataset.labels[train_rows], args.depth, settings)


def seeded_models(cfg: ModelConfig, seeds: int) -> list[torch.nn.Module]:
    """`seeds` networks of `cfg`, seed s's drawn after `torch.manual_seed(s)`."""
    built = []
    for seed in range(seeds):
        torch.manual_seed(seed)
        built.append(build_model(cfg))
    return built


def literature_models(protocol: Protocol, norm: str, attention_norm: str, seeds: int) -> list[LiteratureGAT]:
    """`seeds` protocol networks (`--recipe dgn`), seed s's drawn after `torch.manual_seed(s)`."""
    settings = protocol.settings
    cfg = ModelConfig(
        model="gat", in_feats=protocol.features.shape[1], num_classes=protocol.dataset.num_classes,
        depth=protocol.depth, heads=settings["heads"], hidden=settings["hidden"], feat_drop=settings["feat_drop"],
        attn_drop=settings["attn_drop"], batchnorm_momentum=settings["batchnorm_momentum"],
        dgn_skip_weight=settings["dgn_skip_weight"], recipe="dgn", norm=norm, attention_norm=attention_norm,
    )
    return seeded_models(cfg, seeds)


def snr_models(protocol: Protocol, attention_norm: str, seeds: int) -> list[torch.nn.Module]:
    """`seeds` SNR networks (`--recipe snr`, residual), seed s's drawn after `torch.manual_seed(s)`."""
    settings = protocol.settings
    cfg = ModelConfig(
        model="gat", in_feats=protocol.features.shape[1], num_classes=protocol.dataset.num_classes,
        depth=protocol.depth, heads=settings["heads"], hidden=settings["hidden"], feat_drop=settings["feat_drop"],
        attn_drop=settings["attn_drop"], recipe="snr", residual=True, attention_norm=attention_norm,
    )
    return seeded_models(cfg, seeds)


def seed_batch(models: list[torch.nn.Module]) -> torch.nn.Module:
    """`models` as one network (the registered `seed_batched`: `SeedBatchedSNR` for SNR's,
    else `SeedBatchedGAT`), seed s's stream seeded with s."""
    batched = seed_batched(models)
    batched.set_generators([torch.Generator().manual_seed(seed).get_state() for seed in range(len(models))])
    return batched


def adam(protocol: Protocol, parameters) -> torch.optim.Adam:
    return torch.optim.Adam(parameters, lr=protocol.settings["lr"], weight_decay=protocol.settings["weight_decay"])


def seed_batch_epoch(protocol: Protocol, batched: SeedBatchedGAT, drops: list[DropEdge] | None = None):
    """An epoch of `batched` (training step, evaluation forward); with `drops`, each seed's
    DropEdge mask drawn per step."""
    graph, features = protocol.dataset.graph, protocol.features
    optimiser = adam(protocol, batched.parameters())

    def epoch() -> None:
        batched.train()
        optimiser.zero_grad()
        kept = None
        if drops:
            kept = torch.zeros(graph.num_edges(), batched.seeds, dtype=torch.bool)
            for seed, drop in enumerate(drops):
                kept[drop.kept_edges(graph), seed] = True
        logits = batched(graph, features, kept)
        sum(F.cross_entropy(seed_logits[protocol.train_rows], protocol.train_labels) for seed_logits in logits).backward()
        optimiser.step()
        batched.eval()
        with torch.no_grad():
            batched(graph, features)
    return epoch


@contextlib.contextmanager
def norm_torch_forms():
    """PairNorm's and DGN's compiled kernels off meanwhile: their torch forms run instead
    (`lipnorm.kernels.use` says no to their families)."""
    use = kernels.use

    def use_but_the_norms(family, *tensors, applies=True):
        return use(family, *tensors, applies=applies and family not in NORM_KERNELS)

    kernels.use = use_but_the_norms
    try:
        yield
    finally:
        kernels.use = use


def ratio_text(ratios: list[float]) -> str:
    """Median of per-round ratios and their range: ``1.25 (1.24-1.30)``."""
    return f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="cora")
    parser.add_argument("--norm", default="none")
    parser.add_argument("--recipe", choices=("dgn", "snr"), default="dgn",
                        help="snr: SNR's network, S separate epochs against one seed-batched epoch")
    parser.add_argument("--depth", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=10, help="epochs timed per round, path and seed")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--dropedge", type=float, default=0.0, help="DropEdge rate of every path (default 0: off)")
    parser.add_argument("--data-root", default="resources/datasets")
    parser.add_argument("--mirror", default=None)
    parser.add_argument("--lanes", type=seed_counts, default=None,
                        help="e.g. 1,5,10,20: time S seeds together for each S instead")
    args = parser.parse_args()
    if args.recipe == "snr" and (args.lanes or args.norm != "none"):
        parser.error("--recipe snr times its network alone and together, without --lanes or --norm")
    if args.lanes and args.dropedge:
        parser.error("--lanes times the seeds without DropEdge (its masks are drawn for --seeds seeds)")
    torch.set_num_threads(1)
    retain_freed_memory(map_large_tensors=False)  # as `lipnorm train` (docs/performance.md, page faults)
    protocol = load_protocol(args)
    graph, features = protocol.dataset.graph, protocol.features

    def models(attention_norm: str) -> list[LiteratureGAT]:
        return literature_models(protocol, args.norm, attention_norm, args.seeds)

    def dropedges():
        return [DropEdge(args.dropedge, seed) for seed in range(args.seeds)] if args.dropedge else None

    def separate_epoch(models):
        drops = dropedges()
        pairs = [(model, adam(protocol, model.parameters())) for model in models]

        def epoch() -> None:
            for seed, (model, optimiser) in enumerate(pairs):
                model.train()
                optimiser.zero_grad()
                train_graph = drops[seed].graph_for_epoch(graph) if drops else graph
                F.cross_entropy(model(train_graph, features)[protocol.train_rows], protocol.train_labels).backward()
                optimiser.step()
                model.eval()
                with torch.no_grad():
                    model(graph, features)
        return epoch

    def without_kernels(epoch):
        """`epoch` with PairNorm and DGN in their torch forms, as before their kernels (the
        attention's path is each model's `fused` flag)."""

        def run() -> None:
            with norm_torch_forms():
                epoch()
        return run

    if args.lanes:
        lanes(args, protocol)
        return
    if args.recipe == "snr":
        paths = {}
        for attention_norm in ("none", "lip"):
            paths["alone", attention_norm] = separate_epoch(snr_models(protocol, attention_norm, args.seeds))
            batched = seed_batch(snr_models(protocol, attention_norm, args.seeds))
            paths["together", attention_norm] = seed_batch_epoch(protocol, batched, dropedges())
        print_header(args, f"SNR's GAT, DropEdge {args.dropedge}, S = {args.seeds} seeds")
        times = timed_rounds(args, paths, lambda key: args.seeds)
        print("ms per seed-epoch, median of rounds (range of the per-round ratio):")
        for norm in ("none", "lip"):
            ratios = [t / a for a, t in zip(times["alone", norm], times["together", norm])]
            for path in ("alone", "together"):
                print(f"  {'GAT' if norm == 'none' else 'GAT-Lip':8} {path:9} {statistics.median(times[path, norm]):7.1f} ms")
            print(f"  {'GAT' if norm == 'none' else 'GAT-Lip':8} together / alone {ratio_text(ratios)}")
        return
    paths = {}
    for attention_norm in ("none", "lip"):
        lean = models(attention_norm)
        dense = []
        for model in models(attention_norm):
            copy = DenseInputGAT.__new__(DenseInputGAT)
            copy.__dict__.update(model.__dict__)
            for layer in copy.layers:
                layer.fused = False
            dense.append(copy)
        paths["dense", attention_norm] = without_kernels(separate_epoch(dense))
        paths["lean", attention_norm] = separate_epoch(lean)
        for path, fused in (("together-dgl", False), ("together", True)):
            batched = seed_batch(models(attention_norm))
            for layer in batched.layers:
                layer.fused = fused
            epoch = seed_batch_epoch(protocol, batched, dropedges())
            paths[path, attention_norm] = epoch if fused else without_kernels(epoch)

    print_header(args, f"DropEdge {args.dropedge}, S = {args.seeds} seeds")
    times = timed_rounds(args, paths, lambda key: args.seeds)
    print("ms per seed-epoch, median of rounds (range of the per-round ratio):")
    for norm in ("none", "lip"):
        dense = times["dense", norm]
        for path in PATHS:
            ratios = [d / t for d, t in zip(dense, times[path, norm])]
            print(f"  {'GAT' if norm == 'none' else 'GAT-Lip':8} {path:12} {statistics.median(times[path, norm]):6.1f} ms"
                  f"  speed-up over dense {ratio_text(ratios)}")
    for path in PATHS:
        ratios = [lip / plain for lip, plain in zip(times[path, "lip"], times[path, "none"])]
        print(f"  LipschitzNorm overhead, {path}: GAT-Lip / GAT {ratio_text(ratios)}")


def seed_counts(text: str) -> list[int]:
    """`--lanes`: numbers of seeds, comma-separated, each at least 1."""
    try:
        counts = [int(count) for count in text.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of seed counts >= 1 (e.g. 1,5,10)")
    return counts


def print_header(args, what: str) -> None:
    print(f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, 1 thread, torch {torch.__version__}; {args.dataset} norm {args.norm}, "
          f"depth {args.depth}, 1 x {16 if args.recipe == 'dgn' else 32}, 100 % missing features, {what}, "
          f"{args.epochs} epochs a round")


def timed_rounds(args, paths: dict, seeds_of) -> dict:
    """ms per seed-epoch of each path (`seeds_of(key)` seeds), round by round, the paths in
    turn within a round so that a change of the machine's load falls on all of them."""
    for epoch in paths.values():
        epoch()  # warm-up
    times = {key: [] for key in paths}
    for round_ in range(1, args.rounds + 1):
        for key, epoch in paths.items():
            start = time.perf_counter()
            for _ in range(args.epochs):
                epoch()
            times[key].append(1000 * (time.perf_counter() - start) / args.epochs / seeds_of(key))
        print(f"round {round_}: " + ", ".join(f"{'/'.join(map(str, key))} {times[key][-1]:.1f}" for key in paths),
              flush=True)
    return times


def lanes(args, protocol: Protocol) -> None:
    """`--lanes`: ms per seed-epoch with S seeds as one network, for each S asked for."""
    counts = args.lanes
    paths = {}
    for attention_norm in ("none", "lip"):
        for count in counts:
            batched = seed_batch(literature_models(protocol, args.norm, attention_norm, count))
            paths[attention_norm, count] = seed_batch_epoch(protocol, batched)
    print_header(args, f"seeds together: {counts}")
    times = timed_rounds(args, paths, lambda key: key[1])
    print(f"ms per seed-epoch, median of rounds; speed-up over {counts[0]} together (range of the per-round ratio):")
    for attention_norm in ("none", "lip"):
        first = times[attention_norm, counts[0]]
        for count in counts:
            ratios = [a / b for a, b in zip(first, times[attention_norm, count])]
            print(f"  {'GAT' if attention_norm == 'none' else 'GAT-Lip':8} {count:3} together "
                  f"{statistics.median(times[attention_norm, count]):6.1f} ms  speed-up {ratio_text(ratios)}")


if __name__ == "__main__":
    main()
