"""Chapter 4's drawing: one query scored against every key, the weights, the weighted sum of values.

Drawn from the numbers the chapter computed, in the shared primitives (`primitives.py`).
"""
from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from .primitives import COLORS, FONT_SIZE, SMALL_FONT, arrow, box, canvas, label, matrix, show_token

__all__ = ["attention_query"]


def attention_query(tokens: Sequence[str], query: str, scores: Sequence[float],
                    weights: Sequence[float], values: np.ndarray, out: Sequence[float],
                    value_names: Sequence[str] = ()) -> plt.Figure:
    """One query against every key: score q·k/√d -> softmax weight -> weight × value, summed.

    `value_names` label the value columns (slanted, above them), so the reader need not look them up.
    """
    values = np.asarray(values, dtype=float)
    T, D, row = len(tokens), values.shape[1], 0.55
    names_room = 0.75 if value_names else 0.0
    fig, ax = canvas(10, T * row + 2.4 + names_room)
    y0 = 1.0 + names_room
    heads = [(0.1, "key", COLORS["key"], "left"), (3.2, "q·k/√d", COLORS["query"], "center"),
             (5.0, "softmax weight", COLORS["prob"], "center"), (8.0, "value", COLORS["value"], "center")]
    label(ax, 5, 0.25, f"the query of {show_token(query)}", weight="bold", color=COLORS["query"])
    for x, text, color, ha in heads:
        y_head = y0 - 0.3 - (names_room if text == "value" else 0.0)
        label(ax, x, y_head, text, color=color, weight="bold", ha=ha, fontsize=FONT_SIZE - 1)
    wmax = max(weights)
    for t, (tok, s, w) in enumerate(zip(tokens, scores, weights)):
        y = y0 + t * row
        box(ax, 0.1, y + 0.04, 1.9, row - 0.08, show_token(tok), COLORS["key"], fontsize=SMALL_FONT)
        label(ax, 3.2, y + row / 2, f"{s:.2f}", fontsize=SMALL_FONT)
        ax.add_patch(Rectangle((4.1, y + 0.1), 1.8 * w / wmax, row - 0.2, fc=COLORS["prob"], alpha=0.6))
        label(ax, 4.1 + 1.8 * w / wmax + 0.08, y + row / 2, f"{w:.2f}", ha="left", fontsize=SMALL_FONT)
        arrow(ax, (2.05, y + row / 2), (2.6, y + row / 2), lw=0.8)
    matrix(ax, values, 8.0 - D * row / 2, y0, row, color=COLORS["value"], fmt="{:.1f}",
           vmax=float(np.abs(values).max()), fontsize=SMALL_FONT, col_labels=value_names)
    yb = y0 + T * row + 0.35
    label(ax, 5.5, yb + 0.3, "output = Σ weight × value =", ha="right", fontsize=FONT_SIZE - 1)
    matrix(ax, np.asarray(out, dtype=float)[None], 8.0 - D * row / 2, yb, row, color=COLORS["value"],
           fmt="{:.2f}", vmax=float(np.abs(values).max()), fontsize=SMALL_FONT)
    return fig
