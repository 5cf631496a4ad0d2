"""Do the remedies' normalisations pay in their compiled kernels, in the literature protocol's epoch?

PairNorm's "PN" (`lipnorm.nn.norm.pairnorm.pairnorm_pn`) and DGN's output
(`lipnorm.nn.norm.dgn.dgn_output`) run in the compiled kernels of `lipnorm.nn.fused` where
they apply, and in their torch form elsewhere. For each normalisation of `--norms`, the
epoch of S seeds as one `SeedBatchedGAT` (what `lipnorm train --seeds` trains: Cora,
`--recipe dgn`, 1 x 16, 100 % missing features; a training step and an evaluation
forward) with the normalisation in its kernel and in its torch form, and the same
network without a normalisation ("none") for reference: what the normalisation adds to
the epoch either way. The paths alternate round by round in one process.

    PYTHONPATH=src .venv/bin/python benchmarks/remedy_kernels.py --depth 10 --mirror ../shared/datasets
"""
from __future__ import annotations

import argparse
import contextlib
import statistics

import torch
import torch.nn.functional as F

from lipnorm import data
from lipnorm.nn.models.build import build_model
from lipnorm.nn.models.seeds import SeedBatchedGAT
from lipnorm.nn.norm import dgn, pairnorm
from lipnorm.settings.model_config import ModelConfig
from lipnorm.settings.recipes import recipe_defaults
from lipnorm.train.tuning import retain_freed_memory
from seed_batching import print_header, timed_rounds

# Where each normalisation looks its kernel up: (module, name); None there: its torch form.
KERNELS = {"pairnorm": (pairnorm, "pairnorm_kernel"), "dgn": (dgn, "dgn_output_kernel")}


@contextlib.contextmanager
def torch_form(norm: str):
    """`norm`'s kernel off meanwhile: its torch form runs instead."""
    module, name = KERNELS[norm]
    kernel = getattr(module, name)
    setattr(module, name, lambda *args, **kwargs: None)
    try:
        yield
    finally:
        setattr(module, name, kernel)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--norms", default="pairnorm,dgn", help=f"comma-separated, of {', '.join(KERNELS)}")
    parser.add_argument("--depth", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=4, help="epochs timed per round and path")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--data-root", default="resources/datasets")
    parser.add_argument("--mirror", default=None)
    args = parser.parse_args()
    norms = args.norms.split(",")
    unknown = sorted(set(norms) - set(KERNELS))
    if unknown:
        parser.error(f"--norms: {', '.join(unknown)} has no compiled kernel; choose from {', '.join(KERNELS)}")
    args.dataset = "cora"
    torch.set_num_threads(1)
    retain_freed_memory(map_large_tensors=False)  # as `lipnorm train`
    dataset = data.load_dataset(args.dataset, root=args.data_root, mirror=args.mirror)
    mask = data.missing_features_mask(dataset.train_mask.numpy(), 100.0, 0)
    features = data.apply_missing_features(dataset.features, mask)
    graph, labels = dataset.graph, dataset.labels
    train_rows = torch.nonzero(dataset.train_mask).squeeze(1)
    settings = recipe_defaults("dgn", args.depth, args.dataset, 100.0)

    def epoch_of(norm: str, form: str):
        cfg = ModelConfig(
            model="gat", in_feats=features.shape[1], num_classes=dataset.num_classes, depth=args.depth,
            heads=settings["heads"], hidden=settings["hidden"], feat_drop=settings["feat_drop"],
            attn_drop=settings["attn_drop"], batchnorm_momentum=settings["batchnorm_momentum"],
            dgn_skip_weight=settings["dgn_skip_weight"], recipe="dgn", norm=norm,
        )
        models = []
        for seed in range(args.seeds):
            torch.manual_seed(seed)
            models.append(build_model(cfg))
        network = SeedBatchedGAT(models)
        network.set_generators([torch.Generator().manual_seed(seed).get_state() for seed in range(args.seeds)])
        optimiser = torch.optim.Adam(network.parameters(), lr=settings["lr"], weight_decay=settings["weight_decay"])

        def epoch() -> None:
            with torch_form(norm) if form == "torch form" else contextlib.nullcontext():
                network.train()
                optimiser.zero_grad()
                logits = network(graph, features)
                sum(F.cross_entropy(seed_logits[train_rows], labels[train_rows]) for seed_logits in logits).backward()
                optimiser.step()
                network.eval()
                with torch.no_grad():
                    network(graph, features)
        return epoch

    paths = {("none", "-"): epoch_of("none", "-")}
    for norm in norms:
        for form in ("kernel", "torch form"):
            paths[norm, form] = epoch_of(norm, form)
    args.norm = ",".join(norms)
    print_header(args, f"S = {args.seeds} seeds together, GAT")
    times = timed_rounds(args, paths, lambda key: args.seeds)
    none = statistics.median(times["none", "-"])
    print(f"ms per seed-epoch, median of rounds; without a normalisation {none:.1f} ms")
    for norm in norms:
        kernel, torch_ = times[norm, "kernel"], times[norm, "torch form"]
        ratios = [t / k for t, k in zip(torch_, kernel)]
        print(f"  {norm:9} kernel {statistics.median(kernel):6.1f} ms ({statistics.median(kernel) - none:+.1f}), "
              f"torch form {statistics.median(torch_):6.1f} ms ({statistics.median(torch_) - none:+.1f}): "
              f"kernel {statistics.median(ratios):.2f} x faster ({min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
