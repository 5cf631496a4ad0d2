"""The kernels' numbers do not depend on the instruction set they were built for: the
build for this CPU (-march=native: AVX-512 or AVX2 with FMA on a recent x86-64) and the
build for the oldest CPU of the architecture (x86-64: SSE2, no FMA unit, so fmaf is
libm's software routine) give the same bits, values and gradients, for every kernel, both
types, the widths compiled apart and the general one."""

from __future__ import annotations

import platform
import shutil
import subprocess

import dgl
import pytest
import torch

from lipnorm import kernels
from lipnorm.kernels import build, dispatch

BASELINE = {"x86_64": "-march=x86-64", "aarch64": "-march=armv8-a"}


@pytest.fixture(scope="module")
def libraries(tmp_path_factory):
    """This machine's build and the architecture's baseline build."""
    machine = platform.machine()
    if machine not in BASELINE:
        pytest.fail(f"no baseline instruction set known for {machine}; add one to BASELINE")
    cache = tmp_path_factory.mktemp("kernel-cache")
    native = build.build(build.NATIVE, cache)
    baseline = build.build(BASELINE[machine], cache)
    assert native.path != baseline.path and native.target != baseline.target
    return native, baseline


def bits(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor's bit patterns (NaN compares equal to the same NaN)."""
    return tensor.detach().contiguous().view(torch.int32 if tensor.dtype == torch.float32 else torch.int64)


def run_with(library, monkeypatch, compute):
    monkeypatch.setattr(dispatch, "_loaded", lambda: library)
    try:
        return compute()
    finally:
        monkeypatch.undo()


def assert_same_bits(libraries, monkeypatch, compute):
    native, baseline = (run_with(library, monkeypatch, compute) for library in libraries)
    assert len(native) == len(baseline)
    for index, (a, b) in enumerate(zip(native, baseline)):
        assert torch.equal(bits(a), bits(b)), f"output {index} differs: max |a - b| = {(a - b).abs().max().item()}"


def random_graph(nodes: int, edges: int, seed: int) -> dgl.DGLGraph:
    torch.manual_seed(seed)
    return dgl.add_self_loop(dgl.remove_self_loop(dgl.rand_graph(nodes, edges)))


def with_gradients(outputs: torch.Tensor, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    upstream = torch.linspace(-1, 1, outputs.numel(), dtype=outputs.dtype).view(outputs.shape)
    return [outputs, *torch.autograd.grad(outputs, inputs, upstream)]


DTYPES = [torch.float32, torch.float64]


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("width", [16, 7, 5, 20], ids=lambda w: f"D{w}")  # compiled apart: 16, 7; general: 5, 20
@pytest.mark.parametrize("norm, masks", [("none", False), ("lip", False), ("lip", True)], ids=["plain", "lip", "lip-masks"])
def test_attention_bit_for_bit(libraries, monkeypatch, dtype, width, norm, masks):
    graph = random_graph(300, 1800, seed=width)
    seeds, heads = 2, 2
    ft = torch.randn(300, seeds * heads, width, dtype=dtype, requires_grad=True)
    attn_l = torch.randn(1, seeds * heads, width, dtype=dtype, requires_grad=True)
    attn_r = torch.randn(1, seeds * heads, width, dtype=dtype, requires_grad=True)
    options = {}
    if masks:
        kept = torch.rand(graph.num_edges(), seeds) < 0.7
        drop = (torch.rand(seeds, graph.num_edges(), heads) < 0.6).to(dtype) / 0.6
        options = dict(kept=kept, drop=drop, heads_per_seed=heads)

    def compute():
        out = kernels.gat_attention(graph, ft, attn_l, attn_r, norm=norm, alpha=0.8, **options)
        return with_gradients(out, [ft, attn_l, attn_r])

    assert_same_bits(libraries, monkeypatch, compute)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("size_in, size_out", [(16, 16), (16, 7), (9, 20)])
def test_grouped_linear_bit_for_bit(libraries, monkeypatch, dtype, size_in, size_out):
    torch.manual_seed(1)
    x = torch.randn(500, 3, size_in, dtype=dtype, requires_grad=True)
    weight = torch.randn(3, size_out, size_in, dtype=dtype, requires_grad=True)
    assert_same_bits(libraries, monkeypatch, lambda: with_gradients(kernels.grouped_linear(x, weight), [x, weight]))


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("width", [16, 6, 11], ids=lambda w: f"W{w}")
def test_normalisations_bit_for_bit(libraries, monkeypatch, dtype, width):
    torch.manual_seed(2)
    x = (torch.randn(400, 3, width, dtype=dtype) * 3 + 1).requires_grad_()
    a = torch.softmax(torch.randn(3, 10, 400, dtype=dtype), dim=1).requires_grad_()
    weight = torch.randn(3 * 10 * width, dtype=dtype, requires_grad=True)
    bias = torch.randn(3 * 10 * width, dtype=dtype, requires_grad=True)

    def compute():
        pairnorm = with_gradients(kernels.pairnorm(x, 1.3, 1e-6), [x])
        dgn = with_gradients(kernels.dgn_output(a, x, weight, bias, 1e-5, 0.7)[0], [a, x, weight, bias])
        return pairnorm + dgn

    assert_same_bits(libraries, monkeypatch, compute)


def test_the_two_builds_differ_in_their_instructions(libraries):
    """What the comparison is worth: on an x86-64 CPU with FMA, the native build fuses
    multiply-adds in vector instructions (vfmadd...), the baseline build has none."""
    native, baseline = libraries
    if platform.machine() != "x86_64" or " fma " not in build.cpu_description() + " ":
        pytest.skip("the instruction check is written for x86-64 CPUs with FMA")
    objdump = shutil.which("objdump")
    assert objdump, "objdump (binutils, installed with gcc) is needed to read the builds"
    code = {lib.path: subprocess.run([objdump, "-d", str(lib.path)], capture_output=True, text=True).stdout
            for lib in libraries}
    assert "vfmadd" in code[native.path]
    assert "vfmadd" not in code[baseline.path] and "call" in code[baseline.path]  # fmaf from libm
