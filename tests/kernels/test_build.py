"""Building and loading the kernels: every failure falls back with one warning naming the
reason and the fix (or, with LIPNORM_KERNELS=on, is a clear refusal), never a crash; the
cache is private and checked before loading; parallel builds build once; the record says
which path ran."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import dgl
import pytest
import torch

from lipnorm import kernels
from lipnorm.kernels import build, dispatch
from lipnorm.nn import GATConv, PairNorm
from lipnorm.nn.norm.dgn import DiffGroupNorm


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """An empty private cache, nothing loaded or warned yet; the same after the test."""
    monkeypatch.setenv("LIPNORM_KERNEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("LIPNORM_KERNELS", raising=False)
    dispatch.reset()
    yield tmp_path / "cache"
    monkeypatch.undo()
    dispatch.reset()


def fake_compiler(tmp_path: Path, body: str) -> str:
    """An executable `cc` that runs `body` (sh) for a build (-shared in its arguments) and
    is gcc otherwise (version and target questions)."""
    script = tmp_path / "fake-cc"
    script.write_text(f'#!/bin/sh\ncase " $* " in *" -shared "*) {body} ;; *) exec gcc "$@" ;; esac\n')
    script.chmod(0o755)
    return str(script)


def layer_outputs():
    """A GAT layer (fused), PairNorm and DGN on a small graph: their outputs."""
    torch.manual_seed(0)
    graph = dgl.add_self_loop(dgl.rand_graph(20, 60))
    feat = torch.randn(20, 6)
    gat = GATConv(6, 4, 2, norm="lip", fused=True)
    return gat(graph, feat), PairNorm()(graph, feat), DiffGroupNorm(6, num_groups=3).train()(graph, feat)


def fallback_reason(expected_reason: str, expected_fix: str) -> None:
    """The layers run on their torch and DGL paths, with exactly one KernelsWarning that
    names the reason and the fix; a second use warns no more; the record says so."""
    with pytest.warns(kernels.KernelsWarning) as caught:
        outputs = layer_outputs()
        layer_outputs()
    assert len(caught) == 1
    message = str(caught[0].message)
    assert expected_reason in message and expected_fix in message, message
    assert all(torch.isfinite(out).all() for out in outputs)
    record = kernels.record()
    assert record["paths"] == {"dgn": ["torch"], "gat_attention": ["dgl"], "pairnorm": ["torch"]}
    assert expected_reason in record["unavailable"]


def refused_when_on(monkeypatch, expected_reason: str) -> None:
    monkeypatch.setenv("LIPNORM_KERNELS", "on")
    with pytest.raises(kernels.KernelsUnavailable, match="LIPNORM_KERNELS=on, but the compiled kernels are unavailable"):
        layer_outputs()
    with pytest.raises(kernels.KernelsUnavailable) as refused:
        kernels.require()
    assert expected_reason in str(refused.value)


def test_the_kernels_build_here_privately_and_the_record_names_the_build(fresh):
    layer_outputs()
    record = kernels.record()
    assert record["paths"] == {"dgn": ["compiled"], "gat_attention": ["compiled"], "pairnorm": ["compiled"]}
    assert record["mode"] == "auto" and record["flags"][-1] == "-march=native" and "-ffp-contract=off" in record["flags"]
    assert Path(record["library"]).parent == fresh and record["compiler_version"] and record["target"]
    assert record["cpu"] == build.cpu_model()
    json.dumps(record)  # a summary.json value
    # the cache: private, the library and the builds' lock, nothing half-written
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o700
    names = sorted(path.name for path in fresh.iterdir())
    assert names == ["build.lock", Path(record["library"]).name]
    assert stat.S_IMODE((fresh / names[1]).stat().st_mode) & 0o022 == 0


def test_the_cache_follows_xdg_cache_home(tmp_path, monkeypatch):
    monkeypatch.delenv("LIPNORM_KERNEL_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert build.cache_dir() == tmp_path / "xdg" / "lipnorm" / "kernels"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert build.cache_dir() == Path.home() / ".cache" / "lipnorm" / "kernels"
    monkeypatch.setenv("LIPNORM_KERNEL_CACHE", str(tmp_path / "mine"))
    assert build.cache_dir() == tmp_path / "mine"


def test_missing_folders_are_created_private(tmp_path):
    build._private_folder(tmp_path / "a" / "b" / "kernels")
    for path in (tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "kernels"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path


def test_no_compiler(fresh, tmp_path, monkeypatch):
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    fallback_reason(f"the C compiler CC='{tmp_path / 'no-such-cc'}' was not found", "set CC to an installed C compiler")
    refused_when_on(monkeypatch, "was not found")


def test_a_failing_compiler(fresh, tmp_path, monkeypatch):
    monkeypatch.setenv("CC", fake_compiler(tmp_path, "echo 'cc1: internal error' >&2; exit 1"))
    fallback_reason("failed to build the kernels: cc1: internal error", "set CC to a C99 compiler that takes -fopenmp-simd")
    refused_when_on(monkeypatch, "failed to build")


def test_a_compiler_that_hangs_is_stopped(fresh, tmp_path, monkeypatch):
    monkeypatch.setenv("CC", fake_compiler(tmp_path, "exec sleep 30"))
    monkeypatch.setenv("LIPNORM_KERNEL_BUILD_TIMEOUT", "0.5")
    fallback_reason("did not finish within 0.5 s", "raise LIPNORM_KERNEL_BUILD_TIMEOUT")


def test_a_bad_build_timeout_is_named(fresh, monkeypatch):
    monkeypatch.setenv("LIPNORM_KERNEL_BUILD_TIMEOUT", "soon")
    fallback_reason("LIPNORM_KERNEL_BUILD_TIMEOUT='soon' is not a number of seconds > 0", "set it to one")


@pytest.mark.parametrize("where", ["under-a-file", "read-only-filesystem"])
def test_a_cache_that_cannot_be_created(fresh, tmp_path, monkeypatch, where):
    if where == "under-a-file":
        (tmp_path / "file").write_text("")
        cache = tmp_path / "file" / "cache"
    else:
        cache = Path("/proc/lipnorm-kernels")  # /proc takes no new folders, not even root's
    monkeypatch.setenv("LIPNORM_KERNEL_CACHE", str(cache))
    fallback_reason(f"cannot create the kernel cache {cache}", "point LIPNORM_KERNEL_CACHE at a writable folder")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders; the /proc case above covers root")
def test_a_read_only_cache_folder(fresh, monkeypatch):
    fresh.mkdir(mode=0o500)
    fallback_reason(f"cannot write to the kernel cache {fresh}", "point LIPNORM_KERNEL_CACHE at a writable folder")


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """One build for the module's tests, which copy it into their own caches."""
    return build.build(cache=tmp_path_factory.mktemp("template")).path


