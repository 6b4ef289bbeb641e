"""Pins every private JAX shape pallaslab reads, and the index-map translation.

When JAX moves one of these, the test that names it fails first, pointing at the
adapter function to update.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import types
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src.core import jax_adapter, prefetch
from pallaslab._src.core.program import program_of
from tests import corpus


def _pallas_eqn():
    case = corpus.kacc_matmul()
    closed = jax.make_jaxpr(case.fn)(*case.args)
    (eqn,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "pallas_call"]
    return eqn


def _line_of(file: str, needle: str) -> int:
    lines = Path(file).read_text(encoding="utf-8").splitlines()
    return next(number for number, text in enumerate(lines, 1) if needle in text)


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
        # The adapter reads the user frame of the kernel body's equations (the call's own
        # traceback is cut short inside JAX): kacc_matmul's first is its pl.program_id.
        body = _pallas_eqn().params["jaxpr"]
        frame = source_info_util.user_frame(body.eqns[0].source_info.traceback)
        assert frame is not None and frame.file_name == corpus.__file__
        line = _line_of(corpus.__file__, "@pl.when(pl.program_id(2) == 0)")
        assert (frame.function_name, frame.start_line) == ("kacc_matmul.<locals>.kernel", line)

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
        # forced_interpret's switch: a pallas_call made under it takes interpret=True,
        # the switch is part of the trace context (jit caches key on it), and
        # set_local(previous) undoes swap_local.
        from jax._src import config

        def interpret_param():
            fn = pl.pallas_call(
                lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...]),
                out_shape=corpus.f32(8),
            )
            (eqn,) = jax.make_jaxpr(fn)(jnp.zeros(8)).jaxpr.eqns
            return eqn.params["interpret"]

        switch = config.pallas_tpu_interpret_mode_context_manager
        before = config.trace_context()
        assert interpret_param() is False
        previous = switch.swap_local(True)
        try:
            assert switch.value is True and interpret_param() is True
            assert config.trace_context() != before
        finally:
            switch.set_local(previous)
        assert switch.value is None and interpret_param() is False
        assert config.trace_context() == before

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
        # pallaslab's own bind (Mosaic GPU kernels get JAX's interpreter on a CPU), if any.
        own = vars(pallas_call.pallas_call_p).get("bind")
        with jax_adapter.recording_kernels() as sites:
            jax.make_jaxpr(case.fn)(*case.args)
        assert len(sites) == 1
        assert jax_adapter.kernel_from_site(sites[0], 0).grid == (8,)
        assert vars(pallas_call.pallas_call_p).get("bind") is own
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


def test_primitives_outside_kernels_skip_kernel_bodies_and_enter_jit():
    case = corpus.blocked_add()

    @jax.jit
    def program(x, y):
        return jnp.tanh(case.fn(x, y)) * 2

    closed = jax.make_jaxpr(program)(*case.args)
    found = jax_adapter.primitives_outside_kernels(closed)
    assert "tanh" in found and "mul" in found
    # The kernel body's `add` and the kernel itself are not "outside".
    assert "add" not in found and "pallas_call" not in found


def test_prefetch_values_are_evaluated_from_the_program():
    case = corpus.scalar_prefetch()
    inspection = pallaslab.inspect(case.fn, *case.args)
    program = program_of(inspection)
    leaves = program.dynamic_leaves((case.args[0], jnp.zeros((64, 128))), {})
    values = prefetch.prefetch_values(program, 0, leaves)
    assert [v.tolist() for v in values] == [[7, 6, 5, 4, 3, 2, 1, 0]]


def test_sites_are_frozen_records_of_jax_state():
    case = corpus.blocked_add()
    site = program_of(pallaslab.inspect(case.fn, *case.args)).sites[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        site.path = ()  # type: ignore[misc]


# --- Private shapes the tile map and the element-level interpreter read. ------------


def _body(case):
    inspection = pallaslab.inspect(case.fn, *case.args)
    return program_of(inspection).sites[0].params["jaxpr"]


def _eqns(jaxpr, name):
    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == name:
            found.append(eqn)
        from jax._src import core

        for sub in core.jaxprs_in_params(eqn.params):
            found += _eqns(sub, name)
    return found


class TestAccessPrivateShapes:
    def test_state_primitives_carry_their_indexers_as_a_tree(self):
        from jax._src import tree_util
        from jax._src.state import indexing
        from jax._src.state.primitives import ref_addupdate

        def kernel(x_ref, o_ref):
            o_ref[pl.ds(0, 2)] = x_ref[pl.ds(pl.program_id(0), 2)]
            ref_addupdate(o_ref, ..., jnp.ones(4))

        fn = pl.pallas_call(kernel, out_shape=corpus.f32(4), grid=(1,))
        body = program_of(pallaslab.inspect(fn, corpus.f32(4))).sites[0].params["jaxpr"]
        (get, *_) = _eqns(body, "get")
        (swap, *_) = _eqns(body, "swap")
        (update,) = _eqns(body, "addupdate")
        for eqn in (get, swap, update):
            assert "tree" in eqn.params
        assert len(swap.invars) == 2 + swap.params["tree"].num_leaves  # ref, value, indexers
        transforms = tree_util.tree_unflatten(get.params["tree"], list(get.invars[1:]))
        assert all(isinstance(t, indexing.NDIndexer) for t in transforms)
        indexer = transforms[-1]
        assert hasattr(indexer, "indices") and hasattr(indexer, "int_indexer_shape")
        assert {"start", "size", "stride"} <= set(dir(indexer.indices[0]))
        # `ref[...]` carries no indexer at all.
        assert tree_util.tree_unflatten(update.params["tree"], list(update.invars[2:])) == ()
        accesses = pallaslab.inspect(fn, corpus.f32(4)).accesses()
        assert [a.kind for a in accesses.accesses] == ["read", "write", "update"]
        assert accesses.map(1).writes.tolist() == [2, 2, 1, 1]

    def test_triton_masked_load_and_swap_unflatten_into_four(self):
        from jax._src import tree_util

        body = _body(corpus.row_softmax())
        (load,) = _eqns(body, "masked_load")
        (swap,) = _eqns(body, "masked_swap")
        ref, transforms, mask, other = tree_util.tree_unflatten(
            load.params["args_tree"], load.invars
        )
        assert ref is load.invars[0] and mask is not None and other is not None
        assert type(transforms[0]).__name__ == "NDIndexer"
        ref, transforms, value, mask = tree_util.tree_unflatten(
            swap.params["args_tree"], swap.invars
        )
        assert mask is not None and value is swap.invars[-2]

    def test_control_flow_params(self):
        from pallaslab._src.core.jax_adapter import shapes

        matmul = _body(corpus.seed_matmul())
        (scan,) = _eqns(matmul, "scan")
        assert {"jaxpr", "length", "reverse"} <= set(scan.params)
        # Both forms of the counts are pinned in TestVersionShapes.
        # fori_loop: the two refs read are consts, (k, acc) the carry, and no xs.
        assert shapes.scan_counts(scan.params) == (2, 2) and len(scan.invars) == 4
        assert hasattr(scan.params["jaxpr"], "consts")
        (cond,) = _eqns(_body(corpus.kacc_matmul()), "cond")
        assert hasattr(cond.params["branches"][0], "jaxpr")
        (program_id,) = _eqns(_body(corpus.kacc_matmul()), "program_id")
        assert program_id.params["axis"] == 2

        def looping(x_ref, o_ref):
            def body(carry):
                i, acc = carry
                return i + 1, acc + x_ref[i]

            o_ref[0] = jax.lax.while_loop(lambda c: c[0] < x_ref.shape[0], body, (0, 0.0))[1]

        fn = pl.pallas_call(looping, out_shape=corpus.f32(1))
        (loop,) = _eqns(
            program_of(pallaslab.inspect(fn, corpus.f32(8))).sites[0].params["jaxpr"], "while"
        )
        assert {"cond_jaxpr", "body_jaxpr", "cond_nconsts", "body_nconsts"} <= set(loop.params)

    def test_run_scoped_allocates_its_invars(self):
        def kernel(x_ref, o_ref):
            def scoped(tmp_ref):
                tmp_ref[...] = x_ref[...] + 1.0
                o_ref[...] = tmp_ref[...]

            pl.run_scoped(scoped, pltpu.VMEM((8, 128), jnp.float32))

        from jax.experimental.pallas import tpu as pltpu

        fn = pl.pallas_call(kernel, out_shape=corpus.f32(8, 128))
        inspection = pallaslab.inspect(fn, corpus.f32(8, 128))
        (eqn,) = _eqns(program_of(inspection).sites[0].params["jaxpr"], "run_scoped")
        inner = eqn.params["jaxpr"]
        assert len(inner.invars) == 1 and len(inner.constvars) == len(eqn.invars)
        assert tuple(inner.invars[0].aval.inner_aval.shape) == (8, 128)
        accesses = inspection.accesses()
        assert [r.role for r in accesses.refs] == ["in", "out", "scoped"]
        assert accesses.map(2).writes.sum() == 8 * 128

    def test_index_map_out_tree_and_block_dims(self):
        def k(x_ref, o_ref):
            o_ref[...] = x_ref[...]

        fn = pl.pallas_call(
            k,
            out_shape=corpus.f32(64, 128),
            grid=(4,),
            in_specs=[pl.BlockSpec((pl.BoundedSlice(16), 128), lambda i: (pl.ds(i * 8, 8 + i), 0))],
            out_specs=pl.BlockSpec((pl.Element(16, (2, 3)), 128), lambda i: (i * 16, 0)),
        )
        inspection = pallaslab.inspect(fn, corpus.f32(64, 128))
        bounded, element = program_of(inspection).sites[0].params["grid_mapping"].block_mappings
        tree = bounded.index_map_out_tree
        slice_node = tree.children()[0]
        assert slice_node.node_data()[0].__name__ == "Slice"
        assert slice_node.node_data()[1] == (None, None, 1)  # (start, size, stride): traced
        assert element.block_shape[0].padding == (2, 3)
        x, o = inspection.kernels[0].operands
        assert x.index_map.text == "lambda i: (pl.ds(i * 8, 8 + i), 0)"
        assert o.element_padding == ((2, 3), (0, 0))
        tiles = inspection.tiles()
        assert tiles.block(0, (3,)) == ((24, 35), (0, 128))
        assert tiles.block(1, (0,)) == ((-2, 14), (0, 128))

    def test_kernel_inputs_are_the_bound_values(self):
        case = corpus.scalar_prefetch()
        inspection = pallaslab.inspect(case.fn, *case.args)
        program = program_of(inspection)
        x = jnp.arange(64 * 128, dtype=jnp.float32).reshape(64, 128)
        leaves = program.dynamic_leaves((case.args[0], x), {})
        values = jax_adapter.kernel_inputs(program.sites[0], program, leaves)
        assert [np.shape(v) for v in values] == [(8,), (64, 128)]
        np.testing.assert_array_equal(values[1], x)

    def test_interpreter_values_follow_masks_and_other(self):
        from jax._src.state import indexing
        from jax.experimental.pallas import triton as pltriton

        from pallaslab._src.core.jax_adapter import accesses as interp

        def kernel(x_ref, o_ref):
            lanes = jnp.arange(8)
            row = pltriton.load(x_ref.at[pl.ds(0, 8)], mask=lanes < 5, other=7.0)
            o_ref[...] = row

        fn = pl.pallas_call(kernel, out_shape=corpus.f32(8))
        body = program_of(pallaslab.inspect(fn, corpus.f32(8))).sites[0].params["jaxpr"]
        found = []
        run = interp.Interpreter((), (), found.append)
        x = interp.Buffer(0, np.arange(8, dtype=np.float32))
        o = interp.Buffer(1, np.zeros(8, np.float32))
        run.run(body, [], [x, o])
        assert o.data.tolist() == [0, 1, 2, 3, 4, 7, 7, 7]
        assert [a.kind for a in found] == ["read", "write"] and found[0].masked == 3
        view = interp._View.whole((4,))
        strided = indexing.NDIndexer((indexing.Slice(1, 3, 2),), (4,), ())
        assert interp._apply_indexer(view, strided, 1).coords[0].tolist() == [1, 3, 5]

    def test_calls_inside_a_body_are_followed(self):
        @jax.jit
        def shifted(ref):  # a jit taking a ref, reading program_id: followed, not bound
            return ref[pl.ds(pl.program_id(0) * 2, 2)]

        def kernel(x_ref, o_ref):
            o_ref[pl.ds(0, 2)] = jax.nn.relu(shifted(x_ref))

        fn = pl.pallas_call(kernel, out_shape=corpus.f32(2), grid=(2,))
        inspection = pallaslab.inspect(fn, corpus.f32(4))
        body = program_of(inspection).sites[0].params["jaxpr"]
        from pallaslab._src.core.jax_adapter import shapes

        (call,) = [e for e in body.eqns if e.primitive.name in ("pjit", "jit")]
        inner, consts = shapes.closed_parts(shapes.call_body(call.params))
        assert inner.eqns and consts == []
        (relu,) = _eqns(body, "custom_jvp_call")
        assert shapes.call_body(relu.params) is relu.params["call_jaxpr"]
        assert all(hasattr(v.aval, "inner_aval") for v in body.invars)
        from jax._src import core

        assert hasattr(core, "DropVar") and hasattr(core, "Literal")
        accesses = inspection.accesses(0, (1,))
        assert accesses.complete
        (read, write) = accesses.accesses
        assert read.coords[0].tolist() == [2, 3] and write.coords[0].tolist() == [0, 1]


class TestBenchShapes:
    """Private shapes the bench layer reads through the adapter."""

    def test_output_writers_follow_jits_to_the_kernel(self):
        for make, expected in (
            (corpus.seed_matmul, [(0, 0)]),  # inside a jit
            (corpus.two_kernels, [(1, 0)]),  # the second kernel writes the result
            (corpus.vmapped, [(0, 0)]),
        ):
            case = make()
            closed = jax.make_jaxpr(case.fn)(*case.args)
            sites = jax_adapter.find_kernel_sites(closed)
            assert jax_adapter.output_writers(closed, sites) == expected, case.name

    def test_an_output_computed_after_the_kernel_has_no_writer(self):
        add = corpus.blocked_add().fn
        closed = jax.make_jaxpr(lambda x, y: add(x, y) * 2.0)(corpus.f32(1024), corpus.f32(1024))
        sites = jax_adapter.find_kernel_sites(closed)
        assert jax_adapter.output_writers(closed, sites) == [None]

    def test_cupti_kernel_timer_is_probed(self):
        from pallaslab._src.core.jax_adapter import gpu_timing

        notice = jax_adapter.kernel_timer_notice()
        if gpu_timing._mosaic_gpu_lib is None:
            assert "CUPTI" in notice
            with pytest.raises(RuntimeError, match="CUPTI"), jax_adapter.kernel_times():
                pass
        else:
            ext = gpu_timing._mosaic_gpu_lib._mosaic_gpu_ext
            assert hasattr(ext, "_cupti_init") and hasattr(ext, "_cupti_get_timings")

    def test_cross_lowering_for_cuda_takes_lowering_platforms(self):
        from pallaslab._src.core.jax_adapter import lowering

        case = corpus.seed_matmul(64, 64, 64)
        # From jax 0.11 the Triton lowering needs a GPU to lower for: an abstract one.
        with lowering.gpu_chip():
            lowered = jax.jit(case.fn).trace(*case.args).lower(lowering_platforms=("cuda",))
        assert "triton" in lowered.as_text()


# --- Lowering: the private shapes the IR explorer reads (adapter `lowering`). ------


def _custom_calls(fn, args, platform, **kwargs):
    from jax._src.lib.mlir import ir

    from pallaslab._src.core.jax_adapter import lowering

    module = lowering.lower_module(fn, args, platform, **kwargs)
    calls = [op for op in lowering._walk(module.operation) if op.name == "stablehlo.custom_call"]
    return [(ir.StringAttr(op.attributes["call_target_name"]).value, op.attributes) for op in calls]


class TestLoweringShapes:
    def test_triton_custom_call_carries_ttir_bytecode_and_launch_params(self):
        from jax._src.lib.mlir import ir

        case = corpus.seed_matmul()
        ((target, attributes),) = _custom_calls(case.fn, case.args, "cuda")
        assert target == "__gpu$xla.gpu.triton"
        config = attributes["mhlo.backend_config"]
        for key in ("ir", "num_warps", "num_stages", "grid_x", "grid_y", "grid_z", "name"):
            assert key in config, key
        assert ir.StringAttr(config["ir"]).value_bytes.startswith(b"ML\xefR")  # MLIR bytecode
        assert ir.IntegerAttr(config["num_warps"]).value == 4

    def test_mosaic_gpu_custom_call_carries_a_serialized_module(self):
        from jax._src.lib.mlir import ir

        case = _mosaic_gpu_case()
        ((target, attributes),) = _custom_calls(case.fn, case.args, "cuda", mosaic_gpu=True)
        assert target == "mosaic_gpu_v2"
        config = attributes["mhlo.backend_config"]
        assert ir.StringAttr(config["module"]).value_bytes.startswith(b"ML\xefR")

    def test_mosaic_tpu_custom_call_carries_base64_bytecode(self):
        import base64
        import json

        from jax._src.lib.mlir import ir

        case = corpus.kacc_matmul()
        ((target, attributes),) = _custom_calls(case.fn, case.args, "tpu", tpu_generation="v5e")
        assert target == "tpu_custom_call"
        config = json.loads(ir.StringAttr(attributes["backend_config"]).value)
        body = base64.b64decode(config["custom_call_config"]["body"])
        assert body.startswith(b"ML\xefR")

    def test_dialects_and_deserialization_passes(self):
        from jax._src.interpreters import mlir
        from jax._src.lib import mosaic_gpu_dialect, tpu, triton
        from jax._src.lib.mlir import passmanager

        from pallaslab._src.core.jax_adapter import lowering

        assert isinstance(mlir.upstream_dialects, lowering.ir.DialectRegistry)
        context = lowering.private_context(triton.dialect.register_dialect)  # never JAX's
        tpu.register_dialect(context)
        mosaic_gpu_dialect.register_dialect(context)
        with context:
            for name in ("mosaic-serde{serialize=false}", "mosaic_gpu-serde{serialize=false}"):
                passmanager.PassManager.parse(f"builtin.module({name})")

    def test_payloads_read_every_backend(self):
        from pallaslab._src.core.jax_adapter import lowering

        for case, platform, kwargs, backend, needle in (
            (corpus.seed_matmul(), "cuda", {}, "triton", "tt.dot"),
            (_mosaic_gpu_case(), "cuda", {"mosaic_gpu": True}, "mosaic_gpu", "gpu.launch"),
            (corpus.kacc_matmul(), "tpu", {"tpu_generation": "v4"}, "mosaic_tpu", "tpu.matmul"),
        ):
            site = program_of(pallaslab.inspect(case.fn, *case.args)).sites[0]
            module = lowering.lower_module(
                lowering.kernel_function(site), lowering.kernel_avals(site), platform, **kwargs
            )
            (payload,) = lowering.kernel_payloads(module)
            assert payload.backend == backend and needle in payload.asm
            assert 'loc("' in payload.asm  # printed with debug info

    def test_tpu_chip_is_read_from_the_abstract_mesh(self):
        from jax._src.pallas.mosaic import tpu_info

        from pallaslab._src.core.jax_adapter import lowering

        expected = {"v4": "v4", "v5e": "v5e", "v5p": "v5p", "v6e": "v6e", "7x": "7x"}
        for chip, (device_kind, _) in lowering.TPU_DEVICE_KINDS.items():
            assert str(tpu_info.chip_version_from_device_kind(device_kind)) == expected[chip]
            assert lowering.tpu_chip_known(chip)
            with lowering.tpu_chip(chip):
                assert tpu_info.get_device_kind() == device_kind

    def test_gpu_backend_switch_is_a_config_state_or_the_kernels_params(self):
        # Up to 0.11 a config state picks the GPU backend of kernels without compiler
        # params; 0.12 has none (Triton), and pallaslab gives them Mosaic GPU's params.
        from jax._src import config

        from pallaslab._src.core.jax_adapter import lowering

        state = getattr(config, "jax_pallas_use_mosaic_gpu", None)
        if state is not None:
            with state(False):
                assert state.value is False
        case = corpus.blocked_add()
        site = program_of(pallaslab.inspect(case.fn, *case.args)).sites[0]
        assert site.params.get("compiler_params") is None
        backends = ((True, "mosaic_gpu"), (False, "triton"))
        if notice := jax_adapter.mosaic_gpu_pallas_call_notice():  # jax 0.12: Triton only
            assert "plgpu.kernel" in notice
            backends = ((False, "triton"),)
        for mosaic_gpu, backend in backends:
            module = lowering.lower_module(
                lowering.kernel_function(site),
                lowering.kernel_avals(site),
                "cuda",
                mosaic_gpu=mosaic_gpu,
            )
            assert lowering.kernel_payloads(module)[0].backend == backend

    def test_lowering_frames_hold_the_equation(self):
        from pallaslab._src.core.jax_adapter import lowering

        def kernel(x_ref, o_ref):
            o_ref[...] = jnp.sort(x_ref[...], axis=-1)

        fn = pl.pallas_call(kernel, out_shape=corpus.f32(8, 128))
        with pytest.raises(Exception) as info:  # noqa: PT011 - whatever JAX raises
            lowering.lower_module(fn, [corpus.f32(8, 128)], "tpu", tpu_generation="v5e")
        location = lowering.lowering_error_location(info.value.__traceback__)
        assert location is not None and location.file == __file__
        assert lowering.lowering_error_primitive(info.value.__traceback__) == "sort"

    def test_exported_drops_its_vjp_closure_for_pickling(self):
        import pickle

        from pallaslab._src.core.jax_adapter import lowering

        case = corpus.kacc_matmul()
        site = program_of(pallaslab.inspect(case.fn, *case.args)).sites[0]
        data = lowering.export_for_tpu(
            lowering.kernel_function(site), lowering.kernel_avals(site), "v5e"
        )
        exported = pickle.loads(data)
        assert exported.platforms == ("tpu",) and len(exported.in_avals) == 2


# --- The emulator's reads (core/jax_adapter/emulation.py, program_body.py). ----------


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
        site = program_of(pallaslab.inspect(case.fn, *case.args)).sites[0]
        from pallaslab._src.core.jax_adapter import emulation

        call = emulation.kernel_call(site.params, site.in_avals)
        assert call.layouts[0].padded_shape == (1024,)

    def test_kernel_effects_name_its_ref_arguments(self):
        from jax._src.state import types as state_types

        body = _pallas_eqn().params["jaxpr"]
        writes = [e for e in body.effects if isinstance(e, state_types.WriteEffect)]
        assert writes
        assert all(getattr(e, "input", None) in body.invars for e in writes)
        from pallaslab._src.core.jax_adapter import program_body

        assert program_body._written_refs(body) == {2}

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

        from pallaslab._src.core.jax_adapter import shapes

        eqns = {e.primitive.name: e for e in jax.make_jaxpr(f)(1).jaxpr.eqns}
        for key in ("jaxpr", "length", "reverse", "unroll"):
            assert key in eqns["scan"].params, key
        assert shapes.scan_counts(eqns["scan"].params) == (0, 2)  # (i, a) carried
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


# --- Which TPU Pallas is on, and mesh kernels (core/jax_adapter/chips.py, kernels.py). ---


class TestChipsAndMeshShapes:
    def test_chip_lookups_are_module_functions_the_others_call(self):
        from jax._src.pallas.mosaic import tpu_info

        from pallaslab._src.core.jax_adapter import chips

        wrapped = chips.install()
        assert {"get_device_kind", "get_num_device_cores", "is_tpu_device"} <= set(wrapped)
        assert {"create_tensorcore_mesh", "_get_default_num_cores"} & set(wrapped)
        # get_tpu_info asks get_device_kind / get_num_device_cores of its own module.
        for chip, (kind, cores) in chips.TPU_DEVICE_KINDS.items():
            with chips.chip_scope(chip):
                assert tpu_info.get_device_kind() == kind
                assert tpu_info.get_num_device_cores() == cores
                assert str(tpu_info.get_tpu_info().chip_version) == chip

    def test_the_chip_is_part_of_the_trace_context(self):
        from jax._src import config

        from pallaslab._src.core.jax_adapter import chips

        before = config.trace_context()
        with chips.chip_scope("v4"):
            assert config.trace_context() != before
        assert config.trace_context() == before

    def test_tensorcore_meshes_count_the_chosen_chip_s_cores(self):
        from jax.experimental.pallas import tpu as pltpu

        from pallaslab._src.core.jax_adapter import chips

        with chips.chip_scope("v5p"):
            assert pltpu.create_tensorcore_mesh("core").shape == {"core": 2}
        with chips.chip_scope("v5e"):
            assert pltpu.create_tensorcore_mesh("core").shape == {"core": 1}

    def test_mesh_kernel_params_and_mesh_modules(self):
        # pl.core_map binds its own primitive up to 0.11, mpmd_map (as pl.kernel) from 0.12.
        from jax._src.pallas import core as pallas_core
        from jax.experimental.pallas import mosaic_gpu as plgpu
        from jax.experimental.pallas import tpu as pltpu

        from pallaslab._src.core.jax_adapter import execution, kernels

        primitives = {p.name for p in execution.mesh_primitives()}
        assert primitives == {"mpmd_map"} | (
            {"core_map"} if hasattr(pallas_core, "core_map_p") else set()
        )
        tpu_mesh = pltpu.create_tensorcore_mesh("core", num_cores=1)
        gpu_mesh = plgpu.Mesh(grid=(2,), grid_names=("x",))
        assert kernels.mesh_backend(tpu_mesh) == "mosaic_tpu"
        assert kernels.mesh_backend(gpu_mesh) == "mosaic_gpu"

        def body(x_ref, o_ref):
            pltpu.sync_copy(x_ref, o_ref)

        fn = pl.kernel(body, out_type=corpus.f32(8, 128), mesh=tpu_mesh)
        with jax_adapter.mesh_interpret(False):
            (site,) = jax_adapter.find_kernel_sites(jax.make_jaxpr(fn)(corpus.f32(8, 128)))
        assert site.primitive == "mpmd_map"
        assert {"meshes", "jaxprs", "out_avals", "interpret"} <= set(site.params)
        assert not site.params["interpret"]
        # Bound on a CPU to run: Pallas' TPU interpreter, chosen when bound.
        jax_adapter.install_cpu_interpret()
        closed = jax.make_jaxpr(fn)(corpus.f32(8, 128))
        (site,) = jax_adapter.find_kernel_sites(closed)
        assert type(site.params["interpret"]).__name__ == "InterpretParams"


# ---------------------------------------------------------------------------
# The instrumented body (core/jax_adapter/instrument/): what it reads, in this JAX's form.


def test_instrument_discharge_rules_and_their_calling_convention():
    from jax._src.state import discharge, primitives

    from pallaslab._src.core.jax_adapter import instrument

    assert not instrument.unavailable()
    rules = discharge._discharge_rules
    assert primitives.get_p in rules and primitives.swap_p in rules
    names = {p.name for p in rules}
    assert {"masked_load", "masked_swap", "addupdate"} <= names
    context = getattr(discharge, "DischargeContext", None)
    if context is not None:  # newer JAX: rule(ctx, *args, **params)
        fields = {f.name for f in dataclasses.fields(context)}
        assert {"in_avals", "out_avals"} <= fields


def test_instrument_indexers_slices_and_masked_access_trees():
    from jax.experimental.pallas import triton as pltriton

    def kernel(x_ref, o_ref):
        pid = pl.program_id(0)
        mask = jnp.arange(8) < 5
        v = pltriton.load(x_ref.at[pl.ds(pid * 8, 8)], mask=mask)
        pltriton.store(o_ref.at[pl.ds(pid * 8, 8)], v, mask=mask)

    fn = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((16,), jnp.float32), grid=(2,))
    (site,) = jax_adapter.find_kernel_sites(jax.make_jaxpr(fn)(jnp.zeros(16)))
    load, store = [
        e for e in site.params["jaxpr"].eqns if e.primitive.name in ("masked_load", "masked_swap")
    ]
    from jax._src import tree_util
    from jax._src.state import indexing

    _, transforms, mask, other = tree_util.tree_unflatten(
        load.params["args_tree"], list(load.invars)
    )
    assert other is None and mask is not None
    (indexer,) = transforms
    assert isinstance(indexer, indexing.NDIndexer)
    assert indexer.shape == (16,) and tuple(indexer.int_indexer_shape) == ()
    (index,) = indexer.indices
    assert isinstance(index, indexing.Slice)
    assert (index.size, index.stride) == (8, 1) and not isinstance(index.start, int)
    _, transforms, value, mask = tree_util.tree_unflatten(
        store.params["args_tree"], list(store.invars)
    )
    assert mask is not None and value is not None


def test_instrument_control_flow_params_it_rebuilds():
    from pallaslab._src.core.jax_adapter import shapes

    def kernel(x_ref, o_ref):
        def body(t, c):
            return c + x_ref[pl.ds(t, 1)][0]

        total = jax.lax.fori_loop(0, 4, body, 0.0)

        @pl.when(total > 0)
        def _():
            o_ref[...] = jnp.full((8,), total)

    fn = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8,), jnp.float32))
    (site,) = jax_adapter.find_kernel_sites(jax.make_jaxpr(fn)(jnp.ones(8)))
    eqns = {e.primitive.name: e for e in site.params["jaxpr"].eqns}
    scan = eqns["scan"].params
    assert {"jaxpr", "length", "reverse"} <= set(scan)
    # The ref is the loop's one constant; the carry is (t, c): in 0.10's counts or in
    # 0.11's flat trees, the instrumented body reads them through scan_counts.
    assert shapes.scan_counts(scan) == (1, 2) and scan["length"] == 4
    assert hasattr(scan["jaxpr"], "consts") and hasattr(scan["jaxpr"], "jaxpr")
    assert "branches" in eqns["cond"].params
    assert hasattr(eqns["cond"], "ctx") and hasattr(eqns["cond"].ctx, "manager")


# --- Shapes that moved between JAX versions, each pinned in both forms. -------------
#
# The installed JAX gives one form for real; the other form is a small fake with just
# what JAX's source has in that version (read at tags jax-v0.10.2, jax-v0.11.0 and on
# main). `scripts/jax-probe` runs this file against a newer JAX's source as well, where
# the real side is the newer form.


class _FlatTree:
    """`jax._src.flattree` as scan's `ft_in` / `ft_out` (0.11): parts by `unpack()`."""

    def __init__(self, *parts):
        self.parts = tuple(tuple(p) for p in parts)

    def unpack(self):
        return self.parts


