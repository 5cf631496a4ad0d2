"""Empirical Lipschitz probe: the spectral norm of an attention layer's Jacobian.

`estimate_lipschitz(layer, graph, feat)` is ||J||_2 for J the Jacobian of
feat -> layer(graph, feat) (flattened), by Lanczos (accelerated power) iteration on J^T J,
in float64, eval mode.

What it shows (Dasoulas et al., ICML 2021): with LipschitzNorm the attention scores are
homogeneous of degree 0 in the input, so a bias-free layer is positively homogeneous of
degree 1 and its Jacobian does not change when the input is scaled by s. Plain GAT and GT
lack this; the worst case is an input whose scores tie (uniform attention, the softmax at
its steepest) while the features are large:

- GAT ("tied"): the rows of the input are projected onto the orthogonal complement of the
  score directions W_h^T a_l,h and W_h^T a_r,h of every head h, then all get the same
  component along them (that of the first row), so all scores e_ij of a head are equal;
  then scaled by s. The score gradient is O(1), the values W x_j are O(s): ||J|| ~ s.
- GT ("tied"): the score q_i . k_j changes with x_j through W_k^T q_i and with x_i through
  W_q^T k_j. The rows are projected onto the null space of W_k (all heads; this needs
  in_feats > heads * hidden), so every key, hence every score, is 0: the second kind of
  direction vanishes, the first is O(s), and so are the values: ||J|| ~ s^2.
- "random": Gaussian rows scaled by s, the typical case.

The probe layers are built without biases: the homogeneity argument is about the attention
map itself (GT's query/key/value biases would break it; GAT's output bias does not change
the Jacobian).

DGL's edge softmax has a first-order-only backward on CPU, so a Jacobian-vector product by
double backward would silently miss its contribution; while the probe runs, the edge
softmax is swapped for a subclass whose backward is built from differentiable DGL ops
(and torch runs on one thread).
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import dgl
import pandas as pd
import torch
from torch import nn

from lipnorm.dgl_private import twice_differentiable_edge_softmax
from lipnorm.io import atomic_path, write_parquet
from lipnorm.nn.conv.gat import GATConv
from lipnorm.nn.conv.gt import GTConv
from lipnorm.kernels import kernels_off

# Model name -> (layer class, its `norm`).
PROBE_MODELS = {
    "gat": (GATConv, "none"),
    "gat-lip": (GATConv, "lip"),
    "gt": (GTConv, "none"),
    "gt-lip": (GTConv, "lip"),
}
KINDS = ("random", "tied")
DEFAULT_SCALES = (1.0, 10.0, 100.0, 1000.0)
# Probe layer and graph sizes: in_feats > heads * hidden leaves GT a key null space.
PROBE_NODES = 24
PROBE_EDGES = 72
PROBE_IN_FEATS = 16
PROBE_HEADS = 2
PROBE_HIDDEN = 4


@contextlib.contextmanager
def _probe_context() -> Iterator[None]:
    """The twice-differentiable edge softmax, the torch and DGL paths of the compiled
    kernels (whose backwards are not differentiable again), on one thread.

    The probe's products are tiny: on a busy machine, threads cost far more than they
    save (tens of times slower on 2 shared cores).
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with twice_differentiable_edge_softmax(), kernels_off("the Lipschitz probe differentiates gradients again"):
            yield
    finally:
        torch.set_num_threads(threads)


