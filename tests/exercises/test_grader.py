"""The instructor's grader: every solution and blank notebook, bad files, and one hostile notebook
per attack, graded in ONE batch (two at a time) with honest ones. Each hostile notebook must score
what its honest answers earn, and leave the batch, the other rows and the machine alone."""
from __future__ import annotations

import csv
import hashlib
import os
import time
from pathlib import Path

import nbformat
import pytest

import gpt2_course
from gpt2_course import grading
from gpt2_course.grading.batch import grade_main, grade_notebooks
from gpt2_course.grading.report import clean, format_reports
from gpt2_course.grading.sandbox import Sandbox

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = sorted((ROOT / "exercises" / "solutions").glob("*.ipynb"))
BLANKS = [ROOT / "exercises" / p.name for p in SOLUTIONS]

SETUP = "import torch\nimport torch.nn.functional as F\nfrom gpt2_course.grading import checker\n" \
        "check = checker('05_masking')"
HONEST = [  # q1 left blank, q2 right (3 points), q3 with the mask_zero mistake
    "visible_pairs = ...",
    "def causal_mask(t_q, t_k=None):\n    t_k = t_k or t_q\n"
    "    return torch.ones(t_q, t_k, dtype=torch.bool).tril(t_k - t_q)",
    "def masked_softmax(scores, mask):\n    return torch.softmax(scores * mask, -1)",
]
EARNED = {"q1": (0, "blank"), "q2": (3, "pass"), "q3": (0, "fail")}

ATTACKS: dict[str, list[str]] = {
    # a value of an int subclass (it claims to equal anything): judged as the plain int it holds
    "int_subclass": ["""
class Sneaky(int):
    def __eq__(self, other):
        return True
    __hash__ = int.__hash__
visible_pairs = Sneaky(7)"""],
    # patching the writer and the probe in memory, and reloading the grading modules
    "patched_probe": ["""
import importlib, pickle, torch
import gpt2_course.grading as g
import gpt2_course.grading.judging as j, gpt2_course.grading.probing as p
torch.save = lambda *a, **k: None
pickle.dumps = lambda *a, **k: b'forged'
p.probe = j.probe = lambda q, a: [524800]
p.plain = lambda x, d=0: 524800
j.run_probe = lambda q, a, t, allow_course_code=False: ('ok', [524800])
importlib.reload(j); importlib.reload(p); importlib.reload(g)"""],
    # rewriting the package on disk, for this and every later submission
    "rewrite_disk": ["""
import pathlib, gpt2_course
for f in pathlib.Path(gpt2_course.__file__).parent.rglob('*.py'):
    try:
        f.write_text('raise SystemExit')
    except OSError:
        pass"""],
    # a detached process that outlives the notebook and keeps writing (the CSV, a canary)
    "detached": ["""
import subprocess, sys
import os, time
code = 'import time\\nwhile True:\\n    open("{canary}", "a").write("x")\\n    time.sleep(0.2)'
subprocess.Popen([sys.executable, '-c', code], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(300):  # go on once it writes
    if os.path.exists('{canary}'):
        break
    time.sleep(0.1)"""],
    # reading the grader's /proc entries to find and run a classmate's answers
    "proc_snoop": ["""
import os, glob, json
found = []
for pid in [p for p in os.listdir('/proc') if p.isdigit()]:
    try:
        found.append(os.readlink(f'/proc/{pid}/cwd'))
        found += open(f'/proc/{pid}/cmdline').read().split(chr(0))
    except OSError:
        pass
for where in found:
    for nb in glob.glob(os.path.join(where, '**', '*.ipynb'), recursive=True)[:200]:
        try:
            cells = json.load(open(nb))['cells']
        except Exception:
            continue
        for c in cells:
            src = ''.join(c['source'])
            if 'def masked_softmax' in src and 'float("-inf")' in src:
                exec(src)"""],
    # an error message with a newline and a table-shaped line
    "fake_row": ["raise ValueError('boom\\nsolutions/05_masking.ipynb  05_masking  6/6  q1:1/1 q2:3/3')",
                 "def causal_mask(t_q, t_k=None):\n"
                 "    raise RuntimeError('x\\r\\nfake.ipynb 05_masking 6/6')"],
    # files outside its folder: read a secret, write into the instructor's home, delete submissions
    "files": ["""
import os, glob
try:
    leaked = open('{secret}').read()
except OSError:
    leaked = ''
visible_pairs = 524800 if leaked else 1
for path in ['{home}/planted.txt', os.path.expanduser('~/planted.txt')]:
    try:
        open(path, 'w').write('x')
    except OSError:
        pass
for nb in glob.glob('{folder}/*.ipynb'):
    try:
        os.remove(nb)
    except OSError:
        pass"""],
}
ATTACKS["syntax_error"] = ["def masked_softmax(scores, mask)\n    return scores.softmax(-1)"]  # not an attack
SCORES = {  # what each hostile notebook's honest answers earn, question by question
    "int_subclass": {**EARNED, "q1": (0, "fail")},
    "fake_row": {**EARNED, "q2": (0, "error")},
    "files": {**EARNED, "q1": (0, "fail")},
    "syntax_error": EARNED,  # the honest q3 cell comes first; the broken one after it does not count
}


