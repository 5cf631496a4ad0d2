"""lipnorm.plan: the memory and time model, its fit, calibration files, dataset sizes,
and the workflow's planned training jobs (resources, checkpointing, refusals)."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from lipnorm import cli, grid, plan, registry
from lipnorm.registry import DatasetSizes

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "config" / "presets" / "smoke.yaml"
PAPER = REPO / "config" / "presets" / "paper.yaml"
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
ARXIV = registry.dataset("ogbn-arxiv").sizes
CSBM = DatasetSizes(nodes=3000, edges=18000, features=64, classes=4)


@pytest.fixture(scope="module")
def shipped():
    return plan.load_coefficients()


def shape(sizes=CSBM, depth=4, **settings):
    return plan.RunShape(sizes, depth, settings.pop("heads", 8), settings.pop("hidden", 16), **settings)


MODES = {
    "plain": {},
    "checkpointed": {"checkpoint": True},
    "cluster": {"batching": "cluster", "partitions": 20, "batch_partitions": 4},
    "cluster-checkpointed": {"batching": "cluster", "partitions": 20, "batch_partitions": 4, "checkpoint": True},
}


# --- the model ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_estimates_are_positive_and_grow_with_depth_and_nodes(shipped, mode):
    estimates = {
        (nodes, depth): shipped.estimate(
            shape(dataclasses.replace(CSBM, nodes=nodes, edges=6 * nodes), depth, **MODES[mode])
        )
        for nodes in (2000, 20000, 200000)
        for depth in (1, 4, 16)
    }
    for value in estimates.values():
        assert math.isfinite(value.memory_mb) and value.memory_mb > 0
        assert math.isfinite(value.epoch_s) and value.epoch_s > 0
    for nodes in (2000, 20000, 200000):
        memory = [estimates[nodes, depth].memory_mb for depth in (1, 4, 16)]
        seconds = [estimates[nodes, depth].epoch_s for depth in (1, 4, 16)]
        assert memory == sorted(memory) and memory[0] < memory[-1]
        assert seconds == sorted(seconds) and seconds[0] < seconds[-1]
    for depth in (1, 4, 16):
        memory = [estimates[nodes, depth].memory_mb for nodes in (2000, 20000, 200000)]
        assert memory == sorted(memory) and memory[0] < memory[-1]


@pytest.mark.parametrize("depth", [4, 8, 30])
def test_checkpointing_needs_less_memory_than_plain_from_depth_4(shipped, depth):
    plain = shipped.estimate(shape(ARXIV, depth, heads=8, hidden=64))
    checkpointed = shipped.estimate(shape(ARXIV, depth, heads=8, hidden=64, checkpoint=True))
    assert checkpointed.memory_mb < plain.memory_mb


def test_cluster_batches_need_less_memory_than_full_batch_on_a_deep_network(shipped):
    full = shipped.estimate(shape(ARXIV, 16, heads=8, hidden=64))
    cluster = shipped.estimate(shape(ARXIV, 16, heads=8, hidden=64, **MODES["cluster"]))
    assert cluster.memory_mb < full.memory_mb


def test_memory_terms_count_what_each_mode_holds():
    sizes = DatasetSizes(nodes=100, edges=700, features=10, classes=3)
    mb = 4 / 2**20
    terms = dict(zip(plan.MEMORY_TERMS, plan.memory_terms(shape(sizes, 5, heads=2, hidden=3))))
    assert terms == pytest.approx({
        "base": 1, "features": 1000 * mb, "edges": 700 * mb, "edge_messages": 4200 * mb, "width": 600 * mb,
        "layer_nodes": 5 * 600 * mb, "layer_edges": 5 * 1400 * mb, "saved_inputs": 0, "projections": 0,
        "evaluation_nodes": 0, "evaluation_edges": 0,
    })
    checkpointed = dict(zip(plan.MEMORY_TERMS, plan.memory_terms(shape(sizes, 5, heads=2, hidden=3, checkpoint=True))))
    assert checkpointed["layer_nodes"] == pytest.approx(600 * mb)
    assert checkpointed["layer_edges"] == pytest.approx(1400 * mb)
    # Every layer's input but the last one's (its block is not recomputed).
    assert checkpointed["saved_inputs"] == pytest.approx(4 * 600 * mb)
    # Four projections a layer (the graph transformer's): three more (N, W) tensors a
    # layer held, all of them plain, one block's checkpointed.
    transformer = dict(zip(plan.MEMORY_TERMS, plan.memory_terms(shape(sizes, 5, heads=2, hidden=3, projections=4))))
    assert transformer["projections"] == pytest.approx(5 * 3 * 600 * mb)
    assert transformer["layer_nodes"] == terms["layer_nodes"]
    transformer = dict(zip(
        plan.MEMORY_TERMS, plan.memory_terms(shape(sizes, 5, heads=2, hidden=3, projections=4, checkpoint=True))
    ))
    assert transformer["projections"] == pytest.approx(3 * 600 * mb)
    # Cluster: 2 of 10 partitions -> 20 nodes, 140 edges per batch, plus the evaluation on
    # the whole graph.
    cluster = dict(zip(
        plan.MEMORY_TERMS,
        plan.memory_terms(shape(sizes, 5, heads=2, hidden=3, batching="cluster", partitions=10, batch_partitions=2)),
    ))
    assert cluster["width"] == pytest.approx(20 * 6 * mb)
    assert cluster["layer_nodes"] == pytest.approx(5 * 20 * 6 * mb)
    assert cluster["layer_edges"] == pytest.approx(5 * 140 * 2 * mb)
    assert cluster["evaluation_nodes"] == pytest.approx(600 * mb)
    assert cluster["evaluation_edges"] == pytest.approx(1400 * mb)
    assert cluster["features"] == terms["features"] and cluster["edges"] == terms["edges"]


def test_the_parameters_and_their_adam_state_are_known_memory():
    sizes = DatasetSizes(nodes=100, edges=700, features=10, classes=3)
    mb = 4 / 2**20
    gat = shape(sizes, 5, heads=2, hidden=3)
    # Input Linear 10 x 6, five layers of one 6 x 6 projection, output Linear 6 x 3.
    assert plan.parameter_count(gat) == 60 + 5 * 36 + 18
    assert plan.known_memory_mb(gat) == pytest.approx(4 * (60 + 5 * 36 + 18) * mb)
    assert plan.parameter_count(dataclasses.replace(gat, projections=4)) == 60 + 5 * 4 * 36 + 18


def test_a_layers_projections_come_from_its_architecture():
    assert plan.projections_of("gat-lip") == plan.projections_of("gat-pairnorm") == 1
    assert plan.projections_of("gt") == plan.projections_of("gt-lip") == 4


def test_checkpointed_saved_inputs_of_32_mib_and_more_are_known_not_fitted():
    mb = 4 / 2**20

    def saved_mb(run):
        return plan.known_memory_mb(run) - plan.PARAMETER_COPIES * plan.parameter_count(run) * mb

    # 16,384 nodes x 512 floats = 32 MiB a saved input: mapped one by one, exactly L - 1 of them.
    large = shape(DatasetSizes(nodes=16384, edges=100000, features=8, classes=3), 6, heads=8, hidden=64, checkpoint=True)
    assert dict(zip(plan.MEMORY_TERMS, plan.memory_terms(large)))["saved_inputs"] == 0
    assert saved_mb(large) == pytest.approx(5 * 16384 * 512 * mb)
    # One node fewer: in the heap, a fitted multiple; nothing known.
    small = shape(DatasetSizes(nodes=16383, edges=100000, features=8, classes=3), 6, heads=8, hidden=64, checkpoint=True)
    assert dict(zip(plan.MEMORY_TERMS, plan.memory_terms(small)))["saved_inputs"] == pytest.approx(5 * 16383 * 512 * mb)
    assert saved_mb(small) == pytest.approx(0, abs=1e-9)
    # Plain runs keep the allocator's heap; cluster batches are judged by the batch's nodes.
    assert saved_mb(dataclasses.replace(large, checkpoint=False)) == pytest.approx(0, abs=1e-9)
    quarter = dataclasses.replace(large, batching="cluster", partitions=4, batch_partitions=1)
    assert saved_mb(quarter) == pytest.approx(0, abs=1e-9)
    assert saved_mb(dataclasses.replace(quarter, batch_partitions=4)) == pytest.approx(saved_mb(large))


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"batching": "minibatch"}, "batching='minibatch'; allowed: full, cluster"),
        ({"batching": "cluster", "partitions": 4, "batch_partitions": 5}, "batch_partitions=5 must be at most partitions=4"),
        ({"partitions": 0}, "partitions=0 must be a positive integer"),
    ],
)
def test_bad_settings_are_rejected_naming_them(settings, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        shape(**settings)


# --- fitting and calibration files ----------------------------------------------------


def synthetic_measurements(memory, seconds):
    truth = plan.Coefficients(memory, seconds)
    rows = []
    for point in plan.calibration_points():
        sizes = plan.csbm_sizes(point["csbm"])
        # As `plan.measure` writes them: model and batching always, partitions with cluster.
        settings = ("depth", "heads", "hidden", "checkpoint", "partitions", "batch_partitions")
        row = {
            **dataclasses.asdict(sizes), "model": point.get("model", plan.CALIBRATION_MODEL),
            "batching": point.get("batching", "full"), **{k: point[k] for k in settings if k in point},
        }
        estimate = truth.estimate(plan.shape_of(row))
        rows.append({**row, "memory_mb": estimate.memory_mb, "epoch_s": estimate.epoch_s})
    return rows


def test_the_fit_recovers_known_coefficients_exactly():
    rng = np.random.default_rng(0)
    memory = dict(zip(plan.MEMORY_TERMS, rng.uniform(0.5, 20, len(plan.MEMORY_TERMS)).tolist()))
    memory["base"] = 650.0
    seconds = dict(zip(plan.TIME_TERMS, rng.uniform(0.01, 2, len(plan.TIME_TERMS)).tolist()))
    fitted = plan.fit(synthetic_measurements(memory, seconds))
    assert fitted.memory == pytest.approx(memory, rel=1e-6)
    assert fitted.time == pytest.approx(seconds, rel=1e-6)


def test_the_fit_keeps_a_zero_coefficient_at_zero():
    memory = dict.fromkeys(plan.MEMORY_TERMS, 2.0) | {"saved_inputs": 0.0, "base": 500.0}
    seconds = dict.fromkeys(plan.TIME_TERMS, 0.5) | {"recompute_dense": 0.0}
    fitted = plan.fit(synthetic_measurements(memory, seconds))
    assert fitted.memory["saved_inputs"] == pytest.approx(0, abs=1e-9)
    assert fitted.time["recompute_dense"] == pytest.approx(0, abs=1e-9)
    assert fitted.memory["base"] == pytest.approx(500)


def test_the_fit_needs_enough_measurements():
    rows = synthetic_measurements(dict.fromkeys(plan.MEMORY_TERMS, 1.0), dict.fromkeys(plan.TIME_TERMS, 1.0))
    # One per memory term (11), the longer list.
    with pytest.raises(ValueError, match="10 measurements; at least 11 are needed"):
        plan.fit(rows[:10])
    assert plan.fit(rows[:11]).memory


def test_a_calibration_file_round_trips(tmp_path, shipped):
    path = shipped.save(tmp_path / "coefficients.json")
    again = plan.load_coefficients(path)
    assert again == dataclasses.replace(shipped, measurements=tuple(shipped.measurements))
    assert json.loads(path.read_text())["format"] == plan.FORMAT
    assert not list(tmp_path.glob("*.tmp*"))


def test_the_environment_names_the_calibration_file(tmp_path, monkeypatch, shipped):
    changed = dataclasses.replace(shipped, memory={**shipped.memory, "base": 1.0}, machine="elsewhere")
    monkeypatch.setenv(plan.COEFFICIENTS_ENV, str(changed.save(tmp_path / "mine.json")))
    assert plan.load_coefficients() == changed


@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json", "is not valid JSON"),
        ('{"format": "other"}', "format 'other', expected 'lipnorm-plan-coefficients/2'"),
    ],
)
def test_a_corrupt_calibration_file_is_an_error_naming_it(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=re.escape(f"plan coefficients {str(path)!r}") + ".*" + re.escape(message)):
        plan.load_coefficients(path)


def test_a_calibration_file_missing_a_term_is_an_error(tmp_path, shipped):
    data = shipped.to_json()
    del data["memory_mb"]["edges"]
    path = tmp_path / "short.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="'memory_mb' must map exactly the terms base, features, edges"):
        plan.load_coefficients(path)


def test_a_missing_calibration_file_is_an_error_naming_it(tmp_path):
    with pytest.raises(ValueError, match=r"nowhere\.json'.*cannot read.*lipnorm plan --calibrate"):
        plan.load_coefficients(tmp_path / "nowhere.json")


def test_the_shipped_coefficients_are_package_data():
    pyproject = (REPO / "pyproject.toml").read_text()
    assert '"lipnorm.plan" = ["plan_coefficients.json"]' in pyproject
    assert (REPO / "src" / "lipnorm" / "plan" / plan.DEFAULT_COEFFICIENTS).is_file()


def test_calibration_points_stay_small():
    points = plan.calibration_points()
    assert len(points) >= 2 * len(plan.TIME_TERMS)
    assert {point["checkpoint"] for point in points} == {False, True}
    assert max(plan.csbm_sizes(point["csbm"]).nodes for point in points) <= 150000
    # The shipped file measured every point, each under 3.5 GB.
    shipped = plan.load_coefficients(Path(plan.__file__).with_name(plan.DEFAULT_COEFFICIENTS))
    assert len(shipped.measurements) == len(points)
    assert max(row["memory_mb"] for row in shipped.measurements) < 3500
    # Every term is measured: a transformer's projections, cluster batches' evaluation.
    assert {plan.projections_of(point.get("model", plan.CALIBRATION_MODEL)) for point in points} == {1, 4}
    assert {point.get("batching", "full") for point in points} == {"full", "cluster"}


@pytest.mark.slow
@pytest.mark.parametrize(
    "settings",
    [{}, {"model": "gt-lip", "batching": "cluster", "partitions": 4, "batch_partitions": 2}],
)
def test_measure_reads_a_real_runs_memory_and_epoch_time(tmp_path, settings):
    csbm = {"nodes": 300, "classes": 3, "avg_degree": 4, "feature_dim": 8, "signal": 1, "seed": 0}
    point = {"csbm": csbm, "heads": 2, "hidden": 4, "depth": 2, "checkpoint": True, **settings}
    row = plan.measure(point, 1, "cpu", tmp_path)
    # Under cluster batches a first run of depth 1 made the partition, which the measured
    # run found; a full-batch point has nothing cached to make first.
    cluster = settings.get("batching") == "cluster"
    prepare_runs = sorted(tmp_path.glob("prepare*"))
    assert len(prepare_runs) == cluster
    if cluster:
        assert json.loads((prepare_runs[0] / "summary.json").read_text())["config"]["depth"] == 1
        assert list((tmp_path / "datasets").glob("csbm-*-metis-k4.pkl"))
    (run_dir,) = tmp_path.glob("run*")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["config"]["checkpoint"] is True and summary["config"]["depth"] == 2
    assert summary["config"]["data_root"] == str(tmp_path / "datasets")
    assert row["memory_mb"] == summary["peak_memory_mb"]
    assert row == {
        "nodes": 300, "edges": 300 * 4 + 300, "features": 8, "classes": 3, "depth": 2, "heads": 2, "hidden": 4,
        "checkpoint": True, "model": "gat-lip", "batching": "full", **settings,
        "memory_mb": row["memory_mb"], "epoch_s": row["epoch_s"],
    }
    assert summary["config"]["model"] == row["model"] and summary["config"]["batching"] == row["batching"]
    assert row["epoch_s"] > 0
    # A second point on the same graph is measured without preparing it again.
    plan.measure({**point, "depth": 1}, 1, "cpu", tmp_path)
    assert len(list(tmp_path.glob("prepare*"))) == cluster and len(list(tmp_path.glob("run*"))) == 2


def test_calibrate_fits_what_it_measured_and_writes_the_file(tmp_path, monkeypatch):
    memory = dict.fromkeys(plan.MEMORY_TERMS, 3.0) | {"base": 600.0}
    seconds = dict.fromkeys(plan.TIME_TERMS, 0.2)
    rows = iter(synthetic_measurements(memory, seconds))
    monkeypatch.setattr(plan.calibration, "measure", lambda point, threads, device, workdir: next(rows))
    lines = []
    fitted = plan.calibrate(tmp_path / "mine.json", threads=2, progress=lines.append)
    assert len(lines) == len(plan.calibration_points()) and lines[0].startswith(f"[1/{len(lines)},")
    again = plan.load_coefficients(tmp_path / "mine.json")
    assert again.memory == pytest.approx(memory, rel=1e-6) and again.time == pytest.approx(seconds, rel=1e-6)
    assert again.threads == 2 and again.device == "cpu" and again.version and again.machine
    assert len(again.measurements) == len(lines) and again == fitted


# --- dataset sizes --------------------------------------------------------------------


@pytest.mark.slow
def test_csbm_sizes_are_the_generated_graphs():
    from lipnorm.data import generate_csbm
    from lipnorm.data.csbm import csbm_params

    spec = "nodes=500,classes=3,avg_degree=7,feature_dim=12,seed=1"
    data = generate_csbm(csbm_params(spec))
    assert plan.csbm_sizes(spec) == DatasetSizes(data.graph.num_nodes(), data.graph.num_edges(), 12, 3)


@pytest.mark.parametrize("name", ["cora", "citeseer"])
def test_registered_sizes_are_the_loaded_graphs(offline_loader, name):
    data = offline_loader(name)
    assert registry.dataset(name).sizes == DatasetSizes(
        data.graph.num_nodes(), data.graph.num_edges(), data.features.shape[1], data.num_classes,
        train_nodes=int(data.train_mask.sum()),
    )


@pytest.mark.parametrize("rate, rows", [(100, 140), (0, 2708), (50, 140 + 1284)])
def test_a_row_pruned_first_layer_is_planned_on_the_rows_missing_features_leave(rate, rows, shipped):
    """Under recipe dgn the first layer drops out and projects the training nodes' rows
    and what the missing rate leaves of the others (Cora: 140 of 2,708 at 100 %); the
    other recipes' input Linear takes every row."""
    cora = registry.dataset("cora").sizes
    assert plan.input_rows("dgn", cora, rate) == rows
    assert plan.input_rows("lipnorm", cora, rate) is None
    pruned = plan.time_terms(plan.RunShape(cora, 4, 1, 16, input_rows=rows))
    whole = plan.time_terms(plan.RunShape(cora, 4, 1, 16))
    index = plan.TIME_TERMS.index("input")
    assert pruned[index] == pytest.approx(whole[index] * rows / 2708)
    assert [p for i, p in enumerate(pruned) if i != index] == [w for i, w in enumerate(whole) if i != index]
    with pytest.raises(ValueError, match=r"plan: input_rows=2709 must be in \[0, 2708\]"):
        plan.RunShape(cora, 4, 1, 16, input_rows=2709)


