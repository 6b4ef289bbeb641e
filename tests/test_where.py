"""The views never show library internals as the user's source (issue 15, a new user).

A BlockSpec without an index map gets JAX's default one, defined in JAX's own
`core.py`: its line is not the user's, so no view shows that file, marks that line or
says a hint is there. A kernel's own body in a library (JAX's ops) is still shown.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src.base import sources
from pallaslab._src.records import SourceLocation
from pallaslab._src.views import where
from pallaslab._src.views.sourceview import source_files
from pallaslab._src.views.static_page import static_page
from pallaslab._src.views.tabs import jaxpr, overview


def doubled(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


def default_map_call():
    return pl.pallas_call(
        doubled,
        out_shape=jax.ShapeDtypeStruct((128,), jnp.float32),
        grid=(2,),
        in_specs=[pl.BlockSpec((128,), lambda i: (0,))],
        out_specs=pl.BlockSpec((128,)),  # JAX's default index map
    )


def test_a_default_index_map_is_not_shown_as_user_source():
    inspection = pallaslab.inspect(default_map_call(), jax.ShapeDtypeStruct((128,), jnp.float32))
    (kernel,) = inspection.kernels
    default = kernel.operands[1].index_map
    # The record points into JAX (h15c may make it None): either way the views hide it.
    if default is not None and default.source_file:
        assert sources.is_library_file(default.source_file)
    files = source_files(inspection)
    assert [f.label for f in files] == ["test_where.py"]
    marks = [m.text for m in files[0].marks]
    assert "BlockSpec of x_ref" in marks and "BlockSpec of o_ref" not in marks
    pane = jaxpr.payload(inspection)
    assert all(f["label"] == "test_where.py" for f in pane["files"])
    page = static_page(inspection)
    assert ">core.py</div>" not in page and ">test_where.py</div>" in page
    # (The page shows this file, so the mark is looked for with its arrow.)
    assert "\u2190 BlockSpec of x_ref" in page and "\u2190 BlockSpec of o_ref" not in page
    model = overview.payload(inspection)["kernels"][0]
    assert model["source"]["label"] == "test_where.py"


def test_library_locations_show_nothing_unless_a_kernel_body_is_there():
    jax_file = jax.numpy.__file__
    inside = SourceLocation(jax_file, 10)
    assert where.location(inside) is None
    assert where.file_location(inside) is None
    assert where.location(inside, {jax_file}) == {"label": "__init__.py", "line": 10}
    assert where.location(SourceLocation(__file__, 3)) == {"label": "test_where.py", "line": 3}
    assert where.location(None) is None
