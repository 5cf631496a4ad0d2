"""S seeds of one literature GAT trained as one network, a seed batch (issue: grids of
small runs).

A grid of small runs repeats one configuration over seeds; each run of a 1 x 16 GAT on
Cora does almost no arithmetic, and its cost is per-call overhead. `SeedBatchedGAT` holds
the S networks (`LiteratureGAT`, the "dgn" recipe's) of S seeds side by side, so that
each graph operation serves all of them: seed s's head h is head ``s * H + h`` of one
attention layer (one edge softmax, one neighbour sum), its projection a slice of a
batched matrix product, its normalisation statistics columns of one BatchNorm.

Each seed keeps everything a separate run has: its parameters (slices of the batched
ones, `seed_state_dict`), its random stream (a `torch.Generator` per seed, from which its
dropout masks are drawn in the order and shapes a separate run draws them from torch's
global generator, so a stream in the state a separate run's global generator has gives
that run's masks), its BatchNorm running statistics. The per-seed loss is the separate
run's and the seeds share no parameter, so the sum of the S losses gives each seed its
own gradient; Adam is elementwise, so one Adam over the batched parameters takes each
seed's steps. The numbers equal the separate runs' to float rounding (the batched
products sum in their own order).

DropEdge, whose graph differs per seed, is a per-seed edge mask over the one graph
(`forward(graph, feat, kept)`): seed s's softmax, LipschitzNorm maxima and attention
dropout see the edges it kept only, the numbers of its separate run on the graph of
those edges. What it does not batch (its callers run those seeds one after another):
PairNorm modes other than "PN", LipschitzNorm's "official" variant (one norm over all
heads). No operation mixes the seeds' values, so a seed that
diverges (NaN) leaves the others' numbers alone.

SNR's GAT (`SNRGAT`, the "snr" recipe's) is batched alike by
`lipnorm.nn.models.seed_batch_snr.SeedBatchedSNR`, from the same parts (`seed_dropout`,
`_SeedGATConv`, the per-seed generators); `seed_batched`, the architecture "gat"'s
`seed_batch`, takes whichever of the two holds the networks it is given.
"""

from __future__ import annotations

import weakref
from typing import NamedTuple, Sequence

import dgl
import torch
import torch.nn.functional as F
from torch import nn

from lipnorm.nn.conv.gat import GATConv
from lipnorm.kernels import grouped_linear
from lipnorm.nn.models.literature import LiteratureGAT
from lipnorm.nn.models.snr import SNRGAT
from lipnorm.nn.norm.batchnorm import BatchNorm
from lipnorm.nn.norm.dgn import DiffGroupNorm, dgn_output, group_assignment
from lipnorm.nn.norm.pairnorm import PairNorm, pairnorm_pn
from lipnorm.nn.residual import initial_residual
from lipnorm.nn.row_pruned import RowPruned, row_pruned

__all__ = ["SeedBatchedGAT", "SeedBatchedNet", "seed_batched", "seed_dropout", "why_not_seed_batched"]

# Where a seed's part of a batched tensor lies: `tensor[index]`.
Index = int | slice | tuple


class NonzeroEntries(NamedTuple):
    """Features `(num_nodes, F)` of S seeds given by their non-zero entries: entry k is
    node `nodes[k]`'s feature `features[k]`, seed s's value `values[s, k]` (the first
    layer's dropped-out input, `SeedBatchedGAT._first_input`)."""

    nodes: torch.Tensor
    features: torch.Tensor
    values: torch.Tensor
    num_nodes: int


def seed_dropout(x: torch.Tensor, p: float, generators: Sequence[torch.Generator], dim: int) -> torch.Tensor:
    """Dropout of `x` whose slices along `dim` (S equal parts, one per seed) each draw
    their mask from their seed's generator, as `F.dropout` draws it from the global one:
    a Bernoulli(1 - p) mask of the slice's shape, divided by 1 - p."""
    if p == 0:
        return x
    parts = x.chunk(len(generators), dim=dim)
    # Contiguous masks: a slice's values are drawn in its row-major order, as F.dropout
    # draws them for a separate run's contiguous tensor (empty_like would keep a view's strides).
    masks = [
        torch.empty(part.shape, dtype=x.dtype, device=x.device).bernoulli_(1 - p, generator=gen)
        for part, gen in zip(parts, generators)
    ]
    return x * (torch.cat(masks, dim=dim) / (1 - p))


