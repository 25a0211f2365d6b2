"""tools/check_python_range.py: the lock must install at both ends of requires-python, and the
Makefile must refuse, with directions, a Python outside it. The lock check runs pip for real, on
wheels built here and listed in a local index (PEP 503 pages with data-requires-python, as PyPI
serves them), so it needs no network."""
from __future__ import annotations

import html
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "check_python_range.py"
sys.path.insert(0, str(ROOT / "tools"))
import check_python_range as cpr  # noqa: E402

RANGE = ">=3.11,<3.15"


def wheel(folder: Path, name: str, version: str, requires_python: str, tag: str = "py3-none-any") -> None:
    """A minimal valid wheel declaring `requires_python`, and its page in the index under `folder`."""
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": "",
        f"{info}/METADATA": (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                             f"Requires-Python: {requires_python}\n"),
        f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: {tag}\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in files) + f"{info}/RECORD,,\n"
    filename = f"{name}-{version}-{tag}.whl"
    with zipfile.ZipFile(folder / filename, "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
    page = folder / "simple" / name / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text(f'<a href="../../{filename}" data-requires-python="{html.escape(requires_python)}">'
                    f"{filename}</a>\n")


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """pip options that make a folder of wheels the index."""
    folder = tmp_path_factory.mktemp("wheels")
    wheel(folder, "oldpin", "1.0", ">=3.8")
    wheel(folder, "newpin", "2.0", ">=3.11.5")  # like soupsieve 4.1.2: not Debian 12's 3.11.2
    wheel(folder, "torch", "2.13.0", ">=3.10", tag="cp311-none-any")  # a wheel for 3.11 only
    return ["--isolated", "--index-url", (folder / "simple").as_uri()]


def lock_problems(tmp_path: Path, pins: list[str], index: list[str]) -> list[str]:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("# a lock\n" + "\n".join(pins) + "\n")
    return cpr.check_lock(RANGE, requirements, index)


def test_the_range_has_two_ends() -> None:
    assert cpr.ends(">=3.11,<3.15") == ((3, 11, 0), (3, 14))
    assert cpr.ends("<3.13, >=3.11.2") == ((3, 11, 2), (3, 12))
    for unchecked in (">=3.11", "<3.15", ">=3.11,<=3.14", "~=3.11", ">=3.14,<3.12"):
        with pytest.raises(SystemExit, match="requires-python"):
            cpr.ends(unchecked)


def test_the_project_declares_the_range_the_lock_is_checked_at() -> None:
    assert cpr.requires_python() == RANGE


def test_a_lock_that_installs_at_both_ends_passes(tmp_path: Path, index: list[str]) -> None:
    assert lock_problems(tmp_path, ["oldpin==1.0"], index) == []


def test_a_pin_that_needs_a_newer_python_fails(tmp_path: Path, index: list[str]) -> None:
    problems = lock_problems(tmp_path, ["oldpin==1.0", "newpin==2.0"], index)
    assert problems[0].startswith("Python 3.11.0: ") and "newpin" in problems[0] and ">=3.11.5" in problems[0]
    # 3.14 is new enough; but after resolving, pip also holds the chosen wheel's Requires-Python against
    # the interpreter running it, so under Debian 12's 3.11.2 the new end reports the same pin again
    # (a duplicate of a real failure, never a false pass).
    running_too_old = sys.version_info < (3, 11, 5)
    assert len(problems) == 1 + running_too_old, problems
    if running_too_old:
        assert problems[1].startswith("Python 3.14: ") and "newpin" in problems[1], problems


def test_a_torch_without_a_wheel_for_the_new_end_fails(tmp_path: Path, index: list[str]) -> None:
    problems = lock_problems(tmp_path, ["torch==2.13.0"], index)
    assert len(problems) == 1, problems  # 3.11.0 has its wheel
    assert problems[0].startswith("Python 3.14: torch==2.13.0: the index has no wheel for Python 3.14 ")


def test_the_command_fails_with_what_to_change(tmp_path: Path, index: list[str]) -> None:
    (tmp_path / "requirements.txt").write_text("newpin==2.0\n")
    done = subprocess.run([sys.executable, str(TOOL), "--requirements", str(tmp_path / "requirements.txt"),
                           "--pip-args", " ".join(index)], capture_output=True, text=True)
    assert done.returncode == 1
    assert "FAIL Python 3.11.0: " in done.stderr
    assert "pin versions that install on 3.11.0 and 3.14" in done.stderr


def test_a_python_in_the_range_is_accepted() -> None:
    assert cpr.interpreter_problem(RANGE, (3, 11, 2), has_ensurepip=True) is None  # Debian 12
    assert cpr.interpreter_problem(RANGE, (3, 14, 0), has_ensurepip=True) is None
    done = subprocess.run([sys.executable, str(TOOL), "--interpreter"], capture_output=True, text=True)
    assert done.returncode == 0 and "is in the course's range" in done.stdout, done.stderr


def test_a_python_outside_the_range_is_refused_with_the_choices_on_path(tmp_path: Path) -> None:
    for name in ("python3.10", "python3.12", "python3.13"):
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    problem = cpr.interpreter_problem(RANGE, (3, 10, 12), has_ensurepip=True, path=str(tmp_path))
    assert "Python 3.10.12 is outside" in problem and "3.11 to 3.14" in problem
    assert "on your PATH: python3.12, python3.13" in problem and "`make PYTHON=python3.13 test`" in problem
    problem = cpr.interpreter_problem(RANGE, (3, 15, 0), has_ensurepip=True, path=str(tmp_path / "none"))
    assert "none is on your PATH" in problem and "`make PYTHON=python3.14 test`" in problem


def test_a_python_without_ensurepip_is_told_to_install_venv() -> None:
    problem = cpr.interpreter_problem(RANGE, (3, 11, 2), has_ensurepip=False)
    assert "apt-get install python3-venv" in problem and "\n" not in problem


def test_the_interpreter_check_exits_nonzero_outside_the_range(tmp_path: Path) -> None:
    mine = f"{sys.version_info[0]}.{sys.version_info[1] + 1}"
    (tmp_path / "pyproject.toml").write_text(f'[project]\nrequires-python = ">={mine},<3.99"\n')
    done = subprocess.run([sys.executable, str(TOOL), "--interpreter", "--pyproject",
                           str(tmp_path / "pyproject.toml")], capture_output=True, text=True,
                          env={**os.environ, "PATH": str(tmp_path)})
    assert done.returncode == 1 and "is outside the range" in done.stderr and done.stderr.count("\n") == 1
