"""Cluster submission on a real SLURM: the smoke grid through `sbatch`.

The `slurm_cluster` fixture brings up a single-node SLURM on this machine (Debian's
slurmctld + slurmd + munge, scripts/slurm/start.sh; all traffic on 127.0.0.1) and stops
it afterwards, whatever the outcome. The workflow is run as a user would: with
profiles/slurm plus a site profile of the few keys a site sets (partition, job count,
per-job CPUs and memory that fit the node, status polling interval).

Installing the packages is scripts/install-system-deps.sh (called by `make test`); a machine
without them fails here with what is missing, it does not skip.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import psutil
import pytest
import yaml

from tests.system_deps import missing_packages_message

from lipnorm import grid

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts" / "slurm"
BIN = Path(sys.executable).parent
SMOKE = REPO / "config" / "presets" / "smoke.yaml"
SLURM_PROFILE = REPO / "profiles" / "slurm" / "config.v9+.yaml"
PARTITION = "short"
# A whole snakemake run on the cluster may take this long before the test gives up.
RUN_TIMEOUT_S = 900


@dataclass(frozen=True)
class SlurmCluster:
    folder: Path
    partition: str

    @property
    def env(self) -> dict[str, str]:
        """The environment of a user of this cluster (its venv activated)."""
        return dict(
            os.environ,
            SLURM_CONF=str(self.folder / "slurm.conf"),
            PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}",
        )

    def jobs(self, run_id: str) -> list[dict[str, str]]:
        """SLURM's own record of every job of a Snakemake run (by its job name).

        MinJobAge (slurm.conf.in) keeps finished jobs listed for an hour.
        """
        out = subprocess.run(
            ["squeue", "--states=all", "--noheader", "--name", run_id, "--format=%i|%T|%k"],
            env=self.env, capture_output=True, text=True, check=True,
        ).stdout
        return [dict(zip(("id", "state", "comment"), line.split("|"))) for line in out.splitlines()]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory):
    missing = missing_packages_message("munge", "slurmctld", "slurmd", "slurm-client")
    if missing:
        pytest.fail(missing)
    if os.geteuid() != 0:
        pytest.fail("the SLURM test cluster needs root: slurmd starts jobs as their user")
    folder = tmp_path_factory.mktemp("slurm")
    env = dict(
        os.environ,
        SLURM_PARTITION=PARTITION,
        SLURM_CTLD_PORT=str(_free_port()),
        SLURMD_PORT=str(_free_port()),
    )
    try:
        started = subprocess.run(
            ["bash", str(SCRIPTS / "start.sh"), str(folder)],
            env=env, capture_output=True, text=True, timeout=120,
        )
        if started.returncode != 0:
            pytest.fail(f"scripts/slurm/start.sh failed:\n{started.stdout}\n{started.stderr}")
        yield SlurmCluster(folder, PARTITION)
    finally:
        subprocess.run(["bash", str(SCRIPTS / "stop.sh"), str(folder)], timeout=120, check=False)


def site_profile(folder: Path, partition: str) -> Path:
    """profiles/slurm with what a site sets for this 2-CPU node; everything else as committed."""
    profile = yaml.safe_load(SLURM_PROFILE.read_text())
    profile["default-resources"]["slurm_partition"] = partition
    # The partition runs two jobs per CPU (slurm.conf.in).
    profile["jobs"] = 4
    # The profile's 4 CPUs per training job exceed the node: one thread, as the local
    # profile uses, also keeps the numbers comparable to a local run; a fixed 2 GB
    # (over the plan's smoke-run requests) fits the node whatever the coefficients.
    profile["set-threads"]["train"] = 1
    profile["set-resources"]["train"].update(cpus_per_task=1, mem_mb="2000*attempt")
    # Jobs last seconds here: poll every 2 s (MinJobAge is far above 3 x 2 s, so the
    # plugin keeps squeue), and files appear at once on a local disk.
    profile["slurm-init-seconds-before-status-checks"] = 2
    profile["seconds-between-status-checks"] = 2
    profile["latency-wait"] = 5
    folder.mkdir(parents=True)
    (folder / "config.v9+.yaml").write_text(yaml.safe_dump(profile))
    return folder


def snakemake_cmd(*args) -> list[str]:
    """snakemake on the smoke preset; `args` come first, as targets must precede the
    options that take several values (--configfile, --set-resources)."""
    return [str(BIN / "snakemake"), *map(str, args), "--snakefile", str(REPO / "Snakefile"), "--configfile", str(SMOKE)]


@pytest.fixture
def start():
    """Start a command in the background, logging to a file; killed with its children
    (jobs of a local run) if still running when the test ends."""
    started = []

    def start_(cmd: list[str], workdir: Path, env: dict[str, str], log: Path) -> subprocess.Popen:
        workdir.mkdir(parents=True, exist_ok=True)
        with open(log, "w") as out:
            proc = subprocess.Popen(
                cmd, cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        started.append(proc)
        return proc

    yield start_
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def finish(proc: subprocess.Popen, log: Path) -> str:
    """Wait for a snakemake run; its whole output, or a failure showing the end of it."""
    try:
        proc.wait(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' '.join(proc.args)} still running after {RUN_TIMEOUT_S} s:\n{log.read_text()[-6000:]}")
    output = log.read_text()
    assert proc.returncode == 0, f"{' '.join(proc.args)} exited {proc.returncode}:\n{output[-6000:]}"
    return output


def cancel_first_running_train_job(cluster: SlurmCluster, run: subprocess.Popen) -> str | None:
    """scancel the first train job seen running, once: a job killed on the cluster."""
    while run.poll() is None:
        out = subprocess.run(
            ["squeue", "--noheader", "--states=RUNNING", "--format=%i|%k"],
            env=cluster.env, capture_output=True, text=True,
        ).stdout
        for line in out.splitlines():
            job_id, comment = line.split("|", 1)
            # scancel fails on a job that has just finished: then try the next one.
            if comment.startswith("rule_train_") and subprocess.run(["scancel", job_id], env=cluster.env).returncode == 0:
                return job_id
        threading.Event().wait(0.2)
    return None


def run_id(output: str) -> str:
    return re.search(r"SLURM run ID: (\S+)", output)[1]


def submitted_jobs(output: str) -> dict[str, Path]:
    """SLURM job id -> log file, as the plugin reports each sbatch."""
    found = re.findall(r"has been submitted with SLURM jobid (\d+) \(log: (\S+)\)\.", output)
    return {job_id: Path(log) for job_id, log in found}


def smoke_run_dirs() -> list[str]:
    config = yaml.safe_load(SMOKE.read_text())
    return [
        f"results/{name}/runs/{subdir}"
        for name, experiment in config["experiments"].items()
        if "grid" in experiment
        for subdir in grid.run_subdirs(experiment["grid"])
    ]


def train_comment(run_dir: str) -> str:
    """The plugin's --comment of the train job of a run directory: its wildcards, in order."""
    _, experiment, _, *values = run_dir.split("/")
    wildcards = [experiment] + [value.removeprefix(prefix) for value, (_, _, prefix) in zip(values, grid.AXES)]
    return "rule_train_wildcards_" + "_".join(wildcards)


