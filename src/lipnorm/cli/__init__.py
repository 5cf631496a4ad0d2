"""The `lipnorm` command line: one entry point, one subcommand per stage.

Each group of subcommands has its module, which adds their parsers and holds their
handlers: `data`, `train`, `results` (aggregate, tables, plots, publish), `bench`
(bench, probe), `plan` and `workflow`; `common` what they share, `extras` the optional extra a
missing module comes from. Heavy imports (torch, dgl) happen inside the handlers so
that `lipnorm --help` and argument errors are instant.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys

# Names, labels and colours only: no torch (the factories are imported when a model is built).
from lipnorm import registry
from lipnorm.cli import bench, data, plan, results, train, workflow
from lipnorm.cli.common import UsageError
from lipnorm.cli.extras import extra_modules, missing_extra

__all__ = ["main", "build_parser", "parse_args", "UsageError", "request_huge_pages", "extra_modules", "missing_extra"]

# The commands that train or time training: their large tensors on transparent huge
# pages (`request_huge_pages`).
HUGE_PAGE_COMMANDS = ("train", "bench")
# PyTorch's CPU allocator (2.1 and later, on Linux) advises transparent huge pages
# (madvise MADV_HUGEPAGE) for tensors of 2 MB and more, and aligns every CPU tensor to a
# page, when this is "1" at the process's first CPU allocation (read once, then kept).
HUGE_PAGES_ENV = "THP_MEM_ALLOC_ENABLE"


def build_parser() -> argparse.ArgumentParser:
    """The `lipnorm` parser: every subcommand, each with its handler (`args.handler`); torch-free."""
    parser = argparse.ArgumentParser(prog="lipnorm", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    data.add_parsers(sub)
    train.add_parsers(sub)
    results.add_parsers(sub)
    bench.add_parsers(sub)
    bench.add_probe_parser(sub)
    results.add_publish_parser(sub)
    plan.add_parsers(sub)
    workflow.add_parsers(sub)
    _remember_command_parsers(parser)
    return parser


def _remember_command_parsers(parser: argparse.ArgumentParser) -> None:
    """Give every (sub)command's parser itself as the default `command_parser`: the
    innermost one parsed wins, whose usage a handler's error prints."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                command.set_defaults(command_parser=command)
                _remember_command_parsers(command)


def plugin_specs(argv: list[str]) -> list[str]:
    """The values of `--plugin X` and `--plugin=X` in `argv` (before any `--`)."""
    specs = []
    for index, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == "--plugin" and index + 1 < len(argv):
            specs.append(argv[index + 1])
        elif arg.startswith("--plugin="):
            specs.append(arg.split("=", 1)[1])
    return specs


def request_huge_pages() -> bool:
    """Ask PyTorch to back this process's large CPU tensors with transparent huge pages
    (2 MB pages), unless `THP_MEM_ALLOC_ENABLE` is already set: True if asked or set to 1.

    A tensor that gets a mapping of its own
    (`lipnorm.train.process.retain_freed_memory(map_large_tensors=True)`) is faulted in anew
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


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """`argv` parsed; `lipnorm workflow` keeps the arguments it does not know, in order,
    as `snakemake_args` (Snakemake's own), any other command refuses them."""
    args, unknown = parser.parse_known_args(argv)
    if args.command == "workflow":
        args.snakemake_args = unknown
    elif unknown:  # with the usage of the command given, as its other errors
        vars(args).get("command_parser", parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the `lipnorm` command `argv` (default: sys.argv); its exit status. Bad input
    (`UsageError`, ValueError) exits 2 with the command's usage and `lipnorm COMMAND: error: ...`; a missing extra exits 1
    naming it."""
    argv = sys.argv[1:] if argv is None else list(argv)
    # The plugins first, so that the parser's help lists their names (this imports
    # only what a plugin imports; no --plugin, nothing).
    try:
        registry.load_plugins(plugin_specs(argv))
        plugin_error = None
    except ValueError as err:
        plugin_error = err
    parser = build_parser()
    if plugin_error is not None and ("-h" in argv or "--help" in argv):
        parser.exit(2, f"lipnorm: error: {plugin_error}\n")
    args = parse_args(parser, argv)
    # A handler's error prints the usage of the command it ran (`lipnorm train`).
    command_parser = vars(args).pop("command_parser", parser)  # not a setting of the handler
    if args.command in HUGE_PAGE_COMMANDS:
        # Before this process allocates its first tensor, or PyTorch ignores it.
        request_huge_pages()
    try:
        if plugin_error is not None:
            raise plugin_error
        # An abbreviated --plugin (argparse's --plug) is loaded here.
        registry.load_plugins(getattr(args, "plugins", None))
        return int(args.handler(args) or 0)
    except (UsageError, ValueError) as err:
        command_parser.error(str(err))
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
