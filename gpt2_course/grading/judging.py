"""Judging: compare an answer's outputs with the reference's and with each planted mistake's, and
say in words what differs. Runs where the reference outputs were computed: the grader process."""
from __future__ import annotations

import math
import re
from functools import cache
from typing import Any

import torch

from gpt2_course.grading.probing import (
    QUESTION_TIMEOUT, QuestionTimeout, borrowed, is_raised, own, probe, time_limit, watch_calls)
from gpt2_course.grading.questions import Question, Result, get_exercise


@cache
def expected(exercise_id: str, qid: str) -> tuple[list[Any], dict[str, list[Any]]]:
    """Reference outputs and each planted mistake's outputs (computed once per process)."""
    q = get_exercise(exercise_id).question(qid)
    ref = probe(q, q.reference)
    return ref, {m.name: probe(q, m.impl) for m in q.mistakes if m.error is None}


@cache
def expected_also(exercise_id: str, qid: str, name: str) -> list[list[Any]]:
    q = get_exercise(exercise_id).question(qid)
    return [probe(q, impl) for m in q.mistakes if m.name == name for impl in m.also]


def _kind(t: torch.Tensor) -> str:
    return "bool" if t.dtype == torch.bool else "float" if t.is_floating_point() else "integer"


def _same_error(a: Any, b: Any) -> bool:
    """Two recorded errors match when type and message do (digits aside: sizes differ)."""
    return is_raised(a) and is_raised(b) and a[1] == b[1] and re.sub(r"\d+", "#", a[2]) == re.sub(
        r"\d+", "#", b[2])


def _bools(expected: torch.Tensor, got: torch.Tensor, q: Question) -> str | None:
    e, g = expected.to(torch.int64), got.to(torch.int64)
    if torch.equal(e, g):
        return None
    where = tuple((e != g).nonzero()[0].tolist())
    want = bool(expected[where])
    if q.explain is not None:
        return f"differs at index {list(where)}: {q.explain(where, want, tuple(expected.shape))}"
    return f"differs at index {list(where)}: expected {want}"


def _miss(expected: Any, got: Any, q: Question) -> str:
    """How a value answer misses, without giving the expected value away: a graded question would
    otherwise be passed by copying the number from the first miss."""
    if is_raised(got):
        return f"raised {got[1]}: {got[2]}"
    try:
        e, g = float(expected), float(got)
    except (TypeError, ValueError):
        return f"got {got!r}, which is not the expected value"
    if g != g:
        return f"got {got!r}"
    need = "exact" if q.rtol == 0 else f"within a relative {q.rtol:g} of the exact value"
    return f"got {got!r}, which is too {'high' if g > e else 'low'} (the answer must be {need})"


