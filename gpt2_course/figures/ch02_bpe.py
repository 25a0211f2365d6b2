"""Chapter 2's drawing: byte-pair encoding of one word, merge by merge.

Drawn from the numbers the chapter computed, in the shared primitives (`primitives.py`).
"""
from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt

from .primitives import COLORS, FONT_SIZE, SMALL_FONT, box, canvas, label

__all__ = ["bpe_merges"]


def bpe_merges(rows: Sequence[tuple[Sequence[str], Sequence[int], int | None]]) -> plt.Figure:
    """BPE encoding of one word, one row per state: the current tokens, with the tokens merged
    next outlined. Each row: (tokens, indices of the tokens the next merge joins, its rank or None)."""
    fig, ax = canvas(10, 0.85 * len(rows) + 0.2)
    y = 0.2
    for tokens, lit, rank in rows:
        x = 0.1
        for i, tok in enumerate(tokens):
            text = tok.replace(" ", "␣")
            w = max(0.55, 0.2 * len(text) + 0.25)
            box(ax, x, y, w, 0.55, text, COLORS["wte"], fill_alpha=0.15, fontsize=FONT_SIZE - 1,
                highlight=i in lit)
            x += w + 0.1
        if rank is not None:
            a, b = (tokens[i].replace(" ", "␣") for i in sorted(lit)[:2])
            label(ax, 9.9, y + 0.28, f"next: merge {rank:,}, {a} + {b}", ha="right", fontsize=SMALL_FONT)
        else:
            label(ax, 9.9, y + 0.28, "no learned pair left: done", ha="right", fontsize=SMALL_FONT)
        y += 0.85
    return fig
