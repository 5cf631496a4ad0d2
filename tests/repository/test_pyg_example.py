"""examples/pyg_cora.py: the classic and the deep GAT from lipnorm.pyg layers on Cora,
beside lipnorm's DGL path (run here with a couple of epochs; the figures of its default
run are in docs/pyg.md)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import torch

from lipnorm import ModelConfig, build_model

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pyg_cora.py"
SEED_LINE = re.compile(
    r"^(classic|deep) +norm=(none|lip) +(pyg|dgl)  seed (\d+)  test (\d\.\d{4})  \(best val epoch (\d+)\)$"
)
SUMMARY_LINE = re.compile(
    r"^(classic|deep) +norm=(none|lip) +(pyg|dgl)  mean (\d\.\d{4})  sd (\d\.\d{4})  \[(\d\.\d{4}), (\d\.\d{4})\]$"
)
WITHIN_LINE = re.compile(
    r"^(classic|deep) +norm=(none|lip) +pyg mean within dgl range: (yes|no); dgl mean within pyg range: (yes|no); "
    r"pyg - dgl ([+-]\d\.\d{4}) \(Welch t ([+-]\d+\.\d\d|inf|n/a)\)$"
)


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("pyg_cora", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def cora(offline_loader):
    return offline_loader("cora")


def count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_to_pyg_keeps_the_graph_features_labels_and_splits(example, cora):
    data = example.to_pyg(cora)
    src, dst = cora.graph.edges()
    assert data.num_nodes == cora.num_nodes == 2708 and data.edge_index.shape == (2, cora.graph.num_edges())
    assert torch.equal(data.edge_index[0], src) and torch.equal(data.edge_index[1], dst)
    assert data.x is cora.features and torch.equal(data.y, cora.labels)
    for split in ("train", "val", "test"):
        assert torch.equal(getattr(data, f"{split}_mask"), getattr(cora, f"{split}_mask"))
    erased = torch.zeros_like(cora.features)
    assert example.to_pyg(cora, erased).x is erased


@pytest.mark.parametrize("norm", [None, "lip"])
def test_the_networks_have_lipnorms_shapes(example, cora, norm):
    """The same parameter count as lipnorm's ClassicGAT and LiteratureGAT (recipe dgn)."""
    in_feats, classes = cora.features.shape[1], cora.num_classes
    classic = example.ClassicGAT(in_feats, classes, norm=norm)
    reference = build_model(ModelConfig(model="gat-classic", in_feats=in_feats, num_classes=classes))
    assert count(classic) == count(reference)
    for depth in (2, 4):
        deep = example.DeepGAT(in_feats, classes, depth, norm=norm)
        literature = build_model(ModelConfig(
            model="gat" if norm is None else "gat-lip", recipe="dgn", depth=depth, heads=1, hidden=16,
            in_feats=in_feats, num_classes=classes,
        ))
        assert count(deep) == count(literature)
        assert all(conv.norm == norm and conv.bias is None for conv in deep.convs)
        assert deep.convs[-1].heads == 1 and deep.convs[-1].out_channels == classes


def parse(out: str) -> tuple[list[tuple], list[tuple], list[tuple]]:
    seeds, summaries, within = [], [], []
    for line in out.splitlines()[1:]:
        if line.startswith("summary"):
            continue
        for pattern, rows in ((SEED_LINE, seeds), (SUMMARY_LINE, summaries), (WITHIN_LINE, within)):
            match = pattern.match(line)
            if match:
                rows.append(match.groups())
                break
        else:
            assert "dgl: no counterpart" in line, line
    return seeds, summaries, within


def test_main_prints_each_seed_and_compares_with_the_dgl_path(example, data_mirror, planetoid_root, capsys):
    argv = [
        "--root", str(planetoid_root), "--mirror", str(data_mirror), "--seeds", "0,1",
        "--classic-epochs", "2", "--depth", "3", "--deep-epochs", "2",
    ]
    results = example.main(argv)
    out = capsys.readouterr().out
    assert out.startswith("cora: 2708 nodes, 13264 edges")
    seeds, summaries, within = parse(out)
    # Per seed: pyg and dgl for every configuration but the classic GAT with LipschitzNorm,
    # which lipnorm's DGL path does not have.
    expected = {
        (network, norm, path) for network in ("classic", "deep") for norm in ("none", "lip") for path in ("pyg", "dgl")
    } - {("classic", "lip", "dgl")}
    assert {row[:3] for row in seeds} == expected
    assert sorted(int(row[3]) for row in seeds) == [0] * 7 + [1] * 7
    assert all(0.0 <= float(row[4]) <= 1.0 and 1 <= int(row[5]) <= 2 for row in seeds)
    assert {row[:3] for row in summaries} == expected
    for network, norm, path, mean, sd, low, high in summaries:
        values = results[(network, f"norm={norm}", path)]
        assert len(values) == 2 and float(low) <= float(mean) <= float(high)
        assert abs(float(mean) - sum(values) / 2) < 1e-4
    assert {row[:2] for row in within} == {("classic", "none"), ("deep", "none"), ("deep", "lip")}
    for network, norm, *_, difference, t in within:
        pyg, dgl = results[(network, f"norm={norm}", "pyg")], results[(network, f"norm={norm}", "dgl")]
        assert abs(float(difference) - (sum(pyg) - sum(dgl)) / 2) < 1e-4
        assert t == "inf" or float(t) * float(difference) >= 0
    assert "classic norm=lip  dgl: no counterpart" in out


def test_main_without_dgl_trains_the_pyg_models_only(example, data_mirror, planetoid_root, capsys):
    example.main([
        "--root", str(planetoid_root), "--mirror", str(data_mirror), "--seeds", "3", "--networks", "deep",
        "--depth", "2", "--deep-epochs", "2", "--no-dgl",
    ])
    seeds, summaries, within = parse(capsys.readouterr().out)
    assert [row[:4] for row in seeds] == [("deep", "none", "pyg", "3"), ("deep", "lip", "pyg", "3")]
    assert len(summaries) == 2 and within == []
    assert all(row[4] == "0.0000" for row in summaries)  # one seed: sd 0


def test_unknown_networks_are_refused(example):
    with pytest.raises(SystemExit):
        example.main(["--networks", "classic,resnet"])
