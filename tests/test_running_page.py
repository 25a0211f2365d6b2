"""book/running.md types version numbers and a Python range; each must still be what the repository pins.

The page says which PyTorch has no macOS Intel build and which Pythons the pins install on. Those are
hand-typed facts about `requirements.txt`, `pyproject.toml` and the ARM record: this test fails when
one of them changes and the page does not.
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = (ROOT / "book" / "running.md").read_text(encoding="utf-8")
RECORD = (ROOT / "benchmarks" / "results" / "arm_emulated_nbval.txt").read_text(encoding="utf-8")


def pin(package: str) -> str:
    found = re.search(rf"^{package}==(\S+)", (ROOT / "requirements.txt").read_text(), re.MULTILINE)
    assert found, f"{package} is not pinned in requirements.txt"
    return found.group(1)


def test_every_pytorch_version_on_the_page_is_the_pin_or_the_last_macos_intel_build() -> None:
    torch = pin("torch")
    versions = re.findall(r"PyTorch (\d+\.\d+\.\d+)( was the last)?", PAGE)
    assert len(versions) >= 3, versions  # the table's two and the Linux ARM64 paragraph's
    # The last macOS x86_64 build: the last version pip lists in the record's dry run for that tag.
    listed = re.search(r"macosx_\S+_x86_64\s+Python 3\.\d+: No matching distribution found for "
                       r"torch==(\S+) \(from versions: ([^)]*)\)", RECORD)
    assert listed, "the record no longer has the macOS x86_64 dry run"
    assert listed.group(1) == torch, (
        f"the ARM record's dry runs were made for torch=={listed.group(1)}, requirements.txt pins {torch}: "
        "re-run them (benchmarks/results/arm_emulated_nbval.txt lists the commands)")
    last_intel = listed.group(2).split(", ")[-1]
    for version, last in versions:
        expected = last_intel if last else torch
        assert version == expected, f"book/running.md says PyTorch {version}{last}; it should say {expected}"


def test_the_python_range_on_the_page_is_requires_python() -> None:
    spec = re.search(r'requires-python = ">=3\.(\d+),<3\.(\d+)"', (ROOT / "pyproject.toml").read_text())
    assert spec, "pyproject.toml's requires-python is no longer of the form >=3.a,<3.b"
    low, high = int(spec.group(1)), int(spec.group(2)) - 1
    expected = f"Python 3.{low} to Python 3.{high}"
    assert expected in PAGE, f"book/running.md should give {expected}"
