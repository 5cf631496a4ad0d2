#!/usr/bin/env bash
# Stops the cluster that scripts/slurm/start.sh DIR started: its jobs, then the daemons
# named by the pid files in DIR/run, nothing else. Safe to call twice or after a failed start.
set -uo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 DIR" >&2
  exit 2
fi
run="$1/run"
# Cancel the jobs still queued or running first: their slurmstepd processes would
# outlive slurmd otherwise.
if [ -f "$1/slurm.conf" ] && [ -f "$run/slurmctld.pid" ]; then
  export SLURM_CONF="$1/slurm.conf"
  if scancel --full --user="$(id -un)" 2>/dev/null; then
    for _ in $(seq 30); do
      [ -z "$(squeue --noheader --format=%i 2>/dev/null)" ] && break
      sleep 0.5
    done
  fi
fi
pids=()
for daemon in slurmd slurmctld munged; do
  pid_file="$run/$daemon.pid"
  [ -f "$pid_file" ] || continue
  pid="$(cat "$pid_file")"
  # The pid file may outlive its daemon: only signal a live process of that name.
  if [ -n "$pid" ] && grep -qs "$daemon" "/proc/$pid/comm"; then
    kill -TERM "$pid" && pids+=("$pid")
  fi
done
for pid in "${pids[@]}"; do
  for _ in $(seq 100); do
    [ -d "/proc/$pid" ] || break
    sleep 0.1
  done
  [ -d "/proc/$pid" ] && kill -KILL "$pid"
done
rm -f "$run"/*.pid
# slurmd's configless link, if it still points into this cluster's folder.
if [ "$(readlink /run/slurm/conf)" = "$(cd "$1" && pwd)/spool/conf-cache" ]; then
  rm -f /run/slurm/conf
fi
exit 0
