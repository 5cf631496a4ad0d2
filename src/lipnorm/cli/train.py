"""`lipnorm train`: train one model (or seeds side by side) and write its run directory."""

from __future__ import annotations

import argparse

from lipnorm.cli.common import DEVICE_HELP, names_help, plugins_parser
from lipnorm.settings.constants import BATCHINGS, DEFAULT_DATA_ROOT
from lipnorm.settings.recipes import RECIPES


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """`lipnorm train`: every setting a flag, which overrides `--config`'s."""
    train = sub.add_parser(
        "train",
        parents=[plugins_parser()],
        help="train one model and write its run directory",
        description="Train one model; settings come from --config FILE (YAML/JSON) and "
        "the flags, which override the file. Unset settings take the defaults of --recipe.",
    )
    train.add_argument("--config", metavar="FILE", help="YAML or JSON file of settings")
    train.add_argument("--out", required=True, metavar="RUN_DIR", help="run directory to write "
                       "(with --seeds: containing {seed}, e.g. runs/s{seed}); one holding a finished run "
                       "(its summary.json) is refused unless --overwrite")
    train.add_argument(
        "--overwrite", action="store_true",
        help="replace a finished run in --out (renamed into place once the new run ends; the "
        "old one stays until then)",
    )
    train.add_argument(
        "--seeds", type=_seed_list, metavar="S,S,...",
        help="train these seeds in this process instead of --seed, each writing the run directory a "
        "separate run with that seed writes (--out and --mask with {seed}); seeds of the literature "
        "GAT (--recipe dgn) train as one network, others one after another (docs/training.md)",
    )
    # SUPPRESS: a flag that is not given leaves the file's value (or the default) alone.
    flags = train.add_argument_group("settings (default: the config file, else the recipe's)")
    for flag, kind, text in (
        ("--dataset", str, names_help("dataset")),
        ("--model", str, "<architecture>[-lip][-<norm>]: " + names_help("model")),
        ("--architecture", str, "instead of the model's: " + names_help("architecture")),
        ("--attention-norm", str, "instead of the model's: none or lip (LipschitzNorm)"),
        ("--norm", str, "normalisation after each layer, instead of the model's: " + names_help("norm")),
        ("--norm-extra", str, "the older spelling of --norm (gat + pairnorm -> gat-pairnorm)"),
        ("--depth", int, "attention layers (default 2)"),
        ("--initial-residual", float, "GCNII's initial residual: each layer's output mixed with the input Linear's "
         "(recipe dgn: the first layer's), weight in [0, 1) (default 0: off)"),
        ("--dropedge", float, "DropEdge: rate of edges (self-loops kept) dropped afresh every training epoch (default 0: off)"),
        ("--alpha", float, "LipschitzNorm scale (default 1)"),
        ("--heads", int, "attention heads (default: lipnorm and official 8, dgn and snr 1)"),
        ("--hidden", int, "features per head (default: lipnorm 8, official 64, dgn 16, snr 32)"),
        ("--feat-drop", float, "feature dropout (default: the model's)"),
        ("--attn-drop", float, "attention dropout (default: the model's; dgn 0.6, snr 0)"),
        ("--batchnorm-momentum", float, "BatchNorm's running-statistics momentum (default: lipnorm and official 0.1, dgn 0.3)"),
        ("--dgn-skip-weight", float, "DGN's lambda (default 0.01; dgn: DGN's per dataset and missing rate)"),
        ("--missing-rate", float, "percent of the missing-features pool's feature rows erased (default 0)"),
        ("--missing-pool", str, "nodes whose features --missing-rate may erase: unlabelled (every "
         "non-training node) or evaluation (validation and test; default: snr evaluation, else unlabelled)"),
        ("--seed", int, "seed of everything, the missing-features mask included (default 0)"),
        ("--epochs", int, "default: lipnorm 200; official 1000 up to depth 4, 1500 up to 7, else 2500; dgn and snr 1000"),
        ("--lr", float, "Adam learning rate (default: lipnorm 0.005, official and snr 0.01, dgn DGN's per dataset)"),
        ("--weight-decay", float, "default 5e-4; dgn: DGN's per dataset (citeseer 5e-5)"),
        ("--protocol", str, "best-val or official (default: lipnorm best-val, official official)"),
        ("--patience", int, "best-val: stop after this many epochs without a better val metric"),
        ("--variant", str, "LipschitzNorm variant: paper or official (default: lipnorm paper, official official)"),
        ("--threads", int, "torch/DGL CPU threads (default 1)"),
        ("--device", str, DEVICE_HELP),
        ("--grad-log-every", int, "log gradient norms and layer statistics every K epochs, from epoch 1 (default 10)"),
        ("--save-every", int, "save the training state every N epochs, beside RUN_DIR as RUN_DIR.state.pt, "
         "which a rerun of the same command resumes from; SIGTERM/SIGINT save it too (default 50)"),
        ("--mask", str, "missing-features mask (.npy) from `lipnorm data mask`"),
        ("--data-root", str, f"dataset folder (default {DEFAULT_DATA_ROOT})"),
        ("--mirror", str, "dataset mirror folder"),
        ("--csbm", str, "csbm parameters key=value,..."),
    ):
        flags.add_argument(flag, type=kind, default=argparse.SUPPRESS, help=text)
    flags.add_argument(
        "--flush-denormal", action="store_true", default=argparse.SUPPRESS,
        help="flush denormal floats to zero (torch.set_flush_denormal; default off: bit-for-bit "
        "the published runs)",
    )
    flags.add_argument(
        "--residual", action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS,
        help="residual connections in the attention layers (GAT models; default off)",
    )
    flags.add_argument(
        "--output-relu", action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS,
        help="recipe dgn: the ReLU on the logits (default on, as DGN's code; off: DeCorr's GAT)",
    )
    flags.add_argument(
        "--checkpoint", action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS,
        help="activation checkpointing: each attention block recomputed in the backward pass, "
        "less memory, the same numbers (architectures registered checkpointable; default off)",
    )
    flags.add_argument(
        "--batching", choices=BATCHINGS, default=argparse.SUPPRESS,
        help="full: each training step on the whole graph (default); cluster: Cluster-GCN "
        "batches, the subgraphs of --batch-partitions of the graph's --partitions METIS parts, "
        "one step each (every architecture not registered full-batch only; docs/training.md)",
    )
    flags.add_argument(
        "--partitions", type=int, metavar="K", default=argparse.SUPPRESS,
        help="--batching cluster: METIS parts of the graph, cached under --data-root (default: "
        "sized by the graph, 64 on Cora; docs/training.md)",
    )
    flags.add_argument(
        "--batch-partitions", type=int, metavar="B", default=argparse.SUPPRESS,
        help="--batching cluster: parts per batch, B <= K (default: sized by the graph, 16 on Cora)",
    )
    flags.add_argument(
        "--no-layer-stats", dest="layer_stats", action="store_false", default=argparse.SUPPRESS,
        help="do not write layerstats.parquet (per-layer energy, MAD, attention entropy)",
    )
    flags.add_argument(
        "--recipe",
        choices=RECIPES,
        default=argparse.SUPPRESS,
        help="defaults of the settings not given: lipnorm (this project's, default), official "
        "(the authors' train_deepgat_missing.py: their DeepGAT, 8 x 64, lr 0.01, protocol and "
        "variant official, epochs by depth, planetoid features not row-normalised) or dgn (the "
        "deep-GNN literature's GAT protocol of DGN's code: 1 x 16, no Linear layers, 1000 "
        "epochs, best validation epoch, their lr and weight decay per dataset) or snr (SNR's "
        "own: input and output Linear, 1 x 32, ELU, dropout 0.5, validation and test features "
        "erased, 1000 epochs, best validation epoch; docs/training.md)",
    )
    train.epilog = KERNELS_HELP
    train.formatter_class = argparse.RawDescriptionHelpFormatter
    train.set_defaults(handler=_train)


