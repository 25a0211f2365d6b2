"""Chapter 3's drawing: a token's vector is its wte row plus its position's wpe row.

Drawn from the numbers the chapter computed, in the shared primitives (`primitives.py`).
"""
from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np

from .primitives import COLORS, FONT_SIZE, SMALL_FONT, canvas, label, matrix, show_token

__all__ = ["embedding_lookup"]


def embedding_lookup(tokens: Sequence[str], ids: Sequence[int], wte_rows: np.ndarray,
                     wpe_rows: np.ndarray, channels: int = 2) -> plt.Figure:
    """x[t] = wte[id_t] + wpe[t] for a few tokens, with the first `channels` numbers of each row
    (a trailing … column stands for the rest)."""
    wte_rows, wpe_rows = np.asarray(wte_rows)[:, :channels], np.asarray(wpe_rows)[:, :channels]
    T, cell = len(tokens), 0.95
    fig, ax = canvas(3 * (channels * cell + 0.4) + 4.4, T * cell + 1.3, scale=0.58)
    x0, y0 = 2.8, 0.95
    label(ax, 0.1, y0 - 0.45, "t", ha="left", weight="bold")
    for t, (tok, i) in enumerate(zip(tokens, ids)):  # row t: position t, its token and the token's id
        label(ax, 0.1, y0 + (t + 0.5) * cell, f"{t}  {show_token(tok)} {i}", ha="left",
              fontsize=FONT_SIZE - 1)
    blocks = [("wte[id]", wte_rows, COLORS["wte"]), ("wpe[t]", wpe_rows, COLORS["wpe"]),
              ("x", wte_rows + wpe_rows, COLORS["residual"])]
    x = x0
    for n, (name, rows, color) in enumerate(blocks):
        label(ax, x + channels * cell / 2, y0 - 0.45, name, weight="bold", color=color)
        matrix(ax, rows, x, y0, cell, color=color, fmt="{:.3f}", fontsize=SMALL_FONT)
        x += channels * cell
        label(ax, x + 0.2, y0 + T * cell / 2, "…", fontsize=FONT_SIZE - 1)
        x += 0.4
        if n < 2:
            label(ax, x + 0.35, y0 + T * cell / 2, "+" if n == 0 else "=", fontsize=FONT_SIZE + 4)
            x += 0.7
    return fig