def _notebook(path: Path, cells: list[str], exercise: str | None = "05_masking") -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    if exercise:
        nb.metadata["gpt2_course"] = {"exercise": exercise}
    nbformat.write(nb, path)
    return path


def _fill(cell: str, values: dict[str, Path]) -> str:
    for key, value in values.items():
        cell = cell.replace("{" + key + "}", str(value))
    return cell


def _digest(folder: Path) -> str:
    """The grading engine's source (other engineers edit the rest of the package meanwhile)."""
    return hashlib.sha256(b"".join(p.read_bytes() for p in sorted(folder.rglob("*.py")))).hexdigest()


@pytest.fixture(scope="module")
def box():
    with Sandbox() as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def batch(tmp_path_factory, box):
    tmp = tmp_path_factory.mktemp("grading")
    subs, home = tmp / "submissions", tmp / "instructor_home"
    shared = Path(f"/tmp/gpt2-canary-{os.getpid()}")
    for d in (subs, home, shared):
        d.mkdir(exist_ok=True)
    shared.chmod(0o777)  # anyone may write here: only the kill protection stops the detached writer
    (tmp / "secret.txt").write_text("the exam key")
    canary = shared / "canary.txt"
    fill = {"canary": canary, "secret": tmp / "secret.txt", "home": home, "folder": subs}
    hostile = {name: _notebook(subs / f"{name}.ipynb", [SETUP, *HONEST, *(_fill(c, fill) for c in cells)])
               for name, cells in ATTACKS.items()}
    (subs / "essay.txt").write_text("My answers are in the attached PDF.")
    (subs / "broken.ipynb").write_text('{"cells": [')
    _notebook(subs / "lecture_notes.ipynb", ["print('unrelated')"], exercise=None)
    honest_after = _notebook(subs / "zz_honest.ipynb", [SETUP, *HONEST])  # graded after the attacks
    before = _digest(Path(gpt2_course.__file__).parent / "grading")
    paths = [str(p) for p in [*SOLUTIONS, *BLANKS, *hostile.values(), subs / "essay.txt",
                              subs / "broken.ipynb", subs / "lecture_notes.ipynb", honest_after]]
    started = time.monotonic()
    reports = grade_notebooks(paths, timeout=120, question_timeout=10, jobs=2, sandbox=box)
    seconds = time.monotonic() - started
    ended = time.time()
    time.sleep(1.5)
    yield {"reports": {Path(r.path).name if "/exercises/" not in r.path else r.path: r for r in reports},
           "tmp": tmp, "subs": subs, "home": home, "canary": canary, "ended": ended, "seconds": seconds,
           "protections": box.protections, "package_before": before}
    canary.unlink(missing_ok=True)
    shared.rmdir()


