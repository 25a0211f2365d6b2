"""The wheel holds the whole package: every module, every subpackage, the pocket model's files.

pyproject.toml finds the packages at build time instead of listing them; this builds the wheel
from a copy of the package (the pocket checkpoint left out, to keep the build quick) and compares.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_wheel_holds_every_file_of_the_package(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "gpt2_course", src / "gpt2_course",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "model.safetensors"))
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                            "--no-cache-dir", "-q", "-w", str(tmp_path / "dist"), str(src)],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    [wheel] = (tmp_path / "dist").glob("gpt2_course-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    files = {p.relative_to(src).as_posix() for p in (src / "gpt2_course").rglob("*") if p.is_file()}
    packages = {p.parent.relative_to(src).as_posix() for p in (src / "gpt2_course").rglob("__init__.py")}
    assert {"gpt2_course", "gpt2_course/grading", "gpt2_course/figures"} <= packages
    assert "gpt2_course/pocket/config.json" in files
    assert sorted(files - shipped) == [], "files of gpt2_course/ missing from the wheel"
