"""The operating system's side of the sandbox: what this machine allows, and the calls that isolate a
submission's process. Everything here runs in trusted processes (the zygote, a keeper, a worker
before its notebook's first cell); zygote.py decides when.

On Linux, a worker gets, where the machine allows:
- namespaces: its own mount, PID and network namespaces (and, for a grader that is not root, its
  own user namespace): no network, no other process in sight, and everything it starts dies
  with it;
- view: in that mount namespace, a root folder that holds only the system's programs and
  libraries, the Python installation and the package copy (all read-only), its own folders and
  an empty /tmp of its own: not the instructor's files, the course's repository or its solutions;
- uid: (a root grader) a user id of its own, 61000 + slot, that owns nothing;
- no capabilities: it keeps none, and can gain none (no_new_privs, an empty bounding set).
Everywhere: its own session, resource limits, and a throwaway home, temporary and working folder.
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

LINUX = sys.platform.startswith("linux")
BASE_UID = 61000  # workers of a root grader run as BASE_UID + slot
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC = 1024, 2048, 4096, 1 << 14
MS_PRIVATE, MS_RELATIME = 1 << 18, 1 << 21
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 24, 36, 38
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(os.uname().machine)
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
DEVICES = ("null", "zero", "full", "random", "urandom")


@dataclass
class Limits:
    memory: int = 6 * 2**30  # bytes of address space (Linux) or resident memory (elsewhere)
    cpu: int = 600  # CPU seconds for the whole submission
    processes: int = 256  # processes and threads of the worker's uid, beyond those it had
    file_size: int = 64 * 2**20  # bytes per file written
    watchdog: bool = not LINUX  # memory by polling the resident size (where RLIMIT_AS is not enforced)


@dataclass
class View:
    """The folders a worker sees, at their own paths (see the module docstring)."""

    ro: list[str] = field(default_factory=list)  # the system and the Python installation
    hide: list[str] = field(default_factory=list)  # emptied: the course's package and repository
    data: list[str] = field(default_factory=list)  # read-only again inside a hidden one (the weights)
    rw: list[str] = field(default_factory=list)  # the worker's own folders
    package: str = ""  # the worker's copy of the package, read-only


class Unsupported(OSError):
    """This machine does not offer the call (another system, an old kernel, a missing symbol)."""


_libc = ctypes.CDLL(None, use_errno=True)


def _call(name: str, *args: object) -> int:
    fn = getattr(_libc, name, None)
    if fn is None:  # macOS has no prctl, unshare or mount(2) as Linux has them
        raise Unsupported(errno.ENOSYS, f"{name}: not on this system")
    rc = fn(*args)
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{name}: {os.strerror(err)}")
    return rc


def _prctl(option: int, arg: int) -> None:
    _call("prctl", option, arg, 0, 0, 0)


def die_with_parent() -> bool:
    with contextlib.suppress(OSError):
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        return True
    return False


def become_subreaper() -> bool:
    """Orphans of this process's descendants become its children, so it can kill them (Linux)."""
    with contextlib.suppress(OSError):
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        return True
    return False


# ----------------------------------------------------------------------------------------------
# Processes: limits, children, what is still running
# ----------------------------------------------------------------------------------------------


def tasks(uid: int) -> int:
    """Processes and threads running as `uid` now (RLIMIT_NPROC counts them all); 0 without /proc."""
    n = 0
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            with contextlib.suppress(OSError):
                if entry.isdigit() and os.stat(f"/proc/{entry}").st_uid == uid:
                    n += len(os.listdir(f"/proc/{entry}/task"))
    return n


def limit(lim: Limits, already: int) -> list[str]:
    """Apply the limits (RLIMIT_NPROC leaves room for the `already` tasks of this uid); return
    what applied."""
    wanted = [("cpu", resource.RLIMIT_CPU, lim.cpu),
              ("processes", resource.RLIMIT_NPROC, lim.processes + already),
              ("file size", resource.RLIMIT_FSIZE, lim.file_size), ("core files", resource.RLIMIT_CORE, 0)]
    if not lim.watchdog:
        wanted.append(("memory", resource.RLIMIT_AS, lim.memory))
    applied = ["memory"] if lim.watchdog else []
    for name, what, value in wanted:
        with contextlib.suppress(ValueError, OSError):
            hard = resource.getrlimit(what)[1]
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(what, (value, value + 5 if what == resource.RLIMIT_CPU else value))
            applied.append(name)
    return applied


