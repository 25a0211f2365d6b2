"""Questions, planted mistakes and results, the registry of question banks, and the small helpers
a bank uses to write its test cases (see gpt2_course/exercises/__init__.py for how to write one)."""
from __future__ import annotations

import importlib
import pkgutil
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import torch

BANKS = "gpt2_course.exercises"  # one module per chapter notebook: ch05_masking.py for 05_masking


class Unavailable(RuntimeError):
    """Raised by the stand-in that replaces a course function while its exercise is graded: the
    answer called the course's own implementation (see source.py)."""


@dataclass
class Case:
    """One test input: `run(answer)` calls the learner's answer on it."""

    label: str
    run: Callable[[Any], Any]


@dataclass
class Mistake:
    """A classic error and the hint it earns. `impl` behaves like an answer with exactly this
    error (same kind as the reference), `also` holds other common forms of the same error;
    `error` instead matches the message of a raised error."""

    name: str
    hint: str
    impl: Any = None
    error: str | None = None
    also: tuple[Any, ...] = ()


@dataclass
class Question:
    id: str
    name: str  # the variable the learner defines
    points: int
    reference: Any
    cases: Callable[[], list[Case]] | None = None  # None: the answer is a value, compared as is
    mistakes: list[Mistake] = field(default_factory=list)
    # How far a float may be from the reference (float noise). A value question's tolerance is the
    # answer's own (a number worked out by hand): its integers get it too. A code question's integers
    # (counts, token ids, indices) carry no float noise and must be exact.
    rtol: float = 1e-4
    atol: float = 1e-6
    strict_dtype: bool = False  # a bool/int/float tensor must come back as the same kind
    course: tuple[Any, ...] = ()  # the package's own implementation: an answer that uses it is borrowed
    # For bool outputs: (index, expected entry, shape) -> what a differing entry means, in words.
    explain: Callable[[tuple[int, ...], bool, tuple[int, ...]], str] | None = None

    @property
    def kind(self) -> str:
        return "value" if self.cases is None else "code"


@dataclass
class Exercise:
    id: str  # the chapter notebook's stem, e.g. "05_masking"
    title: str
    questions: list[Question]

    def question(self, qid: str) -> Question:
        for q in self.questions:
            if q.id == qid:
                return q
        raise KeyError(
            f"{self.id} has no question {qid!r}; its questions are "
            f"{', '.join(q.id for q in self.questions)}."
        )

    @property
    def max_points(self) -> int:
        return sum(q.points for q in self.questions)

    @property
    def course(self) -> list[Any]:
        """The package objects that answer any of its questions: stubbed while it is graded."""
        out: list[Any] = []
        for q in self.questions:
            out += [c for c in q.course if not any(c is o for o in out)]
        return out


@dataclass
class Result:
    question: str
    name: str
    points: int
    max_points: int
    status: str  # pass, fail, error, blank, missing, timeout, borrowed
    message: str
    hint: str | None = None  # the name of the planted mistake the answer matched

    def __str__(self) -> str:
        mark = "PASS" if self.status == "pass" else "FAIL"
        head = f"{self.question} `{self.name}`: {mark}  {self.points}/{self.max_points} points"
        body = textwrap.fill(self.message, 96, initial_indent="  ", subsequent_indent="  ")
        return f"{head}\n{body}"


# ----------------------------------------------------------------------------------------------
# The registry: a bank's module is named after its notebook
# ----------------------------------------------------------------------------------------------


def bank_module(exercise_id: str) -> str:
    """05_masking -> ch05_masking, A1_pretraining -> a1_pretraining (module names cannot start
    with a digit)."""
    return f"ch{exercise_id}" if exercise_id[:1].isdigit() else exercise_id.lower()


def _exercise_id(module: str) -> str:
    return module.removeprefix("ch") if module[2:3].isdigit() else module[:1].upper() + module[1:]


@cache
def exercise_ids() -> list[str]:
    banks = importlib.import_module(BANKS)
    return sorted(_exercise_id(m.name) for m in pkgutil.iter_modules(banks.__path__)
                  if not m.name.startswith("_"))


@cache
def get_exercise(exercise_id: str) -> Exercise:
    if exercise_id not in exercise_ids():
        raise KeyError(f"Unknown exercise {exercise_id!r}; known: {', '.join(exercise_ids())}.")
    ex = importlib.import_module(f"{BANKS}.{bank_module(exercise_id)}").EXERCISE
    if ex.id != exercise_id:
        raise ValueError(f"{BANKS}.{bank_module(exercise_id)} defines {ex.id!r}, not {exercise_id!r}.")
    return ex


# ----------------------------------------------------------------------------------------------
# Helpers for writing questions
# ----------------------------------------------------------------------------------------------


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(seed: int, *shape: int) -> torch.Tensor:
    """Seeded float64 test data: outputs do not depend on the thread count or the CPU."""
    return torch.randn(*shape, generator=gen(seed), dtype=torch.float64)


def randint(seed: int, *shape: int, high: int = 10) -> torch.Tensor:
    return torch.randint(0, high, shape, generator=gen(seed))


def shape(t: Any) -> str:
    return str(list(t.shape)) if isinstance(t, torch.Tensor) else repr(t)


def calls(make_args: Callable[[], list[tuple[Any, ...]]],
          label: Callable[..., str] | None = None) -> Callable[[], list[Case]]:
    """Cases that call the answer with each tuple of arguments `make_args()` builds. Inputs are
    rebuilt for every probe and cloned for every call, so an answer that modifies its inputs in
    place cannot spoil the reference or the next case."""

    def build() -> list[Case]:
        return [
            Case(label(*args) if label else ", ".join(shape(a) for a in args),
                 lambda f, args=args: f(*_fresh(args)))
            for args in make_args()
        ]

    return build


def _fresh(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def value(name: str, qid: str, points: int, reference: Any, mistakes: dict[str, tuple[Any, str]],
          rtol: float = 1e-3) -> Question:
    """A question whose answer is a number (or shape): each mistake is (wrong value, hint)."""
    return Question(qid, name, points, reference,
                    mistakes=[Mistake(k, hint, impl=v) for k, (v, hint) in mistakes.items()],
                    rtol=rtol, atol=1e-9)


def choice(name: str, qid: str, correct: str, wrong: dict[str, str]) -> Question:
    """A multiple-choice question: the correct letter and a hint for each wrong one."""
    return Question(qid, name, 1, correct,
                    mistakes=[Mistake(f"option_{k}", hint, impl=k) for k, hint in wrong.items()])


def planted(hint: str, also: tuple[Any, ...] = (), name: str | None = None
            ) -> Callable[[Callable[..., Any]], Mistake]:
    """Decorator: a small function with one classic error becomes the planted Mistake of that name
    (or of `name`, when two questions of a bank plant the same mistake).

        @planted("Mask off by one: ...")
        def sees_future(t_q, t_k=None): ...
    """
    return lambda impl: Mistake(name or impl.__name__, hint, impl=impl, also=also)
