"""What `lipnorm bench` compares: the implementations of each family inside the model
`lipnorm train` trains (`build_bench_model`), the graphs (`load_graph`), the cases
(graph × depth × heads × hidden) and the two plans, `FULL` and `QUICK`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple


# csbm graphs: average degree 9 plus one self-loop, so edges = 10 x nodes exactly.
CSBM_AVG_DEGREE = 9
CSBM_FEATURES = 32
CSBM_CLASSES = 3
COLUMNS = [
    "family", "dataset", "nodes", "edges", "depth", "heads", "hidden",
    "implementation", "metric", "round", "value",
]
# What identifies a benchmark case (the leading columns of `COLUMNS`).
CASE_KEYS = ["family", "dataset", "nodes", "edges", "depth", "heads", "hidden"]


class Implementation(NamedTuple):
    family: str  # also the model whose attention layers a competitor's replace
    # (in_feats, out_feats, heads, attn_drop) -> layer called as layer(structure, h)
    make: Callable[[int, int, int, float], Any]
    edge_index: bool  # PyG layer: `structure` is the (2, E) edge index, else the DGLGraph
    model: str | None = None  # ours: the model of `lipnorm.nn.models`; None: a competitor
    variant: str = "paper"  # ours: the LipschitzNorm variant


class Case(NamedTuple):
    family: str
    dataset: str  # "cora" or "csbm"
    nodes: int
    edges: int  # self-loops included
    depth: int
    heads: int
    hidden: int


@dataclass(frozen=True)
class Plan:
    """What one benchmark run measures and how hard it tries."""

    datasets: tuple[str, ...]  # "cora" and/or "csbm-<edges>"
    depths: tuple[int, ...]
    widths: tuple[tuple[int, int], ...]  # (heads, hidden)
    families: tuple[str, ...] = ("gat", "gt")
    seconds_per_case: float = 20.0  # timed rounds stop after this (at least min_rounds)
    min_rounds: int = 5
    max_rounds: int = 40
    warmup_rounds: int = 2
    # Cases estimated above this much work per step (~2 s on one core) are skipped: the
    # grid's largest cells (e.g. 10^6 edges x depth 30 x 8x64) take minutes per step, and
    # the ratios depend on the per-layer balance of projections and edge passes, which
    # the smaller cells of the same width and degree already measure.
    step_budget_gflop: float = 60.0
    # The same on a GPU: ~2 s per step at a sustained 10 TFLOP/s (a fraction of a current
    # GPU's float32 peak: the edge passes are memory-bound). The full grid's largest cell
    # (gt, 10^6 edges, depth 30, 8x64) is ~19,000 GFLOP, so a GPU run measures every cell.
    cuda_step_budget_gflop: float = 20_000.0

    def budget_gflop(self, device) -> float:
        """The work per step above which a case is skipped on `device`."""
        return self.cuda_step_budget_gflop if device.type == "cuda" else self.step_budget_gflop
    gradlog_depths: tuple[int, ...] = (2, 10, 30)
    gradlog_rounds: int = 15
    profile_edges: int = 100_000
    profile_depth: int = 2
    profile_steps: int = 5
    # (dataset, depth, heads, hidden) of family "gat" measured although over the budget,
    # for their GEMM floor, with `floor_implementations` only.
    over_budget_cases: tuple[tuple[str, int, int, int], ...] = ()
    floor_implementations: tuple[str, ...] = ("gat", "gat-lip")
    # (dataset, depth, heads, hidden, model) whose `lipnorm train` epoch is timed.
    epoch_cases: tuple[tuple[str, int, int, int, str], ...] = ()
    epoch_rounds: int = 5


FULL = Plan(
    datasets=("cora", "csbm-10000", "csbm-100000", "csbm-1000000"),
    depths=(2, 10, 30),
    widths=((8, 8), (8, 64)),
    over_budget_cases=(("cora", 30, 8, 64),),
    epoch_cases=(("cora", 10, 8, 8, "gat-lip"), ("cora", 10, 8, 64, "gat-lip")),
)
QUICK = Plan(
    datasets=("csbm-10000",),
    depths=(2,),
    widths=((8, 8),),
    seconds_per_case=1.0,
    min_rounds=3,
    max_rounds=5,
    warmup_rounds=1,
    gradlog_depths=(2,),
    gradlog_rounds=3,
    profile_edges=10_000,
    profile_steps=1,
    epoch_cases=(("csbm-10000", 2, 8, 8, "gat-lip"),),
    epoch_rounds=3,
)


def _ours(layer_class: type, **options: Any):
    def make(in_feats: int, out_feats: int, heads: int, attn_drop: float):
        return layer_class(in_feats, out_feats, heads, attn_drop=attn_drop, **options)

    return make


def _dgl_gat(in_feats: int, out_feats: int, heads: int, attn_drop: float):
    import dgl.nn

    return dgl.nn.GATConv(in_feats, out_feats, heads, attn_drop=attn_drop)


def _pyg(layer):
    """PyG layers take `(x, edge_index)`; the bench model calls `(structure, h)`."""
    from torch import nn

    class EdgeIndexFirst(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = layer

        def forward(self, edge_index, h):
            return self.layer(h, edge_index)

    return EdgeIndexFirst()


def _pyg_gat(in_feats: int, out_feats: int, heads: int, attn_drop: float):
    from torch_geometric.nn import GATConv

    return _pyg(GATConv(in_feats, out_feats, heads, dropout=attn_drop, add_self_loops=False))


def _pyg_transformer(in_feats: int, out_feats: int, heads: int, attn_drop: float):
    from torch_geometric.nn import TransformerConv

    return _pyg(TransformerConv(in_feats, out_feats, heads, dropout=attn_drop, root_weight=True))


def implementations() -> dict[str, Implementation]:
    """Name -> implementation; PyG ones need the `bench` extra (torch_geometric)."""
    from lipnorm.nn.conv.gat import GATConv
    from lipnorm.nn.conv.gt import GTConv

    return {
        "gat": Implementation("gat", _ours(GATConv, norm="none"), False, "gat"),
        "gat-lip": Implementation("gat", _ours(GATConv, norm="lip", variant="paper"), False, "gat-lip"),
        "gat-lip-official": Implementation(
            "gat", _ours(GATConv, norm="lip", variant="official"), False, "gat-lip", "official"),
        "dgl-gat": Implementation("gat", _dgl_gat, False),
        "pyg-gat": Implementation("gat", _pyg_gat, True),
        "gt": Implementation("gt", _ours(GTConv, norm="none"), False, "gt"),
        "gt-lip": Implementation("gt", _ours(GTConv, norm="lip", variant="paper"), False, "gt-lip"),
        "gt-lip-official": Implementation(
            "gt", _ours(GTConv, norm="lip", variant="official"), False, "gt-lip", "official"),
        "pyg-transformer": Implementation("gt", _pyg_transformer, True),
    }


def require_pyg() -> None:
    """Raise ValueError naming the missing extra if torch_geometric cannot be imported."""
    try:
        import torch_geometric  # noqa: F401
    except ImportError as err:
        raise ValueError(
            f"the benchmark compares with PyG, which is not installed ({err}); install the "
            "`bench` extra: pip install -c constraints.txt -e '.[bench]'"
        ) from None


def build_bench_model(name: str, in_feats: int, num_classes: int, depth: int, heads: int, hidden: int):
    """The bench model of implementation `name`, initialised from seed 0: ours, the model
    `lipnorm train` builds (`lipnorm.nn.models.build.build_model`); a competitor, the model of
    its family (`gat`, `gt`) with the competitor's layers in place of the attention layers."""
    import torch
    from torch import nn

    from lipnorm.nn.models.build import build_model
    from lipnorm.settings.model_config import ModelConfig

    impls = implementations()
    if name not in impls:
        raise ValueError(f"unknown implementation {name!r}; allowed: {', '.join(impls)}")
    impl = impls[name]
    config = ModelConfig(model=impl.model or impl.family, in_feats=in_feats, num_classes=num_classes,
                         depth=depth, heads=heads, hidden=hidden, variant=impl.variant).resolved()
    torch.manual_seed(0)
    model = build_model(config)
    if impl.model is None:
        model.layers = nn.ModuleList(
            impl.make(heads * hidden, hidden, heads, config.attn_drop) for _ in range(depth))
    return model


