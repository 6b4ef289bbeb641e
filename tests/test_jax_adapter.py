"""Pins every private JAX shape pallaslab reads, and the index-map translation.

When JAX moves one of these, the test that names it fails first, pointing at the
adapter function to update.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src.core import jax_adapter
from tests import corpus


def _pallas_eqn():
    case = corpus.kacc_matmul()
    closed = jax.make_jaxpr(case.fn)(*case.args)
    (eqn,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "pallas_call"]
    return eqn


class TestPrivateShapes:
    def test_pallas_call_params(self):
        params = _pallas_eqn().params
        for key in (
            "jaxpr",
            "grid_mapping",
            "compiler_params",
            "cost_estimate",
            "interpret",
            "name",
            "input_output_aliases",
        ):
            assert key in params, key

    def test_grid_mapping_fields(self):
        mapping = _pallas_eqn().params["grid_mapping"]
        for field in (
            "grid",
            "grid_names",
            "block_mappings",
            "index_map_avals",
            "vmapped_dims",
            "scratch_avals",
            "num_index_operands",
            "num_inputs",
            "num_outputs",
        ):
            assert hasattr(mapping, field), field

    def test_block_mapping_fields(self):
        mapping = _pallas_eqn().params["grid_mapping"].block_mappings[0]
        for field in (
            "block_shape",
            "array_aval",
            "transformed_block_aval",
            "index_map_jaxpr",
            "origin",
            "pipeline_mode",
        ):
            assert hasattr(mapping, field), field
        assert type(mapping.block_shape[0]).__name__ == "Blocked"
        assert mapping.block_shape[0].block_size == 128
        assert hasattr(mapping.index_map_jaxpr, "consts")

    def test_block_dim_classes(self):
        assert {"Blocked", "Squeezed", "Element", "BoundedSlice"} <= set(dir(pl))

    def test_kernel_debug_info(self):
        debug = _pallas_eqn().params["jaxpr"].debug_info
        assert debug.func_name == "kernel"
        assert debug.func_filename.endswith("corpus.py")
        assert isinstance(debug.func_lineno, int)
        assert debug.arg_names == ("x_ref", "y_ref", "o_ref")

    def test_source_info_helpers(self):
        from jax._src import source_info_util

        assert callable(source_info_util.user_frame)
        assert callable(source_info_util.register_exclusion)
        assert callable(source_info_util.current)
        frame = source_info_util.user_frame(_pallas_eqn().source_info.traceback)
        assert frame is None or hasattr(frame, "start_line")

    def test_jaxprs_in_params_and_pretty_print(self):
        from jax._src import core

        eqn = _pallas_eqn()
        assert list(core.jaxprs_in_params({"jaxpr": eqn.params["jaxpr"]}))
        text = eqn.params["jaxpr"].pretty_print(source_info=True, name_stack=False)
        assert "# " in text and "corpus.py:" in text

    def test_lowering_and_primitive(self):
        from jax._src.pallas import pallas_call

        assert callable(pallas_call._pallas_call_lowering)
        assert pallas_call.pallas_call_p.name == "pallas_call"
        for name in ("cpu-interpret", "record-kernels"):
            assert jax_adapter.feature_notice(name) is None

    def test_interpret_mode_switch(self):
        from jax._src import config

        switch = config.pallas_tpu_interpret_mode_context_manager
        previous = switch.swap_local(True)
        switch.set_local(previous)

    def test_wrapper_frame_locals_used_for_messages(self):
        def k(x_ref, o_ref):
            o_ref[...] = x_ref[...]

        x = corpus.f32(256)
        fn = pl.pallas_call(
            k,
            out_shape=x,
            grid=(2,),
            in_specs=[pl.BlockSpec((128,), lambda i: (i,))] * 2,
            out_specs=pl.BlockSpec((128,), lambda i: (i,)),
        )
        with pytest.raises(TypeError) as info:
            jax.make_jaxpr(fn)(x, x)
        context = jax_adapter.kernel_call_context(info.value.__traceback__)
        assert context is not None
        assert (context.kernel_name, context.num_inputs, context.num_outputs) == ("k", 2, 1)

    def test_block_spec_frame_local_used_for_messages(self):
        x = corpus.f32(256)
        fn = pl.pallas_call(
            lambda x_ref, o_ref: None,
            out_shape=x,
            grid=(2,),
            in_specs=[pl.BlockSpec((128, 1), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((128,), lambda i: (i,)),
        )
        with pytest.raises(ValueError, match="same number of dimensions") as info:
            jax.make_jaxpr(fn)(x)
        location = jax_adapter.block_spec_location(info.value.__traceback__)
        assert location is not None and location.file == __file__

    def test_mesh_kernel_primitive(self):
        from jax.experimental.pallas import mosaic_gpu as plgpu

        def body(x_ref, o_ref):
            o_ref[...] = x_ref[...] * 2

        @jax.jit
        def f(x):
            return plgpu.kernel(
                body,
                out_type=jax.ShapeDtypeStruct((256,), jnp.float32),
                grid=(2,),
                grid_names=("x",),
            )(x)

        inspection = pallaslab.inspect(f, corpus.f32(256))
        (kernel,) = inspection.kernels
        assert kernel.kind == "plgpu.kernel"
        assert kernel.grid == (2,) and kernel.grid_names == ("x",)
        assert [o.role for o in kernel.operands] == ["in", "out"]
        assert kernel.backend == "mosaic_gpu"
        assert "mul" in kernel.jaxpr


class TestRecording:
    def test_records_bound_kernels_and_restores_bind(self):
        case = corpus.blocked_add()
        from jax._src.pallas import pallas_call

        before = pallas_call.pallas_call_p.bind
        with jax_adapter.recording_kernels() as sites:
            jax.make_jaxpr(case.fn)(*case.args)
        assert len(sites) == 1
        assert jax_adapter.kernel_from_site(sites[0], 0).grid == (8,)
        assert "bind" not in vars(pallas_call.pallas_call_p)
        assert pallas_call.pallas_call_p.bind == before

    def test_nested_recording(self):
        case = corpus.blocked_add()
        with jax_adapter.recording_kernels() as outer, jax_adapter.recording_kernels() as inner:
            jax.make_jaxpr(case.fn)(*case.args)
        assert len(inner) == 1 and len(outer) == 1


# --- Index maps: JAX's trace translated to NumPy gives the same block indices. ----

OPS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b,
    "mod": lambda a, b: a % b,
    "min": jnp.minimum,
    "max": jnp.maximum,
}


@st.composite
def index_expressions(draw, depth=0):
    """A random integer expression over grid indices i, j, as (description, fn)."""
    if depth >= 2 or draw(st.booleans()):
        leaf = draw(st.sampled_from(["i", "j", "const"]))
        if leaf == "const":
            value = draw(st.integers(-3, 7))
            return str(value), lambda i, j, v=value: v
        return leaf, (lambda i, j: i) if leaf == "i" else (lambda i, j: j)
    name = draw(st.sampled_from(sorted(OPS)))
    left_text, left = draw(index_expressions(depth + 1))
    right_text, right = draw(index_expressions(depth + 1))
    if name in ("floordiv", "mod"):
        divisor = draw(st.integers(1, 5))
        right_text, right = str(divisor), (lambda i, j, d=divisor: d)
    op = OPS[name]
    return f"{name}({left_text}, {right_text})", lambda i, j: op(left(i, j), right(i, j))


@settings(max_examples=60, deadline=None)
@given(index_expressions(), index_expressions())
def test_index_map_translation_agrees_with_jax(first, second):
    (text_a, fn_a), (text_b, fn_b) = first, second

    def index_map(i, j):
        return fn_a(i, j), fn_b(i, j)

    closed = jax.make_jaxpr(index_map)(jnp.int32(0), jnp.int32(0))
    translated = jax_adapter.index_map_from_jaxpr(closed, 2)
    assert translated.evaluable, (text_a, text_b, closed)
    i, j = np.indices((4, 5))
    got = translated.evaluate([i, j])
    want = jax.vmap(jax.vmap(lambda a, b: jnp.stack(index_map(a, b))))(
        jnp.asarray(i), jnp.asarray(j)
    )
    np.testing.assert_array_equal(np.stack(got, axis=-1), np.asarray(want))


def test_index_map_text_reads_like_python():
    closed = jax.make_jaxpr(lambda i, j: (i // 2 + 1, jnp.minimum(j, 3) * 4))(
        jnp.int32(0), jnp.int32(0)
    )
    translated = jax_adapter.index_map_from_jaxpr(closed, 2)
    assert translated.text == "lambda i, j: (i // 2 + 1, min(j, 3) * 4)"


def test_untranslatable_index_maps_keep_jax_text():
    closed = jax.make_jaxpr(lambda i: (jnp.sin(i.astype(jnp.float32)).astype(jnp.int32),))(
        jnp.int32(0)
    )
    translated = jax_adapter.index_map_from_jaxpr(closed, 1)
    assert not translated.evaluable
    assert "sin" in translated.text
    with pytest.raises(ValueError, match="cannot be evaluated"):
        translated.evaluate([np.arange(3)])


def test_jaxpr_text_strips_locations_into_a_map():
    case = corpus.blocked_add()
    kernel = pallaslab.inspect(case.fn, *case.args).kernels[0]
    assert "#" not in kernel.jaxpr
    lines = kernel.jaxpr.splitlines()
    for line, file, source_line in kernel.jaxpr_source_map:
        assert 1 <= line <= len(lines)
        assert file.endswith("corpus.py") and source_line > 0


def test_prefetch_values_are_evaluated_from_the_program():
    case = corpus.scalar_prefetch()
    inspection = pallaslab.inspect(case.fn, *case.args)
    program = inspection.program
    leaves = program.dynamic_leaves((case.args[0], jnp.zeros((64, 128))), {})
    values = jax_adapter.prefetch_values(program.sites[0], program, leaves)
    assert [v.tolist() for v in values] == [[7, 6, 5, 4, 3, 2, 1, 0]]


def test_sites_are_frozen_records_of_jax_state():
    case = corpus.blocked_add()
    site = pallaslab.inspect(case.fn, *case.args).program.sites[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        site.path = ()  # type: ignore[misc]


# --- The emulator's reads (core/jax_adapter/emulation.py). ------------------------


class TestEmulationShapes:
    def test_emulation_switch_is_in_the_trace_context(self):
        from jax._src import config

        from pallaslab._src.core.jax_adapter import emulation

        assert emulation.UNAVAILABLE == ""
        before = config.trace_context()
        with emulation.emulation_scope(("probe",)):
            assert emulation.emulation_request() == ("probe",)
            assert config.trace_context() != before
        assert emulation.emulation_request() is None

    def test_interpreter_entry_points(self):
        from jax._src.pallas import core as pallas_core
        from jax._src.pallas import hlo_interpreter
        from jax._src.state import discharge

        assert callable(hlo_interpreter.resolve_physical_types)
        assert callable(discharge.discharge_state)
        axis = pallas_core.GridAxis(3, 8)
        assert (axis.index, axis.size) == (3, 8)
        with pallas_core.grid_env((axis,)):
            assert pallas_core.current_grid_env()[0] is axis
        mapping = _pallas_eqn().params["grid_mapping"]
        for name in ("trace_env", "local_grid_env", "vmapped_dims", "num_index_operands"):
            assert hasattr(mapping, name), name
        assert mapping.local_grid_env is None

    def test_block_dims_and_element_padding(self):
        from jax._src.pallas import core as pallas_core

        element = pl.Element(10, (1, 2))
        assert isinstance(element, pallas_core.Element)
        assert (element.block_size, element.padding) == (10, (1, 2))
        assert isinstance(pl.Squeezed(), pallas_core.Squeezed)
        assert pallas_core.Blocked(8).block_size == 8
        assert jnp.int16 == pallas_core.SEMAPHORE_INTERPRET_DTYPE

    def test_index_map_jaxprs_return_block_indices_first(self):
        mapping = _pallas_eqn().params["grid_mapping"].block_mappings[0]
        closed = mapping.index_map_jaxpr
        assert len(closed.jaxpr.outvars) == len(mapping.block_shape)
        assert len(closed.jaxpr.invars) == 3  # the grid indices (i, j, kk)

    @pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32", "int16", "uint8", "bool"])
    def test_uninitialized_values_match_pallas(self, dtype):
        from jax._src.pallas import primitives

        from pallaslab._src.core.jax_adapter import emulation

        want = np.asarray(primitives.uninitialized_value((), jnp.dtype(dtype)))
        got = emulation.uninitialized_value(jnp.dtype(dtype))
        assert want.dtype == got.dtype
        assert np.array_equal(want.astype(np.float64), got.astype(np.float64), equal_nan=True)

    def test_padding_to_whole_blocks_matches_pallas(self):
        from jax._src.pallas import hlo_interpreter

        case = corpus.blocked_add()
        padded = hlo_interpreter._pad_to_block_dimension(jnp.zeros((33, 2, 5)), (32, 2, 4))
        assert padded.shape == (64, 2, 8)
        site = pallaslab.inspect(case.fn, *case.args).program.sites[0]
        from pallaslab._src.core.jax_adapter import emulation

        call = emulation.kernel_call(site.params, site.in_avals)
        assert call.layouts[0].padded_shape == (1024,)

    def test_kernel_effects_name_its_ref_arguments(self):
        from jax._src.state import types as state_types

        body = _pallas_eqn().params["jaxpr"]
        writes = [e for e in body.effects if isinstance(e, state_types.WriteEffect)]
        assert writes
        assert all(getattr(e, "input", None) in body.invars for e in writes)
        from pallaslab._src.core.jax_adapter import emulation

        assert emulation._written_refs(body) == {2}

    def test_program_id_primitives_and_bind_params(self):
        from jax._src.pallas import primitives

        assert primitives.program_id_p.name == "program_id"
        assert primitives.num_programs_p.name == "num_programs"
        eqn = _pallas_eqn()
        params = (
            eqn.params["jaxpr"]
            .eqns[0]
            .primitive.get_bind_params(eqn.params["jaxpr"].eqns[0].params)
        )
        assert isinstance(params, dict)

    def test_control_flow_params_the_emulator_rebuilds(self):
        def f(x):
            x = jax.lax.fori_loop(0, 3, lambda i, a: a + i, x)
            x = jax.lax.while_loop(lambda a: a < 10, lambda a: a + 1, x)
            return jax.lax.cond(x > 3, lambda a: a, lambda a: -a, x)

        eqns = {e.primitive.name: e for e in jax.make_jaxpr(f)(1).jaxpr.eqns}
        for key in ("jaxpr", "num_consts", "num_carry", "length", "reverse", "unroll"):
            assert key in eqns["scan"].params, key
        for key in ("cond_jaxpr", "body_jaxpr", "cond_nconsts", "body_nconsts"):
            assert key in eqns["while"].params, key
        assert "branches" in eqns["cond"].params

    def test_lowering_rule_takes_interpret_by_keyword(self):
        import inspect as pyinspect

        from jax._src.interpreters import mlir
        from jax._src.pallas import pallas_call

        signature = pyinspect.signature(pallas_call._pallas_call_lowering)
        assert "interpret" in signature.parameters
        assert callable(mlir.lower_fun)

    def test_interpret_kinds(self):
        from jax.experimental.pallas import tpu as pltpu

        from pallaslab._src.core.jax_adapter import emulation

        assert emulation.interpret_kind(False) == ""
        assert emulation.interpret_kind(True) == "plain"
        assert emulation.interpret_kind(pltpu.InterpretParams()) == "InterpretParams"
