"""What the subcommands share: the `--plugin` option, help texts, user errors, and
printing the paths a command wrote."""

from __future__ import annotations

import argparse

from lipnorm import registry


DEVICE_HELP = (
    "cpu (default), cuda, cuda:N or auto (cuda if torch sees a GPU and DGL has CUDA, else "
    "cpu); cuda needs DGL's CUDA build (docs/training.md)"
)


PLUGIN_HELP = (
    "a Python file or importable module that registers architectures, normalisations, "
    "datasets (lipnorm.registry) or experiments (lipnorm.experiments); repeatable"
)


def plugins_parser() -> argparse.ArgumentParser:
    """The `--plugin` option every command that reads names shares."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--plugin", dest="plugins", action="append", default=[], metavar="PATH_OR_MODULE", help=PLUGIN_HELP
    )
    return parent


def names_help(kind: str) -> str:
    """The registered names of `kind`, for a help text."""
    return ", ".join(registry.names(kind)) + " (or a plugin's)"


class UsageError(Exception):
    """Bad user input: printed as `lipnorm COMMAND: error: ...` after the command's usage, exit code 2.

    Library code raises ValueError for bad settings; main() reports both the same way.
    """

def print_paths(paths) -> int:
    """Print each path a command wrote, one a line; exit status 0."""
    for path in paths:
        print(path)
    return 0
