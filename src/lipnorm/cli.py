"""The `lipnorm` command line: one entry point, one subcommand per stage.

Heavy imports (torch, dgl) happen inside the handlers so that `lipnorm --help`
and argument errors are instant.
"""

from __future__ import annotations

import argparse
import sys


class UsageError(Exception):
    """Bad user input: printed as `lipnorm: error: ...`, exit code 2.

    Library code raises ValueError for bad settings; main() reports both the same way.
    """


def _add_data(sub: argparse._SubParsersAction) -> None:
    data = sub.add_parser("data", help="download, verify and inspect datasets")
    data_sub = data.add_subparsers(dest="data_command", required=True)
    # Filled in by the dataset stage.


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lipnorm", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    _add_data(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except (UsageError, ValueError) as err:
        parser.error(str(err))
    return 0


if __name__ == "__main__":
    sys.exit(main())