def resident(pgid: int) -> int:
    """Bytes resident in the processes of group `pgid` (`ps`, which every Unix has)."""
    out = subprocess.run(["ps", "-A", "-o", "pgid=,rss="], capture_output=True, text=True, check=False).stdout
    return 1024 * sum(int(rss) for group, rss in (line.split() for line in out.splitlines() if line.strip())
                      if int(group) == pgid)


def wait(pid: int, lim: Limits) -> None:
    """Wait for the worker to end; with the watchdog, kill it once its group's memory is over."""
    if not lim.watchdog:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        return
    while os.waitpid(pid, os.WNOHANG)[0] == 0:
        if resident(os.getpgid(pid)) > lim.memory:
            with contextlib.suppress(OSError):
                os.killpg(os.getpgid(pid), signal.SIGKILL)
        time.sleep(0.25)


def kill_children(me: int) -> None:
    """SIGKILL every process whose parent is `me` until none is left (a subreaper's orphans come
    back to it as their parents die). Without /proc, the process group is all one can reach."""
    if not os.path.isdir("/proc"):
        with contextlib.suppress(OSError):
            os.killpg(os.getpgid(me), signal.SIGKILL)
        return
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


def running(pid: int) -> bool:
    """Whether `pid` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    return True


# ----------------------------------------------------------------------------------------------
# Namespaces and the view (Linux)
# ----------------------------------------------------------------------------------------------


def unshare(own_user: bool) -> None:
    """Give this process (the keeper) new mount, PID and network namespaces; its next child is PID 1
    of the new PID namespace. Without root, a user namespace comes first, with this process's uid
    and gid mapped to themselves: the mounts a worker makes are then its own, and no other user's."""
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | (CLONE_NEWUSER if own_user else 0)
    _call("unshare", flags)
    if own_user:
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = (lambda s: None if s is None else s.encode())
    _call("mount", enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data))


def _locked_flags(path: str) -> int:
    """The flags a read-only remount must keep (a user namespace may not drop them)."""
    f = os.statvfs(path).f_flag
    out = f & (MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME)
    return out | (MS_RELATIME if f & 4096 else 0)


def _bind(source: str, target: str, writable: bool = False) -> None:
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        Path(target).touch()
    _mount(source, target, None, MS_BIND | MS_REC)
    if not writable:
        _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | _locked_flags(source))


