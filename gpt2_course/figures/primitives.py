"""The visual language every drawing shares: one palette, one font, SVG output, and shapes.

`COLORS` gives each object one colour in every chapter (tokens, wte, wpe, queries, keys, values,
the residual stream, attention, MLP, layer norms, the head, probabilities, masked cells). The
shapes (`canvas`, `box`, `arrow`, `plus`, `label`, `matrix`) work in data units on an axis without
ticks, y pointing down, so a drawing reads like its layout:

    fig, ax = canvas(4, 1)                     # 4 x 1 units, 0.64 in each
    box(ax, 0.1, 0.2, 1.5, 0.6, "wte", COLORS["wte"])
    arrow(ax, (1.6, 0.5), (2.4, 0.5))
    box(ax, 2.4, 0.2, 1.5, 0.6, "x", COLORS["residual"])
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Rectangle

__all__ = ["ARROW", "COLORS", "FONT_SIZE", "SMALL_FONT", "arrow", "box", "canvas", "glue_figure", "label",
           "matrix", "plus", "save_svg", "show_token", "use_svg"]

# One colour per object, used by every chapter (colour-blind-safe Okabe-Ito based).
COLORS: dict[str, str] = {
    "token": "#7f7f7f",  # token ids and text
    "wte": "#0072b2",  # token embedding rows
    "wpe": "#e69f00",  # position embedding rows
    "query": "#d55e00",
    "key": "#0072b2",
    "value": "#009e73",
    "residual": "#555555",  # the residual stream x
    "attn": "#cc79a7",
    "mlp": "#56b4e9",
    "ln": "#f0e442",
    "head": "#0072b2",  # tied with wte: the same colour on purpose
    "prob": "#d55e00",  # probabilities, softmax outputs
    "masked": "#d9d9d9",  # cells the causal mask removes
    "highlight": "#d62728",  # the outline of the part a chapter builds
    "text": "#222222",
    "faded": "#e8e8e8",
}
FONT_SIZE = 11  # at 6.4 in wide this stays readable when a phone scales the SVG to 390 px
# The smallest text a drawing may use. The book shows an SVG figure as wide as its text column
# (book/_static/book.css), 800 px on a desktop: a drawing about 6.4 in wide is scaled by about
# 800 / (6.6 * 72) px per pt, so 10 pt reads as 16.8 px, at least the caption text's 16 px, and
# 9 pt (15.2 px) would not. tools/check_book.py measures every label of the built book.
SMALL_FONT = FONT_SIZE - 1
ARROW = dict(arrowstyle="-|>", mutation_scale=12, lw=1.4, color=COLORS["residual"],
             shrinkA=2, shrinkB=2)


def use_svg() -> None:
    """Inline figures as SVG with text kept as text, stable ids, and the course's fonts."""
    mpl.rcParams.update({
        "svg.fonttype": "none",  # text stays text: crisp, searchable, small
        "svg.hashsalt": "gpt2-course",  # the same figure gives the same SVG bytes
        "font.family": "DejaVu Sans",
        "font.size": FONT_SIZE,
        "axes.titlesize": FONT_SIZE + 1,
        "axes.formatter.min_exponent": 13,  # log axes label 4096 as "4096", not a 2 with a tiny exponent
        "axes.spines.top": False,
        "axes.spines.right": False,
        "figure.dpi": 100,
    })
    try:
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:  # not in a notebook kernel: nothing to configure
        return
    set_matplotlib_formats("svg")


def glue_figure(key: str, fig: plt.Figure) -> None:
    """Glue `fig` under `key` for a `{glue:figure}` directive, and close it so it shows only there."""
    from myst_nb import glue

    glue(key, fig, display=False)
    plt.close(fig)


def save_svg(fig: plt.Figure, path: str | Path) -> None:
    """Write `fig` as an SVG without a creation date, so regenerating it changes no bytes."""
    use_svg()
    fig.savefig(path, format="svg", metadata={"Date": None}, bbox_inches="tight")
    plt.close(fig)


def show_token(token: str) -> str:
    """A token as the chapters print it: quotes, so a leading space shows, and \\n for newline."""
    return repr(token)


# --- shapes: data units on an empty axis --------------------------------------------------------

def canvas(width: float, height: float, scale: float = 0.64) -> tuple[plt.Figure, plt.Axes]:
    """A figure `width` x `height` data units (1 unit = `scale` inches), y pointing down."""
    fig = plt.figure(figsize=(width * scale, height * scale))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)
    ax.set_axis_off()
    return fig, ax