def test_every_builtin_dataset_but_csbm_has_sizes():
    assert [name for name in registry.BUILTIN_DATASETS if registry.dataset(name).sizes is None] == ["csbm"]


def test_a_plugin_dataset_without_sizes_is_loaded_once_to_count_them(monkeypatch):
    from tests.registry.test_registry import tiny_graph_parts

    calls = []

    def load():
        calls.append(1)
        return tiny_graph_parts()

    registry.register_dataset("test-counted", label="Counted", colour="#000000", load=load)
    try:
        sizes = plan.dataset_sizes("test-counted")
        assert plan.dataset_sizes("test-counted") == sizes and len(calls) == 1
        parts = tiny_graph_parts()
        graph = parts["graph"]
        loops = int((graph.edges()[0] == graph.edges()[1]).sum())
        assert sizes.nodes == graph.num_nodes()
        assert sizes.edges == graph.num_edges() - loops + graph.num_nodes()
    finally:
        registry.unregister("dataset", "test-counted")
        plan.sizes._LOADED_SIZES.pop("test-counted", None)


def test_dataset_sizes_must_be_positive_integers():
    with pytest.raises(ValueError, match="edges=0 must be a positive integer"):
        DatasetSizes(nodes=3, edges=0, features=2, classes=2)


# --- workflow jobs --------------------------------------------------------------------


