"""Where each dataset's raw files come from, and how they are fetched and trusted.

Layout under the dataset root (`raw_dir` for DGL, `root` for OGB):

* DGL datasets live in `<root>/<dgl name>_<sha1(url)[:8]>/`, the folder DGL itself
  would use (`DGLDataset.raw_path`), so DGL loads them with no network access and
  writes its processed cache beside them.
* ogbn-arxiv lives in `<root>/ogbn_arxiv/`, the folder OGB's
  `DglNodePropPredDataset(root=<root>)` uses.

An archive comes either from a mirror, at `<mirror>/<path of its URL>` (DGL:
`dataset/<name>.zip`; OGB: `ogb/data/nodeproppred/arxiv.zip`), or from the network
through DGL's / OGB's own download functions. It is extracted member by member into
a temporary folder (members escaping it are refused), its raw files are checked,
and only then is the folder renamed into place: a failed or interrupted fetch never
leaves a dataset folder behind.

What each dataset's raw files are (`lipnorm.registry.RawFiles`: archive, files, pinned
sums) is registered in its module of `lipnorm.datasets`; `SOURCES` reads it from there.

Checksums: cora and citeseer have pinned SHA-256 sums (the planetoid release). The
other datasets' files are not available here, so their sums are recorded on first
fetch into `SHA256SUMS.lock` inside the dataset folder (trust on first use, with a
warning) and every later load is verified against that file.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import hashlib
import importlib.util
import os
import shutil
import tempfile
import warnings
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from collections.abc import Mapping
from typing import Iterator
from urllib.parse import urlparse

from lipnorm import registry
from lipnorm.data.dataset import DatasetError
from lipnorm.io import atomic_dir, atomic_path

MIRROR_ENV = "LIPNORM_DATA_MIRROR"
LOCK_NAME = "SHA256SUMS.lock"

class UnpinnedChecksumWarning(UserWarning):
    """A dataset's raw files were trusted on first use (no pinned sums exist here)."""


@dataclass(frozen=True)
class Source:
    """One downloadable dataset: its archive, its folder and the raw files it needs
    (what its module of `lipnorm.datasets` registered as its `lipnorm.registry.RawFiles`)."""

    name: str
    kind: str  # "dgl" or "ogb"
    base_name: str  # DGL's dataset name (folder prefix) or OGB's dataset name
    required: tuple[str, ...]  # raw files the loader parses, relative to the folder
    sha256: Mapping[str, str] | None = None  # pinned sums; None: recorded on first fetch

    @classmethod
    def of(cls, name: str) -> "Source":
        """The source of registered dataset `name` (a KeyError where it has no raw files)."""
        entry = registry.DATASETS.get(name)
        if entry is None or entry.raw is None:
            raise KeyError(name)
        raw = entry.raw
        return cls(name, raw.kind, raw.archive, raw.files, raw.sha256)

    @property
    def pinned(self) -> dict[str, str] | None:
        return None if self.sha256 is None else dict(self.sha256)

    def url(self) -> str:
        if self.kind == "dgl":
            from dgl.data.utils import _get_dgl_url  # honours DGL_REPO, as DGL does

            return _get_dgl_url(f"dataset/{self.base_name}.zip")
        return _ogb_meta(self.base_name)["url"]

    def mirror_path(self) -> str:
        """Path of the archive under a mirror: the path of its URL on the server."""
        if self.kind == "dgl":
            return f"dataset/{self.base_name}.zip"
        return urlparse(self.url()).path.lstrip("/")

    def folder_name(self) -> str:
        if self.kind == "dgl":
            # DGLDataset.raw_path: name + "_" + sha1(str(url)).hexdigest()[:8]
            return f"{self.base_name}_{hashlib.sha1(str(self.url()).encode('utf-8')).hexdigest()[:8]}"
        return "_".join(self.base_name.split("-"))

    def archive_prefix(self) -> str | None:
        """Top folder inside the zip to strip (OGB zips hold `<download_name>/...`)."""
        return None if self.kind == "dgl" else _ogb_meta(self.base_name)["download_name"]