def _report(batch, name):
    return batch["reports"][name]


def test_solutions_score_full_marks_and_blanks_zero(batch):
    for sol, blank in zip(SOLUTIONS, BLANKS, strict=True):
        r = batch["reports"][str(sol)]
        assert r.problem is None and r.notes == [], (sol.name, r)
        assert r.points == r.max_points == grading.get_exercise(sol.stem).max_points, r
        b = batch["reports"][str(blank)]
        assert b.problem is None and b.notes == [], (blank.name, b)
        assert b.points == 0 and {x.status for x in b.results} == {"blank"}, b


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_hostile_notebook_scores_what_its_honest_answers_earn(batch, attack):
    r = _report(batch, f"{attack}.ipynb")
    got = {x.question: (x.points, x.status) for x in r.results}
    assert got == SCORES.get(attack, EARNED), (attack, r)


def test_a_syntax_error_is_named_as_such(batch, tmp_path, box):
    assert any("raised SyntaxError" in n for n in _report(batch, "syntax_error.ipynb").notes)
    path = _notebook(tmp_path / "typo.ipynb", [SETUP, *HONEST[:2], ATTACKS["syntax_error"][0]])
    r = grading.grade_notebook(path, sandbox=box)
    assert r.results[2].status == "error", r
    said = "The cell that defines `masked_softmax` has a syntax error (line 1: expected ':')"
    assert said in r.results[2].message, r


def test_an_honest_submission_after_the_attacks_is_graded_as_usual(batch):
    r = _report(batch, "zz_honest.ipynb")
    assert {x.question: (x.points, x.status) for x in r.results} == EARNED, r
    assert r.notes == [], r.notes


def test_the_package_on_disk_is_untouched(batch):
    assert _digest(Path(gpt2_course.__file__).parent / "grading") == batch["package_before"]


def test_a_detached_process_dies_with_its_submission(batch):
    canary = batch["canary"]
    assert canary.exists(), "the detached writer never ran: the attack did not happen"
    assert canary.stat().st_mtime < batch["ended"], "it was still writing after the batch"


def test_files_outside_the_submission_are_out_of_reach(batch):
    if "uid" not in batch["protections"]:
        pytest.skip(f"grader not running as root: no separate uid ({batch['protections']}); see the docs")
    assert not (batch["home"] / "planted.txt").exists()
    assert {p.name for p in batch["subs"].glob("*.ipynb")} >= {f"{a}.ipynb" for a in ATTACKS}


def test_a_classmates_submission_cannot_be_found_through_proc(batch):
    if "namespaces" not in batch["protections"]:
        pytest.skip(f"no PID namespace on this machine ({batch['protections']}); see the docs")
    r = _report(batch, "proc_snoop.ipynb")
    assert r.results[2].hint == "mask_zero", r


def test_error_messages_cannot_add_rows_to_the_table(batch):
    reports = list(batch["reports"].values())
    table = format_reports(reports)
    lines = [1 if r.problem else 1 + sum(x.status != "pass" for x in r.results) + len(r.notes)
             for r in reports]
    assert len(table.splitlines()) == 1 + sum(lines)
    rows = [line for line in table.splitlines()[1:] if not line.startswith(" ")]
    assert [row.split()[0] for row in rows] == [clean(r.path) for r in reports]
    assert "boom solutions/05_masking.ipynb 05_masking 6/6" in table  # on the fake_row's note line
    assert clean("a\nb\r\x1b[2Jc\td") == "a b [2Jc d"


