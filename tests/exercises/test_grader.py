"""The instructor's grader: every solution and blank notebook, bad files, and one hostile notebook
per attack, graded in ONE batch (two at a time) with honest ones. Each hostile notebook must score
no more than its honest answers earn and leave the batch, the other rows and the machine alone.

Every attack leaves evidence that it ran against what it claims to attack: its last line sets q1
(`visible_pairs`) to a string such as 'ran tried=1 written=0', which the grader reports back in
q1's message ("expected a number, got 'ran ...'"). An attack whose evidence is missing did not
happen, and its test fails; one that needs a protection this machine lacks is skipped, naming
the protection and why it is off (the grader says the same in its first lines).
"""
from __future__ import annotations

import csv
import os
import re
import time
import warnings
from pathlib import Path

import nbformat
import pytest

import gpt2_course
from gpt2_course import grading
from gpt2_course.grading.batch import grade_main, grade_notebooks
from gpt2_course.grading.report import clean, format_reports
from gpt2_course.grading.sandbox import Sandbox

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(gpt2_course.__file__).resolve().parent
SOLUTIONS = sorted((ROOT / "exercises" / "solutions").glob("*.ipynb"))
BLANKS = [ROOT / "exercises" / p.name for p in SOLUTIONS]
MARKER = f"gpt2-detached-{os.getpid()}-{time.time_ns()}"

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
    # patching the engine and pickle in memory, and reloading the grading modules
    "patched_probe": ["""
import importlib, pickle, torch
import gpt2_course.grading as g
import gpt2_course.grading.judging as j, gpt2_course.grading.probing as p
torch.save = lambda *a, **k: None
pickle.dumps = lambda *a, **k: b'forged'
p.run_cases = j.probe = lambda *a: [524800]
p.plain = lambda x, d=0: 524800
importlib.reload(j); importlib.reload(p); importlib.reload(g)
visible_pairs = 'ran'"""],
    # rewriting the package on disk: its own copy, and the grader's
    "rewrite_disk": ["""
import pathlib, gpt2_course
tried = written = 0
for folder in (pathlib.Path(gpt2_course.__file__).parent, pathlib.Path('{package}')):
    for f in folder.rglob('*.py'):
        tried += 1
        try:
            f.write_text('raise SystemExit')
            written += 1
        except OSError:
            pass
visible_pairs = f'ran tried={min(tried, 1)} written={written}'"""],
    # a detached process that should outlive the notebook
    "detached": ["""
import subprocess, sys, time
loop = 'import time\\nwhile True:\\n    time.sleep(0.2)  # {marker}'
child = subprocess.Popen([sys.executable, '-c', loop],
                         start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(1.0)
visible_pairs = f'ran alive={int(child.poll() is None)}'"""],
    # reading the grader's /proc entries to find and run a classmate's answers
    "proc_snoop": ["""
import os, glob, json
pids = [p for p in os.listdir('/proc') if p.isdigit()]
found = []
for pid in pids:
    try:
        found.append(os.readlink(f'/proc/{pid}/cwd'))
        found += open(f'/proc/{pid}/cmdline').read().split(chr(0))
    except OSError:
        pass
books = set()
for where in found:
    if where and os.path.isdir(where) and os.path.realpath(where) != os.path.realpath(os.getcwd()):
        books |= set(glob.glob(os.path.join(where, '**', '*.ipynb'), recursive=True)[:200])
for nb in books:
    try:
        cells = json.load(open(nb))['cells']
    except Exception:
        continue
    for c in cells:
        src = ''.join(c['source'])
        if src.startswith('def masked_softmax') and 'inf' in src:
            exec(src)
visible_pairs = f'ran procs={min(len(pids), 1)} books={len(books)}'"""],
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
planted = deleted = 0
for path in ['{home}/planted.txt', '{scratch}/planted.txt']:  # checked on disk after the batch
    try:
        open(path, 'w').write('x')
        planted += path.startswith('{home}')  # in a view, the second lands in its throwaway copy
    except OSError:
        pass
for nb in glob.glob('{folder}/*.ipynb'):
    try:
        os.remove(nb)
        deleted += 1
    except OSError:
        pass
visible_pairs = f'ran leak={int(bool(leaked))} plant={planted} deleted={deleted}'"""],
    # switching the borrowed-answer watch off, then handing in the course's own function
    "borrow_switch_off": ["""
import contextlib, sys
import gpt2_course.grading.judging as j, gpt2_course.grading.probing as p
from gpt2_course.masking import causal_mask as course_mask
p.watch_calls = j.watch_calls = lambda *a, **k: contextlib.nullcontext([])
p.borrowed = j.borrowed = lambda *a, **k: None
def causal_mask(t_q, t_k=None):
    sys.setprofile(None)
    return course_mask(t_q, t_k)"""],
    # the course's function inside a callable object
    "borrow_callable": ["""