def estimate_lipschitz(
    layer: nn.Module,
    graph: dgl.DGLGraph,
    feat: torch.Tensor,
    iters: int = 100,
    seed: int = 0,
    tol: float = 1e-12,
) -> float:
    """||J||_2 of feat -> layer(graph, feat) at `feat`, by Lanczos iteration on J^T J.

    Lanczos is power iteration that keeps every iterate: it uses the same products
    (J v by double backward, since J^T u is linear in u; J^T w by one backward) but
    converges in far fewer steps when the top singular values are close, which they are
    for multi-head layers. The layer is copied to float64 in eval mode (no dropout);
    `layer` itself is left as it is. The products run on `feat`'s device (the layer copy
    and the graph are moved there). Stops after `iters` steps, once the estimate changes
    by at most `tol` (relative), or once the Krylov space is exhausted (then it is exact).
    """
    if iters < 1:
        raise ValueError(f"iters must be at least 1, got {iters}")
    layer = copy.deepcopy(layer).double().eval().to(feat.device)
    graph = graph.to(feat.device)
    x = feat.detach().to(torch.float64).requires_grad_(True)
    generator = torch.Generator().manual_seed(seed)
    # Drawn on the CPU whatever the device: the same start vector everywhere.
    v = torch.randn(x.numel(), generator=generator, dtype=torch.float64).to(x.device)
    v = v / torch.linalg.vector_norm(v)
    with _probe_context():
        y = layer(graph, x)
        u = torch.zeros_like(y, requires_grad=True)
        (jt_u,) = torch.autograd.grad(y, x, u, create_graph=True)

        def gram(vector: torch.Tensor) -> torch.Tensor:
            """J^T J vector."""
            (jv,) = torch.autograd.grad(jt_u, u, vector.view_as(x), retain_graph=True)
            (jt_jv,) = torch.autograd.grad(y, x, jv, retain_graph=True)
            return jt_jv.reshape(-1)

        basis, diagonal, off_diagonal = [v], [], []
        eigenvalue = 0.0
        for _ in range(iters):
            w = gram(basis[-1])
            diagonal.append(float(w @ basis[-1]))
            # Full reorthogonalisation (twice is enough) keeps the basis orthonormal.
            stacked = torch.stack(basis)
            for _ in range(2):
                w = w - stacked.T @ (stacked @ w)
            previous, eigenvalue = eigenvalue, _largest_eigenvalue(diagonal, off_diagonal)
            norm = float(torch.linalg.vector_norm(w))
            if (
                norm <= tol * max(eigenvalue, 1e-300)
                or abs(eigenvalue - previous) <= tol * eigenvalue
                or len(basis) == x.numel()
            ):
                break
            off_diagonal.append(norm)
            basis.append(w / norm)
    return math.sqrt(max(eigenvalue, 0.0))


def _largest_eigenvalue(diagonal: list[float], off_diagonal: list[float]) -> float:
    """Largest eigenvalue of the symmetric tridiagonal matrix with these diagonals."""
    tridiagonal = torch.diag(torch.tensor(diagonal, dtype=torch.float64))
    if off_diagonal:
        band = torch.tensor(off_diagonal, dtype=torch.float64)
        tridiagonal = tridiagonal + torch.diag(band, 1) + torch.diag(band, -1)
    return float(torch.linalg.eigvalsh(tridiagonal)[-1])


def probe_graph(num_nodes: int = PROBE_NODES, num_edges: int = PROBE_EDGES, seed: int = 0):
    """A random simple graph with one self-loop per node, reproducible from `seed`."""
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(num_nodes, (num_edges,), generator=generator)
    dst = torch.randint(num_nodes, (num_edges,), generator=generator)
    graph = dgl.to_simple(dgl.remove_self_loop(dgl.graph((src, dst), num_nodes=num_nodes)))
    return dgl.add_self_loop(graph)


def probe_layer(
    model: str,
    *,
    in_feats: int = PROBE_IN_FEATS,
    hidden: int = PROBE_HIDDEN,
    heads: int = PROBE_HEADS,
    seed: int = 0,
) -> nn.Module:
    """The bias-free float64 attention layer of `model`, initialised from `seed`."""
    if model not in PROBE_MODELS:
        raise ValueError(f"unknown probe model {model!r}; allowed: {', '.join(PROBE_MODELS)}")
    layer_class, norm = PROBE_MODELS[model]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layer = layer_class(in_feats, hidden, heads, norm=norm, bias=False)
    return layer.double().eval()


def random_probe_input(num_nodes: int, in_feats: int, *, scale: float = 1.0, seed: int = 0):
    """Standard Gaussian features `(num_nodes, in_feats)` times `scale`, float64."""
    generator = torch.Generator().manual_seed(seed)
    return scale * torch.randn(num_nodes, in_feats, generator=generator, dtype=torch.float64)


