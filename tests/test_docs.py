"""The documentation site builds with `mkdocs build --strict` (what `make docs` runs): a
broken link or anchor, a page missing from the tree, or a docstring naming a parameter its
function lacks fails here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def build(project: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=project, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


@pytest.mark.slow
def test_the_site_builds_strictly_with_every_page_and_the_api_reference(tmp_path):
    done = build(ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stderr
    site = tmp_path / "site"
    pages = {"index", "layers", "models", "training", "workflow", "cluster", "datasets", "performance",
             "architecture"}
    assert all((site / f"{page}.html").is_file() for page in pages)
    assert (site / "results" / "index.html")  # README.md is its folder's index.is_file()
    # The API reference is rendered from the docstrings (not an empty page).
    reference = (site / "api" / "nn.html").read_text()
    assert 'id="lipnorm.nn.GATConv"' in reference and "LipschitzNorm" in reference
    assert 'id="lipnorm.nn.functional.lipschitz_norm_linear"' in (site / "api" / "functional.html").read_text()


@pytest.mark.slow
def test_a_broken_link_fails_the_build_naming_it(tmp_path):
    project = tmp_path / "project"
    shutil.copytree(ROOT / "docs", project / "docs")
    shutil.copy(ROOT / "mkdocs.yml", project)
    os.symlink(ROOT / "src", project / "src")
    layers = project / "docs" / "layers.md"
    layers.write_text(layers.read_text() + "\nSee [the models](model.md#models).\n")
    done = build(project, tmp_path / "site")
    assert done.returncode == 1
    assert "Doc file 'layers.md' contains a link 'model.md#models', but the target 'model.md' is not found" in done.stderr
