"""Isolation: every submission runs in its own process, started from a clean copy of the package.

The grader starts one *zygote* at the beginning of a batch: a process that imports torch, IPython
and this package from a private copy of the package's source (read into memory by the grader
before any submission runs), and nothing else. For each submission the zygote forks a keeper,
and the keeper forks the worker that runs the notebook (worker.py), so every submission starts
from the same pristine modules in memory and no submission can change what the next one loads.

What the worker gets, where the machine allows it (`protections` lists what applied):
- session:    its own process session; at the end the whole session is killed;
- limits:     RLIMIT_AS (memory), RLIMIT_CPU, RLIMIT_NPROC, RLIMIT_FSIZE, no core files;
- files:      a throwaway HOME, TMPDIR and working directory that hold only a copy of its notebook;
- uid:        (grader running as root, and a Python other users can run or namespaces) an
              unprivileged uid of its own: it cannot write the
              instructor's files, the package, the grades, or signal the grader;
- namespaces: (root) its own PID, mount and network namespaces: no network, no view of other
              processes, and everything it started dies with it, detached daemons included;
- reaper:     otherwise the keeper is the child subreaper of everything the worker starts and
              kills whatever is left, detached processes included.
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

from gpt2_course.grading.zygote import (
    BASE_UID, BOOT, HEADER, Limits, recv_exact, recv_frame, send_frame)


# ----------------------------------------------------------------------------------------------
# The grader's side
# ----------------------------------------------------------------------------------------------


class Dead(Exception):
    """The worker is gone (killed, crashed, or it closed the channel)."""


def snapshot(package: Path) -> dict[str, bytes]:
    """The package's Python source, read once: what every worker will import."""
    return {str(p.relative_to(package.parent)): p.read_bytes() for p in package.rglob("*.py")}


@dataclass
class Worker:
    """One submission's process, seen from the grader."""

    sock: socket.socket
    keeper: int
    nonce: str
    root: Path
    closed: bool = False

    def send(self, *message: Any) -> None:
        try:
            send_frame(self.sock, pickle.dumps(message))
        except OSError as exc:
            raise Dead(str(exc)) from None

    def reply(self, timeout: float) -> bytes | None:
        """The next reply's bytes, None when none came within `timeout` seconds."""
        self.sock.settimeout(max(timeout, 0.01))
        try:
            head = recv_exact(self.sock, HEADER.size)
        except TimeoutError:
            return None
        except (EOFError, OSError) as exc:
            raise Dead(str(exc) or "closed") from None
        size = HEADER.unpack(head)[0]
        if size > 512 * 2**20:
            raise Dead("a reply too large")
        self.sock.settimeout(30)
        try:
            return recv_exact(self.sock, size)
        except (EOFError, OSError) as exc:
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
        while time.monotonic() < deadline and Path(f"/proc/{self.keeper}").exists():
            if Path(f"/proc/{self.keeper}/stat").read_text().rpartition(")")[2].split()[0] == "Z":
                break
            time.sleep(0.02)
        with contextlib.suppress(OSError):
            os.killpg(self.keeper, signal.SIGKILL)
        shutil.rmtree(self.root, ignore_errors=True)


@dataclass
class Sandbox:
    """The zygote and the protections it can give (see the module docstring)."""

    limits: Limits = field(default_factory=Limits)
    namespaces: bool = True  # False: never, even where the machine allows them (to test the fallback)
    protections: tuple[str, ...] = ()
    _proc: subprocess.Popen | None = None
    _ctl: socket.socket | None = None
    _root: Path | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)  # one spawn request at a time

    def start(self) -> Sandbox:
        import gpt2_course

        self._root = Path(tempfile.mkdtemp(prefix="gpt2-grade-"))
        os.chmod(self._root, 0o711)
        for rel, data in snapshot(Path(gpt2_course.__file__).parent).items():
            (self._root / "pkg" / rel).parent.mkdir(parents=True, exist_ok=True)
            (self._root / "pkg" / rel).write_bytes(data)
        for d in [self._root / "pkg", *(self._root / "pkg").rglob("*")]:
            os.chmod(d, 0o755 if d.is_dir() else 0o644)
        ours, theirs = socket.socketpair()
        self._proc = subprocess.Popen(
            [sys.executable, "-I", "-c", BOOT, str(self._root / "pkg"), str(theirs.fileno()),
             "1" if self.namespaces else "0"],
            pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, start_new_session=True,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OMP_NUM_THREADS": "1",
                 "PYTHONHASHSEED": "0", "HOME": str(self._root), "MPLBACKEND": "Agg"})
        theirs.close()
        self._ctl = ours
        self._ctl.settimeout(600)
        _, namespaces, own_uid = pickle.loads(recv_frame(self._ctl))
        self.protections = ("session", "limits", "files", *(("uid",) if own_uid else ()),
                            *(("namespaces",) if namespaces else ("reaper",)))
        return self

    def spawn(self, exercise_id: str, notebook: Path, slot: int = 0) -> Worker:
        assert self._ctl is not None and self._root is not None
        root = Path(tempfile.mkdtemp(prefix="sub-", dir=self._root))
        os.chmod(root, 0o711)
        uid = BASE_UID + slot if "uid" in self.protections else None
        for sub in ("work", "home", "tmp"):
            (root / sub).mkdir(mode=0o700)
            if uid is not None:
                os.chown(root / sub, uid, uid)
        copy = root / "work" / notebook.name
        shutil.copyfile(notebook, copy)
        if uid is not None:
            os.chown(copy, uid, uid)
        nonce = os.urandom(16).hex()
        env = {"HOME": str(root / "home"), "TMPDIR": str(root / "tmp"), "PATH": "/usr/bin:/bin",
               "LANG": "C.UTF-8", "GPT2_COURSE_GRADING": "1", "PYTHONHASHSEED": "0",
               "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
        job = {"exercise": exercise_id, "nonce": nonce, "uid": uid, "cwd": str(root / "work"),
               "stage": str(root),
               "env": env, "limits": self.limits}
        with self._lock:
            send_frame(self._ctl, pickle.dumps(job))
            msg, fds, _, _ = socket.recv_fds(self._ctl, HEADER.size, 1)
        return Worker(socket.socket(fileno=fds[0]), HEADER.unpack(msg)[0], nonce, root)

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
