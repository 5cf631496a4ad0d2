"""The `lipnorm` command line: one entry point, one subcommand per stage.

Heavy imports (torch, dgl) happen inside the handlers so that `lipnorm --help`
and argument errors are instant.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import sys

# Names, labels and colours only: no torch (the factories are imported when a model is built).
from lipnorm import experiments, registry
from lipnorm.recipes import RECIPES
from lipnorm.settings.constants import BATCHINGS, DEFAULT_DATA_ROOT

DEVICE_HELP = (
    "cpu (default), cuda, cuda:N or auto (cuda if torch sees a GPU and DGL has CUDA, else "
    "cpu); cuda needs DGL's CUDA build (docs/training.md)"
)


# The commands that train or time training: their large tensors on transparent huge
# pages (`request_huge_pages`).
HUGE_PAGE_COMMANDS = ("train", "bench")
# PyTorch's CPU allocator (2.1 and later, on Linux) advises transparent huge pages
# (madvise MADV_HUGEPAGE) for tensors of 2 MB and more, and aligns every CPU tensor to a
# page, when this is "1" at the process's first CPU allocation (read once, then kept).
HUGE_PAGES_ENV = "THP_MEM_ALLOC_ENABLE"

PLUGIN_HELP = (
    "a Python file or importable module that registers architectures, normalisations, "
    "datasets (lipnorm.registry) or experiments (lipnorm.experiments); repeatable"
)


def _plugins_parser() -> argparse.ArgumentParser:
    """The `--plugin` option every command that reads names shares."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--plugin", dest="plugins", action="append", default=[], metavar="PATH_OR_MODULE", help=PLUGIN_HELP
    )
    return parent


def _names(kind: str) -> str:
    return ", ".join(registry.names(kind)) + " (or a plugin's)"


class UsageError(Exception):
    """Bad user input: printed as `lipnorm: error: ...`, exit code 2.

    Library code raises ValueError for bad settings; main() reports both the same way.
    """


def _add_data(sub: argparse._SubParsersAction) -> None:
    data = sub.add_parser("data", help="download, verify and inspect datasets")
    data_sub = data.add_subparsers(dest="data_command", required=True)
    common = argparse.ArgumentParser(add_help=False, parents=[_plugins_parser()])
    common.add_argument("name", metavar="NAME", help=_names("dataset"))
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
        "--rate", type=float, required=True, help="percent (0-100) of non-training nodes erased"
    )
    mask.add_argument("--seed", type=int, required=True, help="seed of the draw")
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

    print(data.write_mask(args.out, args.name, args.rate, args.seed, args.root, args.mirror, args.csbm))
    return 0


def _add_train(sub: argparse._SubParsersAction) -> None:
    train = sub.add_parser(
        "train",
        parents=[_plugins_parser()],
        help="train one model and write its run directory",
        description="Train one model; settings come from --config FILE (YAML/JSON) and "
        "the flags, which override the file. Unset settings take the defaults of --recipe.",
    )
    train.add_argument("--config", metavar="FILE", help="YAML or JSON file of settings")
    train.add_argument("--out", required=True, metavar="RUN_DIR", help="run directory to write "
                       "(with --seeds: containing {seed}, e.g. runs/s{seed})")
    train.add_argument(
        "--seeds", type=_seed_list, metavar="S,S,...",
        help="train these seeds in this process instead of --seed, each writing the run directory a "
        "separate run with that seed writes (--out and --mask with {seed}); seeds of the literature "
        "GAT (--recipe dgn) train as one network, others one after another (docs/training.md)",
    )
    # SUPPRESS: a flag that is not given leaves the file's value (or the default) alone.
    flags = train.add_argument_group("settings (default: the config file, else the recipe's)")
    for flag, kind, text in (
        ("--dataset", str, _names("dataset")),
        ("--model", str, "<architecture>[-lip][-<norm>]: " + _names("model")),
        ("--architecture", str, "instead of the model's: " + _names("architecture")),
        ("--attention-norm", str, "instead of the model's: none or lip (LipschitzNorm)"),
        ("--norm", str, "normalisation after each layer, instead of the model's: " + _names("norm")),
        ("--norm-extra", str, "the older spelling of --norm (gat + pairnorm -> gat-pairnorm)"),
        ("--depth", int, "attention layers (default 2)"),
        ("--initial-residual", float, "GCNII's initial residual: each layer's output mixed with the input Linear's "
         "(recipe dgn: the first layer's), weight in [0, 1) (default 0: off)"),
        ("--dropedge", float, "DropEdge: rate of edges (self-loops kept) dropped afresh every training epoch (default 0: off)"),
        ("--alpha", float, "LipschitzNorm scale (default 1)"),
        ("--heads", int, "attention heads (default: lipnorm and official 8, dgn 1)"),
        ("--hidden", int, "features per head (default: lipnorm 8, official 64, dgn 16)"),
        ("--feat-drop", float, "feature dropout (default: the model's)"),
        ("--attn-drop", float, "attention dropout (default: the model's; dgn 0.6)"),
        ("--batchnorm-momentum", float, "BatchNorm's running-statistics momentum (default: lipnorm and official 0.1, dgn 0.3)"),
        ("--dgn-skip-weight", float, "DGN's lambda (default 0.01; dgn: DGN's per dataset and missing rate)"),
        ("--missing-rate", float, "percent of non-training feature rows erased (default 0)"),
        ("--seed", int, "seed of everything, the missing-features mask included (default 0)"),
        ("--epochs", int, "default: lipnorm 200; official 1000 up to depth 4, 1500 up to 7, else 2500; dgn 1000"),
        ("--lr", float, "Adam learning rate (default: lipnorm 0.005, official 0.01, dgn DGN's per dataset)"),
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
        help="--batching cluster: METIS parts of the graph, cached under --data-root (default 64)",
    )
    flags.add_argument(
        "--batch-partitions", type=int, metavar="B", default=argparse.SUPPRESS,
        help="--batching cluster: parts per batch, B <= K (default 16)",
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
        "epochs, best validation epoch, their lr and weight decay per dataset; docs/training.md)",
    )
    train.set_defaults(handler=_train)


