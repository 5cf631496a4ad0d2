"""What the SLURM and LaTeX tests need from the system, asked of the script that installs it
(scripts/install-system-deps.sh: the one list of Debian packages)."""

from __future__ import annotations

import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "install-system-deps.sh"


def missing_packages_message(*packages: str) -> str:
    """The script's message naming which of `packages` are missing and the command that
    installs them; empty when all are installed."""
    done = subprocess.run(["bash", str(SCRIPT), "--check", *packages], capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{SCRIPT} --check failed ({done.returncode}): {done.stderr}")
    return done.stderr.strip()
