"""Turning failures into one clear message that names the source line.

A JAX error met while tracing a kernel is often sixty lines of traceback whose point
is one line of the user's cell. `diagnose` finds that line and says what went wrong
in the kernel author's terms, with a hint of what to write instead.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
from collections.abc import Callable, Iterable, Sequence

from pallaslab._src.base import messages, sources
from pallaslab._src.core import jax_adapter
from pallaslab._src.geometry.limits import GridTooLargeError
from pallaslab._src.records import SourceLocation

# Maps a file name to how messages name it ("Cell line", "Cell [3] line"); None for
# files that are not the user's (they are skipped when looking for the line).
SourceNamer = Callable[[str], str | None]


# Characters of a summary line: the message's line limit less room for the location.
_SUMMARY_LINE = messages.MAX_LINE_CHARS - 40


# Each kind of diagnosis in words: kinds are identifiers for tests and styling, never
# shown to users.
KIND_TITLES = {
    "syntax": "a syntax error",
    "undefined-name": "an undefined name",
    "traced-if": "a Python 'if' on a value known only when the kernel runs",
    "traced-int": "a Python int asked of a value known only when the kernel runs",
    "traced-value": "a value known only when the kernel runs, needed while tracing",
    "index-map-results": "an index map returning the wrong number of block indices",
    "index-map-type": "an index map returning something other than integers",
    "index-map-arity": "an index map taking the wrong number of arguments",
    "block-shape": "a block shape that does not fit its array",
    "blockspec-order": "a BlockSpec with its arguments in the old order",
    "spec-structure": "BlockSpecs that do not match the arguments",
    "kernel-returns": "a kernel that returns a value",
    "kernel-arity": "a kernel that does not take the refs passed to it",
    "kernel-not-callable": "a pallas_call given something other than a function",
    "store-shape": "a store of the wrong shape",
    "grid": "a grid that cannot run",
    "grid-too-large": "a grid too large to run",
    "block-out-of-bounds": "a block outside its array",
    "callback-error": "a failed callback",
    "reference": "a reference that does not match the call",
    "usage": "a mistake on the magic line",
    "reproducer": "no reproducer written",
    "internal": "a failure inside pallaslab",
    "error": "an exception",
}


@dataclasses.dataclass(frozen=True)
class Diagnosis:
    """One failure, explained.

    Attributes:
        kind: What went wrong, as a short identifier (e.g. "traced-if").
        summary: One sentence: what went wrong.
        hint: What to do about it ("" when there is nothing general to say).
        location: The source line it points at, when one was found.
        label: How to name the location's file in messages ("Cell line").
        error_type: The original exception's type name.
    """

    kind: str
    summary: str
    hint: str = ""
    location: SourceLocation | None = None
    label: str = ""
    error_type: str = ""

    def __post_init__(self) -> None:
        # One rule for every message shown (magic, banner, CLI): bounded lines.
        # Room is left on the first line for "Cell [12] line 345: ".
        summary = messages.clip(self.summary, max_lines=6, max_line_chars=_SUMMARY_LINE)
        object.__setattr__(self, "summary", summary)
        object.__setattr__(self, "hint", messages.clip(self.hint, max_lines=4, max_chars=1200))

    @property
    def title(self) -> str:
        """What went wrong in a few words ("a Python if on a traced value"), for lists."""
        if self.kind == "error" and self.error_type:
            return self.error_type
        return KIND_TITLES.get(self.kind, self.kind.replace("-", " "))

    @property
    def line(self) -> int | None:
        """The line it points at, if any."""
        return self.location.line if self.location else None

    def message(self) -> str:
        """`Cell line 7: <summary>` followed by the hint on its own line."""
        where = f"{self.label} {self.location.line}: " if self.location and self.label else ""
        text = where + self.summary
        return messages.clip(f"{text}\n{self.hint}" if self.hint else text)


def diagnose(
    error: BaseException,
    name_source: SourceNamer,
    namespace: Iterable[str] = (),
    fallback: SourceLocation | None = None,
) -> Diagnosis:
    """Explains `error`, pointing at the user's source line.

    Args:
        error: The exception raised while running or tracing the user's code.
        name_source: Names the user's files; frames in other files are skipped.
        namespace: Names defined in the user's namespace, for "did you mean" hints.
        fallback: Where to point when the error has no line of its own (e.g. the
            magic line for an error while tracing the call it names).
    """
    # An error met while lowering or running a traced program points at the line
    # that made the failing operation (JAX keeps that stack); else at the innermost
    # line of the user's in the traceback.
    frame_location = _innermost_user_frame(
        jax_adapter.op_traceback(error), name_source
    ) or _innermost_user_frame(error.__traceback__, name_source)
    for matcher in _MATCHERS:
        try:
            found = matcher(error, namespace)
        except Exception:  # a matcher must never hide the error it explains
            continue
        if found is None:
            continue
        location = found.location or frame_location or fallback
        label = name_source(location.file) if location else None
        if location is not None and label is None:
            # The line JAX named is not the user's (e.g. a library kernel); point at
            # the user's innermost frame instead, if there is one.
            location = frame_location or fallback
            label = name_source(location.file) if location else None
        return dataclasses.replace(
            found,
            summary=_rename_files(found.summary, name_source),
            hint=_rename_files(found.hint, name_source),
            location=location,
            label=label or "",
            error_type=type(error).__name__,
        )
    raise AssertionError("the generic matcher always matches")  # pragma: no cover


# Cell file names as IPython and ipykernel make them, with an optional `:LINE`.
_CELL_FILE = re.compile(
    r"(?P<file><ipython-input-[^>\s]*>|/[^\s:'\"]*ipykernel_\d+/\d+\.py)(?::(?P<line>\d+))?"
)


def _rename_files(text: str, name_source: SourceNamer) -> str:
    """Cell file names (`<ipython-input-3-...>:9`) in a message as the user sees them."""
    if not text:
        return text

    def named(match: re.Match[str]) -> str:
        label = name_source(match["file"]) or sources.cell_label(match["file"])
        if label and not label.endswith(" line"):
            label += " line"
        label = label or "a cell's line"
        return f"{label} {match['line']}" if match["line"] else label.removesuffix(" line")

    return _CELL_FILE.sub(named, text)


def _text(error: BaseException) -> str:
    """The error's message, never raising, bounded (regexes run over it)."""
    return messages.error_text(error)


