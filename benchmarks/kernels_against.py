"""Every compiled kernel of this checkout against another revision's, side by side in one process.

Question: is a change to the kernels (`src/lipnorm/kernels/`) faster or slower, call by
call? Each kernel family runs on the literature protocol's shapes (Cora, S seeds x 1 head
x 16 features, 5 seeds; the output layer's 7 features): GAT's attention (evaluation
forward; training forward and backward with attention dropout; plain and LipschitzNorm),
the seeds' projections, DGN's output and PairNorm (forward and backward), each called
through its Python entry point, as the layers call it. The other revision's kernels come
from `git archive` of that revision: a revision with `src/lipnorm/kernels/csrc/` is built
from those sources and called through this checkout's wrappers (so its kernels must take
the same arguments); an older one with `src/lipnorm/nn/fused.py` and its `kernels.c`
template is imported as it was, wrappers and all. The two run in turn, round by round;
CPU time of this process, the ratio taken round by round. Outputs and gradients are
compared first.

    PYTHONPATH=src .venv/bin/python benchmarks/kernels_against.py --against d5db617 --mirror ../shared/datasets
"""
from __future__ import annotations

import argparse
import importlib.util
import io
import os
import platform
import statistics
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import dgl
import torch

from lipnorm import data, kernels
from lipnorm.kernels import build, dispatch
from lipnorm.train.process import retain_freed_memory
from seed_batching import ratio_text

REPOSITORY = Path(__file__).resolve().parents[1]


class This:
    """This checkout's entry points, on `library` (this checkout's build, or another
    revision's built from its sources)."""

    def __init__(self, library: build.Library):
        self.library = library

    def __enter__(self):
        self.saved = dispatch._loaded
        dispatch._loaded = lambda: self.library
        return self

    def __exit__(self, *exc):
        dispatch._loaded = self.saved

    def attention(self, graph, ft, attn_l, attn_r, **options):
        return kernels.gat_attention(graph, ft, attn_l, attn_r, **options)

    def linear(self, x, weight):
        return kernels.grouped_linear(x, weight)

    def dgn(self, a, x, weight, bias):
        return kernels.dgn_output(a, x, weight, bias, 1e-5, 0.01)[0]

    def pairnorm(self, x):
        return kernels.pairnorm(x, 1.0, 1e-6)


class Fused:
    """The entry points of a revision before `lipnorm.kernels` (`lipnorm/nn/fused.py`)."""

    def __init__(self, module):
        self.module = module

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def attention(self, graph, ft, attn_l, attn_r, **options):
        return self.module.gat_attention(graph, ft, attn_l, attn_r, **options)

    def linear(self, x, weight):
        return self.module.grouped_linear(x, weight)

    def dgn(self, a, x, weight, bias):
        return self.module.dgn_output_kernel(a, x, weight, bias, 1e-5, 0.01)[0]

    def pairnorm(self, x):
        return self.module.pairnorm_kernel(x, 1.0, 1e-6)


def revision_kernels(revision: str, work: Path):
    """The kernels of `revision`, built in `work` (see the module docstring)."""
    archive = subprocess.run(["git", "archive", revision, "src/lipnorm"], cwd=REPOSITORY, capture_output=True)
    if archive.returncode != 0:
        raise SystemExit(f"cannot read {revision!r}: {archive.stderr.decode().strip()}")
    tarfile.open(fileobj=io.BytesIO(archive.stdout)).extractall(work, filter="data")
    sources = work / "src/lipnorm/kernels/csrc"
    if sources.is_dir():
        return This(build.build(cache=work / "cache", source_dir=sources))
    fused = work / "src/lipnorm/nn/fused.py"
    if not fused.exists():
        raise SystemExit(f"{revision} has neither src/lipnorm/kernels/csrc nor src/lipnorm/nn/fused.py")
    os.environ["LIPNORM_KERNEL_CACHE"] = str(work / "cache")  # fused.py reads it when it builds
    spec = importlib.util.spec_from_file_location(f"fused_{revision}", fused)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    reason = module.kernel_unavailable()
    if reason is not None:
        raise SystemExit(f"cannot build the kernels of {revision}: {reason}")
    return Fused(module)