def smoke_config() -> dict:
    return yaml.safe_load(SMOKE.read_text())


def test_plan_workflow_has_exactly_the_workflow_jobs(shipped):
    config = smoke_config()
    jobs = plan.plan_workflow(config, shipped)
    expected = {
        (group, subdir) for group, spec in grid.run_groups(config["experiments"]).items()
        for subdir in grid.run_subdirs(spec["grid"])
    }
    assert set(jobs) == expected
    job = jobs["depth", "csbm/gat/L3/a1/r0/s0"]
    sizes = plan.csbm_sizes(config["datasets"]["csbm"])
    assert job.estimate == shipped.estimate(plan.RunShape(sizes, 3, 2, 4))
    assert job.epochs == 2 and job.changed == {}
    assert job.mem_mb(2) == math.ceil(job.estimate.memory_mb * 1.25 * 2)


def test_a_job_over_the_limit_is_given_checkpointing_if_that_fits(shipped):
    settings = {"heads": 8, "hidden": 64, "epochs": 10}
    plain = plan.plan_job("depth", "ogbn-arxiv/gat-lip/L10/a1/r0/s0", settings, ARXIV, shipped)
    limit = plain.mem_mb() - 1
    job = plan.plan_job("depth", "ogbn-arxiv/gat-lip/L10/a1/r0/s0", settings, ARXIV, shipped, max_mem_mb=limit)
    assert job.changed == {"checkpoint": True} and job.settings == {**settings, "checkpoint": True}
    assert job.mem_mb() <= limit
    assert job.estimate == shipped.estimate(plan.RunShape(ARXIV, 10, 8, 64, checkpoint=True))


