"""Check the package's public names where a learner meets them: at run time, in a fresh interpreter.

Usage:
    python tools/check_api.py                # exit 1, naming each problem
    python tools/check_api.py --root DIR     # check a copy of the repository (tests use this)

tools/export.py generates the names from the notebooks (each module's `__all__`, which the
package's `__init__` reads for its top level) and checks the files' text. This check imports
every generated module and checks the objects: `gpt2_course.NAME` is the object its module defines,
each module's `__all__` is what its notebook's cells make public, and no function or class a
module defines is out of reach (neither public nor in an `#| exporti` cell), whatever put it there.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from export import PACKAGE, ExportError, collect  # noqa: E402  (tools/ is not a package)

ROOT = Path(__file__).resolve().parent.parent

# Reads {module: {"public": [...], "internal": [...]}} on stdin; prints one line per problem.
PROBE = r"""
import importlib, inspect, json, sys
import gpt2_course
spec = json.load(sys.stdin)
for name, want in spec.items():
    path = f"gpt2_course/{name}.py"
    module = importlib.import_module("gpt2_course." + name)
    if list(getattr(module, "__all__", [])) != want["public"]:
        print(f"{path}: `__all__` is not what its notebook's `#| export` cells make public "
              "(edited by hand?): run `make export`")
    for attr in want["public"]:
        if not hasattr(module, attr):
            print(f"{path}: public `{attr}` is not defined when the module is imported")
        elif getattr(gpt2_course, attr, None) is not getattr(module, attr):
            print(f"{path}: `gpt2_course.{attr}` is not {name}.{attr}: "
                  "a module's `__all__` is stale (run `make export`) or the package's __init__ is wrong")
    for attr, obj in vars(module).items():
        if attr.startswith("_") or not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue
        if obj.__module__ == module.__name__ and attr not in want["public"] + want["internal"]:
            print(f"{path}: `{attr}` is defined but not public, nor in an `#| exporti` cell: "
                  "`gpt2_course." + attr + "` does not reach it")
"""


def problems(root: Path) -> list[str]:
    try:
        modules = collect(root)
    except ExportError as e:
        return e.problems
    spec = {m.name: {"public": m.names, "internal": m.internal} for m in modules.values()}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-c", PROBE], input=json.dumps(spec), capture_output=True,
                         text=True, cwd=root, env=env)
    if run.returncode != 0:
        return [f"importing {PACKAGE} failed in a fresh interpreter:\n{run.stderr.strip()}"]
    return run.stdout.splitlines()


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