def _other_scan_form(params):
    """A scan's params in the other version's form (counts <-> flat trees)."""
    from pallaslab._src.core.jax_adapter import shapes

    num_consts, num_carry = shapes.scan_counts(params)
    num_xs = len(shapes.inner_jaxpr(params["jaxpr"]).invars) - num_consts - num_carry
    num_ys = len(shapes.inner_jaxpr(params["jaxpr"]).outvars) - num_carry
    rest = {
        k: v for k, v in params.items() if k not in ("num_consts", "num_carry", "ft_in", "ft_out")
    }
    if "num_consts" in params:
        nones = lambda n: [None] * n  # noqa: E731
        return dict(
            rest,
            ft_in=_FlatTree(nones(num_consts), nones(num_carry), nones(num_xs)),
            ft_out=_FlatTree(nones(num_carry), nones(num_ys)),
        )
    return dict(rest, num_consts=num_consts, num_carry=num_carry)


def _with_eqn(jaxpr, old, new):
    """`jaxpr` with equation `old` replaced by `new` (top level)."""
    return jaxpr.replace(eqns=[new if e is old else e for e in jaxpr.eqns])


@functools.cache
def _eval_jaxpr_p():
    """A call-like primitive named and shaped like main's `eval_jaxpr` (`call_jaxpr=`).

    Main binds it where 0.10 and 0.11 bind `closed_call`; a stand-in with the same
    name and param is enough for analyses that go by name and params.
    """
    from jax._src import core
    from jax._src.interpreters import mlir

    from pallaslab._src.core.jax_adapter import shapes

    prim = core.Primitive("eval_jaxpr")
    prim.multiple_results = True
    prim.def_impl(lambda *args, call_jaxpr: core.jaxpr_as_fun(call_jaxpr)(*args))
    prim.def_abstract_eval(
        lambda *_, call_jaxpr: [v.aval for v in shapes.inner_jaxpr(call_jaxpr).outvars]
    )
    mlir.register_lowering(
        prim,
        mlir.lower_fun(
            lambda *args, call_jaxpr: core.jaxpr_as_fun(call_jaxpr)(*args),
            multiple_results=True,
        ),
    )
    return prim


