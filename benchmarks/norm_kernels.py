"""What LipschitzNorm costs per GAT layer, and the least its kernels can cost.

For each cell (graph, heads x features), interleaved in one process on one thread:

- training steps of the bench's depth-10 models with our GAT and GAT-Lip layers
  (`lipnorm.bench`), the ratio the goal GAT-Lip / GAT <= 1.10 is about;
- the forward + backward of one `GATConv` layer without and with the norm (the same
  weights and input; the difference is what the norm adds to a layer);
- `lipnorm.nn.functional.lipschitz_norm_linear` alone, forward + backward;
- each kernel the paper normaliser needs, called alone (20 times in a row, warm) on
  tensors of its shapes without autograd (forward: squared norms, the neighbour max, the per-node 1/sqrt chain, the
  edge multiply; backward: the edge multiply of the gradient, the per-destination sum of
  gradient x score, the per-node chain, the scatter to the arg-max neighbours, the
  squared norms' gradient, and the accumulation into W h's gradient), and their sum:
  what the norm would cost with no Python, dispatch or autograd around its kernels.

If ten times that sum (one per layer) alone exceeds 10 % of the depth-10 GAT step, LipschitzNorm cannot be within
10 % of GAT with these kernels (DGL's and PyTorch's), whatever is done around them.
Run it on an otherwise idle machine:

    PYTHONPATH=src .venv/bin/python benchmarks/norm_kernels.py --mirror ../shared/datasets

Not a test: it prints medians (ms) and ratios of medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

CELLS = [("cora", 8, 8), ("csbm-10000", 8, 8), ("cora", 8, 64)]
DEPTH = 10
KERNEL_CALLS = 20


def main() -> None:
    import dgl
    import torch

    from lipnorm import bench
    from lipnorm.nn import GATConv
    from lipnorm.nn.functional import lipschitz_norm_linear
    from lipnorm.train.process import retain_freed_memory

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", default=None, help="dataset mirror folder")
    parser.add_argument("--root", default="resources/datasets", help="dataset folder")
    parser.add_argument("--rounds", type=int, default=100)
    args = parser.parse_args()
    retain_freed_memory()
    torch.set_num_threads(1)
    dgl.utils.set_num_threads(1)
    print("load average at start " + ", ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    for spec, heads, hidden in CELLS:
        data = bench.load_graph(spec, args.root, args.mirror)
        graph = data.structure(bench.implementations()["gat"])
        nodes, edges = graph.num_nodes(), graph.num_edges()
        generator = torch.Generator().manual_seed(0)
        torch.manual_seed(0)
        plain = GATConv(heads * hidden, hidden, heads, attn_drop=0.3)
        lip = GATConv(heads * hidden, hidden, heads, attn_drop=0.3, norm="lip")
        lip.load_state_dict(plain.state_dict())
        feat = torch.randn(nodes, heads * hidden, generator=generator, requires_grad=True)
        grad_out = torch.randn(nodes, heads, hidden, generator=generator)

        # Inputs of the normaliser and of its kernels, shaped as in the layer.
        ft = torch.randn(nodes, heads, hidden, generator=generator, requires_grad=True)
        scores = torch.randn(edges, heads, 1, generator=generator, requires_grad=True)
        attn_l = torch.randn(1, heads, hidden, generator=generator, requires_grad=True)
        attn_r = torch.randn(1, heads, hidden, generator=generator, requires_grad=True)
        grad_scores = torch.randn(edges, heads, 1, generator=generator)
        node = torch.rand(nodes, heads, 1, generator=generator) + 0.5
        ft_plain, scores_plain = ft.detach(), scores.detach()
        arg_max = torch.randint(0, nodes, (nodes, heads, 1), generator=generator)
        ft_grad = torch.randn(nodes, heads, hidden, generator=generator)

        def layer_step(layer):
            def step():
                layer(graph, feat).backward(grad_out)
            return step

        def norm_step():
            lipschitz_norm_linear(graph, scores, ft, attn_l, attn_r).backward(grad_scores)

        kernels = {
            "fwd squared norms": lambda: (ft_plain * ft_plain).sum(-1, keepdim=True),
            "fwd neighbour max": lambda: dgl.ops.copy_u_max(graph, node),
            "fwd per-node chain": lambda: torch.rsqrt(node * (node + node)).masked_fill_(node <= 0, 0.0),
            "fwd edge multiply": lambda: dgl.ops.e_mul_v(graph, scores_plain, node),
            "bwd edge multiply": lambda: dgl.ops.e_mul_v(graph, grad_scores, node),
            "bwd sum of grad x score": lambda: dgl.ops.copy_e_sum(graph, grad_scores * scores_plain),
            "bwd per-node chain": lambda: node * node.pow(3) * -0.5 * node,
            "bwd scatter to arg-max": lambda: torch.zeros_like(node).scatter_add_(0, arg_max, node),
            "bwd squared norms": lambda: ft_plain * (2 * node),
            "bwd accumulate into W h": lambda: ft_grad + ft_plain,
        }
        models = {}
        for name in ("gat", "gat-lip"):
            model = bench.build_bench_model(name, data.features.shape[1], int(data.labels.max()) + 1, DEPTH, heads, hidden)
            models[name] = (model, torch.optim.Adam(model.parameters(), lr=5e-3))

        def model_step(name):
            model, optimizer = models[name]
            return lambda: bench.train_step(model, optimizer, graph, data)

        steps = {
            "gat model": model_step("gat"),
            "gat-lip model": model_step("gat-lip"),
            "gat layer": layer_step(plain),
            "gat-lip layer": layer_step(lip),
            "norm": norm_step,
            **kernels,
        }
        times = {name: [] for name in steps}
        for step in steps.values():
            step()  # warm up
        for _ in range(args.rounds):
            for name, step in steps.items():
                # Kernels back to back, warm, as they would run fused: 20 calls per round.
                calls = KERNEL_CALLS if name in kernels else 1
                start = time.perf_counter()
                for _ in range(calls):
                    step()
                times[name].append((time.perf_counter() - start) / calls)
        median = {name: 1e3 * statistics.median(values) for name, values in times.items()}
        kernel_sum = sum(median[name] for name in kernels)
        added = median["gat-lip layer"] - median["gat layer"]
        print(f"\n{spec} ({nodes} nodes, {edges} edges), {heads} x {hidden}, {args.rounds} rounds:")
        for name in kernels:
            print(f"  {name:26s} {median[name]:7.3f} ms")
        print(
            f"  {'sum of the kernels':26s} {kernel_sum:7.3f} ms = {kernel_sum / median['gat layer']:.3f} of a GAT layer step; "
            f"x {DEPTH} layers = {DEPTH * kernel_sum / median['gat model']:.3f} of the depth-{DEPTH} GAT step"
        )
        print(f"  normaliser fwd+bwd        {median['norm']:7.3f} ms = {median['norm'] / median['gat layer']:.3f} of a GAT layer step")
        print(
            f"  GAT layer {median['gat layer']:.3f} ms, GAT-Lip layer {median['gat-lip layer']:.3f} ms: "
            f"+{added:.3f} ms, GAT-Lip / GAT {median['gat-lip layer'] / median['gat layer']:.3f}",
        )
        print(
            f"  depth-{DEPTH} model step: GAT {median['gat model']:.1f} ms, GAT-Lip {median['gat-lip model']:.1f} ms, "
            f"GAT-Lip / GAT {median['gat-lip model'] / median['gat model']:.3f}",
            flush=True,
        )
    print("\nload average at end " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
