"""Probing: run an answer on a question's test cases and keep its outputs as plain data; and, for
`check` in a learner's own notebook, decide whether an answer is the package's own implementation.

The same `run_cases` runs in the learner's notebook (on `q.cases()`) and in a submission's process
while it is graded (on the cases the grader sent, plans.py). While grading, a borrowed answer needs
no detection: the course's answers are not there to borrow (source.py).
"""
from __future__ import annotations

import contextlib
import functools
import signal
import sys
import threading
from collections.abc import Iterator
from types import CodeType, FunctionType, ModuleType
from typing import Any

import torch

from gpt2_course.grading.questions import Question

QUESTION_TIMEOUT = 10.0  # seconds one question's tests may take
MAX_NUMEL = 2_000_000  # outputs bigger than this are summarised, not stored
PACKAGE = "gpt2_course"


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


def plain(obj: Any, depth: int = 0) -> Any:
    """Outputs as plain data: tensors, and numbers, strings, tuples and dicts of the exact
    built-in types (a subclass's value is copied into its base type)."""
    if depth > 6:
        return ("__object__", type(obj).__name__)
    import numpy as np

    if isinstance(obj, np.ndarray):
        obj = torch.from_numpy(np.array(obj))
    elif isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, torch.Tensor):
        if obj.dim() == 0:
            return plain(obj.item())
        if obj.numel() > MAX_NUMEL:
            return ("__too_big__", tuple(obj.shape))
        return obj.detach().cpu().as_subclass(torch.Tensor).clone()
    if obj is None:
        return None
    if isinstance(obj, bool):
        return obj is True
    if isinstance(obj, int):
        return int.__add__(obj, 0)
    if isinstance(obj, float):
        return float.__add__(obj, 0.0)
    if isinstance(obj, str):
        return str.__getitem__(obj, slice(None))
    if isinstance(obj, torch.Size):
        return tuple(int(d) for d in obj)
    if isinstance(obj, list | tuple):
        return tuple(plain(x, depth + 1) for x in obj)
    if isinstance(obj, set | frozenset):
        items = [plain(x, depth + 1) for x in obj]
        try:
            return tuple(sorted(items))
        except TypeError:
            return tuple(items)
    if isinstance(obj, dict):
        return {plain(k, depth + 1): plain(v, depth + 1) for k, v in obj.items()}
    if obj is Ellipsis:
        return ("__ellipsis__",)
    return ("__object__", type(obj).__name__)


def raised(exc: BaseException) -> tuple[str, str, str]:
    return ("__raised__", type(exc).__name__, str(exc)[:500])


def is_raised(out: Any, kind: str | None = None) -> bool:
    return isinstance(out, tuple) and len(out) == 3 and out[0] == "__raised__" and (
        kind is None or out[1] == kind
    )


def run_cases(runs: list[Any] | None, answer: Any) -> list[Any]:
    """The answer's outputs on every case (each a function of the answer; None: a value question,
    its output is the answer itself); a case that raises records the error."""
    if runs is None:
        return [plain(answer)]
    outs = []
    with torch.random.fork_rng(devices=[]):  # checking must not move the notebook's random state
        for run in runs:
            try:
                outs.append(plain(run(answer)))
            except Exception as exc:  # the learner's code may raise anything
                outs.append(raised(exc))
    return outs


def probe(q: Question, answer: Any) -> list[Any]:
    """The answer's outputs on every test case of `q`."""
    return run_cases(None if q.cases is None else [c.run for c in q.cases()], answer)


# ----------------------------------------------------------------------------------------------
# Borrowed answers: the package's own implementation, directly or wrapped
# ----------------------------------------------------------------------------------------------


def _name(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', type(obj).__name__)}"


def _ours(obj: Any) -> bool:
    module = getattr(obj, "__module__", None)
    return callable(obj) and isinstance(module, str) and module.split(".")[0] == PACKAGE


def own(q: Question) -> tuple[Any, ...]:
    """What an answer to `q` must not use: the package's implementation and the bank's reference."""
    return (*q.course, *((q.reference,) if callable(q.reference) else ()))


def _codes(course: tuple[Any, ...]) -> set[tuple[str, str]]:
    """Where the course's implementation lives (a class: its methods), by file and name, so that
    a reloaded copy of the module is recognised too."""
    out = set()
    for obj in course:
        items = vars(obj).values() if isinstance(obj, type) else [obj]
        out |= {(f.__code__.co_filename, f.__code__.co_qualname)
                for f in items if isinstance(f, FunctionType)}
    return out


def _referenced(fn: FunctionType) -> Iterator[Any]:
    """Objects a function's code can reach by name: globals, closure cells, module attributes."""
    codes, names = [fn.__code__], set()
    while codes:
        code = codes.pop()
        names |= set(code.co_names)
        codes += [c for c in code.co_consts if isinstance(c, CodeType)]
    for cell in fn.__closure__ or ():
        with contextlib.suppress(ValueError):
            yield cell.cell_contents
    modules = [fn.__globals__[n] for n in names if isinstance(fn.__globals__.get(n), ModuleType)]
    yield from (fn.__globals__[n] for n in names if n in fn.__globals__)
    for _ in range(3):  # gpt2_course.generate.top_k_filter: follow attribute chains
        attrs = [getattr(m, n) for m in modules for n in names if n in vars(m)]
        yield from attrs
        modules = [a for a in attrs if isinstance(a, ModuleType)]


def borrowed(answer: Any, course: tuple[Any, ...] = (), depth: int = 0) -> str | None:
    """Where the answer comes from when it is, or wraps, the course package's own code: a
    package function itself, a functools.partial of one, a subclass of a package class, or a
    function (a lambda too) that calls the question's package implementation."""
    if depth > 4:
        return None
    if _ours(answer):
        return _name(answer)
    if isinstance(answer, functools.partial):
        return borrowed(answer.func, course, depth + 1)
    if isinstance(answer, type):
        base = next((b for b in answer.__mro__[1:] if _ours(b)), None)
        return f"a subclass of {_name(base)}" if base is not None else None
    if isinstance(answer, FunctionType):
        for obj in _referenced(answer):
            if any(obj is c for c in course):
                return f"it calls {_name(obj)}"
            if isinstance(obj, FunctionType | functools.partial) and obj is not answer and not _ours(obj):
                if (inner := borrowed(obj, course, depth + 1)) is not None:
                    return inner
    return None


@contextlib.contextmanager
def watch_calls(course: tuple[Any, ...]) -> Iterator[list[str]]:
    """Record (in the yielded list) a call into the course's implementation while the block
    runs, whatever path led there (getattr, exec, a method of a wrapper object, ...)."""
    codes, seen = _codes(course), []
    if not codes:
        yield seen
        return

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and (frame.f_code.co_filename, frame.f_code.co_qualname) in codes and not seen:
            seen.append(f"it calls {frame.f_globals.get('__name__', '?')}.{frame.f_code.co_qualname}")

    previous = sys.getprofile()
    sys.setprofile(hook)
    try:
        yield seen
    finally:
        sys.setprofile(previous)