def box(ax: plt.Axes, x: float, y: float, w: float, h: float, text: str = "",
        color: str = COLORS["token"], *, faded: bool = False, highlight: bool = False,
        fontsize: float = FONT_SIZE, weight: str = "normal", fill_alpha: float = 0.25) -> FancyBboxPatch:
    """A rounded box with centred text; (x, y) is its top-left corner."""
    edge = COLORS["faded"] if faded else color
    face = mpl.colors.to_rgba("#f4f4f4" if faded else color, 1.0 if faded else fill_alpha)
    patch = FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0,rounding_size=0.12",
                           fc=face, ec=COLORS["highlight"] if highlight else edge,
                           lw=3.0 if highlight else 1.2)
    ax.add_patch(patch)
    if text:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize,
                color="#9a9a9a" if faded else COLORS["text"], weight="bold" if highlight else weight)
    return patch


def arrow(ax: plt.Axes, start: tuple[float, float], end: tuple[float, float], *,
          color: str = COLORS["residual"], faded: bool = False, style: str = "-|>", **kw) -> None:
    """The course's arrow: a filled triangular head, the residual stream's grey by default."""
    props = {**ARROW, "color": COLORS["faded"] if faded else color, "arrowstyle": style, **kw}
    ax.add_patch(FancyArrowPatch(start, end, **props))


def plus(ax: plt.Axes, x: float, y: float, r: float = 0.22, *, faded: bool = False,
         highlight: bool = False) -> None:
    """A circled + where two streams are added (embeddings, residual connections)."""
    ec = COLORS["highlight"] if highlight else (COLORS["faded"] if faded else COLORS["residual"])
    ax.add_patch(Circle((x, y), r, fc="white", ec=ec, lw=2.4 if highlight else 1.2, zorder=3))
    ax.text(x, y, "+", ha="center", va="center", fontsize=FONT_SIZE + 1, zorder=4,
            color="#9a9a9a" if faded else COLORS["text"])


def label(ax: plt.Axes, x: float, y: float, text: str, *, ha: str = "center",
          color: str = COLORS["text"], fontsize: float = FONT_SIZE, **kw) -> None:
    """Plain text at (x, y)."""
    ax.text(x, y, text, ha=ha, va="center", color=color, fontsize=fontsize, **kw)


def matrix(ax: plt.Axes, values: np.ndarray, x: float, y: float, cell: float = 0.6, *,
           color: str = COLORS["attn"], fmt: str = "{:.2f}", mask: np.ndarray | None = None,
           vmax: float | None = None, fontsize: float = SMALL_FONT,
           row_labels: Sequence[str] = (), col_labels: Sequence[str] = ()) -> None:
    """A grid of numbers, each cell shaded by its value; `mask` cells are greyed and hatched.

    `values` is [rows, cols]; labels go left of the rows and above the columns.
    """
    values = np.asarray(values, dtype=float)
    if values.ndim != 2:
        raise ValueError(f"matrix() draws a 2-D array, got shape {values.shape}")
    masked = np.zeros(values.shape, bool) if mask is None else np.asarray(mask, bool)
    top = np.nanmax(np.abs(np.where(masked, 0, values))) if vmax is None else vmax
    rgb = mpl.colors.to_rgb(color)
    for (i, j), v in np.ndenumerate(values):
        cx, cy = x + j * cell, y + i * cell
        if masked[i, j]:
            ax.add_patch(Rectangle((cx, cy), cell, cell, fc=COLORS["masked"], ec="white",
                                   hatch="///", lw=0.8))
            continue
        alpha = 0.08 + 0.8 * (abs(v) / top if top else 0.0)
        ax.add_patch(Rectangle((cx, cy), cell, cell, fc=(*rgb, alpha), ec="white", lw=0.8))
        if fmt:
            ax.text(cx + cell / 2, cy + cell / 2, fmt.format(v), ha="center", va="center",
                    fontsize=fontsize, color=COLORS["text"])
    for i, text in enumerate(row_labels):
        ax.text(x - 0.1, y + (i + 0.5) * cell, text, ha="right", va="center", fontsize=fontsize + 1)
    for j, text in enumerate(col_labels):
        ax.text(x + (j + 0.5) * cell, y - 0.1, text, ha="left", va="bottom", rotation=45,
                rotation_mode="anchor", fontsize=fontsize + 1)
