#!/usr/bin/env bash
# Installs the Debian packages the test suite needs besides the Python stack:
# - munge, slurmctld, slurmd, slurm-client: tests/test_slurm.py's single-node SLURM;
# - texlive-latex-base, texlive-latex-recommended (booktabs): compiling the .tex tables.
# Idempotent: returns at once when everything is there. Never starts a daemon
# (scripts/slurm/start.sh does). Called by `make test`.
set -euo pipefail

packages=(munge slurmctld slurmd slurm-client texlive-latex-base texlive-latex-recommended)
programs=(munged mungekey slurmctld slurmd slurmstepd sbatch squeue scontrol scancel sinfo srun pdflatex kpsewhich)
missing=()
for program in "${programs[@]}"; do
  command -v "$program" >/dev/null 2>&1 || missing+=("$program")
done
if [ ${#missing[@]} -eq 0 ] && [ -n "$(kpsewhich booktabs.sty)" ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "$0: missing ${missing[*]:-booktabs.sty}; install the Debian packages as root:" \
       "apt-get install --no-install-recommends ${packages[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# --no-install-recommends keeps out slurmdbd/MariaDB (the test cluster runs without
# accounting, see profiles/slurm/config.v9+.yaml) and most of TeX Live.
apt-get install -y -q --no-install-recommends "${packages[@]}"
