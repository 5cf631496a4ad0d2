"""`lipnorm plan`: predict training runs' peak memory and time, or calibrate the prediction."""

from __future__ import annotations

import argparse
import sys

from lipnorm import registry
from lipnorm.cli.common import names_help, plugins_parser
from lipnorm.settings.constants import DEFAULT_DATA_ROOT


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """`lipnorm plan`: one run, a workflow config, or the calibration."""
    plan = sub.add_parser(
        "plan",
        parents=[plugins_parser()],
        help="predict training runs' peak memory and time; calibrate the prediction",
        description="Predict one run's peak memory (MB) and epoch time (s) from its settings and "
        "its dataset's sizes (--dataset ...), or every training job of a workflow config "
        "(--configfile), or measure this machine and fit the coefficients (--calibrate). "
        "Coefficients: --coefficients FILE, else $LIPNORM_PLAN_COEFFICIENTS, else the ones "
        "shipped with lipnorm (docs/cluster.md, \"Planning memory and time\").",
    )
    what = plan.add_mutually_exclusive_group(required=True)
    what.add_argument("--dataset", help="plan one run on this dataset: " + names_help("dataset"))
    what.add_argument("--configfile", metavar="FILE", help="plan every training job of this workflow config")
    what.add_argument(
        "--calibrate", action="store_true",
        help="train a fixed set of csbm runs (2 epochs each, about 15 min on one core), fit, write --out",
    )
    plan.add_argument("--coefficients", metavar="FILE", help="calibration file (default: $LIPNORM_PLAN_COEFFICIENTS, else lipnorm's own)")
    plan.add_argument("--out", metavar="FILE", default="plan_coefficients.json", help="--calibrate: file to write (default: %(default)s)")
    plan.add_argument("--threads", type=int, default=1, help="--calibrate: threads of each run (default: %(default)s)")
    plan.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="device of the runs: --calibrate runs on it; an estimate notes coefficients of another (default: %(default)s)")
    run = plan.add_argument_group("one run (with --dataset)")
    run.add_argument("--csbm", help="csbm parameters key=value,...")
    run.add_argument("--depth", type=int, default=2, help="attention layers (default: %(default)s)")
    run.add_argument("--heads", type=int, default=8, help="(default: %(default)s)")
    run.add_argument("--hidden", type=int, default=8, help="features per head (default: %(default)s)")
    run.add_argument("--model", default="gat-lip", help="model, for its layers' projections (default: %(default)s)")
    run.add_argument("--checkpoint", action="store_true", help="activation checkpointing")
    run.add_argument("--batching", default="full", help="full (default) or cluster")
    run.add_argument("--partitions", type=int, help="cluster: METIS partitions K (default: sized by the graph, as lipnorm train)")
    run.add_argument("--batch-partitions", type=int, help="cluster: partitions per batch B (default: sized by the graph)")
    run.add_argument("--data-root", default=DEFAULT_DATA_ROOT, help="a plugin's dataset without sizes is loaded from here")
    plan.set_defaults(handler=_plan)


def _plan(args: argparse.Namespace) -> int:
    from lipnorm import plan

    registry.load_plugins(args.plugins)
    if args.calibrate:
        coefficients = plan.calibrate(args.out, args.threads, args.device, progress=print)
        print(f"wrote {args.out} ({len(coefficients.measurements)} runs on {coefficients.machine})")
        return 0
    coefficients = plan.load_coefficients(args.coefficients)
    if args.configfile:
        print(plan.config_report(plan.read_config(args.configfile), coefficients))
        return 0
    sizes = plan.dataset_sizes(args.dataset, args.csbm, root=args.data_root)
    counts = (1, 1)
    if args.batching == "cluster":
        from lipnorm.settings.train_config import cluster_counts

        chosen = cluster_counts(sizes.nodes, args.partitions, args.batch_partitions)
        print(f"cluster batches: K {chosen.partitions}, B {chosen.batch_partitions} ({chosen.reason})")
        counts = (chosen.partitions, chosen.batch_partitions)
    shape = plan.RunShape(
        sizes, args.depth, args.heads, args.hidden, args.checkpoint, args.batching, *counts,
        plan.projections_of(args.model),
    )
    estimate = coefficients.estimate(shape)
    if args.device != coefficients.device:
        print(f"note: the coefficients were measured on {coefficients.device}, not {args.device}", file=sys.stderr)
    print(f"{estimate.memory_mb:.0f} MB peak memory, {estimate.epoch_s:.2f} s per epoch ({coefficients.threads} thread(s), {coefficients.device})")
    return 0
