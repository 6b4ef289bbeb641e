"""The matchers that explain failures: each returns a `Diagnosis` (location optional) or None.

`MATCHERS` tries them in order; the last, `_generic`, always matches.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Callable, Iterable

import jax

from pallaslab._src.base import messages
from pallaslab._src.core import jax_adapter, memory, run_budget
from pallaslab._src.core.diagnose_lines import (
    pallas_call_line_of,
    probably_user_file,
)
from pallaslab._src.core.diagnosis import Diagnosis
from pallaslab._src.geometry.limits import GridTooLargeError
from pallaslab._src.records import SourceLocation

Matcher = Callable[[BaseException, Iterable[str]], Diagnosis | None]
# Explains an error whose message matched a matcher's pattern, from the match.
Explainer = Callable[[re.Match[str], BaseException], Diagnosis | None]


def _text(error: BaseException) -> str:
    """The error's message, never raising, bounded (regexes run over it)."""
    return messages.error_text(error)


def _on_message(pattern: re.Pattern[str]) -> Callable[[Explainer], Matcher]:
    """A matcher for errors whose message `pattern` finds; the explainer takes the match."""

    def wrap(explain: Explainer) -> Matcher:
        @functools.wraps(explain)
        def matcher(error: BaseException, _: Iterable[str]) -> Diagnosis | None:
            match = pattern.search(_text(error))
            return None if match is None else explain(match, error)

        return matcher

    return wrap


def _written_at(match: re.Match[str]) -> SourceLocation:
    """The file and line a matched message names (groups `file` and `line`)."""
    return SourceLocation(match["file"], int(match["line"]))


def _syntax(error: BaseException, _: Iterable[str]) -> Diagnosis | None:
    if not isinstance(error, SyntaxError) or error.lineno is None:
        return None
    location = SourceLocation(error.filename or "", error.lineno)
    return Diagnosis("syntax", f"SyntaxError: {error.msg}", location=location)


def _undefined_name(error: BaseException, namespace: Iterable[str]) -> Diagnosis | None:
    if not isinstance(error, NameError) or isinstance(error, UnboundLocalError):
        return None
    name = getattr(error, "name", None) or _first_group(r"name '(\w+)' is not defined", error)
    if not name:
        return None
    close = difflib.get_close_matches(name, [n for n in namespace if not n.startswith("_")], 1)
    hint = f"Did you mean '{close[0]}'?" if close else "Define it in this cell or an earlier one."
    return Diagnosis("undefined-name", f"name '{name}' is not defined.", hint)


def _traced_branch(error: BaseException, _: Iterable[str]) -> Diagnosis | None:
    name = type(error).__name__
    if name == "TracerBoolConversionError":
        return Diagnosis(
            "traced-if",
            "Python 'if' (or 'while', 'and', 'or', 'not') on a value that is only known "
            "when the kernel runs.",
            "Branch at run time with @pl.when(cond) or jax.lax.cond(cond, f, g), and "
            "select values with jnp.where. Python's 'if' is for what is known while "
            "tracing: shapes, block sizes, flags.",
        )
    if name == "TracerIntegerConversionError":
        return Diagnosis(
            "traced-int",
            "a Python int (a range, an index, a shape) was asked of a value that is only "
            "known when the kernel runs.",
            "Loop with jax.lax.fori_loop or pl.loop, and slice with pl.ds(start, size); "
            "sizes must be known while tracing.",
        )
    if name == "ConcretizationTypeError":
        return Diagnosis(
            "traced-value",
            "a value that is only known when the kernel runs was used where Python needs it now.",
            "Use pl.when / jax.lax.cond for branches and jax.lax.fori_loop for loops.",
        )
    return None


_INDEX_MAP_COUNT = re.compile(
    r"Index map function (?P<fn>\S+) at (?P<file>.+?):(?P<line>\d+) for (?P<origin>\S+) "
    r"must return (?P<want>\d+) values to match block_shape=(?P<shape>.+?)\. "
    r"Currently returning (?P<got>\d+) values"
)


