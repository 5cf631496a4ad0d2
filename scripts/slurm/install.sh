#!/usr/bin/env bash
# Installs what tests/test_slurm.py needs to bring up a single-node SLURM cluster on this
# machine: Debian's slurmctld, slurmd, the client commands (sbatch, squeue, scancel, ...)
# and munge (SLURM's authentication daemon). Idempotent: returns at once when all the
# programs are already there. Never starts a daemon (scripts/slurm/start.sh does).
set -euo pipefail

programs=(munged mungekey slurmctld slurmd slurmstepd sbatch squeue scontrol scancel sinfo srun)
missing=()
for program in "${programs[@]}"; do
  command -v "$program" >/dev/null 2>&1 || missing+=("$program")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

packages=(munge slurmctld slurmd slurm-client)
if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/slurm/install.sh: missing ${missing[*]}; install the Debian packages" \
       "${packages[*]} as root (apt-get install ${packages[*]})" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# --no-install-recommends keeps out slurmdbd/MariaDB: the test cluster runs without
# accounting (see profiles/slurm/config.v9+.yaml, slurm-status-command).
apt-get install -y -q --no-install-recommends "${packages[@]}"
