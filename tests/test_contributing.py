"""CONTRIBUTING.md's "Where things live" table is hand-written prose: check it against the exporter."""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import export  # noqa: E402

ROW = re.compile(r"^\| (\d+|A\d) \| `(chapters/[^`]+\.ipynb)` \| (.*) \|$", re.M)


def test_the_table_names_each_notebooks_modules() -> None:
    table = {nb: set(re.findall(r"`(\w+)\.py`", cell.split("(")[0]))
             for _, nb, cell in ROW.findall((ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8"))}
    exported: dict[str, set[str]] = {}
    for name, module in export.collect(ROOT).items():
        exported.setdefault(module.notebook, set()).add(name)
    assert table == exported, (
        "CONTRIBUTING.md's 'Where things live' table disagrees with the notebooks' `#| default_exp`/"
        "`#| export` cells: fix the table's row for each notebook listed")
