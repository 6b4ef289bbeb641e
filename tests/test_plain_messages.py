"""Every message pallaslab shows reads as plain prose.

The views, IPython's error line, the CLI and exercise feedback show text as it is:
markdown code spans would show their backticks, and the identifiers pallaslab keeps
for tests and styling (a diagnosis kind like "traced-if", a hint's rule id) are not
words. Checked on the bad-input matrix (tests/test_bad_inputs.py), on leaks, and on
every hint of the corpus.
"""

from __future__ import annotations

import html
import re

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src.core import running
from pallaslab._src.core.diagnose import KIND_TITLES
from pallaslab._src.records import feedback
from tests import corpus
from tests.test_bad_inputs import CASES, message_of, run_cell

# Hint rules' ids: stable names for scripts, never shown (perfhints.Hint.id).
HINT_IDS = {
    "dot-low-precision-result",
    "dot-upcast",
    "gpu-narrow-rows",
    "grid-tail",
    "hbm-revisits",
    "masked-lanes",
    "occupancy",
    "one-stage-pipeline",
    "register-spills",
    "small-dot",
    "small-grid",
    "tpu-one-core",
    "tpu-padding",
    "tpu-tiling",
    "working-set",
}
CODES = {k for k in KIND_TITLES if "-" in k} | HINT_IDS
_CODE = re.compile(r"(?<![\w-])(" + "|".join(sorted(map(re.escape, CODES))) + r")(?![\w-])")
_TAG = re.compile(r"<[^>]+>")
# Where pallaslab quotes the user's own code or a compiler, the text is theirs.
_STYLE = re.compile(r"<(style|script)\b.*?</\1>", re.S)


def _text_of(value: str) -> str:
    return html.unescape(_TAG.sub(" ", _STYLE.sub(" ", value)))


def problems(text: str) -> list[str]:
    """The backticks and internal codes in a message, each with a little context."""
    found = [text[max(0, m.start() - 30) : m.end() + 30] for m in re.finditer("`", text)]
    found += [m.group(0) for m in _CODE.finditer(text)]
    return found


def test_the_checks_find_what_they_look_for():
    assert problems("Python `if` on a value") and problems("error: traced-if")
    assert problems("rule small-dot fired") and not problems("a scalar-prefetch ref")
    assert not problems("error: a Python 'if' on a value known only when the kernel runs")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_messages_are_plain(ip, case):
    result, captured = run_cell(ip, case.line, case.body)
    text, _ = message_of(result.error_in_exec)
    shown = [text, captured.stdout, captured.stderr]
    for output in captured.outputs:
        shown += [_text_of(str(v)) for k, v in output.data.items() if k.startswith("text/")]
    kept = ip.user_ns.get("_kernel")
    if isinstance(kept, pallaslab.types.Inspection):
        shown += list(kept.notices)
        if kept.result is not None:
            shown += [leak.describe() for leak in kept.result.leaks]
            shown += [o.describe() for o in kept.result.out_of_bounds]
    assert [p for message in shown for p in problems(message)] == []


def _reverse(size=200):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...][::-1]

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((size,), jnp.float32),
        grid=(2,),
        in_specs=[pl.BlockSpec((128,), lambda i: (i,))],
        out_specs=pl.BlockSpec((128,), lambda i: (i,)),
    )


def _accumulate():
    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((64, 64), jnp.float32),
        grid=(2, 2, 2),
        in_specs=[
            pl.BlockSpec((32, 32), lambda i, j, k: (i, k)),
            pl.BlockSpec((32, 32), lambda i, j, k: (k, j)),
        ],
        out_specs=pl.BlockSpec((32, 32), lambda i, j, k: (i, j)),
    )


def _never_stores():
    def kernel(x_ref, o_ref):
        o_ref = x_ref[...] * 2  # noqa: F841 - the mistake: rebinds the name

    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))


def test_leaks_are_plain():
    x = jnp.arange(200.0)
    leaks = list(pallaslab.inspect(_reverse(), x).run(x).leaks)
    args = running.example_arrays([corpus.f32(64, 64), corpus.f32(64, 64)])
    leaks += pallaslab.inspect(_accumulate(), *args).run(*args).leaks
    y = jnp.ones((8, 128), jnp.float32)
    leaks += pallaslab.inspect(_never_stores(), y).run(y).leaks
    causes = {leak.cause for leak in leaks}
    assert {"padding", "uninitialized-output"} <= causes, causes
    texts = [t for leak in leaks for t in (leak.describe(), leak.detail)]
    assert [p for t in texts for p in problems(t)] == []


@pytest.mark.parametrize("make", corpus.ALL, ids=lambda m: m.__name__)
def test_hints_are_plain(make):
    case = make()
    inspection = pallaslab.inspect(case.fn, *case.args, **case.kwargs)
    texts = []
    for chip in ("v5e", "v6e", "H100", "A100"):
        texts += [h.message for h in pallaslab.hints(inspection, chip=chip, masks=False)]
    assert [p for t in texts for p in problems(t)] == []


def test_exercise_feedback_names_the_error_in_words(ip):
    ip.run_cell("import jax, jax.numpy as jnp\nfrom jax.experimental import pallas as pl")
    ip.run_cell(
        "def relu(x):\n"
        "    def kernel(x_ref, o_ref):\n"
        "        o_ref[...] = x_ref[...] if x_ref[0] > 0 else 0 * x_ref[...]\n"
        "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
        "        grid=(x.shape[0] // 128,), in_specs=[pl.BlockSpec((128,), lambda i: (i,))],\n"
        "        out_specs=pl.BlockSpec((128,), lambda i: (i,)))(x)\n"
    )
    result = pallaslab.exercise("00.relu", ip.user_ns["relu"])
    assert isinstance(result, feedback.Feedback) and result.kind == "error"
    (case,) = result.cases
    assert case.summary == "error: a Python 'if' on a value known only when the kernel runs"
    texts = [result.summary(), _text_of(result._repr_mimebundle_()["text/html"])]
    assert [p for t in texts for p in problems(t)] == []