def _probably_user_file(file: str) -> bool:
    """Whether a file named in an error is the user's (a cell, or not a library)."""
    if sources.cell_label(file) is not None or "ipython-input" in file:
        return True
    return bool(file) and not file.startswith("<") and not sources.is_library_file(file)


def _innermost_user_frame(
    traceback: types.TracebackType | None, name_source: SourceNamer
) -> SourceLocation | None:
    found = None
    while traceback is not None:
        code = traceback.tb_frame.f_code
        if name_source(code.co_filename) is not None:
            found = SourceLocation(code.co_filename, traceback.tb_lineno, code.co_name)
        traceback = traceback.tb_next
    return found


# --- Matchers: each returns a Diagnosis (location optional) or None. ----------

Matcher = Callable[[BaseException, Iterable[str]], Diagnosis | None]


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


def _index_map_results(error: BaseException, _: Iterable[str]) -> Diagnosis | None:
    match = _INDEX_MAP_COUNT.search(_text(error))
    if match is None:
        return None
    want, got = int(match["want"]), int(match["got"])
    return Diagnosis(
        "index-map-results",
        f"the index map for {_describe_origin(match['origin'])} returns {got} block "
        f"ind{'ex' if got == 1 else 'ices'}, but its block shape has {want} "
        f"dimension{'s' if want != 1 else ''}.",
        "An index map returns one block index per dimension of the block shape "
        "(0 for a dimension that is not tiled).",
        location=SourceLocation(match["file"], int(match["line"])),
    )


_BLOCK_RANK = re.compile(
    r"Block shape for (?P<origin>\S+) \(= \((?P<block>.*?)\)\) must have the same number "
    r"of dimensions as the array shape (?P<shape>\(.*?\))"
)


def _block_rank(error: BaseException, _: Iterable[str]) -> Diagnosis | None:
    match = _BLOCK_RANK.search(_text(error))
    if match is None:
        return None
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


def _kernel_returns(error: BaseException, _: Iterable[str]) -> Diagnosis | None:
    match = _RETURNS.search(_text(error))
    if match is None:
        return None
    return Diagnosis(
        "kernel-returns",
        f"kernel {match['fn']} returns a value; Pallas kernels return nothing.",
        "Write results into the output refs instead (o_ref[...] = value): the kernel's "
        "output refs come after its input refs.",
        location=SourceLocation(match["file"], int(match["line"])),
    )


