"""The Snakemake workflow: lint, formatting, config validation, DAG sizes, and (slow)
the smoke preset end to end, including a kill -9 in mid-grid and the resume.

Every snakemake call runs with `--directory tmp_path`, so nothing lands in the repo.
"""

from __future__ import annotations

import itertools
import os
import re
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from lipnorm import experiments, grid, registry, yaml_numbers

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SNAKEMAKE = str(BIN / "snakemake")
PRESETS = {
    "default": REPO / "config.yaml",
    "smoke": REPO / "config" / "presets" / "smoke.yaml",
    "paper": REPO / "config" / "presets" / "paper.yaml",
    "deep": REPO / "config" / "presets" / "deep.yaml",
    "diagnose": REPO / "config" / "presets" / "diagnose.yaml",
    "remedies-cora": REPO / "config" / "presets" / "remedies-cora.yaml",
    "remedies-citeseer": REPO / "config" / "presets" / "remedies-citeseer.yaml",
    "literature-pilot": REPO / "config" / "presets" / "literature-pilot.yaml",
    "literature-cora": REPO / "config" / "presets" / "literature-cora.yaml",
    "literature-citeseer": REPO / "config" / "presets" / "literature-citeseer.yaml",
    "literature-pilot-citeseer": REPO / "config" / "presets" / "literature-pilot-citeseer.yaml",
    "literature-pilot-skips": REPO / "config" / "presets" / "literature-pilot-skips.yaml",
    "literature-depth20": REPO / "config" / "presets" / "literature-depth20.yaml",
}
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


