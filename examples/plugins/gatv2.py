"""A lipnorm plugin: DGL's GATv2Conv and SAGEConv (GraphSAGE) as architectures, a layer
normalisation, and a small graph of one's own as a dataset.

Use it by name, with no edit inside lipnorm:

    lipnorm train --plugin examples/plugins/gatv2.py --model gatv2-layernorm --dataset two-communities --depth 4 --epochs 50 --out runs/one
    lipnorm train --plugin examples/plugins/gatv2.py --architecture sage --dataset cora --missing-rate 100 --epochs 20 --out runs/two

or in the workflow config: `plugins: [examples/plugins/gatv2.py]`, and `gatv2`, `sage`,
`gatv2-layernorm`, ... in a grid's `models`, `layernorm` in its `norms`,
`two-communities` in its `datasets`.

torch and dgl are imported where the factories run, so that naming the plugin costs
nothing to commands that only need its names, labels and colours.
"""

from lipnorm.registry import register_architecture, register_dataset, register_norm


def gatv2_layer(in_feats, out_feats, heads, *, attention_norm, residual, attn_drop, **options):
    """One GATv2 layer: (N, heads, out_feats) outputs, (E, heads, 1) attention with
    get_attention=True. It has no LipschitzNorm variant (`attention_norm` is "none")."""
    from dgl.nn import GATv2Conv

    return GATv2Conv(in_feats, out_feats, heads, attn_drop=attn_drop, residual=residual)


def sage_layer(in_feats, out_feats, heads, *, attention_norm, residual, **options):
    """One GraphSAGE layer (mean aggregator, Hamilton et al.) as wide as the attention
    layers' heads x features: (N, heads * out_feats) outputs, no attention."""
    from dgl.nn import SAGEConv

    if residual:
        raise ValueError("the sage architecture has no residual connections; got residual=True")
    return SAGEConv(in_feats, heads * out_feats, "mean")


def layer_norm(width, config):
    """LayerNorm of each node's representation, as a normalisation after each layer:
    forward(graph, h (N, width)) -> (N, width)."""
    from torch import nn

    class GraphLayerNorm(nn.LayerNorm):
        def forward(self, graph, h):
            return super().forward(h)

    return GraphLayerNorm(width)


def two_communities():
    """A planted two-community graph of 60 nodes: features are noisy class indicators,
    20 training, 20 validation and 20 test nodes."""
    import dgl
    import torch

    generator = torch.Generator().manual_seed(0)
    labels = torch.arange(60) % 2
    src, dst = torch.randint(0, 60, (2, 400), generator=generator)
    same = labels[src] == labels[dst]
    keep = same | (torch.rand(400, generator=generator) < 0.1)
    graph = dgl.to_bidirected(dgl.graph((src[keep], dst[keep]), num_nodes=60))
    features = torch.nn.functional.one_hot(labels, 2).float() + 0.8 * torch.randn(60, 2, generator=generator)
    split = torch.arange(60) // 20
    return {
        "graph": graph,
        "features": features,
        "labels": labels,
        "train_mask": split == 0,
        "val_mask": split == 1,
        "test_mask": split == 2,
    }


register_architecture(
    "gatv2", label="GATv2", colour="#56b4e9", layer=gatv2_layer, dropout=(0.6, 0.3),
    # GATv2Conv's attention vector is `attn`; its other parameters (fc_src, fc_dst,
    # res_fc, biases) follow lipnorm's own naming rules.
    parameter_groups={"attn": "attn"},
)
register_architecture(
    "sage", label="GraphSAGE", colour="#000000", layer=sage_layer, attention=False, dropout=(0.5, 0.0),
    # SAGEConv's weights are fc_self and fc_neigh (lipnorm's rules: fc*.weight is "fc").
)
register_norm("layernorm", label="LayerNorm", colour="#fbafe4", lip_colour="#ece133", factory=layer_norm)
register_dataset("two-communities", label="Two communities", colour="#56b4e9", load=two_communities)
