"""Exercises: instant offline feedback in the notebook, and grading for instructors.

Hand-written infrastructure, not course content (no notebook exports it). The engine:

    questions.py  questions, planted mistakes, results; the registry of question banks
    probing.py    run an answer on test cases, keep plain outputs; borrowed answers (for `check`)
    judging.py    compare outputs with the reference and the planted mistakes, in words
    notebook.py   `check = checker("05_masking")`, `check("q2")`, `check.summary()`
    wire.py       the one channel between grader and submission: framing, plain-data codec
    source.py     the package a submission's process imports: no banks, the answers stubbed
    plans.py      a question's test cases, shipped to that process by value
    sandbox.py    the isolated process each submission runs in (the grader's side)
    isolation.py  what the machine allows: limits, namespaces, the view, dropping privileges
    zygote.py     the trusted processes that start it: zygote, keeper, the worker's setup
    worker.py     what runs in it: the notebook's cells, then the probes
    batch.py      `gpt2-course grade`: grade the submissions, one sandbox each
    report.py     the table and the CSV

The questions themselves live in gpt2_course/exercises/, one bank per chapter notebook.

How a question is checked: a *probe* runs an answer on fixed test inputs and records its
outputs. The answer passes when its outputs equal the reference's; when they equal a planted
mistake's outputs instead, the learner gets that mistake's hint.
"""
from gpt2_course.grading.batch import grade_main, grade_notebook, grade_notebooks
from gpt2_course.grading.judging import check_answer, difference, judge
from gpt2_course.grading.notebook import GRADING_ENV, Checker, checker
from gpt2_course.grading.probing import QUESTION_TIMEOUT, probe
from gpt2_course.grading.report import Report, format_reports, write_csv
from gpt2_course.grading.questions import (
    Case, Exercise, Mistake, Question, Result, exercise_ids, get_exercise)

__all__ = ["GRADING_ENV", "QUESTION_TIMEOUT", "Case", "Checker", "Exercise", "Mistake", "Question",
           "Report", "Result", "check_answer", "checker", "difference", "exercise_ids", "format_reports",
           "get_exercise", "grade_main", "grade_notebook", "grade_notebooks", "judge", "probe", "write_csv"]
