"""Fetching: mirror layout, checksums (pinned and trust-on-first-use), unsafe or
broken archives, network failure. Every failed fetch leaves no dataset folder."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from lipnorm.data import DatasetError, UnpinnedChecksumWarning, fetch_dataset, load_dataset
from lipnorm.data.sources import LOCK_NAME, PINNED_SHA256, SOURCES

CORA_ZIP = "dataset/cora_v2.zip"
PUBMED_FILES = SOURCES["pubmed"].required


def _leftovers(root: Path) -> list[str]:
    """Everything under root except the (empty) inter-process lock files."""
    return sorted(p.name for p in root.iterdir() if not p.name.endswith(".fetch-lock")) if root.exists() else []


def _rewrite_zip(source: Path, target: Path, change) -> None:
    """Copy a zip member by member, passing (name, bytes) through `change`."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(target, "w") as dst:
        for info in src.infolist():
            dst.writestr(info.filename, change(info.filename, src.read(info)))


def _write_zip(path: Path, members: dict[str, bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def _flip_first_byte(data: bytes) -> bytes:
    return bytes([data[0] ^ 0xFF]) + data[1:]


def test_mirror_fetch_extracts_into_dgl_folder(tmp_path, data_mirror, no_network):
    folder = fetch_dataset("cora", root=tmp_path / "root", mirror=data_mirror)
    assert folder == tmp_path / "root" / "cora_v2_d697a464"
    assert sorted(p.name for p in folder.iterdir()) == sorted(PINNED_SHA256["cora"])
    assert _leftovers(tmp_path / "root") == ["cora_v2_d697a464"]
    assert folder.stat().st_mode & 0o777 == 0o755


def test_mirror_from_environment(tmp_path, data_mirror, no_network, monkeypatch):
    monkeypatch.setenv("LIPNORM_DATA_MIRROR", str(data_mirror))
    assert fetch_dataset("citeseer", root=tmp_path).name == "citeseer_d6836239"


def test_checksum_mismatch_in_archive(tmp_path, data_mirror, no_network):
    mirror = tmp_path / "mirror"
    _rewrite_zip(
        data_mirror / CORA_ZIP, mirror / CORA_ZIP,
        lambda name, data: _flip_first_byte(data) if name == "ind.cora_v2.x" else data,
    )
    flipped = _flip_first_byte((zipfile.ZipFile(data_mirror / CORA_ZIP).read("ind.cora_v2.x")))
    expected = PINNED_SHA256["cora"]["ind.cora_v2.x"]
    actual = hashlib.sha256(flipped).hexdigest()
    with pytest.raises(
        DatasetError,
        match=rf"checksum mismatch for .*cora_v2_d697a464/ind\.cora_v2\.x: expected sha256 {expected}, got {actual}",
    ):
        fetch_dataset("cora", root=tmp_path / "root", mirror=mirror)
    assert _leftovers(tmp_path / "root") == []


def test_no_verify_accepts_a_modified_archive(tmp_path, data_mirror, no_network):
    mirror = tmp_path / "mirror"
    _rewrite_zip(
        data_mirror / CORA_ZIP, mirror / CORA_ZIP,
        lambda name, data: _flip_first_byte(data) if name == "ind.cora_v2.x" else data,
    )
    folder = fetch_dataset("cora", root=tmp_path / "root", mirror=mirror, verify=False)
    assert (folder / "ind.cora_v2.x").is_file()
    # Verification is only off when asked: the next default fetch checks the folder.
    with pytest.raises(DatasetError, match=r"checksum mismatch for .*ind\.cora_v2\.x"):
        fetch_dataset("cora", root=tmp_path / "root", mirror=mirror)


@pytest.mark.parametrize(
    "damage, filename",
    [(_flip_first_byte, "ind.cora_v2.graph"), (lambda data: data[: len(data) // 2], "ind.cora_v2.allx")],
    ids=["flipped-byte", "truncated"],
)
def test_damaged_raw_file_is_caught_before_parsing(damage, filename, tmp_path, data_mirror, no_network):
    folder = fetch_dataset("cora", root=tmp_path, mirror=data_mirror)
    path = folder / filename
    path.write_bytes(damage(path.read_bytes()))
    actual = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(
        DatasetError,
        match=rf"checksum mismatch for {path}: expected sha256 {PINNED_SHA256['cora'][filename]}, got {actual}",
    ):
        load_dataset("cora", root=tmp_path, mirror=data_mirror)
    # DGL never ran: no processed cache was written next to the damaged file.
    assert not (folder / "cora_v2_dgl_graph.bin").exists()


def test_truncated_archive(tmp_path, data_mirror, no_network):
    mirror = tmp_path / "mirror"
    (mirror / "dataset").mkdir(parents=True)
    data = (data_mirror / CORA_ZIP).read_bytes()
    (mirror / CORA_ZIP).write_bytes(data[: len(data) // 2])
    with pytest.raises(DatasetError, match=rf"archive {mirror / CORA_ZIP} is truncated or corrupt"):
        fetch_dataset("cora", root=tmp_path / "root", mirror=mirror)
    assert _leftovers(tmp_path / "root") == []


def test_archive_with_corrupt_member(tmp_path, data_mirror, no_network):
    """Intact zip directory but damaged member data: the CRC check fails."""
    target = tmp_path / "mirror" / CORA_ZIP
    _rewrite_zip(data_mirror / CORA_ZIP, target, lambda name, data: data)  # stored, uncompressed
    member = zipfile.ZipFile(target).read("ind.cora_v2.x")
    raw = bytearray(target.read_bytes())
    raw[raw.index(member) + 10] ^= 0xFF
    target.write_bytes(bytes(raw))
    with pytest.raises(DatasetError, match="is truncated or corrupt: Bad CRC-32 for file 'ind.cora_v2.x'"):
        fetch_dataset("cora", root=tmp_path / "root", mirror=tmp_path / "mirror")
    assert _leftovers(tmp_path / "root") == []


@pytest.mark.parametrize("evil", ["../escaped", "sub/../../escaped", "/tmp/lipnorm-escaped-absolute"])
def test_archive_member_escaping_the_folder(evil, tmp_path, no_network):
    mirror = tmp_path / "mirror"
    members = {name: b"x" for name in PUBMED_FILES} | {evil: b"payload"}
    _write_zip(mirror / "dataset/pubmed.zip", members)
    root = tmp_path / "a" / "root"
    with pytest.raises(DatasetError, match=rf"member '{evil}' escapes the target folder; refusing to extract"):
        fetch_dataset("pubmed", root=root, mirror=mirror)
    assert _leftovers(root) == []
    assert not (tmp_path / "a" / "escaped").exists() and not Path("/tmp/lipnorm-escaped-absolute").exists()


def test_ogb_archive_member_outside_its_top_folder(tmp_path, no_network):
    mirror = tmp_path / "mirror"
    _write_zip(mirror / "ogb/data/nodeproppred/arxiv.zip", {"arxiv/RELEASE_v1.txt": b"", "other/x": b""})
    with pytest.raises(DatasetError, match=r"member 'other/x' is not inside the expected top folder 'arxiv'"):
        fetch_dataset("ogbn-arxiv", root=tmp_path / "root", mirror=mirror)
    assert _leftovers(tmp_path / "root") == []


def test_archive_missing_a_raw_file(tmp_path, no_network):
    mirror = tmp_path / "mirror"
    _write_zip(mirror / "dataset/pubmed.zip", {name: b"x" for name in PUBMED_FILES[1:]})
    with pytest.raises(DatasetError, match=rf"dataset 'pubmed': raw file {PUBMED_FILES[0]} is missing from"):
        fetch_dataset("pubmed", root=tmp_path / "root", mirror=mirror)
    assert _leftovers(tmp_path / "root") == []


def test_missing_mirror_file(tmp_path, no_network):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    with pytest.raises(
        DatasetError,
        match=rf"mirror {mirror} has no dataset/cora_v2\.zip for dataset 'cora' "
        r"\(the archive downloaded from https://data\.dgl\.ai/dataset/cora_v2\.zip\)",
    ):
        fetch_dataset("cora", root=tmp_path / "root", mirror=mirror)
    assert _leftovers(tmp_path / "root") == []


def test_missing_mirror_folder(tmp_path, no_network):
    with pytest.raises(DatasetError, match=rf"dataset mirror folder {tmp_path / 'nowhere'} does not exist"):
        fetch_dataset("citeseer", root=tmp_path / "root", mirror=tmp_path / "nowhere")
    assert _leftovers(tmp_path / "root") == []


@pytest.mark.parametrize(
    "name, url, mirror_path",
    [
        ("cora", "https://data.dgl.ai/dataset/cora_v2.zip", "dataset/cora_v2.zip"),
        ("ogbn-arxiv", "http://snap.stanford.edu/ogb/data/nodeproppred/arxiv.zip",
         "ogb/data/nodeproppred/arxiv.zip"),
    ],
)
def test_network_failure_without_mirror(name, url, mirror_path, tmp_path, no_network, monkeypatch):
    monkeypatch.delenv("LIPNORM_DATA_MIRROR", raising=False)
    with pytest.raises(DatasetError) as caught:
        fetch_dataset(name, root=tmp_path / "root")
    message = str(caught.value)
    assert message.startswith(f"could not download dataset '{name}' from {url} (")
    assert message.endswith(
        "Without internet access, use a mirror of the data server: `--mirror DIR` or "
        f"LIPNORM_DATA_MIRROR=DIR, with the archive at DIR/{mirror_path}"
    )
    assert _leftovers(tmp_path / "root") == []


def test_unknown_dataset(tmp_path):
    message = "unknown dataset 'cora-ml'; allowed: cora, citeseer, pubmed, coauthor-cs, ppi, ogbn-arxiv, csbm"
    for call in (load_dataset, fetch_dataset):
        with pytest.raises(DatasetError, match=message):
            call("cora-ml", root=tmp_path / "root")
    assert not (tmp_path / "root").exists()


def test_root_must_be_a_writable_folder(tmp_path):
    root = tmp_path / "a-file"
    root.write_text("not a folder")
    with pytest.raises(DatasetError, match=rf"dataset root {root} is not a writable folder"):
        fetch_dataset("cora", root=root, mirror=tmp_path)


def test_csbm_parameters_only_for_csbm(tmp_path):
    with pytest.raises(ValueError, match="csbm parameters were given for dataset 'cora'; they apply only to csbm"):
        load_dataset("cora", root=tmp_path, csbm={"nodes": 100})


def test_unpinned_dataset_records_sums_on_first_fetch(tmp_path, no_network):
    """Trust on first use: sums recorded (with a warning), then enforced."""
    mirror = tmp_path / "mirror"
    members = {name: f"content of {name}".encode() for name in PUBMED_FILES}
    _write_zip(mirror / "dataset/pubmed.zip", members)
    root = tmp_path / "root"
    with pytest.warns(UnpinnedChecksumWarning, match=r"no pinned SHA-256 sums for dataset 'pubmed': recorded the sums of its 8 raw files"):
        folder = fetch_dataset("pubmed", root=root, mirror=mirror)
    lock = (folder / LOCK_NAME).read_text().splitlines()
    assert lock == [f"{hashlib.sha256(members[n]).hexdigest()}  {n}" for n in sorted(members)]

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # verified against the lock: no new warning
        assert fetch_dataset("pubmed", root=root, mirror=mirror) == folder

    target = folder / PUBMED_FILES[2]
    target.write_bytes(b"tampered")
    with pytest.raises(
        DatasetError,
        match=rf"checksum mismatch for {target}: expected sha256 {hashlib.sha256(members[PUBMED_FILES[2]]).hexdigest()}, "
        rf"got {hashlib.sha256(b'tampered').hexdigest()}",
    ):
        fetch_dataset("pubmed", root=root, mirror=mirror)
    assert fetch_dataset("pubmed", root=root, mirror=mirror, verify=False) == folder


def test_unpinned_folder_without_lock_records_only_raw_files(tmp_path, no_network):
    """A folder put in place by other means (DGL's own download) may hold DGL's
    cache: only the files the loader parses are recorded."""
    folder = tmp_path / SOURCES["pubmed"].folder_name()
    folder.mkdir()
    for name in PUBMED_FILES:
        (folder / name).write_bytes(name.encode())
    (folder / "pubmed_dgl_graph.bin").write_bytes(b"cache")
    with pytest.warns(UnpinnedChecksumWarning):
        fetch_dataset("pubmed", root=tmp_path)
    recorded = [line.split("  ")[1] for line in (folder / LOCK_NAME).read_text().splitlines()]
    assert recorded == sorted(PUBMED_FILES)
