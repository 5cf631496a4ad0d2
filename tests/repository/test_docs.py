"""The documentation site builds with `mkdocs build --strict` (what `make docs` runs): a
broken link or anchor, a page missing from the tree, or a docstring naming a parameter its
function lacks fails here."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


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
    os.symlink(ROOT / "scripts", project / "scripts")  # mkdocs.yml's hook
    layers = project / "docs" / "layers.md"
    layers.write_text(layers.read_text() + "\nSee [the models](model.md#models).\n")
    done = build(project, tmp_path / "site")
    assert done.returncode == 1
    assert "Doc file 'layers.md' contains a link 'model.md#models', but the target 'model.md' is not found" in done.stderr


@pytest.mark.parametrize("page", ["README.md", "CHANGELOG.md"])
def test_the_pages_outside_the_site_link_to_files_that_exist(page):
    """README.md and CHANGELOG.md are read on GitHub, outside the strict build."""
    text = (ROOT / page).read_text()
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)|<img src=\"([^\"]+)\"", text)
    relative = [a or b for a, b in targets if not (a or b).startswith(("http://", "https://"))]
    assert relative, f"{page} links to nothing"
    assert [t for t in relative if not (ROOT / t).exists()] == []


def test_the_readme_keeps_the_two_commands_and_stays_short():
    text = (ROOT / "README.md").read_text()
    assert "make run    # set up .venv" in text and "make test   # the same set-up" in text
    assert "What's new: [CHANGELOG.md](CHANGELOG.md)." in text
    assert len(text.splitlines()) <= 200


def test_the_readme_and_the_cluster_page_quote_the_paper_presets_plan(monkeypatch):
    """What they quote is what `lipnorm plan --configfile config/presets/paper.yaml`
    prints with the shipped coefficients (LIPNORM_KERNELS unset, a C compiler at hand, as
    on the suite's machines): recalibrating means quoting anew."""
    from lipnorm import plan

    monkeypatch.delenv("LIPNORM_KERNELS", raising=False)
    monkeypatch.delenv("CC", raising=False)
    shipped = plan.load_coefficients(ROOT / "src" / "lipnorm" / "plan" / plan.DEFAULT_COEFFICIENTS)
    report = plan.config_report(plan.read_config(ROOT / "config" / "presets" / "paper.yaml"), shipped)
    assert report.startswith("coefficients: cpu") and "total          2480" in report
    assert report in (ROOT / "README.md").read_text()
    indented = "\n".join(f"    {line}" for line in report.splitlines())
    assert indented in (ROOT / "docs" / "cluster.md").read_text()


def _slug(heading: str) -> str:
    """The anchor Python-Markdown's toc (and GitHub) gives a heading."""
    text = unicodedata.normalize("NFKD", heading.replace("`", "")).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _anchors(page: Path) -> set[str]:
    text = page.read_text()
    headings = re.findall(r"^#+ (.+?)\s*$", text, flags=re.MULTILINE)
    return {_slug(h) for h in headings} | set(re.findall(r'<a id="([^"]+)"></a>', text))


def test_the_performance_page_is_a_short_reference_that_links_its_log():
    """docs/performance.md gives the current figures (at most 300 lines); the history of
    measurements is docs/performance-log.md, ordered by date."""
    page = (ROOT / "docs" / "performance.md").read_text()
    assert len(page.splitlines()) <= 300
    assert "(performance-log.md" in page
    log = (ROOT / "docs" / "performance-log.md").read_text()
    days = re.findall(r"^## (\d{4}-\d{2}-\d{2})$", log, flags=re.MULTILINE)
    assert days and days == sorted(days) and len(days) == len(set(days))


@pytest.mark.parametrize("page", ["README.md", "CHANGELOG.md", *sorted(
    str(path.relative_to(ROOT)) for path in (ROOT / "docs").rglob("*.md"))])
def test_links_into_the_performance_pages_name_anchors_they_have(page):
    """CHANGELOG.md's and README.md's links are outside the strict build: an anchor of
    performance.md or performance-log.md they name must still be there (a heading's, or
    an `<a id>` kept for a section that moved to the log)."""
    path = ROOT / page
    links = re.findall(r"\]\(([^)#\s]*performance(?:-log)?\.md)#([^)\s]+)\)", path.read_text())
    broken = [f"{target}#{anchor}" for target, anchor in links
              if anchor not in _anchors((path.parent / target).resolve())]
    assert broken == []


def test_every_published_results_folder_and_the_performance_log_are_in_the_nav():
    def pages(node) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, list):
            return [page for item in node for page in pages(item)]
        if isinstance(node, dict):
            return [page for value in node.values() for page in pages(value)]
        return []

    nav = set(pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]))
    published = {str(summary.relative_to(ROOT / "docs"))
                 for summary in (ROOT / "docs" / "results").glob("*/summary.md")}
    assert published and published - nav == set()
    assert {"performance.md", "performance-log.md"} <= nav


def test_the_architecture_page_names_every_package_its_modules_and_the_kernel_sources():
    """docs/architecture.md is the newcomer's map: each package of src/lipnorm with each of
    its modules and subpackages, the compiled kernels' C sources, the road of a setting
    and how to add each kind of part."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    package = ROOT / "src" / "lipnorm"
    missing = []
    for folder in sorted(path for path in package.iterdir() if (path / "__init__.py").is_file()):
        if f"`{folder.name}/`" not in text:
            missing.append(f"{folder.name}/")
        for child in sorted(folder.iterdir()):
            is_module = child.suffix == ".py" and not child.name.startswith("__")
            named = f"`{child.stem}`" in text or f"`{child.stem}/`" in text
            if (is_module or (child / "__init__.py").is_file()) and not named:
                missing.append(f"{folder.name}/{child.name}")
    missing += [f"kernels/csrc/{source.name}" for source in sorted((package / "kernels" / "csrc").iterdir())
                if source.suffix in (".c", ".h") and f"`{source.name}`" not in text]
    assert missing == []
    for section in ("## The road of a setting", "## Adding a part", "## The compiled kernels"):
        assert section in text
