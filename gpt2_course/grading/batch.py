"""Instructor grading: `gpt2-course grade PATH... [--csv grades.csv]`.

Each submission runs in its own isolated process (sandbox.py) that executes the notebook's
cells and runs each question's test cases (sent from here, plans.py) on its answers; the outputs
come back as plain data and are judged here, against reference outputs computed here before any
submission ran. Whatever one submission does (crash, hang, unreadable output, a forged reply),
it becomes that row's error: the batch goes on, the table and the CSV (written row by row) get
every row. When the grader itself fails (a worker that cannot start), the row says "not graded"
and why: the submission gets no score, never a verdict about its code.
"""
from __future__ import annotations

import csv as csv_module
import queue
import re
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from gpt2_course.grading.judging import expected, judge
from gpt2_course.grading.notebook import missing
from gpt2_course.grading.plans import plan
from gpt2_course.grading.probing import QUESTION_TIMEOUT
from gpt2_course.grading.questions import Result, exercise_ids, get_exercise
from gpt2_course.grading.report import CSV_HEADER, Report, clean, csv_rows, format_report, header
from gpt2_course.grading.sandbox import Dead, GraderFailure, Sandbox, Worker
from gpt2_course.grading.wire import BadMessage, decode

STARTUP_TIMEOUT = 120.0  # seconds a fresh worker may take to say it is ready


def identify(nb: Any, path: Path) -> str | None:
    """Which exercise a notebook answers: its metadata, else its file name, else its checker call."""
    meta = nb.get("metadata", {}).get("gpt2_course", {})
    if isinstance(meta, dict) and meta.get("exercise") in exercise_ids():
        return meta["exercise"]
    for ex in exercise_ids():
        if path.name.startswith(ex):
            return ex
    for cell in nb.get("cells", []):
        if m := re.search(r"checker\(\s*['\"]([\w-]+)['\"]\s*\)", str(cell.get("source", ""))):
            if m.group(1) in exercise_ids():
                return m.group(1)
    return None


def _read(worker: Worker, kind: str, timeout: float) -> tuple[Any, ...] | None:
    """The worker's next reply of this kind, None if it did not come in time. A reply that is not
    plain data, or not of this kind, raises BadMessage."""
    data = worker.reply(timeout)
    if data is None:
        return None
    msg = decode(data)
    if not (isinstance(msg, tuple) and len(msg) >= 1 and msg[0] == kind):
        raise BadMessage(f"an unexpected reply instead of '{kind}'")
    return msg[1:]


def _start(worker: Worker) -> None:
    """Wait for a fresh worker to be ready; GraderFailure when it is not (no notebook code has run
    in it yet: whatever went wrong is the grader's)."""
    try:
        data = worker.reply(STARTUP_TIMEOUT)
        msg = decode(data) if data is not None else ("setup-failed", f"no answer in {STARTUP_TIMEOUT:.0f} s")
    except (Dead, BadMessage) as exc:
        raise GraderFailure(f"the notebook's process died while starting ({exc})") from None
    if msg != ("ready",):
        raise GraderFailure(f"the notebook's process could not start: {clean(str(msg[-1]))}")


def _run_cells(worker: Worker, sources: list[str], skip: set[int], timeout: float, grace: float,
               notes: list[str]) -> bool:
    """Run the notebook's code cells; True when the worker died and must be restarted."""
    deadline = time.monotonic() + timeout
    for i, src in enumerate(sources):
        if i in skip:
            continue
        # Once the notebook's time is spent, each later cell still gets a short grace, so one
        # runaway cell does not cost the answers defined after it.
        worker.send("cell", src)
        try:
            reply = _read(worker, "cell", max(deadline - time.monotonic(), grace))
            if reply is None:
                worker.interrupt()
                reply = _read(worker, "cell", 5.0)
                if reply is None:
                    raise Dead("")
                reply = ("interrupted", "")
        except (Dead, BadMessage) as exc:
            skip.add(i)
            notes.append(f"code cell {i + 1} {'killed' if str(exc) else 'hung'} the kernel; "
                         "graded again without it")
            return True
        status, err = reply[0], reply[1]
        if status == "error":
            note = f"code cell {i + 1} raised {err}"
        elif status == "interrupted":
            note = f"code cell {i + 1} was interrupted at the time limit"
            skip.add(i)
        else:
            continue
        if note not in notes:
            notes.append(note)
    return False


def _probe(worker: Worker, exercise_id: str, qid: str, question_timeout: float,
           sources: list[str]) -> tuple[Result, bool]:
    """(the question's result, whether the worker is still usable)."""
    q = get_exercise(exercise_id).question(qid)
    try:
        worker.send("probe", qid, q.name, question_timeout, plan(exercise_id, qid))
        reply = _read(worker, "probe", question_timeout + 10)
    except Dead as exc:
        return judge(exercise_id, qid, None, f"died:{exc or 'killed'}"), False
    except BadMessage as exc:
        return judge(exercise_id, qid, None, f"error:its result is {exc}"), False
    if reply is None:
        return judge(exercise_id, qid, None, "timeout"), False
    if len(reply) != 3 or reply[0] != qid or not isinstance(reply[1], str) or not (
            reply[2] is None or isinstance(reply[2], tuple)):
        return judge(exercise_id, qid, None, "error:its result is malformed"), False
    status, outs = reply[1], reply[2]
    if status == "missing":
        return missing(exercise_id, q, sources), True
    kind = status.partition(":")[0]
    if kind not in ("ok", "timeout", "error") or (kind == "ok") != (outs is not None):
        return judge(exercise_id, qid, None, "error:its result is malformed"), False
    return judge(exercise_id, qid, None if outs is None else list(outs), status), True


