"""The grading engine in this process: the banks cover every chapter, generated files are in sync,
notebooks run the way a learner runs them, what `check` says about missing, borrowed and
syntactically broken answers, about masks, and about outputs that are not plain data; and what
the grader sends a submission's process (plans, the package copy) and reads back (the wire)."""
from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import math
import pickle
from pathlib import Path

import nbformat
import pytest
import torch
from planted import define, solution_answers

from gpt2_course import grading
from gpt2_course.grading.judging import expected
from gpt2_course.grading.probing import is_raised, plain
from gpt2_course.grading.questions import bank_module
from gpt2_course.grading.wire import BadMessage, decode, encode

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = sorted((ROOT / "exercises" / "solutions").glob("*.ipynb"))
BLANKS = [ROOT / "exercises" / p.name for p in SOLUTIONS]
# Appendices without graded exercises, each with its reason (a new chapter must not join silently):
NO_EXERCISES = {
    "A3_sources_errata": "a table of checked claims from the source texts, not a chapter to practise",
}
CHAPTERS = {p.stem for p in (ROOT / "chapters").glob("*.ipynb")} - set(NO_EXERCISES)


def test_exercises_cover_every_chapter():
    assert set(grading.exercise_ids()) == CHAPTERS
    assert [p.stem for p in SOLUTIONS] == sorted(CHAPTERS)
    for exercise in grading.exercise_ids():
        assert 3 <= len(grading.get_exercise(exercise).questions) <= 6, exercise


def test_every_bank_has_its_test_file():
    for exercise in grading.exercise_ids():
        assert (ROOT / "tests" / "exercises" / f"test_{bank_module(exercise)}.py").exists(), exercise


def test_the_course_package_agrees_with_independent_solutions():
    """Where the package implements a question (course=), its function, as the question's reference
    or inside it, gives the outputs the solution notebook's own code gives (written without the
    package); the parameter count (its own signature) agrees with the package's count."""
    from gpt2_course.config import GPT2Config
    from gpt2_course.exercises.ch10_parameter_count import config, count_params
    from gpt2_course.params import count_parameters

    checked = 0
    for path in SOLUTIONS:
        answers = solution_answers(path.stem)
        for q in grading.get_exercise(path.stem).questions:
            if q.course:
                result = grading.check_answer(path.stem, q.id, answers[q.name])
                assert result.status == "pass", (path.stem, q.id, result)
                checked += 1
    assert checked >= 15
    for name in ("gpt2", "gpt2-medium", "gpt2-xl", "pocket"):
        assert count_params(config(name)) == count_parameters(GPT2Config.from_name(name)), name


def _error_or_nan(out: object) -> bool:
    """Whether a recorded output is a raised error or holds a NaN anywhere."""
    if is_raised(out):
        return True
    if isinstance(out, torch.Tensor):
        return out.is_floating_point() and bool(out.isnan().any())
    if isinstance(out, float):
        return math.isnan(out)
    if isinstance(out, tuple | dict):
        return any(_error_or_nan(o) for o in (out.values() if isinstance(out, dict) else out))
    return False


def test_every_reference_gives_a_value_on_every_case():
    """The checks' inputs (zeros, empty lists, single tokens) are ones the reference handles: none of
    its outputs is an error or a NaN, so no learner is held to reproducing a crash (issue 26)."""
    for exercise in grading.exercise_ids():
        for q in grading.get_exercise(exercise).questions:
            labels = [c.label for c in q.cases()] if q.cases else ["the value"]
            for label, out in zip(labels, expected(exercise, q.id)[0], strict=True):
                assert not _error_or_nan(out), (exercise, q.id, label, out)


# ------------------------------------------------------------------------------------------------
# The generated files
# ------------------------------------------------------------------------------------------------


