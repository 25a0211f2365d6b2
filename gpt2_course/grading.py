"""Exercises: instant offline feedback in the notebook, and grading for instructors.

Hand-written infrastructure, not course content (no notebook exports it).

How a question is checked. Every question names the variable the learner defines (a function,
a class or a value) and holds a *reference* answer plus a few *planted mistakes*: small
implementations of the classic errors (a missing 1/sqrt(d_head), a mask that lets a token see
the next one, softmax over the wrong dimension, ...). A *probe* runs an answer on fixed test
inputs and records its outputs. The answer passes when its outputs equal the reference's; when
they equal a planted mistake's outputs instead, the learner gets that mistake's hint.

In a notebook:

    from gpt2_course.grading import checker
    check = checker("05_masking")
    check("q2")          # runs question 2's tests on the `causal_mask` defined above
    check.summary()      # every question's points

For instructors, `gpt2-course grade PATH... [--csv grades.csv] [--timeout S]` (or
`python -m gpt2_course.grading PATH...`) runs each submitted notebook in a fresh kernel, then
probes the answers the notebook defines, in that kernel, with a time limit per question, and
scores the outputs in the grading process: a student who edits the test cells or redefines
`check` changes nothing.
"""
from __future__ import annotations

import argparse
import contextlib
import csv as csv_module
import inspect
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

GRADING_ENV = "GPT2_COURSE_GRADING"  # set in the kernels the grader starts: `check` stays quiet
QUESTION_TIMEOUT = 10.0  # seconds one question's tests may take
_MAX_NUMEL = 2_000_000  # outputs bigger than this are summarised, not stored


# ----------------------------------------------------------------------------------------------
# Questions, planted mistakes, results
# ----------------------------------------------------------------------------------------------


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
    rtol: float = 1e-4
    atol: float = 1e-6
    strict_dtype: bool = False  # a bool/int/float tensor must come back as the same kind

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


_EXERCISES: dict[str, Callable[[], Exercise]] = {}


def _exercise(builder: Callable[[], Exercise]) -> Callable[[], Exercise]:
    _EXERCISES[builder.__name__.removeprefix("_ex_")] = builder
    return builder


def exercise_ids() -> list[str]:
    return sorted(_EXERCISES)


@cache
def get_exercise(exercise_id: str) -> Exercise:
    if exercise_id not in _EXERCISES:
        raise KeyError(f"Unknown exercise {exercise_id!r}; known: {', '.join(exercise_ids())}.")
    ex = _EXERCISES[exercise_id]()
    assert ex.id == exercise_id
    return ex


# ----------------------------------------------------------------------------------------------
# Probing: run an answer on the test cases, keep plain outputs
# ----------------------------------------------------------------------------------------------


class QuestionTimeout(BaseException):
    """Raised by the alarm when a question's tests overrun (a BaseException, so that an
    `except Exception` in the learner's loop cannot swallow it)."""


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Interrupt the block after `seconds` (main thread on Unix only; elsewhere no limit)."""
    usable = (
        seconds is not None
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise QuestionTimeout(seconds)

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.5)  # re-fires every 0.5 s if swallowed
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _plain(obj: Any, depth: int = 0) -> Any:
    """Outputs as plain data (tensors, numbers, strings, tuples, dicts) that `torch.load`
    can read back with weights_only=True."""
    if depth > 6:
        return ("__object__", type(obj).__name__)
    try:
        import numpy as np

        if isinstance(obj, np.ndarray):
            obj = torch.from_numpy(np.array(obj))
        elif isinstance(obj, np.generic):
            obj = obj.item()
    except ImportError:  # pragma: no cover - numpy ships with torch
        pass
    if isinstance(obj, torch.Tensor):
        if obj.dim() == 0:
            return obj.item()
        if obj.numel() > _MAX_NUMEL:
            return ("__too_big__", tuple(obj.shape))
        return obj.detach().cpu().clone()
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    if isinstance(obj, torch.Size):
        return tuple(obj)
    if isinstance(obj, list | tuple):
        return tuple(_plain(x, depth + 1) for x in obj)
    if isinstance(obj, set | frozenset):
        items = [_plain(x, depth + 1) for x in obj]
        try:
            return tuple(sorted(items))
        except TypeError:
            return tuple(items)
    if isinstance(obj, dict):
        return {_plain(k, depth + 1): _plain(v, depth + 1) for k, v in obj.items()}
    if obj is Ellipsis:
        return ("__ellipsis__",)
    return ("__object__", type(obj).__name__)


def _raised(exc: BaseException) -> tuple[str, str, str]:
    return ("__raised__", type(exc).__name__, str(exc)[:500])


def _same_error(a: Any, b: Any) -> bool:
    """Two recorded errors match when type and message do (digits aside: sizes differ)."""
    return _is_raised(a) and _is_raised(b) and a[1] == b[1] and re.sub(r"\d+", "#", a[2]) == re.sub(
        r"\d+", "#", b[2])


def _is_raised(out: Any, kind: str | None = None) -> bool:
    return isinstance(out, tuple) and len(out) == 3 and out[0] == "__raised__" and (
        kind is None or out[1] == kind
    )


def probe(q: Question, answer: Any) -> list[Any]:
    """The answer's outputs on every test case; a case that raises records the error."""
    if q.cases is None:
        return [_plain(answer)]
    outs = []
    with torch.random.fork_rng(devices=[]):  # checking must not move the notebook's random state
        for case in q.cases():
            try:
                outs.append(_plain(case.run(answer)))
            except Exception as exc:  # the learner's code may raise anything
                outs.append(_raised(exc))
    return outs


@cache
def _expected(exercise_id: str, qid: str) -> tuple[list[Any], dict[str, list[Any]]]:
    """Reference outputs and each planted mistake's outputs (computed once per process)."""
    q = get_exercise(exercise_id).question(qid)
    ref = probe(q, q.reference)
    return ref, {m.name: probe(q, m.impl) for m in q.mistakes if m.error is None}


@cache
def _expected_also(exercise_id: str, qid: str, name: str) -> list[list[Any]]:
    q = get_exercise(exercise_id).question(qid)
    return [probe(q, impl) for m in q.mistakes if m.name == name for impl in m.also]


# ----------------------------------------------------------------------------------------------
# Judging: compare outputs with the reference and with the planted mistakes
# ----------------------------------------------------------------------------------------------


def _kind(t: torch.Tensor) -> str:
    return "bool" if t.dtype == torch.bool else "float" if t.is_floating_point() else "integer"


