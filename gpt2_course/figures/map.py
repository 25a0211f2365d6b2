"""The "where we are" map: GPT-2 as one column of boxes, sizes from a config, one part highlighted.

Chapters 3-10 open with it (`model_map(config, highlight="attn")`); `book/intro.md` shows the full
map, written to `book/figures/model_map.svg` by `write_model_map` (`python -m gpt2_course.figures`).
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch

from .primitives import COLORS, FONT_SIZE, SMALL_FONT, arrow, box, canvas, label, plus, save_svg, use_svg

__all__ = ["MAP_PARTS", "model_map", "write_model_map"]

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
    # wte is looked up by each token's id, wpe by its position: only the count T comes from the tokens
    label(ax, cx - 1.35, y + 1.05, "ids", ha="left", fontsize=SMALL_FONT)
    label(ax, cx + 1.65, y + 1.05, "positions 0 … T−1", ha="left", fontsize=SMALL_FONT)
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
