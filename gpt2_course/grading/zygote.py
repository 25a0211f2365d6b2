"""The trusted processes of the sandbox (see sandbox.py): the zygote, which imports everything once
and forks a keeper per submission; the keeper, which isolates itself and forks the worker; and
the worker's setup before it runs the notebook (worker.py). No submission's code has run in a
process when this code runs in it."""
from __future__ import annotations

import contextlib
import ctypes
import os
import pickle
import resource
import signal
import socket
import struct
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HEADER = struct.Struct(">Q")
CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x20000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 2, 4, 8, 4096, 8192, 1 << 14, 1 << 18
HIDDEN = ("/root", "/home")  # with namespaces, the worker sees empty homes (the Python it runs excepted)
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
BASE_UID = 61000  # workers of a root grader run as BASE_UID + slot
BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); "
        "from gpt2_course.grading.zygote import serve; serve(int(sys.argv[2]), sys.argv[3] == '1')")


@dataclass
class Limits:
    memory: int = 6 * 2**30  # bytes of address space
    cpu: int = 600  # CPU seconds for the whole submission
    processes: int = 256  # processes and threads of the worker's uid (a fresh uid: its own)
    file_size: int = 64 * 2**20  # bytes per file written


# ----------------------------------------------------------------------------------------------
# The zygote, its keepers and workers (trusted code: no submission has run in these processes)
# ----------------------------------------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        raise OSError(ctypes.get_errno(), f"{what}: {os.strerror(ctypes.get_errno())}")


def _namespaces_work() -> bool:
    """Whether this process may create PID, mount and network namespaces (tried in a child)."""
    pid = os.fork()
    if pid == 0:
        os._exit(0 if _libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET) == 0 else 1)
    return os.waitpid(pid, 0)[1] == 0


def _python_readable_by_all() -> bool:
    """Whether another uid can run this Python (every directory above it lets others through)."""
    for prefix in {sys.base_prefix, sys.prefix}:
        path = Path(os.path.realpath(prefix))
        if not all(os.stat(d).st_mode & 0o001 for d in [path, *path.parents]):
            return False
    return True


def _kill_children(me: int) -> None:
    """SIGKILL every process whose parent is `me` until none is left (orphans are re-parented to
    a subreaper as their parents die)."""
    for _ in range(50):
        kids = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError):
                    stat = Path(f"/proc/{entry}/stat").read_text()
                    if int(stat.rpartition(")")[2].split()[1]) == me:
                        kids.append(int(entry))
        if not kids:
            return
        for kid in kids:
            with contextlib.suppress(OSError):
                os.kill(kid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        time.sleep(0.02)


def _tasks(uid: int) -> int:
    """Processes and threads running as `uid` now (RLIMIT_NPROC counts them all)."""
    n = 0
    for entry in os.listdir("/proc"):
        with contextlib.suppress(OSError):
            if entry.isdigit() and os.stat(f"/proc/{entry}").st_uid == uid:
                n += len(os.listdir(f"/proc/{entry}/task"))
    return n


def _limit(lim: Limits, fresh_uid: bool) -> None:
    # Under the grader's own uid the limit must leave room for the processes it already has.
    processes = lim.processes + (0 if fresh_uid else _tasks(os.getuid()))
    for what, value in ((resource.RLIMIT_AS, lim.memory), (resource.RLIMIT_CPU, lim.cpu),
                        (resource.RLIMIT_NPROC, processes), (resource.RLIMIT_FSIZE, lim.file_size),
                        (resource.RLIMIT_CORE, 0)):
        soft, hard = resource.getrlimit(what)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(what, (value, value if what != resource.RLIMIT_CPU else value + 5))


def _keeper(job: dict[str, Any], conn: socket.socket, namespaces: bool) -> None:
    """Runs in the forked keeper: isolate, fork the worker, wait for it, kill what is left."""
    os.setsid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # interrupts are for the worker
    if namespaces:
        _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET), "unshare")
    else:
        _check(_libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "prctl")
    worker = os.fork()
    if worker == 0:
        try:
            _worker(job, conn, namespaces)
        finally:
            os._exit(0)
    conn.close()

    def stop(signum: int, frame: Any) -> None:
        with contextlib.suppress(OSError):
            os.kill(worker, signal.SIGKILL)

    signal.signal(signal.SIGTERM, stop)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(worker, 0)
    _kill_children(os.getpid())  # with namespaces the kernel already killed them all
    os._exit(0)