def _seed_list(text: str) -> list[int]:
    try:
        seeds = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integer seeds, e.g. 0,1,2,3,4")
    return seeds


def _train(args: argparse.Namespace) -> int:
    from lipnorm.train import run
    from lipnorm.train.run_state import RunInterrupted
    from lipnorm.train_config import load_config

    overrides = {
        key: value
        for key, value in vars(args).items()
        if key not in ("command", "handler", "config", "out", "plugins", "seeds")
    }
    if args.seeds is not None and "seed" in overrides:
        raise ValueError("--seed and --seeds exclude each other: give every seed in --seeds")
    try:
        config = load_config(args.config, overrides)
        if args.seeds is not None:
            from lipnorm.train.seed_group import run_seeds

            run_seeds(config, args.seeds, args.out)
        else:
            run(config, args.out)
    except RunInterrupted as stopped:  # the log has said so
        return stopped.exit_code
    return 0


def _add_results(sub: argparse._SubParsersAction) -> None:
    aggregate = sub.add_parser(
        "aggregate", parents=[_plugins_parser()],
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
        parser = sub.add_parser(name, parents=[_plugins_parser()], help=f"write an experiment's {what}")
        parser.add_argument("experiment", metavar="EXPERIMENT",
                            help=", ".join(experiments.names()) + " (or a plugin's; lipnorm.experiments)")
        parser.add_argument("--aggregate-dir", required=True, help="output of `lipnorm aggregate`")
        parser.add_argument("--out-dir", required=True)
        parser.set_defaults(handler=handler)


def _print_paths(paths) -> int:
    for path in paths:
        print(path)
    return 0


def _aggregate(args: argparse.Namespace) -> int:
    from lipnorm.results.aggregate import read_run_list, write_aggregate

    run_dirs = list(args.run_dirs)
    if args.runs_from is not None:
        run_dirs += read_run_list(args.runs_from)
    if not run_dirs:
        raise UsageError("no run directories: give RUN_DIR arguments or --runs-from FILE")
    return _print_paths(write_aggregate(run_dirs, args.out_dir))


def _tables(args: argparse.Namespace) -> int:
    from lipnorm.results.tables import write_tables

    return _print_paths(write_tables(args.experiment, args.aggregate_dir, args.out_dir))


def _plots(args: argparse.Namespace) -> int:
    from lipnorm.results.figures import write_figures

    return _print_paths(write_figures(args.experiment, args.aggregate_dir, args.out_dir))


def _add_bench(sub: argparse._SubParsersAction) -> None:
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

    return _print_paths(run_benchmark(
        args.out, args.quick, args.threads, args.data_root, args.mirror,
        device=args.device, flush_denormal=args.flush_denormal,
    ))


def _add_plan(sub: argparse._SubParsersAction) -> None:
    plan = sub.add_parser(
        "plan",
        parents=[_plugins_parser()],
        help="predict training runs' peak memory and time; calibrate the prediction",
        description="Predict one run's peak memory (MB) and epoch time (s) from its settings and "
        "its dataset's sizes (--dataset ...), or every training job of a workflow config "
        "(--configfile), or measure this machine and fit the coefficients (--calibrate). "
        "Coefficients: --coefficients FILE, else $LIPNORM_PLAN_COEFFICIENTS, else the ones "
        "shipped with lipnorm (docs/cluster.md, \"Planning memory and time\").",
    )
    what = plan.add_mutually_exclusive_group(required=True)
    what.add_argument("--dataset", help="plan one run on this dataset: " + _names("dataset"))
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
    run.add_argument("--partitions", type=int, default=1, help="cluster: METIS partitions K")
    run.add_argument("--batch-partitions", type=int, default=1, help="cluster: partitions per batch B")
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
    shape = plan.RunShape(
        plan.dataset_sizes(args.dataset, args.csbm, root=args.data_root), args.depth, args.heads, args.hidden,
        args.checkpoint, args.batching, args.partitions, args.batch_partitions, plan.projections_of(args.model),
    )
    estimate = coefficients.estimate(shape)
    if args.device != coefficients.device:
        print(f"note: the coefficients were measured on {coefficients.device}, not {args.device}", file=sys.stderr)
    print(f"{estimate.memory_mb:.0f} MB peak memory, {estimate.epoch_s:.2f} s per epoch ({coefficients.threads} thread(s), {coefficients.device})")
    return 0


def _add_probe(sub: argparse._SubParsersAction) -> None:
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
    from lipnorm.lipschitz import write_probe

    return _print_paths(write_probe(args.out_dir, args.seed, args.scales, args.iters, device=args.device))


def _add_publish(sub: argparse._SubParsersAction) -> None:
    publish = sub.add_parser(
        "publish",
        parents=[_plugins_parser()],
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

    return _print_paths(publish(args.results_root, args.out))


def extra_modules() -> dict[str, str]:
    """The top-level module of each optional dependency, with its extra's name.

    Read from the installed distribution's metadata (pyproject.toml's
    `optional-dependencies`), so the extras have one source; empty when lipnorm is
    not installed. A distribution `a-b` is taken to install module `a_b`.
    """
    from importlib.metadata import PackageNotFoundError, requires

    try:
        requirements = requires("lipnorm") or []
    except PackageNotFoundError:
        return {}
    modules = {}
    for requirement in requirements:
        extra = re.search(r"""extra\s*==\s*["']([^"']+)""", requirement)
        name = re.match(r"[A-Za-z0-9._-]+", requirement).group()
        if extra and name.lower() != "lipnorm":
            modules.setdefault(name.lower().replace("-", "_").replace(".", "_"), extra.group(1))
    return modules


def missing_extra(err: ImportError) -> tuple[str, str] | None:
    """(module, extra) when `err`, or an import error it was raised from, is an
    optional dependency that is not installed; None for any other import error."""
    extras = extra_modules()
    while err is not None:
        if isinstance(err, ModuleNotFoundError) and err.name:
            module = err.name.split(".")[0].lower()
            if module in extras:
                return module, extras[module]
        err = err.__cause__ or err.__context__
    return None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lipnorm", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    _add_data(sub)
    _add_train(sub)
    _add_results(sub)
    _add_bench(sub)
    _add_probe(sub)
    _add_publish(sub)
    _add_plan(sub)
    return parser


def request_huge_pages() -> bool:
    """Ask PyTorch to back this process's large CPU tensors with transparent huge pages
    (2 MB pages), unless `THP_MEM_ALLOC_ENABLE` is already set: True if asked or set to 1.

    A tensor that gets a mapping of its own
    (`lipnorm.train.tuning.retain_freed_memory(map_large_tensors=True)`) is faulted in anew
    each time it is allocated; with 2 MB pages that is one fault per 2 MB instead of one
    per 4 KB, which makes mapping large tensors nearly as fast as reusing the heap
    (docs/performance.md, "Memory allocation"). Effective only when called before the
    process allocates its first CPU tensor (`main` calls it for `HUGE_PAGE_COMMANDS`
    before it imports anything that may allocate one: it lives here, not among the
    training modules, whose import does); where the kernel gives no huge pages
    (`/sys/kernel/mm/transparent_hugepage/enabled` is `never`) nothing changes but the
    alignment. Not Linux: nothing is done (False).
    """
    if not sys.platform.startswith("linux"):
        return False
    os.environ.setdefault(HUGE_PAGES_ENV, "1")
    return os.environ[HUGE_PAGES_ENV] == "1"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command in HUGE_PAGE_COMMANDS:
        # Before this process allocates its first tensor, or PyTorch ignores it.
        request_huge_pages()
    try:
        # First: a plugin's names are valid settings of the command.
        registry.load_plugins(getattr(args, "plugins", None))
        return int(args.handler(args) or 0)
    except (UsageError, ValueError) as err:
        parser.error(str(err))
    except ImportError as err:
        # A slim install (`pip install lipnorm`) lacks the extras some commands need.
        missing = missing_extra(err)
        if missing is None:
            raise
        module, extra = missing
        parser.exit(1, f"lipnorm {args.command}: needs {module}, from the {extra!r} extra: "
                       f"pip install 'lipnorm[{extra}]'\n")
    finally:
        # torch and dgl leave ~10^6 objects; the collection at interpreter exit walked
        # them all for ~1.5 s per process (grids run thousands). Nothing collectable
        # matters once the command is done.
        gc.freeze()
    return 0


if __name__ == "__main__":
    sys.exit(main())
