"""Per-layer representation diagnostics: oversmoothing vs attention saturation.

Why a deep attention network fails can be read off each layer's output `h` (rows are
nodes, any trailing shape flattened to `(N, F)`) and its attention:

- Oversmoothing makes neighbouring rows alike. Three measures go to 0 as they become
  identical:

  - `dirichlet_energy`: `(1/N) sum_{u->v} ||h_u - h_v||^2` over the edges (self-loops
    left out, a multi-edge counted each time). It has the scale of `h`, so it also
    falls when the outputs merely shrink.
  - `mean_average_distance` (MAD, Chen et al., AAAI 2020): the mean of
    `1 - cos(h_u, h_v)` over those edges whose two rows are non-zero. Blind to each
    row's norm: only directions count.
  - `rayleigh_quotient`: `sum_{u->v} ||h_u - h_v||^2 / sum_u ||h_u - mean||^2`. Blind
    to scale and to a common shift: how smooth the rows are on the graph relative to
    how much they differ at all.

- Attention saturation: `attention_entropy` is the normalised entropy of each node's
  attention over its in-edges (self-loops included), 1 for uniform attention (the layer
  averages, like a GCN) and 0 for one-hot attention (the layer copies one neighbour).

`output_norm` (the Frobenius norm of `h`) tells vanishing or exploding outputs apart
from the above.

These are logged every few epochs for every layer of deep models, so `GraphDiagnostics`
precomputes what depends on the graph only, and each call costs a few passes over `h`
(see `GraphDiagnostics`). The free functions build one and call its method.

Numerics: the interesting regime is rows that are nearly identical (energy 1e-10 of
`||h||^2`, cosines within 1e-10 of 1), where the textbook formulas cancel. So
`||h_u - h_v||^2` is summed from the differences themselves, `1 - cos` is
`||u_u - u_v||^2 / 2` of the unit rows `u`, the spread around the mean is taken around
the mean itself, and every sum over nodes or edges is accumulated in float64.
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

# On CPU, rows are gathered and reduced in blocks of about this many elements (1 MB in
# float32), so that the temporaries stay in cache instead of being written out to memory
# and allocated afresh each call: at 8 heads x 64 on Cora this halves the cost.
# On GPU one block (the whole tensor) is best.
CPU_BLOCK_ELEMENTS = 1 << 18


@dataclass(frozen=True)
class _GraphTensors:
    """What the metrics need of the graph, on one device.

    Self-loops contribute nothing to `||h_u - h_v||^2` or `1 - cos`, and both are
    symmetric in u and v, so the edges u->v with u != v are stored as unordered pairs
    (min, max) with their multiplicity: on a symmetric graph (edges in both directions)
    this halves the rows to gather. The pairs are sorted by their first node, which keeps
    that gather sequential.
    """

    pair_first: torch.Tensor  # (P,) int64
    pair_second: torch.Tensor  # (P,) int64
    pair_counts: torch.Tensor  # (P,) float64: directed edges u->v, u != v, per pair
    entropy_edges: torch.Tensor | None  # edge IDs into nodes of in-degree >= 2; None: all
    entropy_weights: torch.Tensor  # (len(entropy_edges),) float64: 1 / log(in-degree)

    def to(self, device: torch.device) -> _GraphTensors:
        moved = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        return _GraphTensors(**{name: None if t is None else t.to(device) for name, t in moved.items()})


def _blocks(total: int, width: int, device: torch.device):
    """`(start, stop)` spans covering `range(total)` in blocks of rows of `width` elements."""
    size = total if device.type != "cpu" else max(1, CPU_BLOCK_ELEMENTS // max(width, 1))
    for start in range(0, total, max(size, 1)):
        yield start, min(start + size, total)


class GraphDiagnostics:
    """The diagnostics of the module docstring for one graph, with its structure
    precomputed: methods take the node features `h` `(N, ...)` or the `attention` only.

    Each method returns a Python float, runs without autograd, and leaves its input
    unchanged; `h` may be of any floating dtype and on any device (the graph's tensors
    are copied to it once). NaN in `h` gives NaN.

    Cost: on Cora (2,708 nodes, 10,556 edges, 5,278 unordered pairs), `layer_stats` of
    an `(N, 8, 8)` output with its attention takes about 1 ms on one CPU thread; the
    work is two row gathers per pair and two passes over `h`, in cache-sized blocks.
    """

    def __init__(self, graph: dgl.DGLGraph):
        if not graph.is_homogeneous:
            raise ValueError(
                f"graph must be homogeneous (one node and one edge type), got node types "
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

        in_degrees = graph.in_degrees()
        self.entropy_nodes = int((in_degrees >= 2).sum())
        edge_in_degree = in_degrees[dst]
        entropy_mask = edge_in_degree >= 2
        # Skip the gather when every edge counts (e.g. self-loops and no isolated node).
        entropy_edges = None if bool(entropy_mask.all()) else entropy_mask.nonzero().squeeze(1)
        tensors = _GraphTensors(
            pair_first=pairs // self.num_nodes,
            pair_second=pairs % self.num_nodes,
            pair_counts=counts.to(torch.float64),
            entropy_edges=entropy_edges,
            entropy_weights=1.0 / edge_in_degree[entropy_mask].to(torch.float64).log(),
        )
        self.num_loopless_edges = int(not_loop.sum())
        self._tensors_by_device = {tensors.pair_first.device: tensors}

    def _tensors(self, device: torch.device) -> _GraphTensors:
        if device not in self._tensors_by_device:
            self._tensors_by_device[device] = next(iter(self._tensors_by_device.values())).to(device)
        return self._tensors_by_device[device]

    # --- input checks ------------------------------------------------------------

    def _rows(self, h: torch.Tensor) -> torch.Tensor:
        """`h` as a detached `(N, F)` float32 or float64 tensor (a view where possible)."""
        if not isinstance(h, torch.Tensor):
            raise ValueError(f"h must be a torch.Tensor, got {type(h).__name__}")
        if h.dim() == 0:
            raise ValueError("h must have one row per node, got a 0-d tensor")
        if h.shape[0] != self.num_nodes:
            raise ValueError(f"h has {h.shape[0]} rows, the graph has {self.num_nodes} nodes")
        if not h.is_floating_point():
            raise ValueError(f"h must be a floating-point tensor, got dtype {h.dtype}")
        rows = h.detach().reshape(self.num_nodes, -1)
        # Half precision cannot hold the small differences these metrics are about.
        return rows if rows.dtype in (torch.float32, torch.float64) else rows.float()

    def _attention(self, attention: torch.Tensor) -> torch.Tensor:
        """`attention` as a detached `(E, H)` float32 or float64 tensor."""
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
        weights = attention.detach().reshape(self.num_edges, shape[1])
        return weights if weights.dtype in (torch.float32, torch.float64) else weights.float()

    # --- the sums behind the metrics (float64 scalar tensors) -------------------

    def _node_sums(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """`||h_u||^2` per node (dtype of `h`) and `sum_u ||h_u - mean||^2` (float64).

        The spread is taken around `c`, the mean in the dtype of `h`, where for nearly
        equal rows `h_u - c` is exact, and corrected by the identity
        `sum ||h_u - mean||^2 = sum ||h_u - c||^2 - N ||mean - c||^2` with
        `mean - c = (1/N) sum (h_u - c)` summed from those exact differences: the
        correction is a rounding error's square, so nothing cancels.
        """
        centre = rows.mean(dim=0)
        squared_norms = torch.empty(self.num_nodes, dtype=rows.dtype, device=rows.device)
        squared_spreads = torch.empty(self.num_nodes, dtype=rows.dtype, device=rows.device)
        offset = torch.zeros(rows.shape[1], dtype=torch.float64, device=rows.device)
        for start, stop in _blocks(self.num_nodes, rows.shape[1], rows.device):
            block = rows[start:stop]
            torch.linalg.vecdot(block, block, out=squared_norms[start:stop])
            centred = block - centre
            torch.linalg.vecdot(centred, centred, out=squared_spreads[start:stop])
            offset += centred.sum(dim=0)
        offset /= self.num_nodes
        spread = squared_spreads.to(torch.float64).sum() - self.num_nodes * offset.dot(offset)
        return squared_norms, spread

    def _pair_products(self, rows: torch.Tensor, cosine: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Per pair u < v: `||h_u - h_v||^2`, and with `cosine` `(h_u - h_v) . h_v`
        (dtype of `h`: sums over F of one row, whose terms are >= 0 for the first)."""
        tensors = self._tensors(rows.device)
        first, second = tensors.pair_first, tensors.pair_second
        squared_distances = rows.new_empty(first.shape[0])
        steps_along_second = rows.new_empty(first.shape[0]) if cosine else None
        for start, stop in _blocks(first.shape[0], rows.shape[1], rows.device):
            difference = rows.index_select(0, first[start:stop])  # a copy: h is never touched
            second_rows = rows.index_select(0, second[start:stop])
            difference.sub_(second_rows)
            torch.linalg.vecdot(difference, difference, out=squared_distances[start:stop])
            if cosine:
                torch.linalg.vecdot(difference, second_rows, out=steps_along_second[start:stop])
        return squared_distances, steps_along_second

    def _energy(self, squared_distances: torch.Tensor) -> torch.Tensor:
        """`sum ||h_u - h_v||^2` over the edges u->v, u != v (float64)."""
        return squared_distances.to(torch.float64).dot(self._tensors(squared_distances.device).pair_counts)

    def _mean_cosine_distance(
        self, squared_norms: torch.Tensor, squared_distances: torch.Tensor, steps_along_second: torch.Tensor
    ) -> torch.Tensor:
        """MAD from per-pair sums, without cancellation for nearly equal rows.

        With `d = h_u - h_v` (exact for nearly equal rows) and norms `n`:
        `1 - cos = (||d||^2 - (n_u - n_v)^2) / (2 n_u n_v)`, where the difference of the
        norms comes from `d` too, `n_u - n_v = (n_u^2 - n_v^2) / (n_u + n_v)` with
        `n_u^2 - n_v^2 = ||d||^2 + 2 d . h_v`, not from subtracting two nearly equal
        norms. This is the `||unit_u - unit_v||^2 / 2` of the unit rows without forming
        them; relative error ~1e-7 in float32 at `1 - cos = 1e-10` where differencing
        rounded unit rows gives ~1e-4. Its limit: rows nearly parallel but of different
        norms, where `||d||^2` and `(n_u - n_v)^2` nearly cancel (absolute error ~ the
        dtype's epsilon times `||d||^2 / (n_u n_v)`).
        """
        tensors = self._tensors(squared_norms.device)
        norms = squared_norms.to(torch.float64).sqrt()
        first_norms = norms[tensors.pair_first]
        second_norms = norms[tensors.pair_second]
        squared_distances = squared_distances.to(torch.float64)
        squared_norm_steps = squared_distances + 2 * steps_along_second.to(torch.float64)
        norm_steps = squared_norm_steps / (first_norms + second_norms)
        # Rounding can make a tiny 1 - cos negative; it is >= 0.
        distances = ((squared_distances - norm_steps * norm_steps) / (2 * first_norms * second_norms)).clamp_(min=0)
        # `!= 0` rather than `> 0`: a NaN row must make MAD NaN, not be left out.
        counts = tensors.pair_counts * ((first_norms != 0) & (second_norms != 0))
        return torch.where(counts > 0, distances, 0.0).dot(counts) / counts.sum()

    def _entropy(self, weights: torch.Tensor) -> torch.Tensor:
        """Mean normalised attention entropy (float64 scalar; NaN without nodes)."""
        tensors = self._tensors(weights.device)
        if tensors.entropy_edges is not None:
            weights = weights.index_select(0, tensors.entropy_edges)
        # sum_j a_ij log a_ij / log d_i summed over nodes i and heads is a weighted sum
        # over edges, so no per-node reduction is needed. a log a with log of a clamped
        # to the smallest normal number: 0 at a = 0 (torch.special.xlogy does the same
        # 5 times slower on CPU). Summed over heads in the input dtype (terms <= 0).
        tiny = torch.finfo(weights.dtype).tiny
        plogp = weights.clamp(min=tiny).log_().mul_(weights)
        edge_terms = torch.mv(plogp, torch.ones(plogp.shape[1], dtype=plogp.dtype, device=plogp.device))
        total = edge_terms.to(torch.float64).dot(tensors.entropy_weights)
        if not self.entropy_nodes:
            return torch.full((), math.nan, dtype=torch.float64, device=weights.device)
        return -total / (self.entropy_nodes * weights.shape[1])

    # --- the metrics -------------------------------------------------------------

    @torch.no_grad()
    def dirichlet_energy(self, h: torch.Tensor) -> float:
        """`(1/N) sum ||h_u - h_v||^2` over the edges u->v with u != v (multi-edges
        counted each time); 0 for a graph without such edges."""
        squared_distances, _ = self._pair_products(self._rows(h), cosine=False)
        return (self._energy(squared_distances) / self.num_nodes).item()

    @torch.no_grad()
    def mean_average_distance(self, h: torch.Tensor) -> float:
        """Mean of `1 - cos(h_u, h_v)` over the edges u->v, u != v, whose two rows are
        non-zero (multi-edges counted each time); NaN if there is no such edge (a cosine
        with a zero row is undefined)."""
        rows = self._rows(h)
        squared_norms, _ = self._node_sums(rows)
        return self._mean_cosine_distance(squared_norms, *self._pair_products(rows, cosine=True)).item()

    @torch.no_grad()
    def rayleigh_quotient(self, h: torch.Tensor) -> float:
        """`sum_{u->v, u != v} ||h_u - h_v||^2 / sum_u ||h_u - mean||^2`.

        0 when all rows are identical (0 / 0: as smooth as it gets, the limit of
        oversmoothing; the numerator is then 0 too).
        """
        rows = self._rows(h)
        squared_distances, _ = self._pair_products(rows, cosine=False)
        _, spread = self._node_sums(rows)
        return self._rayleigh(self._energy(squared_distances), spread).item()

    @staticmethod
    def _rayleigh(energy: torch.Tensor, spread: torch.Tensor) -> torch.Tensor:
        # The corrected spread of identical rows can round to a tiny non-zero value of
        # either sign; their energy is exactly 0.
        return torch.where(energy == 0, 0.0, energy / spread)

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
        """All metrics of a layer's output `h` (and its `attention`, if given):
        `dirichlet_energy`, `mean_average_distance`, `rayleigh_quotient`,
        `attention_entropy` (only with attention) and `output_norm` (`||h||_F`).

        Cheaper than the methods one by one: each pass over `h` and over the edges is
        made once.
        """
        rows = self._rows(h)
        weights = None if attention is None else self._attention(attention)
        squared_norms, spread = self._node_sums(rows)
        squared_distances, steps_along_second = self._pair_products(rows, cosine=True)
        energy = self._energy(squared_distances)
        stats = {
            "dirichlet_energy": energy / self.num_nodes,
            "mean_average_distance": self._mean_cosine_distance(squared_norms, squared_distances, steps_along_second),
            "rayleigh_quotient": self._rayleigh(energy, spread),
        }
        if weights is not None:
            stats["attention_entropy"] = self._entropy(weights)
        stats["output_norm"] = squared_norms.to(torch.float64).sum().sqrt()
        # One device-to-host copy for all of them.
        values = torch.stack(list(stats.values())).tolist()
        return dict(zip(stats, values))


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
