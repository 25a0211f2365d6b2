"""The grader wherever an instructor runs it (issue 26): as root with the repository and its
environment under a private folder (`mktemp -d`, mode 0700, as /root is in a container), as an
unprivileged user (created here: a fresh uid), and on a system without Linux's calls (macOS,
simulated). In each place the course's reference solutions must grade full marks and nothing may
turn an environment failure into a verdict about the learner's code ("infinite loop").

The private folder holds the working tree through a bind mount, in a mount namespace of the test's
own (`unshare --mount`): the same files, at a path only root can enter. Each run is a subprocess
with a time limit; its last line of output is a JSON summary.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

from gpt2_course import grading
from gpt2_course.grading import sandbox as sandbox_module
from gpt2_course.grading.isolation import Limits
from gpt2_course.grading.sandbox import Sandbox

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = sorted((ROOT / "exercises" / "solutions").glob("*.ipynb"))
LIMIT = 540  # seconds for one subprocess that grades every solution
UID = 62000 + os.getpid() % 1000  # the unprivileged user: a uid that owns nothing here

# A submission that tries what the view must stop: writing its own package copy, reading a
# world-readable file in /tmp and the course's solutions. Its q1 says what it managed.
ESCAPE = """
import pathlib, gpt2_course
written = 0
for f in pathlib.Path(gpt2_course.__file__).parent.rglob('*.py'):
    try:
        f.write_text(f.read_text())
        written += 1
    except OSError:
        pass
def readable(path):
    try:
        return int(bool(open(path).read()))
    except OSError:
        return 0
visible_pairs = f'ran written={written} tmp={readable("{secret}")} solutions={readable("{solution}")}'
"""

# Runs inside the subprocess, from the repository's folder: grades the solutions and ESCAPE.
GRADE = """
import json, sys
from pathlib import Path
import gpt2_course
from gpt2_course.grading.batch import grade_notebooks
from gpt2_course.grading.sandbox import Sandbox
where, namespaces, escape = sys.argv[1], sys.argv[2] == '1', sys.argv[3]
assert gpt2_course.__file__.startswith(where + '/'), gpt2_course.__file__  # the copy under test
paths = sorted(str(p) for p in Path('exercises/solutions').glob('*.ipynb')) + [escape]
with Sandbox(namespaces=namespaces) as box:
    reports = grade_notebooks(paths, timeout=120, question_timeout=10, jobs=2, sandbox=box)
print(json.dumps({'uid': __import__('os').geteuid(), 'protections': box.protections, 'off': box.off,
                  'reports': [{'path': r.path, 'points': r.points, 'max': r.max_points, 'problem': r.problem,
                               'notes': r.notes, 'messages': [x.message for x in r.results]}
                              for r in reports]}))
"""


def _world() -> tuple[Path, Path, Path]:
    """A folder everyone can read, with a secret file and the escape notebook in it."""
    world = Path(tempfile.mkdtemp(prefix="gpt2-world-"))
    world.chmod(0o755)
    secret, escape = world / "secret.txt", world / "escape.ipynb"
    secret.write_text("readable by everyone")
    nb = nbformat.v4.new_notebook()
    code = ESCAPE.replace("{secret}", str(secret)).replace("{solution}", str(SOLUTIONS[0]))
    nb.cells = [nbformat.v4.new_code_cell(c) for c in ("import torch", code)]
    nb.metadata["gpt2_course"] = {"exercise": "05_masking"}
    nbformat.write(nb, escape)
    for f in (secret, escape):
        f.chmod(0o644)
    return world, secret, escape


def _blocked(path: str, uid: int) -> list[str]:
    """The folders above `path` that `uid` (no group of theirs) cannot pass through."""
    p = Path(os.path.realpath(path))
    return [str(d) for d in reversed(p.parents) if not os.stat(d).st_mode & stat.S_IXOTH
            and os.stat(d).st_uid != uid]


def _in_private_folder(uid: int | None, argv: list[str], env: dict[str, str] | None = None,
                       timeout: float = LIMIT) -> subprocess.CompletedProcess:
    """Run `argv` (a path starting with {clone} stands for the working tree) from the working tree
    bind-mounted under a fresh 0700 folder, in a mount namespace of our own, as root (uid None) or
    as `uid` (then the folder is theirs, and so is a Python they can run: a laptop's)."""
    private = Path(tempfile.mkdtemp(prefix="gpt2-private-"))
    clone, home, stage = private / "clone", private / "home", private / "stage"
    try:
        assert stat.S_IMODE(private.stat().st_mode) == 0o700
        for d in (clone, home, stage):
            d.mkdir()
        script = ["set -e", f"mount --bind {ROOT} {clone}"]
        user = []
        if uid is not None:
            os.chown(private, uid, uid)
            os.chown(home, uid, uid)
            prefix = os.path.realpath(sys.base_prefix)
            for i, blocked in enumerate(_blocked(prefix, uid)):
                script += [f"mkdir -p {stage}/{i}", f"mount --bind {prefix} {stage}/{i}",
                           f"mount -t tmpfs -o mode=0755 tmpfs {blocked}", f"mkdir -p {prefix}",
                           f"mount --move {stage}/{i} {prefix}"]
            user = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
        script.append(f'cd {clone} && exec "$@"')
        env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(home), "LANG": "C.UTF-8",
               **(env or {})}
        argv = [a.replace("{clone}", str(clone)) for a in argv]
        cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c", "\n".join(script), "sh",
               *user, *argv]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd="/")
    finally:
        mounted = [d for d in (clone, *stage.glob("*")) if os.path.ismount(d)]
        if mounted:  # the mounts must have died with their namespace: never delete through one
            raise RuntimeError(f"still mounted in the test's namespace: {mounted}; remove {private} by hand")
        shutil.rmtree(private, ignore_errors=True)


