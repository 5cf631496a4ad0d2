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


    compare = sub.add_parser(
        "compare",
        help="does arm B do better than arm A? a paired test per comparison, Holm over them",
        description="Compare two arms of any experiment's runs (lipnorm.results.compare): per seed the "
        "mean over the blocks of B - A, an exact sign-flip test per group, a Student-t interval, "
        "Holm over the groups, per-block intervals beside the count expected by chance. With "
        "--primary or --secondary, the pre-registered analyses of docs/results/analysis-plan.md.",
    )
    compare.add_argument("runs", nargs="+", metavar="RUNS",
                         help="runs tables: runs.csv (published) or runs.parquet (lipnorm aggregate), joined")
    family = compare.add_mutually_exclusive_group()
    family.add_argument("--primary", action="store_true",
                        help="the analysis plan's test: attention_norm lip vs none per dataset and remedy")
    family.add_argument("--secondary", action="store_true",
                        help="the analysis plan's secondary family: lip vs none per protocol (SNR's, DropEdge's "
                        "two) and dataset, Holm over its 6 pairs; RUNS lie in the published folders of its "
                        "parts (dropedge-secondary-authors, dropedge-secondary-decorr, snr-secondary-lr0.01, "
                        "snr-secondary-lr0.001), which name each table's protocol")
    compare.add_argument("--axis", help="the column holding the two arms, e.g. attention_norm")
    compare.add_argument("--a", dest="arm_a", help="the reference arm's value, e.g. none")
    compare.add_argument("--b", dest="arm_b", help="the tested arm's value, e.g. lip")
    compare.add_argument("--metric", default="best_val_test", help="the outcome column (default best_val_test)")
    compare.add_argument("--groups", default="", help="comma-separated columns: one comparison per value")
    compare.add_argument("--blocks", default=None,
                         help="the block column's values to average over, e.g. 1-10,15,20 (default: all)")
    compare.add_argument("--block", default="depth", help="the block column (default depth)")
    compare.add_argument("--scale", type=float, default=1.0, help="multiply the differences (100: points)")
    compare.add_argument("--out", metavar="CSV", help="also write the tests table here")
    compare.add_argument("--report", metavar="DIR",
                         help="also write a folder: the tests, per-seed and per-block tables (CSV), the table "
                         "as LaTeX and Markdown (comparison.tex, comparison.md) and its figure "
                         "(comparison.pdf|png); needs the plots extra")
    compare.set_defaults(handler=_compare)


def _int_ranges(text: str) -> list[int]:
    """`1-10,15,20` -> [1, ..., 10, 15, 20]."""
    values = []
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        try:
            values += list(range(int(low), int(high or low) + 1))
        except ValueError:
            raise UsageError(f"--blocks {text!r}: give integers and ranges, e.g. 1-10,15,20") from None
    return values


PRIMARY_TITLE = ("The primary analysis of docs/results/analysis-plan.md: GAT-Lip against GAT inside each "
                 "remedy, per dataset")
SECONDARY_TITLE = ("The secondary analysis of docs/results/analysis-plan.md: GAT-Lip against GAT inside the "
                   "residual's and DropEdge's own protocols, per dataset")


def _compare(args: argparse.Namespace) -> int:
    from pathlib import Path

    import pandas as pd

    from lipnorm.io import atomic_path
    from lipnorm.results.compare import SECONDARY_SOURCES, compare_arms, primary_analysis, secondary_analysis

    if args.report:
        import lipnorm.results.figures.compare  # noqa: F401  the plots extra, checked before any work
    frames = []
    for path in map(Path, args.runs):
        if not path.is_file():
            raise UsageError(f"runs table {str(path)!r} does not exist")
        frames.append(pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path))
    if args.secondary:
        tables = {}
        for path, frame in zip(map(Path, args.runs), frames):
            part = next((folder.name for folder in path.parents if folder.name in SECONDARY_SOURCES), None)
            if part is None:
                raise UsageError(f"runs table {str(path)!r} lies in no folder of the secondary family "
                                 f"({', '.join(SECONDARY_SOURCES)})")
            if part in tables:
                raise UsageError(f"two runs tables of the part {part!r}; give each part once")
            tables[part] = frame
        comparison = secondary_analysis(tables, metric=args.metric)
    elif args.primary:
        comparison = primary_analysis(pd.concat(frames, ignore_index=True), metric=args.metric)
    else:
        runs = pd.concat(frames, ignore_index=True)
        missing = [flag for flag, value in (("--axis", args.axis), ("--a", args.arm_a), ("--b", args.arm_b)) if not value]
        if missing:
            raise UsageError(f"give {', '.join(missing)} (or --primary, or --secondary)")
        numeric = args.axis in runs.columns and pd.api.types.is_numeric_dtype(runs[args.axis])
        arms = [float(value) if numeric else value for value in (args.arm_a, args.arm_b)]
        comparison = compare_arms(
            runs, args.axis, *arms, args.metric, groups=[g for g in args.groups.split(",") if g], block=args.block,
            blocks=None if args.blocks is None else _int_ranges(args.blocks), scale=args.scale,
        )
    with pd.option_context("display.width", 200, "display.max_columns", None):
        print(comparison.tests.to_string(index=False))
    chance = comparison.chance()
    print("per-block intervals (description, not a test): " + ", ".join(f"{key} {value}" for key, value in chance.items()))
    for pair, what in comparison.settings.get("held_back", {}).items():
        print(f"held back, its sweep not complete (counted as not yet run): {pair}: {what}")
    if args.out:
        with atomic_path(args.out) as tmp:
            comparison.tests.to_csv(tmp, index=False)
    if args.report:
        import shlex

        from lipnorm.results.compare import write_report

        options = ["--primary"] if args.primary else ["--secondary"] if args.secondary else [
            "--axis", args.axis, "--a", args.arm_a, "--b", args.arm_b,
            *(["--groups", args.groups] if args.groups else []), "--block", args.block,
            *(["--blocks", args.blocks] if args.blocks is not None else []), "--scale", f"{args.scale:g}",
        ]
        metric = [] if args.metric == "best_val_test" else ["--metric", args.metric]
        command = shlex.join(["lipnorm", "compare", *args.runs, *options, *metric, "--report", args.report])
        unit = "points" if args.primary or args.secondary or args.scale == 100 else ""
        title = PRIMARY_TITLE if args.primary else SECONDARY_TITLE if args.secondary else ""
        print_paths(write_report(comparison, args.report, sources=args.runs, command=command, unit=unit, title=title))
    return 0


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
        "atomically. With --merge PART ..., join published folders instead: runs.csv and the "
        "stored files concatenated (a run in two parts kept once if equal, refused if not), "
        "tables, summary.md and every figure whose inputs are stored rendered again from them, "
        "parts.csv listing the parts; OUT_DIR may be one of the parts.",
    )
    publish.add_argument("results_root", metavar="RESULTS_ROOT", nargs="?", help="e.g. results")
    publish.add_argument("--merge", nargs="+", metavar="PART",
                         help="published folders to merge (e.g. docs/results/literature-cora "
                         "docs/results/literature-cora-more), instead of RESULTS_ROOT")
    publish.add_argument("--out", required=True, metavar="OUT_DIR", help="e.g. docs/results")
    publish.set_defaults(handler=_publish)


def _publish(args: argparse.Namespace) -> int:
    from lipnorm.results.publish import merge, publish

    if (args.results_root is None) == (args.merge is None):
        raise UsageError("give either RESULTS_ROOT or --merge PART [PART ...]")
    if args.merge is not None:
        return print_paths(merge(args.merge, args.out))
    return print_paths(publish(args.results_root, args.out))