_ARITY = re.compile(
    r"^(?P<fn>[\w.<>]+)\(\) (?:missing (?P<missing>\d+) required positional arguments?"
    r"|takes (?P<takes>\d+) positional arguments? but (?P<given>\d+) (?:were|was) given)"
)


def _kernel_arity(error: BaseException, _: Iterable[str]) -> Diagnosis | None:
    if not isinstance(error, TypeError):
        return None
    match = _ARITY.search(_text(error))
    context = jax_adapter.kernel_call_context(error.__traceback__)
    if match is None or context is None or match["fn"].split(".")[-1] != context.kernel_name:
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


def _store_shape(error: BaseException, _: Iterable[str]) -> Diagnosis | None:
    match = _SWAP_SHAPE.search(_text(error))
    if match is None:
        return None
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


_INDEX_MAP_TYPE = re.compile(
    r"Index map function (?P<fn>\S+) at (?P<file>.+?):(?P<line>\d+) for (?P<origin>\S+) "
    r"must return integer scalars\. Output\[(?P<k>\d+)\] has type ~?(?P<type>[\w]+)"
    r"(?P<shape>\[[^\]]*\])"
)


def _index_map_type(error: BaseException, _: Iterable[str]) -> Diagnosis | None:
    match = _INDEX_MAP_TYPE.search(_text(error))
    if match is None:
        return None
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
        location=SourceLocation(match["file"], int(match["line"])),
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


def _index_map_arity(error: BaseException, _: Iterable[str]) -> Diagnosis | None:
    arity = _ARITY.search(_text(error)) if isinstance(error, TypeError) else None
    if arity is None:
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
        location=_pallas_call_line(error, context, None),
    )


_SPEC_TREES = re.compile(
    r"Pytree for `(?P<specs>in_specs|out_specs)` and `(?P<values>inputs|out_shape)` do not "
    r"match\.(?P<rest>.*)",
    re.DOTALL,
)


def _spec_structure(error: BaseException, _: Iterable[str]) -> Diagnosis | None:
    match = _SPEC_TREES.search(_text(error))
    if match is None:
        return None
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
        location=_pallas_call_line(error, context, specs) if context else None,
    )


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
    user = [f for f in frames if _probably_user_file(f["file"])]
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


def _pallas_call_line(
    error: BaseException, context: jax_adapter.PallasCallContext | None, keyword: str | None
) -> SourceLocation | None:
    """The line of the user's `pallas_call(...)` JAX refused (or of one keyword in it)."""
    hints = list(context.spec_locations) if context is not None else []
    outer = _innermost_user_frame(error.__traceback__, _probably_user_name)
    found = pallas_call_line(hints, keyword, [outer.file] if outer else [])
    if found is None and keyword == "out_specs" and context is not None:
        found = next((loc for loc in context.out_specs if loc is not None), None)
    return found


def pallas_call_line(
    hints: Sequence[SourceLocation], keyword: str | None = None, files: Sequence[str] = ()
) -> SourceLocation | None:
    """Where a `pallas_call(...)` was written (or its `keyword=` argument).

    JAX does not record where a pallas_call was written, but its BlockSpecs' index maps
    know their lines (`hints`): the call written around one of them is the one.
    Without such a hint, a file (of `hints` or `files`) with a single pallas_call
    names it.
    """
    for hint in hints:
        calls = sources.calls_to(hint.file, "pallas_call")
        spans = [s for s in calls if s.first <= hint.line <= s.last]
        if spans:
            span = min(spans, key=lambda s: s.last - s.first)
            line = span.keyword_line(keyword) if keyword else None
            return SourceLocation(hint.file, line or span.first)
    for file in dict.fromkeys([*(h.file for h in hints), *files]):
        calls = sources.calls_to(file, "pallas_call")
        if len(calls) == 1:
            line = calls[0].keyword_line(keyword) if keyword else None
            return SourceLocation(file, line or calls[0].first)
    return None


def _probably_user_name(file: str) -> str | None:
    return "line" if _probably_user_file(file) else None


_MATCHERS: tuple[Matcher, ...] = (
    _syntax,
    _undefined_name,
    _traced_branch,
    _grid_too_large,
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