class _Sources(Mapping):
    """The `Source` of each registered dataset with raw files, read from the registry
    when asked (a dataset registered later is in it)."""

    def __getitem__(self, name: str) -> Source:
        return Source.of(name)

    def __iter__(self) -> Iterator[str]:
        return iter([name for name, entry in registry.DATASETS.items() if entry.raw is not None])

    def __len__(self) -> int:
        return len(list(iter(self)))


class _Pinned(Mapping):
    """The pinned SHA-256 sums of each registered dataset that pins them, by raw file."""

    def __getitem__(self, name: str) -> dict[str, str]:
        pinned = SOURCES[name].pinned
        if pinned is None:
            raise KeyError(name)
        return pinned

    def __iter__(self) -> Iterator[str]:
        return iter([name for name in SOURCES if SOURCES[name].pinned is not None])

    def __len__(self) -> int:
        return len(list(iter(self)))


# Every dataset's source, and the sums pinned (cora's and citeseer's: `lipnorm.datasets.planetoid`).
SOURCES: Mapping[str, Source] = _Sources()
PINNED_SHA256: Mapping[str, dict[str, str]] = _Pinned()


def _ogb_meta(ogb_name: str) -> dict[str, str]:
    """OGB's own metadata row (URL, download name) from the installed `ogb` package.

    Located without importing `ogb`, whose import starts a PyPI version check.
    """
    spec = importlib.util.find_spec("ogb")
    master = Path(spec.submodule_search_locations[0]) / "nodeproppred" / "master.csv"
    with open(master, newline="") as handle:
        rows = list(csv.reader(handle))
    column = rows[0].index(ogb_name)
    return {row[0]: row[column] for row in rows[1:]}


def resolve_mirror(mirror: str | os.PathLike | None) -> Path | None:
    """The mirror to use: the argument, else $LIPNORM_DATA_MIRROR, else none."""
    if mirror is None:
        mirror = os.environ.get(MIRROR_ENV) or None
    return None if mirror is None else Path(mirror)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextlib.contextmanager
def _exclusive(root: Path, folder_name: str) -> Iterator[None]:
    """Serialise fetch and first processing of one dataset across processes
    (parallel workflow jobs), so DGL's cache is never read half-written."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        handle = open(root / f".{folder_name}.fetch-lock", "a")
    except OSError as err:
        raise DatasetError(
            f"dataset root {root} is not a writable folder ({err}); "
            "DGL and OGB write their processed cache there"
        ) from err
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def prepared(
    source: Source, root: str | os.PathLike, mirror=None, verify: bool = True
) -> Iterator[Path]:
    """Yield the verified raw folder of `source`, fetching it first if absent.

    The cross-process lock is held while the caller parses the folder.
    """
    root = Path(root)
    folder = root / source.folder_name()
    with _exclusive(root, folder.name):
        if folder.is_dir():
            _check_folder(source, folder, verify)
        else:
            _install(source, folder, resolve_mirror(mirror), verify)
        yield folder


def _install(source: Source, folder: Path, mirror: Path | None, verify: bool) -> None:
    url = source.url()
    with atomic_dir(folder) as staging:
        if mirror is not None:
            _extract_zip(_mirror_archive(source, url, mirror), staging, source.archive_prefix())
        else:
            with tempfile.TemporaryDirectory(prefix=".download-", dir=folder.parent) as scratch:
                archive = _download(source, url, Path(scratch))
                _extract_zip(archive, staging, source.archive_prefix())
        _check_folder(source, staging, verify, fresh=True, final=folder)
        staging.chmod(0o755)  # mkdtemp makes it private; a dataset folder is shared data


def _mirror_archive(source: Source, url: str, mirror: Path) -> Path:
    if not mirror.is_dir():
        raise DatasetError(
            f"dataset mirror folder {mirror} does not exist "
            f"(set by --mirror or ${MIRROR_ENV}); it should hold {source.mirror_path()}"
        )
    archive = mirror / source.mirror_path()
    if not archive.is_file():
        raise DatasetError(
            f"mirror {mirror} has no {source.mirror_path()} for dataset {source.name!r} "
            f"(the archive downloaded from {url})"
        )
    return archive


def _download(source: Source, url: str, scratch: Path) -> Path:
    try:
        if source.kind == "dgl":
            from dgl.data.utils import download

            return Path(download(url, path=str(scratch / Path(url).name), log=False))
        from ogb.utils.url import download_url

        return Path(download_url(url, str(scratch), log=False))
    except (OSError, RuntimeError) as err:  # requests/urllib errors are OSErrors
        raise DatasetError(
            f"could not download dataset {source.name!r} from {url} ({err}). "
            f"Without internet access, use a mirror of the data server: "
            f"`--mirror DIR` or {MIRROR_ENV}=DIR, with the archive at DIR/{source.mirror_path()}"
        ) from err


def _extract_zip(archive: Path, dest: Path, prefix: str | None) -> None:
    """Extract `archive` into `dest`, refusing members that would land outside it.

    With `prefix`, every member must lie under that top folder, which is stripped.
    """
    try:
        with zipfile.ZipFile(archive) as zf:
            members = [(info, _member_path(archive, info.filename, prefix)) for info in zf.infolist()]
            for info, rel in members:
                if rel is None or info.is_dir():
                    continue
                target = dest.joinpath(*rel.parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out)
    except (zipfile.BadZipFile, zlib.error, EOFError) as err:
        raise DatasetError(f"archive {archive} is truncated or corrupt: {err}") from err


def _member_path(archive: Path, name: str, prefix: str | None) -> PurePosixPath | None:
    """The member's path relative to the target folder (None: the prefix folder itself)."""
    rel = PurePosixPath(name.replace("\\", "/"))
    if rel.is_absolute() or ".." in rel.parts or ":" in name:
        raise DatasetError(
            f"archive {archive} member {name!r} escapes the target folder; refusing to extract"
        )
    if prefix is not None:
        if rel.parts[:1] != (prefix,):
            raise DatasetError(
                f"archive {archive} member {name!r} is not inside the expected top folder {prefix!r}"
            )
        rel = PurePosixPath(*rel.parts[1:]) if len(rel.parts) > 1 else None
    return rel