def difference(expected: Any, got: Any, q: Question) -> str | None:
    """None when `got` counts as equal to `expected`, else what differs, in words."""
    if is_raised(got):
        if _same_error(expected, got):
            return None
        return f"raised {got[1]}: {got[2]}"
    if is_raised(expected):
        return f"should raise {expected[1]}, but returned a value"
    if isinstance(expected, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"expected a tensor of shape {list(expected.shape)}, got {_describe(got)}"
        if tuple(got.shape) != tuple(expected.shape):
            return f"expected shape {list(expected.shape)}, got shape {list(got.shape)}"
        if q.strict_dtype and _kind(got) != _kind(expected):
            return f"expected a {_kind(expected)} tensor, got a {_kind(got)} tensor ({got.dtype})"
        if expected.dtype == torch.bool or got.dtype == torch.bool:
            return _bools(expected, got, q)
        if _kind(expected) == _kind(got) == "integer" and q.kind == "code":
            if torch.equal(expected.to(torch.int64), got.to(torch.int64)):
                return None
            at = tuple((expected.to(torch.int64) != got.to(torch.int64)).nonzero()[0].tolist())
            return f"differs at index {list(at)}: expected {int(expected[at])}, got {int(got[at])}"
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
        if isinstance(expected, int) and isinstance(got, int):  # exact arithmetic (ints beyond 2**53)
            gap, size = abs(got - expected), max(abs(got), abs(expected))
            close = gap == 0 or q.kind == "value" and (gap <= q.atol or gap <= q.rtol * size)
            return None if close else f"expected {expected:,}, got {got:,}"
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


def same(a: list[Any], b: list[Any], q: Question) -> bool:
    return len(a) == len(b) and all(difference(x, y, q) is None for x, y in zip(a, b, strict=True))


def judge(exercise_id: str, qid: str, outs: list[Any] | None, status: str = "ok") -> Result:
    """Score a question from the outputs its probe recorded (`status`: ok, missing, timeout,
    borrowed:<where>, syntax:<the error>, error:<why the answer could not be tested>, died:<how>)."""
    q = get_exercise(exercise_id).question(qid)

    def result(points: int, st: str, message: str, hint: str | None = None) -> Result:
        return Result(q.id, q.name, points, q.points, st, message, hint)

    kind, _, detail = status.partition(":")
    if kind == "missing":
        return result(0, "missing", f"`{q.name}` is not defined: run the cell that defines it first.")
    if kind == "syntax":
        return result(0, "error", f"The cell that defines `{q.name}` has a syntax error ({detail}): "
                      "fix it, run the cell, then check again.")
    if kind == "timeout":
        return result(0, "timeout", f"The tests took longer than the time limit: is there an infinite "
                      f"loop in `{q.name}`? (Interrupt the kernel, fix it, run the cell again.)")
    if kind == "borrowed":
        return result(0, "borrowed", f"`{q.name}` is the course's own implementation "
                      f"({detail}). Write your own version: that is the exercise.")
    if kind == "error":
        return result(0, "error", f"the grader could not test the answer ({detail})")
    if kind == "died":
        return result(0, "error", f"The tests stopped the notebook's process ({detail}): `{q.name}` crashed "
                      "or ended it (os._exit, a segfault, too much memory?).")
    assert outs is not None
    if (stub := next((o for o in outs if is_raised(o, "Unavailable")), None)) is not None:
        return result(0, "borrowed", f"`{q.name}` is the course's own implementation (it calls {stub[2]}). "
                      "Write your own version: that is the exercise.")
    if outs == [("__ellipsis__",)] or (outs and all(is_raised(o, "NotImplementedError") for o in outs)):
        what = "replace `...` with your answer" if q.kind == "value" else (
            "replace `raise NotImplementedError` with your code")
        return result(0, "blank", f"Not answered yet: {what}, run the cell, then check again.")
    ref, planted = expected(exercise_id, qid)
    if same(ref, outs, q):
        n = len(outs)
        passed = f"All {n} test cases pass." if n > 1 else "The test case passes."
        return result(q.points, "pass", "Correct." if q.kind == "value" else passed)
    for m in q.mistakes:
        if m.error is not None:
            if any(is_raised(o) and re.search(m.error, o[2]) for o in outs):
                return result(0, "fail", f"Hint: {m.hint}", m.name)
        elif same(planted[m.name], outs, q) or any(
                same(other, outs, q) for other in expected_also(exercise_id, qid, m.name)):
            return result(0, "fail", f"Hint: {m.hint}", m.name)
    if q.kind == "value":
        return result(0, "fail", f"Not quite: {_miss(ref[0], outs[0], q)}.")
    cases = q.cases() if q.cases else []
    for i, (e, g) in enumerate(zip(ref, outs, strict=True)):
        if (d := difference(e, g, q)) is not None:
            label = cases[i].label if i < len(cases) else f"case {i + 1}"
            st = "error" if is_raised(g) else "fail"
            return result(0, st, f"Test case {i + 1} of {len(outs)} ({label}): {d}.")
    return result(0, "fail", "The outputs differ from the expected ones.")


def run_probe(q: Question, answer: Any, timeout: float | None,
              allow_course_code: bool = False) -> tuple[str, list[Any] | None]:
    """(status, outputs) for one answer: borrowed, timeout, or ok with the outputs."""
    if not allow_course_code and (where := borrowed(answer, own(q))) is not None:
        return f"borrowed:{where}", None
    try:
        with time_limit(timeout), watch_calls(() if allow_course_code else own(q)) as seen:
            outs = probe(q, answer)
    except QuestionTimeout:
        return "timeout", None
    return (f"borrowed:{seen[0]}", None) if seen else ("ok", outs)


def check_answer(exercise_id: str, qid: str, answer: Any, timeout: float | None = QUESTION_TIMEOUT,
                 allow_course_code: bool = False) -> Result:
    """Run one question's tests on `answer` in this process and score it. An answer that is the
    course package's own function scores 0 unless `allow_course_code` (for testing the grader)."""
    q = get_exercise(exercise_id).question(qid)
    expected(exercise_id, qid)  # the reference outputs do not count against the time limit
    status, outs = run_probe(q, answer, timeout, allow_course_code)
    return judge(exercise_id, qid, outs, status)
