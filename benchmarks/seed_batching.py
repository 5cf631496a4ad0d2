"""S seeds trained together against S separate networks, side by side in one process.

Question: what does one epoch of the literature protocol's network (`--recipe dgn`: Cora,
1 x 16, 100 % missing features) cost per seed when S seeds are one `SeedBatchedGAT`,
against S separate `LiteratureGAT`s stepped one after the other? An epoch is what a run
does: a training step (forward, loss, backward, Adam) and an evaluation forward. The two
alternate, round by round, so that a change of the shared machine's load falls on both.

    python benchmarks/seed_batching.py --depth 10 --seeds 5 --rounds 8
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from datetime import datetime, timezone

import torch
import torch.nn.functional as F

from lipnorm import data
from lipnorm.nn.models import ModelConfig, build_model
from lipnorm.nn.seeds import SeedBatchedGAT
from lipnorm.recipes import recipe_defaults


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="cora")
    parser.add_argument("--model", default="gat")
    parser.add_argument("--norm", default="none")
    parser.add_argument("--depth", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=20, help="epochs timed per round and path")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--data-root", default="resources/datasets")
    parser.add_argument("--mirror", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    dataset = data.load_dataset(args.dataset, root=args.data_root, mirror=args.mirror)
    mask = data.missing_features_mask(dataset.train_mask.numpy(), 100.0, 0)
    features = data.apply_missing_features(dataset.features, mask)
    graph, labels = dataset.graph, dataset.labels
    train_rows = torch.nonzero(dataset.train_mask).squeeze(1)
    settings = recipe_defaults("dgn", args.depth, args.dataset, 100.0)
    cfg = ModelConfig(
        model=args.model, in_feats=features.shape[1], num_classes=dataset.num_classes, depth=args.depth,
        heads=settings["heads"], hidden=settings["hidden"], feat_drop=settings["feat_drop"],
        attn_drop=settings["attn_drop"], batchnorm_momentum=settings["batchnorm_momentum"],
        dgn_skip_weight=settings["dgn_skip_weight"], recipe="dgn", norm=args.norm,
    )
    models = []
    for seed in range(args.seeds):
        torch.manual_seed(seed)
        models.append(build_model(cfg))
    batched = SeedBatchedGAT(models)
    batched.set_generators([torch.Generator().manual_seed(seed).get_state() for seed in range(args.seeds)])
    optimisers = [torch.optim.Adam(m.parameters(), lr=settings["lr"], weight_decay=settings["weight_decay"]) for m in models]
    batched_optimiser = torch.optim.Adam(batched.parameters(), lr=settings["lr"], weight_decay=settings["weight_decay"])
    train_labels = labels[train_rows]

    def separate_epoch() -> None:
        for model, optimiser in zip(models, optimisers):
            model.train()
            optimiser.zero_grad()
            F.cross_entropy(model(graph, features)[train_rows], train_labels).backward()
            optimiser.step()
            model.eval()
            with torch.no_grad():
                model(graph, features)

    def batched_epoch() -> None:
        batched.train()
        batched_optimiser.zero_grad()
        logits = batched(graph, features)
        sum(F.cross_entropy(seed_logits[train_rows], train_labels) for seed_logits in logits).backward()
        batched_optimiser.step()
        batched.eval()
        with torch.no_grad():
            batched(graph, features)

    def timed(epoch) -> float:
        start = time.perf_counter()
        for _ in range(args.epochs):
            epoch()
        return (time.perf_counter() - start) / args.epochs

    print(f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, 1 thread, torch {torch.__version__}; {args.dataset} {args.model} norm {args.norm}, "
          f"depth {args.depth}, 1 x 16, 100 % missing features, S = {args.seeds} seeds, {args.epochs} epochs a round")
    separate_epoch(), batched_epoch()  # warm-up
    ratios, separate_ms, batched_ms = [], [], []
    for round_ in range(1, args.rounds + 1):
        separate_s, batched_s = timed(separate_epoch), timed(batched_epoch)
        separate_ms.append(1000 * separate_s / args.seeds)
        batched_ms.append(1000 * batched_s / args.seeds)
        ratios.append(separate_s / batched_s)
        print(f"round {round_}: per seed-epoch separate {separate_ms[-1]:.2f} ms, together {batched_ms[-1]:.2f} ms, "
              f"speed-up {ratios[-1]:.2f}", flush=True)
    print(f"median per seed-epoch: separate {statistics.median(separate_ms):.2f} ms, together "
          f"{statistics.median(batched_ms):.2f} ms; speed-up {statistics.median(ratios):.2f} "
          f"(range {min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
