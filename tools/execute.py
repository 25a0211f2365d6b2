"""Execute notebooks top to bottom, in place, the way their stored outputs must be made.

Usage: python tools/execute.py chapters/01_language_modeling.ipynb [more.ipynb ...]
Runs in a fresh kernel of this environment, under the pinned numeric environment of
tools/numeric_env.py, with the working directory set to the notebook's folder, then stores
the outputs. nbval (`make test`, same numeric environment) later re-runs and compares them.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
import numeric_env
from nbclient import NotebookClient


def execute(path: Path, timeout: int = 1800) -> None:
    numeric_env.apply()  # the kernel inherits it: the same environment `make test` checks in
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    start = time.time()
    client.execute()
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    nbformat.write(nb, path)
    print(f"executed {path} in {time.time() - start:.0f}s")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    numeric_env.apply()
    print(numeric_env.describe())
    for arg in sys.argv[1:]:
        execute(Path(arg))