def built_library(cache: Path, template: Path) -> Path:
    """The library copied into a fresh private `cache` under its own name: what a later
    load finds there (a new file, which this process has not loaded)."""
    cache.mkdir(mode=0o700)
    library = cache / template.name
    shutil.copyfile(template, library)
    library.chmod(0o700)
    assert library == build.library_path(cache=cache)
    return library


@pytest.mark.parametrize("damage", ["truncated", "not-a-library"])
def test_a_corrupt_library(fresh, template, damage):
    library = built_library(fresh, template)
    if damage == "truncated":
        library.write_bytes(library.read_bytes()[:100])
    else:
        library.write_text("not an ELF file")
    fallback_reason(f"cannot load {library}", f"delete {library} to rebuild it")


def test_a_library_on_a_noexec_filesystem(fresh, template, monkeypatch):
    """What ctypes says when the cache's filesystem forbids mapping code (mount -o noexec)."""
    built_library(fresh, template)

    def refuse(path, *args, **kwargs):
        raise OSError(f"{path}: failed to map segment from shared object")

    monkeypatch.setattr(ctypes, "CDLL", refuse)
    fallback_reason("failed to map segment from shared object", "noexec filesystem")


def test_a_cache_owned_by_another_user_is_refused(fresh, template, monkeypatch):
    library = built_library(fresh, template)
    me = os.geteuid()
    monkeypatch.setattr(build.os, "geteuid", lambda: me + 1)
    fallback_reason(f"{fresh} belongs to user id {me}, not to you ({me + 1})", "a folder of your own")
    assert library.exists()  # refused, not touched


@pytest.mark.parametrize("what", ["folder", "library"])
def test_a_cache_others_can_write_to_is_refused(fresh, template, what):
    library = built_library(fresh, template)
    path = fresh if what == "folder" else library
    path.chmod(0o777 if what == "folder" else 0o766)
    mode = "0777" if what == "folder" else "0766"
    fallback_reason(f"{path} is writable by group or others (mode {mode})", f"chmod go-w {path}")


def test_a_linked_library_is_refused(fresh, template, tmp_path):
    library = built_library(fresh, template)
    planted = tmp_path / "planted.so"
    library.rename(planted)
    library.symlink_to(planted)
    fallback_reason(f"{library} is a symbolic link", "delete it")


