#!/usr/bin/env bash
# Starts a single-node SLURM cluster (munged, slurmctld, slurmd) whose configuration,
# state, logs and pid files all live in DIR, and waits until its node is idle.
#   scripts/slurm/start.sh DIR
# Settings (environment): SLURM_PARTITION (default "debug"), SLURM_CTLD_PORT (6817),
# SLURMD_PORT (6818), SLURM_SRUN_PORTS (60001-60100), SLURM_CPUS (nproc),
# SLURM_MEMORY_MB (half of MemTotal). Then use the cluster with
#   export SLURM_CONF=DIR/slurm.conf
# and stop it with scripts/slurm/stop.sh DIR.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ $# -ne 1 ]; then
  echo "usage: $0 DIR" >&2
  exit 2
fi
dir="$(mkdir -p "$1" && cd "$1" && pwd)"
for program in munge munged mungekey slurmctld slurmd sinfo; do
  if ! command -v "$program" >/dev/null 2>&1; then
    echo "$0: '$program' is missing: run scripts/install-system-deps.sh" >&2
    exit 1
  fi
done

# Client commands read /etc/slurm/slurm.conf before the configless copy: one there
# would send the jobs' own srun calls to another cluster.
if [ -e /etc/slurm/slurm.conf ]; then
  echo "$0: /etc/slurm/slurm.conf exists and would shadow this cluster's configuration" \
       "inside jobs; move it away to run this test cluster" >&2
  exit 1
fi
host="$(hostname -s)"
cpus="${SLURM_CPUS:-$(nproc)}"
memory_mb="${SLURM_MEMORY_MB:-$(awk '/^MemTotal:/ {print int($2 / 1024 / 2)}' /proc/meminfo)}"
mkdir -p "$dir"/{munge,state,spool,run,log}
# The key stays private to root (munged checks its permissions).
chmod 700 "$dir/munge"

sed -e "s|@DIR@|$dir|g" \
    -e "s|@HOST@|$host|g" \
    -e "s|@USER@|$(id -un)|g" \
    -e "s|@CPUS@|$cpus|g" \
    -e "s|@MEMORY_MB@|$memory_mb|g" \
    -e "s|@PARTITION@|${SLURM_PARTITION:-debug}|g" \
    -e "s|@CTLD_PORT@|${SLURM_CTLD_PORT:-6817}|g" \
    -e "s|@SLURMD_PORT@|${SLURMD_PORT:-6818}|g" \
    -e "s|@SRUN_PORTS@|${SLURM_SRUN_PORTS:-60001-60100}|g" \
    "$here/slurm.conf.in" > "$dir/slurm.conf"
export SLURM_CONF="$dir/slurm.conf"

[ -f "$dir/munge/munge.key" ] || mungekey --create --keyfile="$dir/munge/munge.key"
munge_socket=/run/munge/munge.socket.2
if [ -S "$munge_socket" ] && munge -n -S "$munge_socket" >/dev/null 2>&1; then
  echo "$0: a munged already serves $munge_socket (another cluster?); stop it first" >&2
  exit 1
fi
mkdir -p /run/munge
munged --force \
  --socket="$munge_socket" \
  --key-file="$dir/munge/munge.key" \
  --pid-file="$dir/run/munged.pid" \
  --log-file="$dir/log/munged.log" \
  --seed-file="$dir/munge/munged.seed"
# -c: a fresh cluster each time (no jobs or node states left from an earlier start).
slurmctld -c -f "$SLURM_CONF"
# Configless slurmd (see slurm.conf.in): it links /run/slurm/conf to its copy.
slurmd --conf-server "127.0.0.1:${SLURM_CTLD_PORT:-6817}"

# The node registers within a few seconds; it is usable once sinfo calls it idle.
for _ in $(seq 60); do
  state="$(sinfo --noheader --nodes="$host" --format=%T 2>/dev/null || true)"
  if [ "$state" = "idle" ]; then
    echo "SLURM is up: export SLURM_CONF=$SLURM_CONF"
    exit 0
  fi
  sleep 1
done
echo "$0: node $host did not become idle within 60 s (state: '${state:-none}');" \
     "see $dir/log/slurmctld.log and $dir/log/slurmd.log" >&2
exit 1
