"""`lipnorm publish --merge`: published folders joined into one (`lipnorm.results.publish.merge`).

The parts are cut, by seed, out of one real publish of a synthetic remedies experiment
(tests.synthetic_runs.write_remedies, seeds 0-2): merging them must give back the whole,
the tables rendered from the concatenated runs, and the figures drawn from the stored data.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from tests.synthetic_runs import write_remedies

from lipnorm import experiments
from lipnorm.cli import main
from lipnorm.results.aggregate import write_aggregate
from lipnorm.results.publish import PARTS_FILE, merge, publish, read_runs, regenerate
from lipnorm.results.tables import write_tables
from lipnorm.results.tables.latex import render

SEEDS = (0, 1, 2)


@pytest.fixture(scope="module")
def whole(tmp_path_factory) -> Path:
    """A remedies experiment of seeds 0-2, published (with its stored layerstats.csv)."""
    root = tmp_path_factory.mktemp("results")
    records = write_remedies(tmp_path_factory.mktemp("runs"), seeds=SEEDS)
    aggregate = root / "remedies" / "aggregate"
    write_aggregate([r["run_dir"] for r in records], aggregate)
    write_tables("remedies", aggregate, root / "remedies" / "tables")
    for stem in experiments.experiment("remedies").figure_stems:
        for fmt in ("pdf", "png"):
            (root / "remedies" / "figures").mkdir(parents=True, exist_ok=True)
            (root / "remedies" / "figures" / f"{stem}.{fmt}").write_bytes(b"placeholder")
    out = tmp_path_factory.mktemp("docs") / "whole"
    publish(root, out)
    return out


def cut(whole: Path, folder: Path, seeds, layerstats: bool = True) -> Path:
    """A published part holding the runs (and stored rows) of `seeds` only."""
    (folder / "remedies").mkdir(parents=True)
    for file in ("runs.csv", "layerstats.csv") if layerstats else ("runs.csv",):
        frame = pd.read_csv(whole / "remedies" / file, float_precision="round_trip")
        frame.loc[frame["seed"].isin(seeds)].to_csv(folder / "remedies" / file, index=False)
    for name, text in regenerate(folder).items():
        (folder / name).write_text(text)
    return folder


def read(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, float_precision="round_trip")


def test_merge_gives_the_union_keeps_a_common_run_once_and_renders_from_it(whole, tmp_path):
    # Seed 1 in both parts, with equal rows: kept once.
    a = cut(whole, tmp_path / "part-a", (0, 1))
    b = cut(whole, tmp_path / "part-b", (1, 2))
    out = tmp_path / "merged"
    written = merge([a, b], out)
    assert sorted(written) == sorted(p for p in out.rglob("*") if p.is_file())
    pd.testing.assert_frame_equal(read(out / "remedies" / "runs.csv"), read(whole / "remedies" / "runs.csv"))
    pd.testing.assert_frame_equal(read(out / "remedies" / "layerstats.csv"),
                                  read(whole / "remedies" / "layerstats.csv"))
    per_seed = read(whole / "remedies" / "runs.csv")["seed"].value_counts()
    parts = read(out / "remedies" / PARTS_FILE)
    assert parts.to_dict("list") == {
        "part": ["part-a", "part-b"],
        "runs": [per_seed[0] + per_seed[1], per_seed[1] + per_seed[2]],
        "kept": [per_seed[0] + per_seed[1], per_seed[2]],
    }
    # The tables are those of the concatenated runs (and of the whole publish).
    entry = experiments.experiment("remedies")
    concatenated = pd.concat([read(a / "remedies" / "runs.csv"), read(b / "remedies" / "runs.csv")],
                             ignore_index=True).drop_duplicates(list(entry.run_keys), ignore_index=True)
    concatenated["run_dir"] = [f"run{i}" for i in range(len(concatenated))]
    concatenated.attrs["settings"] = list(entry.run_keys)
    for output in entry.tables:
        text = render(*experiments.build(output, {"runs": concatenated}.get))
        assert (out / "remedies" / f"{output.stem}.tex").read_text() == text
        assert text == (whole / "remedies" / f"{output.stem}.tex").read_text()
    assert regenerate(out) == {name: (out / name).read_text() for name in regenerate(out)}
    # Both figures drawn from the stored data, and linked; the parts are named.
    for stem in ("remedies_accuracy", "remedies_mad"):
        assert (out / "remedies" / f"{stem}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (out / "remedies" / f"{stem}.pdf").read_bytes()[:5] == b"%PDF-"
    summary = (out / "summary.md").read_text()
    assert "![remedies_mad](remedies/remedies_mad.png)" in summary
    assert "`remedies/layerstats.csv`" in summary.splitlines()[2]
    assert "Merged by `lipnorm publish --merge` from 2 published parts" in summary
    assert f"`part-b` ({per_seed[1] + per_seed[2]} runs, {per_seed[2]} kept)" in summary
    assert plt.get_fignums() == []


def test_a_run_that_differs_between_parts_is_refused_by_name(whole, tmp_path):
    a = cut(whole, tmp_path / "part-a", (0, 1))
    b = cut(whole, tmp_path / "part-b", (1, 2))
    runs = read(b / "remedies" / "runs.csv")
    changed = runs.index[runs["seed"] == 1][0]
    runs.loc[changed, "best_val_test"] = 0.123
    runs.to_csv(b / "remedies" / "runs.csv", index=False)
    row = runs.loc[changed]
    with pytest.raises(ValueError) as error:
        merge([a, b], tmp_path / "merged")
    message = str(error.value)
    assert f"dataset={row['dataset']}" in message and f"depth={row['depth']}" in message
    assert "seed=1" in message and "best_val_test" in message
    assert str(a) in message and str(b) in message
    assert not (tmp_path / "merged").exists()


def test_environment_counts_are_summed_per_environment(whole, tmp_path):
    a = cut(whole, tmp_path / "part-a", (0,))
    b = cut(whole, tmp_path / "part-b", (1, 2))
    columns = ["kernels_cpu", "kernels_mode", "runs"]
    pd.DataFrame([("AMD EPYC", "auto", 5), ("Intel Xeon", "off", 2)], columns=columns).to_csv(
        a / "remedies" / "environment.csv", index=False)
    pd.DataFrame([("AMD EPYC", "auto", 7)], columns=columns).to_csv(b / "remedies" / "environment.csv", index=False)
    merge([a, b], tmp_path / "merged")
    table = pd.read_csv(tmp_path / "merged" / "remedies" / "environment.csv")
    assert table.values.tolist() == [["AMD EPYC", "auto", 12], ["Intel Xeon", "off", 2]]


def test_a_figure_whose_inputs_a_part_lacks_is_left_out_and_said_why(whole, tmp_path):
    a = cut(whole, tmp_path / "part-a", (0, 1))
    b = cut(whole, tmp_path / "part-b", (2,), layerstats=False)  # published before layerstats.csv
    out = tmp_path / "merged"
    merge([a, b], out)
    files = {p.name for p in (out / "remedies").iterdir()}
    assert "layerstats.csv" not in files
    assert {"remedies_accuracy.png", "remedies_accuracy.pdf"} <= files
    assert not {"remedies_mad.png", "remedies_mad.pdf"} & files
    summary = (out / "summary.md").read_text()
    assert "remedies_mad.png" not in summary
    assert ("Figure `remedies_mad` is not in this folder: it is drawn from `runs` and `layerstats`, "
            "and this folder stores no `layerstats`") in summary
    assert "`remedies/layerstats.csv`" not in summary
    assert regenerate(out)["summary.md"] == summary


def test_in_place_merge_redraws_one_folder_and_keeps_its_tables(whole, tmp_path):
    folder = tmp_path / "whole"
    shutil.copytree(whole, folder)
    tables = {p.name: p.read_text() for p in (folder / "remedies").glob("*.tex")}
    old_png = (folder / "remedies" / "remedies_accuracy.png").read_bytes()
    assert main(["publish", "--merge", str(folder), "--out", str(folder)]) == 0
    assert {p.name: p.read_text() for p in (folder / "remedies").glob("*.tex")} == tables
    assert (folder / "remedies" / "remedies_accuracy.png").read_bytes() != old_png  # redrawn
    assert not (folder / "remedies" / PARTS_FILE).exists()  # one part: nothing was merged
    pd.testing.assert_frame_equal(read(folder / "remedies" / "runs.csv"), read(whole / "remedies" / "runs.csv"))
    assert (folder / "summary.md").read_text() == (whole / "summary.md").read_text()
    assert list(tmp_path.glob(".whole.*")) == []  # no temporary folder left behind
    # Again: the same tables, runs and summary.
    merge([folder], folder)
    assert {p.name: p.read_text() for p in (folder / "remedies").glob("*.tex")} == tables


def test_a_merged_folder_merged_again_in_place_keeps_its_parts(whole, tmp_path):
    a = cut(whole, tmp_path / "part-a", (0,))
    b = cut(whole, tmp_path / "part-b", (1, 2))
    out = tmp_path / "merged"
    merge([a, b], out)
    parts = (out / "remedies" / PARTS_FILE).read_text()
    summary = (out / "summary.md").read_text()
    merge([out], out)
    assert (out / "remedies" / PARTS_FILE).read_text() == parts
    assert (out / "summary.md").read_text() == summary


def test_cli_publish_takes_a_results_root_or_merge(whole, tmp_path, capsys):
    a = cut(whole, tmp_path / "part-a", (0,))
    b = cut(whole, tmp_path / "part-b", (1, 2))
    assert main(["publish", "--merge", str(a), str(b), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == sorted(str(p) for p in (tmp_path / "out").rglob("*") if p.is_file())
    for argv in (["publish", "--out", str(tmp_path / "x")],
                 ["publish", str(tmp_path), "--merge", str(a), "--out", str(tmp_path / "x")]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        assert "give either RESULTS_ROOT or --merge" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["publish", "--merge", str(tmp_path / "absent"), "--out", str(tmp_path / "x")])
    assert "is not a published folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # replacing tmp_path would delete the parts
        main(["publish", "--merge", str(a), str(b), "--out", str(tmp_path)])
    assert f"--out {tmp_path} holds the part {a}" in capsys.readouterr().err
    assert (a / "summary.md").is_file()


def test_read_runs_of_a_merged_folder(whole, tmp_path):
    a = cut(whole, tmp_path / "part-a", (0,))
    b = cut(whole, tmp_path / "part-b", (2,))
    merge([a, b], tmp_path / "merged")
    runs = read_runs(tmp_path / "merged" / "remedies")
    assert sorted(runs["seed"].unique()) == [0, 2]
    assert runs["run_dir"].is_unique


def test_figures_the_stored_restriction_cannot_draw_are_left_out_not_drawn_from_a_part(tmp_path):
    """diagnose stores the rows its table reads, not its figures': a merge draws none of
    them (they would show a part of their data), and says why."""
    from tests.synthetic_runs import write_diagnose

    root = tmp_path / "results"
    records = write_diagnose(tmp_path / "runs")
    aggregate = root / "diagnose" / "aggregate"
    write_aggregate([r["run_dir"] for r in records], aggregate)
    write_tables("diagnose", aggregate, root / "diagnose" / "tables")
    entry = experiments.experiment("diagnose")
    (root / "diagnose" / "figures").mkdir()
    for stem in entry.figure_stems:
        for fmt in ("pdf", "png"):
            (root / "diagnose" / "figures" / f"{stem}.{fmt}").write_bytes(b"placeholder")
    publish(root, tmp_path / "published")
    merge([tmp_path / "published"], tmp_path / "published")
    files = {p.name for p in (tmp_path / "published" / "diagnose").iterdir()}
    assert not {f"{stem}.png" for stem in entry.figure_stems} & files
    summary = (tmp_path / "published" / "summary.md").read_text()
    assert ("Figure `layerstats_by_layer` is not in this folder: it is drawn from `runs` and `layerstats`, "
            "and the stored `layerstats` holds only the rows the tables read") in summary