def _eval_jaxpr_call(fn, *args):
    """`fn(*args)` staged as one `eval_jaxpr` equation, as main stages calls."""
    closed = jax.make_jaxpr(fn)(*args)
    return _eval_jaxpr_p().bind(*args, call_jaxpr=closed)


class TestVersionShapes:
    def test_scan_counts_from_counts_or_flat_trees(self):
        from pallaslab._src.core.jax_adapter import shapes

        assert shapes.scan_counts({"num_consts": 2, "num_carry": 3}) == (2, 3)  # 0.10
        ft_in = _FlatTree([None] * 2, [None] * 3, [None])  # 0.11: (consts, carry, xs)
        assert shapes.scan_counts({"ft_in": ft_in, "ft_out": _FlatTree([], [])}) == (2, 3)

        def f(c, xs):
            return jax.lax.scan(lambda a, x: (a + x * c, a), 0.0, xs)

        closed = jax.make_jaxpr(f)(1.0, jnp.ones(4))
        (eqn,) = [e for e in shapes.inner_jaxpr(closed).eqns if e.primitive.name == "scan"]
        assert shapes.scan_counts(eqn.params) == (1, 1) and len(eqn.invars) == 3
        other = _other_scan_form(eqn.params)
        assert shapes.scan_counts(other) == (1, 1)
        assert ("ft_in" in other) != ("ft_in" in eqn.params)

    def test_element_interpreter_follows_scans_of_either_form(self):
        from pallaslab._src.core.jax_adapter import accesses as interp

        def kernel(x_ref, o_ref):
            def body(k, acc):
                return acc + x_ref[pl.ds(k * 2, 2)]

            o_ref[...] = jax.lax.fori_loop(0, 4, body, jnp.zeros(2))

        fn = pl.pallas_call(kernel, out_shape=corpus.f32(2))
        body = program_of(pallaslab.inspect(fn, corpus.f32(8))).sites[0].params["jaxpr"]
        (scan,) = [e for e in body.eqns if e.primitive.name == "scan"]
        other = _with_eqn(body, scan, scan.replace(params=_other_scan_form(scan.params)))
        results = []
        for jaxpr in (body, other):
            found = []
            x = interp.Buffer(0, np.arange(8, dtype=np.float32))
            o = interp.Buffer(1, np.zeros(2, np.float32))
            interp.Interpreter((), (), found.append).run(jaxpr, [], [x, o])
            results.append((o.data.tolist(), [a.coords[0].tolist() for a in found]))
        assert results[0] == results[1]
        assert results[0][0] == [0 + 2 + 4 + 6, 1 + 3 + 5 + 7]

    def test_emulator_rebuilds_scans_of_either_form(self):
        from jax._src.pallas import core as pallas_core

        from pallaslab._src.core.jax_adapter import program_body

        def f(x):
            return jax.lax.fori_loop(0, 3, lambda i, a: a + i * pl.program_id(0), x)

        with pallas_core.tracing_grid_env((8,), ()):  # program_id traces in a grid
            closed = jax.make_jaxpr(f)(jnp.int32(1))
        jaxpr, consts = closed.jaxpr, closed.consts
        (scan,) = [e for e in jaxpr.eqns if e.primitive.name == "scan"]
        other = _with_eqn(jaxpr, scan, scan.replace(params=_other_scan_form(scan.params)))
        env = (pallas_core.GridAxis(5, 8),)
        for form in (jaxpr, other):
            (out,) = program_body._eval_with_grid(form, consts, [jnp.int32(1)], env)
            assert int(out) == 1 + (0 + 1 + 2) * 5

    def test_closed_jaxprs_as_two_classes_or_one(self):
        import types

        from pallaslab._src.core.jax_adapter import shapes

        closed = jax.make_jaxpr(lambda x: x * np.float32(3) + jnp.arange(3.0))(jnp.ones(3))
        inner, consts = shapes.closed_parts(closed)  # this JAX's form
        assert inner.eqns and len(consts) == len(inner.constvars)
        # 0.10: a ClosedJaxpr wrapping a Jaxpr.
        wrapped = types.SimpleNamespace(jaxpr=inner, consts=[7])
        assert shapes.closed_parts(wrapped) == (inner, [7])

        # 0.11: one class whose legacy `.jaxpr` returns itself, consts attached; and
        # the same once `.jaxpr` is removed.
        class Unified:
            consts = (1, 2)

            @property
            def jaxpr(self):
                return self

        unified = Unified()
        assert shapes.closed_parts(unified) == (unified, [1, 2])
        bare = types.SimpleNamespace(eqns=[], consts=[5])
        assert shapes.closed_parts(bare) == (bare, [5])
        open_jaxpr = types.SimpleNamespace(eqns=[])  # an open 0.10 Jaxpr: no consts
        assert shapes.closed_parts(open_jaxpr) == (open_jaxpr, [])
        # Closing: ClosedJaxpr(jaxpr, consts) in 0.10, `jaxpr.with_consts` from 0.11.
        again, again_consts = shapes.closed_parts(shapes.with_consts(inner, consts))
        assert again.eqns == inner.eqns and len(again_consts) == len(consts)
        attached = types.SimpleNamespace(with_consts=lambda c: ("attached", tuple(c)))
        assert shapes.with_consts(attached, [3]) == ("attached", (3,))

    def test_eval_jaxpr_is_a_call_primitive_everywhere(self):
        assert {"eval_jaxpr", "closed_call", "remat2", "jit"} <= jax_adapter.CALL_PRIMITIVES

    def test_element_interpreter_follows_eval_jaxpr(self):
        def kernel(x_ref, o_ref):
            (start,) = _eval_jaxpr_call(lambda: (pl.program_id(0) * 2,))
            o_ref[...] = x_ref[pl.ds(start, 2)]

        fn = pl.pallas_call(kernel, out_shape=corpus.f32(2), grid=(2,))
        inspection = pallaslab.inspect(fn, corpus.f32(4))
        body = program_of(inspection).sites[0].params["jaxpr"]
        assert "eval_jaxpr" in {e.primitive.name for e in body.eqns}
        accesses = inspection.accesses(0, (1,))
        assert accesses.complete
        read, _ = accesses.accesses
        assert read.coords[0].tolist() == [2, 3]

    def test_emulator_inlines_eval_jaxpr_holding_program_ids(self):
        from jax._src.pallas import core as pallas_core

        from pallaslab._src.core.jax_adapter import program_body

        with pallas_core.tracing_grid_env((8,), ()):  # program_id traces in a grid
            closed = jax.make_jaxpr(lambda: _eval_jaxpr_call(lambda: (pl.program_id(0) + 10,)))()
        (out,) = program_body._eval_with_grid(
            closed.jaxpr, closed.consts, [], (pallas_core.GridAxis(3, 8),)
        )
        assert int(out) == 13

    def test_outputs_prefetch_and_work_go_through_eval_jaxpr_and_remat(self):
        add = corpus.blocked_add().fn
        x = corpus.f32(1024)
        for wrap in (
            lambda a, b: _eval_jaxpr_call(lambda p, q: (add(p, q),), a, b)[0],
            jax.checkpoint(add),  # remat2
        ):
            closed = jax.make_jaxpr(wrap)(x, x)
            sites = jax_adapter.find_kernel_sites(closed)
            assert jax_adapter.output_writers(closed, sites) == [(0, 0)]
            assert "add" in sites[0].params["jaxpr"].pretty_print()

        case = corpus.scalar_prefetch()
        wrapped = lambda idx, y: _eval_jaxpr_call(lambda i, v: (case.fn(i, v),), idx, y)[0]  # noqa: E731
        inspection = pallaslab.inspect(wrapped, *case.args)
        program = program_of(inspection)
        assert [e.primitive.name for e in program.sites[0].trail] == ["eval_jaxpr"]
        leaves = program.dynamic_leaves((case.args[0], jnp.zeros((64, 128))), {})
        values = prefetch.prefetch_values(program, 0, leaves)
        assert [v.tolist() for v in values] == [[7, 6, 5, 4, 3, 2, 1, 0]]

    def test_index_maps_translate_through_eval_jaxpr(self):
        closed = jax.make_jaxpr(
            lambda i, j: _eval_jaxpr_call(lambda a, b: (a * 2 + b, b // 2), i, j)
        )(jnp.int32(0), jnp.int32(0))
        translated = jax_adapter.index_map_from_jaxpr(closed, 2)
        assert translated.evaluable
        got = translated.evaluate([np.array([3]), np.array([5])])
        assert [int(g[0]) for g in got] == [11, 2]

    def test_run_scoped_refs_in_every_form(self):
        import types

        from jax._src.interpreters import partial_eval as pe
        from jax.experimental.pallas import tpu as pltpu

        from pallaslab._src.core.jax_adapter import shapes

        def fake(constvars, invars, eqn_inputs):
            body = types.SimpleNamespace(constvars=constvars, invars=invars)
            return types.SimpleNamespace(params={"jaxpr": body}, invars=eqn_inputs)

        # 0.10 and 0.11: closed-over refs are constvars (0.11 attaches tracers to them).
        assert shapes.scoped_refs(fake(["a", "b"], ["t"], ["x", "y"])) == (["a", "b"], ["t"])
        # Once constvars mean only the inputs carrying values: plain leading invars.
        assert shapes.scoped_refs(fake([], ["a", "b", "t"], ["x", "y"])) == (["a", "b"], ["t"])

        def kernel(x_ref, o_ref):
            def scoped(tmp_ref):
                tmp_ref[...] = x_ref[...] + 1.0
                o_ref[...] = tmp_ref[...]

            pl.run_scoped(scoped, pltpu.VMEM((8, 128), jnp.float32))

        fn = pl.pallas_call(kernel, out_shape=corpus.f32(8, 128))
        inspection = pallaslab.inspect(fn, corpus.f32(8, 128))
        site = program_of(inspection).sites[0]
        body = site.params["jaxpr"]
        (eqn,) = [e for e in body.eqns if e.primitive.name == "run_scoped"]
        outer, allocated = shapes.scoped_refs(eqn)
        assert len(outer) == 2 and [tuple(v.aval.shape) for v in allocated] == [(8, 128)]
        # The same body with the closed-over refs as plain invars runs the same.
        as_invars = pe.convert_constvars_jaxpr(shapes.inner_jaxpr(eqn.params["jaxpr"]))
        other = _with_eqn(body, eqn, eqn.replace(params=dict(eqn.params, jaxpr=as_invars)))
        from pallaslab._src.core.jax_adapter import accesses as interp

        for jaxpr in (body, other):
            found = []
            run = interp.Interpreter((), (), found.append)
            run.first_scoped = 2
            x = interp.Buffer(0, np.ones((8, 128), np.float32))
            o = interp.Buffer(1, np.zeros((8, 128), np.float32))
            run.run(jaxpr, [], [x, o])
            assert (o.data == 2.0).all() and [a.ref for a in found] == [0, 2, 2, 1]

    def test_index_map_out_tree_is_a_pytreedef_in_both(self):
        # 0.10 builds it with api_util.flatten_fun, 0.11 takes it from a flat tree
        # (`out_avals.tree`): both hand BlockMapping a PyTreeDef, read the same way.
        mapping = _pallas_eqn().params["grid_mapping"].block_mappings[0]
        tree = mapping.index_map_out_tree
        assert isinstance(tree, jax.tree_util.PyTreeDef)
        assert tree.num_leaves == len(mapping.block_shape)

    def test_grid_names_under_vmap_in_both_forms(self):
        from pallaslab._src.core.jax_adapter import shapes

        assert shapes.grid_axis_names(("i",), 2, (0,)) == ("", "i")  # 0.10, 0.11
        assert shapes.grid_axis_names((None, "i"), 2, (0,)) == ("", "i")  # newer
        assert shapes.grid_axis_names(None, 2, (0,)) is None

        def k(x_ref, o_ref):
            o_ref[...] = x_ref[...] * 2

        spec = pl.BlockSpec((128,), lambda i: (i,))
        fn = pl.pallas_call(
            k, out_shape=corpus.f32(256), grid=(("i", 2),), in_specs=[spec], out_specs=spec
        )
        kernel = pallaslab.inspect(jax.vmap(fn), corpus.f32(3, 256)).kernels[0]
        assert kernel.grid == (3, 2) and kernel.grid_names == ("", "i")

    def test_host_memory_space_in_both_forms(self):
        import enum
        import types

        from pallaslab._src.core.jax_adapter.kernels import convert

        def name(space):
            return convert._memory_space_name(types.SimpleNamespace(memory_space=space))

        class PallasMemorySpace(enum.Enum):  # 0.10: pl.HOST is Pallas' MemorySpace.HOST
            HOST = "host"

            def __str__(self):
                return self.value

        class MemorySpace(enum.Enum):  # 0.11: pl.HOST is core's MemorySpace.Host
            Host = enum.auto()

        assert name(PallasMemorySpace.HOST) == name(MemorySpace.Host) == name(pl.HOST) == "host"
        from pallaslab._src.geometry import tilemap

        assert "host" in tilemap._MANUAL_SPACES

    def test_discharge_state_takes_the_jaxpr_alone(self):
        import inspect as pyinspect

        from jax._src.state import discharge

        # 0.10 / 0.11: (jaxpr, *, should_discharge, lower); main adds
        # strip_memory_space=True. pallaslab passes the jaxpr alone.
        parameters = list(pyinspect.signature(discharge.discharge_state).parameters.values())
        assert parameters[0].default is pyinspect.Parameter.empty
        assert all(p.default is not pyinspect.Parameter.empty for p in parameters[1:])

    def test_tpu_info_is_found_where_this_jax_keeps_it(self, monkeypatch):
        import sys
        import types

        from pallaslab._src.core.jax_adapter import chips, lowering, probes

        assert lowering.tpu_chip_known("v5e")  # the installed JAX's own form, for real

        def info_module(name, lookup=None):
            module = types.ModuleType(name)
            if lookup is None:

                def lookup():
                    return "TPU v5 lite"

                lookup.__module__ = name
            module.get_device_kind = lookup
            monkeypatch.setitem(sys.modules, name, module)
            return module

        # 0.10, 0.11: the lookups live in Pallas' own tpu_info module.
        pallas = info_module("jax._src.pallas.mosaic.tpu_info")
        monkeypatch.setattr(probes, "optional_module", {pallas.__name__: pallas}.get)
        assert chips._info_module() is pallas
        # main: jax._src.tpu_info defines them and Pallas' module forwards to it.
        moved = info_module("jax._src.tpu_info")
        forwarding = info_module("jax._src.pallas.mosaic.tpu_info", moved.get_device_kind)
        found = {moved.__name__: moved, forwarding.__name__: forwarding}
        monkeypatch.setattr(probes, "optional_module", found.get)
        assert chips._info_module() is moved
        # Only the forwarding module importable: still the module that defines them.
        monkeypatch.setattr(probes, "optional_module", {forwarding.__name__: forwarding}.get)
        assert chips._info_module() is moved

    def test_kernel_modules_are_parsed_in_a_private_mlir_context(self, monkeypatch):
        from jax._src.interpreters import mlir

        from pallaslab._src.core.jax_adapter import lowering

        # Newer JAX hands out one reused context per thread: pallaslab never takes it.
        def shared_context():
            raise AssertionError("pallaslab asked for JAX's own MLIR context")

        modules = []
        for case, platform, kwargs, backend in (
            (corpus.seed_matmul(), "cuda", {}, "triton"),
            (_mosaic_gpu_case(), "cuda", {"mosaic_gpu": True}, "mosaic_gpu"),
            (corpus.kacc_matmul(), "tpu", {"tpu_generation": "v5e"}, "mosaic_tpu"),
        ):
            site = program_of(pallaslab.inspect(case.fn, *case.args)).sites[0]
            module = lowering.lower_module(
                lowering.kernel_function(site), lowering.kernel_avals(site), platform, **kwargs
            )
            modules.append((module, backend))
        monkeypatch.setattr(mlir, "make_ir_context", shared_context)
        for module, backend in modules:
            (payload,) = lowering.kernel_payloads(module)
            assert payload.backend == backend
        context = lowering.private_context(lambda ctx: None)
        assert not context.allow_unregistered_dialects

    def test_triton_deprecation_is_read_from_jaxs_registry_in_both_forms(self, monkeypatch):
        from jax._src import deprecations

        from pallaslab._src.core.jax_adapter import probes

        registered = dict(getattr(deprecations, "_registered_deprecations", {}))
        monkeypatch.setattr(deprecations, "_registered_deprecations", registered)
        registered.pop("jax-pallas-triton", None)  # jax 0.10: not deprecated
        assert probes.triton_deprecation() == ""
        registered["jax-pallas-triton"] = object()  # 0.11 on: registered
        assert "Triton backend" in probes.triton_deprecation()
        assert jax.__version__ in probes.triton_deprecation()

    def test_mosaic_gpu_interpreter_shapes(self):
        # jax 0.10-0.11: params in `interpret.params` (public in plgpu from 0.12), races
        # printed; 0.12: `on_race` (logged), tcgen05 rules. Either form is met here.
        from jax._src.pallas.mosaic_gpu.interpret import gpu_callbacks, params

        from pallaslab._src.core.jax_adapter import gpu_interpret

        assert gpu_interpret.params_class() is params.InterpretGPUParams
        made = gpu_interpret.make_params(out_of_bounds_reads="uninitialized")
        assert made.detect_races and made.out_of_bounds_reads == "uninitialized"
        fields = {f.name for f in dataclasses.fields(made)}
        assert getattr(made, "on_race", "warn") == "warn" and ("on_race" in fields) == hasattr(
            made, "on_race"
        )
        assert callable(gpu_callbacks.reset_gpu_interpret_mode_state)
        # Memory-space ids: GPU_MEMORY_SPACE_BY_IDX (0.10) or the inverse of
        # IDX_BY_GPU_MEMORY_SPACE, moved to shared_memory (0.12).
        spaces = {k: v.name for k, v in gpu_interpret._memory_spaces().items()}
        assert {0: "GMEM", 1: "SMEM"}.items() <= spaces.items()
        # The rules it has: wgmma in every version, tcgen05 from 0.12 (methods then).
        assert gpu_interpret.gpu_interpreter_runs("wgmma_ref")
        assert not gpu_interpret.gpu_interpreter_runs("no_such_primitive")
        # The thread runner and barriers the hang guard wraps, where this JAX has them.
        from jax._src.pallas.mosaic.interpret import thread_map
        from jax._src.pallas.mosaic_gpu.interpret import shared_memory

        gpu_interpret.install_guard()
        assert gpu_interpret._guard_installed == ["thread_map._run_jaxpr", "shared_memory.Barrier"]
        assert callable(thread_map._run_jaxpr.__wrapped__)
        import inspect as pyinspect

        assert "self.cv = threading.Condition()" in pyinspect.getsource(
            shared_memory.Barrier.__init__.__wrapped__
        )

    def test_the_barrier_guard_wakes_its_waiter_to_check_again(self):
        # A barrier waits in a loop on its phase (JAX's `Barrier.wait`): the guard's
        # untimed wait must come back after each poll (a spurious wake-up, which
        # `threading.Condition` allows), never wait again itself, where a notification
        # that met a timed-out poll would be lost and the barrier hang.
        from pallaslab._src.core.jax_adapter import gpu_interpret

        condition = gpu_interpret._GivingUpCondition()
        woke: list[bool] = []

        def wait_unnotified():
            with condition:
                woke.append(condition.wait())

        waiter = threading.Thread(target=wait_unnotified, daemon=True)
        waiter.start()
        waiter.join(timeout=20 * gpu_interpret._POLL_S)
        assert not waiter.is_alive(), "an untimed wait never came back to check again"
        assert woke == [False]

    def test_pl_kernel_takes_out_type_and_plgpu_kernel_both_names(self):
        # pl.kernel: out_type / scratch_types in every JAX pallaslab supports; plgpu.kernel
        # also the old out_shape / scratch_shapes (deprecated in 0.10, gone in 0.12), read
        # the same.
        from jax.experimental.pallas import mosaic_gpu as plgpu

        def body(x_ref, o_ref, scratch):
            scratch[...] = x_ref[...]
            o_ref[...] = scratch[...] * 2

        out = jax.ShapeDtypeStruct((128,), jnp.float32)
        scratch = plgpu.SMEM((128,), jnp.float32)
        import inspect as pyinspect

        kernels = [pl.kernel(body, out_type=out, mesh=plgpu.Mesh(), scratch_types=[scratch])]
        if "out_shape" in pyinspect.signature(plgpu.kernel).parameters:  # 0.10, 0.11
            kernels.append(plgpu.kernel(body, out_shape=out, scratch_shapes=[scratch]))
        else:  # 0.12: removed
            assert "scratch_shapes" not in pyinspect.signature(plgpu.kernel).parameters
        for fn in kernels:
            (kernel,) = pallaslab.inspect(fn, corpus.f32(128)).kernels
            assert kernel.backend == "mosaic_gpu"
            assert [o.role for o in kernel.operands] == ["in", "out", "scratch"]

    def test_gpu_lowering_gets_an_abstract_gpu(self):
        import importlib

        from jax._src import mesh as mesh_lib

        from pallaslab._src.core.jax_adapter import lowering

        with lowering.gpu_chip():
            device = mesh_lib.get_abstract_mesh().abstract_device
            # An H100 as its devices report themselves, with its SM count (hardware.py).
            assert (device.platform, device.device_kind) == ("cuda", "NVIDIA H100 80GB HBM3")
            assert device.num_cores == 132
        try:  # 0.11+: Pallas asks which GPU (and fails without one)
            gpu_info = importlib.import_module("jax._src.pallas.triton.gpu_info")
        except ImportError:  # 0.10: it assumes sm_90 without asking
            gpu_info = None
        if gpu_info is not None:
            with lowering.gpu_chip():
                assert gpu_info.get_gpu_info().compute_capability == 90
            with lowering.gpu_chip("NVIDIA A100"):
                assert gpu_info.get_gpu_info().compute_capability == 80
        case = corpus.seed_matmul(64, 64, 64)
        site = program_of(pallaslab.inspect(case.fn, *case.args)).sites[0]
        for kind in (None, "NVIDIA A100"):
            module = lowering.lower_module(
                lowering.kernel_function(site), lowering.kernel_avals(site), "cuda",
                gpu_device_kind=kind,
            )  # fmt: skip
            assert lowering.kernel_payloads(module)[0].backend == "triton"

    @pytest.mark.gpu
    def test_on_a_gpu_the_real_device_answers_and_kernels_run(self):
        from jax._src import mesh as mesh_lib

        from pallaslab._src.core.jax_adapter import lowering

        with lowering.gpu_chip():
            assert mesh_lib.get_abstract_mesh().abstract_device is None
        case = corpus.seed_matmul(256, 256, 256)
        inspection = pallaslab.inspect(case.fn, *case.args)
        assert inspection.lower("triton").ok
        result = inspection.run(ref=case.reference)
        assert result.comparison.ok and result.mode == "compiled"

    def test_mosaic_gpu_default_semantics_and_the_layout_hint(self, monkeypatch):
        from jax.experimental.pallas import mosaic_gpu as plgpu

        from pallaslab._src.core.jax_adapter import lowering as adapter_lowering
        from pallaslab._src.core.lowering import failures
        from pallaslab._src.records.lowered import LoweringError

        # Lane up to jax 0.10, Warpgroup from 0.11: the installed JAX's own default,
        # read through the public constructor, is the one right answer.
        default = plgpu.CompilerParams().lowering_semantics.name
        assert adapter_lowering.mosaic_gpu_default_semantics() == default
        kernel = pallaslab.inspect(*_blocked_add_args()).kernels[0]
        error = LoweringError("ValueError: Failed to infer a possible set of layouts.")
        for semantics, hinted in (("Lane", False), ("Warpgroup", True)):  # 0.10, 0.11
            monkeypatch.setattr(jax_adapter, "mosaic_gpu_default_semantics", lambda s=semantics: s)
            message = failures.mosaic_gpu_layout_hint(error, kernel).message
            assert ("LoweringSemantics.Lane" in message) == hinted

    def test_names_removed_in_jax_0_11_are_not_used(self):
        import pathlib
        import re

        # pltpu.semaphore / DeviceIdType / semaphore_* were removed in 0.11 (pl.* stay);
        # plgpu.kernel(out_shape=) is deprecated for out_type=.
        removed = re.compile(
            r"pltpu\.(semaphore\b|DeviceIdType|semaphore_(read|signal|wait))|"
            r"plgpu\.kernel\([^)]*out_shape="
        )
        root = pathlib.Path(__file__).resolve().parents[1]
        files = [
            *root.glob("pallaslab/**/*.py"),
            *root.glob("benchmarks/*.py"),
            *root.glob("notebooks/**/*.py"),
            *root.glob("notebooks/*.ipynb"),
        ]
        hits = [str(f) for f in files if removed.search(f.read_text(encoding="utf-8"))]
        assert hits == []
        import inspect as pyinspect

        from jax.experimental.pallas import mosaic_gpu as plgpu

        assert "out_type" in pyinspect.signature(plgpu.kernel).parameters


class TestMemoizedKernelTraces:
    """From 0.11 JAX memoizes kernel-body traces without the grid in the key."""

    def test_forget_clears_the_memo_where_there_is_one(self, monkeypatch):
        from pallaslab._src.core.jax_adapter import shapes

        cleared = []

        def memoized():  # 0.11+: a weakref_lru_cache with cache_clear
            pass

        memoized.cache_clear = lambda: cleared.append(True)
        monkeypatch.setattr(shapes.partial_eval, "trace_to_jaxpr", memoized)
        shapes.forget_kernel_traces()
        assert cleared == [True]
        monkeypatch.setattr(shapes.partial_eval, "trace_to_jaxpr", lambda: None)  # no memo
        shapes.forget_kernel_traces()
        monkeypatch.delattr(shapes.partial_eval, "trace_to_jaxpr")  # older: none at all
        shapes.forget_kernel_traces()

    def test_a_kernel_reused_on_another_grid_sees_its_own_num_programs(self):
        from jax.experimental.pallas import tpu as pltpu

        def kernel(x_ref, y_ref, o_ref, acc_ref):
            @pl.when(pl.program_id(2) == 0)
            def _():
                acc_ref[...] = jnp.zeros_like(acc_ref)

            acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

            @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
            def _():
                o_ref[...] = acc_ref[...]

        def matmul(x, y, block=32):
            (m, k), (_, n) = x.shape, y.shape
            return pl.pallas_call(
                kernel,
                out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
                grid=(m // block, n // block, k // block),
                in_specs=[
                    pl.BlockSpec((block, block), lambda i, j, kk: (i, kk)),
                    pl.BlockSpec((block, block), lambda i, j, kk: (kk, j)),
                ],
                out_specs=pl.BlockSpec((block, block), lambda i, j, kk: (i, j)),
                scratch_shapes=[pltpu.VMEM((block, block), jnp.float32)],
            )(x, y)

        # Same blocks, grids (2, 2, 2) then (1, 2, 4): the second must not reuse the
        # first's body with num_programs(2) == 2 folded in.
        for (m, k), n in (((64, 64), 64), ((32, 128), 64)):
            x = jax.random.normal(jax.random.key(0), (m, k))
            y = jax.random.normal(jax.random.key(1), (k, n))
            result = pallaslab.inspect(matmul, x, y).run(ref=lambda a, b: a @ b)
            assert result.comparison.ok, (m, k, n)
            np.testing.assert_allclose(pallaslab.emulate(matmul)(x, y), x @ y, atol=1e-4)


class TestVersionNotices:
    """What one version cannot do is said by the one target it concerns."""

    def test_without_the_triton_backend_only_triton_targets_say_so(self, monkeypatch):
        from pallaslab._src.core.jax_adapter import probes

        assert jax_adapter.feature_notice("triton-lowering") is None  # 0.10, 0.11 have it
        monkeypatch.setitem(
            probes.FEATURES, "triton-lowering", (False, "jax._src.pallas.triton is not in it")
        )
        case = corpus.seed_matmul()
        inspection = pallaslab.inspect(case.fn, *case.args)
        for target in ("triton", "ptx:sm_90"):
            lowered = inspection.lower(target)
            assert lowered.error.kind == "unavailable"
            assert f"with jax {jax.__version__}" in lowered.error.message
            assert "'mosaic-gpu' target" in lowered.error.message
        assert inspection.lower("stablehlo").ok
        other = corpus.blocked_add()
        assert pallaslab.inspect(other.fn, *other.args).lower("mosaic-tpu:v5e").ok

    def test_deprecations_become_notes_of_the_lowering(self):
        import warnings

        from pallaslab._src.core.jax_adapter import lowering

        with lowering.deprecation_notices() as notices:
            warnings.warn("old API", DeprecationWarning, stacklevel=1)
            warnings.warn("old API", DeprecationWarning, stacklevel=1)
        assert notices == [f"jax {jax.__version__}: old API"]
        # Both 0.10 and 0.11 deprecate pl.pallas_call for Mosaic GPU (0.11 also Triton);
        # 0.12 removed it: the target says so instead.
        case = corpus.blocked_add()
        lowered = pallaslab.inspect(case.fn, *case.args).lower("mosaic-gpu")
        if notice := jax_adapter.mosaic_gpu_pallas_call_notice():
            assert lowered.error is not None and lowered.error.message == notice
            return
        assert any("pallas_call" in note and "deprecated" in note for note in lowered.notes)


def _blocked_add_args():
    case = corpus.blocked_add()
    return (case.fn, *case.args)


class TestObservedShapes:
    """What `pytest --pallaslab` reads of JAX (core/jax_adapter/observe.py, execution.py)."""

    def test_lowering_contexts_say_whether_they_are_for_export_and_can_be_replaced(self):
        from jax._src.interpreters import mlir

        assert "for_export" in {f.name for f in dataclasses.fields(mlir.LoweringParameters)}
        assert callable(mlir.LoweringRuleContext.replace)
        fields = {f.name for f in dataclasses.fields(mlir.LoweringRuleContext)}
        assert {"avals_in", "avals_out", "tokens_out", "module_context"} <= fields

    def test_the_trace_context_names_options_the_snapshot_restores(self):
        from pallaslab._src.core.jax_adapter import observe

        names = dict(observe.config_snapshot())
        assert {"jax_enable_x64", "jax_numpy_rank_promotion"} <= set(names)
        with observe.restored_config((("jax_numpy_rank_promotion", "raise"),)):
            assert jax.config.jax_numpy_rank_promotion == "raise"
        assert jax.config.jax_numpy_rank_promotion == names["jax_numpy_rank_promotion"]

    def test_a_grid_mapping_takes_another_grid(self):
        from pallaslab._src.core.jax_adapter import emulation

        site = jax_adapter.find_kernel_sites(
            jax.make_jaxpr(_sized_double)(jnp.arange(16.0), jnp.int32(2))
        )[0]
        params, avals, operands = emulation.with_grid_sizes(
            site.params, site.in_avals, [np.int32(2), np.arange(16.0, dtype=np.float32)]
        )
        assert tuple(params["grid_mapping"].grid) == (2,)
        assert len(avals) == len(operands) == 1

    def test_mpmd_map_lowers_through_its_registered_rule_where_jax_has_it(self):
        mpmd = pytest.importorskip("jax._src.pallas.mpmd")
        from jax._src.interpreters import mlir

        from pallaslab._src.core.jax_adapter import execution

        if not hasattr(mpmd, "mpmd_map_p"):
            pytest.skip("this JAX has no mpmd_map")
        # JAX's rule is read from its registry (the module's name for it is None) ...
        assert callable(execution._registered_rule(mpmd.mpmd_map_p))
        # ... and, once installed, pallaslab's CPU rule wraps it.
        execution.install_cpu_interpret()
        assert mpmd.mpmd_map_p in mlir._platform_specific_lowerings["cpu"]

    def test_buffered_names_its_revisit_mode_where_jax_has_one(self):
        from pallaslab._src.core.jax_adapter.kernels import convert

        if not hasattr(pl, "RevisitMode"):
            pytest.skip("this JAX has no pl.RevisitMode")
        assert convert._revisit_mode(pl.Buffered(2, revisit=pl.RevisitMode.ANY)) == "any"
        assert convert._revisit_mode(pl.Buffered(2)) == ""

    def test_every_kernel_run_is_observed_eager_jit_and_vmap(self):
        from pallaslab._src.core.jax_adapter import execution, observe

        execution.install_cpu_interpret()
        seen: list[tuple[str, tuple[tuple[int, ...], ...]]] = []

        def observer(lowered):
            return lambda *values: seen.append(
                (lowered.primitive, tuple(np.shape(v) for v in values))
            )

        def add(x):
            return pl.pallas_call(
                lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...] + 1),
                out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                interpret=True,
            )(x)

        observe.set_observer(observer)
        try:
            add(jnp.arange(4.0))
            jax.jit(add)(jnp.arange(5.0))
            jax.vmap(add)(jnp.ones((2, 3)))
            jax.effects_barrier()
        finally:
            observe.set_observer(None)
        assert seen == [
            ("pallas_call", ((4,), (4,))),
            ("pallas_call", ((5,), (5,))),
            ("pallas_call", ((2, 3), (2, 3))),
        ]


def _sized_double(x, n):
    spec = pl.BlockSpec((8,), lambda i: (i,))
    return pl.pallas_call(
        lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...] * 2),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(n,),
        in_specs=[spec],
        out_specs=spec,
    )(x)


def _mosaic_gpu_case() -> types.SimpleNamespace:
    """A Mosaic GPU kernel in the form this JAX lowers: a pallas_call up to jax 0.11,
    else (0.12 lowers pallas_calls for GPUs with Triton only) a plgpu.kernel."""
    if not jax_adapter.mosaic_gpu_pallas_call_notice():
        case = corpus.blocked_add()
        return types.SimpleNamespace(fn=case.fn, args=case.args)
    from jax.experimental.pallas import mosaic_gpu as plgpu

    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0

    def add_one(x):
        return plgpu.kernel(body, out_type=corpus.f32(256), grid=(2,), grid_names=("x",))(x)

    return types.SimpleNamespace(fn=add_one, args=(corpus.f32(256),))