def _tool():
    """tools/exercises.py, imported (running it in a subprocess would import torch again)."""
    spec = importlib.util.spec_from_file_location("exercises_tool", ROOT / "tools" / "exercises.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_files_are_in_sync():
    assert _tool().check() == []


def test_check_notices_an_edited_solution(tmp_path):
    tool = _tool()
    for sub in ("exercises/solutions", "book/exercises"):
        (tmp_path / sub).mkdir(parents=True)
    copied = ["_config.yml", "book/exercises/index.md", *[f"exercises/solutions/{p.name}" for p in SOLUTIONS]]
    for f in copied:
        (tmp_path / f).write_text((ROOT / f).read_text(encoding="utf-8"), encoding="utf-8")
    assert tool.check(tmp_path)  # nothing generated yet
    assert tool.write(tmp_path) == []
    assert tool.check(tmp_path) == []
    sol = tmp_path / "exercises/solutions/05_masking.ipynb"
    sol.write_text(sol.read_text(encoding="utf-8").replace("1024 * 1025 // 2", "524800"), encoding="utf-8")
    assert any("05_masking.md is stale" in p for p in tool.check(tmp_path))
    text = sol.read_text(encoding="utf-8")
    sol.write_text(text.replace('check(\\"q3\\")', 'check(\\"q4\\")'), encoding="utf-8")
    assert any("check cells ['q1', 'q2', 'q4'], but gpt2_course/exercises/ch05_masking.py" in p
               for p in tool.check(tmp_path))
    (tmp_path / "exercises/99_extra.ipynb").write_text("{}")
    assert any("99_extra.ipynb has no solution notebook" in p for p in tool.check(tmp_path))


def test_every_exercise_page_is_in_the_table_of_contents():
    toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    for path in SOLUTIONS:
        assert f"- file: book/exercises/{path.stem}\n" in toc, path.stem


def test_blank_cells_hold_no_solution():
    for blank, solution in zip(BLANKS, SOLUTIONS, strict=True):
        code = "\n".join(c.source for c in nbformat.read(blank, as_version=4).cells if c.cell_type == "code")
        assert "SOLUTION" not in code
        for cell in nbformat.read(solution, as_version=4).cells:
            for line in cell.source.split("\n"):
                expr = line.split("=", 1)[1].split("#")[0].strip() if "# SOLUTION" in line else ""
                if len(expr) > 3:
                    assert expr not in code, (blank.name, line)


def test_solution_metadata_names_the_exercise():
    for path in SOLUTIONS + BLANKS:
        assert json.loads(path.read_text())["metadata"]["gpt2_course"]["exercise"] == path.stem


# ------------------------------------------------------------------------------------------------
# Notebooks, run the way a learner runs them (in this process: fast)
# ------------------------------------------------------------------------------------------------


def _run_cells(path: Path) -> str:
    """Execute a notebook's code cells in one namespace here, returning what they printed."""
    ns: dict = {"__name__": "__main__"}
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                exec(compile(cell.source, f"{path.name}", "exec"), ns)
    return buf.getvalue()


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_solution_notebook_checks_pass(path):
    out = _run_cells(path)
    ex = grading.get_exercise(path.stem)
    assert out.count(": PASS") == len(ex.questions), out
    assert f"{ex.max_points}/{ex.max_points}" in out.splitlines()[-1]


@pytest.mark.parametrize("path", BLANKS, ids=lambda p: p.stem)
def test_blank_notebook_runs_and_says_not_answered(path):
    out = _run_cells(path)
    ex = grading.get_exercise(path.stem)
    assert out.count("Not answered yet") == len(ex.questions), out
    assert f"0/{ex.max_points}" in out.splitlines()[-1]


# ------------------------------------------------------------------------------------------------
# What `check` says
# ------------------------------------------------------------------------------------------------


def test_check_reports_a_missing_answer_a_syntax_error_and_a_borrowed_one(capsys):
    from gpt2_course.masking import causal_mask  # the course's own, on purpose

    check = grading.checker("05_masking")
    check("q3")  # looked up by name among the caller's globals: not there
    check("q2", causal_mask)
    notebook = {"check": check, "In": ["import torch", "def masked_softmax(scores, mask)\n    return scores"]}
    exec("check('q3')", notebook)  # IPython keeps the cells' text in `In`
    out = capsys.readouterr().out
    assert "`masked_softmax` is not defined" in out
    assert "course's own implementation (gpt2_course.masking.causal_mask)" in out
    assert "The cell that defines `masked_softmax` has a syntax error (line 1: expected ':')" in out


BORROWED = {
    "module path": "import gpt2_course.masking\ncausal_mask = gpt2_course.masking.causal_mask",
    "partial": "import functools, gpt2_course.masking as m\n"
               "causal_mask = functools.partial(m.causal_mask)",
    "lambda": "from gpt2_course.masking import causal_mask as cm\n"
              "causal_mask = lambda t_q, t_k=None: cm(t_q, t_k)",
    "def": "import gpt2_course\n"
           "def causal_mask(t_q, t_k=None):\n    return gpt2_course.masking.causal_mask(t_q, t_k)",
    "getattr": "import importlib\ndef causal_mask(t_q, t_k=None):\n"
               "    module = importlib.import_module('gpt2_course.masking')\n"
               "    return getattr(module, 'causal_' + 'mask')(t_q, t_k)",
    "the bank's reference": "from gpt2_course.exercises import ch05_masking as b\n"
                            "causal_mask = lambda t_q, t_k=None: b.causal_mask(t_q, t_k)",
    "another question's reference": "from gpt2_course.heads import split_heads\n"
                                    "causal_mask = lambda t_q, t_k=None: "
                                    "split_heads(torch.ones(1, t_q, 2), 1)[0, 0] > 0",
}


@pytest.mark.parametrize("form", sorted(BORROWED))
def test_answers_that_use_the_package_score_zero_as_borrowed(form):
    result = grading.check_answer("05_masking", "q2", define(BORROWED[form])["causal_mask"])
    if form == "another question's reference":  # using other parts of the package is fine
        assert result.status == "fail", result
        return
    assert (result.status, result.points) == ("borrowed", 0), (form, result)


def test_a_subclass_of_the_package_class_is_borrowed():
    answer = define("from gpt2_course.generate import LayerCache as L\nclass LayerCache(L):\n    pass")
    result = grading.check_answer("09_sampling", "q4", answer["LayerCache"])
    assert result.status == "borrowed" and "a subclass of gpt2_course.generate.LayerCache" in result.message


def test_mask_differences_are_said_in_words():
    answer = define("def causal_mask(t_q, t_k=None):\n    m = torch.ones(t_q, t_k or t_q).tril().bool()\n"
                    "    m[0, 3] = True\n    return m")["causal_mask"]
    result = grading.check_answer("05_masking", "q2", answer)
    assert "differs at index [0, 3]: query 0 can see key 3, a future position (query 0 sits at position 0)" \
        in result.message, result


def test_an_infinite_loop_costs_only_its_question():
    ns = define("def causal_mask(t_q, t_k=None):\n    while True:\n        pass")
    result = grading.check_answer("05_masking", "q2", ns["causal_mask"], timeout=0.5)
    assert (result.status, result.points) == ("timeout", 0)
    assert grading.check_answer("05_masking", "q1", 524800).points == 1  # the alarm is gone


class Sneaky(int):
    """An int that is not an int: the grader must never unpickle one."""


def test_outputs_cross_processes_as_plain_data_only():
    outs = [torch.arange(6).reshape(2, 3) > 2, torch.randn(2, dtype=torch.float64), Sneaky(3),
            {"a": (1.5, None)}]
    back = decode(encode([plain(o) for o in outs]))
    assert torch.equal(back[0], outs[0]) and torch.equal(back[1], outs[1])
    assert type(back[2]) is int and back[2] == 3 and back[3] == {"a": (1.5, None)}
    for hostile in (pickle.dumps([Sneaky(3)]), pickle.dumps(torch.ones(2)), b"\x80\x04junk",
                    encode([("__tensor__", "torch.float64", (3,), b"\x00" * 8)])):
        with pytest.raises(BadMessage):
            decode(hostile)


# ------------------------------------------------------------------------------------------------
# Tolerances: a value question's integers get its tolerance; a code question's integers are exact
# ------------------------------------------------------------------------------------------------


def test_an_integer_value_answer_within_the_tolerance_passes():
    """A2 q1 answered with the one wpe row a decode step also reads: the same answer as an int and as
    a float (the issue's report: the int scored 0, 'expected 494,613,504, got 494,616,576')."""
    from gpt2_course.exercises.a2_making_it_fast import BYTES

    answer = BYTES + 768 * 4
    for form in (answer, float(answer)):
        result = grading.check_answer("A2_making_it_fast", "q1", form)
        assert (result.status, result.points) == ("pass", 1), (type(form), result)
    far = grading.check_answer("A2_making_it_fast", "q1", BYTES + BYTES // 100)
    assert far.status == "fail" and "too high" in far.message, far
    assert "494613504" not in far.message and "494,613,504" not in far.message, far  # not given away
    exact = grading.check_answer("05_masking", "q1", 1024 * 1025 // 2 + 1)  # rtol=0: exact
    assert exact.status == "fail" and "got 524801, which is too high" in exact.message, exact
    assert "(the answer must be exact)" in exact.message, exact
    assert "524800" not in exact.message and "524,800" not in exact.message, exact


def test_a_code_questions_integers_are_exact():
    """Counts, token ids and indices carry no float noise: one off is wrong, however large the
    number (a relative tolerance would pass gpt2's count off by one)."""
    from gpt2_course.exercises.ch01_language_modeling import bigram_counts
    from gpt2_course.exercises.ch10_parameter_count import count_params

    def off_by_one(config, tied=True):
        return count_params(config, tied) + 1

    result = grading.check_answer("10_parameter_count", "q2", off_by_one, allow_course_code=True)
    assert result.status == "fail" and "got 124,439,809" in result.message, result

    def one_more(*args):
        counts = torch.as_tensor(bigram_counts(*args)).clone()
        counts.view(-1)[0] += 1
        return counts

    result = grading.check_answer("01_language_modeling", "q3", one_more, allow_course_code=True)
    assert result.status == "fail" and "differs at index [0, 0]" in result.message, result


# ------------------------------------------------------------------------------------------------
# What a submission's process gets: the package without the exercise's answers, cases by value
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("exercise", grading.exercise_ids())
def test_every_bank_can_be_graded_without_its_answers_in_the_process(exercise):
    """For every question: its cases travel to the worker (plans.py) and, rebuilt from the bytes,
    give the reference the reference's outputs; the worker's package copy (source.py) holds no bank
    and a stand-in for each of the exercise's course objects."""
    import gpt2_course
    from gpt2_course.grading import plans, source
    from gpt2_course.grading.judging import expected, same
    from gpt2_course.grading.probing import run_cases

    files = source.snapshot(Path(gpt2_course.__file__).parent)
    copy = source.worker_source(files, exercise)
    banks = [f for f in copy if f.startswith("gpt2_course/exercises/")]
    assert banks == ["gpt2_course/exercises/__init__.py"]
    for obj in grading.get_exercise(exercise).course:
        text = copy[obj.__module__.replace(".", "/") + ".py"].decode()
        assert f"Not available while this exercise is graded: {obj.__module__}.{obj.__qualname__}" in text
    for q in grading.get_exercise(exercise).questions:
        data = plans.plan(exercise, q.id)
        runs = None if data is None else [run for _, run in pickle.loads(data)]
        assert same(run_cases(runs, q.reference), expected(exercise, q.id)[0], q), (exercise, q.id)
