"""The trusted processes of the sandbox (see sandbox.py): the zygote, which imports the heavy
libraries once and forks a keeper per submission; the keeper, which isolates itself and forks
the worker; and the worker's setup before it runs the notebook (worker.py). No submission's code
has run in a process when this code runs in it.

The zygote imports only the grading engine (from an engine-only copy of the package) and the
libraries the package imports, never a chapter's module or a question bank: a worker imports the
course from its own copy (source.py), after its isolation is in place.
"""
from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import signal
import socket
import sys
from typing import Any

from gpt2_course.grading import isolation, wire

BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); "
        "from gpt2_course.grading.zygote import serve; serve(int(sys.argv[2]))")
PREWARM = ("IPython.core.interactiveshell", "traitlets.config")


def _keeper(job: dict[str, Any], conn: socket.socket) -> None:
    """Runs in the forked keeper: isolate, fork the worker, wait for it, kill what is left."""
    os.setsid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # interrupts are for the worker
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    job["tasks"] = 0 if job["uid"] is not None else isolation.tasks(os.getuid())
    if job["namespaces"]:
        isolation.unshare(own_user=os.geteuid() != 0)
    else:
        isolation.become_subreaper()
    worker = os.fork()
    if worker == 0:
        try:
            _worker(job, conn)
        finally:
            os._exit(0)
    conn.close()

    def stop(signum: int, frame: Any) -> None:
        with contextlib.suppress(OSError):
            os.kill(worker, signal.SIGKILL)

    signal.signal(signal.SIGTERM, stop)
    isolation.wait(worker, job["limits"])
    isolation.kill_children(os.getpid())  # with namespaces the kernel already killed them all
    os._exit(0)


def _setup(job: dict[str, Any]) -> list[str]:
    """Isolate this process (the worker), then import the course from its own copy; returns the
    limits that applied."""
    isolation.die_with_parent()
    if job["namespaces"]:
        isolation.enter_view(job["view"], job["stage"] + "/root")
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    applied = isolation.limit(job["limits"], job["tasks"])
    isolation.drop(job["uid"])
    os.chdir(job["cwd"])
    os.environ.clear()
    os.environ.update(job["env"])
    for name in [m for m in sys.modules if m == "gpt2_course" or m.startswith("gpt2_course.")]:
        del sys.modules[name]  # the engine the zygote imported: the worker imports its own copy
    sys.path[:] = [job["package"], *(p for p in sys.path if p != job["zygote_package"])]
    importlib.invalidate_caches()
    return applied


def _checks(job: dict[str, Any]) -> str | None:
    """What a preflight worker verifies of the isolation it was given (None: all holds)."""
    if (path := isolation.unreadable([job["package"], *job["paths"]])) is not None:
        return f"the worker's uid cannot read {path}"
    import gpt2_course.grading.worker  # noqa: F401  (its own copy imports)

    if job["uid"] is not None and (os.getuid(), os.geteuid()) != (job["uid"], job["uid"]):
        return f"it runs as uid {os.getuid()}, not {job['uid']}"
    if job["namespaces"]:
        for broken, what in ((os.getpid() != 1, "it is not alone in its PID namespace"),
                             (not isolation.only_loopback(), "it has a network"),
                             (os.path.exists(job["hidden"]), f"it sees the course's source {job['hidden']}"),
                             (os.access(job["package"], os.W_OK), "it can write its package copy")):
            if broken:
                return what
    return None


def _worker(job: dict[str, Any], conn: socket.socket) -> None:
    def say(*message: Any) -> None:
        wire.send(conn, wire.encode(message))

    try:
        applied = _setup(job)
        problem = _checks(job) if job["preflight"] else None
    except BaseException as exc:  # the machine refused: the grader's problem, not the submission's
        say("setup-failed", f"{type(exc).__name__}: {exc}")
        return
    if job["preflight"]:
        say(*(("setup-failed", problem) if problem else ("ready", applied)))
        return
    try:
        from gpt2_course.grading.worker import serve_submission
    except BaseException as exc:
        say("setup-failed", f"{type(exc).__name__}: {exc}")
        return
    serve_submission(conn)


def serve(fd: int) -> None:
    """The zygote: import everything once, then fork a keeper per request on the control socket."""
    ctl = socket.socket(fileno=fd)
    config = pickle.loads(wire.recv(ctl))
    for name in (*config["prewarm"], *PREWARM):  # what every worker needs, imported once
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    keepers: set[int] = set()

    def reap(signum: int, frame: Any) -> None:
        with contextlib.suppress(ChildProcessError):
            while (pid := os.waitpid(-1, os.WNOHANG)[0]):
                keepers.discard(pid)

    signal.signal(signal.SIGCHLD, reap)
    facts = {"root": os.geteuid() == 0, "linux": isolation.LINUX, "subreaper": isolation.become_subreaper(),
             "python": isolation.python_paths(config["exclude"], sys.path[0])}
    paths = [p for p in sys.path[1:] if os.path.exists(p)]  # what a worker must find, as here
    wire.send(ctl, pickle.dumps(("ready", facts)))
    while True:
        try:
            job = pickle.loads(wire.recv(ctl))
        except wire.FrameError:
            break
        job["view"].ro, job["paths"] = facts["python"], paths
        job["zygote_package"] = sys.path[0]
        ours, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            ctl.close()
            ours.close()
            try:
                _keeper(job, theirs)
            finally:
                os._exit(1)
        keepers.add(pid)
        theirs.close()
        wire.send_fd(ctl, pid, ours.fileno())
        ours.close()
    for pid in list(keepers):
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
    isolation.kill_children(os.getpid())
