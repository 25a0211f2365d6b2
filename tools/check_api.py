"""Check that the package's top-level names still exist where `gpt2_course/__init__.py` says.

Usage:
    python tools/check_api.py                # exit 1, naming each stale entry of _EXPORTS
    python tools/check_api.py --root DIR     # check a copy of the repository (tests use this)

`_EXPORTS` maps each public name to the module that defines it. A chapter that renames or
moves a function would otherwise leave `gpt2_course.NAME` raising AttributeError for the
learner; the check reads the modules' source (no import, so no torch) and requires each
name to be *defined* there (def, class or assignment), not merely imported from elsewhere.
"""
from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "gpt2_course"


def exports(init: Path) -> dict[str, str]:
    """The `_EXPORTS` literal of the package's `__init__.py`."""
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "_EXPORTS" for t in node.targets
        ):
            return ast.literal_eval(node.value)
    raise SystemExit(f"{init}: no `_EXPORTS = {{...}}` literal found")


def defined(module: Path) -> set[str]:
    """Names a module defines at top level (imports do not count: the name must live here)."""
    names: set[str] = set()
    for node in ast.parse(module.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def problems(root: Path) -> list[str]:
    package = root / PACKAGE
    init = f"{PACKAGE}/__init__.py"
    found = []
    for name, module in sorted(exports(package / "__init__.py").items()):
        path = package / f"{module}.py"
        if name.startswith("_"):
            found.append(f"{init}: `{name}` is private and cannot be a public name")
        elif not path.exists():
            found.append(f"{init}: `{name}` comes from {PACKAGE}/{module}.py, which does not exist")
        elif name not in defined(path):
            found.append(
                f"{init}: `{name}` is not defined in {PACKAGE}/{module}.py (renamed or moved?): "
                "update _EXPORTS to where it lives now, or drop it"
            )
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="repository root (default: this one)")
    args = parser.parse_args(argv)
    found = problems(args.root)
    for line in found:
        print(line, file=sys.stderr)
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
