"""Per-layer representation diagnostics: oversmoothing vs attention saturation.

Why a deep attention network fails can be read off each layer's output `h` (one row per
node, trailing dimensions flattened: `(N, F)`) and its attention:

- Oversmoothing makes the rows of neighbours alike. Three measures go to 0 as they
  become identical:

  - `dirichlet_energy`: `(1/N) sum_{u->v} ||h_u - h_v||^2` over the edges (self-loops
    left out, a multi-edge counted each time). It has the scale of `h`, so it also
    falls when the outputs merely shrink.
  - `mean_average_distance` (MAD, Chen et al., AAAI 2020): the mean of
    `1 - cos(h_u, h_v)` over those edges whose two rows are non-zero. Blind to the
    norms of the rows: only their directions count.
  - `rayleigh_quotient`: `sum_{u->v} ||h_u - h_v||^2 / sum_u ||h_u - mean||^2`. Blind
    to scale and to a common shift: how much neighbours differ relative to how much
    the rows differ at all.

- Attention saturation: `attention_entropy` is the normalised entropy of each node's
  attention over its in-edges (self-loop included): 1 for uniform attention (the layer
  averages its neighbours, like a GCN), 0 for one-hot attention (it copies one).

`output_norm` (`||h||_F`) tells vanishing or exploding outputs apart from these.

They are logged for every layer of deep models, so `GraphDiagnostics` precomputes what
depends on the graph only and each call makes a few passes over `h` and the edges. The
free functions build one and call its method.

Numerics: the interesting regime is nearly identical rows (energy 1e-10 of `||h||^2`,
cosines within 1e-10 of 1), where the textbook formulas cancel. Here every quantity is
built from differences of rows, which are exact for nearly equal floats: `||h_u - h_v||^2`
from `h_u - h_v`, `1 - cos` from it too (see `_mean_cosine_distance`), the spread around
the mean from `h_u - mean`. Sums over the F features of a row are taken in the dtype of
`h` (a relative rounding error, ~1e-7 in float32, that nothing later amplifies), sums
over nodes and edges in float64.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import dgl
import torch

__all__ = [
    "GraphDiagnostics",
    "attention_entropy",
    "dirichlet_energy",
    "mean_average_distance",
    "rayleigh_quotient",
]

# Rows are gathered and reduced in blocks of at most this many elements, into buffers
# kept between calls. Fresh temporaries of this size would be page-faulted in anew on
# every call (glibc hands large blocks back to the system), which cost 2-3x the
# arithmetic at 8 x 64 on Cora. On CPU, 2^17-2^19 (0.5-2 MB in float32) were the
# fastest of 2^13..2^20 at 8 x 8 and 8 x 64 on Cora (smaller blocks: more calls per
# pass, each with its fixed overhead); on GPU the block bounds the extra memory.
BLOCK_ELEMENTS = {"cpu": 1 << 18}
DEFAULT_BLOCK_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class _GraphTensors:
    """What the metrics need of the graph, on one device.

    `||h_u - h_v||^2` and `1 - cos` are 0 on self-loops and symmetric in u and v, so the
    edges u->v with u != v are kept as unordered pairs (min, max) with their
    multiplicity: on a symmetric graph (both directions) that halves the rows to gather.
    Sorted by first node, which keeps that gather sequential.
    """

    pair_first: torch.Tensor  # (P,) int64
    pair_second: torch.Tensor  # (P,) int64
    pair_counts: torch.Tensor  # (P,) float64: directed edges u->v, u != v, per pair
    entropy_edges: torch.Tensor | None  # edge IDs into nodes of in-degree >= 2 (None: all)
    entropy_weights: torch.Tensor  # float64, per such edge: 1 / log(in-degree of its dst)

    def to(self, device: torch.device) -> _GraphTensors:
        fields = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        return _GraphTensors(**{name: None if t is None else t.to(device) for name, t in fields.items()})


class _Buffers:
    """Reused block buffers for one (device, dtype, row shape): rows of the first and
    second node of each pair (or a block of `h`), and elementwise products."""

    def __init__(self, rows: int, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device):
        self.first = torch.empty(rows, *shape, dtype=dtype, device=device)
        self.second = torch.empty(rows, *shape, dtype=dtype, device=device)
        self.product = torch.empty(rows, *shape, dtype=dtype, device=device)


def _block_rows(width: int, device: torch.device) -> int:
    return max(1, BLOCK_ELEMENTS.get(device.type, DEFAULT_BLOCK_ELEMENTS) // max(width, 1))


def _spans(total: int, size: int):
    """`(start, stop)` covering `range(total)` in steps of `size`."""
    for start in range(0, total, size):
        yield start, min(start + size, total)


class GraphDiagnostics:
    """The diagnostics of the module docstring for one graph, its structure precomputed:
    the methods take the node features `h` `(N, ...)` or the `attention` only.

    Each returns a Python float, runs without autograd and leaves its input unchanged;
    `h` may have any floating dtype (half precision is computed in float32) and live on
    any device (the graph's tensors are copied there once). NaN in `h` gives NaN.
    In float32, squared sums overflow to inf once entries pass ~1e19, and a row whose
    squared norm underflows (entries below ~1e-23) counts as zero.

    Block buffers are kept between calls, so an instance is not for concurrent use from
    several threads.

    Cost: two row gathers per unordered pair, a few passes over `h` and one log per
    attention weight. On a Cora-sized graph (2,708 nodes, 10,556 edges + self-loops),
    one CPU thread, `layer_stats` with attention takes 1.3 ms at 8 heads x 8 and 6 ms
    at 8 x 64 (a `GATConv` eval forward: 5 and 21 ms, same machine).
    """

    def __init__(self, graph: dgl.DGLGraph):
        if not graph.is_homogeneous:
            raise ValueError(
                "graph must be homogeneous (one node and one edge type), got node types "
                f"{graph.ntypes} and edge types {graph.etypes}"
            )
        self.num_nodes = graph.num_nodes()
        self.num_edges = graph.num_edges()
        if self.num_nodes == 0:
            raise ValueError("the graph has no nodes")
        src, dst = graph.edges(order="eid")
        not_loop = src != dst
        first = torch.minimum(src, dst)[not_loop]
        second = torch.maximum(src, dst)[not_loop]
        pairs, counts = torch.unique(first * self.num_nodes + second, return_counts=True)
        self.num_pairs = pairs.shape[0]

        in_degrees = graph.in_degrees()
        # The nodes whose attention entropy is averaged (in-degree 1: 0/0).
        self.num_entropy_nodes = int((in_degrees >= 2).sum())
        edge_in_degrees = in_degrees[dst]
        counted = edge_in_degrees >= 2
        # No gather when every edge counts (self-loops everywhere, no isolated node).
        entropy_edges = None if bool(counted.all()) else counted.nonzero().squeeze(1)
        self._tensors_by_device = {
            src.device: _GraphTensors(
                pair_first=pairs // self.num_nodes,
                pair_second=pairs % self.num_nodes,
                pair_counts=counts.to(torch.float64),
                entropy_edges=entropy_edges,
                entropy_weights=1.0 / edge_in_degrees[counted].to(torch.float64).log(),
            )
        }
        self._buffers: dict[tuple, _Buffers] = {}

    def _tensors(self, device: torch.device) -> _GraphTensors:
        if device not in self._tensors_by_device:
            self._tensors_by_device[device] = next(iter(self._tensors_by_device.values())).to(device)
        return self._tensors_by_device[device]

    def _buffers_for(self, values: torch.Tensor) -> _Buffers:
        """The block buffers for rows like those of `values` (`(rows, S, F)`: S sets side by side)."""
        key = (values.device, values.dtype, *values.shape[1:])
        if key not in self._buffers:
            width = values.shape[1] * values.shape[2]
            size = min(_block_rows(width, values.device), max(self.num_nodes, self.num_pairs, self.num_edges))
            self._buffers[key] = _Buffers(size, values.shape[1:], values.dtype, values.device)
        return self._buffers[key]

    # --- input checks ------------------------------------------------------------

    def _rows(self, h: torch.Tensor, sets: int = 1) -> torch.Tensor:
        """`h` as a detached `(N, sets, F)` float32 or float64 tensor (a view where
        possible): its trailing dimensions flattened and split into `sets` equal parts."""
        if not isinstance(h, torch.Tensor):
            raise ValueError(f"h must be a torch.Tensor, got {type(h).__name__}")
        if h.dim() == 0:
            raise ValueError("h must have one row per node, got a 0-d tensor")
        if h.shape[0] != self.num_nodes:
            raise ValueError(f"h has {h.shape[0]} rows, the graph has {self.num_nodes} nodes")
        if not h.is_floating_point():
            raise ValueError(f"h must be a floating-point tensor, got dtype {h.dtype}")
        width = h[0].numel()
        if sets < 1 or width % sets:
            raise ValueError(f"h has {width} values per node, not {sets} equal sets of them")
        rows = h.detach().reshape(self.num_nodes, sets, width // sets)
        # Half precision cannot hold the small differences these metrics are about.
        return rows if rows.dtype in (torch.float32, torch.float64) else rows.float()

    def _attention(self, attention: torch.Tensor, sets: int = 1) -> torch.Tensor:
        """`attention` as a detached `(E, sets, H / sets)` float32 or float64 tensor."""
        if not isinstance(attention, torch.Tensor):
            raise ValueError(f"attention must be a torch.Tensor, got {type(attention).__name__}")
        shape = tuple(attention.shape)
        if not (attention.dim() == 2 or (attention.dim() == 3 and shape[2] == 1)):
            raise ValueError(f"attention must have shape (E, H, 1) or (E, H), got {shape}")
        if shape[0] != self.num_edges:
            raise ValueError(f"attention has {shape[0]} rows, the graph has {self.num_edges} edges")
        if shape[1] == 0:
            raise ValueError(f"attention has no heads: shape {shape}")
        if not attention.is_floating_point():
            raise ValueError(f"attention must be a floating-point tensor, got dtype {attention.dtype}")
        if shape[1] % sets:
            raise ValueError(f"attention has {shape[1]} heads, not {sets} equal sets of them")
        weights = attention.detach().reshape(self.num_edges, sets, shape[1] // sets)
        return weights if weights.dtype in (torch.float32, torch.float64) else weights.float()

    # --- the sums behind the metrics ---------------------------------------------

    def _node_sums(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """`||h_u||` per node and set `(N, S)`, and `sum_u ||h_u - mean||^2` per set `(S,)`,
        in float64, of `rows` `(N, S, F)`.

        The spread is taken around `c`, the mean in the dtype of `h`, where for nearly
        equal rows `h_u - c` is exact, and corrected by the identity
        `sum ||h_u - mean||^2 = sum ||h_u - c||^2 - N ||mean - c||^2` with
        `mean - c = (1/N) sum (h_u - c)` summed from those exact differences: the
        correction is a rounding error's square, so nothing cancels.
        """
        buffers = self._buffers_for(rows)
        centre = rows.mean(dim=0)
        norms = rows.new_empty(rows.shape[:2])
        spreads = rows.new_empty(rows.shape[:2])
        # N (mean - c), a sum of small exact differences (in the dtype of `h`: it only
        # enters the correction, itself a rounding error's square).
        offset = rows.new_zeros(rows.shape[1:])
        for start, stop in _spans(self.num_nodes, buffers.first.shape[0]):
            block = rows[start:stop]
            # vector_norm is one fused pass (a product then a sum is two).
            torch.linalg.vector_norm(block, dim=-1, out=norms[start:stop])
            centred = torch.sub(block, centre, out=buffers.first[: stop - start])
            torch.linalg.vector_norm(centred, dim=-1, out=spreads[start:stop])
            offset += centred.sum(dim=0)
        offset = offset.to(torch.float64).div_(self.num_nodes)
        spreads = spreads.to(torch.float64)
        spread = spreads.square().sum(dim=0) - self.num_nodes * offset.square().sum(dim=-1)
        return norms.to(torch.float64), spread

    def _pair_sums(self, rows: torch.Tensor, cosine: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Per pair u < v and set: `||h_u - h_v||^2` (float64) and, with `cosine`,
        `(h_u - h_v) . h_v` (dtype of `h`), `(P, S)` each."""
        tensors = self._tensors(rows.device)
        buffers = self._buffers_for(rows)
        distances = rows.new_empty(self.num_pairs, rows.shape[1])
        steps_along_second = rows.new_empty(self.num_pairs, rows.shape[1]) if cosine else None
        for start, stop in _spans(self.num_pairs, buffers.first.shape[0]):
            size = stop - start
            # Gathered into the buffers: the in-place steps never touch h.
            difference = torch.index_select(rows, 0, tensors.pair_first[start:stop], out=buffers.first[:size])
            second = torch.index_select(rows, 0, tensors.pair_second[start:stop], out=buffers.second[:size])
            difference.sub_(second)
            torch.linalg.vector_norm(difference, dim=-1, out=distances[start:stop])
            if cosine:
                product = torch.mul(difference, second, out=buffers.product[:size])
                torch.sum(product, dim=-1, out=steps_along_second[start:stop])
        return distances.to(torch.float64).square_(), steps_along_second

    def _energy(self, squared_distances: torch.Tensor) -> torch.Tensor:
        """`sum ||h_u - h_v||^2` over the edges u->v with u != v, per set (float64)."""
        return self._tensors(squared_distances.device).pair_counts @ squared_distances

    def _mean_cosine_distance(
        self, norms: torch.Tensor, squared_distances: torch.Tensor, steps_along_second: torch.Tensor
    ) -> torch.Tensor:
        """MAD from the per-pair sums, without cancellation for nearly equal rows.

        With `d = h_u - h_v` (exact for nearly equal rows) and norms `n`,
        `1 - cos = ||unit_u - unit_v||^2 / 2 = (||d||^2 - (n_u - n_v)^2) / (2 n_u n_v)`,
        where the difference of the norms comes from `d` as well,
        `n_u - n_v = (n_u^2 - n_v^2) / (n_u + n_v)` with `n_u^2 - n_v^2 = ||d||^2 + 2 d.h_v`,
        rather than from subtracting two nearly equal norms. On float32 rows 1e-6 apart
        (`1 - cos ~ 1e-13`) this is within 1e-8 of a float64 reference, where `1 - cos`
        from the cosine is off by 1e-3 even in float64, and differences of float32 unit
        rows by 1e-2. The one regime it does not resolve: rows nearly parallel but of
        different norms, where `||d||^2` and `(n_u - n_v)^2` nearly cancel (absolute
        error ~ the dtype's epsilon times `||d||^2 / (n_u n_v)`).
        """
        tensors = self._tensors(norms.device)
        first_norms = norms.index_select(0, tensors.pair_first)
        second_norms = norms.index_select(0, tensors.pair_second)
        norm_products = first_norms * second_norms
        # n_u - n_v, from n_u^2 - n_v^2 = ||d||^2 + 2 d.h_v
        norm_steps = (squared_distances + 2 * steps_along_second.to(torch.float64)) / (first_norms + second_norms)
        distances = (squared_distances - norm_steps.square_()).div_(norm_products)
        # Pairs with a zero row are left out (their 0/0 above is NaN); `!= 0`, not `> 0`,
        # so that a NaN row gives NaN rather than being left out.
        counted = norm_products != 0
        counts = tensors.pair_counts.unsqueeze(1) * counted
        # Rounding can take a tiny 1 - cos below 0.
        distances = torch.where(counted, distances.clamp_(min=0), 0.0)
        return 0.5 * (distances * counts).sum(dim=0) / counts.sum(dim=0)

    def _entropy(self, weights: torch.Tensor) -> torch.Tensor:
        """Mean normalised attention entropy per set of `weights` `(E, S, H)` (float64;
        NaN without nodes to average)."""
        if not self.num_entropy_nodes:
            return torch.full(weights.shape[1:2], math.nan, dtype=torch.float64, device=weights.device)
        tensors = self._tensors(weights.device)
        buffers = self._buffers_for(weights)
        edges = tensors.entropy_edges
        num_edges, heads = tensors.entropy_weights.shape[0], weights.shape[2]
        edge_sums = weights.new_empty(num_edges, weights.shape[1])
        tiny = torch.finfo(weights.dtype).tiny
        # Summed over nodes i and heads, sum_j a_ij log a_ij / log d_i is a weighted sum
        # over edges: no per-node reduction needed.
        for start, stop in _spans(num_edges, buffers.first.shape[0]):
            size = stop - start
            if edges is None:
                block = weights[start:stop]
            else:
                block = torch.index_select(weights, 0, edges[start:stop], out=buffers.first[:size])
            # a log a, with log of a clamped to the smallest normal number: 0 log 0 = 0
            # (as torch.special.xlogy, which is 5x slower on CPU).
            plogp = torch.clamp(block, min=tiny, out=buffers.product[:size]).log_().mul_(block)
            torch.sum(plogp, dim=-1, out=edge_sums[start:stop])  # terms <= 0: no cancellation
        return -(tensors.entropy_weights @ edge_sums.to(torch.float64)) / (self.num_entropy_nodes * heads)

    @staticmethod
    def _rayleigh(energy: torch.Tensor, spread: torch.Tensor) -> torch.Tensor:
        # Identical rows: energy exactly 0, and a spread of 0 up to rounding (of either
        # sign); their quotient is 0 by definition.
        return torch.where(energy == 0, 0.0, energy / spread)

    # --- the metrics -------------------------------------------------------------

    @torch.no_grad()
    def dirichlet_energy(self, h: torch.Tensor) -> float:
        """`(1/N) sum ||h_u - h_v||^2` over the edges u->v with u != v (multi-edges
        counted each time); 0 for a graph without such edges."""
        squared_distances, _ = self._pair_sums(self._rows(h), cosine=False)
        return (self._energy(squared_distances) / self.num_nodes).item()

    @torch.no_grad()
    def mean_average_distance(self, h: torch.Tensor) -> float:
        """Mean of `1 - cos(h_u, h_v)` over the edges u->v, u != v, whose two rows are
        non-zero (multi-edges counted each time); NaN if there is no such edge (the
        cosine with a zero row is undefined)."""
        rows = self._rows(h)
        norms, _ = self._node_sums(rows)
        return self._mean_cosine_distance(norms, *self._pair_sums(rows, cosine=True)).item()

    @torch.no_grad()
    def rayleigh_quotient(self, h: torch.Tensor) -> float:
        """`sum_{u->v, u != v} ||h_u - h_v||^2 / sum_u ||h_u - mean||^2`.

        0 when all rows are identical (0/0, defined as the limit of oversmoothing: the
        numerator is exactly 0 then).
        """
        rows = self._rows(h)
        squared_distances, _ = self._pair_sums(rows, cosine=False)
        _, spread = self._node_sums(rows)
        return self._rayleigh(self._energy(squared_distances), spread).item()

    @torch.no_grad()
    def attention_entropy(self, attention: torch.Tensor) -> float:
        """Mean over destination nodes of in-degree >= 2 and heads of
        `-sum_j a_ij log a_ij / log(in-degree)`: 1 for uniform, 0 for one-hot attention.

        `attention` is `(E, H, 1)` or `(E, H)` in edge-ID order, as
        `GATConv(..., get_attention=True)` returns it, over all in-edges (self-loops and
        multi-edges included, as in the in-degree). Nodes of in-degree 1 (entropy 0/0)
        are left out; NaN if no node has in-degree >= 2. The values are taken to be
        distributions over each node's in-edges (not checked: it would cost a reduction).
        """
        return self._entropy(self._attention(attention)).item()

    @torch.no_grad()
    def layer_stats(self, h: torch.Tensor, attention: torch.Tensor | None = None) -> dict[str, float]:
        """All metrics of a layer's output `h` (and of its `attention`, if given):
        `dirichlet_energy`, `mean_average_distance`, `rayleigh_quotient`,
        `attention_entropy` (only with attention) and `output_norm` (`||h||_F`).

        Cheaper than the methods one by one: each pass over `h` and the edges is made
        once, and all values come back in one device-to-host copy.
        """
        stats = self.layer_stats_tensors(h, attention)
        return dict(zip(stats, torch.stack(list(stats.values())).tolist()))

    @torch.no_grad()
    def layer_stats_tensors(self, h: torch.Tensor, attention: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """`layer_stats` as 0-d float64 tensors on the device of `h`, read by nothing: no
        wait for a GPU, and nothing of `h` or `attention` kept."""
        return {name: value[0] for name, value in self.layer_stats_of_sets(h, attention, sets=1).items()}

    @torch.no_grad()
    def layer_stats_of_sets(
        self, h: torch.Tensor, attention: torch.Tensor | None = None, sets: int = 1
    ) -> dict[str, torch.Tensor]:
        """`layer_stats_tensors` of `sets` layers' outputs side by side, as `(sets,)`
        float64 tensors: set s's output is `h[:, s*k:(s+1)*k]` (`h` `(N, sets*k, ...)`,
        e.g. the heads of S seeds trained together), its attention the same share of
        `attention`'s heads; one pass serves them all."""
        rows = self._rows(h, sets)
        weights = None if attention is None else self._attention(attention, sets)
        norms, spread = self._node_sums(rows)
        squared_distances, steps_along_second = self._pair_sums(rows, cosine=True)
        energy = self._energy(squared_distances)
        stats = {
            "dirichlet_energy": energy / self.num_nodes,
            "mean_average_distance": self._mean_cosine_distance(norms, squared_distances, steps_along_second),
            "rayleigh_quotient": self._rayleigh(energy, spread),
        }
        if weights is not None:
            stats["attention_entropy"] = self._entropy(weights)
        stats["output_norm"] = norms.square().sum(dim=0).sqrt()
        return stats


def dirichlet_energy(graph: dgl.DGLGraph, h: torch.Tensor) -> float:
    """`GraphDiagnostics(graph).dirichlet_energy(h)`."""
    return GraphDiagnostics(graph).dirichlet_energy(h)


def mean_average_distance(graph: dgl.DGLGraph, h: torch.Tensor) -> float:
    """`GraphDiagnostics(graph).mean_average_distance(h)`."""
    return GraphDiagnostics(graph).mean_average_distance(h)


def rayleigh_quotient(graph: dgl.DGLGraph, h: torch.Tensor) -> float:
    """`GraphDiagnostics(graph).rayleigh_quotient(h)`."""
    return GraphDiagnostics(graph).rayleigh_quotient(h)


def attention_entropy(graph: dgl.DGLGraph, attention: torch.Tensor) -> float:
    """`GraphDiagnostics(graph).attention_entropy(attention)`."""
    return GraphDiagnostics(graph).attention_entropy(attention)
