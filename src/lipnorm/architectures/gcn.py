"""`gcn`: GCN (Kipf & Welling, ICLR 2017), the non-attention reference architecture: the
deep stack of lipnorm's deep models (`lipnorm.nn.models.deep.DeepNet`) over layers of
`lipnorm.nn.conv.gcn.GCNLayer` (DGL's `GraphConv` with GATConv's constructor and
`(N, H, D)` output), built by `gcn_layer`."""

from __future__ import annotations

from lipnorm.registry.register import register_architecture


def gcn_layer(in_feats: int, out_feats: int, heads: int, *, attention_norm: str, residual: bool, **options):
    """The layer factory of `gcn`: one `GCNLayer` of width `heads * out_feats`; the
    attention options (`alpha`, `variant`, `attn_drop`) have nothing to act on, and
    `attention_norm` is "none" (the architecture has no lip variant). The layer (torch,
    DGL) is imported here, when a model is built."""
    from lipnorm.nn.conv.gcn import GCNLayer

    return GCNLayer(in_feats, out_feats, heads, norm=attention_norm, residual=residual)


# Feature dropout 0.5 as Kipf's, no attention to drop out.
register_architecture(
    "gcn", label="GCN", colour="#000000", layer=gcn_layer, attention=False, dropout=(0.5, 0.0),
)
