"""What the grader reports: one Report per submission, as table lines and CSV rows. Everything a
submission can put into them (paths, messages, notes) is cleaned to one printable line."""
from __future__ import annotations

import csv as csv_module
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from gpt2_course.grading.questions import Result, get_exercise


@dataclass
class Report:
    path: str
    exercise: str | None = None
    results: list[Result] = field(default_factory=list)
    problem: str | None = None  # why the submission could not be graded
    notes: list[str] = field(default_factory=list)
    error: bool = False  # the problem is the grader's own failure: "not graded", not the file's fault

    @property
    def points(self) -> int:
        return sum(r.points for r in self.results)

    @property
    def max_points(self) -> int:
        return get_exercise(self.exercise).max_points if self.exercise else 0


def clean(text: str, limit: int = 300) -> str:
    """One line of printable text: a submission's error message cannot add rows to the table."""
    text = "".join(" " if unicodedata.category(c)[0] in "CZ" and c != " " else c for c in str(text))
    text = re.sub(r" {2,}", " ", text).strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def header(width: int) -> str:
    return f"{'notebook':{width}}  {'exercise':24} {'points':>9}  per question"


def format_report(r: Report, width: int) -> list[str]:
    """The table lines of one notebook: its row, then one indented line per lost point and note."""
    path = clean(r.path)
    if r.problem:
        return [f"{path:{width}}  {'-':24} {'-':>9}  {clean(r.problem)}"]
    per = " ".join(f"{x.question}:{x.points}/{x.max_points}" for x in r.results)
    lines = [f"{path:{width}}  {r.exercise:24} {f'{r.points}/{r.max_points}':>9}  {per}"]
    lines += [f"{'':{width}}    {x.question} {x.name} [{x.status}] {clean(x.message)}"
              for x in r.results if x.status != "pass"]
    lines += [f"{'':{width}}    note: {clean(note)}" for note in r.notes]
    return lines


def format_reports(reports: list[Report]) -> str:
    """A table: one line per notebook, then one indented line per question that lost points."""
    width = max([len(clean(r.path)) for r in reports] + [8])
    lines = [header(width)]
    for r in reports:
        lines += format_report(r, width)
    return "\n".join(lines)


CSV_HEADER = ["notebook", "exercise", "question", "name", "points", "max_points", "status", "detail"]


def csv_rows(r: Report) -> list[list[Any]]:
    """One row per question, plus a `total` row (one row only for an ungradable file)."""
    if r.problem:
        return [[r.path, "", "total", "", 0, 0, "not graded" if r.error else "ungradable", clean(r.problem)]]
    rows: list[list[Any]] = [[r.path, r.exercise, x.question, x.name, x.points, x.max_points, x.status,
                              x.hint or clean(x.message)] for x in r.results]
    return rows + [[r.path, r.exercise, "total", "", r.points, r.max_points, "",
                    "; ".join(clean(n) for n in r.notes)]]


def write_csv(reports: list[Report], path: str) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv_module.writer(fh)
        w.writerow(CSV_HEADER)
        for r in reports:
            w.writerows(csv_rows(r))
