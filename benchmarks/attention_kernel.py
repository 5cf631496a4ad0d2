"""The compiled GAT attention of this checkout against another revision's, side by side.

Question (issue: grids of small runs): does a change to `src/lipnorm/nn/kernels.c` make
the attention faster, and by how much? The kernel of this checkout and the kernel built
from `kernels.c` at git revision `--against` run in turn, round by round in one process,
behind the same Python wrapper (`lipnorm.nn.fused.gat_attention`): so the two sources
must take the same arguments (a change of the kernels' signatures needs a benchmark of
its own). Timed per call on the literature protocol's shape (Cora, S seeds x 1 head x 16
features, attention dropout 0.6; `--dim 7`: its output layer's size on Cora): the
evaluation forward (no autograd) and the training forward and backward, plain and with
LipschitzNorm. CPU time of this process, so that another job on the machine moves the
figures less than wall time would; the ratio is taken round by round. The outputs and
gradients of both are compared first.

    python benchmarks/attention_kernel.py --against HEAD~1 --mirror ../shared/datasets
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import dgl
import torch

from lipnorm import data
from lipnorm.nn import fused
from lipnorm.train.tuning import retain_freed_memory
from seed_batching import ratio_text

REPOSITORY = Path(__file__).resolve().parents[1]


def library_of(revision: str, work: Path):
    """The kernels built from `kernels.c` at `revision` (in a cache of their own)."""
    source = subprocess.run(
        ["git", "show", f"{revision}:src/lipnorm/nn/kernels.c"], cwd=REPOSITORY, capture_output=True, text=True
    )
    if source.returncode != 0:
        raise SystemExit(f"cannot read kernels.c at {revision!r}: {source.stderr.strip()}")
    path = work / "kernels.c"
    path.write_text(source.stdout)
    library = fused._build(path, work / "cache")
    if isinstance(library, str):
        raise SystemExit(f"cannot build kernels.c of {revision}: {library}")
    return library


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True, help="git revision whose kernels.c is the baseline")
    parser.add_argument("--dataset", default="cora")
    parser.add_argument("--seeds", type=int, default=5, help="groups of the call (seeds x 1 head)")
    parser.add_argument("--dim", type=int, default=16, help="features per group: 16 (a hidden layer), 7 (Cora's output layer)")
    parser.add_argument("--calls", type=int, default=30, help="calls timed per round, kernel and case")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--data-root", default="resources/datasets")
    parser.add_argument("--mirror", default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    retain_freed_memory(map_large_tensors=False)  # as `lipnorm train`
    dataset = data.load_dataset(args.dataset, root=args.data_root, mirror=args.mirror)
    graph = dgl.add_self_loop(dgl.remove_self_loop(dataset.graph))
    generator = torch.Generator().manual_seed(0)
    nodes, groups, edges = graph.num_nodes(), args.seeds, graph.num_edges()
    ft = torch.randn(nodes, groups, args.dim, generator=generator, requires_grad=True)
    attn_l, attn_r = (torch.randn(groups, args.dim, generator=generator, requires_grad=True) for _ in range(2))
    drop = (torch.rand(groups, edges, 1, generator=generator) > 0.6).float() / 0.4
    grad_out = torch.randn(nodes, groups, args.dim, generator=generator)
    mine = fused._library()
    if isinstance(mine, str):
        raise SystemExit(f"cannot build this checkout's kernels: {mine}")
    with tempfile.TemporaryDirectory() as work:
        libraries = {"this": mine, args.against: library_of(args.against, Path(work))}

        def call(library, norm: str, case: str):
            fused._library = lambda: library
            if case == "eval":
                with torch.no_grad():
                    return (fused.gat_attention(graph, ft, attn_l, attn_r, norm=norm),)
            out = fused.gat_attention(graph, ft, attn_l, attn_r, norm=norm, drop=drop, heads_per_seed=1)
            return (out, *torch.autograd.grad(out, (ft, attn_l, attn_r), grad_out))

        cases = [(norm, case) for norm in ("none", "lip") for case in ("eval", "train")]
        print(f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.processor() or platform.machine()}, "
              f"{os.cpu_count()} cores, 1 thread, torch {torch.__version__}; {args.dataset} ({nodes} nodes, {edges} "
              f"edges), {groups} groups x {args.dim}, this checkout against {args.against}")
        for norm, case in cases:
            this, other = (call(libraries[name], norm, case) for name in libraries)
            worst = max(float(((a - b).abs() / (b.abs().max() + 1e-30)).max()) for a, b in zip(this, other))
            print(f"  {norm:4} {case:5}: largest difference {worst:.1e} of the largest value")
            if worst > 1e-4:
                raise SystemExit(f"the kernels disagree ({norm}, {case}): not the same contract, not timed")
        times = {(name, norm, case): [] for name in libraries for norm, case in cases}
        for _ in range(args.rounds):
            for norm, case in cases:
                for name, library in libraries.items():
                    start = time.process_time()
                    for _ in range(args.calls):
                        call(library, norm, case)
                    times[name, norm, case].append(1000 * (time.process_time() - start) / args.calls)
        fused._library = mine
    print("ms per call, median of rounds; speed-up = baseline / this (range over rounds):")
    for norm, case in cases:
        this, other = times["this", norm, case], times[args.against, norm, case]
        ratios = [b / a for a, b in zip(this, other)]
        print(f"  {'GAT' if norm == 'none' else 'GAT-Lip':8} {case + (' fwd' if case == 'eval' else ' fwd+bwd'):14} "
              f"this {statistics.median(this):.3f}  {args.against} {statistics.median(other):.3f}  "
              f"speed-up {ratio_text(ratios)}")


if __name__ == "__main__":
    main()