def snakemake_cmd(workdir, *args) -> list[str]:
    """snakemake on the repo's Snakefile in `workdir`, with the default profile."""
    cmd = [SNAKEMAKE, "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir)]
    return cmd + ["--workflow-profile", str(REPO / "profiles" / "default"), *map(str, args)]


def snakemake(workdir, *args, check=True):
    cmd = snakemake_cmd(workdir, *args)
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def job_counts(output: str) -> dict[str, int]:
    """Parse snakemake's `Job stats:` table into {rule: count}."""
    table = output.split("Job stats:", 1)[1]
    counts = {}
    for line in table.splitlines()[3:]:
        match = re.fullmatch(r"(\S+)\s+(\d+)", line.strip())
        if not match:
            break
        counts[match[1]] = int(match[2])
    return counts


def expected_job_counts(config: dict) -> dict[str, int]:
    """Job counts computed from the config alone, independently of lipnorm.grid."""
    from lipnorm.results.figures import FIGURES
    from lipnorm.results.tables import TABLES

    experiments = config["experiments"]
    trains, seed_lists, masks, downloads = 0, 0, set(), set()
    blocks = [
        block
        for name, spec in experiments.items()
        if name != "lipschitz"
        for block in (spec["arms"].values() if "arms" in spec else [spec])
    ]
    for block in blocks:
        g = block["grid"]
        # Values equal as numbers (1 and 1.0) are one grid point. attention_norms and norms
        # replace those parts of every model (gat x [none, lip] x [dgn]: gat-dgn, gat-lip-dgn).
        models = {
            (model, attention_norm, norm)
            for model in g["models"]
            for attention_norm in g.get("attention_norms", [model])
            for norm in g.get("norms", [model])
        }
        axes = [set(g["datasets"]), models, *(set(g[k]) for k in ("depths", "alphas", "missing_rates", "seeds"))]
        runs = len(list(itertools.product(*axes)))
        # Seeds trained as one network, one job per seed list (rule train_seeds): the
        # literature GAT (recipe dgn), in these presets.
        settings = {**(config.get("train") or {}), **(block.get("train") or {})}
        if len(axes[5]) > 1 and settings.get("recipe") == "dgn":
            seed_lists += runs // len(axes[5])
        else:
            trains += runs
        masks |= set(itertools.product(axes[0], axes[4], axes[5]))
        downloads |= axes[0] - {"csbm"}
    counts = {
        "download": len(downloads),
        "mask": len(masks),
        "train": trains,
        "train_seeds": seed_lists,
        "run_list": sum(name != "lipschitz" for name in experiments),
        "aggregate": sum(name != "lipschitz" for name in experiments),
        "probe": int("lipschitz" in experiments),
        "all": 1,
    }
    for name in experiments:
        counts[f"tables_{name}"] = int(bool(TABLES[name]))
        counts[f"plots_{name}"] = int(bool(FIGURES[name]))
    counts = {rule: n for rule, n in counts.items() if n}
    counts["total"] = sum(counts.values())
    return counts


def load_preset(name: str) -> dict:
    return yaml.safe_load(PRESETS[name].read_text())


def write_config(path: Path, config: dict) -> Path:
    path.write_text(yaml.safe_dump(config))
    return path


# --- static checks ---------------------------------------------------------------


def test_snakefmt_check_is_clean():
    files = [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))]
    proc = subprocess.run(
        [str(BIN / "snakefmt"), "--check", *map(str, files)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


# The one lint accepted, and why it cannot be fixed without changing what the workflow
# does. Every job runs the `lipnorm` package installed from this repository (make setup
# or environment.yml). A per-rule conda env file cannot install it (Snakemake builds env
# files from a copy elsewhere, breaking `pip install -e .`), so under `--sdm conda` its
# jobs would fail where they now run; a named env makes Snakemake call `conda` even
# without --use-conda; a `container:` needs an image, and none is published, so under
# `--sdm apptainer` jobs would fail to start; `envmodules:` alone is a lint of its own.
# Every other lint fails this test.
ACCEPTED_LINT = "Specify a conda environment or container for each rule."


@pytest.mark.parametrize("preset", ["default", "smoke"])
def test_snakemake_lint_is_clean(tmp_path, preset):
    # --lint exits 1 whenever it prints a lint: read the titles instead.
    proc = snakemake(tmp_path, "--lint", "--configfile", PRESETS[preset], check=False)
    output = proc.stdout + proc.stderr
    assert "Lints for" in output or "Congratulations" in output, output
    titles = set(re.findall(r"^\s+\* (.+):$", output, flags=re.MULTILINE))
    assert titles <= {ACCEPTED_LINT}, output
    # The accepted lint is about rules only: nothing is said of the Snakefile as a whole.
    blocks = re.findall(r"^Lints for (\w+)", output, flags=re.MULTILINE)
    assert set(blocks) <= {"rule"}, output


def test_schema_enums_are_the_library_names():
    from lipnorm.data import DATASETS
    from lipnorm.settings.model_config import MODEL_NAMES

    # The file lists no names; the workflow's copy has the registry's.
    assert yaml.safe_load(SCHEMA.read_text())["$defs"]["grid_experiment"]["properties"]["grid"]["properties"][
        "datasets"]["items"] == {}
    grid_props = grid.schema_with_registry(yaml.safe_load(SCHEMA.read_text()))["$defs"]["grid_experiment"]["properties"]
    axes = grid_props["grid"]["properties"]
    assert axes["datasets"]["items"]["enum"] == list(DATASETS)
    assert axes["models"]["items"]["enum"] == list(MODEL_NAMES)
    from lipnorm.settings.recipes import RECIPES

    train_props = yaml.safe_load(SCHEMA.read_text())["$defs"]["train_settings"]["properties"]
    assert grid_props["train"] == {"description": grid_props["train"]["description"], "$ref": "#/$defs/train_settings"}
    assert train_props["recipe"]["enum"] == list(RECIPES)


def test_schema_train_settings_are_train_config_fields_and_devices_agree():
    import dataclasses

    from lipnorm.train import TrainConfig
    from lipnorm.settings.train_config import check_device

    train_props = yaml.safe_load(SCHEMA.read_text())["$defs"]["train_settings"]["properties"]
    assert set(train_props) <= {field.name for field in dataclasses.fields(TrainConfig)}
    pattern = re.compile(train_props["device"]["pattern"])
    for text in ("cpu", "auto", "cuda", "cuda:0", "cuda:10", "gpu", "cuda:x", "cuda:", "CPU", "cuda:-1"):
        try:
            accepted = check_device(text) == text
        except ValueError:
            accepted = False
        assert bool(pattern.search(text)) is accepted, text


def test_schema_csbm_fields_are_the_csbm_parameters():
    import dataclasses

    from lipnorm.data import CSBMParams

    csbm = yaml.safe_load(SCHEMA.read_text())["$defs"]["csbm"]["properties"]
    assert set(csbm) == {f.name for f in dataclasses.fields(CSBMParams)}


def test_every_experiment_has_tables_and_figures_entries():
    from lipnorm.results.figures import FIGURES
    from lipnorm.results.tables import TABLES

    schema = grid.schema_with_registry(yaml.safe_load(SCHEMA.read_text()))
    experiments = set(schema["properties"]["experiments"]["properties"])
    assert set(TABLES) == experiments == set(FIGURES)


# --- config validation -----------------------------------------------------------


def _smoke_with(edit):
    config = load_preset("smoke")
    edit(config)
    return config


MODELS = ", ".join(registry.model_names())
BAD_CONFIGS = {
    "unknown dataset": (
        lambda c: c["experiments"]["depth"]["grid"].update(datasets=["mnist"]),
        "experiments.depth.grid.datasets[0]: 'mnist' is not allowed; allowed: cora, citeseer, pubmed, "
        "coauthor-cs, ppi, ogbn-arxiv, csbm",
    ),
    "unknown model": (
        lambda c: c["experiments"]["alpha"]["grid"].update(models=["gin"]),
        f"experiments.alpha.grid.models[0]: 'gin' is not allowed; allowed: {MODELS}",
    ),
    "depth below 1": (
        lambda c: c["experiments"]["depth"]["grid"].update(depths=[0, 3]),
        "experiments.depth.grid.depths[0]: 0 is less than the minimum of 1",
    ),
    "negative alpha": (
        lambda c: c["experiments"]["alpha"]["grid"].update(alphas=[-0.5]),
        "experiments.alpha.grid.alphas[0]: -0.5 is less than the minimum of 0",
    ),
    "empty grid": (
        lambda c: c["experiments"]["transformer"]["grid"].update(seeds=[]),
        "experiments.transformer.grid.seeds: [] should be non-empty",
    ),
    "unknown recipe": (
        lambda c: c["experiments"]["depth"]["train"].update(recipe="pyg"),
        "experiments.depth.train.recipe: 'pyg' is not allowed; allowed: lipnorm, official, dgn, snr",
    ),
    "misspelt experiment": (
        lambda c: c["experiments"].update(detph=c["experiments"]["depth"]),
        "experiments: unknown key 'detph'; allowed: " + ", ".join(experiments.names()),
    ),
    "missing grid": (
        lambda c: c["experiments"]["depth"].pop("grid"),
        "experiments.depth: missing key 'grid'",
    ),
}
# A name a plugin may register: the last line says which plugins are loaded.
PLUGIN_HINT = (
    "plugins loaded: none (a plugin's names need --plugin PATH_OR_MODULE, or plugins: [PATH_OR_MODULE] "
    "in the workflow config)"
)


def check_config(config: dict) -> None:
    """The workflow's check (common.smk) of `config`, lipnorm's own names only."""
    grid.check_config(config, grid.schema_with_registry(yaml_numbers.read_schema(SCHEMA)))


def test_official_recipe_with_fewer_epochs_is_a_valid_config():
    check_config(_smoke_with(lambda c: c["experiments"]["depth"]["train"].update(recipe="official", epochs=150)))


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_bad_config_is_one_line_naming_the_key_and_what_is_allowed(case, monkeypatch):
    from lipnorm.registry import plugins

    monkeypatch.setattr(plugins, "_LOADED_PLUGINS", {})
    edit, line = BAD_CONFIGS[case]
    with pytest.raises(ValueError) as err:
        check_config(_smoke_with(edit))
    hint = [PLUGIN_HINT] if case in ("unknown dataset", "unknown model") else []
    assert str(err.value).splitlines() == ["the workflow config has 1 problem:", line, *hint]


def test_a_misspelt_training_key_names_the_allowed_keys_once():
    with pytest.raises(ValueError) as err:
        check_config(_smoke_with(lambda c: c["experiments"]["depth"]["train"].update(epoch=3)))
    first, line = str(err.value).splitlines()
    assert first == "the workflow config has 1 problem:"
    assert line.startswith("experiments.depth.train: unknown key 'epoch'; allowed: ")
    allowed = line.split("allowed: ")[1].split(", ")
    assert "epochs" in allowed and len(allowed) == len(set(allowed))


def test_every_problem_of_a_config_is_one_line():
    def edit(config):
        config["experiments"]["depth"]["grid"].update(datasets=["mnist"], depths=[0])
        config["experiments"]["depth"]["tran"] = {}

    with pytest.raises(ValueError) as err:
        check_config(_smoke_with(edit))
    lines = str(err.value).splitlines()
    assert lines[0] == "the workflow config has 3 problems:"
    assert [line.split(":")[0] for line in lines[1:4]] == [
        "experiments.depth", "experiments.depth.grid.datasets[0]", "experiments.depth.grid.depths[0]"
    ]


def test_snakemake_rejects_a_bad_config_before_any_job(tmp_path):
    bad = _smoke_with(lambda c: c["experiments"]["depth"]["grid"].update(depths=[0]))
    proc = snakemake(tmp_path, "--configfile", write_config(tmp_path / "bad.yaml", bad), check=False)
    assert proc.returncode != 0
    assert proc.stderr.splitlines()[-2:] == [
        "lipnorm: the workflow config has 1 problem:", "experiments.depth.grid.depths[0]: 0 is less than the minimum of 1"
    ]
    assert not (tmp_path / "results").exists() and not (tmp_path / "resources").exists()


# --- DAG sizes -------------------------------------------------------------------


@pytest.mark.parametrize(
    "preset",
    ["smoke", "default", "deep", "diagnose", "remedies-cora", "remedies-citeseer", "literature-pilot", "literature-cora",
     "literature-citeseer", "literature-pilot-citeseer", "literature-pilot-skips", "literature-depth20"],
)
def test_dry_run_job_counts(tmp_path, preset):
    proc = snakemake(tmp_path, "-n", "--configfile", PRESETS[preset])
    assert job_counts(proc.stdout) == expected_job_counts(load_preset(preset))


@pytest.mark.slow
def test_paper_dry_run_job_counts_and_time(tmp_path):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = snakemake(tmp_path, "-n", "--configfile", PRESETS["paper"])
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    counts = job_counts(proc.stdout)
    assert counts == expected_job_counts(load_preset("paper"))
    assert counts["total"] > 2000
    # CPU time, not wall time: the machine may be shared with other jobs.
    print(f"paper dry run: {counts['total']} jobs, {cpu:.1f} s CPU, {wall:.1f} s wall")
    assert cpu < 30


def test_a_preset_replaces_the_default_config(tmp_path):
    """A preset listing one experiment runs that one only, with only its settings."""
    config = load_preset("smoke")
    config["experiments"] = {"classic": config["experiments"]["classic"]}
    proc = snakemake(tmp_path, "-n", "-p", "--configfile", write_config(tmp_path / "one.yaml", config))
    assert job_counts(proc.stdout) == expected_job_counts(config)
    # config.yaml's classic settings (epochs 200) do not leak into the preset's.
    assert "--epochs 2 " in proc.stdout and "--epochs 200" not in proc.stdout


def test_run_directories_spell_numbers_exactly(tmp_path):
    config = load_preset("smoke")
    alpha = config["experiments"]["alpha"]
    alpha["grid"].update(alphas=[0.1, 1e-05, 2.0], missing_rates=[12.5])
    alpha["train"]["weight_decay"] = 5e-4
    config["experiments"] = {"alpha": alpha}
    proc = snakemake(tmp_path, "-n", "-p", "--configfile", write_config(tmp_path / "a.yaml", config))
    runs = sorted(set(re.findall(r"results/alpha/runs/csbm/gat-lip/L3/a[^/]+/r[^/]+/s0", proc.stdout)))
    assert runs == [
        f"results/alpha/runs/csbm/gat-lip/L3/a{a}/r12.5/s0" for a in ("0.00001", "0.1", "2")
    ]
    commands = train_commands_of(proc.stdout)
    # The commands only: Snakemake's header holds a random workflow ID, which once held "e-0".
    assert commands and all("--weight-decay 0.0005" in c and "e-0" not in c for c in commands)


def train_commands_of(output: str) -> list[str]:
    return [line for line in output.splitlines() if "lipnorm train " in line]


def test_device_reaches_every_train_job_and_an_experiment_setting_wins(tmp_path):
    config = load_preset("smoke")
    config["train"] = {"device": "cuda"}
    config["experiments"]["classic"]["train"]["device"] = "cpu"
    proc = snakemake(tmp_path, "-n", "-p", "--configfile", write_config(tmp_path / "gpu.yaml", config))
    commands = train_commands_of(proc.stdout)
    classic = [c for c in commands if "--out results/classic/" in c]
    assert classic and all("--device cpu " in c for c in classic)
    others = [c for c in commands if c not in classic]
    assert others and all("--device cuda " in c for c in others)


def test_checkpoint_reaches_the_train_jobs_of_its_experiment_only(tmp_path):
    config = load_preset("smoke")
    config["experiments"]["alpha"]["train"]["checkpoint"] = True
    proc = snakemake(tmp_path, "-n", "-p", "--configfile", write_config(tmp_path / "ckpt.yaml", config))
    commands = train_commands_of(proc.stdout)
    alpha = [c for c in commands if "--out results/alpha/" in c]
    assert alpha and all("--checkpoint " in c for c in alpha)
    others = [c for c in commands if c not in alpha]
    assert others and not any("checkpoint" in c for c in others)


def test_cluster_batching_reaches_the_train_jobs_of_its_experiment_only(tmp_path):
    config = load_preset("smoke")
    config["experiments"]["alpha"]["train"].update(batching="cluster", partitions=16, batch_partitions=4)
    proc = snakemake(tmp_path, "-n", "-p", "--configfile", write_config(tmp_path / "cluster.yaml", config))
    commands = train_commands_of(proc.stdout)
    alpha = [c for c in commands if "--out results/alpha/" in c]
    flags = ("--batching cluster ", "--partitions 16 ", "--batch-partitions 4 ")
    assert alpha and all(flag in c for c in alpha for flag in flags)
    others = [c for c in commands if c not in alpha]
    assert others and not any("--batching" in c or "partitions" in c for c in others)


def test_a_bad_batching_is_rejected_by_the_schema(tmp_path):
    config = load_preset("smoke")
    config["experiments"]["alpha"]["train"]["batching"] = "minibatch"
    proc = snakemake(tmp_path, "-n", "--configfile", write_config(tmp_path / "bad.yaml", config), check=False)
    assert proc.returncode != 0
    assert "experiments.alpha.train.batching: 'minibatch' is not allowed; allowed: full, cluster" in proc.stderr


@pytest.mark.parametrize("where", ["top", "experiment"])
def test_an_unknown_device_is_rejected_naming_the_key(tmp_path, where):
    config = load_preset("smoke")
    block = config.setdefault("train", {}) if where == "top" else config["experiments"]["depth"]["train"]
    block["device"] = "gpu"
    proc = snakemake(tmp_path, "-n", "--configfile", write_config(tmp_path / "bad.yaml", config), check=False)
    assert proc.returncode != 0
    output = proc.stdout + proc.stderr
    key = "train.device" if where == "top" else "experiments.depth.train.device"
    assert f"{key}: 'gpu' does not match '^(cpu|auto|cuda(:[0-9]+)?)$'" in output
    assert not (tmp_path / "results").exists()


def gpu_jobs_under_profile(tmp_path, text: str) -> tuple[list[str], list[str], str]:
    """A dry run of the smoke preset with profile `text` (as a workflow profile) whose
    training jobs must all run `lipnorm train --device cuda` and claim one GPU each:
    `(train jobs, other jobs, output)` as Snakemake prints them."""
    (tmp_path / "profile").mkdir()
    (tmp_path / "profile" / "config.v9+.yaml").write_text(text)
    cmd = [
        SNAKEMAKE, "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path / "work"),
        "--workflow-profile", str(tmp_path / "profile"), "--configfile", str(PRESETS["smoke"]), "-n", "-p",
    ]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    commands = train_commands_of(proc.stdout)
    assert len(commands) == expected_job_counts(load_preset("smoke"))["train"]
    assert all("--device cuda " in c for c in commands)
    # Each train job's resources carry the GPU (Snakemake prints them per job).
    jobs = proc.stdout.split("\nrule ")
    train_jobs = [job for job in jobs if job.startswith("train:")]
    assert len(train_jobs) == len(commands)
    assert all(re.search(r"resources: .*\bgpu=1\b", job) for job in train_jobs)
    return train_jobs, [job for job in jobs if not job.startswith("train:")], proc.stdout


def test_slurm_profile_gpu_example_trains_on_the_gpu_it_requests(tmp_path):
    """profiles/slurm with its commented GPU lines uncommented: every train job asks SLURM
    for a GPU and runs `lipnorm train --device cuda` (dry run: no cluster needed)."""
    text = (REPO / "profiles" / "slurm" / "config.v9+.yaml").read_text()
    example = ["    # gpu: 1", "# config:", "#   train:", "#     device: cuda"]
    assert all(line in text.splitlines() for line in example)
    for line in example:
        text = text.replace(line + "\n", line.replace("# ", "", 1) + "\n")
    profile = yaml.safe_load(text)
    assert profile["set-resources"]["train"]["gpu"] == 1 and profile["config"] == {"train": {"device": "cuda"}}
    gpu_jobs_under_profile(tmp_path, text)


def test_default_profile_gpu_example_runs_one_training_job_at_a_time_on_the_gpu(tmp_path):
    """profiles/default with its GPU example uncommented: the machine has one GPU
    (`resources: gpu: 1`), every train job claims it and runs `lipnorm train --device cuda`,
    so Snakemake never runs two training processes on the GPU at once (dry run)."""
    text = (REPO / "profiles" / "default" / "config.v9+.yaml").read_text()
    lines = text.splitlines()
    start = lines.index("# resources:")
    example = lines[start:]
    assert example == [
        "# resources:", "#   gpu: 1", "# set-resources:", "#   train:", "#     gpu: 1",
        "# config:", "#   train:", "#     device: cuda",
    ]
    text = "\n".join(lines[:start] + [line.removeprefix("# ") for line in example]) + "\n"
    profile = yaml.safe_load(text)
    assert profile["resources"] == {"gpu": 1} and profile["set-resources"]["train"] == {"gpu": 1}
    _, others, _ = gpu_jobs_under_profile(tmp_path, text)
    # Jobs of other rules claim no GPU, so they still run beside the training job.
    assert any(job.startswith(("mask:", "aggregate:")) for job in others)
    assert not any(re.search(r"\bgpu=", job) for job in others if job.startswith(("mask:", "aggregate:")))


NUMBERS_AS_WRITTEN = """\
results: results
resources: resources
data: {mirror: null}
datasets:
  csbm: {nodes: 2e2, signal: 1E0}
train: {weight_decay: 5e-4}
experiments:
  alpha:
    grid: {datasets: [csbm], models: [gat-lip], depths: [2], alphas: [1e-1, 1E1], missing_rates: [0], seeds: [0]}
    train: {epochs: 1e1, lr: 5e-3}
"""


def test_numbers_as_people_write_them_pass_validation_and_reach_the_jobs(tmp_path):
    # Snakemake reads YAML 1.1: these are strings until the workflow turns them into numbers.
    assert yaml.safe_load(NUMBERS_AS_WRITTEN)["experiments"]["alpha"]["train"]["lr"] == "5e-3"
    (tmp_path / "numbers.yaml").write_text(NUMBERS_AS_WRITTEN)
    proc = snakemake(tmp_path, "-n", "-p", "--configfile", tmp_path / "numbers.yaml")
    commands = train_commands_of(proc.stdout)
    assert len(commands) == 2
    for alpha, command in zip(("0.1", "10"), sorted(commands, key=lambda c: "--alpha 10 " in c)):
        assert f"--alpha {alpha} " in command and f"/a{alpha}/r0/s0" in command
        assert "--epochs 10 --lr 0.005 " in command and "--weight-decay 0.0005 " in command
        assert "--csbm nodes=200,signal=1 " in command


def test_a_non_number_where_the_schema_wants_one_is_rejected_naming_the_key(tmp_path):
    (tmp_path / "bad.yaml").write_text(NUMBERS_AS_WRITTEN.replace("lr: 5e-3", "lr: abc"))
    proc = snakemake(tmp_path, "-n", "--configfile", tmp_path / "bad.yaml", check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "experiments.alpha.train.lr: 'abc' is not of type 'number'" in output
    assert not (tmp_path / "results").exists()


def test_arms_run_in_their_own_folders_with_their_own_settings(tmp_path):
    """The diagnose preset's arms: each arm's runs under <results>/diagnose/<arm>/runs/,
    trained with that arm's settings, and one aggregate of every arm."""
    proc = snakemake(tmp_path, "-n", "-p", "--configfile", PRESETS["diagnose"])
    # Snakemake prints each job's shell command with -p (after "Shell command: ").
    commands = [line for line in proc.stdout.splitlines() if "lipnorm train " in line]
    root = "results/diagnose/diagnose"

    def train_commands(arm):
        return [c for c in commands if f"--out {root}/{arm}/runs/" in c]

    arms = load_preset("diagnose")["experiments"]["diagnose"]["arms"]
    assert len(commands) == sum(len(train_commands(arm)) for arm in arms)
    assert all("--feat-drop 0.6 " in c for c in train_commands("dropout"))
    assert all("--feat-drop 0 " in c for c in train_commands("no-dropout"))
    assert {re.search(r"--alpha (\S+)", c)[1] for c in train_commands("alpha")} == {"4", "16"}
    (recipe,) = train_commands("authors-recipe")
    assert "--recipe official --epochs 100 " in recipe and "--heads" not in recipe
    aggregate = next(line for line in proc.stdout.splitlines() if "lipnorm aggregate " in line)
    assert f"--out-dir {root}/aggregate --runs-from {root}/aggregate/run_dirs.txt " in aggregate


def test_aggregate_reads_every_arms_runs_from_the_run_list(tmp_path):
    """The run_list rule, run for real: one line per run directory of every arm, the
    directories the train jobs write; the aggregate command stays short."""
    preset = PRESETS["diagnose"]
    dry = snakemake(tmp_path, "-n", "-p", "--configfile", preset)
    outs = [re.search(r"--out (\S+)", c)[1] for c in train_commands_of(dry.stdout)]
    aggregate = next(line for line in dry.stdout.splitlines() if "lipnorm aggregate " in line)
    assert len(aggregate) < 300
    root = "results/diagnose/diagnose"  # the preset's results folder, then the experiment
    listing = f"{root}/aggregate/run_dirs.txt"
    assert f"--runs-from {listing} " in aggregate
    snakemake(tmp_path, listing, "--cores", "1", "--configfile", preset)
    assert sorted((tmp_path / listing).read_text().splitlines()) == sorted(outs)
    log = (tmp_path / root / "logs" / "run_list.log").read_text()
    assert log == f"{len(outs)} run directories listed in {listing}\n"
    # Nothing else ran (no training, no download): the list needs only the config.
    assert sorted(p.name for p in (tmp_path / root).iterdir()) == ["aggregate", "logs"]
    assert [p.name for p in (tmp_path / root / "aggregate").iterdir()] == ["run_dirs.txt"]
    assert not (tmp_path / "resources").exists()


def test_run_groups_name_arms_after_their_experiment():
    experiments = {
        "depth": {"grid": {"seeds": [0]}, "train": {}},
        "diagnose": {"arms": {"a": {"grid": {}, "train": {"x": 1}}, "b-2": {"grid": {}, "train": {}}}},
        "lipschitz": {"seed": 0, "scales": [1]},
    }
    groups = grid.run_groups(experiments)
    assert list(groups) == ["depth", "diagnose/a", "diagnose/b-2"]
    assert groups["diagnose/a"]["train"] == {"x": 1}


@pytest.mark.parametrize("arm", ["runs", "aggregate", "Bad_Name"])
def test_an_arm_named_like_an_output_folder_is_rejected(tmp_path, arm):
    config = load_preset("diagnose")
    arms = config["experiments"]["diagnose"]["arms"]
    arms[arm] = arms.pop("alpha")
    proc = snakemake(tmp_path, "-n", "--configfile", write_config(tmp_path / "bad.yaml", config), check=False)
    assert proc.returncode != 0
    assert "diagnose" in proc.stdout + proc.stderr


def test_format_number_is_exact_and_has_no_exponent():
    assert [grid.format_number(v) for v in (0, 1, 1.0, 0.1, 0.25, 1e-05, 5e-4, 100, 12.5)] == [
        "0", "1", "1", "0.1", "0.25", "0.00001", "0.0005", "100", "12.5",
    ]
    with pytest.raises(ValueError, match="expected a finite number, got nan"):
        grid.format_number(float("nan"))
    with pytest.raises(ValueError, match="expected a number, got True"):
        grid.format_number(True)


# --- the smoke preset, for real --------------------------------------------------


def final_targets(workdir: Path, config: dict) -> list[Path]:
    from lipnorm.results.figures import FIGURES
    from lipnorm.results.tables import TABLES

    out = []
    for name in config["experiments"]:
        out += [workdir / "results" / name / "tables" / f"{s}.tex" for s in TABLES[name]]
        out += [
            workdir / "results" / name / "figures" / f"{s}.{ext}"
            for s in FIGURES[name]
            for ext in ("pdf", "png")
        ]
    return out


def finished_runs(workdir: Path, name: str = "summary.json") -> list[Path]:
    """`name` in every finished run directory (not in the hidden temporary folder a run
    writes into before its rename: `lipnorm.io.atomic_dir`)."""
    found = (workdir / "results").glob(f"*/runs/**/{name}")
    return sorted(path for path in found if not any(part.startswith(".") for part in path.parts))


def metrics_by_run(workdir: Path) -> dict[str, pd.DataFrame]:
    return {
        str(path.parent.relative_to(workdir)): pd.read_parquet(path).drop(columns="seconds")
        for path in finished_runs(workdir, "metrics.parquet")
    }


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory, data_mirror):
    """The smoke preset run once, uninterrupted, with its report (Cora from the mirror)."""
    workdir = tmp_path_factory.mktemp("smoke")
    snakemake(workdir, "--configfile", PRESETS["smoke"])
    snakemake(workdir, "--configfile", PRESETS["smoke"], "--report", workdir / "results" / "report.html")
    return workdir


@pytest.mark.slow
def test_smoke_preset_runs_end_to_end(smoke_run):
    config = load_preset("smoke")
    missing = [p for p in final_targets(smoke_run, config) if not p.is_file()]
    assert not missing
    report = smoke_run / "results" / "report.html"
    assert report.stat().st_size > 0
    assert len(metrics_by_run(smoke_run)) == expected_job_counts(config)["train"]
    # A rerun after completion has nothing to do.
    proc = snakemake(smoke_run, "-n", "--configfile", PRESETS["smoke"])
    assert "Nothing to be done" in proc.stdout + proc.stderr


@pytest.mark.slow
def test_killed_run_resumes_to_the_same_outputs(smoke_run, tmp_path):
    # The depth experiment's tables and figures (its 8 runs): the other experiments are
    # the same rules again, and the whole preset runs in test_smoke_preset_runs_end_to_end.
    config = load_preset("smoke")
    experiment = {"experiments": {"depth": config["experiments"]["depth"]}}
    targets = [str(path.relative_to(tmp_path)) for path in final_targets(tmp_path, experiment)]
    cmd = snakemake_cmd(tmp_path, *targets, "--configfile", PRESETS["smoke"])
    # Own process group, so the kill takes the running jobs down with Snakemake.
    proc = subprocess.Popen(
        cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 300
        while not finished_runs(tmp_path):
            assert proc.poll() is None, "snakemake ended before the first run finished"
            assert time.monotonic() < deadline, "no run finished within 300 s"
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finished = len(finished_runs(tmp_path))
    assert finished < expected_job_counts(experiment)["train"], "killed too late to test a resume"

    snakemake(tmp_path, *targets, "--configfile", PRESETS["smoke"])

    assert all((tmp_path / target).is_file() for target in targets)
    resumed = metrics_by_run(tmp_path)
    uninterrupted = {run: frame for run, frame in metrics_by_run(smoke_run).items() if run.startswith("results/depth/")}
    assert len(resumed) == expected_job_counts(experiment)["train"] == 8
    assert resumed.keys() == uninterrupted.keys()
    for run, frame in resumed.items():
        pd.testing.assert_frame_equal(frame, uninterrupted[run], obj=run)
    proc = snakemake(tmp_path, "-n", *targets, "--configfile", PRESETS["smoke"])
    assert "Nothing to be done" in proc.stdout + proc.stderr


def processes_with(text: str) -> list[int]:
    """IDs of the processes whose command line contains `text`."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and text.encode() in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except OSError:  # ended meanwhile
            pass
    return found


@pytest.mark.slow
def test_a_retried_train_job_resumes_from_the_state_its_first_attempt_saved(tmp_path):
    from lipnorm.train import run_state

    run_grid = {"datasets": ["csbm"], "models": ["gat-lip"], "depths": [2], "alphas": [1],
                "missing_rates": [0], "seeds": [0]}
    config = {
        "results": "results", "resources": "resources", "data": {"mirror": None},
        "datasets": {"csbm": {"nodes": 60, "classes": 3, "feature_dim": 8, "avg_degree": 4}},
        "experiments": {"depth": {"grid": run_grid, "train": {"epochs": 150, "heads": 2, "hidden": 4, "save_every": 25}}},
    }
    (subdir,) = grid.run_subdirs(run_grid)
    relative = f"results/depth/runs/{subdir}"  # as the job's command spells it
    run_dir = tmp_path / relative
    state = run_state.state_path(run_dir)
    cmd = snakemake_cmd(tmp_path, "--configfile", write_config(tmp_path / "one.yaml", config),
                        "--retries", "1", "--cores", "1", f"{relative}/summary.json")
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while not state.exists():
            assert proc.poll() is None, f"snakemake ended before the first save:\n{proc.stdout.read()}"
            assert time.monotonic() < deadline, "no training state within 120 s"
            time.sleep(0.005)
        # `exec` in the rule: the job's process is `lipnorm train` itself.
        (trainer,) = processes_with(f"--out\0{relative}\0")
        os.kill(trainer, signal.SIGTERM)
        output, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, output
    assert "exit status 143" in output, output
    summary = json_load(run_dir / "summary.json")
    assert len(summary["resumed_from_epochs"]) == 1 and 25 <= summary["resumed_from_epochs"][0] < 150
    assert summary["epochs_run"] == 150 and not state.exists()
    job_log = (tmp_path / "results" / "depth" / "logs" / "runs" / f"{subdir}.log").read_text()
    assert f"resuming after epoch {summary['resumed_from_epochs'][0]} from the training state" in job_log


def json_load(path: Path) -> dict:
    import json

    return json.loads(path.read_text())


@pytest.mark.parametrize("dataset", ["cora", "citeseer"])
def test_remedies_presets_cross_every_remedy_with_gat_and_gat_lip(dataset):
    """7 remedies (one arm each) x GAT/GAT-Lip x depths 2-30 x 3 seeds on one dataset."""
    experiment = load_preset(f"remedies-{dataset}")["experiments"]["remedies"]
    from lipnorm.results import remedies

    assert list(experiment["arms"]) == list(remedies.REMEDIES)
    assert expected_job_counts(load_preset(f"remedies-{dataset}"))["train"] == 7 * 2 * 5 * 3
    for arm in experiment["arms"].values():
        grid = arm["grid"]
        assert grid["datasets"] == [dataset] and grid["attention_norms"] == ["none", "lip"]
        assert set(grid["depths"]) >= {2, 5, 10, 20, 30} and len(grid["seeds"]) >= 3
        assert grid["missing_rates"] == [100] and (arm["train"]["heads"], arm["train"]["hidden"]) == (8, 8)


# The part of the literature's 1-10, 15, 20, 25, 30 run so far: every published best
# depth of the dataset (SNR's 9 on Cora included), and 2, plain GAT's best on Cora.
LITERATURE_DEPTHS = {"cora": [2, 4, 5, 6, 8, 9, 10], "citeseer": [2, 4, 5, 6, 8, 9, 10]}


@pytest.mark.parametrize("dataset", ["cora", "citeseer"])
def test_literature_presets_cross_every_remedy_with_gat_and_gat_lip_under_the_dgn_recipe(dataset):
    """7 remedies x GAT/GAT-Lip x depths holding every published best depth x 5 seeds,
    recipe dgn, 100 % missing features."""
    preset = load_preset(f"literature-{dataset}")
    experiment = preset["experiments"]["remedies"]
    from lipnorm.results import remedies

    assert list(experiment["arms"]) == list(remedies.REMEDIES)
    # Every remedy's seeds in one job per seed list (DropEdge's included).
    counts = expected_job_counts(preset)
    assert (counts.get("train", 0), counts["train_seeds"]) == (0, 7 * 2 * len(LITERATURE_DEPTHS[dataset]))
    published = {entry.depth for (_, name), entry in remedies.PUBLISHED.items() if name == dataset}
    for arm in experiment["arms"].values():
        grid = arm["grid"]
        assert grid["datasets"] == [dataset] and grid["attention_norms"] == ["none", "lip"]
        assert grid["depths"] == LITERATURE_DEPTHS[dataset] and set(grid["depths"]) >= published
        assert grid["seeds"] == [0, 1, 2, 3, 4] and grid["missing_rates"] == [100]
        assert arm["train"]["recipe"] == "dgn" and "heads" not in arm["train"]


def test_literature_pilot_is_gat_at_depths_2_to_8_and_gat_lip_at_the_published_ones():
    preset = load_preset("literature-pilot")
    arms = preset["experiments"]["remedies"]["arms"]
    assert expected_job_counts(preset)["train_seeds"] == 4 * 7 + 4 * 3
    for name, arm in arms.items():
        grid = arm["grid"]
        assert arm["train"] == {"recipe": "dgn"} and grid["datasets"] == ["cora"]
        if name.endswith("-lip"):
            assert grid["attention_norms"] == ["lip"] and grid["depths"] == [2, 5, 8]
        else:
            assert grid["attention_norms"] == ["none"] and grid["depths"] == list(range(2, 9))


@pytest.mark.slow
def test_a_seed_group_job_writes_every_seed_and_its_retry_resumes_each(tmp_path):
    """recipe dgn, three seeds: one train_seeds job (`lipnorm train --seeds`) writes the
    three run directories; SIGTERM stops it after each run saved its state, and the retry
    resumes every run from its own state."""
    from lipnorm.train import run_state

    run_grid = {"datasets": ["csbm"], "models": ["gat-lip-batchnorm"], "depths": [2], "alphas": [1],
                "missing_rates": [100], "seeds": [0, 1, 2]}
    config = {
        "results": "results", "resources": "resources", "data": {"mirror": None},
        "datasets": {"csbm": {"nodes": 60, "classes": 3, "feature_dim": 8, "avg_degree": 4}},
        "experiments": {"depth": {"grid": run_grid, "train": {"recipe": "dgn", "epochs": 400, "save_every": 25}}},
    }
    subdirs = grid.run_subdirs(run_grid)
    relative = [f"results/depth/runs/{subdir}" for subdir in subdirs]
    states = [run_state.state_path(tmp_path / run_dir) for run_dir in relative]
    cmd = snakemake_cmd(tmp_path, "--configfile", write_config(tmp_path / "seeds.yaml", config),
                        "--retries", "1", "--cores", "1", *(f"{run_dir}/summary.json" for run_dir in relative))
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while not all(state.exists() for state in states):
            assert proc.poll() is None, f"snakemake ended before the first save:\n{proc.stdout.read()}"
            assert time.monotonic() < deadline, "no training states within 120 s"
            time.sleep(0.005)
        (trainer,) = processes_with("--seeds\x000,1,2\x00")
        os.kill(trainer, signal.SIGTERM)
        output, _ = proc.communicate(timeout=180)
    finally:
        proc.kill()
    assert proc.returncode == 0, output
    assert "exit status 143" in output and "train_seeds" in output, output
    resumed = set()
    for run_dir, state in zip(relative, states):
        summary = json_load(tmp_path / run_dir / "summary.json")
        assert summary["epochs_run"] == 400 and len(summary["resumed_from_epochs"]) == 1 and not state.exists()
        resumed.add(summary["resumed_from_epochs"][0])
        assert "trained together with seeds [0, 1, 2] as one network" in (tmp_path / run_dir / "train.log").read_text()
    (epoch,) = resumed  # the seeds stopped, and resumed, after the same epoch
    assert 25 <= epoch < 400
    log = tmp_path / "results" / "depth" / "logs" / "runs" / subdirs[0].rsplit("/", 1)[0] / "seeds-0-1-2.log"
    assert f"resuming after epoch {epoch} from the training state" in log.read_text()
