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
from collections.abc import Callable, Iterable

from pallaslab._src.core import jax_adapter
from pallaslab._src.records import SourceLocation

# Maps a file name to how messages name it ("Cell line", "Cell [3] line"); None for
# files that are not the user's (they are skipped when looking for the line).
SourceNamer = Callable[[str], str | None]


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

    @property
    def line(self) -> int | None:
        """The line it points at, if any."""
        return self.location.line if self.location else None

    def message(self) -> str:
        """`Cell line 7: <summary>` followed by the hint on its own line."""
        where = f"{self.label} {self.location.line}: " if self.location and self.label else ""
        text = where + self.summary
        return f"{text}\n{self.hint}" if self.hint else text


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
    frame_location = _innermost_user_frame(error.__traceback__, name_source)
    for matcher in _MATCHERS:
        found = matcher(error, namespace)
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
            found, location=location, label=label or "", error_type=type(error).__name__
        )
    raise AssertionError("the generic matcher always matches")  # pragma: no cover


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
            "Python `if` (or `while`, `and`, `or`, `not`) on a value that is only known "
            "when the kernel runs.",
            "Branch at run time with `@pl.when(cond)` or `jax.lax.cond(cond, f, g)`, and "
            "select values with `jnp.where`. Python `if` is for what is known while "
            "tracing: shapes, block sizes, flags.",
        )
    if name == "TracerIntegerConversionError":
        return Diagnosis(
            "traced-int",
            "a Python int (a `range`, an index, a shape) was asked of a value that is only "
            "known when the kernel runs.",
            "Loop with `jax.lax.fori_loop` or `pl.loop`, and slice with `pl.ds(start, size)`; "
            "sizes must be known while tracing.",
        )
    if name == "ConcretizationTypeError":
        return Diagnosis(
            "traced-value",
            "a value that is only known when the kernel runs was used where Python needs it now.",
            "Use `pl.when` / `jax.lax.cond` for branches and `jax.lax.fori_loop` for loops.",
        )
    return None


_INDEX_MAP_COUNT = re.compile(
    r"Index map function (?P<fn>\S+) at (?P<file>.+?):(?P<line>\d+) for (?P<origin>\S+) "
    r"must return (?P<want>\d+) values to match block_shape=(?P<shape>.+?)\. "
    r"Currently returning (?P<got>\d+) values"
)


def _index_map_results(error: BaseException, _: Iterable[str]) -> Diagnosis | None:
    match = _INDEX_MAP_COUNT.search(str(error))
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
    match = _BLOCK_RANK.search(str(error))
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
    match = _RETURNS.search(str(error))
    if match is None:
        return None
    return Diagnosis(
        "kernel-returns",
        f"kernel {match['fn']} returns a value; Pallas kernels return nothing.",
        "Write results into the output refs instead (`o_ref[...] = value`): the kernel's "
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
    match = _ARITY.search(str(error))
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
        f"passes ({', '.join(parts)}): {error}.",
        "A kernel gets one Ref per input (in in_specs order), then one per output "
        "(out_shape), then one per scratch buffer (scratch_shapes).",
        location=context.kernel_location,
    )


_SWAP_SHAPE = re.compile(
    r"Invalid shape for `swap`\. Ref shape: (?P<ref>\(.*?\))\. Expected shape: .*?"
    r"Value shape: (?P<value>\(.*?\))"
)


def _store_shape(error: BaseException, _: Iterable[str]) -> Diagnosis | None:
    match = _SWAP_SHAPE.search(str(error))
    if match is None:
        return None
    return Diagnosis(
        "store-shape",
        f"storing a value of shape {match['value']} into a ref (or slice) of shape {match['ref']}.",
        "A ref holds one block: its shape is the BlockSpec's block shape. Check the "
        "block shapes of the refs this value was computed from.",
    )


def _generic(error: BaseException, _: Iterable[str]) -> Diagnosis:
    context = jax_adapter.kernel_call_context(error.__traceback__)
    text = _first_paragraph(str(error)) or type(error).__name__
    hint = f"Raised while tracing kernel {context.kernel_name}." if context else ""
    return Diagnosis("error", f"{type(error).__name__}: {text}", hint)


_MATCHERS: tuple[Matcher, ...] = (
    _syntax,
    _undefined_name,
    _traced_branch,
    _index_map_results,
    _block_rank,
    _kernel_returns,
    _kernel_arity,
    _store_shape,
    _generic,
)


def _first_group(pattern: str, error: BaseException) -> str | None:
    match = re.search(pattern, str(error))
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
