"""Process-wide settings of a training process: the seeds of every generator, glibc's
malloc (freed memory kept for reuse, large tensors mapped each), and flushing denormals.
(Huge pages are asked for by the command line, `lipnorm.cli.request_huge_pages`, before
anything that may allocate a tensor is imported.)"""

from __future__ import annotations

import ctypes
import random

import dgl
import numpy as np
import torch

from lipnorm.settings.constants import MAPPED_LARGE_TENSOR_BYTES


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    dgl.seed(seed)


# glibc's mallopt parameters (malloc.h), and the sizes from which an allocation gets a
# mapping of its own: everything below 1 GiB kept in the heap, or tensors from
# MAPPED_LARGE_TENSOR_BYTES (32 MiB, glibc's own largest dynamic threshold) on mapped each.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
RETAINED_ALLOCATION_BYTES = 1 << 30


def retain_freed_memory(map_large_tensors: bool = False) -> bool:
    """Make glibc's malloc keep freed memory for reuse (True), where it is glibc (else False).

    By default glibc serves allocations above its mmap threshold (128 KiB, raised
    dynamically to at most 32 MiB) with fresh mmaps and returns freed heap tops to the
    OS above its trim threshold; the MB-sized tensors of a training step are then
    page-faulted in anew every step (21,000-27,000 minor faults per step at Cora, 8 x 64,
    depth 10), which the kernel zero-fills. Raising both thresholds to 1 GiB makes freed
    tensors' memory reused: no value changes, only where the bytes live.

    `map_large_tensors` is for runs where memory is the point (activation checkpointing,
    cluster batches): tensors of 32 MiB and more (a large graph's (N, H*D) activations)
    then get a mapping each, unmapped when freed, instead of leaving holes in the heap that
    make a step's peak grow by about one more such tensor a layer (checkpointing) or the
    whole-graph evaluation's by several (cluster batches); their pages are faulted in
    anew, which huge pages (`lipnorm.cli.request_huge_pages`) make cheap (docs/performance.md,
    "Memory allocation").
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mapped_from = MAPPED_LARGE_TENSOR_BYTES if map_large_tensors else RETAINED_ALLOCATION_BYTES
    return (
        mallopt(ctypes.c_int(M_MMAP_THRESHOLD), ctypes.c_int(mapped_from)) == 1
        and mallopt(ctypes.c_int(M_TRIM_THRESHOLD), ctypes.c_int(RETAINED_ALLOCATION_BYTES)) == 1
    )


def set_flush_denormal(on: bool) -> None:
    """`torch.set_flush_denormal(on)` for the process (both ways: a previous run's
    setting does not carry over); ValueError if the CPU cannot flush denormals."""
    if not torch.set_flush_denormal(on) and on:
        raise ValueError("flush_denormal is not supported on this CPU (it needs SSE3)")