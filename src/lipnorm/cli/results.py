"""`lipnorm aggregate`, `tables`, `plots` and `publish`: from run directories to tidy
tables, an experiment's LaTeX tables and figures, and the repository's published copy."""

from __future__ import annotations

import argparse

from lipnorm import experiments
from lipnorm.cli.common import UsageError, plugins_parser, print_paths


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """`lipnorm aggregate`, `tables` and `plots`."""
    aggregate = sub.add_parser(
        "aggregate", parents=[plugins_parser()],
        help="gather run directories into tidy tables (runs, epochs, gradnorms, outnorms)",
    )
    aggregate.add_argument("--out-dir", required=True, help="folder for <table>.parquet and .csv")
    aggregate.add_argument("run_dirs", nargs="*", metavar="RUN_DIR", help="finished run directories")
    aggregate.add_argument(
        "--runs-from", metavar="FILE",
        help="also the run directories listed in FILE, one per line (for grids whose paths "
        "exceed a command line)",
    )
    aggregate.set_defaults(handler=_aggregate)
    for name, handler, what in (
        ("tables", _tables, "LaTeX tables (<stem>.tex)"),
        ("plots", _plots, "figures (<stem>.pdf and .png)"),
    ):
        parser = sub.add_parser(name, parents=[plugins_parser()], help=f"write an experiment's {what}")
        parser.add_argument("experiment", metavar="EXPERIMENT",
                            help=", ".join(experiments.names()) + " (or a plugin's; lipnorm.experiments)")
        parser.add_argument("--aggregate-dir", required=True, help="output of `lipnorm aggregate`")
        parser.add_argument("--out-dir", required=True)
        parser.set_defaults(handler=handler)


def _aggregate(args: argparse.Namespace) -> int:
    from lipnorm.results.aggregate import read_run_list, write_aggregate

    run_dirs = list(args.run_dirs)
    if args.runs_from is not None:
        run_dirs += read_run_list(args.runs_from)
    if not run_dirs:
        raise UsageError("no run directories: give RUN_DIR arguments or --runs-from FILE")
    return print_paths(write_aggregate(run_dirs, args.out_dir))


def _tables(args: argparse.Namespace) -> int:
    from lipnorm.results.tables import write_tables

    return print_paths(write_tables(args.experiment, args.aggregate_dir, args.out_dir))


def _plots(args: argparse.Namespace) -> int:
    from lipnorm.results.figures import write_figures

    return print_paths(write_figures(args.experiment, args.aggregate_dir, args.out_dir))


def add_publish_parser(sub: argparse._SubParsersAction) -> None:
    """`lipnorm publish`."""
    publish = sub.add_parser(
        "publish",
        parents=[plugins_parser()],
        help="copy a finished results tree's tables, figures and small aggregates for the repository",
        description="For each experiment folder under RESULTS_ROOT, copy its tables and figures "
        "into OUT_DIR/<experiment>/ with a small runs.csv (and gradient_ratios.csv, probe.csv) "
        "from which the tables and OUT_DIR/summary.md are regenerated; OUT_DIR is replaced "
        "atomically.",
    )
    publish.add_argument("results_root", metavar="RESULTS_ROOT", help="e.g. results")
    publish.add_argument("--out", required=True, metavar="OUT_DIR", help="e.g. docs/results")
    publish.set_defaults(handler=_publish)


def _publish(args: argparse.Namespace) -> int:
    from lipnorm.results.publish import publish

    return print_paths(publish(args.results_root, args.out))
