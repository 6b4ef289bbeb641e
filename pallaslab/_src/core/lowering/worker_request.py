"""A compile worker's one request: read it, compile, write the result (or why it failed) as JSON.

The worker scripts (`tpu_worker.py`, `xla_gpu_worker.py`) import this from their own
folder, as they run as scripts with only the standard library and JAX; pallaslab
imports it as a module of this package. Standard library only.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any


def answer(
    path: str, compile_request: Callable[[dict[str, Any]], dict[str, Any]], what: str
) -> int:
    """Compiles the request at `path`, writing the result JSON where it says; exit status 0.

    A failure of the worker's own is written as the result's `error` (naming `what`
    worker failed, with the traceback), so the parent always has an answer to read.
    """
    request = json.loads(Path(path).read_text(encoding="utf-8"))
    try:
        result = compile_request(request)
    except Exception:
        result = {"error": f"the {what} compile worker failed:\n" + traceback.format_exc()}
    Path(request["result"]).write_text(json.dumps(result), encoding="utf-8")
    return 0
