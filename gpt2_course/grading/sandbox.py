"""Isolation, the grader's side: every submission runs in its own process, which imports its own
copy of the package, and gets every protection this machine allows; the grader says which.

The grader starts one *zygote* at the beginning of a batch: a process that imports torch, IPython
and the grading engine, and nothing of the course. For each submission the zygote forks a keeper,
and the keeper forks the worker that runs the notebook (worker.py) after isolating it
(isolation.py): so every submission starts from the same modules in memory, with a copy of the
package where the exercise's answers are stubs (source.py), and none can change what the next
one loads.

Before the first submission, `start` runs a preflight worker with the strongest isolation the
machine might allow, and steps down until one works, checked from inside (the worker's uid, its
PID namespace, no network, the course's source out of sight, the Python installation readable).
`protections` lists what applied; `off` says, once, what did not and why. A worker that then fails
to start is the grader's error: its submission is "not graded", never scored.

    session     its own process session; at the end the whole session is killed
    limits      memory, CPU time, processes, file size, no core files
    files       a throwaway home, temporary and working folder that hold only a copy of its notebook
    namespaces  (Linux) its own PID and network namespaces: no network, no other processes, and
                everything it started dies with it, detached daemons included
    view        (Linux) a root folder with only the system, the Python installation and its own
                folders, read-only but its own: not your files, the repository, other submissions
    uid         (a root grader) an unprivileged uid of its own: it owns nothing, signals nothing
    reaper      (without namespaces) the keeper kills whatever the worker left, detached included
"""
from __future__ import annotations

import contextlib
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpt2_course.grading import isolation, source, wire
from gpt2_course.grading.isolation import BASE_UID, Limits, View
from gpt2_course.grading.zygote import BOOT

PREFLIGHT_TIMEOUT = 60.0  # seconds a preflight worker may take


class Dead(Exception):
    """The worker is gone (killed, crashed, or it closed the channel)."""


class GraderFailure(Exception):
    """The grader could not run a submission: its own error, never the submission's."""


def _scratch() -> str:
    """Where the submissions' folders go: the temporary folder, unless another user cannot pass
    through it (a private TMPDIR, as macOS gives each user): then /tmp, so that a worker of its own
    uid can enter its folder."""
    tmp = tempfile.gettempdir()
    if isolation.passable(tmp) or not isolation.passable("/tmp"):
        return tmp
    return "/tmp"


@dataclass
class Worker:
    """One submission's process, seen from the grader."""

    sock: socket.socket
    keeper: int
    root: Path
    closed: bool = False

    def send(self, *message: Any) -> None:
        try:
            wire.send(self.sock, pickle.dumps(message))
        except (OSError, wire.FrameError) as exc:
            raise Dead(str(exc)) from None

    def reply(self, timeout: float) -> bytes | None:
        """The next reply's bytes, None when none began within `timeout` seconds."""
        try:
            return wire.recv(self.sock, max(timeout, 0.01))
        except (OSError, wire.FrameError) as exc:
            raise Dead(str(exc) or "closed") from None

    def interrupt(self) -> None:
        with contextlib.suppress(OSError):
            os.killpg(self.keeper, signal.SIGINT)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(OSError):
            os.kill(self.keeper, signal.SIGTERM)  # the keeper kills the worker and what it left
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and isolation.running(self.keeper):
            time.sleep(0.02)
        with contextlib.suppress(OSError):
            os.killpg(self.keeper, signal.SIGKILL)
        shutil.rmtree(self.root, ignore_errors=True)


@dataclass(frozen=True)
class Isolation:
    namespaces: bool  # namespaces and the view
    uid: bool  # a uid of its own (root only)


