"""S seeds of SNR's GAT (`lipnorm.nn.models.snr.SNRGAT`, the "snr" recipe's) trained as one
network, a seed batch, as `lipnorm.nn.models.seed_batch.SeedBatchedGAT` holds the literature
GAT's, from the same parts: seed s's head h is head ``s * H + h`` of one attention layer
(`_SeedGATConv`, its bias row s of a batched one), its input and output Linears row s of
batched weights, its dropout masks drawn from its own generator (`seed_dropout`) in the
order and shapes its separate run draws them from torch's global one: the input's
``(N, F)`` first, then each attention layer's input ``(N, hidden)`` and, where
`attn_drop` > 0, that layer's attention. Residual and ELU sit where `SNRGAT` puts them.

The input Linear, where the features are sparse (bag-of-words rows, the evaluation nodes'
erased: on Cora 1 % of the entries), is taken on their non-zero entries alone
(`_SeedLinear.entries`, one sparse product): each seed's dropout mask is still drawn
whole, as its separate run draws it, and read at the entries; the product, which a
separate run takes dense (a third of its epoch on Cora), is then K S hidden
multiplications for K entries.

No operation mixes the seeds' values; the numbers equal the separate networks' to float
rounding (the batched products sum in their own order). LipschitzNorm's "official"
variant (one norm over all heads) is not batched (`why_not_seed_batched`).
"""

from __future__ import annotations

from typing import Sequence

import dgl
import torch
import torch.nn.functional as F
from torch import nn

from lipnorm.kernels import grouped_linear
from lipnorm.nn.models.seed_batch import Index, SeedBatchedNet, _kept_rows, _SeedGATConv, _WhileUnchanged, seed_dropout
from lipnorm.nn.models.seed_batch import why_not_seed_batched
from lipnorm.nn.models.snr import SNRGAT

__all__ = ["SeedBatchedSNR"]

# Features of at most this fraction of non-zero entries are projected on those entries.
SPARSE_INPUT = 0.125


def _nonzero_entries(feat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The positions `(rows, columns)` of `feat`'s non-zero entries (any seed's, for
    `(S, N, F)`), None where they are more than `SPARSE_INPUT` of them."""
    nonzero = feat != 0
    if feat.dim() == 3:
        nonzero = nonzero.any(dim=0)
    if nonzero.sum().item() > SPARSE_INPUT * nonzero.numel():
        return None
    return torch.nonzero(nonzero, as_tuple=True)


class _SeedLinear(nn.Module):
    """S `nn.Linear`s of one shape: `weight` `(S, O, I)`, `bias` `(S, O)`, seed s's row s."""

    def __init__(self, linears: Sequence[nn.Linear]):
        super().__init__()
        with torch.no_grad():
            self.weight = nn.Parameter(torch.stack([linear.weight for linear in linears]).clone())
            self.bias = nn.Parameter(torch.stack([linear.bias for linear in linears]).clone())

    def seed_major(self, x: torch.Tensor) -> torch.Tensor:
        """`(S, N, I)` -> `(S, N, O)`: each seed's input by its own matrix."""
        return torch.baddbmm(self.bias.unsqueeze(1), x, self.weight.transpose(1, 2))

    def shared(self, x: torch.Tensor) -> torch.Tensor:
        """`(N, I)` shared by the seeds -> node-major `(N, S, O)`: one product."""
        return F.linear(x, self.weight.flatten(0, 1), self.bias.flatten()).view(x.shape[0], *self.bias.shape)

    def entries(self, rows: torch.Tensor, columns: torch.Tensor, values: torch.Tensor, num_nodes: int) -> torch.Tensor:
        """`(N, S, O)` of inputs given by their non-zero entries: entry k is node `rows[k]`'s
        feature `columns[k]` (ascending, row-major), seed s's value `values[s, k]`. One sparse
        product: the seeds' inputs as the blocks of a block-diagonal `(S N, S F)` matrix
        times their weights stacked `(S F, O)` (no `(K, S, O)` temporary)."""
        seeds, outputs, features = self.weight.shape
        seed = torch.arange(seeds, device=rows.device).repeat_interleave(len(rows))
        indices = torch.stack([seed * num_nodes + rows.repeat(seeds), seed * features + columns.repeat(seeds)])
        inputs = torch.sparse_coo_tensor(
            indices, values.reshape(-1), (seeds * num_nodes, seeds * features), is_coalesced=True  # sorted, unique
        )
        out = torch.sparse.mm(inputs, self.weight.transpose(1, 2).reshape(seeds * features, outputs))
        return out.view(seeds, num_nodes, outputs).transpose(0, 1) + self.bias

    def node_major(self, x: torch.Tensor) -> torch.Tensor:
        """`(N, S, I)` -> `(N, S, O)`."""
        return grouped_linear(x, self.weight) + self.bias

    def seed_views(self, seed: int) -> dict[str, tuple[torch.Tensor, Index]]:
        return {"weight": (self.weight, seed), "bias": (self.bias, seed)}


