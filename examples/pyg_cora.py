"""GATs built from `lipnorm.pyg` layers on Cora, beside lipnorm's DGL path.

Cora is loaded by lipnorm's loader (`lipnorm.load_dataset`, the features row-normalised
as DGL's loader does, self-loops in the graph) and converted to a PyG `Data`
(`to_pyg`). Two networks are trained, each with `norm=None` and `norm="lip"`, for every
seed; each run reports the test accuracy at the epoch of best validation accuracy
(ties: the earlier epoch), as `lipnorm train`'s protocol "best-val":

- **classic**: Velickovic et al.'s 2-layer GAT (lipnorm's `ClassicGAT`): 8 heads x 8
  hidden, ELU, dropout 0.6 on the inputs of both layers and on the attention, one output
  head; Adam lr 0.005, weight decay 5e-4, 200 epochs. Each path keeps its own layers'
  initialisation (PyG's glorot here, lipnorm.nn.GATConv's on the DGL path).
- **deep**: the deep-GNN literature's GAT (lipnorm's `LiteratureGAT`, `--recipe dgn`):
  `--depth` attention layers of 1 head x 16 (no bias, no Linear layers), dropout 0.6 on
  the inputs of the first and last layers and on the attention, ReLU after every layer
  (the last too), PyG 1.3's attention initialisation; 100 % missing features (the
  feature rows of every node outside the training set erased); Adam lr 0.005, weight
  decay 5e-4. The recipe trains 1000 epochs at any depth; the default here is a short
  version, depth 4 and 300 epochs.

The DGL path is `lipnorm.train.run` (what `lipnorm train` runs) on the same settings and
seeds: model `gat-classic` (norm None only: lipnorm's ClassicGAT has no LipschitzNorm,
so classic norm="lip" has no DGL counterpart) and `gat` / `gat-lip` with recipe "dgn".
Each configuration prints its mean, sd and [min, max] over the seeds per path, whether
each path's mean lies within the other path's seed range [min, max], and the difference
of the means with Welch's t statistic (|t| < 2: no difference the seeds can tell).

    PYTHONPATH=src python examples/pyg_cora.py --mirror /path/to/datasets
    PYTHONPATH=src python examples/pyg_cora.py --mirror ... --seeds 0,1,2 --depth 8 --deep-epochs 1000

One thread by default (`--threads`); the default run (5 seeds, 35 trainings) took 231 s
(2026-12-06) on a shared 2-core machine (load about 2.5).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch_geometric.data import Data

from lipnorm import load_dataset
from lipnorm.data import apply_missing_features, missing_features_mask
from lipnorm.pyg import GATConv

NORMS = (None, "lip")
# The classic GAT's and the "dgn" recipe's settings (lipnorm.settings.recipes).
CLASSIC = dict(heads=8, hidden=8, dropout=0.6, lr=0.005, weight_decay=5e-4)
DEEP = dict(heads=1, hidden=16, dropout=0.6, lr=0.005, weight_decay=5e-4, missing_rate=100.0)


def to_pyg(dataset, features: torch.Tensor | None = None) -> Data:
    """A PyG `Data` of a lipnorm `NodeDataset`: `x` (`features` if given, else the
    dataset's), `edge_index` (source, destination) from the DGL graph's edges, `y` and the
    three split masks."""
    src, dst = dataset.graph.edges()
    return Data(
        x=dataset.features if features is None else features,
        edge_index=torch.stack([src, dst]).long(),
        y=torch.as_tensor(dataset.labels),
        train_mask=torch.as_tensor(dataset.train_mask),
        val_mask=torch.as_tensor(dataset.val_mask),
        test_mask=torch.as_tensor(dataset.test_mask),
        num_nodes=dataset.num_nodes,
    )


class ClassicGAT(torch.nn.Module):
    """The 2-layer GAT from `lipnorm.pyg.GATConv` layers (lipnorm's `ClassicGAT`, depth 2)."""

    def __init__(self, in_channels: int, num_classes: int, norm=None, heads=8, hidden=8, dropout=0.6):
        super().__init__()
        self.dropout = dropout
        self.conv1 = GATConv(in_channels, hidden, heads=heads, dropout=dropout, norm=norm)
        self.conv2 = GATConv(heads * hidden, num_classes, heads=1, concat=False, dropout=dropout, norm=norm)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        x = F.dropout(x, p=self.dropout, training=self.training)
        x = F.elu(self.conv1(x, edge_index))
        x = F.dropout(x, p=self.dropout, training=self.training)
        return self.conv2(x, edge_index)


class DeepGAT(torch.nn.Module):
    """The literature's deep GAT (lipnorm's `LiteratureGAT`, DGN's code) from
    `lipnorm.pyg.GATConv` layers: `depth` layers, no bias, feature dropout on the inputs of
    the first and last layers, ReLU after every layer (the logits too)."""

    def __init__(self, in_channels: int, num_classes: int, depth: int, norm=None, heads=1, hidden=16, dropout=0.6):
        super().__init__()
        self.dropout = dropout
        width = heads * hidden
        self.convs = torch.nn.ModuleList()
        for i in range(depth):
            last = i == depth - 1
            conv = GATConv(
                in_channels if i == 0 else width, num_classes if last else hidden, heads=1 if last else heads,
                dropout=dropout, bias=False, norm=norm,
            )
            # PyG 1.3's initialisation (lipnorm's `pyg13_attention_glorot_`): each attention
            # half uniform on [-b, b], b = sqrt(6 / (H + 2 D)); the projection is PyG's glorot.
            bound = math.sqrt(6.0 / (conv.heads + 2 * conv.out_channels))
            with torch.no_grad():
                conv.att_src.uniform_(-bound, bound)
                conv.att_dst.uniform_(-bound, bound)
            self.convs.append(conv)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        last = len(self.convs) - 1
        for i, conv in enumerate(self.convs):
            if i == 0 or i == last:
                x = F.dropout(x, p=self.dropout, training=self.training)
            x = F.relu(conv(x, edge_index))
        return x


class Result(NamedTuple):
    test: float  # test accuracy at the best validation epoch
    best_epoch: int


def accuracy(logits: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> float:
    return (logits[mask].argmax(1) == y[mask]).float().mean().item()


def train(model: torch.nn.Module, data: Data, *, epochs: int, lr: float, weight_decay: float) -> Result:
    """Full-batch Adam on the training nodes; the test accuracy of the epoch of best
    validation accuracy (ties: the earlier epoch), evaluated every epoch."""
    optimiser = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    best_val, best = -1.0, Result(float("nan"), 0)
    for epoch in range(1, epochs + 1):
        model.train()
        optimiser.zero_grad()
        loss = F.cross_entropy(model(data.x, data.edge_index)[data.train_mask], data.y[data.train_mask])
        loss.backward()
        optimiser.step()
        model.eval()
        with torch.no_grad():
            logits = model(data.x, data.edge_index)
        val = accuracy(logits, data.y, data.val_mask)
        if val > best_val:
            best_val, best = val, Result(accuracy(logits, data.y, data.test_mask), epoch)
    return best


def train_pyg(network: str, norm, dataset, seed: int, args) -> Result:
    """One seed of `network` ("classic" or "deep") built from lipnorm.pyg layers."""
    torch.manual_seed(seed)
    if network == "classic":
        data = to_pyg(dataset)
        model = ClassicGAT(data.num_features, dataset.num_classes, norm=norm)
        settings = CLASSIC
        epochs = args.classic_epochs
    else:
        mask = missing_features_mask(dataset.train_mask.numpy(), DEEP["missing_rate"], seed)
        data = to_pyg(dataset, apply_missing_features(dataset.features, mask))
        model = DeepGAT(data.num_features, dataset.num_classes, args.depth, norm=norm)
        settings = DEEP
        epochs = args.deep_epochs
    return train(model, data, epochs=epochs, lr=settings["lr"], weight_decay=settings["weight_decay"])


def train_dgl(network: str, norm, seed: int, args, scratch: Path) -> Result | None:
    """The same seed through lipnorm's DGL path (`lipnorm.train.run`); None where it has no
    such model (the classic GAT with LipschitzNorm)."""
    from lipnorm.train import TrainConfig, run

    common = dict(
        dataset=args.dataset, seed=seed, data_root=args.root, mirror=args.mirror, threads=args.threads,
        layer_stats=False, save_every=10**6,
    )
    if network == "classic":
        if norm is not None:
            return None
        config = TrainConfig(model="gat-classic", epochs=args.classic_epochs, **common)
    else:
        config = TrainConfig(
            model="gat" if norm is None else "gat-lip", recipe="dgn", depth=args.depth,
            missing_rate=DEEP["missing_rate"], epochs=args.deep_epochs, **common,
        )
    out = scratch / f"{network}-{norm}-{seed}"
    summary = run(config, out)
    if summary is None:  # read what the run wrote
        summary = json.loads((out / "summary.json").read_text())
    return Result(float(summary["test_metric"]), int(summary["best_epoch"]))


def spread(values: list[float]) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"mean {statistics.fmean(values):.4f}  sd {sd:.4f}  [{min(values):.4f}, {max(values):.4f}]"


def within(value: float, values: list[float]) -> str:
    return "yes" if min(values) <= value <= max(values) else "no"


def welch_t(a: list[float], b: list[float]) -> str:
    """Welch's t statistic of the difference of the means ("n/a" below two seeds each)."""
    if len(a) < 2 or len(b) < 2:
        return "n/a"
    error = math.sqrt(statistics.variance(a) / len(a) + statistics.variance(b) / len(b))
    difference = statistics.fmean(a) - statistics.fmean(b)
    return f"{difference / error:+.2f}" if error > 0 else ("+0.00" if difference == 0 else "inf")


def parse_seeds(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="cora")
    parser.add_argument("--root", default="resources/datasets")
    parser.add_argument("--mirror", default=None, help="read-only dataset mirror (as `lipnorm data fetch`)")
    parser.add_argument("--seeds", type=parse_seeds, default=[0, 1, 2, 3, 4], help="comma-separated, e.g. 0,1,2")
    parser.add_argument("--networks", default="classic,deep", help="classic, deep or both (comma-separated)")
    parser.add_argument("--classic-epochs", type=int, default=200)
    parser.add_argument("--depth", type=int, default=4, help="attention layers of the deep GAT")
    parser.add_argument("--deep-epochs", type=int, default=300)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-dgl", action="store_true", help="train the lipnorm.pyg models only")
    args = parser.parse_args(argv)
    networks = [name.strip() for name in args.networks.split(",") if name.strip()]
    unknown = set(networks) - {"classic", "deep"}
    if unknown or not args.seeds:
        parser.error(f"unknown network(s) {sorted(unknown)}" if unknown else "no seeds")
    torch.set_num_threads(args.threads)
    dataset = load_dataset(args.dataset, root=args.root, mirror=args.mirror)
    print(
        f"{args.dataset}: {dataset.num_nodes} nodes, {dataset.graph.num_edges()} edges (self-loops included), "
        f"{dataset.num_classes} classes; seeds {','.join(map(str, args.seeds))}; "
        f"classic {args.classic_epochs} epochs, deep depth {args.depth} {args.deep_epochs} epochs"
    )
    results: dict[tuple[str, str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="pyg_cora-") as scratch:
        for network in networks:
            for norm in NORMS:
                label = f"norm={norm or 'none'}"
                for seed in args.seeds:
                    paths = {"pyg": train_pyg(network, norm, dataset, seed, args)}
                    if not args.no_dgl:
                        paths["dgl"] = train_dgl(network, norm, seed, args, Path(scratch))
                    for path, result in paths.items():
                        if result is None:
                            continue
                        results.setdefault((network, label, path), []).append(result.test)
                        print(
                            f"{network:7s} {label:9s} {path}  seed {seed}  test {result.test:.4f}  "
                            f"(best val epoch {result.best_epoch})",
                            flush=True,
                        )
    print("summary (test accuracy at the best validation epoch, over seeds):")
    for network in networks:
        for norm in NORMS:
            label = f"norm={norm or 'none'}"
            pyg, dgl = results.get((network, label, "pyg")), results.get((network, label, "dgl"))
            for path, values in (("pyg", pyg), ("dgl", dgl)):
                if values:
                    print(f"{network:7s} {label:9s} {path}  {spread(values)}")
            if pyg and dgl:
                print(
                    f"{network:7s} {label:9s} pyg mean within dgl range: {within(statistics.fmean(pyg), dgl)}; "
                    f"dgl mean within pyg range: {within(statistics.fmean(dgl), pyg)}; "
                    f"pyg - dgl {statistics.fmean(pyg) - statistics.fmean(dgl):+.4f} (Welch t {welch_t(pyg, dgl)})"
                )
            elif pyg and not args.no_dgl:
                print(f"{network:7s} {label:9s} dgl: no counterpart (lipnorm's ClassicGAT has no LipschitzNorm)")
    return results


if __name__ == "__main__":
    main()
