"""Step time over the dense-GEMM floor for the wide (8 x 64) GAT cells, with more rounds.

Same models, steps, floor and interleaving as `lipnorm bench` (`lipnorm.bench.measure_case`
with its `gemm-floor` step, `lipnorm.bench.floor_table`), for our GAT with and without
LipschitzNorm only, on the cells of the floor target (Cora, 8 x 64, depth 10: step /
floor <= 1.4) and around it. Run it on an otherwise idle machine:

    PYTHONPATH=src .venv/bin/python benchmarks/gemm_floor.py --mirror ../shared/datasets

Options: `--cells cora:10,csbm-100000:10` (dataset:depth, 8 x 64), `--seconds` per cell,
`--implementations gat,gat-lip,dgl-gat`, `--glibc-default-malloc` (measure without
`lipnorm.train.process.retain_freed_memory`). Not a test: it prints, per cell and
implementation, the median step and floor (ms), step / floor with the quartiles of the
per-round ratios, and the rounds.
"""

from __future__ import annotations

import argparse
import dataclasses
import os

import pandas as pd

from lipnorm import bench
from lipnorm.train.process import retain_freed_memory

CELLS = [("cora", 2), ("cora", 10), ("cora", 30), ("csbm-10000", 10), ("csbm-100000", 2)]


def main() -> None:
    import dgl
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", default=None,
                        help="dataset:depth,... (default: " + ",".join(f"{s}:{d}" for s, d in CELLS) + ")")
    parser.add_argument("--implementations", default="gat,gat-lip")
    parser.add_argument("--seconds", type=float, default=60.0, help="timed seconds per cell (at least 5 rounds)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--mirror", default=None, help="dataset mirror folder")
    parser.add_argument("--root", default="resources/datasets", help="dataset folder")
    parser.add_argument("--glibc-default-malloc", action="store_true",
                        help="leave glibc's malloc thresholds alone (lipnorm train and bench raise them)")
    args = parser.parse_args()
    if not args.glibc_default_malloc:
        retain_freed_memory()
    cells = CELLS if args.cells is None else [
        (spec, int(depth)) for spec, depth in (cell.split(":") for cell in args.cells.split(","))
    ]
    torch.set_num_threads(args.threads)
    dgl.utils.set_num_threads(args.threads)
    plan = dataclasses.replace(bench.FULL, families=("gat",), seconds_per_case=args.seconds, min_rounds=5, max_rounds=200)
    names = args.implementations.split(",")
    malloc = "glibc default" if args.glibc_default_malloc else "freed memory retained"
    print(f"{args.threads} thread(s), malloc {malloc}; load average at start " + ", ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    for spec, depth in cells:
        graph = bench.load_graph(spec, args.root, args.mirror)
        case = bench.Case("gat", bench.parse_dataset(spec)[0], graph.nodes, graph.edges, depth, 8, 64)
        rows = bench.measure_case(case, graph, plan, lambda message: None, names)
        table = bench.floor_table(pd.DataFrame(rows, columns=bench.COLUMNS))
        for row in table.itertuples():
            target = "" if pd.isna(row.target) else f", target {row.target} {'met' if row.met else 'NOT met'}"
            print(
                f"{spec} depth {depth} 8x64 {row.implementation}: step {row.step_ms:.1f} ms, floor "
                f"{row.floor_ms:.1f} ms, step/floor {row.ratio:.3f} (paired {row.paired_q25:.3f}-"
                f"{row.paired_q75:.3f}, {row.rounds} rounds){target}",
                flush=True,
            )
    print("load average at end " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