def test_a_job_checkpointing_cannot_fit_takes_cluster_batches_where_allowed(shipped):
    settings = {"heads": 8, "hidden": 64, "epochs": 10}
    subdir = "ogbn-arxiv/gat-lip/L10/a1/r0/s0"
    checkpointed = shipped.estimate(plan.RunShape(ARXIV, 10, 8, 64, checkpoint=True))
    limit = math.ceil(checkpointed.memory_mb * 1.25) - 1
    cluster = {"partitions": 40, "batch_partitions": 2}
    job = plan.plan_job("depth", subdir, settings, ARXIV, shipped, max_mem_mb=limit, cluster=cluster)
    assert job.changed["batching"] == "cluster" and job.mem_mb() <= limit
    assert {"batching": "cluster", "partitions": 40, "batch_partitions": 2}.items() <= job.settings.items()
    assert grid.option_args(job.settings).endswith(
        "--batching cluster --partitions 40 --batch-partitions 2" + (" --checkpoint" if job.changed.get("checkpoint") else "")
    )


def test_cluster_batches_without_counts_are_planned_as_the_run_sizes_them(shipped):
    """No K or B: the plan estimates the counts the run will take from its graph (ogbn-arxiv:
    K 400, B 4), whether the config asks for cluster batches or the plan gives them."""
    settings = {"heads": 8, "hidden": 64, "epochs": 10}
    subdir = "ogbn-arxiv/gat-lip/L10/a1/r0/s0"
    sized = shipped.estimate(plan.RunShape(ARXIV, 10, 8, 64, batching="cluster", partitions=400, batch_partitions=4))
    asked = plan.plan_job("depth", subdir, {**settings, "batching": "cluster"}, ARXIV, shipped)
    assert asked.estimate == sized and asked.changed == {}
    checkpointed = shipped.estimate(plan.RunShape(ARXIV, 10, 8, 64, checkpoint=True))
    limit = math.ceil(checkpointed.memory_mb * 1.25) - 1
    given = plan.plan_job("depth", subdir, settings, ARXIV, shipped, max_mem_mb=limit, cluster={})
    assert given.changed == {"batching": "cluster"} and given.estimate == sized
    assert grid.option_args(given.settings).endswith("--batching cluster")


