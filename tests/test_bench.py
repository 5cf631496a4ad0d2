"""`lipnorm bench`: the compared models compute the same function, and `--quick` writes
well-formed outputs. Timings are measured, never asserted."""

from __future__ import annotations

import dataclasses

import dgl
import pandas as pd
import pytest
import torch

from lipnorm import bench
from lipnorm.cli import main


@pytest.fixture(scope="module")
def small_graph():
    return bench.load_graph("csbm-2000", "unused", None)


def _copy_gat_weights(ours, other) -> None:
    """Our GATConv's weights into dgl.nn.GATConv or PyG's GATConv."""
    with torch.no_grad():
        if isinstance(other, dgl.nn.GATConv):
            other.fc.weight.copy_(ours.fc.weight)
            other.attn_l.copy_(ours.attn_l)
            other.attn_r.copy_(ours.attn_r)
        else:
            other.lin.weight.copy_(ours.fc.weight)
            other.att_src.copy_(ours.attn_l)
            other.att_dst.copy_(ours.attn_r)
        other.bias.copy_(torch.randn_like(other.bias))
        ours.bias.copy_(other.bias)


@pytest.mark.parametrize("other", ["dgl-gat", "pyg-gat"])
def test_gat_implementations_compute_the_same_layer(small_graph, other):
    """Same weights, same output: the timings compare equal work (PyG does not add a
    second self-loop, and its edge index has DGL's direction)."""
    impls = bench.implementations()
    ours = impls["gat"].make(12, 5, 3, 0.0)
    theirs = impls[other].make(12, 5, 3, 0.0)
    _copy_gat_weights(ours, theirs.layer if impls[other].edge_index else theirs)
    feat = torch.randn(small_graph.nodes, 12)
    expected = ours(small_graph.graph, feat).flatten(1)
    got = theirs(small_graph.structure(impls[other]), feat).flatten(1)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_gt_matches_pyg_transformer(small_graph):
    impls = bench.implementations()
    ours = impls["gt"].make(12, 5, 3, 0.0)
    theirs = impls["pyg-transformer"].make(12, 5, 3, 0.0).layer
    with torch.no_grad():
        for mine, pyg in ((ours.fc_q, theirs.lin_query), (ours.fc_k, theirs.lin_key),
                          (ours.fc_v, theirs.lin_value), (ours.fc_skip, theirs.lin_skip)):
            pyg.weight.copy_(mine.weight)
            pyg.bias.copy_(mine.bias)
    feat = torch.randn(small_graph.nodes, 12)
    torch.testing.assert_close(
        theirs(feat, small_graph.edge_index), ours(small_graph.graph, feat).flatten(1), rtol=1e-5, atol=1e-5
    )


def test_bench_models_share_parameter_counts(small_graph):
    """The deep wrapper is the same for every implementation of a family."""
    sizes = {
        name: sum(p.numel() for p in bench.build_bench_model(name, 32, 3, 3, 4, 6).parameters())
        for name in bench.implementations()
    }
    assert sizes["gat"] == sizes["gat-lip"] == sizes["gat-lip-official"] == sizes["dgl-gat"] == sizes["pyg-gat"]
    assert sizes["gt"] == sizes["gt-lip"] == sizes["gt-lip-official"] == sizes["pyg-transformer"]


def test_saved_tensor_bytes_counts_each_storage_once():
    weight = torch.randn(4, 4, requires_grad=True)
    feat = torch.randn(10, 4, requires_grad=True)

    def layer(_, x):
        y = x @ weight  # saves x (excluded: the input) and weight
        return y * y  # saves y twice: one storage

    assert bench.saved_tensor_bytes(layer, None, feat) == (16 + 40) * 4


def test_interleaved_rounds_rotate_the_order():
    calls = []
    steps = {name: (lambda n=name: calls.append(n)) for name in "abc"}
    plan = dataclasses.replace(bench.QUICK, warmup_rounds=1)
    timed = list(bench.interleaved_rounds(steps, plan, rounds=3))
    assert calls[:3] == ["a", "b", "c"]  # warm-up
    assert [name for _, name, _ in timed] == list("abc" "bca" "cab")
    assert [r for r, _, _ in timed] == [0] * 3 + [1] * 3 + [2] * 3


@pytest.mark.parametrize("spec", ["csbm", "csbm-50", "pubmed", "csbm-1e4"])
def test_parse_dataset_rejects_unknown_specs(spec):
    with pytest.raises(ValueError, match=f"unknown benchmark dataset '{spec}'.*allowed: cora, csbm-<edges>"):
        bench.parse_dataset(spec)


def test_bench_threads_must_be_positive(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "--quick", "--threads", "0", "--out", "unused"])
    assert exit_info.value.code == 2
    assert "threads must be >= 1, got 0" in capsys.readouterr().err


@pytest.mark.slow
def test_bench_quick_writes_well_formed_outputs(tmp_path, capsys):
    out = tmp_path / "bench"
    assert main(["bench", "--quick", "--threads", "1", "--out", str(out)]) == 0
    printed = capsys.readouterr().out.split()
    expected = ["measurements.csv", "summary.md", "epoch_time_vs_edges.pdf", "epoch_time_vs_edges.png",
                "profile_gat_8x8.txt", "profile_gat_8x8_ops.csv"]
    assert printed == [str(out / name) for name in expected]
    for name in expected:
        assert (out / name).stat().st_size > 0, name

    frame = pd.read_csv(out / "measurements.csv")
    assert list(frame.columns) == bench.COLUMNS
    times = frame[(frame["metric"] == "step_seconds") & (frame["family"] != "gradlog")]
    assert set(times["implementation"]) == set(bench.implementations())
    assert (times["value"] > 0).all()
    assert set(times["edges"]) == {10_000} and set(times["nodes"]) == {1_000}
    # Within a case, every implementation has the same rounds (interleaved), at least
    # min_rounds of them; cases stop on their own clock, so families may differ.
    for family, of_family in times.groupby("family"):
        rounds = of_family.groupby("implementation")["round"].apply(sorted)
        assert len({tuple(r) for r in rounds}) == 1, (family, rounds)
        assert len(rounds.iloc[0]) >= bench.QUICK.min_rounds
    memory = frame[frame["metric"].isin(["peak_rss_mb", "layer_saved_mb"])]
    assert len(memory) == 2 * len(bench.implementations()) and (memory["value"] > 0).all()
    gradlog = frame[frame["family"] == "gradlog"]
    assert set(gradlog["implementation"]) == {"logged", "unlogged"}
    assert len(gradlog) == 2 * bench.QUICK.gradlog_rounds

    summary = (out / "summary.md").read_text()
    for ratio in ["gat-lip / gat", "gat-lip-official / gat", "gat / dgl-gat", "gat-lip / pyg-gat",
                  "gt-lip / gt", "gt / pyg-transformer"]:
        assert f"| {ratio} |" in summary, ratio
    assert "## Gradient-norm logging overhead" in summary
    assert "--threads 1" in summary
    ops = pd.read_csv(out / "profile_gat_8x8_ops.csv")
    # LipschitzNorm's one extra neighbour reduce shows up as a max SpMM.
    assert ops["calls_gat_lip"].sum() > ops["calls_gat"].sum()
    assert (out / "epoch_time_vs_edges.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
