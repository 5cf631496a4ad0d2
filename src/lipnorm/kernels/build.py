"""Building, caching and loading the compiled kernels (`csrc/`), safely on a shared machine.

The library is compiled with the C compiler at hand (``$CC``, else ``cc`` or ``gcc``) for
the CPU at hand (``-march=native``) and cached under a name that hashes everything its
bits depend on: the sources, the flags, the compiler and its version, and the target the
compiler resolves ``-march=native`` to (so a cache in a home folder shared by nodes of
different CPUs keeps one build per CPU, on every architecture).

The cache (``$LIPNORM_KERNEL_CACHE``, else ``$XDG_CACHE_HOME/lipnorm/kernels``, else
``~/.cache/lipnorm/kernels``) is created private (0700). Before a library is loaded, its
folder and the file itself must belong to the user and be writable by nobody else: a
library in a folder that others can write to is code that others can run in your jobs.
One process builds at a time (a file lock in the folder), so parallel jobs on an empty
cache build once; a build that takes longer than ``$LIPNORM_KERNEL_BUILD_TIMEOUT``
seconds (default 300) is stopped. Every failure is a `KernelsUnavailable` naming what
failed and how to fix it; the caller decides between falling back and refusing
(`lipnorm.kernels`).
"""

from __future__ import annotations

import ctypes
import dataclasses
import fcntl
import hashlib
import os
import platform
import shlex
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

__all__ = ["KernelsUnavailable", "Library", "build", "library_path", "cache_dir", "SOURCE_DIR", "FLAGS", "NATIVE"]

SOURCE_DIR = Path(__file__).with_name("csrc")
# Value-safe optimisation only: no -ffast-math; no contraction of a * b + c into an FMA
# other than the kernels' explicit ones, whatever the compiler's default; -fopenmp-simd for
# the loops marked independent (gcc >= 4.9, clang >= 3.9).
FLAGS = ("-O3", "-ffp-contract=off", "-fno-trapping-math", "-fopenmp-simd", "-std=c99", "-shared", "-fPIC")
NATIVE = "-march=native"
DEFAULT_BUILD_TIMEOUT_S = 300.0


class KernelsUnavailable(RuntimeError):
    """The kernels cannot be built or loaded here: `reason` says what failed, `fix` what to do."""

    def __init__(self, reason: str, fix: str):
        super().__init__(f"{reason}; {fix}")
        self.reason, self.fix = reason, fix


@dataclasses.dataclass(frozen=True)
class Library:
    """A loaded build: the ctypes handle and what produced it (recorded with every run)."""

    handle: ctypes.CDLL
    path: Path
    compiler: str
    compiler_version: str
    flags: tuple[str, ...]
    target: str  # what the compiler resolved the target flag to

    def record(self) -> dict[str, object]:
        return {
            "library": str(self.path), "compiler": self.compiler, "compiler_version": self.compiler_version,
            "flags": list(self.flags), "target": self.target,
        }