def test_a_job_that_fits_nothing_is_refused_naming_it_its_estimate_and_the_limit(shipped):
    subdir = "ogbn-arxiv/gat-lip/L30/a1/r0/s0"
    estimate = shipped.estimate(plan.RunShape(ARXIV, 30, 8, 64))
    with pytest.raises(ValueError) as error:
        plan.plan_job("depth", subdir, {"heads": 8, "hidden": 64, "epochs": 5}, ARXIV, shipped, max_mem_mb=1000)
    message = str(error.value)
    assert f"train job depth/runs/{subdir} (dataset=ogbn-arxiv, model=gat-lip, depth=30" in message
    assert f"estimate {estimate.memory_mb:.0f} MB" in message and "max_mem_mb=1000" in message
    assert "checkpoint=True:" in message and "cluster batches are not allowed" in message


def test_gat_classic_is_given_neither_checkpointing_nor_cluster_batches(shipped):
    cluster = {"partitions": 4, "batch_partitions": 2}
    with pytest.raises(ValueError) as error:
        plan.plan_job(
            "classic", "cora/gat-classic/L2/a1/r0/s0", {}, registry.dataset("cora").sizes, shipped,
            max_mem_mb=10, cluster=cluster,
        )
    assert re.search(
        r"request x1.25 = as configured: \d+ MB \(architecture 'gat-classic' is registered with "
        r"full_batch_only=True: no cluster batches\)$", str(error.value),
    )