class _WhileUnchanged:
    """`compute(tensor)` kept for the last tensor it was called on, while that tensor lives
    unchanged (the same object, the same version): found once per features tensor, or per
    step's DropEdge mask for all the layers (a network's layers share one of these)."""

    def __init__(self, compute):
        self._compute = compute
        self._of = None  # (tensor, its version, what compute gave)

    def __call__(self, tensor: torch.Tensor):
        cached = self._of
        if cached is not None and cached[0]() is tensor and cached[1] == tensor._version:
            return cached[2]
        found = self._compute(tensor)
        self._of = (weakref.ref(tensor), tensor._version, found)
        return found


def _nonzero_entries(feat: torch.Tensor) -> tuple[RowPruned, torch.Tensor, torch.Tensor]:
    """`feat`'s rows that can be non-zero (`RowPruned`) and, within them, the positions
    `(row, column)` of its non-zero entries (of any seed's, for `(S, N, F)`)."""
    pruned = row_pruned(feat)
    nonzero = pruned.values != 0
    rows, columns = torch.nonzero(nonzero.any(dim=0) if feat.dim() == 3 else nonzero, as_tuple=True)
    return pruned, rows, columns


def _kept_rows(kept: torch.Tensor) -> list[torch.Tensor]:
    """Each seed's kept edge IDs (ascending) of a DropEdge mask `kept` `(E, S)`."""
    return [torch.nonzero(column).squeeze(1) for column in kept.t()]


