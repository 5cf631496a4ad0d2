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


def _add_train(sub: argparse._SubParsersAction) -> None:
    train = sub.add_parser(
        "train",
        help="train one model and write its run directory",
        description="Train one model; settings come from --config FILE (YAML/JSON) and "
        "the flags, which override the file. Unset settings take the paper's defaults.",
    )
    train.add_argument("--config", metavar="FILE", help="YAML or JSON file of settings")
    train.add_argument("--out", required=True, metavar="RUN_DIR", help="run directory to write")
    # SUPPRESS: a flag that is not given leaves the file's value (or the default) alone.
    flags = train.add_argument_group("settings (default: the config file, else the paper's)")
    for flag, kind, text in (
        ("--dataset", str, "cora, citeseer, pubmed, coauthor-cs, ppi, ogbn-arxiv, csbm"),
        ("--model", str, "gat, gat-lip, gat-pairnorm, gat-lip-pairnorm, gt, gt-lip, gat-classic"),
        ("--norm-extra", str, "pairnorm: add PairNorm (gat -> gat-pairnorm)"),
        ("--depth", int, "attention layers (default 2)"),
        ("--alpha", float, "LipschitzNorm scale (default 1)"),
        ("--heads", int, "attention heads (default 8)"),
        ("--hidden", int, "features per head (default 8)"),
        ("--feat-drop", float, "feature dropout (default: the model's)"),
        ("--attn-drop", float, "attention dropout (default: the model's)"),
        ("--missing-rate", float, "percent of non-training feature rows erased (default 0)"),
        ("--seed", int, "seed of everything, the missing-features mask included (default 0)"),
        ("--epochs", int, "default 200"),
        ("--lr", float, "Adam learning rate (default 0.005)"),
        ("--weight-decay", float, "default 5e-4"),
        ("--protocol", str, "best-val (default) or official"),
        ("--patience", int, "best-val: stop after this many epochs without a better val metric"),
        ("--variant", str, "LipschitzNorm variant: paper (default) or official"),
        ("--threads", int, "torch/DGL CPU threads (default 1)"),
        ("--grad-log-every", int, "log gradient and output norms every K epochs (default 1)"),
        ("--mask", str, "missing-features mask (.npy) from `lipnorm data mask`"),
        ("--data-root", str, "dataset folder (default resources/datasets)"),
        ("--mirror", str, "dataset mirror folder"),
        ("--csbm", str, "csbm parameters key=value,..."),
    ):
        flags.add_argument(flag, type=kind, default=argparse.SUPPRESS, help=text)
    train.set_defaults(handler=_train)


def _train(args: argparse.Namespace) -> int:
    from lipnorm import train

    overrides = {
        key: value
        for key, value in vars(args).items()
        if key not in ("command", "handler", "config", "out")
    }
    train.run(train.load_config(args.config, overrides), args.out)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lipnorm", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    _add_data(sub)
    _add_train(sub)
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
