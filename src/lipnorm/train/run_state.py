"""The saved training state of an unfinished run, so that a stopped run resumes where it
stopped (not to be confused with activation checkpointing, which trades memory for compute).

`lipnorm train --out RUN_DIR` keeps its state in `state_path(RUN_DIR)`, the file
`RUN_DIR.state.pt` beside the run directory: outside it, since the run directory appears in
one rename when the run is done (`lipnorm.io.atomic_dir`), and outside the workflow's
declared outputs, which Snakemake deletes after a failed job, before its retry.

File format: one ASCII header line `lipnorm-run-state FORMAT LENGTH SHA256`, then LENGTH
bytes of `torch.save` output whose SHA-256 is SHA256. A truncated or corrupt file fails
the length or the checksum (`UnreadableState`); the payload is read with
`torch.load(weights_only=True)`, so a state file holds data, never code. Writes are
atomic (a temporary file beside it, flushed to disk, then renamed): a kill during a save
leaves the previous state.

What a training step draws random numbers from: torch's global generator (dropout; on a
GPU, the device's CUDA generator). Python's `random` and numpy's global generator are
seeded and saved too (`RandomStreams`), as is any stream registered with it (e.g. a
`lipnorm.nn.dropedge.DropEdge`). DGL's generator (`dgl.seed`) exposes no state to save,
and nothing in a training step draws from it (it serves DGL's samplers and
`dgl.random.choice`); `tests/train/test_run_state.py` checks that a step leaves it untouched.
"""

from __future__ import annotations

import glob
import hashlib
import io
import os
import random
import signal
import threading
from pathlib import Path
from typing import Any, Mapping, Protocol

import numpy as np
import torch

from lipnorm.train import device as devices

from lipnorm.io import atomic_path

STATE_FORMAT = 1
MAGIC = "lipnorm-run-state"
SUFFIX = ".state.pt"
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def state_path(out: str | os.PathLike) -> Path:
    """Where the run writing the run directory `out` keeps its training state."""
    out = Path(out)
    return out.with_name(out.name + SUFFIX)


class UnreadableState(Exception):
    """A state file that cannot be read back: truncated, corrupt or not a state file."""


def write_state(path: str | os.PathLike, state: Mapping[str, Any]) -> None:
    """Write `state` (tensors, numbers, strings, None and containers of them) to `path`
    atomically, flushed to disk before the rename."""
    buffer = io.BytesIO()
    torch.save(dict(state), buffer)
    payload = buffer.getbuffer()
    header = f"{MAGIC} {STATE_FORMAT} {len(payload)} {hashlib.sha256(payload).hexdigest()}\n"
    with atomic_path(path) as tmp, open(tmp, "wb") as file:
        file.write(header.encode("ascii"))
        file.write(payload)
        file.flush()
        # A node that crashes after the rename must not leave a renamed, empty file.
        os.fsync(file.fileno())


def read_state(path: str | os.PathLike) -> dict[str, Any]:
    """The state written by `write_state` to `path`.

    Raises `UnreadableState` naming what is wrong (not a state file, truncated, checksum
    mismatch, unloadable) and `ValueError` for a state of another file format (a state
    written by another version of lipnorm, which is refused, not discarded).
    """
    raw = Path(path).read_bytes()
    line, newline, payload = raw.partition(b"\n")
    fields = line.split(b" ")
    if not newline or len(fields) != 4 or fields[0] != MAGIC.encode() or not fields[2].isdigit():
        raise UnreadableState(f"{path} is not a lipnorm training state (no valid header line)")
    version, length, digest = fields[1].decode(errors="replace"), int(fields[2]), fields[3].decode(errors="replace")
    if version != str(STATE_FORMAT):
        raise ValueError(
            f"training state {path} has file format {version}, this lipnorm reads format "
            f"{STATE_FORMAT}: it is not reused; delete it to start the run over"
        )
    if len(payload) != length:
        raise UnreadableState(f"{path} is truncated or overlong: {len(payload)} bytes of {length}")
    if hashlib.sha256(payload).hexdigest() != digest:
        raise UnreadableState(f"{path} is corrupt: its SHA-256 does not match its header")
    try:
        return torch.load(io.BytesIO(payload), map_location="cpu", weights_only=True)
    except Exception as err:  # whatever unpickling raises, the file is unusable
        raise UnreadableState(f"{path} cannot be loaded: {err}") from err


def remove_stale_temporaries(path: str | os.PathLike) -> None:
    """Delete the temporary files that saves to `path` killed mid-write left behind (a path
    has one writer at a time, so none is in use)."""
    path = Path(path)
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        stale.unlink(missing_ok=True)


def differences(saved: Mapping[str, Any], current: Mapping[str, Any], prefix: str = "") -> list[str]:
    """`key: X in the state, Y now` for every key whose value differs (or is absent on one side)."""
    absent = object()
    lines = []
    for key in sorted(set(saved) | set(current)):
        before, now = saved.get(key, absent), current.get(key, absent)
        if before != now:
            lines.append(
                f"{prefix}{key}: {'absent' if before is absent else repr(before)} in the state, "
                f"{'absent' if now is absent else repr(now)} now"
            )
    return lines


