#!/usr/bin/env bash
# Installs the Debian packages the test suite needs besides the Python stack:
# - munge, slurmctld, slurmd, slurm-client: tests/repository/test_slurm.py's single-node SLURM;
# - texlive-latex-base, texlive-latex-recommended (booktabs): compiling the .tex tables.
# Idempotent: returns at once when everything is there. Never starts a daemon
# (scripts/slurm/start.sh does). Called by `make test`.
#
# Without root it installs nothing: it prints the missing packages and the command that
# installs them, and exits 0 so that `make test` still runs the suite (the SLURM and
# LaTeX tests then fail with the same message). `--check [PACKAGE...]` installs nothing:
# it prints that message and exits 1 when one of the packages (default: all) is missing,
# 0 otherwise; the tests call it.
set -euo pipefail

# Each package with what shows it is installed: the programs scripts/slurm/start.sh and
# the SLURM executor plugin run, or a TeX file (kpsewhich).
declare -A provides=(
  [munge]="munge munged mungekey"
  [slurmctld]="slurmctld"
  [slurmd]="slurmd slurmstepd"
  [slurm-client]="sbatch squeue scontrol scancel sinfo srun"
  [texlive-latex-base]="pdflatex kpsewhich"
  [texlive-latex-recommended]="booktabs.sty"
)
order=(munge slurmctld slurmd slurm-client texlive-latex-base texlive-latex-recommended)

check_only=false
case "${1:-}" in
  "") ;;
  --check)
    check_only=true
    shift
    for package in "$@"; do
      if [ -z "${provides[$package]:-}" ]; then
        echo "$0: unknown package '$package' (allowed: ${order[*]})" >&2
        exit 2
      fi
    done
    [ $# -eq 0 ] || order=("$@")
    ;;
  *) echo "$0: unknown argument '$1' (allowed: --check [PACKAGE...])" >&2; exit 2 ;;
esac

present() {  # a program on PATH, or a TeX file kpsewhich finds
  if [[ "$1" == *.sty ]]; then
    command -v kpsewhich >/dev/null 2>&1 && [ -n "$(kpsewhich "$1")" ]
  else
    command -v "$1" >/dev/null 2>&1
  fi
}

missing=()
for package in "${order[@]}"; do
  for item in ${provides[$package]}; do
    if ! present "$item"; then
      missing+=("$package")
      break
    fi
  done
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

# --no-install-recommends keeps out slurmdbd/MariaDB (the test cluster runs without
# accounting, see profiles/slurm/config.v9+.yaml) and most of TeX Live.
command="apt-get install -y --no-install-recommends ${missing[*]}"
if $check_only || [ "$EUID" -ne 0 ]; then
  echo "Missing Debian packages for the SLURM and LaTeX tests: ${missing[*]}." >&2
  echo "Install them as root: sudo sh -c 'apt-get update && $command'" >&2
  $check_only && exit 1
  echo "(not root: nothing installed; the tests that need them will fail)" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
$command -q