def cache_dir() -> Path:
    """Where built libraries are kept (see the module docstring)."""
    if os.environ.get("LIPNORM_KERNEL_CACHE"):
        return Path(os.environ["LIPNORM_KERNEL_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "lipnorm" / "kernels"


def build_timeout() -> float:
    text = os.environ.get("LIPNORM_KERNEL_BUILD_TIMEOUT", "")
    if not text:
        return DEFAULT_BUILD_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise KernelsUnavailable(
            f"LIPNORM_KERNEL_BUILD_TIMEOUT={text!r} is not a number of seconds > 0", "set it to one, e.g. 300, or unset it"
        )
    return value


def _compiler() -> str:
    named = os.environ.get("CC")
    found = shutil.which(named) if named else shutil.which("cc") or shutil.which("gcc")
    if found is None:
        if named:
            raise KernelsUnavailable(f"the C compiler CC={named!r} was not found", "set CC to an installed C compiler")
        raise KernelsUnavailable("no C compiler found", "install gcc (or clang), or set CC")
    return found


def _run(command: list[str], timeout: float) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise KernelsUnavailable(
            f"{' '.join(command[:2])} ... did not finish within {timeout:g} s",
            "raise LIPNORM_KERNEL_BUILD_TIMEOUT, or build once on an idle machine",
        ) from None
    except OSError as error:
        raise KernelsUnavailable(f"cannot run {command[0]}: {error}", "set CC to a working C compiler") from None


def _compiler_version(compiler: str) -> str:
    done = _run([compiler, "--version"], timeout=60)
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0] if lines else "unknown"


def _target(compiler: str, march: str) -> str:
    """What `march` compiles for: the machine options of the compiler's own expansion of
    it (``-###`` prints the resolved CPU and its features on every architecture: gcc's
    ``-march=znver3 -mavx2 ...``, clang's ``-target-cpu ... -target-feature ...``), else
    the CPU's description."""
    done = _run([compiler, march, "-###", "-x", "c", "-c", os.devnull, "-o", os.devnull], timeout=60)
    commands = [_words(line) for line in done.stderr.splitlines()]
    # the compiler proper's command, named by its program (gcc's cc1, clang's -cc1), not
    # by a substring: the assembler's line names a temporary file such as /tmp/cc1XyZab.s
    proper = [tokens for tokens in commands if tokens and (Path(tokens[0]).name == "cc1" or "-cc1" in tokens)]
    if done.returncode == 0 and proper:
        tokens = proper[-1]
        # the instruction set and tuning; not gcc's --param cache sizes, which a VM may
        # report differently from one call to the next
        with_value = ("-target-cpu", "-target-feature", "-target-abi", "-tune-cpu")
        kept = [
            token for before, token in zip(["", *tokens], tokens)
            if token.startswith("-m") or token in with_value or before in with_value
        ]
        if kept:
            return " ".join(kept)
    return f"{march} on {cpu_description()}"


def _words(line: str) -> list[str]:
    """A line of ``-###`` output as the shell would split it; [] if it is not one."""
    try:
        return shlex.split(line)
    except ValueError:
        return []


def cpu_description() -> str:
    """The CPU's model and features as the kernel reports them (x86-64: model name and
    flags; Arm: implementer, part and features), else what `platform` knows."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or platform.machine()
    keys = ("model name", "flags", "CPU implementer", "CPU architecture", "CPU part", "Features", "isa", "cpu model")
    wanted, seen = [], set()
    for line in lines:
        key = line.split(":", 1)[0].strip()
        if key in keys and key not in seen:
            seen.add(key)
            wanted.append(line.strip())
    return "\n".join(wanted) or platform.processor() or platform.machine()


def cpu_model() -> str:
    """The CPU's model name (one line), for a run's record."""
    for line in cpu_description().splitlines():
        if line.startswith(("model name", "CPU part")):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _check_private(path: Path) -> None:
    """Refuse a file or folder that another user owns or that others may write to."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) and path.name.endswith(".so"):
        raise KernelsUnavailable(f"{path} is a symbolic link", "delete it; the kernel cache holds plain files only")
    if stat.S_ISLNK(info.st_mode):  # a cache folder may be a link: its target is what counts
        info = os.stat(path)
    user = os.geteuid()
    if info.st_uid != user:
        raise KernelsUnavailable(
            f"{path} belongs to user id {info.st_uid}, not to you ({user})",
            "point LIPNORM_KERNEL_CACHE at a folder of your own",
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise KernelsUnavailable(
            f"{path} is writable by group or others (mode {stat.S_IMODE(info.st_mode):04o})",
            f"run `chmod go-w {path}`, or point LIPNORM_KERNEL_CACHE at a private folder",
        )


def _private_folder(folder: Path) -> None:
    """`folder` and its missing parents created 0700; the folder itself checked private."""
    missing = []
    for path in (folder, *folder.parents):
        if path.exists():
            break
        missing.append(path)
    try:
        for path in reversed(missing):
            path.mkdir(mode=0o700)
    except FileExistsError:
        pass  # a parallel job made it: checked below like any other
    except OSError as error:
        raise KernelsUnavailable(
            f"cannot create the kernel cache {folder}: {error}", "point LIPNORM_KERNEL_CACHE at a writable folder"
        ) from None
    _check_private(folder)


@dataclasses.dataclass(frozen=True)
class _Plan:
    compiler: str
    version: str
    target: str
    flags: tuple[str, ...]
    library: Path  # named by a hash of everything the build's bits depend on


def _plan(march: str, cache: Path, source_dir: Path) -> _Plan:
    compiler = _compiler()
    version = _compiler_version(compiler)
    target = _target(compiler, march)
    flags = (*FLAGS, march)
    sources = "\n".join(
        f"// {path.name}\n{path.read_text()}" for path in sorted(source_dir.iterdir()) if path.suffix in (".c", ".h")
    )
    key = hashlib.sha256("\0".join([sources, " ".join(flags), compiler, version, platform.machine(), target]).encode())
    return _Plan(compiler, version, target, flags, cache / f"kernels-{key.hexdigest()[:16]}.so")


def library_path(march: str = NATIVE, cache: Path | None = None, source_dir: Path | None = None) -> Path:
    """Where `build` keeps (or will keep) the library for these arguments."""
    return _plan(march, cache or cache_dir(), source_dir or SOURCE_DIR).library


def build(march: str = NATIVE, cache: Path | None = None, source_dir: Path | None = None) -> Library:
    """The kernels compiled for `march` (a target flag, e.g. ``-march=x86-64``), cached in
    `cache` (default `cache_dir()`), from the sources in `source_dir` (default this
    package's; benchmarks pass another revision's), and loaded; `KernelsUnavailable` if not."""
    source_dir = source_dir or SOURCE_DIR
    cache = cache or cache_dir()
    plan = _plan(march, cache, source_dir)
    library = plan.library
    _private_folder(cache)
    if not library.exists():
        _build_once(plan.compiler, plan.flags, source_dir, library)
    _check_private(library)
    try:
        handle = ctypes.CDLL(str(library))
    except OSError as error:
        raise KernelsUnavailable(
            f"cannot load {library}: {error}",
            f"delete {library} to rebuild it; if the cache lies on a noexec filesystem, point "
            "LIPNORM_KERNEL_CACHE at one that allows executables",
        ) from None
    _declare(handle)
    return Library(handle, library, plan.compiler, plan.version, plan.flags, plan.target)


def _build_once(compiler: str, flags: tuple[str, ...], source_dir: Path, library: Path) -> None:
    """Compile into `library` under the cache's lock: the first process builds, the
    others wait and find it built. Written whole or not at all (a temporary name, then a
    rename)."""
    try:
        lock = open(library.parent / "build.lock", "a")
    except OSError as error:
        raise KernelsUnavailable(
            f"cannot write to the kernel cache {library.parent}: {error}",
            "make it writable, or point LIPNORM_KERNEL_CACHE at a writable folder",
        ) from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if library.exists():
            return
        try:
            with tempfile.TemporaryDirectory(dir=library.parent) as work:
                built = Path(work) / library.name
                done = _run(
                    [compiler, *flags, "-o", str(built), str(source_dir / "kernels.c"), "-lm"], timeout=build_timeout()
                )
                if done.returncode != 0:
                    raise KernelsUnavailable(
                        f"{compiler} failed to build the kernels: {done.stderr.strip()[:500] or done.returncode}",
                        "set CC to a C99 compiler that takes -fopenmp-simd (gcc >= 4.9, clang >= 3.9)",
                    )
                os.chmod(built, 0o700)
                os.replace(built, library)
        except OSError as error:
            raise KernelsUnavailable(
                f"cannot build the kernels in {library.parent}: {error}", "point LIPNORM_KERNEL_CACHE at a writable folder"
            ) from None


def _declare(handle: ctypes.CDLL) -> None:
    """The argument types of every kernel, both builds (`csrc/*.h` have the signatures)."""
    pointer, size = ctypes.c_void_p, ctypes.c_int64
    for suffix, real in (("f32", ctypes.c_float), ("f64", ctypes.c_double)):
        attention = [size] * 4 + [pointer] * 3 + [pointer] * 3 + [pointer] * 2 + [ctypes.c_int, real, real, real]
        getattr(handle, f"gat_attention_forward_{suffix}").argtypes = attention + [pointer] * 8
        getattr(handle, f"gat_attention_backward_{suffix}").argtypes = attention + [pointer] * 12
        getattr(handle, f"grouped_linear_forward_{suffix}").argtypes = [size] * 4 + [pointer] * 3
        getattr(handle, f"grouped_linear_backward_{suffix}").argtypes = [size] * 4 + [pointer] * 5
        getattr(handle, f"dgn_sums_{suffix}").argtypes = [size] * 4 + [pointer] * 5
        getattr(handle, f"dgn_apply_{suffix}").argtypes = [size] * 4 + [pointer] * 5
        getattr(handle, f"dgn_backward_{suffix}").argtypes = [size] * 4 + [pointer] * 8
        getattr(handle, f"pairnorm_forward_{suffix}").argtypes = [size] * 3 + [pointer] + [ctypes.c_double] * 2 + [pointer] * 3
        getattr(handle, f"pairnorm_backward_{suffix}").argtypes = (
            [size] * 3 + [pointer] * 2 + [ctypes.c_double] + [pointer] * 4
        )
