"""`lipnorm bench` and `lipnorm probe`: timing our attention layers against DGL's and
PyG's, and probing their Lipschitz constants."""

from __future__ import annotations

import argparse

from lipnorm.cli.common import DEVICE_HELP, print_paths
from lipnorm.settings.constants import DEFAULT_DATA_ROOT


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """`lipnorm bench`."""
    bench = sub.add_parser(
        "bench",
        help="time and measure LipschitzNorm layers next to DGL's and PyG's",
        description="Interleaved training-step timings, memory, gradient-logging overhead and "
        "scaling of our attention layers (with and without LipschitzNorm), dgl.nn.GATConv and "
        "PyG's GATConv/TransformerConv. Needs the `bench` extra (torch_geometric).",
    )
    bench.add_argument("--quick", action="store_true", help="a tiny subset (well under a minute)")
    bench.add_argument("--out", default="results/bench", help="output folder (default: %(default)s)")
    bench.add_argument("--threads", type=int, help="torch/DGL CPU threads (default: torch's default)")
    bench.add_argument("--data-root", default=DEFAULT_DATA_ROOT, help="dataset folder (default: %(default)s)")
    bench.add_argument("--mirror", metavar="DIR", help="dataset mirror (default: $LIPNORM_DATA_MIRROR)")
    bench.add_argument("--device", default="cpu", help=DEVICE_HELP)
    bench.add_argument(
        "--flush-denormal", action="store_true", help="flush denormal floats to zero (torch.set_flush_denormal)"
    )
    bench.set_defaults(handler=_bench)


def _bench(args: argparse.Namespace) -> int:
    from lipnorm.bench import run_benchmark

    return print_paths(run_benchmark(
        args.out, args.quick, args.threads, args.data_root, args.mirror,
        device=args.device, flush_denormal=args.flush_denormal,
    ))


def add_probe_parser(sub: argparse._SubParsersAction) -> None:
    """`lipnorm probe`."""
    probe = sub.add_parser(
        "probe",
        help="empirical Lipschitz probe of GAT/GT layers with and without LipschitzNorm",
        description="Jacobian spectral norm of one attention layer (gat, gat-lip, gt, gt-lip) "
        "at random and at tied-score inputs scaled by each s; writes probe.parquet and "
        "probe.csv (columns model, s, kind, estimate).",
    )
    probe.add_argument("--out-dir", required=True, metavar="DIR", help="folder for probe.{parquet,csv}")
    probe.add_argument("--seed", type=int, default=0, help="graph, weights and inputs (default: %(default)s)")
    probe.add_argument(
        "--scales", type=_scales, default="1,10,100,1000", help="input scales s, comma-separated (default: %(default)s)"
    )
    probe.add_argument("--iters", type=int, default=100, help="Lanczos steps at most (default: %(default)s)")
    probe.add_argument("--device", default="cpu", help=DEVICE_HELP)
    probe.set_defaults(handler=_probe)


def _scales(text: str) -> list[float]:
    try:
        return [float(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of numbers") from None


def _probe(args: argparse.Namespace) -> int:
    from lipnorm.lipschitz_probe import write_probe

    return print_paths(write_probe(args.out_dir, args.seed, args.scales, args.iters, device=args.device))
