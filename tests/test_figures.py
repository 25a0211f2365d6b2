"""The figures package: the map is drawn from the config it is given, the intro's SVG is current, and
every name a chapter reads as `figures.NAME` is there, whichever module draws it."""
from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

from gpt2_course import figures  # noqa: E402
from gpt2_course.config import GPT2Config  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _texts(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts]


def test_map_shows_the_config_numbers():
    texts = " ".join(_texts(figures.model_map(GPT2Config.from_name("gpt2-xl"))))
    assert "1,600 → 6,400 → 1,600" in texts  # the MLP's widths
    assert "block × 48" in texts and "25 heads × 64" in texts and "50,257 × 1,600" in texts
    pocket = " ".join(_texts(figures.model_map(GPT2Config.from_name("pocket"))))
    assert "256 × 192" in pocket and "block × 6" in pocket


def test_highlight_outlines_only_that_part():
    red = matplotlib.colors.to_rgba(figures.COLORS["highlight"])
    fig = figures.model_map(GPT2Config(), highlight="attn")
    outlined = [p for p in fig.axes[0].patches if p.get_edgecolor() == red]
    assert len(outlined) == 1
    assert outlined[0].get_width() == 6.0 and outlined[0].get_height() == 0.9  # the attention box
    fig = figures.model_map(GPT2Config(), highlight="embedding")
    assert len([p for p in fig.axes[0].patches if p.get_edgecolor() == red]) == 3  # wte, wpe, +
    with pytest.raises(ValueError, match="model_map knows"):
        figures.model_map(GPT2Config(), highlight="attention")


def test_intro_map_is_generated_from_the_code(tmp_path):
    out = tmp_path / "model_map.svg"
    subprocess.run([sys.executable, "-m", "gpt2_course.figures", str(out)], check=True, cwd=ROOT, timeout=120)
    committed = ROOT / "book" / "figures" / "model_map.svg"
    assert out.read_bytes() == committed.read_bytes(), (
        "book/figures/model_map.svg is stale: run "
        "`.venv/bin/python -m gpt2_course.figures book/figures/model_map.svg`")


def test_matrix_rejects_a_vector():
    _, ax = figures.canvas(2, 2)
    with pytest.raises(ValueError, match="2-D"):
        figures.matrix(ax, [1.0, 2.0], 0, 0)


def _public_names(path: Path) -> set[str]:
    """The names a module's top level defines or assigns, not starting with `_`."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return {n for n in names if not n.startswith("_")}


def test_every_public_name_of_every_module_is_a_name_of_figures():
    modules = [m.name for m in pkgutil.iter_modules(figures.__path__) if m.name != "__main__"]
    assert {"primitives", "map", "ch01_language_modeling", "ch05_masking"} <= set(modules)
    for name in modules:
        module = importlib.import_module(f"gpt2_course.figures.{name}")
        assert sorted(module.__all__) == sorted(_public_names(Path(module.__file__))), (
            f"gpt2_course/figures/{name}.py: `__all__` must list exactly its public names")
        for attr in module.__all__:
            assert getattr(figures, attr) is getattr(module, attr), f"figures.{attr} is not {name}.{attr}"


def _names_pages_read() -> set[str]:
    """Every NAME in `figures.NAME` or `from gpt2_course.figures import NAME` in a chapter or exercise."""
    names: set[str] = set()
    for page in [*ROOT.glob("chapters/*.ipynb"), *ROOT.glob("exercises/**/*.ipynb")]:
        for cell in json.loads(page.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "code":
                continue
            code = "".join(cell["source"])
            names |= set(re.findall(r"\bfigures\.([A-Za-z_]\w*)", code))
            for imported in re.findall(r"from gpt2_course\.figures import ([\w, ]+)", code):
                names |= {n.strip() for n in imported.split(",")}
    return names


def test_every_name_the_pages_read_resolves():
    names = _names_pages_read()
    assert {"use_svg", "model_map", "glue_figure", "COLORS", "predict_append", "matrix"} <= names
    assert not [n for n in sorted(names) if not hasattr(figures, n)]