def test_a_job_over_max_runtime_is_refused(shipped):
    with pytest.raises(ValueError, match=r"train job depth/runs/cora/gat/L2/a1/r0/s0 .*max_runtime=1 min: estimate 100000 epochs"):
        plan.plan_job("depth", "cora/gat/L2/a1/r0/s0", {"epochs": 100000}, registry.dataset("cora").sizes, shipped, max_runtime=1)


def test_plan_configfile_prints_each_experiment(capsys, shipped):
    assert cli.main(["plan", "--configfile", str(SMOKE)]) == 0
    output = capsys.readouterr().out
    jobs = plan.plan_workflow(smoke_config(), shipped)
    for experiment in ("depth", "gradients", "alpha", "transformer", "classic"):
        group = [job for job in jobs.values() if job.run_group == experiment]
        largest = max(group, key=lambda job: job.mem_mb())
        line = next(line for line in output.splitlines() if line.startswith(f"{experiment} "))
        fields = line.split()
        # runs, jobs (one per run: the smoke preset trains no seeds together), CPU-h, MB
        assert int(fields[1]) == int(fields[2]) == len(group)
        assert float(fields[3]) == pytest.approx(sum(job.cpu_hours for job in group) * shipped.threads, abs=0.06)
        assert int(fields[4]) == largest.mem_mb() and fields[-1] == largest.run_dir
    assert "lipschitz" not in output


def test_plan_configfile_counts_a_seed_list_as_one_job(capsys):
    """The literature pilot: 200 runs, 40 jobs (5 seeds trained together each)."""
    assert cli.main(["plan", "--configfile", str(REPO / "config" / "presets" / "literature-pilot.yaml")]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("remedies "))
    assert line.split()[1:3] == ["200", "40"]


