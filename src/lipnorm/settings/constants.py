"""Constants and defaults shared by the CLI, the planner, the data loaders and training.

Each is assigned here only (tests/settings/test_settings.py); this module imports nothing, so
that `lipnorm --help` and `lipnorm plan` stay free of torch.
"""

# How a run's training steps see the graph: the whole graph each step, or Cluster-GCN
# batches (`lipnorm.train.cluster_batches`).
BATCHINGS = ("full", "cluster")

# The datasets whose DGL loader row-normalises the stored features (`lipnorm.data.load_dataset`;
# the "official" recipe trains on them as stored).
PLANETOID = ("cora", "citeseer", "pubmed")

# The dataset folder, relative to the working directory, of `lipnorm data`, `lipnorm
# train --data-root`, `lipnorm bench` and `lipnorm plan`.
DEFAULT_DATA_ROOT = "resources/datasets"

# Under checkpointing or cluster batches, tensors from this size on (glibc's own largest
# dynamic mmap threshold) get a mapping each instead of a place in glibc's heap
# (`lipnorm.train.process.retain_freed_memory`); `lipnorm.plan` counts such tensors at their size.
MAPPED_LARGE_TENSOR_BYTES = 32 << 20