def test_cluster_listens_on_loopback_only(slurm_cluster):
    listening = {}
    for daemon in ("slurmctld", "slurmd"):
        pid = int((slurm_cluster.folder / "run" / f"{daemon}.pid").read_text())
        listening[daemon] = {
            conn.laddr.ip
            for conn in psutil.Process(pid).net_connections(kind="inet")
            if conn.status == psutil.CONN_LISTEN
        }
    assert listening == {"slurmctld": {"127.0.0.1"}, "slurmd": {"127.0.0.1"}}


@pytest.mark.slow
def test_smoke_grid_through_sbatch_equals_local_run(slurm_cluster, data_mirror, tmp_path, start):
    env = dict(slurm_cluster.env, LIPNORM_DATA_MIRROR=str(data_mirror))
    profile = site_profile(tmp_path / "site-profile", slurm_cluster.partition)
    # Part of the training grid (and the masks and download before them): every model
    # kind, both datasets, both missing rates. The other runs and the aggregates, tables
    # and figures are the same rules again; they stay out to keep this test within
    # minutes (tests/repository/test_workflow.py runs the whole smoke grid).
    run_dirs = [
        run_dir
        for run_dir in smoke_run_dirs()
        if ("/L3/" in run_dir and ("/depth/" in run_dir and "/r100/" in run_dir or "/transformer/" in run_dir))
        or run_dir.endswith("/gat-classic/L2/a1/r0/s0")
    ]
    assert len(run_dirs) == 5, run_dirs
    targets = [f"{run_dir}/summary.json" for run_dir in run_dirs]
    # The local reference runs meanwhile: the cluster's jobs mostly wait.
    local_log = tmp_path / "local.log"
    local = start(
        snakemake_cmd(*targets, "--workflow-profile", REPO / "profiles" / "default", "--cores", 2),
        tmp_path / "local", env, local_log,
    )
    cluster_log = tmp_path / "cluster.log"
    cluster = start(snakemake_cmd(*targets, "--workflow-profile", profile), tmp_path / "cluster", env, cluster_log)
    cancelled = cancel_first_running_train_job(slurm_cluster, cluster)
    cluster_output = finish(cluster, cluster_log)
    finish(local, local_log)

    # SLURM's records: every job of the run completed, but the one cancelled.
    records = slurm_cluster.jobs(run_id(cluster_output))
    assert cancelled is not None, "no train job was seen running"
    assert {r["id"]: r["state"] for r in records if r["state"] != "COMPLETED"} == {cancelled: "CANCELLED"}
    assert set(submitted_jobs(cluster_output)) == {r["id"] for r in records}
    # Every run of the grid was trained by a SLURM job, the cancelled one on its retry.
    completed_train = sorted(r["comment"] for r in records if r["state"] == "COMPLETED" and r["comment"].startswith("rule_train_"))
    assert completed_train == sorted(train_comment(run_dir) for run_dir in run_dirs)
    cancelled_comment = next(r["comment"] for r in records if r["id"] == cancelled)
    assert cancelled_comment in completed_train
    assert "Trying to restart job" in cluster_output

    # Same seeds, same numbers: only the wall-clock column may differ.
    for run_dir in run_dirs:
        on_cluster = pd.read_parquet(tmp_path / "cluster" / run_dir / "metrics.parquet")
        local_run = pd.read_parquet(tmp_path / "local" / run_dir / "metrics.parquet")
        pd.testing.assert_frame_equal(on_cluster.drop(columns="seconds"), local_run.drop(columns="seconds"))


