"""Chapter 5's drawings: the causal mask on a weight matrix, and the same rows computed one token
at a time from cached keys and values.

Drawn from the numbers the chapter computed, in the shared primitives (`primitives.py`).
"""
from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np

from .primitives import COLORS, FONT_SIZE, SMALL_FONT, arrow, box, canvas, label, matrix, show_token

__all__ = ["masked_weights", "kv_cache_steps"]


def masked_weights(tokens: Sequence[str], weights: np.ndarray, mask: np.ndarray) -> plt.Figure:
    """A [T, T] attention matrix: query rows, key columns, masked cells hatched grey."""
    T, cell = len(tokens), 0.9
    fig, ax = canvas(T * cell + 3.2, T * cell + 2.2, scale=0.6)
    labels = [show_token(t) for t in tokens]
    matrix(ax, weights, 2.6, 1.7, cell, color=COLORS["attn"], fmt="{:.2f}", mask=~np.asarray(mask, bool),
           vmax=1.0, fontsize=SMALL_FONT, row_labels=labels, col_labels=labels)
    label(ax, 2.6 + T * cell / 2, 0.25, "key (read from) →", fontsize=FONT_SIZE - 1, color=COLORS["key"])
    label(ax, 0.35, 1.7 + T * cell / 2, "query (reading) →", rotation=-90, fontsize=FONT_SIZE - 1,
          color=COLORS["query"])
    return fig


def kv_cache_steps(tokens: Sequence[str], weights: np.ndarray) -> plt.Figure:
    """Generation one token at a time: at step t the new token's query reads the cached keys and
    values of tokens 0..t-1 plus its own; `weights[t, :t+1]` are that step's attention weights."""
    T = len(tokens)
    fig, ax = canvas(10, 1.3 * T + 0.7, scale=0.5)  # drawn small, so the text reads large on a phone
    label(ax, 0.1, 0.3, "new query", ha="left", weight="bold", color=COLORS["query"])
    label(ax, 3.0, 0.3, "keys, values (new one outlined)", ha="left", weight="bold", color=COLORS["key"])
    for t in range(T):
        y = 0.8 + 1.3 * t
        box(ax, 0.1, y, 2.3, 0.6, f"q {show_token(tokens[t])}", COLORS["query"])
        for j in range(t + 1):
            x = 3.0 + j * 1.75
            new = j == t
            box(ax, x, y, 1.6, 0.6, show_token(tokens[j]), COLORS["key"] if new else COLORS["token"],
                fill_alpha=0.35 if new else 0.15, highlight=new)
            label(ax, x + 0.8, y + 0.85, f"{weights[t, j]:.2f}", color=COLORS["prob"])
        arrow(ax, (2.45, y + 0.3), (2.95, y + 0.3))
    return fig
