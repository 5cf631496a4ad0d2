"""When the compiled kernels run: the switch, the one rule, the warning, the record.

``LIPNORM_KERNELS`` (read at each call):

- ``auto`` (default): the kernels are built on first use; where they cannot be, every
  layer takes its torch or DGL path, with one `KernelsWarning` per process that names the
  reason and the fix.
- ``on``: the same, except that kernels that cannot be built or loaded are an error
  (`KernelsUnavailable`), raised at the first use and by `lipnorm train` before it loads
  anything: for a grid whose plan assumes the fast path.
- ``off``: never built nor loaded; every layer takes its torch or DGL path.

The rule, the same for every kernel (`use`): a call runs in its kernel where the caller's
form applies (e.g. a whole homogeneous graph for GAT's attention), its tensors are CPU
float32 or float64 of one type, and the kernels are available (not ``off``, not inside
`kernels_off`, built and loaded). Each decision is recorded by kernel family: `record()`
gives the paths each family took in this process, with the CPU, compiler and flags, for
a run's ``summary.json``.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import platform
import warnings

import torch

from lipnorm.kernels.build import KernelsUnavailable, Library, build, cpu_model

__all__ = [
    "MODES", "FAMILIES", "KernelsWarning", "mode", "library", "unavailable", "require", "use", "kernels_off", "record",
    "reset",
]

MODES = ("auto", "on", "off")
# Each kernel family and the path its callers take without it.
FAMILIES = {"gat_attention": "dgl", "grouped_linear": "torch", "dgn": "torch", "pairnorm": "torch"}
DTYPES = (torch.float32, torch.float64)

_log = logging.getLogger("lipnorm.kernels")
_OFF: list[str] = []  # why the kernels are off meanwhile (`kernels_off`), innermost last
_PATHS: dict[str, set[str]] = {}
_WARNED: list[str] = []


class KernelsWarning(RuntimeWarning):
    """The compiled kernels are unavailable and the slower torch and DGL paths run."""


def mode() -> str:
    """``LIPNORM_KERNELS``: auto (default), on or off."""
    value = os.environ.get("LIPNORM_KERNELS", "") or "auto"
    if value not in MODES:
        raise ValueError(f"LIPNORM_KERNELS={value!r} is not a mode; allowed: {', '.join(MODES)}")
    return value


@functools.lru_cache(maxsize=1)
def _loaded() -> Library | KernelsUnavailable:
    try:
        return build()
    except KernelsUnavailable as error:
        return error
    except OSError as error:  # e.g. a file of the cache removed by another job meanwhile
        return KernelsUnavailable(f"cannot build or load the kernels: {error}", "run again; if it persists, delete the cache")


def library() -> Library:
    """The loaded kernels; `KernelsUnavailable` where they cannot be had (whatever the mode)."""
    loaded = _loaded()
    if isinstance(loaded, KernelsUnavailable):
        raise loaded
    return loaded


def unavailable() -> str | None:
    """None where the kernels run; else why not (a sentence). Under ``auto`` the first
    failure warns once; under ``on`` it raises `KernelsUnavailable`."""
    if _OFF:
        return _OFF[-1]
    current = mode()
    if current == "off":
        return "LIPNORM_KERNELS=off"
    loaded = _loaded()
    if not isinstance(loaded, KernelsUnavailable):
        return None
    if current == "on":
        raise KernelsUnavailable(f"LIPNORM_KERNELS=on, but the compiled kernels are unavailable: {loaded.reason}", loaded.fix)
    if not _WARNED:
        _WARNED.append(loaded.reason)
        message = (
            f"lipnorm's compiled kernels are unavailable: {loaded.reason}. Fix: {loaded.fix}. Until then the layers "
            "take their torch and DGL paths (the same results to float rounding, several times slower on small "
            "graphs). LIPNORM_KERNELS=off takes those paths without this warning; LIPNORM_KERNELS=on makes it an error."
        )
        warnings.warn(message, KernelsWarning, stacklevel=3)
        _log.warning(message)
    return loaded.reason


def require() -> None:
    """Under ``on``: `KernelsUnavailable` unless the kernels load (`lipnorm train` asks
    first, so that a grid planned on them never runs without them). Else nothing."""
    if mode() == "on":
        unavailable()


def use(family: str, *tensors: torch.Tensor, applies: bool = True) -> bool:
    """The rule (module docstring): whether this call of `family` runs in its kernel.
    `applies`: the caller's own conditions on the call's form. Recorded either way."""
    compiled = (
        applies
        and tensors[0].dtype in DTYPES
        and all(tensor.device.type == "cpu" and tensor.dtype == tensors[0].dtype for tensor in tensors)
        and unavailable() is None
    )
    _PATHS.setdefault(family, set()).add("compiled" if compiled else FAMILIES[family])
    return compiled


@contextlib.contextmanager
def kernels_off(reason: str):
    """Inside: no kernel runs (`unavailable()` gives `reason`). One thread of Python at a time."""
    _OFF.append(reason)
    try:
        yield
    finally:
        _OFF.pop()


def record() -> dict[str, object]:
    """What ran in this process, for a run's record: the mode, the paths each kernel
    family took (``compiled`` or its fallback), the machine, and, where the kernels were
    loaded, the library, compiler, its version, the flags and the resolved target (else
    why they were not)."""
    out: dict[str, object] = {
        "mode": mode(),
        "paths": {family: sorted(paths) for family, paths in sorted(_PATHS.items())},
        "cpu": cpu_model(),
        "machine": platform.machine(),
    }
    if _loaded.cache_info().currsize:
        loaded = _loaded()
        if isinstance(loaded, KernelsUnavailable):
            out["unavailable"] = loaded.reason
        else:
            out.update(loaded.record())
    return out


def reset(paths_only: bool = False) -> None:
    """Forget the paths taken (a run's record starts here); unless `paths_only`, also the
    loaded library and the warning given (the environment changed: tests)."""
    _PATHS.clear()
    if not paths_only:
        _loaded.cache_clear()
        _WARNED.clear()