import gpt2_course
class Wrapper:
    def __init__(self, fn):
        self.fn = fn
    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)
causal_mask = Wrapper(gpt2_course.causal_mask)"""],
    # the interpreter's frames and every object in memory: anything of the course's answers?
    "frames": ["""
import gc, sys
seen = []
frame = sys._getframe()
while frame is not None:
    seen += list(frame.f_locals.values()) + list(frame.f_globals.values())
    frame = frame.f_back
seen += gc.get_objects()
def course(obj):
    try:
        module = str(getattr(obj, '__module__', '') or '')
        code = getattr(obj, '__code__', None)
        if 'Not available while this exercise is graded' in str(getattr(obj, '__doc__', '') or ''):
            return False
        answers = ('masked_softmax', 'causal_mask')
        return ('gpt2_course.exercises.' in module
                or type(obj).__name__ in ('Question', 'Mistake', 'Exercise')
                or (code is not None and '/exercises/' in code.co_filename)
                or (module.startswith('gpt2_course') and getattr(obj, '__name__', '') in answers))
    except Exception:
        return False
found = [o for o in seen if course(o)]
for obj in found:
    if getattr(obj, '__name__', '') == 'masked_softmax':
        masked_softmax = obj
visible_pairs = f'ran seen={min(len(seen), 1)} found={len(found)}'"""],
    # the worker's own reply function, found in memory, sending replies of its own
    "forge_reply": ["""
import gc
send = next(f for f in gc.get_objects()
            if type(f).__name__ == 'function' and f.__qualname__ == 'serve_submission.<locals>.send')
send('cell', 'ok', '')
send('probe', 'q1', 'ok', ('ran forged',))
send('probe', 'q3', 'ok', (0.0, 0.0, 0.0))"""],
    # the course's source and solutions, read from disk wherever they might be
    "read_source": ["""
import glob, json, os, time
found, disk = [], 0
for path in ['{package}/masking.py', '{package}/exercises/ch05_masking.py',
             '{repo}/exercises/solutions/05_masking.ipynb']:
    try:
        text = open(path).read()
    except OSError:
        continue
    found.append(path)
    if path.endswith('.ipynb'):
        text = '\\n'.join(''.join(c['source']) for c in json.loads(text)['cells'] if c['cell_type'] == 'code')
    try:
        exec(text)
    except Exception:
        pass
import gpt2_course
own = os.path.dirname(gpt2_course.__file__)
banks = [f for f in glob.glob(own + '/exercises/*.py') if not f.endswith('__init__.py')]
start = time.monotonic()
for top, dirs, files in os.walk('/'):
    dirs[:] = [d for d in dirs if top != '/' or d not in ('proc', 'sys', 'dev')]
    for f in files:
        if f in ('masking.py', 'ch05_masking.py', '05_masking.ipynb'):
            try:
                text = open(os.path.join(top, f)).read()
            except OSError:
                continue
            if 'def causal_mask' in text and 'Not available while this exercise is graded' not in text:
                disk += 1
    if time.monotonic() - start > 20:
        break
