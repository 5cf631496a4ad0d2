"""The CSR message passing on sampled blocks, side by side with DGL's kernel.

`lipnorm.nn.neighbour_sum.neighbour_weighted_sum` computes the sum as a CSR x dense product whose
layouts are cached per graph. In mini-batch training every step brings new blocks, whose
layouts are then built for one forward and backward: this measures where that still
pays (the threshold `BLOCK_MIN_FEATURES` below which blocks take DGL's kernel). On the
input-layer block of a Cora mini-batch (`NeighborSampler([10, 10])`, 512 seeds),
interleaved in one process on one thread, forward + backward (ms, medians over rounds) of

- the weighted sum alone: the CSR product on a fresh block (layouts built), on a block
  seen before (layouts cached), and DGL's `u_mul_e_sum`;
- one `GATConv(norm="lip")` layer on a fresh block: as shipped, with the CSR product
  forced, and with DGL's kernel forced.

    PYTHONPATH=src .venv/bin/python benchmarks/sampled_blocks.py --mirror ../shared/datasets

Not a test: it prints medians and ratios of medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from unittest import mock

CELLS = [(8, 8), (8, 16), (8, 32), (8, 64)]


def main() -> None:
    import dgl
    import torch

    import lipnorm.nn.conv.gat
    from lipnorm import load_dataset
    from lipnorm.nn import GATConv
    from lipnorm.nn.neighbour_sum import _NeighbourWeightedSum
    from lipnorm.train.process import retain_freed_memory

    def csr_product(graph, x, weights):  # the CSR path, whatever the graph and D
        return _NeighbourWeightedSum.apply(graph, x.contiguous(), weights)

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", default=None, help="dataset mirror folder")
    parser.add_argument("--root", default="resources/datasets", help="dataset folder")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--seeds", type=int, default=512)
    args = parser.parse_args()
    retain_freed_memory()  # as `lipnorm train` and `lipnorm bench` run
    torch.set_num_threads(1)
    dgl.utils.set_num_threads(1)
    print("load average at start " + ", ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    graph = load_dataset("cora", root=args.root, mirror=args.mirror).graph
    sampler = dgl.dataloading.NeighborSampler([10, 10])
    dgl.seed(0)
    torch.manual_seed(0)

    def fresh_block() -> dgl.DGLGraph:
        seeds = torch.randperm(graph.num_nodes())[: args.seeds]
        return sampler.sample_blocks(graph, seeds)[2][0]

    seen = fresh_block()
    print(f"block: {seen.num_src_nodes()} sources, {seen.num_dst_nodes()} destinations, {seen.num_edges()} edges")

    def timed(function) -> float:
        start = time.perf_counter()
        function()
        return 1e3 * (time.perf_counter() - start)

    for heads, dim in CELLS:
        layer = GATConv(heads * dim, dim, heads, norm="lip")

        def weighted_sum(kernel, block):
            x = torch.randn(block.num_src_nodes(), heads, dim, requires_grad=True)
            weights = torch.rand(block.num_edges(), heads, 1, requires_grad=True)
            return lambda: kernel(block, x, weights).sum().backward()

        def layer_step(block):
            feat = torch.randn(block.num_src_nodes(), heads * dim, requires_grad=True)
            return lambda: layer(block, feat).sum().backward()

        def with_kernel(kernel, step):
            def run():
                with mock.patch.object(lipnorm.nn.conv.gat, "neighbour_weighted_sum", kernel):
                    step()

            return run

        cases = {
            "sum, CSR, fresh block": lambda: weighted_sum(csr_product, fresh_block()),
            "sum, CSR, cached layout": lambda: weighted_sum(csr_product, seen),
            "sum, DGL u_mul_e_sum": lambda: weighted_sum(dgl.ops.u_mul_e_sum, fresh_block()),
            "GATConv lip, as shipped": lambda: layer_step(fresh_block()),
            "GATConv lip, CSR": lambda: with_kernel(csr_product, layer_step(fresh_block())),
            "GATConv lip, DGL kernel": lambda: with_kernel(dgl.ops.u_mul_e_sum, layer_step(fresh_block())),
        }
        times: dict[str, list[float]] = {name: [] for name in cases}
        for name, prepare in cases.items():  # warm-up
            prepare()()
        for _ in range(args.rounds):
            for name, prepare in cases.items():
                times[name].append(timed(prepare()))
        medians = {name: statistics.median(values) for name, values in times.items()}
        print(f"\n{heads} heads x {dim}: fwd+bwd ms (median of {args.rounds})")
        for name, median in medians.items():
            print(f"  {name:40s} {median:7.3f}")
        print(f"  sum: DGL / CSR fresh {medians['sum, DGL u_mul_e_sum'] / medians['sum, CSR, fresh block']:.2f}, "
              f"DGL / CSR cached {medians['sum, DGL u_mul_e_sum'] / medians['sum, CSR, cached layout']:.2f}")
        print(f"  layer: DGL kernel / CSR {medians['GATConv lip, DGL kernel'] / medians['GATConv lip, CSR']:.2f}, "
              f"DGL kernel / as shipped {medians['GATConv lip, DGL kernel'] / medians['GATConv lip, as shipped']:.2f}")
    print("load average at end " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