def test_off_never_builds(fresh, monkeypatch):
    monkeypatch.setenv("LIPNORM_KERNELS", "off")
    monkeypatch.setattr(dispatch, "build", lambda *args: pytest.fail("built under LIPNORM_KERNELS=off"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning either: off was asked for
        layer_outputs()
    assert kernels.unavailable() == "LIPNORM_KERNELS=off"
    assert kernels.record()["paths"] == {"dgn": ["torch"], "gat_attention": ["dgl"], "pairnorm": ["torch"]}
    assert not fresh.exists()


def test_a_bad_mode_is_named(monkeypatch):
    monkeypatch.setenv("LIPNORM_KERNELS", "yes")
    with pytest.raises(ValueError, match=r"LIPNORM_KERNELS='yes' is not a mode; allowed: auto, on, off"):
        kernels.unavailable()


def test_the_cache_key_follows_the_target(fresh, monkeypatch):
    """Another CPU (another resolved target, here faked) gets a build of its own."""
    first = build.library_path(cache=fresh)
    monkeypatch.setattr(build, "_target", lambda compiler, march: "-march=some-other-cpu")
    assert build.library_path(cache=fresh) not in (first, None)


def test_the_target_is_what_the_compiler_resolves_native_to():
    """The key holds the CPU the compiler compiles for (gcc: -march=znver3 -mavx2 ...),
    on any architecture, not the word "native"."""
    target = build._target(build._compiler(), build.NATIVE)
    assert "-march=native" not in target and "/" not in target  # no file names: the same in every process
    assert target == build._target(build._compiler(), build.NATIVE)
    assert build._target(build._compiler(), "-march=x86-64" if os.uname().machine == "x86_64" else "-march=armv8-a") != target


def test_the_target_ignores_temporary_file_names_that_contain_cc1(tmp_path, monkeypatch):
    """gcc names its temporary files /tmp/ccXXXXXX.s, so about one call in 60 has a name
    starting "cc1", on the assembler's line; the target (and the library's name) must
    still come from the compiler proper's line. A TMPDIR named cc1 puts "cc1" in every
    such name."""
    target = build._target(build._compiler(), build.NATIVE)
    (tmp_path / "cc1").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "cc1"))
    assert build._target(build._compiler(), build.NATIVE) == target


def test_two_processes_on_an_empty_cache_build_once(tmp_path):
    """Two jobs started together on an empty cache: the lock lets one build while the
    other waits, then loads the same library."""
    log = tmp_path / "builds.log"
    compiler = fake_compiler(tmp_path, f'echo build >> {log}; sleep 1; exec gcc "$@"')
    job = textwrap.dedent(f"""
        from pathlib import Path
        from lipnorm.kernels import build
        plan = build._plan(build.NATIVE, Path({str(tmp_path / 'cache')!r}), build.SOURCE_DIR)
        print(build.build(cache=Path({str(tmp_path / 'cache')!r})).path)
        print(plan)
    """)
    environment = {**os.environ, "CC": compiler}
    jobs = [subprocess.Popen([sys.executable, "-c", job], env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
    outputs = [process.communicate(timeout=300) for process in jobs]
    paths = [out.splitlines()[0] if out else "" for out, _ in outputs]
    assert paths[0] == paths[1], [out for out, _ in outputs]  # with what each keyed the build on
    assert [process.returncode for process in jobs] == [0, 0], [err[-2000:] for _, err in outputs]
    assert paths[0] == paths[1] and Path(paths[0]).exists()
    assert log.read_text().splitlines() == ["build"]


def test_gat_attention_called_without_the_kernels_says_so(fresh, monkeypatch):
    monkeypatch.setenv("LIPNORM_KERNELS", "off")
    graph = dgl.add_self_loop(dgl.rand_graph(5, 8))
    with pytest.raises(kernels.KernelsUnavailable, match="the compiled kernels are not available: LIPNORM_KERNELS=off"):
        kernels.gat_attention(graph, torch.randn(5, 2, 3), torch.randn(1, 2, 3), torch.randn(1, 2, 3))


def train_argv(tmp_path: Path, out: str) -> list[str]:
    return ["train", "--recipe", "dgn", "--dataset", "csbm", "--csbm", "nodes=60,classes=3,feature_dim=8,avg_degree=4",
            "--data-root", str(tmp_path / "datasets"), "--model", "gat-lip-pairnorm", "--depth", "2", "--epochs", "2",
            "--out", out]


def test_lipnorm_train_records_the_paths_and_the_build(fresh, tmp_path):
    from lipnorm import cli

    assert cli.main(train_argv(tmp_path, str(tmp_path / "run"))) == 0
    record = json.loads((tmp_path / "run" / "summary.json").read_text())["kernels"]
    assert record["paths"] == {"gat_attention": ["compiled"], "pairnorm": ["compiled"]}
    assert record["mode"] == "auto" and record["compiler_version"] and record["flags"][-1] == "-march=native"


def test_lipnorm_train_under_on_refuses_to_start_without_the_kernels(fresh, tmp_path, monkeypatch, capsys):
    from lipnorm import cli

    monkeypatch.setenv("LIPNORM_KERNELS", "on")
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    with pytest.raises(SystemExit) as refused:
        cli.main(train_argv(tmp_path, str(tmp_path / "run")))
    assert refused.value.code == 2
    error = capsys.readouterr().err
    assert "LIPNORM_KERNELS=on, but the compiled kernels are unavailable: the C compiler CC=" in error
    assert "set CC to an installed C compiler" in error
    assert not (tmp_path / "run").exists() and not (tmp_path / "datasets").exists()  # nothing loaded or written


def test_lipnorm_train_help_documents_the_switch(capsys):
    from lipnorm import cli

    with pytest.raises(SystemExit):
        cli.main(["train", "--help"])
    text = capsys.readouterr().out
    for mode in ("LIPNORM_KERNELS=auto", "LIPNORM_KERNELS=on", "LIPNORM_KERNELS=off"):
        assert mode in text
