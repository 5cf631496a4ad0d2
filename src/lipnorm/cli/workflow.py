"""`lipnorm workflow`: run the installed Snakemake workflow in the current folder."""

from __future__ import annotations

import argparse

from lipnorm import workflow


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """`lipnorm workflow [--configfile FILE] [--profile NAME|PATH] [snakemake arguments...]`."""
    parser = sub.add_parser(
        "workflow",
        # `--config` is Snakemake's: no abbreviation may turn it into `--configfile`.
        allow_abbrev=False,
        usage="%(prog)s [-h] [--configfile FILE] [--profile default|slurm|PATH] [snakemake arguments ...]",
        help="run the Snakemake workflow (grid, tables, figures) in the current folder",
        description="Run lipnorm's Snakemake workflow, as installed with lipnorm, in the current "
        "folder: results/, resources/ and .snakemake/ are written here (as the config's "
        "`results:` and `resources:` say), plugin files in the config are relative to the "
        "config file. Every other argument goes to Snakemake unchanged (e.g. -n, --cores 4, "
        "a target) (docs/workflow.md, \"Running in your own project\").",
    )
    parser.add_argument(
        "--configfile", metavar="FILE", default="config.yaml",
        help="the workflow config (default: %(default)s in the current folder)",
    )
    parser.add_argument(
        "--profile", metavar="default|slurm|PATH", default="default",
        help="Snakemake profile: lipnorm's local one (default), its SLURM one (slurm), or a "
        "folder of your own",
    )
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    workflow.run(args.configfile, args.profile, args.snakemake_args)
    return 0  # not reached: run() replaces this process
