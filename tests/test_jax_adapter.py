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
    program = inspection.program
    leaves = program.dynamic_leaves((case.args[0], jnp.zeros((64, 128))), {})
    values = jax_adapter.prefetch_values(program.sites[0], program, leaves)
    assert [v.tolist() for v in values] == [[7, 6, 5, 4, 3, 2, 1, 0]]


def test_sites_are_frozen_records_of_jax_state():
    case = corpus.blocked_add()
    site = pallaslab.inspect(case.fn, *case.args).program.sites[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        site.path = ()  # type: ignore[misc]


# --- Private shapes the tile map and the element-level interpreter read. ------------


def _body(case):
    inspection = pallaslab.inspect(case.fn, *case.args)
    return inspection.program.sites[0].params["jaxpr"]


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
        body = pallaslab.inspect(fn, corpus.f32(4)).program.sites[0].params["jaxpr"]
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
        matmul = _body(corpus.seed_matmul())
        (scan,) = _eqns(matmul, "scan")
        assert {"jaxpr", "num_consts", "num_carry", "length", "reverse"} <= set(scan.params)
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
            pallaslab.inspect(fn, corpus.f32(8)).program.sites[0].params["jaxpr"], "while"
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
        (eqn,) = _eqns(inspection.program.sites[0].params["jaxpr"], "run_scoped")
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
        bounded, element = inspection.program.sites[0].params["grid_mapping"].block_mappings
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
        program = inspection.program
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
        body = pallaslab.inspect(fn, corpus.f32(8)).program.sites[0].params["jaxpr"]
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
        body = inspection.program.sites[0].params["jaxpr"]
        (call,) = [e for e in body.eqns if e.primitive.name in ("pjit", "jit")]
        assert hasattr(call.params["jaxpr"], "jaxpr") and hasattr(call.params["jaxpr"], "consts")
        (relu,) = _eqns(body, "custom_jvp_call")
        assert hasattr(relu.params["call_jaxpr"], "jaxpr")
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
        case = corpus.seed_matmul(64, 64, 64)
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

        case = corpus.blocked_add()
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

        context = mlir.make_ir_context()
        triton.dialect.register_dialect(context)
        tpu.register_dialect(context)
        mosaic_gpu_dialect.register_dialect(context)
        with context:
            for name in ("mosaic-serde{serialize=false}", "mosaic_gpu-serde{serialize=false}"):
                passmanager.PassManager.parse(f"builtin.module({name})")

    def test_payloads_read_every_backend(self):
        from pallaslab._src.core.jax_adapter import lowering

        for case, platform, kwargs, backend, needle in (
            (corpus.seed_matmul(), "cuda", {}, "triton", "tt.dot"),
            (corpus.blocked_add(), "cuda", {"mosaic_gpu": True}, "mosaic_gpu", "gpu.launch"),
            (corpus.kacc_matmul(), "tpu", {"tpu_generation": "v4"}, "mosaic_tpu", "tpu.matmul"),
        ):
            site = pallaslab.inspect(case.fn, *case.args).program.sites[0]
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

    def test_gpu_backend_switch_is_a_config_state(self):
        from jax._src import config

        state = config.jax_pallas_use_mosaic_gpu
        with state(False):
            assert state.value is False

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
        site = pallaslab.inspect(case.fn, *case.args).program.sites[0]
        data = lowering.export_for_tpu(
            lowering.kernel_function(site), lowering.kernel_avals(site), "v5e"
        )
        exported = pickle.loads(data)
        assert exported.platforms == ("tpu",) and len(exported.in_avals) == 2


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
        from jax.experimental.pallas import mosaic_gpu as plgpu
        from jax.experimental.pallas import tpu as pltpu

        from pallaslab._src.core.jax_adapter import execution, kernels

        primitives = {p.name for p in execution.mesh_primitives()}
        assert primitives == {"mpmd_map", "core_map"}
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
# The instrumented body (core/jax_adapter/instrument.py): what it reads, in this JAX's form.


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
    assert {"jaxpr", "num_consts", "num_carry", "length", "reverse"} <= set(scan)
    assert hasattr(scan["jaxpr"], "consts") and hasattr(scan["jaxpr"], "jaxpr")
    assert "branches" in eqns["cond"].params
    assert hasattr(eqns["cond"], "ctx") and hasattr(eqns["cond"].ctx, "manager")
