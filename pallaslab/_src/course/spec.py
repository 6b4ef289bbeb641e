"""What an exercise is: a task, a hidden reference, the inputs it is checked on, hints.

Plain records, no JAX: the catalog fills them in (its references and input makers use
JAX when called); `grading` runs them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pallaslab._src.core.inspection import Inspection


@dataclasses.dataclass(frozen=True)
class Case:
    """One set of inputs an exercise is checked on.

    Attributes:
        make: Returns the positional arguments (arrays, or `jax.ShapeDtypeStruct`s
            that become seeded random data).
        kwargs: Keyword arguments passed to the student's function and the reference
            (static values: an activation, a block size, a flag).
        label: What the case is in words; default: the arguments' shapes.
    """

    make: Callable[[], tuple[Any, ...]] = dataclasses.field(repr=False)
    kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    label: str = ""


@dataclasses.dataclass(frozen=True)
class Mistake:
    """A wrong answer students often give, and what to tell them when theirs is it.

    Attributes:
        name: A short identifier ("overwrites-accumulator").
        output: Computes what the mistaken kernel returns, from the case's arguments
            (and keyword arguments), as the reference does.
        hint: What to say when the student's output matches `output` on every case
            where it differs from the reference.
    """

    name: str
    output: Callable[..., Any] = dataclasses.field(repr=False)
    hint: str = ""


@dataclasses.dataclass(frozen=True)
class Requirement:
    """Something the kernel must do besides computing the right values.

    Attributes:
        name: A short identifier ("race-free-on-gpu").
        test: Given the inspection of the student's function on the first case,
            returns "" when the requirement is met, else what is wrong (a sentence).
        hint: What to do about it.
    """

    name: str
    test: Callable[[Inspection], str] = dataclasses.field(repr=False)
    hint: str = ""


@dataclasses.dataclass(frozen=True)
class Exercise:
    """One exercise of the course.

    Attributes:
        id: "NN.name": the notebook's number and a short name ("04.matmul").
        notebook: The notebook it belongs to ("04_tiled_matmul").
        title: A few words ("Accumulate over K").
        task: What to write, one or two sentences, with the function's signature.
        reference: The hidden reference: takes the case's arguments and keyword
            arguments, returns the expected output(s).
        cases: The inputs the student's function is checked on (several shapes:
            a kernel that only works for one is not done).
        hint: What to say when the output is wrong and no more specific hint fits.
        mistakes: Common wrong answers, recognised by their outputs.
        requirements: What the kernel must also satisfy (race-free, one kernel ...).
        seed: Seed of the random inputs.
    """

    id: str
    notebook: str
    title: str
    task: str
    reference: Callable[..., Any] = dataclasses.field(repr=False)
    cases: tuple[Case, ...] = dataclasses.field(default=(), repr=False)
    hint: str = dataclasses.field(default="", repr=False)
    mistakes: tuple[Mistake, ...] = dataclasses.field(default=(), repr=False)
    requirements: tuple[Requirement, ...] = dataclasses.field(default=(), repr=False)
    seed: int = dataclasses.field(default=0, repr=False)

    def __post_init__(self) -> None:
        if not self.cases:
            raise ValueError(f"exercise {self.id} has no cases to check")
