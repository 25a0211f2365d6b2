"""Chapter 1's drawing: the generation loop, predict a distribution, draw a token, append, repeat.

Drawn from the numbers the chapter computed, in the shared primitives (`primitives.py`).
"""
from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle

from .primitives import COLORS, FONT_SIZE, SMALL_FONT, arrow, box, canvas, label, show_token

__all__ = ["predict_append"]


def _token_row(ax: plt.Axes, tokens: Sequence[str], x: float, y: float, *, h: float = 0.6,
               color: str = COLORS["token"], lit: Sequence[int] = (), lit_color: str = COLORS["prob"],
               char: float = 0.15, fontsize: float = FONT_SIZE - 1) -> float:
    """Boxes for tokens left to right from (x, y); those at indices `lit` in `lit_color`. Returns end x."""
    for i, tok in enumerate(tokens):
        text = show_token(tok)
        w = max(0.7, char * len(text) + 0.3)
        box(ax, x, y, w, h, text, lit_color if i in lit else color, fontsize=fontsize,
            fill_alpha=0.35 if i in lit else 0.15)
        x += w + 0.08
    return x


def predict_append(steps: Sequence[dict], title: str = "") -> plt.Figure:
    """The generation loop, one row per step: context -> model -> p(next) -> the drawn token,
    which the next row's context ends with. Each step: {"context": [str], "top": [(str, p)],
    "chosen": str, "p": float}."""
    fig, ax = canvas(10, 1.2 * len(steps) + 0.9)
    y = 0.35
    if title:
        label(ax, 5, y, title, weight="bold")
        y += 0.55
    for n, step in enumerate(steps):
        ctx = list(step["context"])[-2:]
        x = 0.1
        if len(step["context"]) > 2:
            label(ax, x + 0.2, y + 0.3, "…")
            x += 0.45
        x = _token_row(ax, ctx, x, y, lit=[len(ctx) - 1] if n else [])
        arrow(ax, (x + 0.02, y + 0.3), (x + 0.32, y + 0.3))
        box(ax, x + 0.35, y, 1.0, 0.6, "model", COLORS["attn"], fontsize=FONT_SIZE - 1)
        arrow(ax, (x + 1.38, y + 0.3), (x + 1.68, y + 0.3))
        xb = x + 1.75
        top_p = max(p for _, p in step["top"])
        for tok, p in step["top"]:
            ax.add_patch(Rectangle((xb, y + 0.5), 0.8 * p / top_p, 0.1, fc=COLORS["prob"],
                                   alpha=1.0 if tok == step["chosen"] else 0.35))
            label(ax, xb, y + 0.2, f"{show_token(tok)}\n{p:.2f}", ha="left", fontsize=SMALL_FONT,
                  linespacing=1.1)
            xb += 1.15
        box(ax, 8.3, y - 0.05, 1.6, 0.7, f"{show_token(step['chosen'])}\np = {step['p']:.3f}", COLORS["prob"],
            fontsize=SMALL_FONT, fill_alpha=0.35)
        label(ax, 8.3, y - 0.22, "drawn", ha="left", fontsize=SMALL_FONT, color=COLORS["prob"])
        if n + 1 < len(steps):
            arrow(ax, (8.3, y + 0.55), (1.4, y + 1.25), color=COLORS["prob"], lw=0.9,
                  connectionstyle="arc3,rad=-0.05")
            label(ax, 5.0, y + 0.98, "append, ask again", fontsize=SMALL_FONT, color=COLORS["prob"],
                  style="italic")
        y += 1.2
    return fig
