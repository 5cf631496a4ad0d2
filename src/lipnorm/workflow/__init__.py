"""The Snakemake workflow as installed with lipnorm, and `lipnorm workflow`, which runs it.

The package holds the workflow as package data in the checkout's own layout:
`Snakefile`, `workflow/` (rules, schemas, report captions) and `profiles/`. In git these
three are links to the repository root, where the project keeps them; a built wheel
holds copies. `lipnorm workflow` runs that Snakefile in the current folder: `results/`,
`resources/` and Snakemake's `.snakemake/` are written there, never into the package.
Torch-free (the CLI imports this module).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

__all__ = ["ROOT", "SNAKEFILE", "PROFILES", "profile_dir", "snakemake_command", "run"]

# The workflow's root: the Snakefile includes workflow/rules/*.smk relative to it.
ROOT = Path(__file__).resolve().parent
SNAKEFILE = ROOT / "Snakefile"
# Profiles by name (`--profile default`); any other value is a path to one.
PROFILES = ("default", "slurm")


def profile_dir(profile: str) -> Path:
    """The profile folder of `profile`: one of `PROFILES`, else a path to a profile folder
    (or its `config.v9+.yaml`). A missing path is a ValueError naming it and the names."""
    if profile in PROFILES:
        return ROOT / "profiles" / profile
    path = Path(profile).expanduser()
    if not path.exists():
        raise ValueError(
            f"profile {profile!r} is neither one of {', '.join(PROFILES)} nor an existing "
            f"folder or file"
        )
    return path.resolve()


def snakemake_command(configfile: str, profile: str, snakemake_args: list[str]) -> list[str]:
    """`python -m snakemake` on the installed Snakefile with the config file and profile
    (as Snakemake's workflow profile: it replaces any `profiles/default` Snakemake would
    otherwise find in the current folder), then `snakemake_args` unchanged.

    A config file that does not exist is a ValueError naming it.
    """
    config = Path(configfile).expanduser()
    if not config.is_file():
        raise ValueError(
            f"config file {configfile!r} does not exist (in {os.getcwd()}); give one with "
            f"--configfile FILE (docs/workflow.md, 'Running in your own project')"
        )
    args = list(snakemake_args)
    if args[:1] == ["--"]:
        args = args[1:]
    return [
        sys.executable, "-m", "snakemake",
        "--snakefile", str(SNAKEFILE),
        "--workflow-profile", str(profile_dir(profile)),
        "--configfile", str(config.resolve()),
        *args,
    ]


def run(configfile: str, profile: str, snakemake_args: list[str]) -> None:
    """Replace this process by Snakemake running the installed workflow in the current
    folder (`snakemake_command`): its exit status is the command's, and a signal sent to
    this process (a cluster's SIGTERM, Ctrl-C) reaches Snakemake itself."""
    command = snakemake_command(configfile, profile, snakemake_args)
    if importlib.util.find_spec("snakemake") is None:
        # A slim install: the CLI names the extra that brings it.
        raise ModuleNotFoundError("No module named 'snakemake'", name="snakemake")

    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(command[0], command)