def cases(graph: dgl.DGLGraph, seeds: int, generator: torch.Generator) -> dict[str, Callable]:
    """Each timed case: a function of the entry points giving its outputs (and gradients)."""
    nodes, edges = graph.num_nodes(), graph.num_edges()

    def leaf(*shape):
        return torch.randn(*shape, generator=generator).requires_grad_()

    out = {}
    for dim in (16, 7):
        ft, attn_l, attn_r = leaf(nodes, seeds, dim), leaf(seeds, dim), leaf(seeds, dim)
        drop = (torch.rand(seeds, edges, 1, generator=generator) > 0.6).float() / 0.4
        upstream = torch.randn(nodes, seeds, dim, generator=generator)
        for norm in ("none", "lip"):
            def evaluation(k, ft=ft, attn_l=attn_l, attn_r=attn_r, norm=norm):
                with torch.no_grad():
                    return (k.attention(graph, ft, attn_l, attn_r, norm=norm),)

            def training(k, ft=ft, attn_l=attn_l, attn_r=attn_r, norm=norm, drop=drop, upstream=upstream):
                result = k.attention(graph, ft, attn_l, attn_r, norm=norm, drop=drop, heads_per_seed=1)
                return (result, *torch.autograd.grad(result, (ft, attn_l, attn_r), upstream))

            name = "GAT" if norm == "none" else "GAT-Lip"
            out[f"attention {name} D{dim} eval fwd"] = evaluation
            out[f"attention {name} D{dim} train fwd+bwd"] = training
    x = leaf(nodes, seeds, 16)
    for size_out in (16, 7):
        weight = leaf(seeds, size_out, 16)
        upstream = torch.randn(nodes, seeds, size_out, generator=generator)
        out[f"projections 16->{size_out} fwd+bwd"] = (
            lambda k, weight=weight, upstream=upstream: (
                (result := k.linear(x, weight)), *torch.autograd.grad(result, (x, weight), upstream)
            )
        )
    a = torch.softmax(torch.randn(seeds, 10, nodes, generator=generator), dim=1).requires_grad_()
    weight, bias = leaf(seeds * 10 * 16), leaf(seeds * 10 * 16)
    upstream = torch.randn(nodes, seeds, 16, generator=generator)
    out["DGN fwd+bwd"] = lambda k: (
        (result := k.dgn(a, x, weight, bias)), *torch.autograd.grad(result, (a, x, weight, bias), upstream)
    )
    out["PairNorm fwd+bwd"] = lambda k: ((result := k.pairnorm(x)), *torch.autograd.grad(result, (x,), upstream))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True, help="git revision whose kernels are the baseline")
    parser.add_argument("--dataset", default="cora")
    parser.add_argument("--seeds", type=int, default=5, help="groups of a call (seeds x 1 head)")
    parser.add_argument("--calls", type=int, default=20, help="calls timed per round, case and revision")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--data-root", default="resources/datasets")
    parser.add_argument("--mirror", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    retain_freed_memory(map_large_tensors=False)  # as `lipnorm train`
    dataset = data.load_dataset(args.dataset, root=args.data_root, mirror=args.mirror)
    graph = dgl.add_self_loop(dgl.remove_self_loop(dataset.graph))
    timed = cases(graph, args.seeds, torch.Generator().manual_seed(0))
    with tempfile.TemporaryDirectory() as work:
        paths = {"this": This(build.build()), args.against: revision_kernels(args.against, Path(work))}
        print(f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {build.cpu_model()}, {os.cpu_count()} cores, "
              f"{platform.machine()}, 1 thread, torch {torch.__version__}; {args.dataset} ({graph.num_nodes()} nodes, "
              f"{graph.num_edges()} edges), {args.seeds} seeds x 1 head; this checkout against {args.against}")
        for name, case in timed.items():
            results = []
            for path in paths.values():
                with path:
                    results.append(case(path))
            worst = max(float(((a - b).abs() / (b.abs().max() + 1e-30)).max()) for a, b in zip(*results))
            print(f"  {name:36}: largest difference {worst:.1e} of the largest value")
            if worst > 1e-4:
                raise SystemExit(f"the kernels disagree ({name}): not the same contract, not timed")
        times = {(path, name): [] for path in paths for name in timed}
        for _ in range(args.rounds):
            for name, case in timed.items():
                for label, path in paths.items():
                    with path:
                        start = time.process_time()
                        for _ in range(args.calls):
                            case(path)
                        times[label, name].append(1000 * (time.process_time() - start) / args.calls)
    print(f"ms per call, median of {args.rounds} rounds; speed-up = {args.against} / this (range over rounds):")
    for name in timed:
        this, other = times["this", name], times[args.against, name]
        print(f"  {name:36} this {statistics.median(this):7.3f}  {args.against} {statistics.median(other):7.3f}  "
              f"speed-up {ratio_text([b / a for a, b in zip(this, other)])}")


if __name__ == "__main__":
    main()
