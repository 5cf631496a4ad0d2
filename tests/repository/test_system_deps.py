"""scripts/install-system-deps.sh without root: it installs nothing, names the missing
packages and the command that installs them, and lets `make test` go on (exit 0).

Run as the unprivileged user `nobody` when the suite runs as root (the real thing, via
setpriv), else as the current user; PATH points at an empty folder, so every program the
script looks for is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from tests.system_deps import SCRIPT, missing_packages_message

ALL = "munge slurmctld slurmd slurm-client texlive-latex-base texlive-latex-recommended"
INSTALL = f"Install them as root: sudo sh -c 'apt-get update && apt-get install -y --no-install-recommends {ALL}'"


def run_unprivileged(*args: str, empty_path) -> subprocess.CompletedProcess:
    drop = [shutil.which("setpriv"), "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
    command = [*drop, "/bin/bash", str(SCRIPT), *args]
    return subprocess.run(command, capture_output=True, text=True, env={"PATH": str(empty_path)})


@pytest.fixture()
def empty_path():
    # Outside pytest's tmp_path, whose parent only its owner may enter: nobody must be
    # able to run what a test puts here.
    with tempfile.TemporaryDirectory() as folder:
        Path(folder).chmod(0o755)
        yield Path(folder)


def test_without_root_it_names_the_missing_packages_and_exits_0(empty_path):
    done = run_unprivileged(empty_path=empty_path)
    assert done.returncode == 0
    assert done.stderr.splitlines() == [
        f"Missing Debian packages for the SLURM and LaTeX tests: {ALL}.",
        INSTALL,
        "(not root: nothing installed; the tests that need them will fail)",
    ]
    assert done.stdout == ""


def test_check_exits_1_naming_only_the_packages_asked_for(empty_path):
    done = run_unprivileged("--check", "texlive-latex-base", empty_path=empty_path)
    assert done.returncode == 1
    assert "Missing Debian packages for the SLURM and LaTeX tests: texlive-latex-base.\n" in done.stderr
    assert "apt-get install -y --no-install-recommends texlive-latex-base'" in done.stderr


def test_a_package_counts_as_installed_when_its_programs_are_on_the_path(empty_path):
    for program in ("munge", "munged", "mungekey"):
        (empty_path / program).write_text("#!/bin/sh\n")
        (empty_path / program).chmod(0o755)
    assert run_unprivileged("--check", "munge", empty_path=empty_path).returncode == 0
    (empty_path / "mungekey").unlink()
    assert run_unprivileged("--check", "munge", empty_path=empty_path).returncode == 1


def test_unknown_arguments_and_packages_are_refused_naming_the_allowed_ones(empty_path):
    done = run_unprivileged("--check", "slurm", empty_path=empty_path)
    assert done.returncode == 2
    assert f"unknown package 'slurm' (allowed: {ALL})" in done.stderr
    done = run_unprivileged("--install", empty_path=empty_path)
    assert done.returncode == 2 and "unknown argument '--install' (allowed: --check [PACKAGE...])" in done.stderr


def test_the_tests_fail_with_the_scripts_message_when_packages_are_missing():
    # On this machine the helper returns the script's own message, or '' when installed.
    message = missing_packages_message("texlive-latex-base")
    done = subprocess.run(["bash", str(SCRIPT), "--check", "texlive-latex-base"], capture_output=True, text=True)
    assert message == done.stderr.strip()
    assert (message == "") == (done.returncode == 0)
