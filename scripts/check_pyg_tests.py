#!/usr/bin/env python
"""Run PyG's own GATConv / TransformerConv tests against `lipnorm.pyg`'s classes.

PyG's test files ``test/nn/conv/test_gat_conv.py`` and
``test/nn/conv/test_transformer_conv.py`` (at the pinned version, 2.5.3) import
``GATConv`` / ``TransformerConv`` from ``torch_geometric.nn``. This script runs them
twice, each time in a fresh pytest process in which those names are
``functools.partial(lipnorm.pyg.GATConv, norm=...)`` (and the same for TransformerConv),
first with ``norm=None``, then with ``norm="lip"``, and prints pass/fail per test and
the counts.

With norm=None every test PyG passes must pass (the classes are PyG's layers). With
norm="lip" the tests that compare against a value only PyG's own score formula gives
are expected to fail; docs/pyg.md lists them and why. PyG's test code is read from
the checkout you give and run from a temporary directory; nothing is copied into this
project.

Usage::

    # a PyG work tree (git clone --branch 2.5.3 https://github.com/pyg-team/pytorch_geometric)
    python scripts/check_pyg_tests.py /path/to/pytorch_geometric
    # or a bare git directory, at a tag or commit
    python scripts/check_pyg_tests.py /path/to/pytorch_geometric.git --rev 2.5.3

Options: ``--norm none`` or ``--norm lip`` runs one setting only; ``-k EXPR`` is passed
to pytest; ``--full`` sets PyG's ``FULL_TEST=1`` (else it is set to 0), which adds the
tests' TorchScript blocks (``torch.jit.script`` of a module holding the layer). The exit
status is 0 when the failures are exactly the expected ones (`EXPECTED_LIP_FAILURES`
under norm="lip", none under norm=None), 1 otherwise.

Result at PyG 2.5.3 (torch 2.2.1, CPU, no torch_sparse): 7 passed, 0 failed under each
setting, with and without ``--full``.

Run it with the project's interpreter (``.venv/bin/python``), which has lipnorm and
torch_geometric 2.5.3 installed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

TEST_FILES = ("test/nn/conv/test_gat_conv.py", "test/nn/conv/test_transformer_conv.py")
# PyG's conftest (fixtures such as `get_dataset`, `disable_extensions`), if present.
SUPPORT_FILES = ("test/conftest.py",)

# Tests of PyG 2.5.3 expected to fail with norm="lip" (a value only PyG's score formula
# gives), each with the reason; docs/pyg.md repeats this list. Keys are pytest node names
# (file::test). None: PyG 2.5.3's tests check shapes, the attention's range and that the
# edge-list, sparse and bipartite forms agree with each other, which LipschitzNorm keeps.
EXPECTED_LIP_FAILURES: dict[str, str] = {}

# Imported by pytest (`-p`) before it collects PyG's test modules: rebinds the classes
# they import from torch_geometric.nn.
PLUGIN = '''
import functools
import os

import torch_geometric.nn
import torch_geometric.nn.conv

import lipnorm.pyg

_norm = os.environ["LIPNORM_PYG_NORM"]
_norm = None if _norm == "none" else _norm
for _name in ("GATConv", "TransformerConv"):
    _patched = functools.partial(getattr(lipnorm.pyg, _name), norm=_norm)
    setattr(torch_geometric.nn, _name, _patched)
    setattr(torch_geometric.nn.conv, _name, _patched)
'''


def read_tests(source: Path, rev: str | None, target: Path) -> list[Path]:
    """Write PyG's test files (and conftest) from `source` into `target`; return the test files."""
    written = []
    for name in (*SUPPORT_FILES, *TEST_FILES):
        if rev is None:
            path = source / name
            if not path.is_file():
                if name in SUPPORT_FILES:
                    continue
                raise SystemExit(f"{path} not found: give the root of a PyG checkout (or a git dir with --rev)")
            text = path.read_text()
        else:
            result = subprocess.run(
                ["git", f"--git-dir={source}", "show", f"{rev}:{name}"], capture_output=True, text=True
            )
            if result.returncode != 0:
                if name in SUPPORT_FILES:
                    continue
                raise SystemExit(f"git show {rev}:{name} failed in {source}: {result.stderr.strip()}")
            text = result.stdout
        out = target / Path(name).name
        out.write_text(text)
        if name in TEST_FILES:
            written.append(out)
    return written


def run_setting(norm: str, tests: list[Path], workdir: Path, keyword: str | None, full: bool) -> dict[str, str]:
    """Run the tests with `norm`; {"file::test[param]": "passed" | "failed" | "skipped"}."""
    report = workdir / f"report-{norm}.xml"
    path = os.pathsep.join(p for p in (str(workdir), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, LIPNORM_PYG_NORM=norm, PYTHONPATH=path, FULL_TEST="1" if full else "0")
    command = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "lipnorm_pyg_patch", "-q",
        f"--junitxml={report}", f"--rootdir={workdir}", *map(str, tests),
    ]
    if keyword:
        command += ["-k", keyword]
    subprocess.run(command, cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not report.is_file():
        raise SystemExit(f"pytest wrote no report for norm={norm}: run it by hand in {workdir}")
    results = {}
    for case in ET.parse(report).iter("testcase"):
        name = f"{case.get('classname', '').split('.')[-1]}.py::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            results[name] = "failed"
        elif case.find("skipped") is not None:
            results[name] = "skipped"
        else:
            results[name] = "passed"
    return results


def base_name(test: str) -> str:
    """`file::test[param]` -> `file::test`."""
    return test.split("[", 1)[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pyg", type=Path, help="root of a PyG checkout at 2.5.3, or a git directory with --rev")
    parser.add_argument("--rev", help="tag or commit to read the tests from (source is then a git directory)")
    parser.add_argument("--norm", choices=("none", "lip"), action="append", help="setting(s) to run (default both)")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression")
    parser.add_argument("--full", action="store_true", help="PyG's FULL_TEST=1: the TorchScript blocks too")
    args = parser.parse_args(argv)
    norms = args.norm or ["none", "lip"]

    workdir = Path(tempfile.mkdtemp(prefix="lipnorm-pyg-tests-"))
    ok = True
    try:
        tests = read_tests(args.pyg, args.rev, workdir)
        (workdir / "lipnorm_pyg_patch.py").write_text(PLUGIN)
        for norm in norms:
            results = run_setting(norm, tests, workdir, args.keyword, args.full)
            expected_failures = dict(EXPECTED_LIP_FAILURES) if norm == "lip" else {}
            counts = {status: sum(s == status for s in results.values()) for status in ("passed", "failed", "skipped")}
            print(f"== norm={norm}: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
            for test, status in sorted(results.items()):
                note = ""
                if status == "failed" and base_name(test) in expected_failures:
                    note = f"  (expected: {expected_failures[base_name(test)]})"
                print(f"  {status.upper():8} {test}{note}")
            failed = {base_name(t) for t, s in results.items() if s == "failed"}
            expected = set(expected_failures)
            if failed != expected:
                ok = False
                if failed - expected:
                    print(f"  unexpected failures: {sorted(failed - expected)}")
                if expected - failed:
                    print(f"  expected to fail but passed: {sorted(expected - failed)}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