@_on_message(_INDEX_MAP_COUNT)
def _index_map_results(match: re.Match[str], error: BaseException) -> Diagnosis | None:
    want, got = int(match["want"]), int(match["got"])
    return Diagnosis(
        "index-map-results",
        f"the index map for {_describe_origin(match['origin'])} returns {got} block "
        f"ind{'ex' if got == 1 else 'ices'}, but its block shape has {want} "
        f"dimension{'s' if want != 1 else ''}.",
        "An index map returns one block index per dimension of the block shape "
        "(0 for a dimension that is not tiled).",
        location=_written_at(match),
    )


_BLOCK_RANK = re.compile(
    r"Block shape for (?P<origin>\S+) \(= \((?P<block>.*?)\)\) must have the same number "
    r"of dimensions as the array shape (?P<shape>\(.*?\))"
)


@_on_message(_BLOCK_RANK)
def _block_rank(match: re.Match[str], error: BaseException) -> Diagnosis | None:
    block = _readable_block(match["block"])
    return Diagnosis(
        "block-shape",
        f"the block shape {block} of {_describe_origin(match['origin'])} does not fit its "
        f"array of shape {match['shape']}: they have different numbers of dimensions.",
        "A BlockSpec's block shape has one entry per array dimension; use None to "
        "squeeze a dimension away (the kernel then sees one less).",
        location=jax_adapter.block_spec_location(error.__traceback__),
    )


_RETURNS = re.compile(
    r"The kernel function in the pallas_call (?P<fn>\S+) at (?P<file>.+?):(?P<line>\d+) "
    r"should return None"
)


@_on_message(_RETURNS)
def _kernel_returns(match: re.Match[str], error: BaseException) -> Diagnosis | None:
    return Diagnosis(
        "kernel-returns",
        f"kernel {match['fn']} returns a value; Pallas kernels return nothing.",
        "Write results into the output refs instead (o_ref[...] = value): the kernel's "
        "output refs come after its input refs.",
        location=_written_at(match),
    )


_ARITY = re.compile(
    r"^(?P<fn>[\w.<>]+)\(\) (?:missing (?P<missing>\d+) required positional arguments?"
    r"|takes (?P<takes>\d+) positional arguments? but (?P<given>\d+) (?:were|was) given)"
)


@_on_message(_ARITY)
def _kernel_arity(match: re.Match[str], error: BaseException) -> Diagnosis | None:
    if not isinstance(error, TypeError):
        return None
    context = jax_adapter.kernel_call_context(error.__traceback__)
    if context is None or match["fn"].split(".")[-1] != context.kernel_name:
        return None
    passed = context.num_prefetch + context.num_inputs + context.num_outputs + context.num_scratch
    parts = [
        f"{context.num_inputs} input{'s' if context.num_inputs != 1 else ''}",
        f"{context.num_outputs} output{'s' if context.num_outputs != 1 else ''}",
        f"{context.num_scratch} scratch",
    ]
    if context.num_prefetch:
        parts.insert(0, f"{context.num_prefetch} scalar-prefetch")
    return Diagnosis(
        "kernel-arity",
        f"kernel {context.kernel_name} does not take the {passed} refs this pallas_call "
        f"passes ({', '.join(parts)}): {_text(error)}.",
        "A kernel gets one Ref per input (in in_specs order), then one per output "
        "(out_shape), then one per scratch buffer (scratch_shapes).",
        location=context.kernel_location,
    )


_SWAP_SHAPE = re.compile(
    r"Invalid shape for `swap`\. Ref shape: (?P<ref>\(.*?\))\. Expected shape: .*?"
    r"Value shape: (?P<value>\(.*?\))"
)


@_on_message(_SWAP_SHAPE)
def _store_shape(match: re.Match[str], error: BaseException) -> Diagnosis | None:
    return Diagnosis(
        "store-shape",
        f"storing a value of shape {match['value']} into a ref (or slice) of shape {match['ref']}.",
        "A ref holds one block: its shape is the BlockSpec's block shape. Check the "
        "block shapes of the refs this value was computed from.",
    )


