"""Do the remedies' normalisations pay in their compiled kernels, in the literature protocol's epoch?

PairNorm's "PN" (`lipnorm.nn.norm.pairnorm.pairnorm_pn`) and DGN's output
(`lipnorm.nn.norm.dgn.dgn_output`) run in the compiled kernels of `lipnorm.kernels` where
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

from lipnorm.train.process import retain_freed_memory
from seed_batching import (
    NORM_KERNELS, literature_models, load_protocol, norm_torch_forms, print_header, ratio_text, seed_batch,
    timed_rounds, seed_batch_epoch,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--norms", default="pairnorm,dgn", help=f"comma-separated, of {', '.join(NORM_KERNELS)}")
    parser.add_argument("--depth", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=4, help="epochs timed per round and path")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--data-root", default="resources/datasets")
    parser.add_argument("--mirror", default=None)
    args = parser.parse_args()
    norms = args.norms.split(",")
    unknown = sorted(set(norms) - set(NORM_KERNELS))
    if unknown:
        parser.error(f"--norms: {', '.join(unknown)} has no compiled kernel; choose from {', '.join(NORM_KERNELS)}")
    args.dataset = "cora"
    torch.set_num_threads(1)
    retain_freed_memory(map_large_tensors=False)  # as `lipnorm train`
    protocol = load_protocol(args)

    def epoch_of(norm: str, form: str):
        epoch = seed_batch_epoch(protocol, seed_batch(literature_models(protocol, norm, "none", args.seeds)))

        def run() -> None:
            with norm_torch_forms() if form == "torch form" else contextlib.nullcontext():
                epoch()
        return run

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
              f"kernel faster by {ratio_text(ratios)}")


if __name__ == "__main__":
    main()
