"""The private shapes the Mosaic GPU walker reads, pinned in each JAX version's form.

What `core/jax_adapter/mosaic_gpu/` reads of JAX: the parameters of Mosaic GPU's
copy, product and scope primitives, the walker's integer arithmetic (against
`jax.lax` itself), and the forms newer JAX binds that the installed one cannot make
(a TMA copy without a barrier, with a predicate: jax 0.11+), built by hand here.
"""

from __future__ import annotations

import inspect
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental.pallas import mosaic_gpu as plgpu

from pallaslab._src.core.jax_adapter.mosaic_gpu import events, refs, values
from pallaslab._src.core.jax_adapter.mosaic_gpu.walker import Buffer, Ref, Walker
from pallaslab._src.core.jax_adapter.probes import jax_core, source_info_util, state_indexing
from tests import mosaic_gpu_pipelines as kernels


def equations(fn, *args):
    """Every equation of a traced call, at any depth."""
    found = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            found.append(eqn)
            for sub in jax_core.jaxprs_in_params(eqn.params):
                walk(getattr(sub, "jaxpr", sub))

    walk(jax.make_jaxpr(fn)(*args).jaxpr)
    return found


@pytest.fixture(scope="module")
def matmul_eqns():
    fn, args = kernels.tma_wgmma_matmul()
    return equations(fn, *args)


def test_copy_and_product_parameters(matmul_eqns):
    names = {e.primitive.name: e for e in matmul_eqns}
    copy_in = names["copy_gmem_to_smem"]
    for key in ("src_transforms_treedef", "dst_transforms_treedef", "barrier_transforms_treedef"):
        assert key in copy_in.params
    copy_out = names["copy_smem_to_gmem"]
    assert {"src_transforms_treedef", "dst_transforms_treedef", "has_user_predicate"} <= set(
        copy_out.params
    )
    product = names.get("wgmma_ref", names.get("wgmma"))
    assert {"acc_transforms_tree", "a_transforms_tree", "b_transforms_tree"} <= set(product.params)
    scoped = [e for e in matmul_eqns if e.primitive.name == "run_scoped"]
    assert all("ref_transforms" in e.params and "collective_axes" in e.params for e in scoped)
    # The pipeline's buffers carry their layout as undo-transforms, read back as written.
    pipeline = next(e for e in scoped if _allocates_barriers(e))
    written = [refs.written_transforms(t) for t in pipeline.params["ref_transforms"] if t]
    assert [[t.text for t in w] for w in written] == [
        ["TilingTransform((8, 64))", "SwizzleTransform(128)"]
    ] * 2


def _allocates_barriers(eqn):
    body = getattr(eqn.params["jaxpr"], "jaxpr", eqn.params["jaxpr"])
    return any(hasattr(v.aval.inner_aval.dtype, "num_arrivals") for v in body.invars)


def test_barrier_and_scope_shapes(matmul_eqns):
    scoped = next(
        e for e in matmul_eqns if e.primitive.name == "run_scoped" and _allocates_barriers(e)
    )
    body = getattr(scoped.params["jaxpr"], "jaxpr", scoped.params["jaxpr"])
    barrier = next(v for v in body.invars if hasattr(v.aval.inner_aval.dtype, "num_arrivals"))
    assert barrier.aval.inner_aval.dtype.num_arrivals == 2  # A and B land on each slot
    assert barrier.aval.inner_aval.shape == (3,)
    assert refs.memory_space(barrier.aval) == "smem"


def test_mesh_attributes_read():
    mesh = plgpu.Mesh(grid=(2, 3), grid_names=("m", "n"), num_threads=3, thread_name="wg")
    for attribute in (
        "grid",
        "grid_names",
        "cluster",
        "cluster_names",
        "num_threads",
        "thread_name",
    ):
        assert hasattr(mesh, attribute)