KERNELS_HELP = """\
compiled kernels (environment):
  LIPNORM_KERNELS=auto   build the CPU kernels on first use; where they cannot be built or
                         loaded, warn once (naming why and the fix) and take the torch and
                         DGL paths (default)
  LIPNORM_KERNELS=on     refuse to start without the kernels (a grid planned on them)
  LIPNORM_KERNELS=off    never build them; the torch and DGL paths
  The run's summary.json records which path each kernel family took, the CPU, the compiler
  and the flags (docs/layers.md, "Compiled kernels").
"""


def _seed_list(text: str) -> list[int]:
    try:
        seeds = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integer seeds, e.g. 0,1,2,3,4")
    return seeds


def _train(args: argparse.Namespace) -> int:
    # Every setting and run directory is checked before torch and DGL are imported.
    from lipnorm.settings.train_config import load_config
    from lipnorm.train.targets import run_targets

    # The flags given (argparse.SUPPRESS leaves out the others) on top of the file's settings.
    flags = {key: value for key, value in vars(args).items() if key not in NOT_SETTINGS}
    if args.seeds is not None and "seed" in flags:
        raise ValueError("--seed and --seeds exclude each other: give every seed in --seeds")
    targets = run_targets(load_config(args.config, flags), args.out, args.seeds, args.overwrite)

    from lipnorm import kernels

    try:
        kernels.require()  # LIPNORM_KERNELS=on: the kernels load, or nothing runs
    except kernels.KernelsUnavailable as error:
        raise ValueError(str(error)) from None

    from lipnorm.train.run_state import RunInterrupted
    from lipnorm.train.runs import train_targets

    try:
        train_targets(targets, seed_list=args.seeds is not None)
    except RunInterrupted as stopped:  # the log has said so
        return stopped.exit_code
    return 0


# The arguments of `lipnorm train` that are not training settings.
NOT_SETTINGS = ("command", "handler", "config", "out", "plugins", "seeds", "overwrite")