def test_plan_one_run_prints_its_estimate(capsys, shipped):
    assert cli.main(["plan", "--dataset", "ogbn-arxiv", "--depth", "4", "--heads", "8", "--hidden", "64"]) == 0
    estimate = shipped.estimate(plan.RunShape(ARXIV, 4, 8, 64))
    assert capsys.readouterr().out.startswith(f"{estimate.memory_mb:.0f} MB peak memory, {estimate.epoch_s:.2f} s per epoch")


def test_every_paper_job_fits_the_first_attempt(shipped):
    config = yaml.safe_load(PAPER.read_text())
    jobs = plan.plan_workflow(config, shipped)
    assert len(jobs) > 2000
    assert max(job.mem_mb(1) for job in jobs.values()) <= config["max_mem_mb"]


# --- the workflow (dry runs) ----------------------------------------------------------


def dry_run(tmp_path, config, check=True):
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump(config))
    cmd = [
        SNAKEMAKE, "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path),
        "--workflow-profile", str(REPO / "profiles" / "default"), "-n", "-p", "--configfile", str(config_path),
    ]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def train_jobs(output: str) -> dict[str, dict[str, str]]:
    """Snakemake's dry-run blocks of the train rule: run directory -> resources and command."""
    jobs = {}
    for block in output.split("\nrule train:")[1:]:
        block = block.split("\n\n", 1)[0]
        run_dir = re.search(r"output: \S*?(results/\S+)/summary\.json", block)[1]
        resources = dict(re.findall(r"(mem_mb|runtime)=(\d+)", re.search(r"resources: (.*)", block)[1]))
        command = next(line for line in block.splitlines() if "lipnorm train " in line)
        jobs[run_dir] = {**resources, "command": command}
    return jobs


@pytest.mark.slow
def test_a_dry_run_gives_train_jobs_the_plans_resources(tmp_path, shipped):
    config = smoke_config()
    config["experiments"] = {"depth": config["experiments"]["depth"]}
    jobs = train_jobs(dry_run(tmp_path, config).stdout)
    planned = plan.plan_workflow(config, shipped)
    assert len(jobs) == len(planned)
    for (group, subdir), job in planned.items():
        seen = jobs[f"results/{group}/runs/{subdir}"]
        assert int(seen["mem_mb"]) == job.mem_mb(1) and int(seen["runtime"]) == job.runtime_min(1)
        assert "checkpoint" not in seen["command"]


@pytest.mark.slow
def test_a_dry_run_checkpoints_the_jobs_over_max_mem_mb(tmp_path, shipped):
    config = smoke_config()
    config["experiments"] = {"depth": config["experiments"]["depth"]}
    config["experiments"]["depth"]["train"].update(heads=8, hidden=32)
    # A graph large enough for checkpointing to matter (a dry run generates nothing).
    config["datasets"]["csbm"].update(nodes=50000, avg_degree=10)
    sizes = plan.csbm_sizes(config["datasets"]["csbm"])
    deep = shipped.estimate(plan.RunShape(sizes, 3, 8, 32))
    deep_checkpointed = shipped.estimate(plan.RunShape(sizes, 3, 8, 32, checkpoint=True))
    assert deep_checkpointed.memory_mb < deep.memory_mb
    config["max_mem_mb"] = math.ceil(deep.memory_mb * 1.25) - 1
    jobs = train_jobs(dry_run(tmp_path, config).stdout)
    assert len(jobs) == 8
    for run_dir, job in jobs.items():
        assert ("--checkpoint" in job["command"]) == ("/L3/" in run_dir), run_dir
        assert int(job["mem_mb"]) <= config["max_mem_mb"]
        if "/L3/" in run_dir:
            assert int(job["mem_mb"]) == math.ceil(deep_checkpointed.memory_mb * 1.25)


@pytest.mark.slow
def test_a_dry_run_refuses_a_job_that_fits_nothing(tmp_path, shipped):
    config = smoke_config()
    config["experiments"] = {"classic": config["experiments"]["classic"]}
    config["max_mem_mb"] = 100
    proc = dry_run(tmp_path, config, check=False)
    assert proc.returncode != 0
    output = proc.stdout + proc.stderr
    estimate = shipped.estimate(plan.RunShape(registry.dataset("cora").sizes, 2, 8, 8))
    assert "train job classic/runs/cora/gat-classic/L2/a1/r0/s0" in output
    assert f"estimate {estimate.memory_mb:.0f} MB" in output and "max_mem_mb=100" in output
    assert not (tmp_path / "results").exists()


