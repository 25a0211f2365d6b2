"""Every command the book and the README tell a learner to type names something that exists.

Commands are the lines of ```bash / ```sh / ```shell / ```console blocks and inline code that
starts like a command (`make ...`, `.venv/bin/...`, `gpt2-course ...`) in book/**/*.md and
README.md. Each must name a make target of the Makefile, an executable in .venv/bin (for
`jupyter X`, the `jupyter-X` subcommand too) or on PATH, or a script of the repository; paths
it passes must exist; `gpt2-course` arguments must parse. Then `make lab` must really start
JupyterLab on the chapters.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from gpt2_course.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = ROOT / ".venv" / "bin"
SHELL_LANGS = {"bash", "sh", "shell", "console"}
FENCE = re.compile(r"^(`{3,}|~{3,})\s*([\w-]*)[^\n]*\n(.*?)^\1\s*$", re.MULTILINE | re.DOTALL)
INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
COMMAND_START = re.compile(r"^(?:[A-Z_][A-Z0-9_]*=\S+\s+)*(make|\.venv/bin/\S+|gpt2-course|\.ci/run)(\s|$)")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
SHELL_BUILTINS = {"cd", "export", "source", "."}


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "book").rglob("*.md"))]


def commands(text: str) -> list[str]:
    """The shell commands a markdown text tells the reader to run."""
    found = []
    for _, lang, body in FENCE.findall(text):
        if lang.lower() in SHELL_LANGS:
            body = body.replace("\\\n", " ")
            for line in body.splitlines():
                line = re.sub(r"\s+#.*$", "", line.strip().removeprefix("$ "))  # drop the comment
                if line and not line.startswith("#"):
                    found.append(line)
    prose = FENCE.sub("", text)
    found += [m.strip() for m in INLINE.findall(prose) if COMMAND_START.match(m.strip())]
    return found


def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return {t for line in re.findall(r"^([A-Za-z0-9_.\- ]+):(?!=)", text, re.MULTILINE) for t in line.split()}


def problems(command: str) -> list[str]:
    """What is wrong with one command line (empty: it names only things that exist)."""
    found = []
    for part in re.split(r"\s*(?:&&|\|\||;|\|)\s*", command):
        words = shlex.split(part.replace("\\|", "|"))
        while words and ASSIGNMENT.match(words[0]):
            words.pop(0)
        if not words:
            continue
        program, args = words[0], words[1:]
        if program == "make":
            targets = make_targets()
            found += [f"`make {a}`: no such target in the Makefile" for a in args
                      if not a.startswith("-") and "=" not in a and a not in targets]
        elif "/" in program:
            path = ROOT / program
            if not (path.is_file() and os.access(path, os.X_OK)):
                found.append(f"`{program}` is not an executable file (is it installed in .venv?)")
            elif path.parent == VENV_BIN and program.endswith("/jupyter") and args:
                if not (VENV_BIN / f"jupyter-{args[0]}").exists():
                    found.append(f"`jupyter {args[0]}` is not installed in .venv (no jupyter-{args[0]})")
        elif program == "gpt2-course":
            if not (VENV_BIN / program).exists():
                found.append("`gpt2-course` is not installed in .venv")
            try:  # as gpt2_course.cli.main parses: `train` passes its flags to its own parser
                parsed, extra = build_parser().parse_known_args(args)
                if extra and parsed.command != "train":
                    found.append(f"`{part}`: gpt2-course does not know {' '.join(extra)}")
            except SystemExit as e:
                if e.code:
                    found.append(f"`{part}`: gpt2-course rejects these arguments")
        elif not (program in SHELL_BUILTINS or shutil.which(program) or (VENV_BIN / program).exists()):
            found.append(f"`{program}` is not an installed executable")
        for arg in args:
            # A path into the repository (chapters/..., tests/...) must exist; others are the reader's.
            value = arg.split("=", 1)[1] if "=" in arg and not arg.startswith("-") else arg
            top = value.split("/")[0]
            if "/" in value and top and (ROOT / top).exists() and not (ROOT / value).exists():
                found.append(f"`{part}`: {value} does not exist")
    return found


def test_extraction_finds_fenced_and_inline_commands() -> None:
    text = ("Run `make book` or `.venv/bin/jupyter notebook` but not `torch==2.13.0`.\n\n"
            "```bash\nmake test    # all of it\n.venv/bin/pytest \\\n  tests/test_bpe.py\n```\n"
            "```python\nmake = 1\n```\n")
    assert commands(text) == ["make test", ".venv/bin/pytest    tests/test_bpe.py",
                              "make book", ".venv/bin/jupyter notebook"]


def test_bad_commands_are_caught() -> None:
    assert problems("make book") == []
    assert problems("make no-such-target")
    assert problems(".venv/bin/jupyter notebook chapters/")  # the classic notebook is not installed
    assert problems(".venv/bin/no-such-tool")
    assert problems("make execute NB=chapters/99_missing.ipynb")
    assert problems("gpt2-course generate --no-such-flag")
    assert problems("no-such-program --help")


def test_every_documented_command_exists() -> None:
    found = {str(doc.relative_to(ROOT)): commands(doc.read_text(encoding="utf-8")) for doc in documents()}
    assert sum(map(len, found.values())) > 10, found  # the extraction sees the books' commands
    wrong = [f"{doc}: {cmd}: {p}" for doc, cmds in found.items() for cmd in cmds for p in problems(cmd)]
    assert not wrong, "\n".join(wrong)


def test_running_the_chapters_locally_is_make_lab() -> None:
    running = commands((ROOT / "book" / "running.md").read_text(encoding="utf-8"))
    assert "make lab" in running, running


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab() -> tuple[str, str]:
    """`make lab` running in the background, as a learner starts it (without opening a browser)."""
    port, token = _free_port(), "course-test"
    args = (f"--no-browser --ip=127.0.0.1 --port={port} --ServerApp.port_retries=0 "
            f"--IdentityProvider.token={token}")
    proc = subprocess.Popen(["make", "-s", "lab", f"LAB_ARGS={args}"], cwd=ROOT, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        yield f"http://127.0.0.1:{port}", token
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def _get(url: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return json.loads(response.read())
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_make_lab_serves_the_chapters_with_the_course_kernel(lab: tuple[str, str]) -> None:
    base, token = lab
    listing = _get(f"{base}/api/contents/chapters?token={token}")
    served = {item["name"] for item in listing["content"]}
    assert {p.name for p in (ROOT / "chapters").glob("*.ipynb")} <= served
    specs = _get(f"{base}/api/kernelspecs?token={token}")
    python = specs["kernelspecs"][specs["default"]]["spec"]["argv"][0]
    assert Path(python).resolve().is_relative_to(ROOT / ".venv") or python == "python", python
