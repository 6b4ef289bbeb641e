"""pallaslab.inspect over the corpus: grids, block shapes, roles, jaxprs, runs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pallaslab
from tests import corpus

CASES = {build.__name__: build for build in corpus.ALL}


@pytest.mark.parametrize("name", sorted(CASES))
def test_inspect_finds_every_kernel_with_its_facts(name):
    case = CASES[name]()
    inspection = pallaslab.inspect(case.fn, *case.args, **case.kwargs)
    assert len(inspection.kernels) == len(case.kernels)
    for kernel, facts in zip(inspection.kernels, case.kernels, strict=True):
        assert kernel.grid == facts.grid
        assert kernel.block_shapes == facts.block_shapes
        assert tuple(o.role for o in kernel.operands) == facts.roles
        for primitive in facts.jaxpr_has:
            assert primitive in kernel.jaxpr, (primitive, kernel.jaxpr)
        assert kernel.source is not None and kernel.source.file.endswith("corpus.py")


@pytest.mark.parametrize("name", sorted(CASES))
def test_run_matches_the_reference(name):
    case = CASES[name]()
    inspection = pallaslab.inspect(case.fn, *case.args, **case.kwargs)
    result = inspection.run(ref=case.reference)
    assert result.backend == "cpu"
    assert result.mode == ("emulated" if case.emulated else "interpret")
    assert result.comparison is not None
    assert result.comparison.ok, result.comparison


def test_records_are_plain_data():
    case = corpus.kacc_matmul()
    kernel = pallaslab.inspect(case.fn, *case.args).kernels[0]
    assert kernel.dimension_semantics == ("parallel", "parallel", "arbitrary")
    assert kernel.backend == "mosaic_tpu"
    x, y, out = kernel.operands
    assert (x.name, y.name, out.name) == ("x_ref", "y_ref", "o_ref")
    assert x.index_map.text == "lambda i, j, kk: (i, kk)"
    assert out.dtype == "float32" and out.shape == (256, 256)
    assert x.memory_space == "default"

    # No JAX objects anywhere in a record.
    def walk(value):
        if isinstance(value, jax.Array) or type(value).__module__.startswith("jax"):
            raise AssertionError(f"JAX object in record: {value!r}")
        if hasattr(value, "__dataclass_fields__"):
            for field in value.__dataclass_fields__:
                walk(getattr(value, field))
        elif isinstance(value, (tuple, list)):
            for item in value:
                walk(item)

    walk(kernel)


def test_compiler_params_and_source_lines():
    case = corpus.seed_matmul()
    inspection = pallaslab.inspect(case.fn, *case.args)
    kernel = inspection.kernels[0]
    assert kernel.name == "_matmul_kernel"
    assert kernel.backend == "triton"
    assert dict(kernel.compiler_params) == {"num_warps": "4", "num_stages": "3"}
    assert kernel.path == ("jit(matmul)",)
    # Every mapped jaxpr line points into the kernel function's lines in corpus.py.
    lines = {line for _, file, line in kernel.jaxpr_source_map if file.endswith("corpus.py")}
    assert lines and min(lines) > kernel.source.line


def test_scratch_and_prefetch_operands():
    scratch = pallaslab.inspect(corpus.with_scratch().fn, corpus.f32(512, 128)).kernels[0]
    assert scratch.scratch[0].memory_space == "vmem"
    case = corpus.scalar_prefetch()
    kernel = pallaslab.inspect(case.fn, *case.args).kernels[0]
    prefetch = kernel.operands[0]
    assert prefetch.scalar_prefetch and prefetch.memory_space == "smem"
    index_map = kernel.operands[1].index_map
    assert index_map.text == "lambda i, order: (order[i], 0)"
    blocks = index_map.evaluate([np.arange(8)], [np.array([7, 6, 5, 4, 3, 2, 1, 0])])
    assert blocks[0].tolist() == [7, 6, 5, 4, 3, 2, 1, 0]


def test_kernel_lookup_and_repr():
    inspection = pallaslab.inspect(corpus.two_kernels().fn, corpus.f32(1024), corpus.f32(1024))
    assert inspection.kernel(1).grid == (4,)
    assert inspection.kernel("add_kernel").index == 0
    with pytest.raises(KeyError, match="kernels: add_kernel"):
        inspection.kernel("nope")
    assert "add_kernel grid=(8,)" in repr(inspection)


def test_static_arguments_stay_python_values():
    # Block sizes passed as ints must not be traced (they shape the kernel).
    def scaled(x, factor, block):
        from jax.experimental import pallas as pl

        return pl.pallas_call(
            lambda x_ref, o_ref: o_ref.__setitem__(Ellipsis, x_ref[...] * factor),
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            grid=(x.shape[0] // block,),
            in_specs=[pl.BlockSpec((block,), lambda i: (i,))],
            out_specs=pl.BlockSpec((block,), lambda i: (i,)),
        )(x)

    inspection = pallaslab.inspect(scaled, corpus.f32(512), factor=2.0, block=64)
    assert inspection.kernels[0].grid == (8,)
    assert [a.path for a in inspection.args] == ["x"]
    x = jnp.arange(512.0)
    result = inspection.run(x, factor=2.0, block=64, ref=lambda x, factor, block: x * factor)
    assert result.comparison.ok


def test_reference_mismatches_are_reported_not_raised():
    case = corpus.blocked_add()
    inspection = pallaslab.inspect(case.fn, *case.args)
    wrong_shape = inspection.run(ref=lambda x, y: (x + y)[:-1])
    assert not wrong_shape.comparison.ok
    assert "shape (1023,)" in wrong_shape.comparison.problem
    wrong_dtype = inspection.run(ref=lambda x, y: (x + y).astype(jnp.float16))
    assert "dtype float16" in wrong_dtype.comparison.problem
    wrong_values = inspection.run(ref=lambda x, y: x - y)
    assert not wrong_values.comparison.ok and wrong_values.comparison.mismatched > 0


def test_nan_outputs_are_counted():
    case = corpus.blocked_add()
    inspection = pallaslab.inspect(case.fn, *case.args)
    x = jnp.full((1024,), jnp.nan)
    result = inspection.run(x, x)
    assert result.outputs[0].nan_count == 1024
    assert result.outputs[0].min is None


def test_bfloat16_uses_a_looser_tolerance():
    case = corpus.seed_matmul(dtype=jnp.bfloat16)
    inspection = pallaslab.inspect(case.fn, *case.args)
    result = inspection.run(ref=case.reference)
    assert result.comparison.ok
    assert result.comparison.rtol > 1e-3


class TestJaxShippedGpuKernels:
    """The GPU kernels inside jax.experimental.pallas.ops.gpu, inspected on CPU."""

    def test_softmax(self):
        from jax.experimental.pallas.ops.gpu import softmax

        kernel = pallaslab.inspect(softmax.softmax, corpus.f32(64, 100)).kernels[0]
        assert kernel.name == "_vmappable_softmax_kernel"
        assert kernel.grid == (64,)
        assert kernel.block_shapes == ((None, 100), (None, 100))
        assert kernel.backend == "triton"
        assert kernel.vmapped_dims == (0,)

    def test_layer_norm(self):
        from jax.experimental.pallas.ops.gpu import layer_norm

        kernel = pallaslab.inspect(
            layer_norm.layer_norm, corpus.f32(2, 8, 256), corpus.f32(256), corpus.f32(256)
        ).kernels[0]
        assert kernel.grid == (2, 8)
        assert kernel.block_shapes == ((None, None, 256), (256,), (256,), (None, None, 256))
        assert [o.role for o in kernel.operands] == ["in", "in", "in", "out"]

    def test_mha(self):
        from jax.experimental.pallas.ops.gpu import attention

        qkv = corpus.f32(2, 256, 4, 64)
        kernel = pallaslab.inspect(attention.mha, qkv, qkv, qkv, None).kernels[0]
        assert kernel.name == "mha_forward"
        assert kernel.grid == (2, 2, 4)  # (q blocks, batch, heads)
        assert kernel.block_shapes == (
            (None, 128, None, 64),
            (None, 256, None, 64),
            (None, 256, None, 64),
            (None, 128, None, 64),
        )
        assert kernel.operands[0].index_map.text == "lambda i, j, k: (j, i, k, 0)"


def test_work_is_counted_from_the_kernel_body():
    matmul = pallaslab.inspect(corpus.seed_matmul().fn, *corpus.seed_matmul().args).kernels[0]
    dots = 2 * 256 * 256 * 128
    accumulator_adds = 64 * 64 * 4 * 16  # one add per element, 4 k-steps, 16 programs
    assert matmul.work.flops == dots + accumulator_adds
    assert matmul.work.exact
    softmax = pallaslab.inspect(corpus.row_softmax().fn, corpus.f32(16, 100)).kernels[0]
    assert softmax.work.transcendentals == 16 * 128  # one exp per lane of the padded row
    kacc = pallaslab.inspect(corpus.kacc_matmul().fn, *corpus.kacc_matmul().args).kernels[0]
    # The dots, plus one accumulator add per output element per program; the pl.when
    # branch only zeroes the output (no arithmetic), so the count is exact.
    assert kacc.work.flops == 2 * 256**3 + 128 * 128 * 8
    assert kacc.work.exact


def test_complex_outputs_are_compared_with_their_imaginary_parts():
    from pallaslab._src.core.comparison import compare

    out = np.array([1 + 1j, 2 + 0j], dtype=np.complex64)
    assert compare([out], out).ok
    wrong_imaginary = np.array([1 - 1j, 2 + 0j], dtype=np.complex64)
    comparison = compare([out], wrong_imaginary)
    assert not comparison.ok and comparison.mismatched == 1
