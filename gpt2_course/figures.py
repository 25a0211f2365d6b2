"""The course's diagrams: one visual language, drawn by code from the real config and tensors.

Hand-written (not exported from a chapter), like `cli.py`. Usage in a chapter:

    from gpt2_course import figures
    figures.use_svg()                      # once, in the setup cell: crisp SVG, fixed fonts

    # a cell tagged `hide-input` and `nbval-ignore-output`:
    fig = figures.model_map(GPT2Config(), highlight="attn")
    figures.glue_figure("ch04_map", fig)   # glued, not shown here; closed

and in the markdown cell below it (MyST-NB's figure-from-glue: alt text, then a caption
that says what to look at):

    ```{glue:figure} ch04_map
    :alt: The GPT-2 model as a column of boxes, the attention box highlighted.
    :name: fig-ch04-map

    Where we are: ...
    ```

Print (and assert) in a compared cell every number a figure shows: nbval never compares images.

Same object, same colour in every chapter: `COLORS` (tokens, wte, wpe, queries, keys, values,
the residual stream, attention, MLP, layer norms, the head, probabilities, masked cells).
Primitives (`canvas`, `box`, `arrow`, `matrix`, `label`) work in data units on an axis
without ticks; `model_map` draws the whole GPT-2 with one part highlighted.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Rectangle

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


# --- primitives: data units on an empty axis -------------------------------------------------

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
           vmax: float | None = None, fontsize: float = FONT_SIZE - 2,
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


# --- the "where we are" map ------------------------------------------------------------------

MAP_PARTS = ("tokens", "wte", "wpe", "ln_1", "attn", "ln_2", "mlp", "residual", "ln_f", "head",
             "distribution")
_GROUPS = {"embedding": ("wte", "wpe"), "block": ("ln_1", "attn", "ln_2", "mlp", "residual")}


def _parts(highlight: str | Iterable[str] | None) -> set[str]:
    names = [highlight] if isinstance(highlight, str) else list(highlight or ())
    out: set[str] = set()
    for name in names:
        if name == "all":
            return set(MAP_PARTS)
        if name not in MAP_PARTS and name not in _GROUPS:
            raise ValueError(f"Unknown part {name!r}; model_map knows {', '.join(MAP_PARTS)}, "
                             f"the groups {', '.join(_GROUPS)}, and 'all'.")
        out.update(_GROUPS.get(name, (name,)))
    return out


def model_map(config, highlight: str | Iterable[str] | None = "all", *,
              note: str | None = None) -> plt.Figure:
    """GPT-2 as one column: tokens -> wte + wpe -> n_layer x [ln_1 -> attn -> + -> ln_2 -> mlp -> +]
    -> ln_f -> tied head -> next-token distribution, sizes taken from `config` (a GPT2Config).

    `highlight` names the part a chapter builds (one of MAP_PARTS, 'embedding', 'block', 'all'
    or several); the rest is drawn faded. `note` is a short line printed under the title.
    """
    lit = _parts(highlight)
    everything = lit == set(MAP_PARTS)
    V, C, T, L = config.vocab_size, config.n_embd, config.n_ctx, config.n_layer

    def on(part: str) -> dict:
        return dict(faded=part not in lit, highlight=part in lit and not everything)

    fig, ax = canvas(10, 15.6)
    cx, w = 5.6, 6.0  # centre line and width of the main column
    left = cx - w / 2
    y = 0.3
    if note:
        label(ax, 5.0, y + 0.2, note, fontsize=FONT_SIZE, style="italic")
        y += 0.6
    box(ax, left, y, w, 0.8, f"tokens: T ids, each < {V:,}", COLORS["token"], **on("tokens"))
    arrow(ax, (cx - 1.5, y + 0.8), (cx - 1.5, y + 1.3), faded="wte" not in lit)
    arrow(ax, (cx + 1.5, y + 0.8), (cx + 1.5, y + 1.3), faded="wpe" not in lit)
    y += 1.3
    box(ax, left, y, 2.9, 1.0, f"wte\n{V:,} × {C:,}", COLORS["wte"], **on("wte"))
    box(ax, cx + 0.1, y, 2.9, 1.0, f"wpe\n{T:,} × {C:,}", COLORS["wpe"], **on("wpe"))
    emb = {"wte", "wpe"} & lit
    arrow(ax, (cx - 1.5, y + 1.0), (cx - 0.2, y + 1.45), faded="wte" not in lit)
    arrow(ax, (cx + 1.5, y + 1.0), (cx + 0.2, y + 1.45), faded="wpe" not in lit)
    y += 1.6
    plus(ax, cx, y, faded=not emb, highlight=bool(emb) and not everything)
    label(ax, cx + 0.4, y, f"x: T × {C:,}", ha="left", fontsize=FONT_SIZE - 1)
    # the block, drawn once with its repeat count
    top = y + 0.45
    block_lit = bool(set(_GROUPS["block"]) & lit)
    ax.add_patch(FancyBboxPatch((0.35, top), 9.3, 7.1, boxstyle="round,pad=0,rounding_size=0.2",
                                fc="none", ls="--", lw=1.2,
                                ec=COLORS["residual"] if block_lit else COLORS["faded"]))
    label(ax, 0.55, top + 0.3, f"block × {L}", ha="left", weight="bold",
          color=COLORS["text"] if block_lit else "#9a9a9a")
    res_x = 1.2  # the residual stream runs down the left
    stream_on = "residual" in lit
    arrow(ax, (cx, y + 0.22), (res_x, top + 0.3), faded=not stream_on and not block_lit,
          connectionstyle="angle,angleA=0,angleB=90", style="-", lw=3)
    rows = [("ln_1", "ln_1 (layer norm)", COLORS["ln"], 0.6),
            ("attn", f"attention: {config.n_head} heads × {config.head_dim}", COLORS["attn"], 0.9),
            ("+", "", "", 0.0),
            ("ln_2", "ln_2 (layer norm)", COLORS["ln"], 0.6),
            ("mlp", f"MLP: {C:,} → {4 * C:,} → {C:,}", COLORS["mlp"], 0.9),
            ("+", "", "", 0.0)]
    yy = top + 0.75
    for name, text, color, h in rows:
        if name == "+":
            arrow(ax, (cx, yy - 0.3), (res_x + 0.25, yy + 0.2), faded=not stream_on)
            plus(ax, res_x, yy + 0.2, faded=not stream_on, highlight=stream_on and not everything)
            yy += 0.75
            continue
        if name in ("ln_1", "ln_2"):  # the branch leaves the stream, the stream goes on
            arrow(ax, (res_x, yy + h / 2), (left, yy + h / 2), faded=name not in lit)
        box(ax, left, yy, w, h, text, color, **on(name))
        if name in ("ln_1", "ln_2"):
            arrow(ax, (cx, yy + h), (cx, yy + h + 0.3), faded=name not in lit)
        yy += h + 0.3
    arrow(ax, (res_x, top + 0.3), (res_x, yy - 0.3), faded=not stream_on, style="-", lw=3)
    label(ax, res_x - 0.45, top + 3.6, "residual stream", rotation=90, fontsize=FONT_SIZE - 1,
          color=COLORS["residual"] if stream_on else "#9a9a9a")
    y = top + 7.1
    arrow(ax, (res_x, yy - 0.3), (cx, y + 0.4), faded=not stream_on and "ln_f" not in lit,
          connectionstyle="angle,angleA=-90,angleB=180")
    y += 0.4
    box(ax, left, y, w, 0.6, "ln_f (final layer norm)", COLORS["ln"], **on("ln_f"))
    arrow(ax, (cx, y + 0.6), (cx, y + 1.0), faded="head" not in lit)
    y += 1.0
    box(ax, left, y, w, 0.9, f"head: x · wteᵀ (tied)\n{C:,} → {V:,} logits", COLORS["head"],
        **on("head"))
    arrow(ax, (cx, y + 0.9), (cx, y + 1.3), faded="distribution" not in lit)
    y += 1.3
    box(ax, left, y, w, 0.9, "softmax → next-token\ndistribution", COLORS["prob"],
        **on("distribution"))
    ax.set_ylim(y + 1.1, 0)
    fig.set_size_inches(10 * 0.64, (y + 1.1) * 0.64)
    return fig


def write_model_map(path: str | Path) -> None:
    """The full map for the introduction (`book/intro.md`), from the released `gpt2` config."""
    from gpt2_course.config import GPT2Config

    use_svg()
    save_svg(model_map(GPT2Config(), highlight="all"), path)


if __name__ == "__main__":
    import sys

    write_model_map(sys.argv[1] if len(sys.argv) > 1 else "book/figures/model_map.svg")


# --- chapter figures (1-5): each takes the numbers its chapter computed --------------------------

def show_token(token: str) -> str:
    """A token as the chapters print it: quotes, so a leading space shows, and \\n for newline."""
    return repr(token)


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
            label(ax, xb, y + 0.22, f"{show_token(tok)} {p:.2f}", ha="left", fontsize=FONT_SIZE - 3)
            xb += 1.15
        box(ax, 8.3, y, 1.6, 0.6, f"{show_token(step['chosen'])}\np = {step['p']:.3f}", COLORS["prob"],
            fontsize=FONT_SIZE - 3, fill_alpha=0.35)
        label(ax, 8.3, y - 0.12, "drawn", ha="left", fontsize=FONT_SIZE - 3, color=COLORS["prob"])
        if n + 1 < len(steps):
            arrow(ax, (8.3, y + 0.55), (1.4, y + 1.25), color=COLORS["prob"], lw=0.9,
                  connectionstyle="arc3,rad=-0.05")
            label(ax, 5.0, y + 0.98, "append, ask again", fontsize=FONT_SIZE - 3, color=COLORS["prob"],
                  style="italic")
        y += 1.2
    return fig


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
            label(ax, 9.9, y + 0.28, f"next: merge {rank:,}, {a} + {b}", ha="right", fontsize=FONT_SIZE - 2)
        else:
            label(ax, 9.9, y + 0.28, "no learned pair left: done", ha="right", fontsize=FONT_SIZE - 2)
        y += 0.85
    return fig


def embedding_lookup(tokens: Sequence[str], ids: Sequence[int], wte_rows: np.ndarray,
                     wpe_rows: np.ndarray, channels: int = 2) -> plt.Figure:
    """x[t] = wte[id_t] + wpe[t] for a few tokens, with the first `channels` numbers of each row
    (a trailing … column stands for the rest)."""
    wte_rows, wpe_rows = np.asarray(wte_rows)[:, :channels], np.asarray(wpe_rows)[:, :channels]
    T, cell = len(tokens), 0.95
    fig, ax = canvas(3 * (channels * cell + 0.4) + 3.9, T * cell + 1.3, scale=0.6)
    x0, y0 = 2.3, 0.95
    for t, (tok, i) in enumerate(zip(tokens, ids)):
        label(ax, 0.1, y0 + (t + 0.5) * cell, f"{show_token(tok)} {i}", ha="left", fontsize=FONT_SIZE - 1)
    blocks = [("wte[id]", wte_rows, COLORS["wte"]), ("wpe[t]", wpe_rows, COLORS["wpe"]),
              ("x", wte_rows + wpe_rows, COLORS["residual"])]
    x = x0
    for n, (name, rows, color) in enumerate(blocks):
        label(ax, x + channels * cell / 2, y0 - 0.45, name, weight="bold", color=color)
        matrix(ax, rows, x, y0, cell, color=color, fmt="{:.3f}", fontsize=FONT_SIZE - 2)
        x += channels * cell
        label(ax, x + 0.2, y0 + T * cell / 2, "…", fontsize=FONT_SIZE - 1)
        x += 0.4
        if n < 2:
            label(ax, x + 0.35, y0 + T * cell / 2, "+" if n == 0 else "=", fontsize=FONT_SIZE + 4)
            x += 0.7
    return fig


def attention_query(tokens: Sequence[str], query: str, scores: Sequence[float],
                    weights: Sequence[float], values: np.ndarray, out: Sequence[float]) -> plt.Figure:
    """One query against every key: score q·k/√d -> softmax weight -> weight × value, summed."""
    values = np.asarray(values, dtype=float)
    T, D, row = len(tokens), values.shape[1], 0.55
    fig, ax = canvas(10, T * row + 2.4)
    y0 = 1.0
    heads = [(0.1, "key", COLORS["key"], "left"), (3.2, "q·k/√d", COLORS["query"], "center"),
             (5.0, "softmax weight", COLORS["prob"], "center"), (8.0, "value", COLORS["value"], "center")]
    label(ax, 5, 0.25, f"the query of {show_token(query)}", weight="bold", color=COLORS["query"])
    for x, text, color, ha in heads:
        label(ax, x, y0 - 0.3, text, color=color, weight="bold", ha=ha, fontsize=FONT_SIZE - 1)
    wmax = max(weights)
    for t, (tok, s, w) in enumerate(zip(tokens, scores, weights)):
        y = y0 + t * row
        box(ax, 0.1, y + 0.04, 1.9, row - 0.08, show_token(tok), COLORS["key"], fontsize=FONT_SIZE - 2)
        label(ax, 3.2, y + row / 2, f"{s:.2f}", fontsize=FONT_SIZE - 2)
        ax.add_patch(Rectangle((4.1, y + 0.1), 1.8 * w / wmax, row - 0.2, fc=COLORS["prob"], alpha=0.6))
        label(ax, 4.1 + 1.8 * w / wmax + 0.08, y + row / 2, f"{w:.2f}", ha="left", fontsize=FONT_SIZE - 2)
        arrow(ax, (2.05, y + row / 2), (2.6, y + row / 2), lw=0.8)
    matrix(ax, values, 8.0 - D * row / 2, y0, row, color=COLORS["value"], fmt="{:.1f}",
           vmax=float(np.abs(values).max()), fontsize=FONT_SIZE - 3)
    yb = y0 + T * row + 0.35
    label(ax, 5.5, yb + 0.3, "output = Σ weight × value =", ha="right", fontsize=FONT_SIZE - 1)
    matrix(ax, np.asarray(out, dtype=float)[None], 8.0 - D * row / 2, yb, row, color=COLORS["value"],
           fmt="{:.2f}", vmax=float(np.abs(values).max()), fontsize=FONT_SIZE - 3)
    return fig


def masked_weights(tokens: Sequence[str], weights: np.ndarray, mask: np.ndarray) -> plt.Figure:
    """A [T, T] attention matrix: query rows, key columns, masked cells hatched grey."""
    T, cell = len(tokens), 0.9
    fig, ax = canvas(T * cell + 3.2, T * cell + 2.2, scale=0.6)
    labels = [show_token(t) for t in tokens]
    matrix(ax, weights, 2.6, 1.7, cell, color=COLORS["attn"], fmt="{:.2f}", mask=~np.asarray(mask, bool),
           vmax=1.0, fontsize=FONT_SIZE - 2, row_labels=labels, col_labels=labels)
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
