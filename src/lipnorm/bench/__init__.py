"""Benchmarks: the cost of LipschitzNorm, side by side with DGL's and PyG's layers.

Every implementation of a family runs inside the same deep model, the one `lipnorm
train` trains (`lipnorm.nn.models.build.build_model`: input Linear, `depth` x [dropout ->
attention layer (heads concatenated) -> ELU except after the last], output Linear, its
dropouts): ours is that model as it is; DGL's and PyG's layers take the place of its
attention layers (`build_bench_model`). So the only difference between two timings is
the attention layer:

- family "gat": our `GATConv` without norm (`gat`), with LipschitzNorm (`gat-lip`, the
  paper's normaliser; `gat-lip-official`, the authors' code's), `dgl.nn.GATConv`
  (`dgl-gat`) and PyG's `GATConv` (`pyg-gat`, self-loops already in the graph);
- family "gt": our `GTConv` (`gt`, `gt-lip`, `gt-lip-official`) and PyG's
  `TransformerConv` (`pyg-transformer`).

One training step is zero_grad, full-batch forward, cross-entropy on the training nodes,
backward and an Adam step. Per case (graph x depth x heads x hidden), after warm-up, the
implementations take one step each in round-robin order (rotated every round) for many
rounds, so load changes of the shared machine hit all of them alike; medians per
implementation and ratios of medians come from the same rounds. Memory is measured
after the timings, apart from them: the peak RSS of one step (Linux VmHWM, reset
through /proc/self/clear_refs) and the bytes one attention layer alone keeps for its
backward pass (saved tensors, each storage counted once).

Outputs (`run_benchmark`, `harness`): `measurements.csv` (every measurement, long format),
`summary.md` (ratios, memory, gradient-logging overhead, scaling slopes, profile),
`epoch_time_vs_edges.{pdf,png}` and `profile_gat_8x8.txt` (torch.profiler tables).

The modules: `cases` (implementations, graphs, cases, plans), `measure` (timing a case),
`memory`, `dense_floor` (the dense-GEMM floor of a training step), `epochs` (the epoch
of `lipnorm train`, gradient-logging overhead, profile), `report` (`summary.md`), `figure` (its figure, the
only one importing matplotlib) and `harness` (`run_benchmark`). This package's face is
what the scripts in `benchmarks/` and `lipnorm bench` call; importing it imports no torch.
"""

from lipnorm.bench.cases import (
    CASE_KEYS,
    COLUMNS,
    FULL,
    QUICK,
    Case,
    Graph,
    Implementation,
    Plan,
    build_bench_model,
    cases,
    implementations,
    load_graph,
    parse_dataset,
    require_pyg,
)
from lipnorm.bench.epochs import EPOCH_PARTS, epoch_times, gradlog_overhead, profile_lip
from lipnorm.bench.dense_floor import FLOOR, estimated_step_gflop, floor_gemms, gemm_floor
from lipnorm.bench.harness import run_benchmark
from lipnorm.bench.measure import interleaved_rounds, measure_case, train_step
from lipnorm.bench.memory import saved_tensor_bytes
from lipnorm.bench.report import (
    FLOOR_TARGET,
    FLOOR_TARGET_CASE,
    GRADLOG_TARGET,
    RATIOS,
    SLOPE_TARGET,
    floor_rows,
    floor_table,
    layer_times,
    ratio_table,
    write_summary,
)

__all__ = [
    "CASE_KEYS", "COLUMNS", "EPOCH_PARTS", "FLOOR", "FLOOR_TARGET", "FLOOR_TARGET_CASE", "FULL",
    "GRADLOG_TARGET", "QUICK", "RATIOS", "SLOPE_TARGET", "Case", "Graph",
    "Implementation", "Plan", "build_bench_model", "cases", "epoch_times",
    "estimated_step_gflop", "floor_gemms", "floor_rows", "floor_table", "gemm_floor",
    "gradlog_overhead", "implementations", "interleaved_rounds", "layer_times", "load_graph",
    "measure_case", "parse_dataset", "profile_lip", "ratio_table", "require_pyg",
    "run_benchmark", "saved_tensor_bytes", "train_step", "write_summary",
]