class SeedBatchedSNR(SeedBatchedNet):
    """S `SNRGAT`s of one configuration (different seeds) as one network.

    `forward(graph, feat, kept=None, layer_outputs=None)` takes the features `(N, F)`
    shared by the seeds, or `(S, N, F)`, and returns the logits `(S, N, C)`, seed s's equal
    to `models[s](graph, feat)` to float rounding, in training mode too when seed s's
    generator (`set_generators`) is in the state torch's global generator has before that
    forward; `kept` and `layer_outputs` as `SeedBatchedGAT`'s (what `SeedBatch` uses).
    """

    def __init__(self, models: Sequence[SNRGAT]):
        super().__init__()
        if not models:
            raise ValueError("SeedBatchedSNR needs at least one model, got none")
        for model in models:
            reason = why_not_seed_batched(model) if isinstance(model, SNRGAT) else (
                f"{type(model).__name__} is not SNR's GAT (recipe snr)"
            )
            if reason is not None:
                raise ValueError(f"cannot batch these seeds: {reason}")
        shapes = {tuple((name, tuple(p.shape)) for name, p in model.state_dict().items()) for model in models}
        first = models[0]
        if len(shapes) != 1 or len({(model.feat_drop, model.residual) for model in models}) != 1:
            raise ValueError("cannot batch these seeds: their networks differ in shape (one configuration only)")
        self.seeds = len(models)
        self.feat_drop = first.feat_drop
        self.residual = first.residual
        self.heads = first.layers[0].num_heads if len(first.layers) else 1
        self.generators: list[torch.Generator] = [torch.Generator() for _ in models]
        self.input_fc = _SeedLinear([model.input_fc for model in models])
        # GATConv's constructor draws initial weights that are then replaced: not from
        # the global stream, which the caller's runs go on drawing from.
        kept_rows = _WhileUnchanged(_kept_rows)
        with torch.random.fork_rng(devices=[]):
            self.layers = nn.ModuleList(
                _SeedGATConv([model.layers[i] for model in models], self.generators, kept_rows)
                for i in range(len(first.layers))
            )
        self.output_fc = _SeedLinear([model.output_fc for model in models])
        self._entries = _WhileUnchanged(_nonzero_entries)  # found once per features tensor

    def set_generators(self, states: Sequence[torch.Tensor]) -> None:
        """Put seed s's random stream in `states[s]` (a `torch.Generator.get_state()`)."""
        if len(states) != self.seeds:
            raise ValueError(f"got {len(states)} generator states for {self.seeds} seeds")
        for generator, state in zip(self.generators, states):
            generator.set_state(state)

    def _input(self, feat: torch.Tensor) -> torch.Tensor:
        """The input Linear's ELU'd output `(N, S, hidden)`, node-major; in training of
        each seed's input dropped out by its mask `(N, F)`, as `F.dropout` draws it."""
        dropout = self.training and self.feat_drop > 0
        entries = self._entries(feat)
        if entries is not None:
            rows, columns = entries
            values = feat[..., rows, columns]  # (K,) or (S, K)
            values = values.expand(self.seeds, -1) if values.dim() == 1 else values
            if dropout:
                keep = 1 - self.feat_drop
                shape = feat.shape[-2:]
                masks = [
                    torch.empty(shape, dtype=feat.dtype, device=feat.device).bernoulli_(keep, generator=generator)[rows, columns]
                    for generator in self.generators
                ]
                values = values * torch.stack(masks).div_(keep)  # F.dropout's x * (mask / (1 - p)), entry by entry
            return F.elu(self.input_fc.entries(rows, columns, values, feat.shape[-2]).contiguous())
        if dropout:
            seeds_feat = feat if feat.dim() == 3 else feat.expand(self.seeds, *feat.shape)
            h = self.input_fc.seed_major(seed_dropout(seeds_feat, self.feat_drop, self.generators, dim=0))
            h = h.transpose(0, 1)
        elif feat.dim() == 2:
            h = self.input_fc.shared(feat)
        else:
            h = self.input_fc.seed_major(feat).transpose(0, 1)
        return F.elu(h.contiguous())

    def forward(
        self, graph: dgl.DGLGraph, feat: torch.Tensor, kept: torch.Tensor | None = None, layer_outputs: list | None = None
    ) -> torch.Tensor:
        """`kept` `(E, S)` bool: the edges each seed's DropEdge kept this step (None: all).

        `layer_outputs`, a list: each attention layer appends its output `(N, S*H, D)` and
        attention `(E, S*H, 1)` (seed s: heads ``s*H .. (s+1)*H - 1``), what an `SNRGAT`'s
        layer returns with ``get_attention=True``, for the layer statistics.
        """
        if feat.dim() == 3 and feat.shape[0] != self.seeds:
            raise ValueError(f"feat has shape {tuple(feat.shape)}; expected (N, F) or (S, N, F) with S = {self.seeds}")
        if kept is not None and (tuple(kept.shape) != (graph.num_edges(), self.seeds) or kept.dtype != torch.bool):
            raise ValueError(
                f"kept is a {kept.dtype} tensor of shape {tuple(kept.shape)}; expected bool (E, S) = "
                f"({graph.num_edges()}, {self.seeds})"
            )
        h = self._input(feat)  # (N, S, hidden)
        nodes = h.shape[0]
        for i, layer in enumerate(self.layers):
            dropped = seed_dropout(h, self.feat_drop, self.generators, dim=1) if self.training else h
            if layer_outputs is None:
                rst = layer(graph, dropped, kept)  # (N, S*H, D)
            else:
                rst, attention = layer(graph, dropped, kept, get_attention=True)
                layer_outputs.append((rst, attention))
            out = rst.reshape(nodes, self.seeds, self.heads, -1).mean(2)  # each seed's heads averaged
            if self.residual:
                out = h + out
            h = F.elu(out) if i == 0 else out
        return self.output_fc.node_major(h).transpose(0, 1)

    def _seed_views(self, seed: int) -> dict[str, tuple[torch.Tensor, Index]]:
        # `SNRGAT`'s names
        views = {f"input_fc.{name}": view for name, view in self.input_fc.seed_views(seed).items()}
        for i, layer in enumerate(self.layers):
            views.update({f"layers.{i}.{name}": view for name, view in layer.seed_views(seed).items()})
        views.update({f"output_fc.{name}": view for name, view in self.output_fc.seed_views(seed).items()})
        return views