def _inside(path: str, folders: list[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def enter_view(view: View, new: str) -> None:
    """Build the view under `new` (an empty folder) and make it this process's root folder. Runs in
    the worker, PID 1 of its namespaces, before it drops its privileges."""
    os.umask(0o022)  # the folders made here must let the worker's uid through
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64m")
    os.makedirs(new + "/tmp")  # a /tmp of its own, before anything below it is bound there
    _mount("tmpfs", new + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m")
    for path in SYSTEM:
        if os.path.islink(path):
            os.symlink(os.readlink(path), new + path)
        elif os.path.isdir(path) and not _inside(path, view.ro):
            _bind(path, new + path)
    for path in sorted(view.ro, key=len):
        _bind(path, new + path)
    for path in view.hide:
        if os.path.isdir(new + path):
            _mount("tmpfs", new + path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
            for again in [p for p in view.ro if _inside(p, [path])]:
                _bind(again, new + again)
    for path in view.data:
        _bind(path, new + path)
    for path in view.rw:
        _bind(path, new + path, writable=True)
    _bind(view.package, new + view.package)
    os.makedirs(new + "/proc")
    _mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY)
    with contextlib.suppress(OSError):  # glibc reads the CPU count here; harmless read-only
        _bind("/sys", new + "/sys")
    os.makedirs(new + "/dev")
    for name in DEVICES:
        _bind(f"/dev/{name}", f"{new}/dev/{name}", writable=True)
    os.makedirs(new + "/dev/shm")
    _mount("tmpfs", new + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m")
    for i, name in enumerate(("stdin", "stdout", "stderr")):
        os.symlink(f"/proc/self/fd/{i}", f"{new}/dev/{name}")
    os.symlink("/proc/self/fd", new + "/dev/fd")
    # The skeleton read-only: a worker that owns it (an ordinary user's, in its user namespace)
    # writes only its own folders, /tmp and /dev/shm.
    for path in [p for p in view.hide if os.path.ismount(new + p)] + [""]:
        _mount(None, new + path, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    _pivot(new)


def _pivot(new: str) -> None:
    """Make `new` the root folder and detach the old one (pivot_root(".", "."), as runc does)."""
    if SYS_PIVOT_ROOT is None:
        raise Unsupported(errno.ENOSYS, f"pivot_root: unknown on {os.uname().machine}")
    os.chdir(new)
    if _libc.syscall(SYS_PIVOT_ROOT, b".", b".") != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"pivot_root: {os.strerror(err)}")
    _call("umount2", b".", MNT_DETACH)
    os.chdir("/")


# ----------------------------------------------------------------------------------------------
# Privileges
# ----------------------------------------------------------------------------------------------


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def capabilities() -> dict[str, int]:
    """CapEff, CapPrm, CapBnd, ... of this process ({} without /proc)."""
    with contextlib.suppress(OSError):
        lines = Path("/proc/self/status").read_text().splitlines()
        return {k: int(v, 16) for k, _, v in (line.partition(":\t") for line in lines) if k.startswith("Cap")}
    return {}


def drop(uid: int | None) -> None:
    """Become `uid` (a root grader's worker), then give up every capability for good: none kept,
    none regained by exec (no_new_privs; and an empty bounding set where this process may empty it,
    that is, where it held capabilities to begin with). On Linux this is checked."""
    privileged = LINUX and capabilities().get("CapEff", 0) != 0
    if privileged:
        for cap in range(64):  # needs CAP_SETPCAP: before the uid changes
            with contextlib.suppress(OSError):
                _prctl(PR_CAPBSET_DROP, cap)
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    if not LINUX:
        return
    header, data = _CapHeader(0x20080522, 0), (_CapData * 2)()  # _LINUX_CAPABILITY_VERSION_3
    _call("capset", ctypes.byref(header), data)
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    # CapEff, CapPrm, CapInh, CapAmb, and CapBnd where it could be emptied (an ordinary user's
    # bounding set stays full, but with no_new_privs no exec can raise capabilities from it)
    left = {k: v for k, v in capabilities().items() if v and (privileged or k != "CapBnd")}
    if left or (uid is not None and (os.getuid(), os.geteuid()) != (uid, uid)):
        raise PermissionError(f"privileges still held after dropping them: {left or os.getuid()}")


# ----------------------------------------------------------------------------------------------
# What the machine offers, and what the worker needs to read
# ----------------------------------------------------------------------------------------------


def python_paths(exclude: list[str], skip: str) -> list[str]:
    """The folders of the running Python (its installations and sys.path, but `skip`), without
    those that hold an `exclude` folder (a repository on sys.path would bring the course's source)."""
    found = {os.path.abspath(p) for p in (sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix)}
    found |= {os.path.abspath(p) for p in sys.path if p and p != skip and os.path.isdir(p)}
    found = {p for p in found if not _inside_any(exclude, p)}
    return sorted(p for p in found if not any(_inside(p, [q]) for q in found if q != p))


def _inside_any(paths: list[str], folder: str) -> bool:
    return any(_inside(p, [folder]) for p in paths)


def passable(folder: str) -> bool:
    """Whether any user may pass through `folder` and every folder above it."""
    path = Path(os.path.realpath(folder))
    return all(os.stat(d).st_mode & 0o001 for d in [path, *path.parents])


def unreadable(paths: list[str]) -> str | None:
    """The first of the Python's folders, or of the files of its imported modules, that this
    process cannot read: a worker that could not read them would fail at its first import."""
    for p in paths:
        if not os.access(p, os.R_OK | os.X_OK):
            return p
    for module in list(sys.modules.values()):
        f = getattr(module, "__file__", None)
        if isinstance(f, str) and os.path.exists(os.path.dirname(f)) and not os.access(f, os.R_OK):
            return f
    return None


def only_loopback() -> bool:
    return {name for _, name in socket.if_nameindex()} <= {"lo"}