def _check_folder(
    source: Source, folder: Path, verify: bool, fresh: bool = False, final: Path | None = None
) -> None:
    """Check the raw files of `folder` before any of them is parsed.

    `fresh` marks a just-extracted staging folder, renamed to `final` afterwards:
    then every extracted file is raw, and unpinned datasets record their sums.
    """
    shown = final or folder
    for rel in source.required:
        if not (folder / rel).is_file():
            raise DatasetError(
                f"dataset {source.name!r}: raw file {rel} is missing from {shown}"
                + ("" if fresh else "; delete the folder and fetch again")
            )
    lock = folder / LOCK_NAME
    if source.pinned is None and (fresh or not lock.is_file()):
        # A folder that was not fetched by lipnorm may already hold DGL's processed
        # cache, so only the files the loader parses are recorded then.
        raw = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
        _record_lock(source, folder, raw if fresh else sorted(source.required), shown)
        return
    if not verify:
        return
    expected = source.pinned if source.pinned is not None else _read_lock(lock)
    for rel in source.required:
        if rel not in expected:
            raise DatasetError(f"{shown / LOCK_NAME} has no checksum for raw file {rel}")
    for rel, want in sorted(expected.items()):
        path = folder / rel
        if not path.is_file():
            raise DatasetError(f"dataset {source.name!r}: raw file {rel} is missing from {shown}")
        got = sha256_file(path)
        if got != want:
            raise DatasetError(
                f"checksum mismatch for {shown / rel}: expected sha256 {want}, got {got}"
            )


def _record_lock(source: Source, folder: Path, files: list[str], shown: Path) -> None:
    with atomic_path(folder / LOCK_NAME) as tmp:
        tmp.write_text("".join(f"{sha256_file(folder / rel)}  {rel}\n" for rel in files))
    warnings.warn(
        f"no pinned SHA-256 sums for dataset {source.name!r}: recorded the sums of its "
        f"{len(files)} raw files in {shown / LOCK_NAME} (trust on first use); later loads "
        "are verified against them. Compare them with a trusted copy if provenance matters.",
        UnpinnedChecksumWarning,
        stacklevel=2,
    )


def _read_lock(lock: Path) -> dict[str, str]:
    """Parse `sha256sum`-format lines (`<digest>  <relative path>`)."""
    sums = {}
    for line in lock.read_text().splitlines():
        digest, _, rel = line.partition("  ")
        sums[rel] = digest
    return sums