def _score_directions(layer: nn.Module) -> tuple[torch.Tensor, bool]:
    """Input directions that change the scores of `layer` (one per row), and whether the
    tied input keeps a shared component along them (see `tied_probe_input`)."""
    if isinstance(layer, GATConv):
        weight = layer.fc.weight.detach().view(layer.num_heads, layer.out_feats, -1)
        directions = [
            torch.einsum("hd,hdi->hi", attn.detach().view(layer.num_heads, -1), weight)
            for attn in (layer.attn_l, layer.attn_r)
        ]
        return torch.cat(directions), True
    if isinstance(layer, GTConv):
        return layer.fc_k.weight.detach(), False
    raise ValueError(f"no tied probe input for {type(layer).__name__}; allowed: GATConv, GTConv")


def tied_probe_input(layer: nn.Module, num_nodes: int, *, scale: float = 1.0, seed: int = 0):
    """`scale` times an input at which every attention score of `layer` ties.

    The rows of `random_probe_input` are projected onto the orthogonal complement of the
    score directions. GAT: every row then gets back the component of row 0 along them, so
    each head's score is one nonzero constant on every edge (at exactly zero scores,
    rounding would pick the LeakyReLU slope edge by edge). GT: no component is added back,
    so every key, hence every score, is 0.
    """
    directions, shared = _score_directions(layer)
    directions = directions.to(torch.float64)
    in_feats = directions.shape[1]
    _, singular, vh = torch.linalg.svd(directions, full_matrices=False)
    rank = int((singular > singular[0] * in_feats * torch.finfo(torch.float64).eps).sum())
    if rank >= in_feats:
        raise ValueError(
            f"the score directions of {type(layer).__name__} span all {in_feats} input "
            "features, so no input ties the scores; allowed: in_feats larger than their "
            "number (GAT: 2 * heads, GT: heads * hidden)"
        )
    basis = vh[:rank]
    z = random_probe_input(num_nodes, in_feats, seed=seed)
    along = (z @ basis.T) @ basis
    tied = z - along
    if shared:
        tied = tied + along[0]
    return scale * tied


def probe_table(
    seed: int = 0,
    scales: Sequence[float] = DEFAULT_SCALES,
    iters: int = 100,
    models: Sequence[str] = tuple(PROBE_MODELS),
    kinds: Sequence[str] = KINDS,
    device: str = "cpu",
) -> pd.DataFrame:
    """Columns `model, s, kind, estimate`: the Jacobian norm of each model's probe layer at
    each kind of input direction scaled by each s (same graph, weights and direction).

    Layers and inputs are built on the CPU (the same numbers on any device), the
    Jacobian products run on `device` (`lipnorm.train.device.resolve_device`)."""
    from lipnorm.train.device import resolve_device, use_device

    target = resolve_device(device)
    use_device(target)
    for s in scales:
        if not (math.isfinite(s) and s > 0):
            raise ValueError(f"scales must be finite and positive, got {s!r}")
    for kind in kinds:
        if kind not in KINDS:
            raise ValueError(f"unknown probe input kind {kind!r}; allowed: {', '.join(KINDS)}")
    graph = probe_graph(seed=seed)
    rows = []
    for model in models:
        layer = probe_layer(model, seed=seed)
        for kind in kinds:
            for s in scales:
                if kind == "tied":
                    feat = tied_probe_input(layer, graph.num_nodes(), scale=s, seed=seed)
                else:
                    feat = random_probe_input(graph.num_nodes(), PROBE_IN_FEATS, scale=s, seed=seed)
                estimate = estimate_lipschitz(layer, graph, feat.to(target), iters=iters, seed=seed)
                rows.append({"model": model, "s": float(s), "kind": kind, "estimate": estimate})
    return pd.DataFrame(rows, columns=["model", "s", "kind", "estimate"])


def write_probe(
    out_dir: str | os.PathLike,
    seed: int = 0,
    scales: Sequence[float] = DEFAULT_SCALES,
    iters: int = 100,
    device: str = "cpu",
) -> list[Path]:
    """`probe_table` written to `out_dir/probe.parquet` and `out_dir/probe.csv`
    (atomically); returns the two paths."""
    table = probe_table(seed=seed, scales=scales, iters=iters, device=device)
    parquet, csv = Path(out_dir) / "probe.parquet", Path(out_dir) / "probe.csv"
    write_parquet(parquet, table)
    with atomic_path(csv) as tmp:
        table.to_csv(tmp, index=False)
    return [parquet, csv]
