"""Sampled mini-batch training of a deep GAT-Lip, as large-graph DGL models are trained.

Each step trains on a batch of training nodes and the blocks (message-flow graphs) that
`dgl.dataloading.NeighborSampler` samples for them: block l holds at most `fanout` in-edges
per destination node of layer l, and `lipnorm.nn.GATConv` takes it as DGL's `GATConv` does
(source features in, destination features = their first rows; LipschitzNorm's neighbour
maxima over each destination's sampled in-edges). Evaluation is layer-wise on the full
graph (DGL's inference pattern): layer l is computed for every node, in batches of
destination nodes with all their in-edges, before layer l + 1, so no node's neighbourhood
is sampled or expanded over more than one hop at a time.

The model is lipnorm's `DeepGAT` (`ModelConfig(model="gat-lip")`): input Linear, `depth`
GATConv(norm="lip") layers with ELU between them, output Linear. Its full-graph forward
and `layerwise_inference` here compute the same numbers (tested). Models with PairNorm
(`*-pairnorm`) are refused: PairNorm centres over the nodes it is given, which in a batch
are not the graph's. A run is reproducible under `--seed` on one thread only: DGL samples
each thread with its own generator.

    PYTHONPATH=src python examples/minibatch_neighbor_sampling.py --dataset cora \\
        --mirror /path/to/datasets --depth 6 --epochs 20

(any dataset of `lipnorm.data.DATASETS` with one label per node; "csbm" is generated.)
"""

from __future__ import annotations

import argparse

import dgl
import numpy as np
import torch
import torch.nn.functional as F

from lipnorm import ModelConfig, build_model, load_dataset


def build_gat_lip(in_feats: int, num_classes: int, **settings) -> torch.nn.Module:
    """lipnorm's deep GAT-Lip (`DeepGAT`, norm="lip"); `settings` of `ModelConfig`
    (depth, heads, hidden, feat_drop, ...)."""
    return build_model(ModelConfig(model="gat-lip", in_feats=in_feats, num_classes=num_classes, **settings))


def forward_blocks(model: torch.nn.Module, blocks: list[dgl.DGLGraph], feat: torch.Tensor) -> torch.Tensor:
    """`DeepGAT`'s forward with attention layer l on block l: logits of the last block's
    destination nodes from the features of the first block's source nodes."""
    if model.pairnorms is not None:
        raise ValueError("PairNorm normalises over the nodes of a batch, not of the graph: use a model without it")
    h = model.input_fc(feat)
    last = len(model.layers) - 1
    for i, (layer, block) in enumerate(zip(model.layers, blocks)):
        h = F.dropout(h, p=model.feat_drop, training=model.training)
        h = layer(block, h).flatten(1)
        if i < last:
            h = F.elu(h)
    return model.output_fc(h)


@torch.no_grad()
def layerwise_inference(model: torch.nn.Module, graph: dgl.DGLGraph, feat: torch.Tensor, batch_size: int) -> torch.Tensor:
    """Logits of every node, one attention layer at a time over the full graph.

    Each layer runs on blocks of `batch_size` destination nodes with all their in-edges
    (`MultiLayerFullNeighborSampler(1)`), for all nodes, before the next layer starts.
    """
    model.eval()
    sampler = dgl.dataloading.MultiLayerFullNeighborSampler(1)
    loader = dgl.dataloading.DataLoader(graph, torch.arange(graph.num_nodes()), sampler, batch_size=batch_size)
    h = model.input_fc(feat)
    last = len(model.layers) - 1
    for i, layer in enumerate(model.layers):
        out = h.new_empty(graph.num_nodes(), layer.num_heads * layer.out_feats)
        for input_nodes, output_nodes, (block,) in loader:
            out[output_nodes] = layer(block, h[input_nodes]).flatten(1)
        h = F.elu(out) if i < last else out
    return model.output_fc(h)


def train(
    model: torch.nn.Module,
    graph: dgl.DGLGraph,
    feat: torch.Tensor,
    labels: torch.Tensor,
    train_nids: torch.Tensor,
    *,
    fanout: int = 10,
    batch_size: int = 256,
    epochs: int = 20,
    lr: float = 5e-3,
    seed: int = 0,
) -> list[float]:
    """Train `model` on sampled blocks; returns the mean training loss of each epoch."""
    # DGL's DataLoader shuffles with NumPy's global generator, samples with DGL's own;
    # dropout draws from torch's.
    np.random.seed(seed)
    dgl.seed(seed)
    torch.manual_seed(seed)
    sampler = dgl.dataloading.NeighborSampler([fanout] * len(model.layers))
    loader = dgl.dataloading.DataLoader(graph, train_nids, sampler, batch_size=batch_size, shuffle=True)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(epochs):
        model.train()
        total, count = 0.0, 0
        for input_nodes, output_nodes, blocks in loader:
            loss = F.cross_entropy(forward_blocks(model, blocks, feat[input_nodes]), labels[output_nodes])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            total, count = total + loss.item() * len(output_nodes), count + len(output_nodes)
        losses.append(total / count)
    return losses


def accuracy(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> float:
    return (logits[mask].argmax(1) == labels[mask]).float().mean().item()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="cora")
    parser.add_argument("--root", default="resources/datasets")
    parser.add_argument("--mirror", default=None, help="read-only dataset mirror (as `lipnorm data fetch`)")
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--fanout", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--lr", type=float, default=5e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    data = load_dataset(args.dataset, root=args.root, mirror=args.mirror)
    if data.multilabel:
        raise SystemExit(f"{args.dataset} is multi-label; this example trains single-label classification")
    torch.manual_seed(args.seed)
    model = build_gat_lip(data.features.shape[1], data.num_classes, depth=args.depth, heads=args.heads, hidden=args.hidden)
    train_nids = torch.nonzero(torch.as_tensor(data.train_mask)).flatten()
    losses = train(
        model, data.graph, data.features, data.labels, train_nids,
        fanout=args.fanout, batch_size=args.batch_size, epochs=args.epochs, lr=args.lr, seed=args.seed,
    )  # fmt: skip
    for epoch, loss in enumerate(losses, start=1):
        print(f"epoch {epoch:3d}  train loss {loss:.4f}")
    logits = layerwise_inference(model, data.graph, data.features, args.batch_size)
    for split in ("train", "val", "test"):
        mask = torch.as_tensor(getattr(data, f"{split}_mask"))
        print(f"{split} accuracy (full graph, layer-wise): {accuracy(logits, data.labels, mask):.4f}")


if __name__ == "__main__":
    main()
