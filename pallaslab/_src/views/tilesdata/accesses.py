"""Element-level accesses of one program, sent on request: access maps, loads, stores."""

from __future__ import annotations

import math

import numpy as np

from pallaslab._src.base import sources
from pallaslab._src.geometry.accesses import AccessMap, BlockAccesses
from pallaslab._src.views import fmt
from pallaslab._src.views.contracts import AccessesReply, AccessMapModel, AccessRow
from pallaslab._src.views.tilesdata.encoding import encode, pool

# Elements of a program's access maps sent at most, all buffers together (pooled
# beyond, by max), and loads and stores listed at most.
MAX_ACCESS_ELEMENTS = 1 << 18
MAX_ACCESSES = 2000


def _as_rows(values: np.ndarray) -> np.ndarray:
    """A buffer drawn as rows x columns: leading dimensions stacked as rows."""
    if values.ndim == 0:
        return values.reshape(1, 1)
    if values.ndim == 1:
        return values.reshape(1, -1)
    return values.reshape(-1, values.shape[-1])


def access_map_json(access_map: AccessMap, max_elements: int | None = None) -> AccessMapModel:
    """One buffer's per-element reads, writes and masked lanes, ready to draw.

    Pooled (by max) to at most `max_elements` (default `MAX_ACCESS_ELEMENTS`) drawn.
    """
    limit = MAX_ACCESS_ELEMENTS if max_elements is None else max(1, max_elements)
    arrays = [_as_rows(a) for a in (access_map.reads, access_map.writes, access_map.masked)]
    inside = _as_rows(access_map.inside.astype(np.int64))
    rows, cols = arrays[0].shape
    factors = [1, 1]
    while math.ceil(rows / factors[0]) * math.ceil(cols / factors[1]) > limit:
        axis = 0 if math.ceil(rows / factors[0]) >= math.ceil(cols / factors[1]) else 1
        factors[axis] *= 2
    pooled = [pool(a, factors) for a in (*arrays, inside)]
    ref = access_map.ref
    return {
        "label": ref.label,
        "role": ref.role,
        "operand": ref.operand,
        "shape": list(ref.shape),
        "type": fmt.array_type(ref.dtype, ref.shape) if ref.dtype else str(list(ref.shape)),
        "origin": list(access_map.origin),
        "box": list(access_map.reads.shape),
        "pool": factors,
        "reads": encode(pooled[0]),
        "writes": encode(pooled[1]),
        "masked": encode(pooled[2]),
        "inside": encode(pooled[3]),
        "summary": {
            "accesses": access_map.accesses,
            "untouched": access_map.untouched,
            "readTwice": access_map.read_twice,
            "writtenTwice": access_map.written_twice,
            "maskedLanes": access_map.masked_lanes,
            "outsideLanes": access_map.outside_lanes,
            "elements": math.prod(ref.shape),
        },
    }


def accesses_json(block: BlockAccesses) -> AccessesReply:
    """Every buffer's access map and the list of loads and stores, for one program.

    The buffers share `MAX_ACCESS_ELEMENTS` drawn elements, and the list keeps its
    first `MAX_ACCESSES` entries (`accessCount` says how many there are): a reply
    stays far under the widget's message limit.
    """
    share = MAX_ACCESS_ELEMENTS // max(1, len(block.refs))
    refs = [access_map_json(block.map(k), share) for k in range(len(block.refs))]
    accesses: list[AccessRow] = []
    for access in block.accesses[:MAX_ACCESSES]:
        shape = block.refs[access.ref].shape
        outside = access.outside(shape) & access.mask
        bbox = [[int(c.min()), int(c.max()) + 1] if c.size else [0, 0] for c in access.coords]
        accesses.append(
            {
                "kind": access.kind,
                "ref": access.ref,
                "primitive": access.primitive,
                "line": access.line,
                "file": sources.label(access.file) if access.file else "",
                "lanes": access.lanes,
                "masked": access.masked,
                "outside": int(np.count_nonzero(outside)),
                "bbox": bbox,
            }
        )
    return {
        "kernel": block.kernel,
        "program": list(block.program),
        "refs": refs,
        "accesses": accesses,
        "accessCount": len(block.accesses),
        "notices": list(block.notices),
        "complete": block.complete,
    }