def _run(uid: int | None, namespaces: bool) -> dict:
    """Grade the solutions and the escape notebook from a private folder (see _in_private_folder)."""
    world, _, escape = _world()
    try:
        proc = _in_private_folder(uid, ["{clone}/.venv/bin/python", "-c", GRADE, "{clone}",
                                        "1" if namespaces else "0", str(escape)])
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(world, ignore_errors=True)


def _full_marks(result: dict) -> dict:
    """Every solution at full marks, with no note and no word of an infinite loop; the escape's
    report (by name)."""
    reports = {Path(r["path"]).name: r for r in result["reports"]}
    for sol in SOLUTIONS:
        r = reports[sol.name]
        assert r["problem"] is None and r["notes"] == [], r
        assert r["points"] == r["max"] == grading.get_exercise(sol.stem).max_points, r
    assert not any("infinite loop" in m for r in result["reports"] for m in r["messages"]), result
    return reports["escape.ipynb"]


def _can_mount() -> str | None:
    if os.geteuid() != 0:
        return "needs root: the test builds a private folder with a bind mount (run the suite as root)"
    if not sys.platform.startswith("linux") or not shutil.which("unshare") or not shutil.which("setpriv"):
        return "needs Linux's unshare and setpriv (util-linux)"
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True,
                           text=True, timeout=30)
    if probe.returncode != 0:  # a container without CAP_SYS_ADMIN: no mount namespace for the test
        return f"cannot make a mount namespace here ({probe.stderr.strip()[:200]})"
    return None


@pytest.mark.parametrize("namespaces", [True, False], ids=["namespaces", "no-namespaces"])
def test_root_grades_the_solutions_from_a_private_folder(namespaces):
    """The issue's report: as root in a 0700 clone every question said 'infinite loop', as the
    worker's uid could not import from .venv. With namespaces the view shows the worker the
    environment; without them the grader gives up the uid, and says so."""
    if (why := _can_mount()) is not None:
        pytest.skip(why)
    result = _run(None, namespaces)
    assert result["uid"] == 0
    escape = _full_marks(result)
    if namespaces and "namespaces" in result["protections"]:
        assert {"view", "uid"} <= set(result["protections"]), result
        assert "got 'ran written=0 tmp=0 solutions=0'" in escape["messages"][0], escape
    else:
        assert "namespaces" in result["off"], result
        if "uid" not in result["protections"]:  # the uid cannot read the environment: said, plainly
            assert "cannot read" in result["off"]["uid"], result["off"]
        assert "got 'ran written=" in escape["messages"][0], escape  # it ran; nothing stops it here


