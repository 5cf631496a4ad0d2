"""`lipnorm bench`: the compared models compute the same function, and `--quick` writes
well-formed outputs. Timings are measured, never asserted."""

from __future__ import annotations

import dataclasses

import dgl
import pandas as pd
import pytest
import torch

from lipnorm import bench
from lipnorm.bench.report import environment
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


@pytest.mark.parametrize(("name", "model", "variant"),
                         [("gat-lip-official", "gat-lip", "official"), ("gt", "gt", "paper")])
def test_our_bench_models_are_the_models_lipnorm_trains(small_graph, name, model, variant):
    from lipnorm.nn.models.build import build_model
    from lipnorm.settings.model_config import ModelConfig

    in_feats = small_graph.features.shape[1]
    measured = bench.build_bench_model(name, in_feats, 3, 3, 4, 6).eval()
    torch.manual_seed(0)
    trained = build_model(ModelConfig(model=model, in_feats=in_feats, num_classes=3, depth=3, heads=4,
                                      hidden=6, variant=variant).resolved()).eval()
    assert type(measured) is type(trained)
    torch.testing.assert_close(measured(small_graph.graph, small_graph.features),
                               trained(small_graph.graph, small_graph.features), rtol=0, atol=0)


@pytest.mark.parametrize("other", ["dgl-gat", "pyg-gat"])
def test_competitor_models_are_ours_with_their_layers(small_graph, other):
    """Our model with a competitor's attention layers, given our weights, computes our logits."""
    impl = bench.implementations()[other]
    in_feats = small_graph.features.shape[1]
    ours = bench.build_bench_model("gat", in_feats, 3, 2, 4, 6).eval()
    theirs = bench.build_bench_model(other, in_feats, 3, 2, 4, 6).eval()
    theirs.input_fc.load_state_dict(ours.input_fc.state_dict())
    theirs.output_fc.load_state_dict(ours.output_fc.state_dict())
    for mine, layer in zip(ours.layers, theirs.layers):
        _copy_gat_weights(mine, layer.layer if impl.edge_index else layer)
    torch.testing.assert_close(theirs(small_graph.structure(impl), small_graph.features),
                               ours(small_graph.graph, small_graph.features), rtol=1e-5, atol=1e-5)


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


@pytest.mark.parametrize(("family", "projections"), [("gat", 1), ("gt", 4)])
def test_floor_gemms_are_the_matrix_products_of_a_training_step(family, projections):
    case = bench.Case(family, "csbm", 100, 1000, 3, 4, 6)
    gemms = bench.floor_gemms(case, in_feats=32, num_classes=5)
    layer = [(100, 24, 24, False), (100, 24, 24, False), (24, 100, 24, True)]  # X.W, dY.W^T, X^T.dY
    assert gemms == (
        [(100, 32, 24, False), (32, 100, 24, True)]  # input Linear: no gradient for the features
        + layer * (3 * projections)
        + [(100, 24, 5, False), (100, 5, 24, False), (24, 100, 5, True)]
    )


def test_gemm_floor_calls_torch_mm_with_those_shapes(monkeypatch):
    gemms = [(7, 3, 5, False), (3, 7, 5, True), (7, 3, 5, False)]
    step = bench.gemm_floor(gemms)
    calls = []
    real_mm = torch.mm

    def mm(left, right):
        calls.append((left.shape[0], left.shape[1], right.shape[1], not left.is_contiguous()))
        return real_mm(left, right)

    monkeypatch.setattr(torch, "mm", mm)
    step()
    assert calls == gemms


def _frame(rows):
    return pd.DataFrame(
        [{"family": "gat", "dataset": dataset, "nodes": 10, "edges": 100, "depth": depth, "heads": 8,
          "hidden": 64, "implementation": impl, "metric": metric, "round": r, "value": value}
         for dataset, depth, impl, metric, r, value in rows],
        columns=bench.COLUMNS,
    )


