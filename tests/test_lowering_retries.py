"""Compile workers and cached failures: what a lowering keeps, what it asks again.

Successes and the kernel's own failures are kept for the inspection; a tool that was
missing or a worker or tool that crashed is asked again, and named. And `xla-gpu:A100`
compiles the README's vector add (Mosaic GPU cannot target sm_80: Triton does).

Oracles: the number of times a lowering step runs (counted), the error's kind and
words, and for A100 the SASS of a float add (FADD) and the chip's architecture.
"""

from __future__ import annotations

import importlib.util

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src.core.lowering import engine, failures, triton_build
from pallaslab._src.core.lowering import tpu_compile as libtpu
from pallaslab._src.core.lowering.targets import xla_gpu as xla_gpu_target
from pallaslab._src.records.lowered import LoweringError
from tests import test_xla_gpu


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def vector_add():
    spec = pl.BlockSpec((128,), lambda i: (i,))
    add = pl.pallas_call(
        add_kernel,
        out_shape=jax.ShapeDtypeStruct((1024,), jnp.float32),
        grid=(8,),
        in_specs=[spec, spec],
        out_specs=spec,
    )
    x = jax.ShapeDtypeStruct((1024,), jnp.float32)
    return pallaslab.inspect(add, x, x)


needs_triton = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None, reason="needs the triton package"
)


@pytest.mark.parametrize(
    ("text", "tool"),
    [
        ("the libtpu compile worker exited (killed by SIGKILL (signal 9)):\n...", "the libtpu"),
        ("the XLA GPU compile worker took over 300 s", "the XLA GPU compile worker"),
        ("Internal Triton PTX codegen error: `ptxas` raised SIGSEGV", "ptxas"),
        ("nvdisasm crashed (killed by SIGABRT (signal 6)) on kernel.cubin", "nvdisasm"),
        ("error: 'tpu.matmul' op operand types do not match", ""),
        ("ptxas error: Entry function uses too much shared data", ""),
    ],
)
def test_a_crash_is_told_from_the_compilers_verdict(text, tool):
    assert failures.crashed_tool(text).startswith(tool)
    assert bool(failures.crashed_tool(text)) == bool(tool)


def test_exits_in_words():
    assert failures.exit_words(-9) == "killed by SIGKILL (signal 9)"
    assert failures.exit_words(1) == "exit status 1"


@needs_triton
def test_a_crashed_tool_is_named_and_asked_again(monkeypatch):
    inspection = vector_add()
    real = triton_build.compile_ttir
    calls = []

    def crashing_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("nvdisasm crashed (killed by SIGSEGV (signal 11)) on kernel.cubin")
        return real(*args, **kwargs)

    monkeypatch.setattr(triton_build, "compile_ttir", crashing_once)
    first = inspection.lower("sass:sm_90")
    assert first.error is not None and first.error.kind == "crashed"
    assert first.error.message.startswith("nvdisasm crashed building add_kernel for sm_90")
    assert "asking again retries" in first.error.message
    second = inspection.lower("sass:sm_90")
    assert second.error is None and "FADD" in second.text
    third = inspection.lower("sass:sm_90")
    assert third is second and len(calls) == 2  # a success is kept


@needs_triton
def test_a_tool_installed_after_the_failure_is_found(monkeypatch):
    inspection = vector_add()
    missing = {"on": True}
    real = engine.unavailable_reason

    def reason(target):
        return "the triton compiler is not installed" if missing["on"] else real(target)

    monkeypatch.setattr(engine, "unavailable_reason", reason)
    before = inspection.lower("ptx:sm_90")
    assert before.error is not None and before.error.kind == "unavailable"
    missing["on"] = False  # installed since
    after = inspection.lower("ptx:sm_90")
    assert after.error is None and ".target sm_90" in after.text


def test_the_kernels_own_failure_is_kept(monkeypatch):
    spec = pl.BlockSpec((4, 100), lambda i: (i, 0))  # breaks TPU's (8, 128) rule
    narrow = pl.pallas_call(
        add_kernel,
        out_shape=jax.ShapeDtypeStruct((8, 100), jnp.float32),
        grid=(2,),
        in_specs=[spec, spec],
        out_specs=spec,
    )
    x = jax.ShapeDtypeStruct((8, 100), jnp.float32)
    inspection = pallaslab.inspect(narrow, x, x)
    calls = []
    real = engine.Lowerer._lower

    def counted(self, target, kernel):
        calls.append(target.name)
        return real(self, target, kernel)

    monkeypatch.setattr(engine.Lowerer, "_lower", counted)
    first = inspection.lower("tpu-compile:v5e")
    second = inspection.lower("tpu-compile:v5e")
    assert first.error is not None and first.error.kind == "tiling"
    assert second is first and calls == ["tpu-compile:v5e"]


def test_a_killed_libtpu_worker_is_named_and_asked_again(monkeypatch):
    def square_kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * x_ref[...]

    square = pl.pallas_call(square_kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))
    inspection = pallaslab.inspect(square, jax.ShapeDtypeStruct((8, 128), jnp.float32))
    calls = []

    def killed(exported, chip):
        calls.append(chip)
        return libtpu.TpuCompile(
            chip, error="the libtpu compile worker exited (killed by SIGKILL (signal 9)):\n"
        )

    monkeypatch.setattr(libtpu, "compile_exported", killed)
    monkeypatch.setattr(engine, "unavailable_reason", lambda target: "")
    first = inspection.lower("tpu-compile:v5e")
    assert first.error is not None and first.error.kind == "crashed"
    assert first.error.message.startswith("the libtpu compile worker crashed compiling")
    inspection.lower("tpu-compile:v5e")
    assert calls == ["v5e", "v5e"]  # asked again, not answered from the cache


def test_a_transient_error_is_not_kept():
    assert LoweringError("x", kind="crashed").transient
    assert LoweringError("x", kind="unavailable").transient
    assert not LoweringError("x", kind="compile").transient


@test_xla_gpu.needs_gpu_compile
def test_xla_gpu_a100_compiles_the_readme_vector_add_with_triton():
    lowered = vector_add().lower("xla-gpu:A100")
    assert lowered.error is None, lowered.error
    assert "sm_80" in lowered.header
    assert "FADD" in lowered.text
    assert any("Pallas' Triton backend" in n and "A100 is sm_80" in n for n in lowered.notes)


@test_xla_gpu.needs_gpu_compile
def test_a_mosaic_gpu_kernel_for_a100_says_why_not_and_what_to_change():
    a = jax.ShapeDtypeStruct((256, 256), jnp.float16)
    inspection = pallaslab.inspect(test_xla_gpu.mosaic_gpu_matmul, a, a)
    lowered = inspection.lower("xla-gpu:A100")
    assert lowered.error is not None and lowered.error.kind == "unsupported"
    assert "Mosaic GPU compiles for sm_90 (Hopper) or newer only: A100 is sm_80" in (
        lowered.error.message
    )
    assert "xla-gpu:H100" in lowered.error.message
    assert not xla_gpu_target.mosaic_gpu_capable("A100")
    assert xla_gpu_target.mosaic_gpu_capable("H100")