def difference(expected: Any, got: Any, q: Question) -> str | None:
    """None when `got` counts as equal to `expected`, else what differs, in words."""
    if _is_raised(got):
        if _same_error(expected, got):
            return None
        return f"raised {got[1]}: {got[2]}"
    if _is_raised(expected):
        return f"should raise {expected[1]}, but returned a value"
    if isinstance(expected, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"expected a tensor of shape {list(expected.shape)}, got {_describe(got)}"
        if tuple(got.shape) != tuple(expected.shape):
            return f"expected shape {list(expected.shape)}, got shape {list(got.shape)}"
        if q.strict_dtype and _kind(got) != _kind(expected):
            return f"expected a {_kind(expected)} tensor, got a {_kind(got)} tensor ({got.dtype})"
        if expected.dtype == torch.bool or got.dtype == torch.bool:
            if torch.equal(expected.to(torch.int64), got.to(torch.int64)):
                return None
            where = (expected.to(torch.int64) != got.to(torch.int64)).nonzero()[0].tolist()
            return f"differs at index {where}: expected {bool(expected[tuple(where)])}"
        e, g = expected.double(), got.double()
        if torch.allclose(g, e, rtol=q.rtol, atol=q.atol, equal_nan=True):
            return None
        if torch.isnan(g).any() and not torch.isnan(e).any():
            return "contains NaN (a 0/0 or inf - inf somewhere)"
        gap = torch.where((e == g) | (torch.isnan(e) & torch.isnan(g)), 0.0, (e - g).abs())
        gap = torch.nan_to_num(gap, nan=math.inf)
        at = tuple(int(i) for i in torch.unravel_index(gap.argmax(), gap.shape))
        return f"differs at index {list(at)}: expected {e[at].item():.6g}, got {g[at].item():.6g}"
    if isinstance(expected, bool) or isinstance(got, bool):
        return None if expected == got else f"expected {expected!r}, got {_describe(got)}"
    if isinstance(expected, int | float):
        if not isinstance(got, int | float):
            return f"expected a number, got {_describe(got)}"
        if isinstance(expected, int) and isinstance(got, int):
            return None if expected == got else f"expected {expected:,}, got {got:,}"
        if math.isnan(got):
            return "got NaN"
        if math.isclose(got, expected, rel_tol=q.rtol, abs_tol=q.atol):
            return None
        return f"expected {expected:.6g}, got {got:.6g}"
    if isinstance(expected, str):
        if not isinstance(got, str):
            return f"expected a string, got {_describe(got)}"
        return None if _letter(got) == _letter(expected) else f"got {got!r}"
    if isinstance(expected, tuple):
        if not isinstance(got, tuple):
            return f"expected a sequence of {len(expected)} items, got {_describe(got)}"
        if len(got) != len(expected):
            return f"expected {len(expected)} items, got {len(got)}"
        for i, (e, g) in enumerate(zip(expected, got, strict=True)):
            if (d := difference(e, g, q)) is not None:
                return f"item {i}: {d}"
        return None
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return f"expected a dict, got {_describe(got)}"
        if set(got) != set(expected):
            extra, lack = set(got) - set(expected), set(expected) - set(got)
            parts = [f"missing key {sorted(lack, key=repr)[0]!r}"] if lack else []
            parts += [f"unexpected key {sorted(extra, key=repr)[0]!r}"] if extra else []
            return ", ".join(parts)
        for k in expected:
            if (d := difference(expected[k], got[k], q)) is not None:
                return f"key {k!r}: {d}"
        return None
    return None if expected == got else f"expected {expected!r}, got {_describe(got)}"


def _letter(text: str) -> str:
    """A multiple-choice answer without case, spaces, brackets or a full stop: '(b).' -> 'b'."""
    return re.sub(r"[\s().]", "", text).lower()


def _describe(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return f"a tensor of shape {list(x.shape)}"
    if isinstance(x, tuple) and x and x[0] == "__object__":
        return f"an object of type {x[1]}"
    if isinstance(x, tuple) and x and x[0] == "__too_big__":
        return f"a huge tensor of shape {list(x[1])}"
    if isinstance(x, tuple):
        return f"a sequence of {len(x)} items"
    text = repr(x)
    return text if len(text) < 60 else text[:57] + "..."


def _same(a: list[Any], b: list[Any], q: Question) -> bool:
    return len(a) == len(b) and all(difference(x, y, q) is None for x, y in zip(a, b, strict=True))


def judge(exercise_id: str, qid: str, outs: list[Any] | None, status: str = "ok") -> Result:
    """Score a question from the outputs its probe recorded (`status`: ok, missing, timeout,
    borrowed:<where>)."""
    q = get_exercise(exercise_id).question(qid)

    def result(points: int, st: str, message: str, hint: str | None = None) -> Result:
        return Result(q.id, q.name, points, q.points, st, message, hint)

    if status == "missing":
        return result(0, "missing", f"`{q.name}` is not defined: run the cell that defines it first.")
    if status == "timeout":
        return result(0, "timeout", f"The tests took longer than the time limit: is there an infinite "
                      f"loop in `{q.name}`? (Interrupt the kernel, fix it, run the cell again.)")
    if status.startswith("borrowed:"):
        return result(0, "borrowed", f"`{q.name}` is the course's own implementation "
                      f"({status.partition(':')[2]}). Write your own version: that is the exercise.")
    assert outs is not None
    if outs == [("__ellipsis__",)] or (outs and all(_is_raised(o, "NotImplementedError") for o in outs)):
        what = "replace `...` with your answer" if q.kind == "value" else (
            "replace `raise NotImplementedError` with your code")
        return result(0, "blank", f"Not answered yet: {what}, run the cell, then check again.")
    ref, planted = _expected(exercise_id, qid)
    if _same(ref, outs, q):
        n = len(outs)
        return result(q.points, "pass", "Correct." if q.kind == "value" else
                      f"All {n} test case{'s' if n > 1 else ''} pass.")
    for m in q.mistakes:
        if m.error is not None:
            if any(_is_raised(o) and re.search(m.error, o[2]) for o in outs):
                return result(0, "fail", f"Hint: {m.hint}", m.name)
        elif _same(planted[m.name], outs, q) or any(
                _same(other, outs, q) for other in _expected_also(exercise_id, qid, m.name)):
            return result(0, "fail", f"Hint: {m.hint}", m.name)
    if q.kind == "value":
        return result(0, "fail", f"Not quite: {difference(ref[0], outs[0], q)}.")
    cases = q.cases() if q.cases else []
    for i, (e, g) in enumerate(zip(ref, outs, strict=True)):
        if (d := difference(e, g, q)) is not None:
            label = cases[i].label if i < len(cases) else f"case {i + 1}"
            status = "error" if _is_raised(g) else "fail"
            return result(0, status, f"Test case {i + 1} of {len(outs)} ({label}): {d}.")
    return result(0, "fail", "The outputs differ from the expected ones.")  # pragma: no cover


def _borrowed(answer: Any) -> str | None:
    """Where the answer comes from when it is the course package's own code."""
    module = getattr(answer, "__module__", None)
    if callable(answer) and isinstance(module, str) and module.split(".")[0] == "gpt2_course":
        return f"{module}.{getattr(answer, '__qualname__', '')}"
    return None


def check_answer(exercise_id: str, qid: str, answer: Any, timeout: float | None = QUESTION_TIMEOUT,
                 allow_course_code: bool = False) -> Result:
    """Run one question's tests on `answer` in this process and score it. An answer that is the
    course package's own function scores 0 unless `allow_course_code` (for testing the grader)."""
    q = get_exercise(exercise_id).question(qid)
    if not allow_course_code and (where := _borrowed(answer)) is not None:
        return judge(exercise_id, qid, None, f"borrowed:{where}")
    _expected(exercise_id, qid)  # the reference outputs do not count against the time limit
    try:
        with time_limit(timeout):
            outs = probe(q, answer)
    except QuestionTimeout:
        return judge(exercise_id, qid, None, "timeout")
    return judge(exercise_id, qid, outs)


# ----------------------------------------------------------------------------------------------
# The notebook side: check = checker("05_masking"); check("q2")
# ----------------------------------------------------------------------------------------------

_MISSING = object()


class Checker:
    """`check("q2")` tests the answer to question 2, found by name in the notebook; pass the
    answer explicitly as a second argument to test something else."""

    def __init__(self, exercise_id: str):
        self.exercise = get_exercise(exercise_id)

    def __repr__(self) -> str:
        qs = ", ".join(f"{q.id} ({q.name})" for q in self.exercise.questions)
        return f"checker for {self.exercise.id}: {qs}"

    def _answer(self, name: str, frame_globals: dict[str, Any]) -> Any:
        return frame_globals.get(name, _MISSING)

    def __call__(self, qid: str, answer: Any = _MISSING) -> None:
        if os.environ.get(GRADING_ENV):
            return  # the grader runs its own tests after the notebook
        q = self.exercise.question(qid)
        if answer is _MISSING:
            frame = inspect.currentframe()
            caller = frame.f_back.f_globals if frame and frame.f_back else {}
            answer = self._answer(q.name, caller)
        if answer is _MISSING:
            print(judge(self.exercise.id, qid, None, "missing"))
        else:
            print(check_answer(self.exercise.id, qid, answer))

    def summary(self) -> None:
        """Every question's points, from the answers defined in the notebook right now."""
        if os.environ.get(GRADING_ENV):
            return
        frame = inspect.currentframe()
        caller = frame.f_back.f_globals if frame and frame.f_back else {}
        total = 0
        for q in self.exercise.questions:
            answer = self._answer(q.name, caller)
            r = (judge(self.exercise.id, q.id, None, "missing") if answer is _MISSING
                 else check_answer(self.exercise.id, q.id, answer))
            total += r.points
            print(f"{q.id:4} {q.name:24} {r.points}/{q.points}  {r.status}")
        print(f"total{'':24}{total}/{self.exercise.max_points}")


def checker(exercise_id: str) -> Checker:
    """The `check` function of one exercise notebook, e.g. checker("05_masking")."""
    return Checker(exercise_id)


# ----------------------------------------------------------------------------------------------
# Helpers for writing questions
# ----------------------------------------------------------------------------------------------


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_gen(seed), dtype=torch.float64)


def _shape(t: Any) -> str:
    return str(list(t.shape)) if isinstance(t, torch.Tensor) else repr(t)


def _calls(make_args: Callable[[], list[tuple[Any, ...]]],
           label: Callable[..., str] | None = None) -> Callable[[], list[Case]]:
    """Cases that call the answer with each tuple of arguments `make_args()` builds. Inputs are
    rebuilt for every probe and cloned for every call, so an answer that modifies its inputs in
    place cannot spoil the reference or the next case."""

    def build() -> list[Case]:
        return [
            Case(label(*args) if label else ", ".join(_shape(a) for a in args),
                 lambda f, args=args: f(*_fresh(args)))
            for args in make_args()
        ]

    return build


def _fresh(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def _choice(correct: str, wrong: dict[str, str]) -> tuple[str, list[Mistake]]:
    """A multiple-choice answer: the correct letter and a hint for each wrong one."""
    return correct, [Mistake(f"option_{k}", hint, impl=k) for k, hint in wrong.items()]


def _value(name: str, qid: str, points: int, reference: Any, mistakes: dict[str, tuple[Any, str]],
           rtol: float = 1e-3) -> Question:
    return Question(qid, name, points, reference,
                    mistakes=[Mistake(k, hint, impl=v) for k, (v, hint) in mistakes.items()],
                    rtol=rtol, atol=1e-9)


def _mc(name: str, qid: str, correct: str, wrong: dict[str, str]) -> Question:
    ref, mistakes = _choice(correct, wrong)
    return Question(qid, name, 1, ref, mistakes=mistakes)


# Hints shared by several questions.
NO_SCALE = ("The scores are missing the 1/sqrt(d_head) scale: divide q @ k^T by the square root of "
            "the head size (the last dimension of q), or the softmax saturates as d_head grows.")
SOFTMAX_DIM = ("Softmax over the wrong dimension: each query's weights over the keys (the last "
               "dimension, dim=-1) must sum to 1; you normalized over the queries.")
MASK_ZERO = ("Masked scores were set to 0 instead of -inf. exp(0) = 1, so hidden positions still "
             "get weight: use scores.masked_fill(~mask, float('-inf')).")
MASK_AFTER = ("The mask was applied after the softmax: zeroing weights afterwards leaves rows that "
              "no longer sum to 1. Set masked scores to -inf before the softmax.")
MASK_INVERTED = ("The mask is inverted: True means 'may look'. You hid the allowed positions and "
                 "kept the forbidden ones (masked_fill(~mask, ...), not masked_fill(mask, ...)).")
SEES_FUTURE = ("Mask off by one: each token sees the next token too (key j <= i + 1). A token may see "
               "keys up to and including its own position, never the future.")
EXACT_GELU = ("That is the exact GELU, x * Phi(x) with erf. GPT-2 uses the tanh approximation "
              "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); its weights were trained with it.")
RELU = "That is ReLU. GPT-2 uses GELU (tanh approximation), smooth and slightly negative below 0."
TIED_TWICE = ("You counted the tied head twice: GPT-2's output layer reuses the token embedding wte "
              "(logits = h @ wte.T), so it adds no parameters of its own.")


# ----------------------------------------------------------------------------------------------
# Chapter 1: language modeling
# ----------------------------------------------------------------------------------------------


def _np() -> Any:
    import numpy as np

    return np


def _bigram_counts(ids: Any, vocab_size: int, mode: str = "ok") -> Any:
    np = _np()
    ids = np.asarray(ids)
    counts = np.zeros((vocab_size, vocab_size), dtype=np.int64)
    a, b = ids[:-1], ids[1:]
    if mode == "transposed":
        a, b = b, a
    if mode == "wrap":
        a, b = ids, np.roll(ids, -1)
    if mode == "fancy":
        counts[a, b] += 1  # repeated index pairs are written once, not accumulated
    else:
        np.add.at(counts, (a, b), 1)
    return counts


def _next_token_probs(counts: Any, token: int, lam: float, unigram: Any, mode: str = "ok") -> Any:
    np = _np()
    row = counts[:, token] if mode == "column" else counts[token]
    total = row.sum()
    if total == 0 and mode != "no_fallback":
        return unigram.copy()
    with np.errstate(invalid="ignore", divide="ignore"):
        bigram = row / total
    if mode == "swapped":
        return (1 - lam) * bigram + lam * unigram
    return lam * bigram + (1 - lam) * unigram


def _ch1_ids() -> list[Any]:
    np = _np()
    rng = np.random.default_rng(1)
    return [np.array([0, 1, 2, 1, 2, 0]), rng.integers(0, 5, size=40), np.array([4, 4, 4, 4, 1]),
            np.array([2])]


def _ch1_probs_args() -> list[tuple[Any, ...]]:
    np = _np()
    ids = np.random.default_rng(2).integers(0, 5, size=60)  # token 5 never occurs
    counts = _bigram_counts(ids, 6)
    unigram = np.bincount(ids, minlength=6) + 1.0
    unigram = unigram / unigram.sum()
    return [(counts, t, lam, unigram) for t, lam in [(0, 0.7), (3, 0.25), (1, 1.0), (5, 0.7)]]


@_exercise
def _ex_01_language_modeling() -> Exercise:
    V = 50257
    return Exercise("01_language_modeling", "Language modeling", [
        _value("uniform_loss", "q1", 1, math.log(V), {
            "bits": (math.log2(V), "That is in bits (log base 2). The course measures cross-entropy "
                     "in nats: use the natural log, math.log."),
            "perplexity": (V, "That is the perplexity. The cross-entropy is its natural log: the "
                           "loss of a uniform guess over V tokens is ln V."),
            "log10": (math.log10(V), "That is log base 10. Cross-entropy in nats uses the natural log."),
        }),
        _value("perplexity_by_hand", "q2", 1, 2 ** 1.75, {
            "loss": (1.75 * math.log(2), "That is the cross-entropy (mean negative log-probability). "
                     "The perplexity is its exponential."),
            "mean_inverse": (4.0, "You averaged 1/p. Perplexity averages the log-probabilities, then "
                             "exponentiates: a geometric, not an arithmetic, mean of 1/p."),
            "inverse_mean": (1 / 0.34375, "You took 1 / (mean probability). Average -log p first, then "
                             "exponentiate."),
            "sum": (2 ** 7, "You summed the negative log-probabilities: take their mean, so the "
                    "perplexity does not grow with the length of the text."),
        }),
        Question("q3", "bigram_counts", 2, _bigram_counts,
                 cases=_calls(lambda: [(ids, 6) for ids in _ch1_ids()],
                              label=lambda ids, v: f"ids of length {len(ids)}, vocab_size {v}"),
                 mistakes=[
                     Mistake("transposed", "Rows and columns are swapped: counts[a, b] must count how "
                             "often b follows a (row = current token, column = next token).",
                             impl=lambda ids, v: _bigram_counts(ids, v, "transposed")),
                     Mistake("wrap", "You counted a pair from the last token back to the first. A text "
                             "of n tokens has n - 1 pairs: zip(ids[:-1], ids[1:]).",
                             impl=lambda ids, v: _bigram_counts(ids, v, "wrap")),
                     Mistake("fancy_index", "Repeated pairs were counted once: counts[a, b] += 1 with "
                             "index arrays writes each repeated (a, b) only once. Use np.add.at(counts, "
                             "(a, b), 1) or a plain loop.",
                             impl=lambda ids, v: _bigram_counts(ids, v, "fancy")),
                 ]),
        Question("q4", "next_token_probs", 2, _next_token_probs,
                 cases=_calls(_ch1_probs_args, label=lambda c, t, lam, u: f"token {t}, lam {lam}"),
                 mistakes=[
                     Mistake("swapped", "The weights are swapped: lam weighs the bigram estimate, "
                             "lam * bigram + (1 - lam) * unigram.",
                             impl=lambda c, t, lam, u: _next_token_probs(c, t, lam, u, "swapped")),
                     Mistake("column", "You read a column, counts[:, token]: those count what comes "
                             "*before* the token. What follows it is its row, counts[token].",
                             impl=lambda c, t, lam, u: _next_token_probs(c, t, lam, u, "column")),
                     Mistake("no_fallback", "A token never seen as context has an all-zero row: 0 / 0 "
                             "gives NaN. Fall back to the unigram distribution for it.",
                             impl=lambda c, t, lam, u: _next_token_probs(c, t, lam, u, "no_fallback")),
                 ]),
        _mc("blind_spot", "q5", "a", {
            "b": "Smoothing mixes the same unigram vector into every row, but the bigram part would "
                 "still tell the contexts apart if the model saw them. Look at what the probability "
                 "p(next | current) is conditioned on.",
            "c": "GPT-2's 50,257 tokens tell ' king' from ' be' perfectly well. The model never looks "
                 "at either: what does it condition on?",
            "d": "Whether a text was held out changes how well the model does on it, not which tokens "
                 "it conditions on.",
        }),
    ])


# ----------------------------------------------------------------------------------------------
# Chapter 2: byte-pair encoding
# ----------------------------------------------------------------------------------------------


def _pair_counts(ids: list[int], mode: str = "ok") -> dict[tuple[int, int], int]:
    ids = list(ids)
    pairs = {"step_two": zip(ids[::2], ids[1::2]), "wrap": zip(ids, ids[1:] + ids[:1])}.get(
        mode, zip(ids, ids[1:]))
    counts: dict[tuple[int, int], int] = {}
    for pair in pairs:
        counts[pair] = 1 if mode == "once" else counts.get(pair, 0) + 1
    return counts


def _merge(ids: list[int], pair: tuple[int, int], new_id: int, mode: str = "ok") -> list[int]:
    ids = list(ids)
    if mode == "right_to_left":
        return _merge(ids[::-1], pair[::-1], new_id)[::-1]
    out, i, merged = [], 0, False
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair) and not (mode == "first" and merged):
            out.append(new_id)
            merged = True
            i += 1 if mode == "overlap" else 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _train_step(ids: list[int], new_id: int, mode: str = "ok") -> tuple[list[int], tuple[int, int]]:
    counts = _pair_counts(ids)
    if mode == "max_pairs":
        pair = max(counts)
    elif mode == "ties_last":
        pair = sorted(counts.items(), key=lambda kv: kv[1])[-1][0]
    else:
        pair = max(counts, key=counts.get)
    return _merge(ids, pair, new_id), pair


def _apply_merges(ids: list[int], merges: dict[tuple[int, int], int], mode: str = "ok") -> list[int]:
    ids, rank = list(ids), {pair: r for r, pair in enumerate(merges)}
    while len(ids) >= 2:
        pairs = list(zip(ids, ids[1:]))
        known = [p for p in pairs if p in merges]
        if not known:
            break
        if mode == "leftmost":
            pair = known[0]
        elif mode == "latest_first":
            pair = max(known, key=rank.__getitem__)
        else:
            pair = min(known, key=rank.__getitem__)
        ids = _merge(ids, pair, merges[pair])
    return ids


def _learn_merges(text: str, n: int) -> dict[tuple[int, int], int]:
    ids, merges = list(text.encode("utf-8")), {}
    for new_id in range(256, 256 + n):
        ids, pair = _train_step(ids, new_id)
        merges[pair] = new_id
    return merges


def _merges_args() -> list[tuple[Any, ...]]:
    crafted = {(1, 2): 10, (3, 4): 11, (2, 3): 12, (10, 11): 13}
    learned = _learn_merges("the cat sat on the mat; the cat ate the hat", 12)
    return [
        ([1, 2, 3, 4], {(2, 3): 10, (1, 2): 11, (10, 4): 12}),
        ([1, 2, 3, 4], crafted),
        ([5, 1, 2, 3, 4, 1, 2], crafted),
        (list(b"the hat sat on the cat"), learned),
        (list(b"x"), learned),
    ]


@_exercise
def _ex_02_bpe() -> Exercise:
    return Exercise("02_bpe", "Byte-pair encoding", [
        _value("gpt2_merges", "q1", 1, 50000, {
            "vocab": (50257, "That is the vocabulary size. Not every token is a merge: subtract the "
                      "256 single-byte tokens and <|endoftext|>."),
            "bytes_only": (50001, "You subtracted the 256 byte tokens but not <|endoftext|>, which is "
                           "a special token, not a merge."),
            "eot_only": (50256, "You subtracted <|endoftext|> but not the 256 single-byte tokens the "
                         "merges start from."),
        }, rtol=0),
        Question("q2", "get_pair_counts", 2, _pair_counts,
                 cases=_calls(lambda: [([1, 2, 3, 1, 2],), ([5, 5, 5, 5],), ([1, 2, 1, 2, 1, 2, 3],),
                                       ([7],), ([],), (list(b"hello hello"),)],
                              label=lambda ids: f"ids {ids[:12]}"),
                 mistakes=[
                     Mistake("step_two", "You counted only pairs that start at even positions. Pairs "
                             "overlap: every adjacent pair counts, zip(ids, ids[1:]).",
                             impl=lambda ids: _pair_counts(ids, "step_two")),
                     Mistake("once", "Each distinct pair was counted once. Count every occurrence: "
                             "counts[pair] = counts.get(pair, 0) + 1.",
                             impl=lambda ids: _pair_counts(ids, "once")),
                     Mistake("wrap", "You counted a pair from the last token back to the first: a "
                             "sequence of n tokens has n - 1 adjacent pairs.",
                             impl=lambda ids: _pair_counts(ids, "wrap")),
                 ]),
        Question("q3", "merge", 2, _merge,
                 cases=_calls(lambda: [([1, 2, 3, 1, 2], (1, 2), 9), ([5, 5, 5], (5, 5), 6),
                                       ([5, 5, 5, 5], (5, 5), 6), ([1, 2, 1, 2, 1], (1, 2), 8),
                                       ([3, 1], (1, 2), 7), ([2, 1], (1, 2), 7)],
                              label=lambda ids, pair, new: f"merge({ids}, {pair}, {new})"),
                 mistakes=[
                     Mistake("overlap", "After a merge you advanced by one token, so the second token of "
                             "the pair was used twice: merge([5, 5, 5], (5, 5), 6) must give [6, 5]. "
                             "Skip both merged tokens (i += 2).",
                             impl=lambda ids, p, n: _merge(ids, p, n, "overlap")),
                     Mistake("first", "Only the first occurrence was merged. Replace every occurrence, "
                             "scanning left to right.", impl=lambda ids, p, n: _merge(ids, p, n, "first")),
                     Mistake("right_to_left", "You scanned from the right: merge([5, 5, 5], (5, 5), 6) "
                             "must give [6, 5], not [5, 6]. Scan left to right.",
                             impl=lambda ids, p, n: _merge(ids, p, n, "right_to_left")),
                 ]),
        Question("q4", "bpe_train_step", 2, _train_step,
                 cases=_calls(lambda: [([1, 2, 1, 2, 3, 4, 3, 4, 9, 1], 10),
                                       ([4, 4, 4, 1, 2, 1, 2, 1, 2], 10),
                                       (list(b"hello hello world"), 256)],
                              label=lambda ids, new: f"ids {ids[:10]}..., new_id {new}"),
                 mistakes=[
                     Mistake("max_pairs", "max(counts) compares the pairs themselves (the largest token "
                             "ids win), not their counts: use max(counts, key=counts.get).",
                             impl=lambda ids, n: _train_step(ids, n, "max_pairs")),
                     Mistake("ties_last", "On a tie you picked the pair seen last. Break ties by first "
                             "occurrence, as max(counts, key=counts.get) does on a dict.",
                             impl=lambda ids, n: _train_step(ids, n, "ties_last")),
                 ]),
        Question("q5", "apply_merges", 3, _apply_merges,
                 cases=_calls(_merges_args, label=lambda ids, m: f"ids {ids[:8]}, {len(m)} merges"),
                 mistakes=[
                     Mistake("leftmost", "Merges applied out of rank order: you merged the leftmost "
                             "mergeable pair first. BPE applies the merge learned earliest (lowest rank) "
                             "first, wherever it is in the sequence.",
                             impl=lambda ids, m: _apply_merges(ids, m, "leftmost")),
                     Mistake("latest_first", "Merges applied out of rank order: you applied the most "
                             "recently learned merge first. Apply the lowest rank (earliest learned) first.",
                             impl=lambda ids, m: _apply_merges(ids, m, "latest_first")),
                 ]),
    ])


# ----------------------------------------------------------------------------------------------
# Chapter 3: embeddings
# ----------------------------------------------------------------------------------------------


def _one_hot(ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    return F.one_hot(ids, vocab_size).to(torch.float64)


def _embed_matmul(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return F.one_hot(ids, weight.size(0)).to(weight.dtype) @ weight


def _input_embeddings(idx: torch.Tensor, wte: torch.Tensor, wpe: torch.Tensor,
                      mode: str = "ok") -> torch.Tensor:
    T = idx.size(-1)
    pos = {"from_one": torch.arange(1, T + 1), "by_token": idx}.get(mode, torch.arange(T))
    if mode == "no_positions":
        return wte[idx]
    if mode == "concat":
        return torch.cat([wte[idx], wpe[pos].expand(*idx.shape, -1)], dim=-1)
    return wte[idx] + wpe[pos]


def _ids(seed: int, *shape: int, high: int = 10) -> torch.Tensor:
    return torch.randint(0, high, shape, generator=_gen(seed))


@_exercise
def _ex_03_embeddings() -> Exercise:
    V, N, C = 50257, 1024, 768
    embed_args = lambda: [(_ids(1, 5), _randn(2, 10, 4)), (_ids(3, 2, 6), _randn(4, 10, 3)),  # noqa: E731
                          (torch.tensor([9, 0, 9]), _randn(5, 10, 16))]
    input_args = lambda: [(_ids(6, 2, 5), _randn(7, 10, 4), _randn(8, 16, 4)),  # noqa: E731
                          (_ids(9, 1, 8), _randn(10, 10, 6), _randn(11, 16, 6))]
    return Exercise("03_embeddings", "Embeddings", [
        _value("embedding_params", "q1", 1, V * C + N * C, {
            "wte_only": (V * C, "That is the token embedding alone: the position embedding wpe adds "
                         "n_ctx x n_embd = 1024 x 768 more."),
            "with_head": (2 * V * C + N * C, "GPT-2's output head is tied to wte: it reuses the same "
                          "matrix and adds no parameters."),
        }, rtol=0),
        Question("q2", "one_hot", 1, _one_hot, strict_dtype=True,
                 cases=_calls(lambda: [(_ids(1, 5), 10), (_ids(2, 2, 3), 7), (torch.tensor([0]), 3)],
                              label=lambda ids, v: f"ids {list(ids.shape)}, vocab_size {v}"),
                 mistakes=[
                     Mistake("integer", "F.one_hot returns integers (int64). Convert to float (.float() "
                             "or .to(weight.dtype)) so the one-hot rows can multiply float weights.",
                             impl=lambda ids, v: F.one_hot(ids, v)),
                 ]),
        Question("q3", "embed_matmul", 2, _embed_matmul, cases=_calls(embed_args), mistakes=[
            Mistake("transposed", "weight is [vocab_size, n_embd]: one_hot(ids) [..., vocab_size] @ "
                    "weight gives [..., n_embd] directly, no transpose.",
                    error=r"shapes cannot be multiplied|size mismatch"),
            Mistake("dtype", "The one-hot matrix is integer and the weights are float: convert it with "
                    ".to(weight.dtype) before the product.", error=r"dtype|scalar type"),
        ]),
        Question("q4", "input_embeddings", 2, _input_embeddings, cases=_calls(input_args), mistakes=[
            Mistake("no_positions", "The position embedding is missing: add wpe[0..T-1] to the token "
                    "vectors, or the model cannot tell word order.",
                    impl=lambda i, t, p: _input_embeddings(i, t, p, "no_positions")),
            Mistake("from_one", "Positions start at 0: the first token gets wpe[0], not wpe[1].",
                    impl=lambda i, t, p: _input_embeddings(i, t, p, "from_one")),
            Mistake("by_token", "You looked up wpe with the token ids. wpe is indexed by position "
                    "0, 1, ..., T-1 (torch.arange(T)).",
                    impl=lambda i, t, p: _input_embeddings(i, t, p, "by_token")),
            Mistake("concat", "GPT-2 adds the position vector to the token vector; concatenating "
                    "doubles the width.", impl=lambda i, t, p: _input_embeddings(i, t, p, "concat")),
        ]),
    ])


# ----------------------------------------------------------------------------------------------
# Chapters 4 and 5: attention and masking
# ----------------------------------------------------------------------------------------------


def _scores(q: torch.Tensor, k: torch.Tensor, mode: str = "ok") -> torch.Tensor:
    if mode == "transposed":
        return k @ q.transpose(-2, -1) / math.sqrt(q.size(-1))
    s = q @ k.transpose(-2, -1)
    return s / {"no_scale": 1.0, "by_d": q.size(-1), "by_t": math.sqrt(q.size(-2))}.get(
        mode, math.sqrt(q.size(-1)))


def _masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None, mode: str = "ok") -> torch.Tensor:
    dim = -2 if mode == "softmax_dim" else -1
    if mask is None:
        return F.softmax(scores, dim=dim)
    if mode == "mask_zero":
        return F.softmax(scores.masked_fill(~mask, 0.0), dim=-1)
    if mode == "mask_after":
        return F.softmax(scores, dim=-1) * mask
    if mode == "inverted":
        return F.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
    return F.softmax(scores.masked_fill(~mask, float("-inf")), dim=dim)


def _attention_weights(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None = None,
                       mode: str = "ok") -> torch.Tensor:
    return _masked_softmax(_scores(q, k, "no_scale" if mode == "no_scale" else "ok"), mask, mode)


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None,
               mode: str = "ok") -> torch.Tensor:
    if mode == "no_softmax":
        return _scores(q, k) @ v
    return _attention_weights(q, k, mask, mode) @ v


def _causal(t_q: int, t_k: int | None = None, mode: str = "ok") -> torch.Tensor:
    t_k = t_q if t_k is None else t_k
    offset = 0 if mode == "no_offset" else t_k - t_q
    i = torch.arange(t_q)[:, None] + offset
    j = torch.arange(t_k)[None, :]
    return {"sees_future": j <= i + 1, "no_self": j < i, "upper": j >= i}.get(mode, j <= i)


def _qk_args() -> list[tuple[Any, ...]]:
    return [(_randn(1, 4, 6), _randn(2, 4, 6)), (_randn(3, 2, 3, 8), _randn(4, 2, 5, 8)),
            (_randn(5, 1, 2, 5, 16), _randn(6, 1, 2, 5, 16))]


def _qk_mask_args() -> list[tuple[Any, ...]]:
    pad = torch.tensor([[True, True, True, False, False]] * 3)
    return [(_randn(1, 4, 6) * 2, _randn(2, 4, 6), None),
            (_randn(3, 4, 6) * 2, _randn(4, 4, 6), _causal(4)),
            (_randn(5, 2, 3, 8) * 2, _randn(6, 2, 5, 8), _causal(3, 5)),
            (_randn(7, 3, 8), _randn(8, 5, 8), pad)]


def _qkv_mask_args() -> list[tuple[Any, ...]]:
    return [(q, k, _randn(20 + i, *k.shape[:-1], 3), m) for i, (q, k, m) in enumerate(_qk_mask_args())]


def _mask_label(*args: Any) -> str:
    shapes = ", ".join(_shape(a) for a in args[:-1])
    return f"{shapes}, {'no mask' if args[-1] is None else 'mask ' + _shape(args[-1])}"


def _with_also(mistakes: list[Mistake], **also: tuple[Any, ...]) -> list[Mistake]:
    """Attach other common forms of some mistakes (by name)."""
    for m in mistakes:
        m.also = also.get(m.name, ())
    return mistakes


def _variants(fn: Callable[..., Any], hints: dict[str, str]) -> list[Mistake]:
    """Planted mistakes that are `fn(..., mode=name)`."""
    return [Mistake(name, hint, impl=lambda *a, name=name: fn(*a, mode=name)) for name, hint in hints.items()]


@_exercise
def _ex_04_self_attention() -> Exercise:
    return Exercise("04_self_attention", "Self-attention", [
        _value("weights_shape", "q1", 1, (2, 5, 7), {
            "transposed": ((2, 7, 5), "Rows are queries and columns are keys: the weights are "
                           "[batch, T_q, T_k]."),
            "features": ((2, 5, 8), "The weights spread each query over the *keys*, not over the "
                         "features: the last dimension is T_k = 7. (The output q k^T v is [2, 5, 8].)"),
            "square": ((2, 5, 5), "The keys come from a sequence of 7 tokens: the weights are "
                       "T_q x T_k = 5 x 7."),
        }),
        Question("q2", "scores", 2, _scores, cases=_calls(_qk_args), mistakes=_variants(_scores, {
            "no_scale": NO_SCALE,
            "by_d": "You divided by d_head; divide by its square root, sqrt(d_head), which keeps the "
                    "scores' variance near 1.",
            "by_t": "You scaled by the square root of the sequence length (q.size(-2)). The scale uses "
                    "the head size, the last dimension: q.size(-1).",
            "transposed": "Query i must pair with key j in scores[..., i, j]: compute q @ k^T, not k @ q^T.",
        })),
        Question("q3", "attention_weights", 2, _attention_weights,
                 cases=_calls(_qk_mask_args, label=_mask_label),
                 mistakes=_variants(_attention_weights, {
                     "no_scale": NO_SCALE, "softmax_dim": SOFTMAX_DIM, "mask_zero": MASK_ZERO,
                     "mask_after": MASK_AFTER, "inverted": MASK_INVERTED})),
        Question("q4", "attention", 2, _attention, cases=_calls(_qkv_mask_args, label=_mask_label),
                 mistakes=_variants(_attention, {
                     "no_scale": NO_SCALE, "softmax_dim": SOFTMAX_DIM,
                     "no_softmax": "The scores went straight into the product with v: turn them into "
                                   "weights with a softmax over the keys first."})),
    ])


def _upper_no_offset(t_q: int, t_k: int | None = None) -> torch.Tensor:
    return torch.ones(t_q, t_q if t_k is None else t_k, dtype=torch.bool).triu()


def _mask_args() -> list[tuple[Any, ...]]:
    return [(_randn(1, 4, 4), _causal(4)), (_randn(2, 2, 3, 5), _causal(3, 5)),
            (_randn(3, 3, 5), torch.tensor([[True, True, True, False, False]] * 3))]


@_exercise
def _ex_05_masking() -> Exercise:
    T = 1024
    return Exercise("05_masking", "Masking", [
        _value("visible_pairs", "q1", 1, T * (T + 1) // 2, {
            "no_diagonal": (T * (T - 1) // 2, "You left out the diagonal: every token sees itself."),
            "half": (T * T // 2, "Half of the square misses half of the diagonal: the lower triangle "
                     "including the diagonal has T (T + 1) / 2 entries."),
            "all": (T * T, "That is every (query, key) pair: the mask hides the upper triangle."),
        }, rtol=0),
        Question("q2", "causal_mask", 3, _causal, strict_dtype=True,
                 cases=_calls(lambda: [(4,), (1,), (3, 5), (1, 6), (2, 2), (6,)],
                              label=lambda *a: f"causal_mask{a}"),
                 mistakes=_with_also(_variants(_causal, {
                     "sees_future": SEES_FUTURE,
                     "no_self": "The diagonal is False, so a token cannot see itself (j < i). A token "
                                "sees keys up to and including its own position: j <= i.",
                     "upper": "You built the upper triangle: every token sees the future and not the "
                              "past. Query i may see key j when j <= i.",
                     "no_offset": "With t_k > t_q the queries are the *last* t_q positions: query i "
                                  "sits at position t_k - t_q + i. You aligned them with the first keys, "
                                  "so the newest token cannot see the latest keys.",
                 }), upper=(_upper_no_offset,))),
        Question("q3", "masked_softmax", 2, _masked_softmax, cases=_calls(_mask_args),
                 mistakes=_variants(_masked_softmax, {
                     "mask_zero": MASK_ZERO, "mask_after": MASK_AFTER, "inverted": MASK_INVERTED})),
    ])


# ----------------------------------------------------------------------------------------------
# Chapter 6: multi-head attention
# ----------------------------------------------------------------------------------------------


def _split_heads(x: torch.Tensor, n_head: int, mode: str = "ok") -> torch.Tensor:
    B, T, C = x.shape
    if mode == "view_direct":
        return x.reshape(B, n_head, T, C // n_head)
    if mode == "interleaved":
        return x.reshape(B, T, C // n_head, n_head).permute(0, 3, 1, 2)
    heads = x.reshape(B, T, n_head, C // n_head)
    return heads if mode == "no_transpose" else heads.transpose(1, 2)


def _merge_heads(x: torch.Tensor, mode: str = "ok") -> torch.Tensor:
    B, H, T, D = x.shape
    if mode == "no_transpose":
        return x.reshape(B, T, H * D)
    return x.transpose(1, 2).reshape(B, T, H * D)


def _mha(x: torch.Tensor, w_attn: torch.Tensor, b_attn: torch.Tensor, w_proj: torch.Tensor,
         b_proj: torch.Tensor, n_head: int, mode: str = "ok") -> torch.Tensor:
    B, T, C = x.shape
    H = 1 if mode == "single_head" else n_head
    q, k, v = (_split_heads(t, H) for t in (x @ w_attn.T + b_attn).split(C, dim=-1))
    scores = q @ k.transpose(-2, -1)
    scores = scores / {"no_scale": 1.0, "scale_by_c": math.sqrt(C)}.get(mode, math.sqrt(C // H))
    if mode != "no_mask":
        scores = scores.masked_fill(~_causal(T), float("-inf"))
    y = _merge_heads(F.softmax(scores, dim=-1) @ v)
    return y if mode == "no_proj" else y @ w_proj.T + b_proj


def _mha_args() -> list[tuple[Any, ...]]:
    out = []
    for seed, (B, T, C, H) in enumerate([(2, 5, 12, 3), (1, 4, 8, 2), (1, 6, 16, 4)]):
        s = 10 * seed
        out.append((_randn(s, B, T, C), _randn(s + 1, 3 * C, C) / math.sqrt(C) * 2,
                    _randn(s + 2, 3 * C) * 0.1, _randn(s + 3, C, C) / math.sqrt(C),
                    _randn(s + 4, C) * 0.1, H))
    return out


@_exercise
def _ex_06_multi_head_attention() -> Exercise:
    C = 768
    return Exercise("06_multi_head_attention", "Multi-head attention", [
        _value("c_attn_params", "q1", 1, C * 3 * C + 3 * C, {
            "no_bias": (C * 3 * C, "You left out the bias: c_attn is an nn.Linear(768, 2304) with a "
                        "bias of 2304 numbers."),
            "per_head": ((C * 3 * C + 3 * C) // 12, "c_attn projects all twelve heads at once: one "
                         "768 -> 2304 linear layer for the whole block, not one per head."),
        }, rtol=0),
        Question("q2", "split_heads", 2, _split_heads,
                 cases=_calls(lambda: [(_randn(1, 2, 5, 12), 3), (_randn(2, 1, 4, 8), 4),
                                       (_randn(3, 3, 2, 6), 2)],
                              label=lambda x, h: f"x {list(x.shape)}, n_head {h}"),
                 mistakes=_variants(_split_heads, {
                     "view_direct": "x.view(B, n_head, T, d_head) reinterprets the memory: features of "
                                    "different positions end up in one head. View as [B, T, n_head, d_head], "
                                    "then transpose(1, 2).",
                     "interleaved": "Head h must own the contiguous features h*d_head ... (h+1)*d_head - 1. "
                                    "You interleaved them (head index as the fast dimension).",
                     "no_transpose": "You returned [B, T, n_head, d_head]: transpose(1, 2) to put the heads "
                                     "before time, [B, n_head, T, d_head].",
                 })),
        Question("q3", "merge_heads", 2, _merge_heads,
                 cases=_calls(lambda: [(_randn(1, 2, 3, 5, 4),), (_randn(2, 1, 4, 4, 2),),
                                       (_randn(3, 2, 1, 3, 6),)]),
                 mistakes=[
                     Mistake("no_transpose", "Reshaping [B, n_head, T, d_head] straight to [B, T, C] mixes "
                             "heads and positions: transpose(1, 2) first.",
                             impl=lambda x: _merge_heads(x, "no_transpose")),
                     Mistake("view_error", "After transpose(1, 2) the tensor is not contiguous, so .view "
                             "fails: use .contiguous().view(B, T, C) or .reshape(B, T, C).",
                             error=r"view size is not compatible|contiguous"),
                 ]),
        Question("q4", "multi_head_attention", 3, _mha, cases=_calls(
            _mha_args, label=lambda x, *w: f"x {list(x.shape)}, n_head {w[-1]}"),
            mistakes=_variants(_mha, {
                "no_mask": "No causal mask: every token reads the tokens after it. Mask scores where key "
                           "j > query i with -inf before the softmax.",
                "no_scale": NO_SCALE,
                "scale_by_c": "You scaled by sqrt(n_embd). Each head's scores are dot products of "
                              "d_head = n_embd / n_head features: divide by sqrt(d_head).",
                "single_head": "You attended with one head over all C features. Split q, k and v into "
                               "n_head heads of C / n_head features, attend per head, then merge.",
                "no_proj": "The output projection c_proj is missing: after merging the heads, apply "
                           "y @ w_proj.T + b_proj.",
            })),
    ])


# ----------------------------------------------------------------------------------------------
# Chapter 7: the MLP
# ----------------------------------------------------------------------------------------------


def _gelu(x: torch.Tensor, mode: str = "ok") -> torch.Tensor:
    if mode == "exact":
        return F.gelu(x)
    if mode == "relu":
        return F.relu(x)
    cube = x**2 if mode == "x_squared" else x**3
    y = x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * cube)))
    return y if mode == "no_half" else 0.5 * y


def _mlp(x: torch.Tensor, w_fc: torch.Tensor, b_fc: torch.Tensor, w_proj: torch.Tensor, b_proj: torch.Tensor,
         mode: str = "ok") -> torch.Tensor:
    h = x @ w_fc.T + b_fc
    h = h if mode == "linear" else _gelu(h, mode)
    return h @ w_proj.T + b_proj


def _mlp_args() -> list[tuple[Any, ...]]:
    out = []
    for s, (shape, C) in enumerate([((2, 3, 4), 4), ((5, 8), 8)]):
        out.append((_randn(s, *shape) * 2, _randn(s + 10, 4 * C, C), _randn(s + 20, 4 * C),
                    _randn(s + 30, C, 4 * C) / 4, _randn(s + 40, C)))
    return out


@_exercise
def _ex_07_mlp() -> Exercise:
    C = 768
    return Exercise("07_mlp", "The MLP", [
        _value("mlp_hidden", "q1", 1, 4 * C, {
            "same": (C, "That is n_embd. GPT-2's MLP widens each vector four times before projecting "
                     "it back."),
            "three": (3 * C, "3 x 768 is the width of c_attn (q, k and v). The MLP is 4 x 768 wide."),
        }, rtol=0),
        Question("q2", "gelu_tanh", 2, _gelu, rtol=1e-6, atol=1e-7,
                 cases=_calls(lambda: [(torch.linspace(-4, 4, 81, dtype=torch.float64),),
                                       (_randn(1, 3, 5) * 2,)],
                              label=lambda x: f"x {list(x.shape)}"),
                 mistakes=_variants(_gelu, {
                     "exact": EXACT_GELU, "relu": RELU,
                     "no_half": "The factor 0.5 is missing: GELU(x) = 0.5 x (1 + tanh(...)).",
                     "x_squared": "The cubic term is 0.044715 x^3, not x^2.",
                 })),
        Question("q3", "mlp", 2, _mlp, cases=_calls(_mlp_args), mistakes=[
            *_variants(_mlp, {
                "exact": EXACT_GELU, "relu": RELU,
                "linear": "There is no activation between the layers, so two linear layers collapse "
                          "into one: apply gelu_tanh to the hidden layer.",
            }),
            Mistake("no_transpose", "nn.Linear stores its weight as [out_features, in_features]: the "
                    "layer computes x @ w.T + b.", error=r"shapes cannot be multiplied|size mismatch"),
        ]),
        _value("mlp_params", "q4", 1, C * 4 * C + 4 * C + 4 * C * C + C, {
            "no_bias": (8 * C * C, "You left out the biases: c_fc has 3072 and c_proj 768."),
            "c_fc_only": (C * 4 * C + 4 * C, "That is c_fc alone: add c_proj, 3072 -> 768 with its bias."),
        }, rtol=0),
    ])


# ----------------------------------------------------------------------------------------------
# Chapter 8: blocks and the model
# ----------------------------------------------------------------------------------------------


def _layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5,
                mode: str = "ok") -> torch.Tensor:
    dim = 0 if mode == "wrong_dim" else -1
    mean = x.mean(dim, keepdim=True)
    var = x.var(dim, keepdim=True, unbiased=mode == "unbiased")
    if mode == "eps_outside":
        y = (x - mean) / (var.sqrt() + eps)
    else:
        y = (x - mean) / torch.sqrt(var + eps)
    return y if mode == "no_affine" else y * weight + bias


def _ln_args() -> list[tuple[Any, ...]]:
    return [(_randn(1, 4, 8) * 3 + 1, _randn(2, 8), _randn(3, 8), 1e-5),
            (_randn(4, 2, 3, 6), _randn(5, 6), _randn(6, 6), 1e-5),
            (1 + 1e-3 * _randn(7, 3, 8), _randn(8, 8), _randn(9, 8), 1e-5)]


def _block(x: torch.Tensor, ln_1: Callable, attn: Callable, ln_2: Callable, mlp: Callable,
           mode: str = "ok") -> torch.Tensor:
    if mode == "post_ln":
        x = ln_1(x + attn(x))
        return ln_2(x + mlp(x))
    if mode == "normed_residual":
        x = ln_1(x)
        x = x + attn(x)
        x = ln_2(x)
        return x + mlp(x)
    a = attn(ln_1(x))
    if mode == "parallel":
        return x + a + mlp(ln_2(x))
    x = a if mode == "no_attn_residual" else x + a
    m = mlp(ln_2(x))
    return m if mode == "no_mlp_residual" else x + m


def _block_args() -> list[tuple[Any, ...]]:
    out = []
    for s, (B, T, C) in enumerate([(2, 4, 6), (1, 5, 8)]):
        torch.manual_seed(100 + s)
        ln_1, ln_2 = nn.LayerNorm(C).double(), nn.LayerNorm(C).double()
        for ln in (ln_1, ln_2):
            nn.init.normal_(ln.weight, 1.0, 0.3)
            nn.init.normal_(ln.bias, 0.0, 0.3)
        w_v, w_1, w_2 = _randn(10 * s + 1, C, C), _randn(10 * s + 2, C, 2 * C), _randn(10 * s + 3, 2 * C, C)
        causal_avg = _causal(T).double() / torch.arange(1, T + 1, dtype=torch.float64)[:, None]

        def attn(h: torch.Tensor, w_v: torch.Tensor = w_v, avg: torch.Tensor = causal_avg) -> torch.Tensor:
            return avg @ (h @ w_v) * 0.5

        def mlp(h: torch.Tensor, w_1: torch.Tensor = w_1, w_2: torch.Tensor = w_2) -> torch.Tensor:
            return torch.tanh(h @ w_1) @ w_2 * 0.3

        ln_1.requires_grad_(False)
        ln_2.requires_grad_(False)
        out.append((_randn(10 * s + 4, B, T, C) * 2, ln_1, attn, ln_2, mlp))
    return out


def _tied_logits(x: torch.Tensor, ln_f: Callable, wte: torch.Tensor, mode: str = "ok") -> torch.Tensor:
    return (x if mode == "no_ln_f" else ln_f(x)) @ wte.T


def _logits_args() -> list[tuple[Any, ...]]:
    out = []
    for s, (shape, V) in enumerate([((2, 3, 4), 10), ((5, 6), 7)]):
        torch.manual_seed(200 + s)
        ln = nn.LayerNorm(shape[-1]).double().requires_grad_(False)
        nn.init.normal_(ln.weight, 1.0, 0.3)
        out.append((_randn(s, *shape) * 3 + 1, ln, _randn(s + 5, V, shape[-1])))
    return out


@_exercise
def _ex_08_blocks_and_model() -> Exercise:
    shapes = lambda *a: f"x {list(a[0].shape)}"  # noqa: E731
    return Exercise("08_blocks_and_model", "Blocks and the model", [
        Question("q1", "layer_norm", 2, _layer_norm, cases=_calls(_ln_args, label=shapes),
                 mistakes=_variants(_layer_norm, {
                     "unbiased": "You used the unbiased variance (dividing by n - 1), torch.var's default. "
                                 "LayerNorm divides by n: x.var(-1, keepdim=True, unbiased=False).",
                     "eps_outside": "eps goes inside the square root: (x - mean) / sqrt(var + eps), not "
                                    "(x - mean) / (std + eps).",
                     "wrong_dim": "Each position is normalized over its own features, the last dimension "
                                  "(dim=-1); you normalized across the first dimension.",
                     "no_affine": "The learned scale and shift are missing: multiply by weight, then "
                                  "add bias.",
                 })),
        Question("q2", "block_forward", 3, _block, cases=_calls(_block_args, label=shapes),
                 mistakes=_variants(_block, {
                     "post_ln": "That is the post-LN block of the original Transformer, ln(x + f(x)). GPT-2 "
                                "is pre-LN: x = x + attn(ln_1(x)), then x = x + mlp(ln_2(x)).",
                     "normed_residual": "The residual stream must carry x itself: x + attn(ln_1(x)), not "
                                        "ln_1(x) + attn(ln_1(x)).",
                     "parallel": "Both branches read the same input: that is a 'parallel' block (GPT-J). In "
                                 "GPT-2 the MLP reads the stream after attention's output was added.",
                     "no_attn_residual": "The attention branch lost its residual connection: "
                                         "x = x + attn(ln_1(x)).",
                     "no_mlp_residual": "The MLP branch lost its residual connection: x = x + mlp(ln_2(x)).",
                 })),
        Question("q3", "tied_logits", 1, _tied_logits, cases=_calls(_logits_args, label=shapes), mistakes=[
            Mistake("no_ln_f", "The final layer norm is missing: logits = ln_f(x) @ wte.T.",
                    impl=lambda x, ln, w: _tied_logits(x, ln, w, "no_ln_f")),
            Mistake("no_transpose", "wte is [vocab_size, n_embd]: multiply by its transpose, wte.T, "
                    "to get one logit per vocabulary entry.",
                    error=r"shapes cannot be multiplied|size mismatch"),
        ]),
        _mc("hf_transposed", "q4", "b", {
            "a": "The embedding tables have the same layout in both libraries, [vocab or n_ctx, n_embd]. "
                 "What differs is how a linear layer stores its weight.",
            "c": "Embeddings and layer norms are stored alike. Only the Conv1D layers (Hugging Face's "
                 "[in, out]) differ from nn.Linear's [out, in].",
            "d": "Hugging Face's GPT-2 uses Conv1D layers that store weights as [in, out]; nn.Linear "
                 "stores [out, in]. Those four must be transposed.",
        }),
    ])


# ----------------------------------------------------------------------------------------------
# Chapter 9: sampling and the KV cache
# ----------------------------------------------------------------------------------------------


def _temperature_probs(logits: torch.Tensor, temperature: float, mode: str = "ok") -> torch.Tensor:
    if mode == "multiply":
        return F.softmax(logits * temperature, dim=-1)
    if mode == "softmax_dim":
        return F.softmax(logits / temperature, dim=0)
    if mode == "scaled_probs":
        p = F.softmax(logits, dim=-1) / temperature
        return p / p.sum(-1, keepdim=True)
    return F.softmax(logits / temperature, dim=-1)


def _top_k(logits: torch.Tensor, k: int, mode: str = "ok") -> torch.Tensor:
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    fill = 0.0 if mode == "zero" else float("-inf")
    keep = {"one_too_few": logits > kth}.get(mode, logits >= kth)
    if mode == "one_too_many":
        keep = logits >= torch.topk(logits, min(k + 1, logits.size(-1)), dim=-1).values[..., -1:]
    return logits.masked_fill(~keep, fill)


def _top_p(logits: torch.Tensor, p: float, mode: str = "ok") -> torch.Tensor:
    order = torch.sort(logits, dim=-1, descending=mode != "ascending")
    mass = order.values if mode == "logits" else F.softmax(order.values, dim=-1)
    cum = mass.cumsum(-1)
    drop_sorted = cum > p if mode == "one_too_few" else cum - mass >= p
    drop = torch.zeros_like(drop_sorted).scatter(-1, order.indices, drop_sorted)
    return logits.masked_fill(drop, 0.0 if mode == "zero" else float("-inf"))


def _logits_cases(*specs: tuple[tuple[int, ...], Any]) -> Callable[[], list[tuple[Any, ...]]]:
    return lambda: [(_randn(i, *shape) * 2, arg) for i, (shape, arg) in enumerate(specs)]


class _LayerCache:
    """Reference KV cache for one block: keys and values [B, H, T, D] grow along T (dim -2)."""

    def __init__(self, mode: str = "ok"):
        self.mode, self.k, self.v = mode, None, None

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.k is None:
            k_all, v_all = k, v
        elif self.mode == "new_first":
            k_all, v_all = torch.cat([k, self.k], dim=-2), torch.cat([v, self.v], dim=-2)
        else:
            dim = {"cat_dim0": 0, "cat_last": -1}.get(self.mode, -2)
            k_all, v_all = torch.cat([self.k, k], dim=dim), torch.cat([self.v, v], dim=dim)
        self.k, self.v = (k, v) if self.mode == "keeps_last" else (k_all, v_all)
        return (k, v) if self.mode == "no_past" else (k_all, v_all)


def _cache_cases() -> list[Case]:
    def run(cls: Any, B: int, H: int, steps: tuple[int, ...], D: int, seed: int) -> tuple[Any, ...]:
        cache, outs = cls(), []
        for i, t in enumerate(steps):
            k, v = _randn(seed + 2 * i, B, H, t, D), _randn(seed + 2 * i + 1, B, H, t, D)
            outs.append(tuple(cache.update(k, v)))
        return tuple(outs)

    specs = [(1, 2, (3, 1, 1), 4), (2, 3, (2, 2, 1, 1), 2), (1, 2, (2, 2, 2), 3)]
    return [Case(f"B={B}, H={H}, D={D}: updates with {list(steps)} new positions",
                 lambda cls, spec=(B, H, steps, D, 10 * n): run(cls, *spec))
            for n, (B, H, steps, D) in enumerate(specs)]


@_exercise
def _ex_09_sampling() -> Exercise:
    return Exercise("09_sampling", "Sampling", [
        Question("q1", "temperature_probs", 2, _temperature_probs,
                 cases=_calls(_logits_cases(((6,), 0.5), ((3, 6), 2.0), ((2, 7), 0.7)),
                              label=lambda x, t: f"logits {list(x.shape)}, temperature {t}"),
                 mistakes=_variants(_temperature_probs, {
                     "multiply": "You multiplied the logits by the temperature: divide them by it, so "
                                 "a temperature below 1 sharpens the distribution.",
                     "softmax_dim": "Softmax over the wrong dimension: each row of logits (the last "
                                    "dimension, the vocabulary) is its own distribution.",
                     "scaled_probs": "Dividing the probabilities by T and renormalizing changes nothing. "
                                     "Scale the logits: softmax(logits / T).",
                 })),
        Question("q2", "top_k_filter", 2, _top_k,
                 cases=_calls(_logits_cases(((10,), 3), ((3, 8), 2), ((2, 5), 1), ((2, 5), 5)),
                              label=lambda x, k: f"logits {list(x.shape)}, k {k}"),
                 mistakes=_variants(_top_k, {
                     "zero": "Filtered logits were set to 0, and exp(0) still gives them probability: "
                             "set them to -inf.",
                     "one_too_few": "You kept one token too few: keep logits >= the k-th largest value "
                                    "(the k-th itself stays).",
                     "one_too_many": "You kept one token too many: exactly k tokens survive.",
                 })),
        Question("q3", "top_p_filter", 3, _top_p,
                 cases=_calls(_logits_cases(((8,), 0.9), ((3, 10), 0.5), ((2, 6), 0.05), ((2, 6), 1.0)),
                              label=lambda x, p: f"logits {list(x.shape)}, p {p}"),
                 mistakes=_variants(_top_p, {
                     "one_too_few": "Top-p kept one token too few: you dropped the token whose probability "
                                    "carries the total past p. Keep a token while the mass *before* it is "
                                    "below p (shift the cumulative sum by one), so at least one token "
                                    "survives.",
                     "logits": "You accumulated logits, not probabilities: softmax the sorted logits "
                               "before the cumulative sum.",
                     "ascending": "The nucleus is the *most* probable tokens: sort in descending order.",
                     "zero": "Filtered logits were set to 0, and exp(0) still gives them probability: set "
                             "them to -inf.",
                 })),
        Question("q4", "LayerCache", 3, _LayerCache, cases=_cache_cases, mistakes=[
            Mistake(m, hint, impl=lambda m=m: _LayerCache(m)) for m, hint in {
                "cat_dim0": "torch.cat joins along dim 0 (the batch) unless told otherwise: keys and "
                            "values grow along time, dim=-2.",
                "cat_last": "You concatenated along the last dimension (the features): keys and values "
                            "grow along time, dim=-2.",
                "no_past": "update must return the past *and* the new keys and values, so that the new "
                           "query can attend to the whole history.",
                "new_first": "The new keys go after the past ones: torch.cat([past, new], dim=-2) keeps "
                             "positions in order.",
                "keeps_last": "The cache stored only the newest keys and values, so it forgets all but "
                              "the last step: store the concatenation.",
            }.items()
        ]),
        _value("next_position", "q5", 1, 7, {
            "one_based": (8, "Positions count from 0: with 7 positions cached (0 to 6), the new token "
                          "sits at position 7."),
            "restart": (0, "Without the cache's length the new token would get position 0, the "
                        "embedding of the first token. Positions continue from cache.length."),
        }, rtol=0),
    ])


# ----------------------------------------------------------------------------------------------
# Chapter 10: the parameter count
# ----------------------------------------------------------------------------------------------


def _count(config: Any, tied: bool = True, mode: str = "ok") -> int:
    V, N, C, L = config.vocab_size, config.n_ctx, config.n_embd, config.n_layer
    weights = 3 * C * C + C * C + 4 * C * C + 4 * C * C
    biases = 0 if mode == "no_biases" else 3 * C + C + 4 * C + C
    norms = 0 if mode == "no_layernorms" else 2 * 2 * C
    total = V * C + (0 if mode == "no_wpe" else N * C) + L * (weights + biases + norms)
    total += 0 if mode in ("no_ln_f", "no_layernorms") else 2 * C
    if (not tied and mode != "never_head") or mode == "tied_twice":
        total += V * C + (V if mode == "head_bias" else 0)
    return total


_SIZES = {"gpt2": (12, 12, 768, 1024), "gpt2-medium": (24, 16, 1024, 1024), "gpt2-xl": (48, 25, 1600, 1024),
          "pocket": (6, 6, 192, 256), "tiny": (3, 2, 48, 64)}


def _config(name: str, vocab_size: int = 50257) -> SimpleNamespace:
    L, H, C, N = _SIZES[name]
    return SimpleNamespace(vocab_size=vocab_size if name != "tiny" else 1000, n_ctx=N, n_embd=C,
                           n_layer=L, n_head=H, name=name)


@_exercise
def _ex_10_parameter_count() -> Exercise:
    C = 768
    gpt2 = _count(_config("gpt2"))
    specs = [("gpt2", True), ("gpt2", False), ("gpt2-medium", True), ("pocket", True), ("tiny", False),
             ("gpt2-xl", True)]
    return Exercise("10_parameter_count", "The parameter count", [
        _value("block_params", "q1", 1, 12 * C * C + 13 * C, {
            "no_biases": (12 * C * C, "Weights only: every linear layer has a bias and each of the "
                          "two layer norms a gain and a shift."),
            "no_layernorms": (12 * C * C + 9 * C, "You left out the two layer norms, 2 x (768 + 768) "
                              "parameters per block."),
        }, rtol=0),
        Question("q2", "count_params", 3, _count,
                 cases=_calls(lambda: [(_config(n), tied) for n, tied in specs],
                              label=lambda c, tied: f"{c.name}, tied={tied}"),
                 mistakes=_variants(_count, {
                     "tied_twice": TIED_TWICE,
                     "never_head": "With tied=False the head is its own vocab_size x n_embd matrix: "
                                   "count it.",
                     "head_bias": "GPT-2's output head has no bias: an untied head adds vocab_size x "
                                  "n_embd, nothing more.",
                     "no_biases": "The biases are missing: every linear layer (c_attn, attn.c_proj, c_fc, "
                                  "mlp.c_proj) has one.",
                     "no_layernorms": "The layer norms are missing: two per block and ln_f, each with "
                                      "2 x n_embd parameters.",
                     "no_ln_f": "The final layer norm ln_f (2 x n_embd) is missing.",
                     "no_wpe": "The position embedding wpe (n_ctx x n_embd) is missing.",
                 })),
        _value("gpt2_total", "q3", 1, gpt2, {
            "untied": (_count(_config("gpt2"), tied=False), TIED_TWICE),
            "paper": (117_000_000, "117M is the size the GPT-2 paper reported: a miscount. Add up the "
                      "released model's tensors: 124,439,808."),
        }, rtol=0),
        _value("wte_share", "q4", 1, 50257 * C / gpt2, {
            "untied": (50257 * C / _count(_config("gpt2"), tied=False), "The denominator counts the tied "
                       "head twice: divide by the real total, 124,439,808."),
            "percent": (100 * 50257 * C / gpt2, "Give a fraction between 0 and 1, not a percentage."),
            "with_wpe": ((50257 + 1024) * C / gpt2, "That includes wpe: the question asks for the "
                         "token embedding wte alone."),
        }),
    ])


# ----------------------------------------------------------------------------------------------
# Appendix A1: pretraining
# ----------------------------------------------------------------------------------------------


def _lr(step: int, warmup: int, max_steps: int, max_lr: float, min_lr: float, mode: str = "ok") -> float:
    if step < warmup:
        return max_lr * (step if mode == "warmup_from_zero" else step + 1) / warmup
    progress = step / max_steps if mode == "progress_all" else (step - warmup) / max(1, max_steps - warmup)
    if mode == "linear":
        return min_lr + (max_lr - min_lr) * (1 - progress)
    if mode == "to_zero":
        return 0.5 * max_lr * (1 + math.cos(math.pi * progress))
    half = 1.0 if mode == "no_half" else 0.5
    return min_lr + half * (max_lr - min_lr) * (1 + math.cos(math.pi * progress))


def _lr_cases() -> list[Case]:
    configs = [(10, 100, 1e-3, 1e-4), (4, 20, 6e-4, 6e-5), (1, 8, 2e-3, 0.0)]
    return [Case(f"warmup={w}, max_steps={m}, max_lr={hi}, min_lr={lo}: steps 0..{m - 1}",
                 lambda f, c=(w, m, hi, lo): tuple(float(f(s, *c)) for s in range(c[1])))
            for w, m, hi, lo in configs]


def _windows(data: torch.Tensor, batch_size: int, n_ctx: int, generator: torch.Generator,
             mode: str = "ok") -> tuple[torch.Tensor, torch.Tensor]:
    high = len(data) - n_ctx + (1 if mode == "overflow" else 0)
    if mode == "global_rng":
        starts = torch.randint(high, (batch_size,))
    elif mode == "same_start":
        starts = torch.randint(high, (1,), generator=generator).expand(batch_size)
    else:
        starts = torch.randint(high, (batch_size,), generator=generator)
    rows = torch.stack([data[s : s + n_ctx + 1] for s in starts.tolist()])
    return rows[:, :-1], (rows[:, :-1] if mode == "no_shift" else rows[:, 1:])


def _window_cases() -> list[Case]:
    data, B, n = torch.arange(50), 16, 8

    def draw(f: Any, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = f(data.clone(), B, n, _gen(seed))
        return torch.as_tensor(x), torch.as_tensor(y)

    def inside(f: Any) -> bool:
        for seed in range(40):
            x, y = draw(f, seed)
            if x.min() < 0 or y.max() >= len(data) or x.shape != (B, n) or y.shape != (B, n):
                return False
        return True

    def shapes(f: Any) -> tuple[Any, ...]:
        return tuple(tuple(t.shape) for t in draw(f, 0))

    def offsets(f: Any) -> tuple[int, ...]:
        x, y = draw(f, 1)
        return tuple(sorted(set((y - x).flatten().tolist())))

    def contiguous(f: Any) -> bool:
        return bool((draw(f, 2)[0].diff(dim=1) == 1).all())

    def varied(f: Any) -> bool:
        return len(set(draw(f, 3)[0][:, 0].tolist())) > 1

    def reproducible(f: Any) -> bool:
        return all(torch.equal(a, b) for a, b in zip(draw(f, 4), draw(f, 4), strict=True))

    return [
        Case("shapes of x and y for batch_size 16, n_ctx 8", shapes),
        Case("y - x (y must be x shifted by one position)", offsets),
        Case("each row of x is a contiguous window of the data", contiguous),
        Case("every window lies inside the data (40 batches)", inside),
        Case("the rows of a batch start at different places", varied),
        Case("the same generator seed gives the same batch", reproducible),
    ]


def _clip(grads: list[torch.Tensor], max_norm: float, mode: str = "ok") -> list[torch.Tensor]:
    if mode == "per_tensor":
        return [g * min(1.0, max_norm / float(g.norm())) for g in grads]
    norm = sum(float(g.abs().sum()) for g in grads) if mode == "l1" else math.sqrt(
        sum(float((g**2).sum()) for g in grads))
    scale = max_norm / norm if mode == "always" else min(1.0, max_norm / norm)
    return [g * scale for g in grads]


def _clip_cases() -> list[Case]:
    specs = [([(3, 4), (5,), (2, 2)], 1.0, 1), ([(3, 4), (5,)], 100.0, 2), ([(6,)], 0.5, 3),
             ([(2, 3), (4,)], 2.0, 4)]

    def run(f: Any, shapes: list[tuple[int, ...]], max_norm: float, seed: int) -> tuple[Any, ...]:
        grads = [_randn(seed * 10 + i, *s) for i, s in enumerate(shapes)]
        return tuple(f(grads, max_norm))

    return [Case(f"{len(s)} gradients {s}, max_norm {m}", lambda f, s=s, m=m, seed=seed: run(f, s, m, seed))
            for s, m, seed in specs]


def _decay_names(model: nn.Module, mode: str = "ok") -> list[str]:
    params = list(model.named_parameters())
    if mode == "all":
        return sorted(n for n, _ in params)
    if mode == "by_name":
        return sorted(n for n, _ in params if n.endswith("weight"))
    keep = (lambda p: p.dim() < 2) if mode == "inverted" else (lambda p: p.dim() >= 2)
    return sorted(n for n, p in params if keep(p))


def _decay_cases() -> list[Case]:
    def model() -> nn.Module:
        from gpt2_course.config import GPT2Config
        from gpt2_course.model import GPT2

        torch.manual_seed(0)
        return GPT2(GPT2Config(vocab_size=32, n_ctx=8, n_embd=8, n_layer=2, n_head=2))

    return [Case("a 2-layer GPT2", lambda f: tuple(sorted(f(model()))))]


def _rename(text: str, mapping: dict[str, str], mode: str = "ok") -> str:
    table = dict(mapping) if mode == "upper_only" else {
        **mapping, **{old.title(): new.title() for old, new in mapping.items()}}
    if mode == "chained":
        for old, new in table.items():
            text = re.sub(rf"\b{re.escape(old)}\b", new, text)
        return text
    bound = "" if mode == "substring" else r"\b"
    pattern = bound + "(" + "|".join(map(re.escape, table)) + ")" + bound
    return re.sub(pattern, lambda m: table[m.group(1)], text)


def _rename_cases() -> list[Case]:
    scene = ("ROMEO:\nJuliet, my love! Adriana, fetch the Nurse.\n\nJULIET:\nRomeo, Romeo!\n\n"
             "ADRIANA:\nAy.\n\n[Exit ROMEO and JULIET]\n")
    swap = {"ROMEO": "JULIET", "JULIET": "ROMEO", "ADRIAN": "BRUTUS"}
    fresh = {"ROMEO": "ANTONY", "JULIET": "CLEOPATRA", "ADRIAN": "ROMEO"}
    return [Case(f"the scene with {m}", lambda f, m=m: f(scene, dict(m))) for m in (swap, fresh)]


@_exercise
def _ex_A1_pretraining() -> Exercise:
    return Exercise("A1_pretraining", "Pretraining", [
        Question("q1", "lr_at", 3, _lr, cases=_lr_cases, rtol=1e-6, atol=1e-12,
                 mistakes=_variants(_lr, {
                     "warmup_from_zero": "The warm-up starts at 0, so step 0 trains with learning rate 0: "
                                         "ramp as max_lr * (step + 1) / warmup.",
                     "to_zero": "The cosine must end at min_lr, not 0: min_lr + 0.5 (max_lr - min_lr) "
                                "(1 + cos(pi * progress)).",
                     "progress_all": "The cosine's progress counts the steps after the warm-up: "
                                     "(step - warmup) / (max_steps - warmup).",
                     "no_half": "(1 + cos) runs from 2 to 0: multiply by 0.5, or the rate starts at twice "
                                "max_lr.",
                     "linear": "That decays linearly: the schedule follows half a cosine.",
                 })),
        Question("q2", "random_windows", 3, _windows, cases=_window_cases, mistakes=[
            *_variants(_windows, {
                "no_shift": "y must be x shifted by one position (the next token of every position): "
                            "take a window of n_ctx + 1 tokens, x = row[:-1], y = row[1:].",
                "same_start": "Every row of the batch starts at the same place: draw batch_size start "
                              "positions, one per row.",
                "global_rng": "Same seed, different batch: pass generator=generator to torch.randint, so "
                              "that a run can be reproduced.",
            }),
            Mistake("overflow", "A window ran past the end of the data: a start must leave room for "
                    "n_ctx + 1 tokens, so draw starts below len(data) - n_ctx.",
                    error=r"stack expects each tensor to be equal size|out of bounds|out of range"),
        ]),
        Question("q3", "clip_grad_norm", 2, _clip, cases=_clip_cases, mistakes=_variants(_clip, {
            "per_tensor": "You clipped each gradient separately. The norm is global: the square root "
                          "of the sum of squares over *all* gradients, one scale for all.",
            "always": "Small gradients were scaled up: only scale when the total norm exceeds max_norm.",
            "l1": "That is the L1 norm (sum of absolute values): use the L2 norm, sqrt(sum of squares).",
        })),
        Question("q4", "decay_param_names", 2, _decay_names, cases=_decay_cases, mistakes=_variants(
            _decay_names, {
                "all": "Weight decay on everything also shrinks biases and layer-norm gains towards 0: "
                       "decay only the matrices (tensors with 2 or more dimensions).",
                "inverted": "Inverted: decay the matrices (dim >= 2), not the biases and gains.",
                "by_name": "Names ending in 'weight' include the layer norms' gains (1-D): decide by the "
                           "tensor's dimension, p.dim() >= 2.",
            })),
        Question("q5", "rename", 2, _rename, cases=_rename_cases, mistakes=_variants(_rename, {
            "chained": "Names were renamed one after another, so a name produced by one replacement was "
                       "replaced again by a later one (swap ROMEO and JULIET and both end up the same). "
                       "Replace all names in one pass: one regular expression, and a function that looks "
                       "each match up in the mapping.",
            "substring": "A name inside a longer word was replaced too (ADRIAN inside ADRIANA): match whole "
                         "words only, with \\b on both sides of the pattern.",
            "upper_only": "The dialogue still says the old names: speakers are in capitals (ROMEO) but "
                          "mentions are in title case (Romeo). Rename old.title() to new.title() as well.",
        })),
    ])


# ----------------------------------------------------------------------------------------------
# Instructor grading: run each notebook in a fresh kernel, then probe its answers
# ----------------------------------------------------------------------------------------------

_OUTPUT_LIMIT = 100_000  # characters of output kept per cell; the rest is dropped


@dataclass
class Report:
    path: str
    exercise: str | None = None
    results: list[Result] = field(default_factory=list)
    problem: str | None = None  # why the submission could not be graded
    notes: list[str] = field(default_factory=list)

    @property
    def points(self) -> int:
        return sum(r.points for r in self.results)

    @property
    def max_points(self) -> int:
        return get_exercise(self.exercise).max_points if self.exercise else 0


def identify(nb: Any, path: Path) -> str | None:
    """Which exercise a notebook answers: its metadata, else its file name, else its checker call."""
    meta = nb.get("metadata", {}).get("gpt2_course", {})
    if isinstance(meta, dict) and meta.get("exercise") in _EXERCISES:
        return meta["exercise"]
    for ex in exercise_ids():
        if path.name.startswith(ex):
            return ex
    for cell in nb.get("cells", []):
        if m := re.search(r"checker\(\s*['\"]([\w-]+)['\"]\s*\)", str(cell.get("source", ""))):
            if m.group(1) in _EXERCISES:
                return m.group(1)
    return None


class _Kernel:
    """A fresh Jupyter kernel that runs one cell at a time with a time limit."""

    def __init__(self, workdir: Path):
        import nbformat
        from nbclient import NotebookClient

        class Client(NotebookClient):
            def output(self, outs: list, msg: dict, display_id: str | None, cell_index: int) -> Any:
                if sum(len(str(o)) for o in outs) > _OUTPUT_LIMIT:
                    return None  # a cell printing megabytes must not fill the grader's memory
                return super().output(outs, msg, display_id, cell_index)

        env = dict(os.environ, **{GRADING_ENV: "1", "PYTHONHASHSEED": "0"})
        env.setdefault("OMP_NUM_THREADS", "1")
        self.nb = nbformat.v4.new_notebook()
        self.reply: dict[str, Any] = {}
        self.client = Client(
            self.nb, kernel_name="python3", allow_errors=True, shutdown_kernel="immediate",
            resources={"metadata": {"path": str(workdir)}}, startup_timeout=120,
            # At the time limit nbclient interrupts the kernel (KeyboardInterrupt in the cell)
            # and reports this error instead of waiting on.
            interrupt_on_timeout=True,
            error_on_timeout={"ename": "CellTimeout", "evalue": "", "traceback": []},
            on_cell_executed=self._executed,
        )
        self.client.km = self.client.create_kernel_manager()
        self.client.start_new_kernel(env=env, stderr=subprocess.DEVNULL)  # its own TCP warnings
        self.client.start_new_kernel_client()
        # The imports every exercise needs, before any time limit starts counting.
        self.run("import gpt2_course.grading", 300)

    def _executed(self, execute_reply: dict[str, Any] | None = None, **_: Any) -> None:
        self.reply = execute_reply or {}

    def run(self, source: str, timeout: float) -> tuple[str, str]:
        """(status, error): status is ok, error, timeout (the kernel was interrupted and answers
        again) or dead (it died, or goes on ignoring interrupts)."""
        import nbformat
        from nbclient.exceptions import DeadKernelError

        cell = nbformat.v4.new_code_cell(source)
        self.nb.cells.append(cell)
        self.client.timeout = max(1, math.ceil(timeout))
        self.reply = {}
        try:
            self.client.execute_cell(cell, len(self.nb.cells) - 1)
        except DeadKernelError:
            return "dead", "the kernel died"
        finally:
            cell.outputs = [o for o in cell.outputs if o.get("output_type") == "error"]
        if self.reply.get("content", {}).get("ename") == "CellTimeout":
            return ("timeout" if source == "pass" or self.run("pass", 5)[0] == "ok" else "dead"), ""
        if cell.outputs:
            return "error", f"{cell.outputs[0].get('ename')}: {str(cell.outputs[0].get('evalue'))[:200]}"
        return "ok", ""

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client._cleanup_kernel()


def _probe_source(exercise_id: str, qid: str, out: Path, timeout: float) -> str:
    return (
        "import importlib as _gl, gpt2_course.grading as _gg\n"
        f"_gl.reload(_gg)._probe_to_file({exercise_id!r}, {qid!r}, globals(), {str(out)!r}, {timeout!r})\n"
        "del _gl, _gg"
    )


def _probe_to_file(exercise_id: str, qid: str, namespace: dict[str, Any], out: str, timeout: float) -> None:
    """Kernel side of grading: probe the notebook's answer and save the plain outputs."""
    q = get_exercise(exercise_id).question(qid)
    answer = namespace.get(q.name, _MISSING)
    status, outs = "ok", None
    if answer is _MISSING:
        status = "missing"
    elif (where := _borrowed(answer)) is not None:
        status = f"borrowed:{where}"
    else:
        try:
            with time_limit(timeout):
                outs = probe(q, answer)
        except QuestionTimeout:
            status = "timeout"
    torch.save({"status": status, "outs": outs}, out)


def _read_probe(path: Path) -> tuple[str, list[Any] | None]:
    data = torch.load(path, weights_only=True)
    return str(data["status"]), data["outs"]


def grade_notebook(path: str | Path, timeout: float = 60.0,
                   question_timeout: float = QUESTION_TIMEOUT) -> Report:
    """Grade one submission. Never raises for a bad submission: the report says what went wrong."""
    import nbformat

    path = Path(path)
    report = Report(str(path))
    if not path.is_file():
        report.problem = "no such file" if not path.exists() else "not a file"
        return report
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:
        first = str(exc).splitlines()[0][:100] if str(exc) else ""
        report.problem = f"not a notebook ({type(exc).__name__}: {first})"
        return report
    report.exercise = identify(nb, path)
    if report.exercise is None:
        report.problem = ("unrelated notebook: it answers none of the exercises (no gpt2_course metadata, "
                          "no exercise name in the file name, no checker(...) call)")
        return report
    exercise = get_exercise(report.exercise)
    sources = [c.source for c in nb.cells if c.cell_type == "code"]
    results: dict[str, Result] = {}
    skip: set[int] = set()  # cells that ran out of time or killed the kernel: left out of a rerun
    with tempfile.TemporaryDirectory(prefix="gpt2-grade-") as tmp:
        for _attempt in range(3):
            kernel = _Kernel(Path(tmp))
            try:
                if _run_cells(kernel, sources, skip, timeout, question_timeout, report.notes):
                    continue  # the kernel died: start again without the cell that killed it
                for q in exercise.questions:
                    if q.id in results:
                        continue
                    out = Path(tmp) / f"{q.id}.pt"
                    status, err = kernel.run(_probe_source(exercise.id, q.id, out, question_timeout),
                                             question_timeout + 10)
                    if out.exists():
                        probed, outs = _read_probe(out)
                        results[q.id] = judge(exercise.id, q.id, outs, probed)
                    elif status in ("timeout", "dead"):
                        results[q.id] = judge(exercise.id, q.id, None, "timeout")
                    else:
                        results[q.id] = Result(q.id, q.name, 0, q.points, "error",
                                               f"the grader could not test the answer ({err})")
                    if status == "dead":
                        break
                if len(results) == len(exercise.questions):
                    break
            finally:
                kernel.close()
    report.results = [results.get(q.id) or judge(exercise.id, q.id, None, "timeout")
                      for q in exercise.questions]
    return report


def _run_cells(kernel: _Kernel, sources: list[str], skip: set[int], timeout: float, grace: float,
               notes: list[str]) -> bool:
    """Run the notebook's code cells; True when the kernel died and must be restarted."""
    deadline = time.monotonic() + timeout
    for i, src in enumerate(sources):
        if i in skip:
            continue
        # Once the notebook's time is spent, each later cell still gets a short grace, so one
        # runaway cell does not cost the answers defined after it.
        status, err = kernel.run(src, max(deadline - time.monotonic(), grace))
        if status == "error":
            note = f"code cell {i + 1} raised {err}"
        elif status == "timeout":
            note = f"code cell {i + 1} was interrupted at the time limit"
            skip.add(i)
        elif status == "dead":
            skip.add(i)
            notes.append(f"code cell {i + 1} {'killed' if err else 'hung'} the kernel; "
                         "graded again without it")
            return True
        else:
            continue
        if note not in notes:
            notes.append(note)
    return False


def grade_notebooks(paths: list[str], timeout: float = 60.0, question_timeout: float = QUESTION_TIMEOUT,
                    jobs: int = 1) -> list[Report]:
    """Grade many submissions; a directory stands for the notebooks in it."""
    files: list[str] = []
    for p in paths:
        files.extend(sorted(str(f) for f in Path(p).glob("*.ipynb")) if Path(p).is_dir() else [p])
    grade = lambda f: grade_notebook(f, timeout, question_timeout)  # noqa: E731
    if jobs <= 1:
        return [grade(f) for f in files]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(grade, files))


def format_reports(reports: list[Report]) -> str:
    """A table: one line per notebook, then one indented line per question that lost points."""
    width = max([len(r.path) for r in reports] + [8])
    lines = [f"{'notebook':{width}}  {'exercise':24} {'points':>9}  per question"]
    for r in reports:
        if r.problem:
            lines.append(f"{r.path:{width}}  {'-':24} {'-':>9}  {r.problem}")
            continue
        per = " ".join(f"{x.question}:{x.points}/{x.max_points}" for x in r.results)
        lines.append(f"{r.path:{width}}  {r.exercise:24} {f'{r.points}/{r.max_points}':>9}  {per}")
        for x in r.results:
            if x.status != "pass":
                lines.append(f"{'':{width}}    {x.question} {x.name} [{x.status}] {x.message}")
        for note in r.notes:
            lines.append(f"{'':{width}}    note: {note}")
    return "\n".join(lines)


def write_csv(reports: list[Report], path: str) -> None:
    """One row per question, plus a `total` row per notebook (and one row for an ungradable file)."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv_module.writer(fh)
        w.writerow(["notebook", "exercise", "question", "name", "points", "max_points", "status", "detail"])
        for r in reports:
            if r.problem:
                w.writerow([r.path, "", "total", "", 0, 0, "ungradable", r.problem])
                continue
            for x in r.results:
                w.writerow([r.path, r.exercise, x.question, x.name, x.points, x.max_points, x.status,
                            x.hint or x.message])
            w.writerow([r.path, r.exercise, "total", "", r.points, r.max_points, "", "; ".join(r.notes)])


def grade_main(paths: list[str], csv: str | None = None, timeout: float = 60.0,
               question_timeout: float = QUESTION_TIMEOUT) -> int:
    """`gpt2-course grade`: print the table, write the CSV if asked. `timeout` limits the time a
    notebook's own cells may run in total, `question_timeout` each question's tests. Exit code 0
    when every submission could be graded, 1 when one could not (not a notebook, unrelated,
    missing)."""
    reports = grade_notebooks(paths, timeout=timeout, question_timeout=question_timeout)
    print(format_reports(reports))
    if csv:
        write_csv(reports, csv)
        print(f"wrote {csv}")
    return 1 if any(r.problem for r in reports) or not reports else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gpt2_course.grading",
                                description="Grade exercise notebooks (same as `gpt2-course grade`).")
    p.add_argument("paths", nargs="+", help="submitted notebooks, or folders of them")
    p.add_argument("--csv", help="also write the grades to this CSV file")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds each notebook's own cells may run, in total (default 60)")
    p.add_argument("--question-timeout", type=float, default=QUESTION_TIMEOUT,
                   help=f"seconds each question's tests may run (default {QUESTION_TIMEOUT:g})")
    args = p.parse_args(argv)
    return grade_main(args.paths, csv=args.csv, timeout=args.timeout, question_timeout=args.question_timeout)


if __name__ == "__main__":
    sys.exit(main())