def test_an_unprivileged_user_grades_the_solutions():
    """A grader without root (an instructor's laptop): its own folder is 0700, submissions run as
    that user, and the view (a user namespace) keeps their package copy read-only and /tmp and the
    course's solutions out of sight."""
    if (why := _can_mount()) is not None:
        pytest.skip(why)
    result = _run(UID, True)
    assert result["uid"] == UID
    escape = _full_marks(result)
    assert "uid" not in result["protections"] and "not root" in result["off"]["uid"], result
    if "view" not in result["protections"]:
        assert result["off"]["view"], result  # no user namespaces here: said, not hidden
        pytest.skip(f"no view for an unprivileged grader here: {result['off']['namespaces']}")
    assert "got 'ran written=0 tmp=0 solutions=0'" in escape["messages"][0], escape


# ------------------------------------------------------------------------------------------------
# Off Linux: no prctl, unshare, mount or capset (macOS), simulated in the zygote
# ------------------------------------------------------------------------------------------------

NOT_LINUX = ("import sys; sys.path.insert(0, sys.argv[1]); "
             "from gpt2_course.grading import isolation; isolation.LINUX = False; "
             "isolation._libc = type('LibcWithoutLinuxCalls', (), {})(); "
             "from gpt2_course.grading.zygote import serve; serve(int(sys.argv[2]))")


def test_off_linux_the_grader_runs_with_time_and_memory_limits_and_says_what_is_off(monkeypatch):
    """macOS has no prctl, unshare or mount(2) as Linux has them (the grader once died at start with
    AttributeError there): it grades with what is left and says, once, what is off."""
    monkeypatch.setattr(sandbox_module, "BOOT", NOT_LINUX)
    solution = ROOT / "exercises" / "solutions" / "05_masking.ipynb"
    with Sandbox(limits=Limits(watchdog=True)) as box:
        described = box.describe()
        r = grading.grade_notebook(solution, sandbox=box)
    assert {"session", "limits", "files"} <= set(box.protections), described
    assert not {"namespaces", "view", "reaper"} & set(box.protections), described  # the patch took
    assert box.off["namespaces"] == "this system has none", described
    assert "outlives its submission" in box.off["reaper"], described
    assert r.problem is None and r.points == r.max_points, r
    assert described.startswith("isolation: session, limits, files")
    assert "off: namespaces: this system has none" in described


def test_a_grader_that_cannot_start_says_so_in_one_line(monkeypatch, capsys):
    """No zygote at all (here: its start is broken) is the grader's error, said in one line with
    exit code 2, never a traceback and never a row of grades."""
    monkeypatch.setattr(sandbox_module, "BOOT", "raise SystemExit('no zygote here')")
    code = grading.grade_main([str(SOLUTIONS[0])], timeout=10, question_timeout=2)
    out = capsys.readouterr()
    assert code == 2, out
    last = out.err.strip().splitlines()[-1]
    assert last.startswith("gpt2-course grade: the grader could not start"), out.err
    assert "Traceback" not in out.err and "points" not in out.out


def test_the_grader_suite_passes_as_an_unprivileged_user_from_a_private_folder():
    """tests/exercises/test_grader.py, every hostile notebook included, run by an unprivileged user
    from their own 0700 folder: the attacks that the view stops (the package copy rewritten, files
    read outside the submission) must fail there as they fail for root, or the suite says why."""
    if (why := _can_mount()) is not None:
        pytest.skip(why)
    proc = _in_private_folder(UID, ["{clone}/.venv/bin/python", "-m", "pytest", "-q", "-rs", "-p",
                                    "no:cacheprovider", "-W", "ignore::DeprecationWarning",
                                    "{clone}/tests/exercises/test_grader.py"])
    tail = proc.stdout[-4000:]
    assert proc.returncode == 0, tail + proc.stderr[-2000:]
    skipped = [line for line in proc.stdout.splitlines() if line.startswith("SKIPPED")]
    assert all("here it is off" in line for line in skipped), skipped  # only a protection said to be off
    assert re.search(r"\b\d+ passed", tail), tail


def test_on_windows_grade_says_to_use_wsl(monkeypatch):
    """No fork, no resource limits: the command says where it runs instead of failing on an import."""
    from gpt2_course import cli

    monkeypatch.setattr(cli.os, "name", "nt")
    with pytest.raises(SystemExit) as stop:
        cli.main(["grade", str(SOLUTIONS[0])])
    assert "run it in WSL" in str(stop.value.code)
