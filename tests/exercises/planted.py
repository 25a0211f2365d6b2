"""Shared by the per-chapter test files: each holds `PLANTED`, one learner-style wrong answer per
planted mistake of its bank (written as a learner would write it, never by calling the bank's own
mistake), and `planted_tests` turns it into the chapter's tests."""
from __future__ import annotations

import math
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from gpt2_course import grading
from gpt2_course.bpe import merge_pair
from gpt2_course.grading import check_answer, get_exercise
from gpt2_course.grading.judging import expected, same

SOLUTIONS = Path(__file__).resolve().parents[2] / "exercises" / "solutions"


def define(code: str) -> dict:
    """Run a learner's cell in a fresh namespace, with the notebooks' usual imports."""
    ns: dict = {"math": math, "np": np, "torch": torch, "F": F, "__name__": "__main__"}
    ns["MERGE"] = merge_pair  # questions that build on an earlier answer get a correct one
    exec(compile(code, "<planted>", "exec"), ns)
    return ns


def solution_answers(exercise: str) -> dict:
    """The names the course's solution notebook `exercises/solutions/<exercise>.ipynb` defines (its
    `check` cells stay quiet, as while grading)."""
    path = SOLUTIONS / f"{exercise}.ipynb"
    ns: dict = {"__name__": "__main__"}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(grading.GRADING_ENV, "1")
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                exec(compile(cell.source, path.name, "exec"), ns)
    return ns


def one_change(qid: str, template: str, correct: dict[str, str],
               changes: dict[str, dict[str, str]]) -> dict[tuple[str, str], str]:
    """Learner-style answers that each differ from the correct one in one place: `template` filled
    with the `correct` parts, then the mistake's parts swapped in. Keyed like PLANTED."""
    return {(qid, name): template.format(**{**correct, **change}) for name, change in changes.items()}


def planted_tests(exercise: str, planted: dict[tuple[str, str], str],
                  also: dict[tuple[str, str], list[str]] | None = None) -> tuple:
    """The chapter's three tests: every mistake has an answer; each answer (and each other common
    form in `also`) gets exactly its hint; no mistake passes or looks like another."""
    cases = [(qid, name, code) for (qid, name), code in sorted(planted.items())]
    cases += [(qid, name, code) for (qid, name), codes in sorted((also or {}).items()) for code in codes]

    def test_every_planted_mistake_has_a_learner_style_answer():
        bank = {(q.id, m.name) for q in get_exercise(exercise).questions for m in q.mistakes}
        assert set(planted) == bank

    ids = [f"{qid}-{name}-{i}" for i, (qid, name, _) in enumerate(cases)]

    @pytest.mark.parametrize("qid,name,code", cases, ids=ids)
    def test_planted_answer_gets_exactly_its_hint(qid, name, code):
        q = get_exercise(exercise).question(qid)
        result = check_answer(exercise, qid, define(code)[q.name])
        assert (result.status, result.hint) == ("fail", name), result
        assert next(m.hint for m in q.mistakes if m.name == name) in result.message

    def test_planted_mistakes_are_wrong_and_distinct():
        for q in get_exercise(exercise).questions:
            ref, outs = expected(exercise, q.id)
            names = list(outs)
            for i, a in enumerate(names):
                assert not same(ref, outs[a], q), (q.id, a)
                for b in names[i + 1:]:
                    assert not same(outs[a], outs[b], q), (q.id, a, b)

    return (test_every_planted_mistake_has_a_learner_style_answer, test_planted_answer_gets_exactly_its_hint,
            test_planted_mistakes_are_wrong_and_distinct)
