"""Probe plans: a question's test cases, built in the grader and shipped to the submission's process
by value, so that the process never imports a question bank.

A bank holds a question's reference and its planted mistakes next to its test cases. The grader
builds the cases (`q.cases()`: their inputs are computed here) and pickles the list of
(label, run) pairs with their code: a function defined in a bank, and any lambda or nested
function, travels as its code object with only the globals its code loads; everything else
(torch, a helper of the grading engine, an earlier chapter's function) travels by name and is
imported there. Whatever the cases would drag along that an answer must not reach (the
exercise's course objects, any bank's reference or mistake, a class defined in a bank) raises
PlanError here: a bank bug, which tests/exercises/test_engine.py finds for every question.
"""
from __future__ import annotations

import builtins
import dis
import functools
import importlib
import io
import marshal
import pickle
import types
from collections.abc import Iterator
from typing import Any

from gpt2_course.grading.questions import BANKS, Exercise, Mistake, Question, exercise_ids, get_exercise

_LOADS = {"LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "DELETE_GLOBAL"}


class PlanError(ValueError):
    """A question's cases need something a submission's process must not hold."""


def banned(exercise_id: str) -> list[Any]:
    """What must not reach the process grading `exercise_id`: its course objects, and every
    bank's references and planted mistakes."""
    out = list(get_exercise(exercise_id).course)
    for ex in exercise_ids():
        for q in get_exercise(ex).questions:
            out += [q.reference] if callable(q.reference) else []
            for m in q.mistakes:
                out += [x for x in (m.impl, *m.also) if callable(x)]
    return out


def _code_globals(code: types.CodeType) -> Iterator[str]:
    for ins in dis.get_instructions(code):
        if ins.opname in _LOADS:
            yield ins.argval
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_globals(const)


def _by_value(fn: types.FunctionType) -> bool:
    return fn.__module__.startswith(BANKS + ".") or "<" in fn.__qualname__


def _function(code: bytes, names: dict[str, Any], name: str, defaults: Any, cells: tuple[Any, ...],
              kwdefaults: Any) -> types.FunctionType:
    """A function rebuilt from its code and what it loads (runs in the submission's process)."""
    fn = types.FunctionType(marshal.loads(code), {"__builtins__": builtins, **names}, name, defaults,
                            tuple(types.CellType(c) for c in cells))
    fn.__kwdefaults__ = kwdefaults
    return fn


class _Pickler(pickle.Pickler):
    def __init__(self, file: io.BytesIO, banned: list[Any]):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.banned = {id(b): b for b in banned}

    def reducer_override(self, obj: Any) -> Any:
        if id(obj) in self.banned or isinstance(obj, Question | Mistake | Exercise):
            raise PlanError(f"the cases use {getattr(obj, '__qualname__', type(obj).__name__)}, which an "
                            "answer must not reach: build inputs in the case's factory, not in `run`")
        if isinstance(obj, types.ModuleType):
            if obj.__name__.startswith(BANKS + "."):
                raise PlanError(f"the cases use the module {obj.__name__}")
            return importlib.import_module, (obj.__name__,)
        if isinstance(obj, type) and obj.__module__.startswith(BANKS + "."):
            raise PlanError(f"the cases use {obj.__qualname__}, a class defined in a bank")
        if isinstance(obj, types.FunctionType) and _by_value(obj):
            names = {n: obj.__globals__[n] for n in sorted(set(_code_globals(obj.__code__)))
                     if n in obj.__globals__}
            cells = tuple(c.cell_contents for c in obj.__closure__ or ())
            return _function, (marshal.dumps(obj.__code__), names, obj.__name__, obj.__defaults__, cells,
                               obj.__kwdefaults__)
        return NotImplemented


@functools.cache
def plan(exercise_id: str, qid: str) -> bytes | None:
    """The question's cases as bytes for the worker (None: a value question, no cases)."""
    q = get_exercise(exercise_id).question(qid)
    if q.cases is None:
        return None
    buf = io.BytesIO()
    try:
        _Pickler(buf, banned(exercise_id)).dump([(c.label, c.run) for c in q.cases()])
    except PlanError as exc:
        raise PlanError(f"{exercise_id} {qid}: {exc}") from None
    return buf.getvalue()


def cases(data: bytes) -> list[tuple[str, Any]]:
    """The (label, run) pairs of a plan (in the submission's process: the grader sent them)."""
    return pickle.loads(data)