def _grid_too_large(error: BaseException, _: Iterable[str]) -> Diagnosis | None:
    if not isinstance(error, GridTooLargeError):
        return None
    return Diagnosis(
        "grid-too-large",
        f"{_text(error)}.",
        "Inspect it without running (--no-run): the Kernels and Tiles tabs work on "
        "grids of any size. To run it on CPU, try a smaller problem first.",
    )


def _step_memory(error: BaseException, _: Iterable[str]) -> Diagnosis | None:
    if not isinstance(error, memory.StepMemoryError):
        return None
    return Diagnosis(
        "memory",
        _text(error),
        "Try smaller inputs, or leave out --ref (the reference's outputs and the "
        "comparison's masks take memory of their own).",
    )


def _run_stopped(error: BaseException, _: Iterable[str]) -> Diagnosis | None:
    if not isinstance(error, run_budget.RunStoppedError):
        return None
    return Diagnosis(
        "run-budget",
        f"{_text(error)}",
        run_budget.hint(error),
        location=error.location,
    )


_INDEX_MAP_TYPE = re.compile(
    r"Index map function (?P<fn>\S+) at (?P<file>.+?):(?P<line>\d+) for (?P<origin>\S+) "
    r"must return integer scalars\. Output\[(?P<k>\d+)\] has type ~?(?P<type>[\w]+)"
    r"(?P<shape>\[[^\]]*\])"
)


@_on_message(_INDEX_MAP_TYPE)
def _index_map_type(match: re.Match[str], error: BaseException) -> Diagnosis | None:
    where = f"the index map for {_describe_origin(match['origin'])}"
    if match["shape"] != "[]":
        summary = (
            f"{where} returns an array of type {match['type']}{match['shape']} as block "
            f"index {match['k']}; each block index must be one integer."
        )
    else:
        summary = (
            f"{where} returns a {match['type']} as block index {match['k']}; block indices "
            "must be integers."
        )
    return Diagnosis(
        "index-map-type",
        summary,
        "Compute block indices with integers: i // 2, not i / 2; no float constants "
        "(jnp.int32(...) converts).",
        location=_written_at(match),
    )


def _block_spec_order(error: BaseException, _: Iterable[str]) -> Diagnosis | None:
    context = jax_adapter.block_spec_context(error.__traceback__)
    if context is None or not context.old_order:
        return None
    return Diagnosis(
        "blockspec-order",
        f"the BlockSpec for {_describe_origin(context.origin)} has its arguments in the old "
        "order, pl.BlockSpec(index_map, block_shape): the order changed, the block shape "
        "comes first.",
        "Write pl.BlockSpec(block_shape, index_map), e.g. pl.BlockSpec((128,), lambda i: "
        "(i,)), or name both: pl.BlockSpec(block_shape=..., index_map=...).",
        location=context.location,
    )


@_on_message(_ARITY)
def _index_map_arity(arity: re.Match[str], error: BaseException) -> Diagnosis | None:
    if not isinstance(error, TypeError):
        return None
    context = jax_adapter.block_spec_context(error.__traceback__)
    if context is None or context.old_order or context.params is None:
        return None
    if context.location is None or arity["fn"].split(".")[-1] != context.location.function:
        return None
    takes = len(context.params)
    given = f"{context.num_grid} grid ind{'ex' if context.num_grid == 1 else 'ices'}"
    if context.num_prefetch:
        given += (
            f" and {context.num_prefetch} scalar-prefetch ref{'s' * (context.num_prefetch > 1)}"
        )
    return Diagnosis(
        "index-map-arity",
        f"the index map for {_describe_origin(context.origin)} takes {takes} argument"
        f"{'s' if takes != 1 else ''} ({', '.join(context.params)}), but Pallas calls it "
        f"with {given}.",
        f"An index map takes one argument per grid axis (this grid has {context.num_grid}), "
        "then one per scalar-prefetch operand, and returns one block index per dimension "
        "of the block shape.",
        location=context.location,
    )