class _SeedAttentionDropout(nn.Module):
    """Attention dropout of `(E, S*H, 1)` attention: seed s's heads from its generator,
    over the edges its DropEdge kept where `kept` `(E, S)` is given to `multiplier` (its
    separate run draws its mask over the graph of those edges, in their order)."""

    def __init__(self, p: float, generators: list[torch.Generator], kept_rows: _WhileUnchanged):
        super().__init__()
        self.p = p
        self.generators = generators  # the network's list, filled by `set_generators`
        self._kept_rows = kept_rows  # the network's, shared by its layers

    def multiplier(self, shape: tuple[int, int, int, int], dtype: torch.dtype, kept: torch.Tensor | None):
        """The mask / (1 - p) `(S, E, H, 1)`, seed s's `[s]` drawn from its generator as its
        separate run draws its `(E, H, 1)` (over its kept edges only, where `kept` is
        given); None where none applies."""
        if not self.training or self.p == 0:
            return None
        masks = torch.empty(shape, dtype=dtype) if kept is None else torch.zeros(shape, dtype=dtype)
        kept_rows = None if kept is None else self._kept_rows(kept)
        for seed, generator in enumerate(self.generators):
            if kept is None:
                masks[seed].bernoulli_(1 - self.p, generator=generator)
                continue
            rows = kept_rows[seed]
            masks[seed, rows] = torch.empty((len(rows), *shape[2:]), dtype=dtype).bernoulli_(1 - self.p, generator=generator)
        return masks.div_(1 - self.p)

    def forward(self, attention: torch.Tensor) -> torch.Tensor:
        """`attention` `(E, S*H, 1)` dropped out over every edge (DGL's path without
        DropEdge; with it, `GATConv._attend` takes the `multiplier` itself)."""
        seeds = len(self.generators)
        edges, heads, _ = attention.shape
        multiplier = self.multiplier((seeds, edges, heads // seeds, 1), attention.dtype, None)
        return attention if multiplier is None else attention * multiplier.transpose(0, 1).reshape(attention.shape)


class _SeedGATConv(GATConv):
    """S `GATConv`s of one shape as one: S*H heads over a per-seed projection.

    `forward(graph, feat, kept)` takes the seeds' inputs node-major, `(N, S, in)` (or the
    first layer's `NonzeroEntries`), and returns `(N, S*H, D)`; everything after the projection is `GATConv`'s own, per head, on the
    edges seed s kept (`kept[:, s]`, DropEdge's; None: all): its scores of the others
    are left out of its softmax and of LipschitzNorm's neighbour maxima, as they are
    absent from its separate run's graph.
    """

    def __init__(self, layers: Sequence[GATConv], generators: list[torch.Generator], kept_rows: _WhileUnchanged):
        first = layers[0]
        seeds = len(layers)
        super().__init__(
            first.in_feats, first.out_feats, seeds * first.num_heads, bias=False, norm=first.norm,
            alpha=first.alpha, variant=first.variant, eps=first.eps, fused=True,
        )
        self.seeds = seeds
        self.heads_per_seed = first.num_heads
        self.fc = None
        with torch.no_grad():
            self.weight = nn.Parameter(torch.stack([layer.fc.weight for layer in layers]).clone())
            self.attn_l.copy_(torch.cat([layer.attn_l for layer in layers], dim=1))
            self.attn_r.copy_(torch.cat([layer.attn_r for layer in layers], dim=1))
        if first.res_fc is not None:
            self.res_fc = nn.Identity()
        if first.bias is not None:  # SNR's layers (DGL's default), not the literature GAT's
            with torch.no_grad():
                self.bias = nn.Parameter(torch.stack([layer.bias for layer in layers]).clone())  # (S, H*D)
        self.attn_drop = _SeedAttentionDropout(first.attn_drop.p, generators, kept_rows)

    def forward(self, graph: dgl.DGLGraph, feat, kept: torch.Tensor | None = None, get_attention: bool = False):
        h_dst, ft = self._project(graph, feat)
        rst, attention = self._attend(graph, ft, head_mask=kept, get_attention=get_attention)
        if self.res_fc is not None:
            rst = rst + self._heads(self.res_fc, h_dst)
        if self.bias is not None:
            rst = rst + self.bias.view(1, self.num_heads, self.out_feats)
        return (rst, attention) if get_attention else rst

    def _heads_per_group(self, head_mask) -> int:
        return self.heads_per_seed  # a seed's heads: its own edges and dropout stream

    def _attention_dropout(self, shape, like, head_mask=None):
        return self.attn_drop.multiplier(shape, like.dtype, head_mask)

    def _project(self, graph: dgl.DGLGraph, feat: torch.Tensor | NonzeroEntries):
        # -> (N, S*H, D), each seed's input by its own matrix; the residual sees the input seed by seed.
        if isinstance(feat, NonzeroEntries):
            # The product on the non-zero entries only: W x = sum_k x_k W[:, k].
            if self.res_fc is not None:
                raise ValueError("a residual layer takes its input whole, not as its non-zero entries")
            columns = self.weight.permute(2, 0, 1).index_select(0, feat.features)  # (K, S, H*D)
            terms = columns * feat.values.t().unsqueeze(-1)
            ft = terms.new_zeros(feat.num_nodes, *terms.shape[1:]).index_add(0, feat.nodes, terms)
            return None, ft.view(feat.num_nodes, self.num_heads, self.out_feats)
        ft = grouped_linear(feat, self.weight)  # node-major (N, S, in) -> (N, S, H*D)
        return feat.reshape(feat.shape[0], -1), ft.view(feat.shape[0], self.num_heads, self.out_feats)

    def _attention_terms(self, ft: torch.Tensor, *vectors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """`GATConv._attention_terms` seed by seed: each seed's block-diagonal product of
        its own heads (one `bmm`), not one over all heads, where a zero block times a
        diverging seed's non-finite values would make the other seeds' NaN."""
        seeds, heads, dim, count = self.seeds, self.heads_per_seed, self.out_feats, len(vectors)
        stacked = torch.cat(vectors).view(count, seeds, heads, dim).permute(1, 2, 3, 0)  # (S, H, D, k)
        blocks = torch.stack([torch.block_diag(*seed_vectors) for seed_vectors in stacked])  # (S, H*D, H*k)
        per_seed = ft.reshape(ft.shape[0], seeds, heads * dim).transpose(0, 1)  # (S, N, H*D)
        terms = torch.bmm(per_seed, blocks).transpose(0, 1).reshape(ft.shape[0], seeds * heads, count)
        return terms.split(1, dim=-1)

    def seed_views(self, seed: int) -> dict[str, tuple[torch.Tensor, Index]]:
        """Where seed `seed`'s `GATConv` parameters (`fc.weight`, `attn_l`, `attn_r`, `bias`) lie."""
        heads = (slice(None), slice(seed * self.heads_per_seed, (seed + 1) * self.heads_per_seed))
        views = {"fc.weight": (self.weight, seed), "attn_l": (self.attn_l, heads), "attn_r": (self.attn_r, heads)}
        return views if self.bias is None else {**views, "bias": (self.bias, seed)}


def _concatenated_batchnorm(norms: Sequence[nn.BatchNorm1d]) -> nn.BatchNorm1d:
    """One BatchNorm1d whose columns are the S given ones' side by side (BatchNorm is
    column by column, so it normalises each seed's columns with that seed's statistics)."""
    first = norms[0]
    batched = nn.BatchNorm1d(sum(norm.num_features for norm in norms), eps=first.eps, momentum=first.momentum)
    with torch.no_grad():
        for name in ("weight", "bias", "running_mean", "running_var"):
            getattr(batched, name).copy_(torch.cat([getattr(norm, name) for norm in norms]))
        batched.num_batches_tracked.copy_(first.num_batches_tracked)
    return batched


def _batchnorm_views(batched: nn.BatchNorm1d, columns: slice, prefix: str) -> dict[str, tuple[torch.Tensor, Index]]:
    views = {f"{prefix}{name}": (getattr(batched, name), columns) for name in ("weight", "bias", "running_mean", "running_var")}
    views[f"{prefix}num_batches_tracked"] = (batched.num_batches_tracked, ())
    return views


class _SeedBatchNorm(nn.Module):
    """S `BatchNorm`s of width W on `(N, S, W)`."""

    def __init__(self, norms: Sequence[BatchNorm]):
        super().__init__()
        self.width = norms[0].width
        self.bn = _concatenated_batchnorm([norm.bn for norm in norms])

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.bn(h.reshape(h.shape[0], -1)).view(h.shape)

    def seed_views(self, seed: int) -> dict[str, tuple[torch.Tensor, Index]]:
        return _batchnorm_views(self.bn, slice(seed * self.width, (seed + 1) * self.width), "bn.")


class _SeedPairNorm(nn.Module):
    """S `PairNorm`s ("PN") on `(N, S, W)`: each seed centred and scaled by its own rows."""

    def __init__(self, norms: Sequence[PairNorm]):
        super().__init__()
        self.scale = norms[0].scale

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return pairnorm_pn(h, self.scale)

    def seed_views(self, seed: int) -> dict[str, tuple[torch.Tensor, Index]]:
        return {}


class _SeedDiffGroupNorm(nn.Module):
    """S `DiffGroupNorm`s on `(N, S, W)`: per-seed group assignment, BatchNorm columns."""

    def __init__(self, norms: Sequence[DiffGroupNorm]):
        super().__init__()
        first = norms[0]
        self.width, self.num_groups, self.skip_weight = first.width, first.num_groups, first.skip_weight
        with torch.no_grad():
            self.cluster_weight = nn.Parameter(torch.stack([norm.cluster.weight for norm in norms]).clone())
            self.cluster_bias = nn.Parameter(torch.stack([norm.cluster.bias for norm in norms]).clone())
        self.bn = _concatenated_batchnorm([norm.bn for norm in norms])

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        assignment = group_assignment(h, self.cluster_weight, self.cluster_bias)
        return dgn_output(assignment, h, self.bn, self.skip_weight)

    def seed_views(self, seed: int) -> dict[str, tuple[torch.Tensor, Index]]:
        columns = self.num_groups * self.width
        views = {"cluster.weight": (self.cluster_weight, seed), "cluster.bias": (self.cluster_bias, seed)}
        return {**views, **_batchnorm_views(self.bn, slice(seed * columns, (seed + 1) * columns), "bn.")}


_BATCHED_NORMS = {BatchNorm: _SeedBatchNorm, PairNorm: _SeedPairNorm, DiffGroupNorm: _SeedDiffGroupNorm}


def why_not_seed_batched(model: nn.Module) -> str | None:
    """None if `seed_batched` can hold seeds of `model` (`SeedBatchedGAT` a `LiteratureGAT`'s,
    `SeedBatchedSNR` an `SNRGAT`'s); else why not (a sentence)."""
    if not isinstance(model, (LiteratureGAT, SNRGAT)):
        return (
            f"{type(model).__name__} is not the literature GAT (recipe dgn) nor SNR's GAT (recipe snr), "
            "the networks batched over seeds"
        )
    if any(layer.norm == "lip" and layer.variant != "paper" for layer in model.layers):
        return "LipschitzNorm's official variant takes one norm over all heads, which would mix the seeds"
    if isinstance(model, SNRGAT):
        return None  # no representation normalisation, no initial residual
    norms = model._norms()
    for norm in norms or ():
        if type(norm) not in _BATCHED_NORMS:
            return f"its normalisation {type(norm).__name__} has no seed-batched form"
        if isinstance(norm, PairNorm) and (norm.mode != "PN" or norm.per_graph):
            return f"PairNorm mode {norm.mode!r} (per_graph={norm.per_graph}) has no seed-batched form; PN has"
    return None


class SeedBatchedNet(nn.Module):
    """What a seed batch of S networks gives `lipnorm.train.seed_batch.SeedBatch`: each
    seed's part of the batched tensors under its separate network's state-dict names
    (`seed_views`, from the subclass's `_seed_views`), its state dict and its gradients."""

    seeds: int

    def _seed_views(self, seed: int) -> dict[str, tuple[torch.Tensor, Index]]:
        raise NotImplementedError

    def seed_views(self, seed: int) -> dict[str, tuple[torch.Tensor, Index]]:
        """Seed `seed`'s state-dict names (its separate network's) -> (batched tensor, index
        of the seed's part in it): `tensor[index]` is its value, `tensor.grad[index]` its
        gradient."""
        if not 0 <= seed < self.seeds:
            raise ValueError(f"seed index must be in [0, {self.seeds}), got {seed}")
        return self._seed_views(seed)

    def seed_state_dict(self, seed: int) -> dict[str, torch.Tensor]:
        """Seed `seed`'s network as its separate network's state dict (copies)."""
        return {name: tensor[index].detach().clone() for name, (tensor, index) in self.seed_views(seed).items()}

    def seed_gradients(self, seed: int) -> dict[str, torch.Tensor]:
        """Seed `seed`'s parameter gradients by its separate network's parameter names
        (copies; parameters without a gradient are left out)."""
        return {
            name: tensor.grad[index].clone()
            for name, (tensor, index) in self.seed_views(seed).items()
            if isinstance(tensor, nn.Parameter) and tensor.grad is not None
        }


class SeedBatchedGAT(SeedBatchedNet):
    """S `LiteratureGAT`s of one configuration (different seeds) as one network.

    `forward(graph, feat)` takes the features `(N, F)` shared by the seeds, or `(S, N, F)`,
    and returns the logits `(S, N, C)`, seed s's equal to `models[s](graph, feat)` to float
    rounding, in training mode too when seed s's generator (`set_generators`) is in the
    state torch's global generator has before that forward.
    """

    def __init__(self, models: Sequence[LiteratureGAT]):
        super().__init__()
        if not models:
            raise ValueError("SeedBatchedGAT needs at least one model, got none")
        for model in models:
            reason = (
                why_not_seed_batched(model) if isinstance(model, LiteratureGAT)
                else f"{type(model).__name__} is not the literature GAT (recipe dgn)"
            )
            if reason is not None:
                raise ValueError(f"cannot batch these seeds: {reason}")
        shapes = {tuple((name, tuple(p.shape)) for name, p in model.state_dict().items()) for model in models}
        if len(shapes) != 1:
            raise ValueError("cannot batch these seeds: their networks differ in shape (one configuration only)")
        first = models[0]
        self.seeds = len(models)
        self.feat_drop = first.feat_drop
        self.initial_residual = first.initial_residual
        self.output_relu = first.output_relu
        self.norm_attribute = first.norm_attribute
        self.generators: list[torch.Generator] = [torch.Generator() for _ in models]
        # GATConv's constructor draws initial weights that are then replaced: not from
        # the global stream, which the caller's runs go on drawing from.
        kept_rows = _WhileUnchanged(_kept_rows)
        with torch.random.fork_rng(devices=[]):
            self.layers = nn.ModuleList(
                _SeedGATConv([model.layers[i] for model in models], self.generators, kept_rows)
                for i in range(len(first.layers))
            )
        self.norms = None
        self._entries = _WhileUnchanged(_nonzero_entries)
        if first._norms() is not None:
            self.norms = nn.ModuleList(
                _BATCHED_NORMS[type(norm)]([model._norms()[i] for model in models])
                for i, norm in enumerate(first._norms())
            )

    def set_generators(self, states: Sequence[torch.Tensor]) -> None:
        """Put seed s's random stream in `states[s]` (a `torch.Generator.get_state()`)."""
        if len(states) != self.seeds:
            raise ValueError(f"got {len(states)} generator states for {self.seeds} seeds")
        for generator, state in zip(self.generators, states):
            generator.set_state(state)

    def _first_input(self, feat: torch.Tensor) -> NonzeroEntries:
        """The first layer's input as its non-zero entries (`NonzeroEntries`, values
        `(S, K)`), dropped out in training as `LiteratureGAT` drops out its own: seed s's
        mask drawn from its generator over its rows that can be non-zero, as `F.dropout`
        draws one (`lipnorm.nn.row_pruned`; with per-seed inputs `(S, N, F)`, over seed s's
        own such rows), and read at the entries. The mask's other values multiply zeros:
        the product and the projection are taken on the K entries alone (on Cora, about
        2,500 of the 140 rows' 200,000)."""
        pruned, rows, columns = self._entries(feat)
        values = pruned.values[..., rows, columns]  # (K,) or (S, K)
        if values.dim() == 1:
            values = values.expand(self.seeds, -1)
        if self.training and self.feat_drop > 0:
            keep = 1 - self.feat_drop
            shape = pruned.values.shape[-2:]
            masks = []
            for seed, generator in enumerate(self.generators):
                if feat.dim() == 2:
                    noise = torch.empty(shape, dtype=feat.dtype, device=feat.device).bernoulli_(keep, generator=generator)
                else:
                    noise = torch.zeros(shape, dtype=feat.dtype, device=feat.device)
                    own = torch.nonzero((pruned.values[seed] != 0).any(dim=1)).squeeze(1)
                    noise[own] = torch.empty(
                        (len(own), shape[1]), dtype=feat.dtype, device=feat.device
                    ).bernoulli_(keep, generator=generator)
                masks.append(noise[rows, columns])
            values = values * torch.stack(masks).div_(keep)
        return NonzeroEntries(pruned.rows[rows], columns, values, pruned.num_nodes)

    def forward(
        self, graph: dgl.DGLGraph, feat: torch.Tensor, kept: torch.Tensor | None = None, layer_outputs: list | None = None
    ) -> torch.Tensor:
        """`kept` `(E, S)` bool: the edges each seed's DropEdge kept this step (None: all).

        `layer_outputs`, a list: each layer appends its output `(N, S*H, D)` and attention
        `(E, S*H, 1)` (seed s: heads ``s*H .. (s+1)*H - 1``), what a `LiteratureGAT`'s
        layer returns with ``get_attention=True``, for the layer statistics.
        """
        if feat.dim() == 3 and feat.shape[0] != self.seeds:
            raise ValueError(f"feat has shape {tuple(feat.shape)}; expected (N, F) or (S, N, F) with S = {self.seeds}")
        if kept is not None and (tuple(kept.shape) != (graph.num_edges(), self.seeds) or kept.dtype != torch.bool):
            raise ValueError(
                f"kept is a {kept.dtype} tensor of shape {tuple(kept.shape)}; expected bool (E, S) = "
                f"({graph.num_edges()}, {self.seeds})"
            )
        last = len(self.layers) - 1
        h = h0 = None
        for i, layer in enumerate(self.layers):
            if i == 0:  # dropped out once, also where it is the last (depth 1)
                h = self._first_input(feat)
            elif self.training and i == last:
                h = seed_dropout(h, self.feat_drop, self.generators, dim=1)
            if layer_outputs is None:
                rst = layer(graph, h, kept)  # (N, S*H, D)
            else:
                rst, attention = layer(graph, h, kept, get_attention=True)
                layer_outputs.append((rst, attention))
            rst = rst.reshape(rst.shape[0], self.seeds, -1)  # (N, S, H*D)
            if h0 is not None and self.initial_residual and i < last:
                rst = initial_residual(rst, h0, self.initial_residual)
            if self.norms is not None:
                rst = self.norms[i](rst)
            if i < last or self.output_relu:
                rst = F.relu(rst)
            if i == 0:
                h0 = rst
            h = rst  # node-major (N, S, W), as the next layer projects it
        return h.transpose(0, 1)

    def _seed_views(self, seed: int) -> dict[str, tuple[torch.Tensor, Index]]:
        # `LiteratureGAT`'s names
        views = {}
        for i, layer in enumerate(self.layers):
            views.update({f"layers.{i}.{name}": view for name, view in layer.seed_views(seed).items()})
        for i, norm in enumerate(self.norms or ()):
            views.update({f"{self.norm_attribute}.{i}.{name}": view for name, view in norm.seed_views(seed).items()})
        return views


def seed_batched(models: Sequence[nn.Module]) -> nn.Module:
    """The architecture "gat"'s `seed_batch` (`lipnorm.registry`): S seeds' networks as one,
    `SeedBatchedSNR` for SNR's GAT (recipe snr), else `SeedBatchedGAT` (which refuses, with
    its reason, a network it cannot hold)."""
    if models and isinstance(models[0], SNRGAT):
        from lipnorm.nn.models.seed_batch_snr import SeedBatchedSNR

        return SeedBatchedSNR(models)
    return SeedBatchedGAT(models)