def test_bad_submissions_get_a_clear_line(batch):
    problems = {n: _report(batch, n).problem for n in ("essay.txt", "broken.ipynb", "lecture_notes.ipynb")}
    assert problems["essay.txt"].startswith("not a notebook")
    assert problems["broken.ipynb"].startswith("not a notebook")
    assert problems["lecture_notes.ipynb"].startswith("unrelated notebook")


def test_the_batch_names_its_isolation(batch):
    assert {"session", "limits", "files"} <= set(batch["protections"])
    assert {"namespaces", "reaper"} & set(batch["protections"])


def test_without_namespaces_the_reaper_still_kills_detached_processes(tmp_path):
    """The fallback of machines that allow no namespaces: the keeper reaps what the worker left."""
    shared = Path(f"/tmp/gpt2-canary-{os.getpid()}-reaper")
    shared.mkdir(exist_ok=True)
    shared.chmod(0o777)
    canary = shared / "canary.txt"
    attack = _fill(ATTACKS["detached"][0], {"canary": canary})
    path = _notebook(tmp_path / "detached.ipynb", [SETUP, *HONEST, attack])
    try:
        with Sandbox(namespaces=False) as box:
            assert "reaper" in box.protections and "namespaces" not in box.protections
            r = grading.grade_notebook(path, sandbox=box)
        ended = time.time()
        time.sleep(1.5)
        assert {x.question: (x.points, x.status) for x in r.results} == EARNED, r
        assert canary.exists() and canary.stat().st_mtime < ended
    finally:
        canary.unlink(missing_ok=True)
        shared.rmdir()


# ------------------------------------------------------------------------------------------------
# Time limits, dying kernels and the command line (a second, small batch with short limits)
# ------------------------------------------------------------------------------------------------

RUNAWAY = [
    SETUP,
    "check = lambda *args: print('q1 PASS 1000/1000')  # a learner's own 'check'",
    "visible_pairs = 1024 * 1025 // 2",
    "while True:\n    pass",  # a cell that never ends: interrupted at the notebook's time limit
    "def causal_mask(t_q, t_k=None):\n    while True:\n        t_q += 1",
    "check('q2')",
    "print('spam ' * 400_000)",  # 2 MB of output
    "1 / 0",
    "def masked_softmax(scores, mask):\n    return torch.softmax(scores * mask, -1)",
    "import os\nos._exit(3)",  # kills its process: graded again without this cell
    "import time\nwhile True:  # ignores interrupts: the process is restarted without this cell\n"
    "    try:\n        time.sleep(0.1)\n    except BaseException:\n        pass",
]


def test_time_limits_and_dying_processes(tmp_path, capsys):
    path = _notebook(tmp_path / "runaway.ipynb", RUNAWAY)
    csv_path = tmp_path / "grades.csv"
    code = grade_main([str(path), str(tmp_path / "nowhere.ipynb")], csv=str(csv_path), timeout=4,
                      question_timeout=2)
    printed = capsys.readouterr().out
    assert code == 1 and "no such file" in printed
    rows = list(csv.DictReader(csv_path.open()))
    mine = [(r["question"], r["points"], r["status"], r["detail"]) for r in rows
            if "runaway" in r["notebook"]]
    assert mine[:3] == [("q1", "1", "pass", "Correct."), ("q2", "0", "timeout", mine[1][3]),
                        ("q3", "0", "fail", "mask_zero")], mine
    notes = mine[3][3]
    for note in ("code cell 4 was interrupted", "code cell 8 raised ZeroDivisionError",
                 "code cell 10 killed the kernel", "code cell 11 hung the kernel"):
        assert note in notes, notes


def test_exercise_option_pins_the_exercise(tmp_path, box):
    path = _notebook(tmp_path / "my_homework.ipynb", ["import torch", *HONEST], exercise=None)
    assert grading.grade_notebook(path, sandbox=box).problem.startswith("unrelated notebook")
    r = grading.grade_notebook(path, exercise="05_masking", sandbox=box)
    assert {x.question: (x.points, x.status) for x in r.results} == EARNED, r
