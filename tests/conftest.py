"""Shared fixtures. Data: the dataset mirror, a session dataset root, no network."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def data_mirror() -> Path:
    """The read-only mirror of DGL's data server ($LIPNORM_DATA_MIRROR), absolute.

    Tests that need it fail, not skip, when it is missing: they stand for features.
    """
    value = os.environ.get("LIPNORM_DATA_MIRROR")
    if not value:
        pytest.fail("LIPNORM_DATA_MIRROR is unset: point it at the dataset mirror (../shared/datasets)")
    mirror = Path(value).resolve()
    if not (mirror / "dataset" / "cora_v2.zip").is_file():
        pytest.fail(f"LIPNORM_DATA_MIRROR={value} has no dataset/cora_v2.zip")
    return mirror


@pytest.fixture(scope="session")
def planetoid_root(tmp_path_factory) -> Path:
    """One dataset root per session: Cora and CiteSeer are extracted and processed once."""
    return tmp_path_factory.mktemp("datasets")


def _refuse_connect(self, address):
    raise OSError(f"network disabled by the test (connect to {address!r})")


@pytest.fixture
def no_network(monkeypatch):
    """Every socket connection fails, as on a machine without internet."""
    monkeypatch.setattr(socket.socket, "connect", _refuse_connect)


@pytest.fixture(scope="session")
def offline_loader(data_mirror, planetoid_root):
    """load_dataset(name) from the session root and the mirror, with no network."""
    from lipnorm.data import load_dataset

    def load(name: str):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(socket.socket, "connect", _refuse_connect)
            return load_dataset(name, root=planetoid_root, mirror=data_mirror)

    return load
