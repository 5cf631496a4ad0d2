"""Every published comparison report (`lipnorm compare --report`, a folder under
docs/results with a comparison.md) renders again, byte for byte, from the runs tables and
the command it records: its numbers cannot drift from the code or the runs."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from lipnorm import cli
from lipnorm.results.compare import REPORT_FILES

REPO = Path(__file__).resolve().parents[2]
REPORTS = sorted(path.parent for path in (REPO / "docs" / "results").glob("*/comparison.md"))
TEXT_FILES = [name for name in REPORT_FILES if not name.endswith((".pdf", ".png"))]


def test_the_primary_report_is_published():
    assert REPO / "docs" / "results" / "primary" in REPORTS


@pytest.mark.parametrize("folder", REPORTS, ids=lambda path: path.name)
def test_published_report_renders_again_from_its_command(folder, tmp_path, monkeypatch, capsys):
    command = re.search(r"^Written by `(lipnorm compare [^`]+)`", (folder / "comparison.md").read_text(), re.M)[1]
    argv = shlex.split(command)[1:]
    out = argv[argv.index("--report") + 1]
    assert Path(out) == folder.relative_to(REPO)
    argv[argv.index("--report") + 1] = str(tmp_path / "again")
    monkeypatch.chdir(REPO)
    assert cli.main(argv) == 0
    for name in TEXT_FILES:
        again = (tmp_path / "again" / name).read_text().replace(str(tmp_path / "again"), out)
        assert again == (folder / name).read_text(), name
    for name in ("comparison.png", "comparison.pdf"):
        assert (folder / name).stat().st_size > 0