visible_pairs = f'ran found={len(found)} banks={len(banks)} disk={disk}'"""],
}
ATTACKS["syntax_error"] = ["def masked_softmax(scores, mask)\n    return scores.softmax(-1)"]  # not an attack
SCORES = {  # what each hostile notebook's honest answers earn, question by question
    **{a: {**EARNED, "q1": (0, "fail")} for a in ATTACKS},
    "fake_row": {**EARNED, "q2": (0, "error")},
    "borrow_switch_off": {**EARNED, "q2": (0, "borrowed")},
    "borrow_callable": {**EARNED, "q2": (0, "borrowed")},
    "forge_reply": {"q1": (0, "fail"), "q2": (0, "error"), "q3": (0, "error")},
    "syntax_error": EARNED,  # the honest q3 cell comes first; the broken one after it does not count
}
BORROWED = "it calls gpt2_course.masking.causal_mask"
EVIDENCE = {  # the question whose message proves the attack ran, and what it must say
    "int_subclass": ("q1", "got 7"),
    "patched_probe": ("q1", "got 'ran'"),
    "rewrite_disk": ("q1", "got 'ran tried=1 written=0'"),
    "detached": ("q1", "got 'ran alive=1'"),
    "proc_snoop": ("q1", "got 'ran procs=1 books=0'"),
    "files": ("q1", "got 'ran leak=0 plant=0 deleted=0'"),
    "borrow_switch_off": ("q2", BORROWED),
    "borrow_callable": ("q2", BORROWED),
    "frames": ("q1", "got 'ran seen=1 found=0'"),
    "forge_reply": ("q1", "got 'ran forged'"),
    "read_source": ("q1", "got 'ran found=0 banks=0 disk=0'"),
}
NEEDS = {  # attacks that only a protection stops, where the machine may lack it
    "rewrite_disk": ("view", "uid"), "proc_snoop": ("namespaces",), "files": ("view",),
    "read_source": ("view",), "detached": ("namespaces", "reaper"),
}


def _notebook(path: Path, cells: list[str], exercise: str | None = "05_masking") -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    if exercise:
        nb.metadata["gpt2_course"] = {"exercise": exercise}
    nbformat.write(nb, path)
    return path


def _fill(cell: str, values: dict[str, Path | str]) -> str:
    for key, value in values.items():
        cell = cell.replace("{" + key + "}", str(value))
    return cell


def _overwritten(folder: Path) -> list[str]:
    """The package's files that hold what the rewrite_disk attack writes (by content, not a digest
    of the folder: in a shared checkout other edits may land while the batch runs)."""
    return sorted(str(p) for p in folder.rglob("*.py") if p.read_bytes() == b"raise SystemExit")


def _marked() -> list[int]:
    """Processes of this machine whose command line holds MARKER (the detached attack's)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and entry != str(os.getpid()):
            try:
                if MARKER.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    pids.append(int(entry))
            except OSError:
                pass
    return pids


@pytest.fixture(scope="module")
def box():
    with Sandbox() as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def batch(tmp_path_factory, box):
    tmp = tmp_path_factory.mktemp("grading")
    subs, home = tmp / "submissions", tmp / "instructor_home"
    for d in (subs, home):
        d.mkdir(exist_ok=True)
    (tmp / "secret.txt").write_text("the exam key")
    fill = {"secret": tmp / "secret.txt", "home": home, "folder": subs, "package": PACKAGE, "repo": ROOT,
            "marker": MARKER, "scratch": box._root}
    hostile = {name: _notebook(subs / f"{name}.ipynb", [SETUP, *HONEST, *(_fill(c, fill) for c in cells)])
               for name, cells in ATTACKS.items()}
    (subs / "essay.txt").write_text("My answers are in the attached PDF.")
    (subs / "broken.ipynb").write_text('{"cells": [')
    _notebook(subs / "lecture_notes.ipynb", ["print('unrelated')"], exercise=None)
    honest_after = _notebook(subs / "zz_honest.ipynb", [SETUP, *HONEST])  # graded after the attacks
    solution_after = subs / "zz_solution.ipynb"  # and the course's solution: full marks
    solution_after.write_bytes((ROOT / "exercises" / "solutions" / "05_masking.ipynb").read_bytes())
    paths = [str(p) for p in [*SOLUTIONS, *BLANKS, *hostile.values(), subs / "essay.txt",
                              subs / "broken.ipynb", subs / "lecture_notes.ipynb", honest_after,
                              solution_after]]
    reports = grade_notebooks(paths, timeout=120, question_timeout=10, jobs=2, sandbox=box)
    time.sleep(1.0)
    yield {"reports": {Path(r.path).name if "/exercises/" not in r.path else r.path: r for r in reports},
           "tmp": tmp, "subs": subs, "home": home, "protections": box.protections, "off": box.off,
           "marked": _marked(), "scratch": box._root}


def _report(batch, name):
    return batch["reports"][name]


def _needs(batch, attack):
    wanted = NEEDS.get(attack, ())
    if wanted and not set(wanted) & set(batch["protections"]):
        why = "; ".join(f"{p}: {batch['off'].get(p, 'off')}" for p in wanted)
        pytest.skip(f"only {' or '.join(wanted)} stops {attack}, and here it is off ({why})")


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
    if attack in EVIDENCE:  # first: the attack really ran
        qid, said = EVIDENCE[attack]
        message = next(x.message for x in r.results if x.question == qid)
        if said not in message and "got 'ran" in message:
            _needs(batch, attack)  # it ran, and got through: only a protection that is off would stop it
        assert said in message, (attack, r)
    assert got == SCORES.get(attack, EARNED), (attack, r)
    assert sum(p for p, _ in got.values()) <= sum(p for p, _ in EARNED.values())


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
    r = _report(batch, "zz_solution.ipynb")
    assert r.points == r.max_points == 6 and r.notes == [], r


def test_the_attacks_work_where_nothing_stops_them(monkeypatch, tmp_path):
    """The pair of each attack on the course's own answers: run here, in the grader's process, where
    the package and its banks are whole, the same cells find and hand in the course's answers. So
    their zero in the batch comes from the sandbox, not from an attack that could never work."""
    from planted import define

    for attack in ("borrow_callable", "borrow_switch_off"):
        import gpt2_course.grading.judging as j
        import gpt2_course.grading.probing as p

        for module, name in ((p, "watch_calls"), (j, "watch_calls"), (p, "borrowed"), (j, "borrowed")):
            monkeypatch.setattr(module, name, getattr(module, name))  # the cell replaces them: undone
        answer = define(ATTACKS[attack][0])["causal_mask"]
        result = grading.check_answer("05_masking", "q2", answer, allow_course_code=True)
        assert result.status == "pass", (attack, result)
    with warnings.catch_warnings():  # the walk touches deprecated modules' attributes
        warnings.simplefilter("ignore")
        ns = define(ATTACKS["frames"][0])
    assert ns["visible_pairs"].startswith("ran seen=1 found=") and not ns["visible_pairs"].endswith("=0")
    assert grading.check_answer("05_masking", "q3", ns["masked_softmax"], allow_course_code=True).points == 2
    assert "def causal_mask" in (PACKAGE / "masking.py").read_text()  # what read_source reads, here
    assert "def masked_softmax" in (PACKAGE / "exercises" / "ch05_masking.py").read_text()
    assert "def masked_softmax" in (ROOT / "exercises" / "solutions" / "05_masking.ipynb").read_text()


def test_the_package_on_disk_is_untouched(batch):
    """The grader's own package (the attack also wrote at its copy: `written=0` in its evidence)."""
    assert _overwritten(PACKAGE) == []


def test_a_detached_process_dies_with_its_submission(batch):
    _needs(batch, "detached")
    assert "got 'ran alive=1'" in _report(batch, "detached.ipynb").results[0].message, "it never started"
    assert batch["marked"] == [], "the detached process outlived its submission"


def test_files_outside_the_submission_are_out_of_reach(batch):
    _needs(batch, "files")
    assert not (batch["home"] / "planted.txt").exists()  # the instructor's folder
    assert not (batch["scratch"] / "planted.txt").exists()  # the folder of every submission's folder
    assert {p.name for p in batch["subs"].glob("*.ipynb")} >= {f"{a}.ipynb" for a in ATTACKS}


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
    protections = set(batch["protections"])
    assert {"session", "limits", "files"} <= protections
    assert {"namespaces", "reaper"} & protections
    if os.geteuid() == 0 and os.sys.platform.startswith("linux"):  # root: nothing may be off silently
        assert {"namespaces", "view"} <= protections or "namespaces" in batch["off"], batch["off"]
    for name in {"namespaces", "view", "uid"} - protections:
        assert batch["off"][name], name  # each protection that is off says why


def test_without_namespaces_the_reaper_still_kills_detached_processes(tmp_path):
    """The fallback of machines that allow no namespaces: the keeper reaps what the worker left."""
    attack = _fill(ATTACKS["detached"][0], {"marker": MARKER + "-reaper"})
    path = _notebook(tmp_path / "detached.ipynb", [SETUP, *HONEST, attack])
    with Sandbox(namespaces=False) as box:
        if "reaper" not in box.protections:
            pytest.skip(f"no reaper here: {box.off.get('reaper')}")
        assert "namespaces" not in box.protections and "view" in box.off
        r = grading.grade_notebook(path, sandbox=box)
    time.sleep(1.0)
    assert {x.question: (x.points, x.status) for x in r.results} == {**EARNED, "q1": (0, "fail")}, r
    assert "got 'ran alive=1'" in r.results[0].message, "the detached process never started"
    survivors = [pid for pid in os.listdir("/proc") if pid.isdigit() and (MARKER + "-reaper").encode()
                 in Path(f"/proc/{pid}/cmdline").read_bytes()] if os.path.isdir("/proc") else []
    assert survivors == []


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
    out = capsys.readouterr()
    assert code == 1 and "no such file" in out.out
    assert out.err.startswith("isolation: session, limits, files"), out.err
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


def test_a_worker_that_cannot_start_is_the_graders_error(tmp_path, box, monkeypatch):
    """An environment failure (here: the worker's package copy is unreadable) marks the submission
    "not graded" and says why; it never becomes a verdict about the learner's code."""
    from gpt2_course.grading import source

    write = source.write

    def broken(files, root, data=()):
        folder = write(files, root, data)
        (folder / "gpt2_course" / "grading" / "worker.py").write_text("raise ImportError('no worker here')")
        return folder

    monkeypatch.setattr(source, "write", broken)
    path = _notebook(tmp_path / "honest.ipynb", [SETUP, *HONEST])
    r = grading.grade_notebook(path, sandbox=box)
    assert r.error and r.results == [] and r.problem.startswith("not graded:"), r
    assert "no worker here" in r.problem, r
    assert "infinite loop" not in str(r) and "timeout" not in str(r)
    row = grading.report.csv_rows(r)
    assert row[0][6] == "not graded", row
    assert re.search(r"not graded: .*ImportError", format_reports([r])), format_reports([r])