def _hide_homes(stage: Path) -> None:
    """Mount empty directories over /root and /home, bringing back only the Python installation
    (an interpreter installed under a home directory must stay readable)."""
    keep = sorted({os.path.realpath(p) for p in (sys.base_prefix, sys.prefix, sys.exec_prefix)})
    keep = [p for p in keep if p.startswith(tuple(h + "/" for h in HIDDEN))]
    keep = [p for p in keep if not any(p.startswith(q + "/") for q in keep)]
    for i, p in enumerate(keep):
        (stage / str(i)).mkdir()
        _check(_libc.mount(p.encode(), str(stage / str(i)).encode(), None, MS_BIND | MS_REC, None), "bind")
    for h in HIDDEN:
        if os.path.isdir(h):
            _check(_libc.mount(b"tmpfs", h.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=0755"), "tmpfs")
    for i, p in enumerate(keep):
        os.makedirs(p, exist_ok=True)
        _check(_libc.mount(str(stage / str(i)).encode(), p.encode(), None, MS_MOVE, None), "move")


def _worker(job: dict[str, Any], conn: socket.socket, namespaces: bool) -> None:
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if namespaces:  # PID 1 of a fresh namespace: a /proc that shows only this submission
        _check(_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount /")
        _check(_libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mount /proc")
        _hide_homes(Path(job["stage"]))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _limit(job["limits"], fresh_uid=job["uid"] is not None)
    if job["uid"] is not None:
        os.setgroups([])
        os.setgid(job["uid"])
        os.setuid(job["uid"])
    os.chdir(job["cwd"])
    os.environ.clear()
    os.environ.update(job["env"])
    from gpt2_course.grading.worker import serve_submission

    serve_submission(conn, job["exercise"], job["nonce"])


def serve(fd: int, allow_namespaces: bool = True) -> None:
    """The zygote: import everything once, then fork a keeper per request on the control socket."""
    ctl = socket.socket(fileno=fd)
    import IPython.core.interactiveshell  # noqa: F401  (what every worker needs, imported once)
    import torch  # noqa: F401

    import gpt2_course.grading.worker  # noqa: F401
    from gpt2_course.grading.questions import exercise_ids, get_exercise

    for ex in exercise_ids():
        get_exercise(ex)
    namespaces = allow_namespaces and os.geteuid() == 0 and _namespaces_work()
    with contextlib.suppress(OSError):
        _check(_libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "prctl")  # keepers' orphans
    # A uid of its own needs a Python that uid can run: with namespaces the homes are remounted.
    own_uid = os.geteuid() == 0 and (namespaces or _python_readable_by_all())
    send_frame(ctl, pickle.dumps(("ready", namespaces, own_uid)))
    keepers: set[int] = set()
    while True:
        try:
            job = pickle.loads(recv_frame(ctl))
        except EOFError:
            break
        with contextlib.suppress(ChildProcessError):
            while (pid := os.waitpid(-1, os.WNOHANG)[0]):
                keepers.discard(pid)
        ours, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            ctl.close()
            ours.close()
            try:
                _keeper(job, theirs, namespaces)
            finally:
                os._exit(1)
        keepers.add(pid)
        theirs.close()
        socket.send_fds(ctl, [HEADER.pack(pid)], [ours.fileno()])
        ours.close()
    for pid in keepers:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
    _kill_children(os.getpid())


def send_frame(sock: socket.socket, data: bytes) -> None:
    sock.sendall(HEADER.pack(len(data)) + data)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def recv_frame(sock: socket.socket) -> bytes:
    return recv_exact(sock, HEADER.unpack(recv_exact(sock, HEADER.size))[0])