def _a(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def _short_repr(value: object) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


def _kernel_not_callable(error: BaseException, _: Iterable[str]) -> Diagnosis | None:
    context = jax_adapter.pallas_call_context(error.__traceback__)
    if context is None or callable(context.kernel):
        return None
    return Diagnosis(
        "kernel-not-callable",
        f"pl.pallas_call was given {_short_repr(context.kernel)} "
        f"({_a(type(context.kernel).__name__)}) as its kernel; it takes the kernel function.",
        "Pass the function itself, as in pl.pallas_call(add_kernel, out_shape=...): not "
        "the result of calling it, nor its name as a string.",
        location=pallas_call_line_of(error, context, None),
    )


_SPEC_TREES = re.compile(
    r"Pytree for `(?P<specs>in_specs|out_specs)` and `(?P<values>inputs|out_shape)` do not "
    r"match\.(?P<rest>.*)",
    re.DOTALL,
)


@_on_message(_SPEC_TREES)
def _spec_structure(match: re.Match[str], error: BaseException) -> Diagnosis | None:
    specs, values = match["specs"], match["values"]
    detail = re.search(r"\* (.*)", match["rest"])
    values_text = "the arguments" if values == "inputs" else "out_shape"
    summary = f"{specs} and {values_text} have different structures"
    summary += f": {detail.group(1).strip()}." if detail else "."
    one = "input argument" if values == "inputs" else "output in out_shape"
    context = jax_adapter.pallas_call_context(error.__traceback__)
    return Diagnosis(
        "spec-structure",
        summary.replace("`", ""),
        f"Give one BlockSpec per {one}, in the same structure: a single BlockSpec for a "
        "single array, a list (or tuple) of them for several.",
        location=pallas_call_line_of(error, context, specs) if context else None,
    )


_STATIC_SLICE = re.compile(
    r"Out of bound slice: start=(?P<start>-?\d+), size=(?P<size>\d+), stride=\d+, dim=(?P<dim>\d+)"
)


@_on_message(_STATIC_SLICE)
def _static_slice(match: re.Match[str], error: BaseException) -> Diagnosis | None:
    """A slice known while tracing that reaches past its ref (refused from jax 0.12)."""
    start, size, dim = int(match["start"]), int(match["size"]), int(match["dim"])
    return Diagnosis(
        "slice-out-of-bounds",
        f"A slice of {size} elements from {start} reaches past the end of a ref of {dim} "
        f"(elements {start}..{start + size - 1}); JAX refuses it while tracing, mask or "
        "no mask.",
        "jax 0.12 checks slices known while tracing against the ref (earlier versions let "
        "masked lanes hang over the end): make the block as large as the slice (a "
        "BlockSpec of the padded size, e.g. pl.next_power_of_2 of the row) and mask what "
        "lies past the array, or slice no further than the ref.",
    )


def _mosaic_gpu_interpreter(error: BaseException, _: Iterable[str]) -> Diagnosis | None:
    """An error JAX's Mosaic GPU interpreter raised while it ran a kernel on the CPU."""
    found = jax_adapter.interpreter_out_of_bounds(error)
    if found is not None:
        verb = "reads" if found.access == "load" else "writes"
        buffer = f"a {found.memory} buffer" if found.memory else "a buffer"
        shape = "x".join(map(str, found.shape)) or "a scalar"
        what = (
            f"{verb} elements {', '.join(f'{lo}..{hi}' for lo, hi in found.span)} of "
            f"{buffer} of shape {shape}"
            if found.span
            else f"{verb} past the end of {buffer}"
        )
        return Diagnosis(
            "out-of-bounds",
            f"The kernel {what}: out of bounds (JAX's Mosaic GPU interpreter stopped it; "
            "a GPU would touch other memory).",
            "Check the slice (pl.ds start and size, or the TMA copy's window) against the "
            "buffer's shape: the last program's or iteration's offset is the usual culprit.",
            location=found.location,
        )
    failure = jax_adapter.interpreter_failure(error)
    if failure is None:
        return None
    if failure.kind != "NotImplementedError" and not _UNSUPPORTED.search(failure.message):
        # Not an operation it lacks: a check of its own the kernel failed (a barrier array
        # used without `.at[i]`, a copy between refs of different shapes ...).
        return Diagnosis(
            "interpreter-check",
            f"JAX's Mosaic GPU interpreter stopped the kernel: {failure.kind}: {failure.message}",
            "The interpreter checks what a GPU would do without a word: fix what it names "
            "at that line (on a GPU the kernel would fail to compile, hang or compute "
            "garbage).",
            location=failure.location,
        )
    return Diagnosis(
        "interpreter",
        f"JAX's Mosaic GPU interpreter (jax {_jax_version()}) could not run this kernel: "
        f"{failure.kind}: {failure.message}",
        "The interpreter runs Mosaic GPU kernels on a CPU but not every operation yet "
        "(newer JAX runs more: tcgen05 and tensor memory from 0.12). The kernel still "
        "traces and lowers here (the mosaic-gpu and xla-gpu:<chip> targets) and runs on "
        "a GPU.",
        location=failure.location,
    )


_UNSUPPORTED = re.compile(r"unsupported|not (?:yet )?(?:supported|implemented)", re.I)


def _jax_version() -> str:
    return str(jax.__version__)


_TRACEBACK_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')
_EXCEPTION_LINE = re.compile(r"^(?P<type>[A-Za-z_][\w.]*): (?P<message>.*)$")


def _embedded_traceback(error: BaseException, _: Iterable[str]) -> Diagnosis | None:
    """An error whose message carries a Python traceback (e.g. a failed callback)."""
    text = _text(error)
    start = text.find("Traceback (most recent call last):")
    if start < 0:
        return None
    frames = list(_TRACEBACK_FRAME.finditer(text, start))
    if not frames:
        return None
    user = [f for f in frames if probably_user_file(f["file"])]
    tail = text[frames[-1].end() :].splitlines()
    raised = next((m for line in tail if (m := _EXCEPTION_LINE.match(line.strip()))), None)
    what = f"{raised['type']}: {raised['message']}" if raised else "an exception"
    return Diagnosis(
        "callback-error",
        f"{what} (raised by Python code the program called back while it ran).",
        "A jax.debug.callback, pure_callback or io_callback failed; the line is the "
        "one in your code where it raised.",
        location=(SourceLocation(user[-1]["file"], int(user[-1]["line"])) if user else None),
    )


def _generic(error: BaseException, _: Iterable[str]) -> Diagnosis:
    context = jax_adapter.kernel_call_context(error.__traceback__)
    text = _first_paragraph(messages.error_text(error, None)) or type(error).__name__
    hint = f"Raised while tracing kernel {context.kernel_name}." if context else ""
    return Diagnosis("error", f"{type(error).__name__}: {text}", hint)


MATCHERS: tuple[Matcher, ...] = (
    _syntax,
    _undefined_name,
    _traced_branch,
    _grid_too_large,
    _run_stopped,
    _step_memory,
    _block_spec_order,
    _kernel_not_callable,
    _index_map_type,
    _index_map_arity,
    _spec_structure,
    _index_map_results,
    _block_rank,
    _kernel_returns,
    _kernel_arity,
    _store_shape,
    _static_slice,
    _mosaic_gpu_interpreter,
    _embedded_traceback,
    _generic,
)


def _first_group(pattern: str, error: BaseException) -> str | None:
    match = re.search(pattern, _text(error))
    return match.group(1) if match else None


def _first_paragraph(text: str) -> str:
    """The message up to JAX's usual trailers (links, tracebacks, blank lines)."""
    kept = []
    for line in text.strip().splitlines():
        if not line.strip() or line.startswith(("See https://", "--------")):
            break
        kept.append(line)
    return " ".join(kept)


def _describe_origin(origin: str) -> str:
    """`args[0]` -> `input 0`, `outputs` -> `the output`."""
    if match := re.fullmatch(r"args\[(\d+)\]", origin):
        return f"input {match.group(1)}"
    if origin == "outputs":
        return "the output"
    if match := re.fullmatch(r"outputs\[(\d+)\]", origin):
        return f"output {match.group(1)}"
    return origin


def _readable_block(block: str) -> str:
    """`Blocked(block_size=128), Squeezed()` -> `(128, None)`."""
    sizes = re.findall(r"block_size=(\d+)|(Squeezed\(\))", block)
    if not sizes:
        return f"({block})"
    parts = [size if size else "None" for size, _ in sizes]
    return f"({', '.join(parts)}{',' if len(parts) == 1 else ''})"