def test_runs_trained_with_their_seeds_are_planned_at_the_measured_share(shipped, monkeypatch):
    """The literature pilot trains every run with its seeds: its CPU-hours are the
    coefficients' share of those of its runs alone, and the report says so."""
    monkeypatch.setenv("LIPNORM_KERNELS", "on")
    config = plan.read_config(REPO / "config" / "presets" / "literature-pilot.yaml")
    alone = dataclasses.replace(shipped, seed_batch_share=1.0, seed_batch_source="")
    measured = dataclasses.replace(shipped, seed_batch_share=0.25, seed_batch_source="a test")

    def hours(report: str) -> float:
        return float(next(line for line in report.splitlines() if line.startswith("remedies ")).split()[3])

    report_alone, report_measured = plan.config_report(config, alone), plan.config_report(config, measured)
    assert hours(report_measured) == pytest.approx(0.25 * hours(report_alone), abs=0.06)
    assert ("CPU-h: a run trained with its seeds at 0.25 of its cost alone (the coefficients' seeds_together, with "
            "the compiled kernels: LIPNORM_KERNELS=on)") in report_measured
    assert "CPU-h: each run as if alone" in report_alone
    # The smoke preset trains no seeds together: the share changes nothing there.
    smoke = smoke_config()
    assert plan.config_report(smoke, measured).splitlines()[3:] == plan.config_report(smoke, alone).splitlines()[3:]


@pytest.mark.parametrize(
    "environment, kernels, why",
    [
        ({"LIPNORM_KERNELS": "on"}, True, "LIPNORM_KERNELS=on"),
        ({"LIPNORM_KERNELS": "off"}, False, "LIPNORM_KERNELS=off"),
        ({"LIPNORM_KERNELS": "auto", "CC": "/no/such/cc"}, False, "LIPNORM_KERNELS=auto, no C compiler found here"),
        ({"CC": "gcc"}, True, "LIPNORM_KERNELS=auto, a C compiler found here"),
    ],
    ids=["on", "off", "auto-no-compiler", "auto"],
)
def test_the_plan_counts_runs_at_the_speed_of_the_path_that_will_run(shipped, monkeypatch, environment, kernels, why):
    """Without the compiled kernels a run trained with its seeds costs the share measured
    on the torch and DGL paths (`seeds_together.without_kernels`), and the report says
    which path it assumed and why."""
    monkeypatch.delenv("LIPNORM_KERNELS", raising=False)
    monkeypatch.delenv("CC", raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert plan.workflow.kernels_expected()[0] is kernels and why in plan.workflow.kernels_expected()[1]
    config = plan.read_config(REPO / "config" / "presets" / "literature-pilot.yaml")
    share = shipped.seed_batch_share if kernels else shipped.seed_batch_share_without_kernels
    assert 0 < shipped.seed_batch_share < shipped.seed_batch_share_without_kernels < 1
    report = plan.config_report(config, shipped)
    assert f"a run trained with its seeds at {share:.3g} of its cost alone" in report
    assert f"{'with' if kernels else 'without'} the compiled kernels: {why}" in report
    alone = plan.config_report(
        config, dataclasses.replace(shipped, seed_batch_share=1.0, seed_batch_share_without_kernels=1.0)
    )
    hours = [float(next(line for line in text.splitlines() if line.startswith("remedies ")).split()[3])
             for text in (report, alone)]
    # each printed to 0.1: within 0.05 of its value, the product within share x 0.05 more
    assert hours[0] == pytest.approx(share * hours[1], abs=0.05 * (1 + share))


def test_a_bad_share_without_kernels_is_refused(tmp_path, shipped):
    data = shipped.to_json()
    assert data["seeds_together"]["without_kernels"] == shipped.seed_batch_share_without_kernels
    for share in (0, 1.5, "twice", True):
        data["seeds_together"]["without_kernels"] = share
        path = tmp_path / "coefficients.json"
        path.write_text(json.dumps(data))
        with pytest.raises(ValueError, match=re.escape(f"seeds_together.without_kernels={share!r} must be a number in (0, 1]")):
            plan.load_coefficients(path)


def test_the_shipped_coefficients_carry_the_measured_share_and_a_bad_one_is_refused(tmp_path, shipped):
    assert 0 < shipped.seed_batch_share < 1 and "seed_batching" in shipped.seed_batch_source
    data = shipped.to_json()
    for share in (0, 1.5, "half", True):
        data["seeds_together"] = {"share": share, "measured": "x"}
        path = tmp_path / "coefficients.json"
        path.write_text(json.dumps(data))
        with pytest.raises(ValueError, match=re.escape(f"seeds_together.share={share!r} must be a number in (0, 1]")):
            plan.load_coefficients(path)
    data["seeds_together"] = 0.5
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=re.escape("seeds_together must map share and measured; got 0.5")):
        plan.load_coefficients(path)