class Graph(NamedTuple):
    """A benchmark graph: both structures, inputs and training targets."""

    name: str
    graph: Any  # DGLGraph with self-loops
    edge_index: Any  # (2, E) int64, source row first (PyG's flow source -> target)
    features: Any
    labels: Any
    train_index: Any  # the training nodes' indices (a boolean mask would synchronise a GPU)
    num_classes: int

    @property
    def nodes(self) -> int:
        return self.graph.num_nodes()

    @property
    def edges(self) -> int:
        return self.graph.num_edges()

    def structure(self, impl: Implementation):
        return self.edge_index if impl.edge_index else self.graph


def parse_dataset(spec: str) -> tuple[str, int | None]:
    """"cora" -> ("cora", None); "csbm-<edges>" -> ("csbm", edges), edges >= 100."""
    if spec == "cora":
        return "cora", None
    prefix, _, count = spec.partition("-")
    if prefix == "csbm" and count.isdigit() and int(count) >= 100:
        return "csbm", int(count)
    raise ValueError(f"unknown benchmark dataset {spec!r}; allowed: cora, csbm-<edges> (edges >= 100)")


def load_graph(spec: str, root: str | os.PathLike, mirror: str | None) -> Graph:
    import torch

    from lipnorm import data

    name, edges = parse_dataset(spec)
    if name == "csbm":
        params = data.CSBMParams(
            nodes=edges // (CSBM_AVG_DEGREE + 1), classes=CSBM_CLASSES,
            avg_degree=CSBM_AVG_DEGREE, feature_dim=CSBM_FEATURES, seed=0,
        )
        dataset = data.load_dataset("csbm", csbm=params)
    else:
        dataset = data.load_dataset(name, root=root, mirror=mirror)
    edge_index = torch.stack(dataset.graph.edges()).long().contiguous()
    return Graph(
        spec, dataset.graph, edge_index, dataset.features, dataset.labels,
        torch.nonzero(dataset.train_mask).squeeze(1), dataset.num_classes,
    )


def cases(plan: Plan) -> list[tuple[str, Case]]:
    return [
        (spec, Case(family, parse_dataset(spec)[0], 0, 0, depth, heads, hidden))
        for spec in plan.datasets
        for family in plan.families
        for depth in plan.depths
        for heads, hidden in plan.widths
    ]