@pytest.mark.parametrize("name", ["div", "rem"])
def test_integer_division_rounds_as_lax_does(name):
    a = np.array([7, -7, 7, -7, 0, 5], np.int64)
    b = np.array([2, 2, -2, -2, 3, 5], np.int64)
    expected = np.asarray(getattr(lax, name)(jnp.asarray(a, jnp.int32), jnp.asarray(b, jnp.int32)))
    aval = jax_core.ShapedArray((), jnp.int32)
    assert values.evaluate(name, {}, [a, b], aval).tolist() == expected.tolist()


def test_select_and_conversions_follow_lax():
    aval = jax_core.ShapedArray((), jnp.int32)
    which = np.array([True, False, True])
    chosen = values.evaluate(
        "select_n", {}, [which, np.array([1, 2, 3]), np.array([10, 20, 30])], aval
    )
    assert (
        chosen.tolist()
        == np.asarray(
            lax.select_n(jnp.asarray(which), jnp.arange(1, 4), jnp.arange(10, 40, 10))
        ).tolist()
    )
    as_bool = values.evaluate(
        "convert_element_type",
        {"new_dtype": jnp.bool_},
        [np.array([0, 3])],
        jax_core.ShapedArray((), jnp.bool_),
    )
    assert as_bool.tolist() == [False, True]
    assert values.evaluate("add", {}, [None, np.array(1)], aval) is None  # data: unknown


# --- jax 0.11+: a TMA copy without a barrier, with a predicate (made by hand) ----------


def _var(aval):
    """A jaxpr variable: `Var(aval)` (jax 0.10+), `Var(suffix, aval)` before."""
    first = next(iter(inspect.signature(jax_core.Var).parameters))
    return jax_core.Var(aval) if first == "aval" else jax_core.Var("", aval)


def _walker(programs=2):
    gmem = jax_core.ShapedArray((256, 64), jnp.float16)
    smem = jax_core.ShapedArray((128, 64), jnp.float16)
    walker = Walker(
        programs,
        {"x": np.arange(programs)},
        {"x": programs},
        [Buffer("gmem", 0, None, gmem), Buffer("smem", None, 0, smem)],
        {},
    )
    return walker, gmem, smem


def _window_leaves(start_var):
    """An NDIndexer picking rows [start, start + 128) of a (256, 64) array, flattened."""
    indexer = state_indexing.NDIndexer(
        (state_indexing.Slice(start_var, 128), state_indexing.Slice(0, 64)),
        (256, 64),
        (),
    )
    return jax.tree_util.tree_flatten((indexer,))


def test_a_copy_without_barrier_and_with_a_predicate_newer_jax_form():
    walker, gmem, smem = _walker()
    src, dst = _var(gmem), _var(smem)
    start = _var(jax_core.ShapedArray((), jnp.int32))
    predicate = _var(jax_core.ShapedArray((), jnp.bool_))
    walker.env.update({src: Ref(0), dst: Ref(1), start: np.array([0, 128])})
    walker.env[predicate] = np.array([True, False])  # the second CTA skips its copy
    leaves, treedef = _window_leaves(start)
    eqn = types.SimpleNamespace(
        primitive=types.SimpleNamespace(name="copy_gmem_to_smem"),
        invars=[src, dst, *leaves, predicate],
        outvars=[],
        params={
            "src_transforms_treedef": treedef,
            "dst_transforms_treedef": jax.tree_util.tree_flatten(())[1],
            "barrier_transforms_treedef": jax.tree_util.tree_flatten(())[1],
            "collective_axes": None,
            "has_barrier": False,
            "has_user_predicate": True,
        },
        source_info=source_info_util.new_source_info(),
    )
    events._copy_in(walker, eqn, np.ones(2, bool))
    (record,) = walker.found.copies.values()
    assert (record.kind, record.window, record.copies) == ("tma-load", (128, 64), 1)
    (event,) = walker.found.windows
    assert event.mask.tolist() == [True, False]
    assert [np.broadcast_to(s, (2,)).tolist() for s in event.starts] == [[0, 128], [0, 0]]