@pytest.mark.slow
def test_permanent_failure_names_the_job_log(slurm_cluster, data_mirror, tmp_path, start):
    env = dict(slurm_cluster.env, LIPNORM_DATA_MIRROR=str(data_mirror))
    profile = site_profile(tmp_path / "site-profile", slurm_cluster.partition)
    # 64 MB: slurmstepd kills the job once it grows past it. No retry (they would fail
    # alike; retries are the other test's subject).
    mask = "resources/masks/csbm/rate0_seed0.npy"
    log = tmp_path / "cluster.log"
    proc = start(
        snakemake_cmd(mask, "--workflow-profile", profile, "--retries", 0, "--set-resources", "mask:mem_mb=64"),
        tmp_path / "cluster", env, log,
    )
    proc.wait(timeout=RUN_TIMEOUT_S)
    output = log.read_text()
    assert proc.returncode == 1, output[-6000:]

    [(job_id, job_log)] = submitted_jobs(output).items()
    assert slurm_cluster.jobs(run_id(output)) == [{"id": job_id, "state": "FAILED", "comment": "rule_mask_wildcards_csbm_0_0"}]
    assert f"SLURM-job '{job_id}' failed, SLURM status is: 'FAILED'" in output
    # Snakemake's error block lists the rule's log and the SLURM job's log, kept on failure.
    assert re.search(rf"^\s+log: .*{re.escape(str(job_log))}", output, re.MULTILINE)
    assert job_log == tmp_path / "cluster" / ".snakemake" / "slurm_logs" / "rule_mask" / "csbm_0_0" / f"{job_id}.log"
    assert "exceeded memory limit" in job_log.read_text()
    assert not (tmp_path / "cluster" / mask).exists()
