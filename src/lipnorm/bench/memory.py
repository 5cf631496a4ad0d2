"""Memory of one step: the peak RSS (Linux VmHWM, reset through /proc/self/clear_refs),
the peak CUDA memory, and the bytes one attention layer keeps for its backward pass
(`saved_tensor_bytes`).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from pathlib import Path
from typing import Any


def peak_rss_of(step: Callable[[], Any]) -> tuple[float, float]:
    """(peak RSS during `step`, that peak minus the RSS before it), in MB (Linux)."""
    # Return freed heap pages to the system first, or the baseline hides the step's peak.
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    before = _status_kb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
    step()
    peak = _status_kb("VmHWM")
    return peak / 1024, (peak - before) / 1024


def peak_cuda_of(step: Callable[[], Any], device) -> float:
    """Peak MB torch's tensors occupy on the GPU during `step` (everything resident then
    counts: call it with nothing else of the benchmark alive)."""
    from lipnorm.train import device as devices

    devices.release_memory(device)
    devices.synchronize(device)
    devices.reset_peak_memory(device)
    step()
    devices.synchronize(device)
    return devices.peak_memory_mb(device)


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise ValueError(f"/proc/self/status has no field {field!r}")


def saved_tensor_bytes(layer, structure, feat) -> int:
    """Bytes the layer's forward keeps for backward (each storage counted once)."""
    import torch

    storages: dict[int, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        layer(structure, feat)
    # The input itself is not the layer's cost.
    storages.pop(feat.untyped_storage().data_ptr(), None)
    return sum(storages.values())