def grade_notebook(path: str | Path, timeout: float = 60.0, question_timeout: float = QUESTION_TIMEOUT,
                   exercise: str | None = None, sandbox: Sandbox | None = None, slot: int = 0) -> Report:
    """Grade one submission. Never raises for a bad submission: the report says what went wrong."""
    if sandbox is None:
        with Sandbox() as box:
            return grade_notebook(path, timeout, question_timeout, exercise, box, slot)
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
    report.exercise = exercise or identify(nb, path)
    if report.exercise is None:
        report.problem = ("unrelated notebook: it answers none of the exercises (no gpt2_course metadata, "
                          "no exercise name in the file name, no checker(...) call)")
        return report
    ex = get_exercise(report.exercise)
    sources = [c.source for c in nb.cells if c.cell_type == "code"]
    results: dict[str, Result] = {}
    skip: set[int] = set()  # cells that ran out of time or killed the worker: left out of a rerun
    for _attempt in range(3):
        worker = sandbox.spawn(ex.id, path, slot)
        try:
            _start(worker)
            if _run_cells(worker, sources, skip, timeout, question_timeout, report.notes):
                continue  # the worker died: start again without the cell that killed it
            for q in ex.questions:
                if q.id not in results:
                    results[q.id], alive = _probe(worker, ex.id, q.id, question_timeout, sources)
                    if not alive:
                        break
            if len(results) == len(ex.questions):
                break
        except GraderFailure as exc:
            report.problem, report.error, report.notes = f"not graded: {exc}", True, []
            return report
        except (Dead, BadMessage) as exc:
            report.notes.append(f"the notebook's process stopped ({exc})")
        finally:
            worker.close()
    untested = "died:it kept dying before this question's tests (see the notes)"
    report.results = [results.get(q.id) or judge(ex.id, q.id, None, untested) for q in ex.questions]
    return report


def _files(paths: list[str]) -> list[str]:
    files: list[str] = []
    for p in paths:
        files.extend(sorted(str(f) for f in Path(p).glob("*.ipynb")) if Path(p).is_dir() else [p])
    return files


def iter_grades(paths: list[str], timeout: float = 60.0, question_timeout: float = QUESTION_TIMEOUT,
                jobs: int = 1, exercise: str | None = None,
                sandbox: Sandbox | None = None) -> Iterator[Report]:
    """Grade many submissions (a directory stands for the notebooks in it), yielding each report
    in order as soon as it is ready."""
    files = _files(paths)
    for ex in [exercise] if exercise else exercise_ids():  # all checks are loaded before any submission
        for q in get_exercise(ex).questions:
            expected(ex, q.id)
            plan(ex, q.id)
    if sandbox is None:
        with Sandbox() as box:
            yield from iter_grades(files, timeout, question_timeout, jobs, exercise, box)
        return
    slots: queue.Queue[int] = queue.Queue()
    for s in range(max(jobs, 1)):
        slots.put(s)

    def grade(f: str) -> Report:
        slot = slots.get()
        try:
            return grade_notebook(f, timeout, question_timeout, exercise, sandbox, slot)
        except Exception as exc:  # the grader's own failure on this file: that row's error
            why = f"not graded: the grader failed on it ({type(exc).__name__}: {exc})"
            return Report(f, problem=clean(why), error=True)
        finally:
            slots.put(slot)

    with ThreadPoolExecutor(max_workers=max(jobs, 1)) as pool:
        yield from pool.map(grade, files)


def grade_notebooks(paths: list[str], timeout: float = 60.0, question_timeout: float = QUESTION_TIMEOUT,
                    jobs: int = 1, exercise: str | None = None,
                    sandbox: Sandbox | None = None) -> list[Report]:
    return list(iter_grades(paths, timeout, question_timeout, jobs, exercise, sandbox))


def grade_main(paths: list[str], csv: str | None = None, timeout: float = 60.0,
               question_timeout: float = QUESTION_TIMEOUT, jobs: int = 1,
               exercise: str | None = None) -> int:
    """`gpt2-course grade`: say which protections apply (stderr), print the table, write the CSV
    (row by row) if asked. Exit code 0 when every submission could be graded, 1 when one could not
    (not a notebook, unrelated, missing, not graded), 2 when the grader itself cannot run."""
    if exercise is not None and exercise not in exercise_ids():  # the instructor's error: before starting
        print(f"gpt2-course grade: unknown exercise {exercise!r}; known: {', '.join(exercise_ids())}",
              file=sys.stderr)
        return 2
    files = _files(paths)
    try:
        box = Sandbox().start()
    except GraderFailure as exc:
        print(f"gpt2-course grade: the grader could not start: {clean(str(exc))}", file=sys.stderr)
        return 2
    print(box.describe(), file=sys.stderr, flush=True)
    width = max([len(clean(f)) for f in files] + [8])
    print(header(width), flush=True)
    bad = 0
    try:
        with open(csv, "w", newline="", encoding="utf-8") if csv else _NoFile() as fh:
            writer = csv_module.writer(fh) if csv else None
            if writer:
                writer.writerow(CSV_HEADER)
            for r in iter_grades(files, timeout, question_timeout, jobs, exercise, box):
                print("\n".join(format_report(r, width)), flush=True)
                bad += r.problem is not None
                if writer:
                    writer.writerows(csv_rows(r))
                    fh.flush()
    finally:
        box.close()
    if csv:
        print(f"wrote {csv}")
    return 1 if bad or not files else 0


class _NoFile:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def run(args: Any) -> int:
    """`gpt2-course grade` (gpt2_course/cli.py parses the arguments)."""
    return grade_main(args.paths, csv=args.csv, timeout=args.timeout, question_timeout=args.question_timeout,
                      jobs=args.jobs, exercise=args.exercise)