def check_resumable(
    state: Mapping[str, Any],
    config: Mapping[str, Any],
    versions: Mapping[str, str],
    path: str | os.PathLike,
    ignored: tuple[str, ...] = (),
) -> None:
    """ValueError naming every setting and version that differs between the run that saved
    `state` and this one (`config`, `versions`); settings in `ignored` may differ."""
    saved_config = {key: value for key, value in state["config"].items() if key not in ignored}
    current = {key: value for key, value in config.items() if key not in ignored}
    found = differences(saved_config, current) + differences(state["versions"], versions, "versions.")
    if found:
        raise ValueError(
            f"training state {path} was saved by a run with other settings or versions "
            f"({'; '.join(found)}): it is not reused; rerun with the settings it was saved "
            "with to resume, or delete it to start the run over"
        )


class RandomStream(Protocol):
    """A source of random numbers whose position can be saved and restored."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class PythonRandom:
    """Python's global `random` generator."""

    def state_dict(self) -> dict[str, Any]:
        return {"state": random.getstate()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        random.setstate(state["state"])


class NumpyRandom:
    """numpy's global (legacy `np.random.seed`) Mersenne Twister."""

    def state_dict(self) -> dict[str, Any]:
        name, key, position, has_gauss, gauss = np.random.get_state()
        # A list of ints, not an array: `torch.load(weights_only=True)` refuses numpy arrays.
        return {"name": name, "key": key.tolist(), "position": position, "has_gauss": has_gauss, "gauss": gauss}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        key = np.asarray(state["key"], dtype=np.uint32)
        np.random.set_state((state["name"], key, state["position"], state["has_gauss"], state["gauss"]))


class TorchRandom:
    """torch's global CPU generator and, on a GPU, that device's default generator."""

    def __init__(self, device: torch.device):
        self.device = torch.device(device)

    def state_dict(self) -> dict[str, Any]:
        state = {"cpu": torch.get_rng_state()}
        if self.device.type == "cuda":
            state["cuda"] = devices.rng_state(self.device)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        torch.set_rng_state(state["cpu"])
        if self.device.type == "cuda":
            devices.set_rng_state(self.device, state["cuda"])


class RandomStreams:
    """Every random stream a training run draws from, saved and restored together.

    The process-wide generators are registered from the start (`python`, `numpy`,
    `torch`); a component with its own generator (DropEdge, a sampler) registers itself
    with `register`, so that it is saved and resumed too.
    """

    def __init__(self, device: torch.device):
        self.streams: dict[str, RandomStream] = {
            "python": PythonRandom(), "numpy": NumpyRandom(), "torch": TorchRandom(device)
        }

    def register(self, name: str, stream: RandomStream) -> None:
        if name in self.streams:
            raise ValueError(f"a random stream named {name!r} is already registered")
        for method in ("state_dict", "load_state_dict"):
            if not callable(getattr(stream, method, None)):
                raise ValueError(f"random stream {name!r} ({stream!r}) has no {method}() method")
        self.streams[name] = stream

    def state_dict(self) -> dict[str, dict[str, Any]]:
        return {name: stream.state_dict() for name, stream in self.streams.items()}

    def load_state_dict(self, states: Mapping[str, dict[str, Any]]) -> None:
        if set(states) != set(self.streams):
            raise ValueError(
                f"saved random streams {sorted(states)} are not this run's {sorted(self.streams)}"
            )
        for name, stream in self.streams.items():
            stream.load_state_dict(states[name])


class StopSignals:
    """While active, SIGTERM and SIGINT ask the training loop to stop (`requested`) instead
    of ending the process; a second one has the signal's previous effect at once.

    A signal that the process ignores (e.g. SIGINT in a job started with `&` by a
    non-interactive shell) stays ignored. Outside the main thread, where Python cannot
    install handlers, nothing is installed and the signals keep their effect.
    """

    def __init__(self) -> None:
        self.signal_number: int | None = None
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        return self.signal_number is not None

    @property
    def name(self) -> str:
        return signal.Signals(self.signal_number).name

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                if signal.getsignal(signum) is not signal.SIG_IGN:
                    self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info) -> None:
        self._restore()

    def _restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame) -> None:
        if self.signal_number is None:
            self.signal_number = signum
            return
        previous = self._previous.get(signum, signal.SIG_DFL)
        self._restore()
        if callable(previous):  # e.g. Python's SIGINT handler, raising KeyboardInterrupt
            previous(signum, frame)
        else:
            os.kill(os.getpid(), signum)


class RunInterrupted(Exception):
    """The run stopped on a signal after saving its training state; the same command
    resumes it. `exit_code` is the shell's for a process ended by that signal (128 + N:
    143 for SIGTERM, 130 for SIGINT), a failure that Snakemake and SLURM retry."""

    def __init__(self, signal_number: int, epoch: int, path: Path):
        self.signal_number, self.epoch, self.path = signal_number, epoch, path
        super().__init__(
            f"stopped by {signal.Signals(signal_number).name} after epoch {epoch}; "
            f"training state saved to {path}"
        )

    @property
    def exit_code(self) -> int:
        return 128 + self.signal_number
