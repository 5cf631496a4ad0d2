"""Atomic writes: all or nothing, with the permissions of an ordinary file."""

import os

import pytest

from lipnorm.io import atomic_dir, atomic_path, write_json


def test_atomic_path_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out.txt"
    with pytest.raises(RuntimeError, match="boom"):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_atomic_dir_replaces_only_on_success(tmp_path):
    target = tmp_path / "run"
    target.mkdir()
    (target / "old").write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_dir(target) as tmp:
            (tmp / "new").write_text("new")
            raise RuntimeError("crash")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    assert [p.name for p in target.iterdir()] == ["old"]
    with atomic_dir(target) as tmp:
        (tmp / "new").write_text("new")
    assert [p.name for p in target.iterdir()] == ["new"]


def test_written_files_and_folders_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        write_json(tmp_path / "a.json", {"x": 1})
        with atomic_dir(tmp_path / "d"):
            pass
    finally:
        os.umask(old)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "d").stat().st_mode & 0o777 == 0o755


def test_atomic_dir_removes_the_temporary_folders_of_killed_attempts(tmp_path):
    # What a SIGKILL between the last write and the rename leaves behind.
    stale = tmp_path / ".s0.k1ll3d.tmp"
    stale.mkdir()
    (stale / "summary.json").write_text("{}")
    other = tmp_path / ".s1.abcdef.tmp"  # another run's: not this path's to remove
    other.mkdir()
    with atomic_dir(tmp_path / "s0") as tmp:
        (tmp / "summary.json").write_text("{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".s1.abcdef.tmp", "s0"]
