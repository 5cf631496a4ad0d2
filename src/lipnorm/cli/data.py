"""`lipnorm data`: download, verify and inspect datasets, and write missing-features masks."""

from __future__ import annotations

import argparse

from lipnorm.cli.common import names_help, plugins_parser
from lipnorm.settings.constants import DEFAULT_DATA_ROOT
from lipnorm.settings.recipes import MISSING_POOLS


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """`lipnorm data fetch`, `info` and `mask`."""
    data = sub.add_parser("data", help="download, verify and inspect datasets")
    data_sub = data.add_subparsers(dest="data_command", required=True)
    common = argparse.ArgumentParser(add_help=False, parents=[plugins_parser()])
    common.add_argument("name", metavar="NAME", help=names_help("dataset"))
    common.add_argument(
        "--root", default=DEFAULT_DATA_ROOT, help="dataset folder (default: %(default)s)"
    )
    common.add_argument(
        "--mirror",
        metavar="DIR",
        help="local mirror of the data servers (default: $LIPNORM_DATA_MIRROR, else download)",
    )
    generated = argparse.ArgumentParser(add_help=False)
    generated.add_argument(
        "--csbm", metavar="SPEC", help="csbm parameters key=value,... (e.g. nodes=500,classes=3)"
    )

    fetch = data_sub.add_parser(
        "fetch", parents=[common], help="download (or copy from the mirror) and verify"
    )
    fetch.add_argument(
        "--no-verify", dest="verify", action="store_false", help="skip the SHA-256 check of raw files"
    )
    fetch.set_defaults(handler=_data_fetch)
    info = data_sub.add_parser(
        "info", parents=[common, generated], help="print node, edge, feature, class and split counts"
    )
    info.add_argument("--json", action="store_true", help="print one JSON object")
    info.set_defaults(handler=_data_info)
    mask = data_sub.add_parser(
        "mask", parents=[common, generated], help="write a missing-features mask (.npy)"
    )
    mask.add_argument(
        "--rate", type=float, required=True, help="percent (0-100) of the pool's nodes erased"
    )
    mask.add_argument("--seed", type=int, required=True, help="seed of the draw")
    mask.add_argument(
        "--pool", choices=MISSING_POOLS, default="unlabelled",
        help="nodes that may be erased: unlabelled (every non-training node; default) or "
        "evaluation (the validation and test nodes, SNR's setting)",
    )
    mask.add_argument("--out", required=True, metavar="PATH.npy", help="mask file to write")
    mask.set_defaults(handler=_data_mask)


def _data_fetch(args: argparse.Namespace) -> int:
    from lipnorm import data

    folder = data.fetch_dataset(args.name, args.root, args.mirror, args.verify)
    print(folder if folder is not None else f"{args.name}: generated from parameters, nothing to fetch")
    return 0


def _data_info(args: argparse.Namespace) -> int:
    import json

    from lipnorm import data

    info = data.describe_dataset(args.name, args.root, args.mirror, args.csbm)
    lines = [f"{key:<11} {value}" for key, value in info.items()]
    print(json.dumps(info, indent=2) if args.json else "\n".join(lines))
    return 0


def _data_mask(args: argparse.Namespace) -> int:
    from lipnorm import data

    print(data.write_mask(args.out, args.name, args.rate, args.seed, args.root, args.mirror, args.csbm, args.pool))
    return 0
