"""Where a run computes: resolve `--device`, check that CUDA is usable, measure memory.

`resolve_device(text)` turns `cpu`, `cuda`, `cuda:N` or `auto` (CUDA if usable, else the
CPU) into a `torch.device`, or raises ValueError naming the value: a malformed string
names the allowed forms; a CUDA device that torch cannot see, or a DGL built without
CUDA, names the device and how to install DGL's CUDA build. Call it before anything is
loaded or written, so a refused device leaves nothing behind. The forms themselves are a
setting's (`lipnorm.settings.train_config.check_device`, `DEVICE_FORMS`), checked with the others.

CUDA needs both halves: torch with a visible GPU (`torch.cuda.is_available()`) and a DGL
build with CUDA kernels. DGL registers its CUDA device API as the global function
`device_api.cuda` only in its CUDA builds, so its presence is the probe (`nd.gpu(0).exist`
cannot tell "no CUDA build" from "no GPU").

Every device-specific call of the project goes through the functions here: `resolve_device`,
`use_device` (make current, deterministic kernels, reset the peak), `move` (put a tensor,
graph or module on the device), `synchronize`, `reset_peak_memory`, `release_memory`,
`peak_memory_mb`, and a GPU's generator state (`rng_state`, `set_rng_state`). On the CPU they do nothing (or read the resident set), so one code path
serves both; the tests replace torch's CUDA entry points by recording fakes and drive
`--device cuda` through these functions on a machine without a GPU.
"""

from __future__ import annotations

import os
import resource

import torch

from lipnorm.settings.train_config import check_device

# DGL's wheels for this stack (DGL 2.1, torch 2.2); PyPI and this project's registry have
# the CPU build only.
DGL_CUDA_INSTALL = (
    "pip install --force-reinstall --no-deps dgl==2.1.0 -f "
    "https://data.dgl.ai/wheels/torch-2.2/cu121/repo.html (CUDA 11.8: .../torch-2.2/cu118/"
    "repo.html; see docs/training.md, Devices)"
)


def dgl_has_cuda() -> bool:
    """Whether the installed DGL was built with CUDA (its CUDA device API is registered)."""
    from lipnorm.dgl_private import has_device_api  # loads libdgl, which registers them

    return has_device_api("cuda")


def cuda_problem(index: int | None = None) -> str | None:
    """Why CUDA device `index` (None: the current one) cannot be used, or None if it can."""
    if not torch.cuda.is_available():
        return (
            f"torch {torch.__version__} sees no CUDA device (torch.cuda.is_available() is "
            "False: no GPU, no driver, or a CPU-only torch)"
        )
    if index is not None and index >= torch.cuda.device_count():
        return f"torch sees {torch.cuda.device_count()} CUDA device(s), numbered from 0"
    if not dgl_has_cuda():
        import dgl

        return f"DGL {dgl.__version__} is a CPU-only build (it has no CUDA kernels)"
    return None


def resolve_device(text: str) -> torch.device:
    """The `torch.device` that `text` asks for, always with an index on CUDA.

    `cuda` is the current CUDA device (normally `cuda:0`; torch's own `torch.device("cuda")`
    has no index, which `torch.cuda.set_device` refuses); `auto` is that device if CUDA is
    usable, else the CPU.
    """
    check_device(text)
    if text == "cpu":
        return torch.device("cpu")
    if text == "auto":
        return _current_cuda() if cuda_problem() is None else torch.device("cpu")
    index = int(text.split(":")[1]) if ":" in text else None
    problem = cuda_problem(index)
    if problem is not None:
        raise ValueError(
            f"device {text!r} cannot be used: {problem}. A GPU run needs a CUDA GPU, torch "
            f"with CUDA (PyPI's torch 2.2.1 is one) and DGL's CUDA build, which is not on "
            f"PyPI: {DGL_CUDA_INSTALL}. Use --device cpu (or auto) otherwise"
        )
    return _current_cuda() if index is None else torch.device("cuda", index)


def _current_cuda() -> torch.device:
    return torch.device("cuda", torch.cuda.current_device())


def use_device(device: torch.device) -> None:
    """Make `device` current and, on CUDA, ask torch for deterministic kernels.

    Not every CUDA kernel has a deterministic version: DGL's GSpMM (its message passing:
    scatter-based sum/max) accumulates with atomics on CUDA, so its backward (and a sum's
    rounding order) can differ between runs; torch then warns rather than fails
    (`warn_only=True`). On the CPU nothing changes: runs are already bit-identical.
    """
    if device.type != "cuda":
        return
    # cuBLAS reads it when its first handle is created, i.e. before the first matmul.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.cuda.set_device(device)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True, warn_only=True)
    reset_peak_memory(device)


def move(item, device: torch.device):
    """`item` (a tensor, a DGLGraph or a module) on `device`: the one place data moves."""
    return item if device.type == "cpu" else item.to(device)


def synchronize(device: torch.device) -> None:
    """Wait for the work queued on `device` (a GPU runs asynchronously); a no-op on the CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def reset_peak_memory(device: torch.device) -> None:
    """Start `peak_memory_mb`'s count anew on a GPU (the CPU's peak RSS cannot be reset here:
    `lipnorm.bench` resets it through /proc)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def release_memory(device: torch.device) -> None:
    """Give the GPU memory torch caches but no tensor uses back to the driver, so that
    what one model leaves behind does not count for the next (a no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.empty_cache()


def rng_state(device: torch.device) -> torch.Tensor:
    """The state of `device`'s default random generator (a GPU's; for a run's saved state)."""
    return torch.cuda.get_rng_state(device)


def set_rng_state(device: torch.device, state: torch.Tensor) -> None:
    """Restore `device`'s default random generator to `state` (from `rng_state`)."""
    torch.cuda.set_rng_state(state, device)


def peak_memory_mb(device: torch.device) -> float:
    """Peak memory in MB on `device`: the largest total that torch's tensors occupied on the
    GPU since the last `reset_peak_memory` (not the allocator's cached reserve, nor the CUDA
    context); the peak resident set size of the whole process on the CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
