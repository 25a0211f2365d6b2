"""The figure module: the map is drawn from the config it is given, and the intro's SVG is current."""
from __future__ import annotations

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
    figures.write_model_map(out)
    committed = ROOT / "book" / "figures" / "model_map.svg"
    assert out.read_bytes() == committed.read_bytes(), (
        "book/figures/model_map.svg is stale: run "
        "`.venv/bin/python -m gpt2_course.figures book/figures/model_map.svg`")


def test_matrix_rejects_a_vector():
    _, ax = figures.canvas(2, 2)
    with pytest.raises(ValueError, match="2-D"):
        figures.matrix(ax, [1.0, 2.0], 0, 0)