def test_floor_table_divides_the_median_step_by_the_median_floor_of_the_same_case():
    rows = []
    for dataset, depth in (("cora", 10), ("csbm", 2)):
        for r, (floor, gat, lip) in enumerate([(1.0, 1.2, 1.5), (2.0, 2.0, 2.2), (4.0, 5.0, 9.0)]):
            rows += [(dataset, depth, bench.FLOOR, "floor_seconds", r, floor),
                     (dataset, depth, "gat", "step_seconds", r, gat),
                     (dataset, depth, "gat-lip", "step_seconds", r, lip)]
    table = bench.floor_table(_frame(rows)).set_index(["dataset", "implementation"])
    assert table.loc[("cora", "gat"), "ratio"] == pytest.approx(2.0 / 2.0)
    assert table.loc[("cora", "gat-lip"), "ratio"] == pytest.approx(2.2 / 2.0)
    assert table.loc[("cora", "gat-lip"), "floor_ms"] == pytest.approx(2000.0)
    assert table.loc[("cora", "gat-lip"), "rounds"] == 3
    # The target belongs to Cora, depth 10, 8 x 64 only.
    assert table.loc[("cora", "gat"), "target"] == bench.FLOOR_TARGET == 1.4
    assert table.loc[("cora", "gat"), "met"] is True
    assert pd.isna(table.loc[("csbm", "gat"), "target"]) and pd.isna(table.loc[("csbm", "gat"), "met"])
    ratios = pd.DataFrame(bench.floor_rows(_frame(rows)))
    assert list(ratios.columns) == bench.COLUMNS
    assert set(ratios["metric"]) == {"step_over_floor"} and len(ratios) == 4


def test_bench_flush_denormal_is_passed_on_and_recorded(monkeypatch):
    seen = {}
    monkeypatch.setattr(bench, "run_benchmark", lambda *args, **kwargs: seen.update(kwargs) or [])
    assert main(["bench", "--quick", "--flush-denormal", "--out", "unused"]) == 0
    assert seen["flush_denormal"] is True
    assert main(["bench", "--quick", "--out", "unused"]) == 0
    assert seen["flush_denormal"] is False
    env = environment(1, "lipnorm bench --flush-denormal", (0.0,) * 3, (0.0,) * 3, flush_denormal=True)
    assert "- flush denormal: on" in env


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
    times = bench.layer_times(frame)
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
    # The GEMM floor is timed in the same rounds as the steps of its case.
    floor = frame[frame["metric"] == "floor_seconds"]
    assert set(floor["implementation"]) == {bench.FLOOR} and (floor["value"] > 0).all()
    for family, of_family in times.groupby("family"):
        floor_rounds = sorted(floor.loc[floor["family"] == family, "round"])
        assert floor_rounds == sorted(of_family.loc[of_family["implementation"] == of_family["implementation"].iloc[0], "round"])
    over = frame[frame["metric"] == "step_over_floor"]
    assert set(over["implementation"]) == set(bench.implementations())
    assert (over["value"] > 1).all()  # a training step costs more than its matrix products
    epoch = frame[frame["family"] == "epoch"]
    assert set(epoch["metric"]) == {f"{part}_seconds" for part in bench.EPOCH_PARTS}
    assert set(epoch["implementation"]) == {"gat-lip"} and (epoch["value"] > 0).all()
    assert len(epoch) == len(bench.EPOCH_PARTS) * bench.QUICK.epoch_rounds

    summary = (out / "summary.md").read_text()
    for ratio in ["gat-lip / gat", "gat-lip-official / gat", "gat / dgl-gat", "gat-lip / pyg-gat",
                  "gt-lip / gt", "gt / pyg-transformer"]:
        assert f"| {ratio} |" in summary, ratio
    assert "## Gradient-norm logging overhead" in summary
    assert "--threads 1" in summary and "- flush denormal: off" in summary
    floor_section = summary.split("## Step time over the GEMM floor")[1].split("\n## ")[0]
    assert "| dataset | nodes | edges | depth | heads | hidden | implementation | step_ms | floor_ms | ratio |" in floor_section
    assert floor_section.count("| csbm | 1000 | 10000 | 2 | 8 | 8 |") == len(bench.implementations())
    epoch_section = summary.split("## Epoch of `lipnorm train` beside its step")[1].split("\n## ")[0]
    assert "| step_ms | epoch_ms (log every 10) | epoch / step |" in epoch_section
    assert "| evaluate / train_forward |" in epoch_section and "| gat-lip |" in epoch_section
    ops = pd.read_csv(out / "profile_gat_8x8_ops.csv")
    # LipschitzNorm's one extra neighbour reduce shows up as a max SpMM.
    assert ops["calls_gat_lip"].sum() > ops["calls_gat"].sum()
    assert (out / "epoch_time_vs_edges.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
