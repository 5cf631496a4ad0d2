"""The GAT ratios of `lipnorm bench` for a few cells, with many more rounds.

Same models, steps and interleaving as `lipnorm bench` (`lipnorm.bench.measure_case`),
but 90 s and at least 20 rounds per cell, for the cells whose ratios sit near their
targets: GAT-Lip / GAT at 8 x 64 and depth 2, our GAT / DGL where the full run put it
above 1.05 (8 x 64, 10^4 edges, depth 10), and the 8 x 8 cells against DGL and PyG.
Run it on an otherwise idle machine:

    .venv/bin/python benchmarks/gat_ratios_focused.py --mirror ../shared/datasets

Not a test: it prints ratios of medians with the quartiles of the per-round ratios.
"""

from __future__ import annotations

import argparse
import dataclasses

import pandas as pd

from lipnorm import bench

CELLS = [
    ("csbm-10000", 2, 8, 64),
    ("cora", 2, 8, 64),
    ("csbm-10000", 10, 8, 64),
    ("csbm-10000", 2, 8, 8),
    ("cora", 10, 8, 8),
]
RATIOS = [("gat-lip", "gat"), ("gat", "dgl-gat"), ("gat-lip", "pyg-gat")]


def ratio(times: dict[str, dict[int, float]], num: str, den: str) -> str:
    stats = bench.paired_ratio(pd.Series(times[num]), pd.Series(times[den]), None)
    return (
        f"{num}/{den} {stats['ratio']:.3f} (paired {stats['paired_q25']:.3f}-{stats['paired_q75']:.3f}, "
        f"{stats['rounds']} rounds)"
    )


def main() -> None:
    import dgl
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", default=None, help="dataset mirror folder")
    parser.add_argument("--root", default="resources/datasets", help="dataset folder")
    args = parser.parse_args()
    torch.set_num_threads(1)
    dgl.utils.set_num_threads(1)
    plan = dataclasses.replace(
        bench.FULL, families=("gat",), seconds_per_case=90.0, min_rounds=20, max_rounds=200
    )
    for spec, depth, heads, hidden in CELLS:
        graph = bench.load_graph(spec, args.root, args.mirror)
        case = bench.Case("gat", spec.split("-")[0], graph.nodes, graph.edges, depth, heads, hidden)
        times: dict[str, dict[int, float]] = {}
        for row in bench.measure_case(case, graph, plan, log=lambda message: None):
            if row["metric"] == "step_seconds":
                times.setdefault(row["implementation"], {})[row["round"]] = row["value"]
        cell = f"{spec} depth {depth} {heads}x{hidden}:"
        print(cell, " | ".join(ratio(times, num, den) for num, den in RATIOS), flush=True)


if __name__ == "__main__":
    main()
