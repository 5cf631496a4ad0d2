"""`lipnorm aggregate`: tidy tables of synthetic run directories, per-seed statistics."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest
from tests.synthetic_runs import BASE_CONFIG, LAYER_METRICS, layer_stat, write_grid, write_run

from lipnorm.results.aggregate import (
    AGGREGATE_TABLES,
    aggregate_runs,
    label,
    load_table,
    runs_of_valid_cells,
    seed_cells,
    settings_columns,
    write_aggregate,
    write_run_list,
)

GRID = {"dataset": ["cora", "citeseer"], "model": ["gat", "gat-lip"]}
DIVERGED = ("cora", "gat", 1)  # dataset, model, seed
SINGLE_SEED = ("citeseer", "gat-lip")


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return write_grid(root, GRID, diverged={DIVERGED}, single_seed={SINGLE_SEED})


@pytest.fixture(scope="module")
def tables(records):
    return aggregate_runs([r["run_dir"] for r in records])


def test_runs_table_has_every_setting_status_and_outcome_per_run(records, tables):
    runs = tables["runs"].set_index("run_dir")
    assert len(runs) == len(records) == 3 * 3 + 1  # one cell with a single seed
    assert settings_columns(tables["runs"]) == list(BASE_CONFIG)
    for record in records:
        row = runs.loc[record["run_dir"]]
        for key in BASE_CONFIG:
            assert row[key] == record[key], key
        assert row["status"] == record["status"]
        if record["status"] == "ok":
            assert row["test_metric"] == record["test_metric"]
            assert row["final_test"] == record["test_metric"]


def test_diverged_run_is_kept_and_flagged(tables):
    runs = tables["runs"]
    diverged = runs[runs["status"] == "diverged"]
    assert diverged[["dataset", "model", "seed"]].values.tolist() == [list(DIVERGED)]
    assert np.isnan(diverged["test_metric"].iloc[0])
    assert diverged["diverged_epoch"].iloc[0] == BASE_CONFIG["epochs"] - 1


def test_nested_summary_fields_are_flattened_and_collisions_prefixed(tables):
    runs = tables["runs"]
    assert (runs["versions_torch"] == "2.2.1").all()
    assert (runs["best_val_epoch"] == BASE_CONFIG["epochs"] - 1).all()
    # `threads` is both a setting and a summary field: the summary's gets `run_`.
    assert (runs["threads"] == 1).all() and (runs["run_threads"] == 1).all()


def test_per_epoch_tables_carry_each_runs_settings(records, tables):
    epochs_per_run = BASE_CONFIG["epochs"]
    depth = BASE_CONFIG["depth"]
    expected_rows = {
        "epochs": epochs_per_run,
        "gradnorms": epochs_per_run * (depth + 2) * 3,  # layers incl. input/output, 3 groups
        "outnorms": epochs_per_run * depth,
    }
    for name, rows_per_run in expected_rows.items():
        frame = tables[name]
        assert len(frame) == rows_per_run * len(records), name
        for record in records:
            rows = frame[frame["run_dir"] == record["run_dir"]]
            assert len(rows) == rows_per_run
            for key in (*BASE_CONFIG, "status"):
                assert (rows[key] == record[key]).all(), (name, key)
    # metrics.parquet's `lr` (the epoch's rate) must not shadow the `lr` setting.
    assert {"lr", "epoch_lr", "train_loss", "val_metric"} <= set(tables["epochs"].columns)
    assert {"epoch", "layer", "kind", "group", "grad_norm"} <= set(tables["gradnorms"].columns)
    assert {"epoch", "layer", "output_norm"} <= set(tables["outnorms"].columns)


def test_layerstats_table_holds_each_runs_diagnostics_with_its_settings(records, tables):
    frame = tables["layerstats"]
    assert {"epoch", "layer", "metric", "value"} <= set(frame.columns)
    for record in records:
        rows = frame[frame["run_dir"] == record["run_dir"]]
        # A diverged run has no statistics of the epoch it diverged at (the last here).
        logged = BASE_CONFIG["epochs"] - (record["status"] == "diverged")
        assert len(rows) == logged * BASE_CONFIG["depth"] * len(LAYER_METRICS)
        for key in (*BASE_CONFIG, "status"):
            assert (rows[key] == record[key]).all(), key
        keys = rows[["epoch", "layer", "metric"]].itertuples(index=False)
        expected = [layer_stat(metric, layer=layer, epoch=epoch, **record)
                    for epoch, layer, metric in keys]
        assert rows["value"].tolist() == pytest.approx(expected)


def test_write_aggregate_writes_parquet_and_csv_that_agree(records, tmp_path):
    written = write_aggregate([r["run_dir"] for r in records], tmp_path / "agg")
    assert sorted(p.name for p in written) == sorted(
        f"{name}.{ext}" for name in AGGREGATE_TABLES for ext in ("parquet", "csv")
    )
    assert sorted(p.name for p in (tmp_path / "agg").iterdir()) == sorted(p.name for p in written)
    for name in AGGREGATE_TABLES:
        parquet = load_table(tmp_path / "agg", name)
        csv = pd.read_csv(tmp_path / "agg" / f"{name}.csv")
        assert list(parquet.columns) == list(csv.columns)
        assert parquet["run_dir"].tolist() == csv["run_dir"].tolist()
    assert settings_columns(load_table(tmp_path / "agg", "runs")) == list(BASE_CONFIG)


def test_missing_and_unfinished_runs_are_named_together(records, tmp_path):
    unfinished = tmp_path / "unfinished"
    shutil.copytree(records[0]["run_dir"], unfinished)
    (unfinished / "summary.json").unlink()
    absent = tmp_path / "absent"
    run_dirs = [records[1]["run_dir"], unfinished, absent]
    with pytest.raises(ValueError, match="2 run directories are missing") as error:
        write_aggregate(run_dirs, tmp_path / "agg")
    assert f"{unfinished} (missing summary.json)" in str(error.value)
    assert f"{absent} (missing summary.json, metrics.parquet" in str(error.value)
    assert not (tmp_path / "agg").exists()


def test_repeated_settings_are_an_error(records, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(records[0]["run_dir"], copy)
    with pytest.raises(ValueError, match="have identical settings"):
        aggregate_runs([records[0]["run_dir"], copy])


def test_unknown_status_is_an_error(tmp_path):
    run = tmp_path / "run"
    write_run(run, test_metric=0.5)
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(json.dumps({**summary, "status": "crashed"}))
    with pytest.raises(ValueError, match="status 'crashed'; allowed: ok, diverged"):
        aggregate_runs([run])


def test_seed_cells_match_numpy(records, tables):
    cells = seed_cells(tables["runs"], ["dataset", "model"]).set_index(["dataset", "model"])
    for (dataset, model), cell in cells.iterrows():
        mine = [r for r in records if r["dataset"] == dataset and r["model"] == model]
        scores = np.array([r["test_metric"] for r in mine]) * 100
        diverged = sum(r["status"] == "diverged" for r in mine)
        assert (cell["n"], cell["n_diverged"], cell["valid"]) == (len(mine), diverged, diverged == 0)
        if diverged:
            assert np.isnan(cell["mean"]) and np.isnan(cell["std"])
        else:
            assert cell["mean"] == pytest.approx(scores.mean(), abs=1e-12)
            if len(mine) == 1:
                assert np.isnan(cell["std"])
            else:
                assert cell["std"] == pytest.approx(np.std(scores, ddof=1), abs=1e-12)
    assert cells.loc[SINGLE_SEED, "n"] == 1
    assert cells.loc[DIVERGED[:2], "n_diverged"] == 1


def test_runs_of_valid_cells_drop_whole_cells_with_a_diverged_seed(tables):
    kept, diverged = runs_of_valid_cells(tables["runs"], ["dataset", "model"])
    assert diverged[["dataset", "model", "n", "n_diverged"]].values.tolist() == [["cora", "gat", 3, 1]]
    assert not ((kept["dataset"] == "cora") & (kept["model"] == "gat")).any()
    assert len(kept) == len(tables["runs"]) - 3


def test_cells_mixing_another_setting_are_an_error(tmp_path):
    records = write_grid(tmp_path, {"hidden": [8, 16]}, seeds=(0,))
    runs = aggregate_runs([r["run_dir"] for r in records])["runs"]
    with pytest.raises(ValueError, match=r"share dataset=cora, model=gat, seed=0 but differ in hidden;"):
        seed_cells(runs, ["dataset", "model"])


def test_load_table_names_the_command_that_writes_it(tmp_path):
    with pytest.raises(ValueError, match="`lipnorm aggregate --out-dir"):
        load_table(tmp_path, "runs")
    with pytest.raises(ValueError, match="`lipnorm probe --out-dir"):
        load_table(tmp_path, "probe")


def test_unknown_model_label_is_an_error():
    assert label("model", "gat-lip") == "GAT-Lip"
    with pytest.raises(ValueError, match="unknown model 'gin'; known: gat, gat-lip"):
        label("model", "gin")


def test_settings_that_follow_the_seed_do_not_split_a_cell(tmp_path):
    # The workflow passes each seed's own mask file: its path varies with the seed.
    runs = aggregate_runs([
        write_run(tmp_path / f"s{seed}", test_metric=0.5 + seed / 10, seed=seed,
                  mask=f"masks/cora_r100_s{seed}.npy")["run_dir"]
        for seed in range(3)
    ])["runs"]
    (cell,) = seed_cells(runs, ["dataset", "model"]).to_dict("records")
    assert (cell["n"], cell["mean"]) == (3, pytest.approx(60.0))


# --- run lists: grids larger than a command line ----------------------------------


def test_aggregate_reads_more_run_directories_than_a_command_line_holds(tmp_path, capsys):
    import errno
    import subprocess

    from lipnorm import cli

    first = tmp_path / "grid" / ("x" * 120) / "run-0000"
    write_run(first, test_metric=0.5, seed=0)
    summary = json.loads((first / "summary.json").read_text())
    run_dirs = [first]
    # Copies that differ in their seed, at long paths: > 200 000 bytes of paths in all.
    for seed in range(1, 900):
        run_dir = tmp_path / "grid" / ("x" * 120) / f"run-{seed:04d}-{'y' * 100}"
        shutil.copytree(first, run_dir)
        summary["config"]["seed"] = seed
        (run_dir / "summary.json").write_text(json.dumps(summary))
        run_dirs.append(run_dir)
    joined = " ".join(map(str, run_dirs))
    assert len(joined) > 200_000
    # One shell command holding them is one argument over Linux's 128 KiB limit.
    with pytest.raises(OSError) as err:
        subprocess.run(["bash", "-c", f"lipnorm aggregate --out-dir out {joined}"], check=False)
    assert err.value.errno == errno.E2BIG

    listing = tmp_path / "run_dirs.txt"
    write_run_list(listing, run_dirs)
    assert listing.read_text().splitlines() == list(map(str, run_dirs))
    out = tmp_path / "aggregate"
    assert cli.main(["aggregate", "--out-dir", str(out), "--runs-from", str(listing)]) == 0
    runs = pd.read_parquet(out / "runs.parquet")
    assert runs["run_dir"].tolist() == list(map(str, run_dirs))
    assert runs["seed"].tolist() == list(range(900))
    assert len(pd.read_parquet(out / "epochs.parquet")) == 900 * BASE_CONFIG["epochs"]
    assert capsys.readouterr().out.split()[0] == str(out / "runs.parquet")


def test_run_list_and_arguments_combine_and_blank_lines_are_skipped(records, tmp_path):
    from lipnorm import cli

    dirs = [str(r["run_dir"]) for r in records]
    (tmp_path / "runs.txt").write_text("\n".join(dirs[1:3]) + "\n\n")
    out = tmp_path / "aggregate"
    assert cli.main(["aggregate", "--out-dir", str(out), dirs[0], "--runs-from", str(tmp_path / "runs.txt")]) == 0
    assert pd.read_parquet(out / "runs.parquet")["run_dir"].tolist() == dirs[:3]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "run list '{path}' does not exist"),
        ("\n \n", "run list '{path}' lists no run directories (one per line)"),
    ],
)
def test_bad_run_lists_are_named(tmp_path, capsys, content, message):
    from lipnorm import cli

    path = tmp_path / "runs.txt"
    if content is not None:
        path.write_text(content)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["aggregate", "--out-dir", str(tmp_path / "out"), "--runs-from", str(path)])
    assert exit_info.value.code == 2
    assert f"lipnorm aggregate: error: {message.format(path=path)}" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_aggregate_without_run_directories_is_an_error(tmp_path, capsys):
    from lipnorm import cli

    with pytest.raises(SystemExit) as exit_info:
        cli.main(["aggregate", "--out-dir", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    assert "no run directories: give RUN_DIR arguments or --runs-from FILE" in capsys.readouterr().err


def test_write_run_list_refuses_paths_it_cannot_list(tmp_path):
    with pytest.raises(ValueError, match=r"run directory 'a\\nb' cannot be listed one per line"):
        write_run_list(tmp_path / "runs.txt", ["ok", "a\nb"])
    assert not (tmp_path / "runs.txt").exists()