@dataclass
class Sandbox:
    """The zygote and the protections it gives (see the module docstring). `namespaces=False` or
    `uid=False` never uses them, even where the machine allows (to test the fallbacks)."""

    limits: Limits = field(default_factory=Limits)
    namespaces: bool = True
    uid: bool = True
    protections: tuple[str, ...] = ()
    off: dict[str, str] = field(default_factory=dict)  # protection -> why it is off
    isolation: Isolation = Isolation(False, False)
    _facts: dict[str, Any] = field(default_factory=dict)
    _files: dict[str, bytes] = field(default_factory=dict)
    _sources: dict[str | None, dict[str, bytes]] = field(default_factory=dict)  # per exercise
    _proc: subprocess.Popen | None = None
    _ctl: socket.socket | None = None
    _root: Path | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)  # one spawn request at a time

    @property
    def package(self) -> Path:
        """The package the grader runs (and hides from the workers)."""
        import gpt2_course

        return Path(gpt2_course.__file__).resolve().parent

    def _hidden(self) -> list[str]:
        repo = self.package.parent
        checkout = (repo / "pyproject.toml").exists() or (repo / ".git").exists()
        return [str(self.package), *([str(repo)] if checkout else [])]

    def start(self) -> Sandbox:
        self._root = Path(tempfile.mkdtemp(prefix="gpt2-grade-", dir=_scratch()))
        os.chmod(self._root, 0o711)
        self._files = source.snapshot(self.package)
        base = source.write(source.worker_source(self._files, None), self._root / "engine")
        ours, theirs = socket.socketpair()
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0",
               "HOME": str(self._root), "MPLBACKEND": "Agg", "OBJC_DISABLE_INITIALIZE_FORK_SAFETY": "YES"}
        self._proc = subprocess.Popen([sys.executable, "-I", "-c", BOOT, str(base), str(theirs.fileno())],
                                      pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                                      start_new_session=True, env=env)
        theirs.close()
        self._ctl = ours
        try:
            wire.send(ours, pickle.dumps({"prewarm": source.imports(self._files), "exclude": self._hidden()}))
            data = wire.recv(ours, 600)
            if data is None:
                raise wire.FrameError("it did not answer in 600 s")
        except (OSError, wire.FrameError) as exc:
            self.close()
            raise GraderFailure(f"the grader's zygote did not start ({exc})") from None
        self._facts = pickle.loads(data)[1]
        self._choose()
        return self

    def _candidates(self) -> list[Isolation]:
        root, linux = self._facts["root"], self._facts["linux"]
        uids = [True, False] if root and self.uid else [False]
        ns = [True, False] if linux and self.namespaces else [False]
        return [Isolation(n, u) for n in ns for u in uids]

    def _choose(self) -> None:
        """Preflight: the strongest isolation that works here, checked from inside the worker."""
        failed: dict[Isolation, str] = {}
        for candidate in self._candidates():
            self.isolation = candidate
            if (why := self._preflight()) is None:
                break
            failed[candidate] = why
        else:
            self.close()
            raise GraderFailure(f"no worker could start, even without isolation ({why})")
        iso, facts = self.isolation, self._facts
        if not iso.namespaces:
            tried = [why for c, why in failed.items() if c.namespaces]
            self.off["namespaces"] = (tried[-1] if tried else "switched off" if facts["linux"] else
                                      "this system has none")
            self.off["view"] = ("without namespaces a submission can read and write what the grader's user "
                                "can, the course's source included (an answer could be copied from it)")
        if not iso.uid:
            tried = [why for c, why in failed.items() if c.uid and c.namespaces == iso.namespaces]
            root_left = "submissions run as root without capabilities" + (
                ", in their read-only view" if iso.namespaces else " and can write files root owns; let "
                "other users through the folders above the environment (chmod o+x) to get a uid of their own")
            self.off["uid"] = (f"{tried[0]}; {root_left}" if tried else "switched off" if facts["root"] else
                               "the grader is not root: submissions run as you")
        reaper = not iso.namespaces and facts["subreaper"]
        if not iso.namespaces and not reaper:
            self.off["reaper"] = "a process that starts its own session outlives its submission"
        self.protections = ("session", "limits", "files", *(("namespaces", "view") if iso.namespaces else ()),
                            *(("uid",) if iso.uid else ()), *(("reaper",) if reaper else ()))

    def _preflight(self) -> str | None:
        """None when a worker starts with `self.isolation` and finds it in place, else why not."""
        try:
            worker = self.spawn(None, None, preflight=True)
        except GraderFailure as exc:
            return str(exc)
        try:
            data = worker.reply(PREFLIGHT_TIMEOUT)
            msg = wire.decode(data) if data is not None else ("setup-failed", "no answer")
            return None if msg[0] == "ready" else str(msg[1])
        except (Dead, wire.BadMessage) as exc:
            return f"the worker died ({exc})"
        finally:
            worker.close()

    def _source(self, exercise_id: str | None) -> dict[str, bytes]:
        if exercise_id not in self._sources:
            self._sources[exercise_id] = source.worker_source(self._files, exercise_id)
        return self._sources[exercise_id]

    def spawn(self, exercise_id: str | None, notebook: Path | None, slot: int = 0,
              preflight: bool = False) -> Worker:
        """Start a worker for one submission; GraderFailure when the zygote cannot."""
        assert self._ctl is not None and self._root is not None
        iso = self.isolation
        root = Path(tempfile.mkdtemp(prefix="sub-", dir=self._root))
        os.chmod(root, 0o711)
        uid = BASE_UID + slot if iso.uid else None
        for sub in ("work", "home", "tmp", "root"):
            (root / sub).mkdir(mode=0o700)
            if uid is not None and sub != "root":
                os.chown(root / sub, uid, uid)
        package = source.write(self._source(exercise_id), root / "pkg", source.data_dirs(self.package))
        if notebook is not None:
            copy = root / "work" / notebook.name
            shutil.copyfile(notebook, copy)
            if uid is not None:
                os.chown(copy, uid, uid)
        env = {"HOME": str(root / "home"), "TMPDIR": str(root / "tmp"), "PATH": "/usr/bin:/bin",
               "LANG": "C.UTF-8", "USER": "student", "LOGNAME": "student", "GPT2_COURSE_GRADING": "1",
               "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
        view = View(hide=self._hidden(), data=[str(d) for d in source.data_dirs(self.package)],
                    rw=[str(root / s) for s in ("work", "home", "tmp")], package=str(package))
        job = {"exercise": exercise_id, "preflight": preflight, "namespaces": iso.namespaces, "uid": uid,
               "view": view, "stage": str(root), "cwd": str(root / "work"), "env": env, "limits": self.limits,
               "package": str(package), "hidden": str(self.package / "__init__.py")}
        try:
            with self._lock:
                wire.send(self._ctl, pickle.dumps(job))
                keeper, fd = wire.recv_fd(self._ctl, 60)
        except (OSError, wire.FrameError) as exc:
            shutil.rmtree(root, ignore_errors=True)
            raise GraderFailure(f"the grader's zygote is gone ({exc})") from None
        return Worker(socket.socket(fileno=fd), keeper, root)

    def describe(self) -> str:
        """What applied and what did not, in two lines (the first line of every grading run)."""
        lines = [f"isolation: {', '.join(self.protections)}"]
        lines += [f"off: {name}: {why}" for name, why in self.off.items()]
        return "\n".join(lines)

    def close(self) -> None:
        if self._ctl is not None:
            self._ctl.close()
        if self._proc is not None:
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait()
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

