"""Exercises for chapter 6, multi-head attention: splitting and merging heads, the whole layer."""
from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from gpt2_course.exercises._hints import NO_SCALE
from gpt2_course.grading.questions import Exercise, Mistake, Question, calls, planted, randn, value
from gpt2_course.heads import merge_heads, split_heads
from gpt2_course.masking import causal_mask

Tensor = torch.Tensor
C = 768


@planted("x.view(B, n_head, T, d_head) reinterprets the memory: features of different positions end up "
         "in one head. View as [B, T, n_head, d_head], then transpose(1, 2).")
def view_direct(x: Tensor, n_head: int) -> Tensor:
    B, T, C = x.shape
    return x.reshape(B, n_head, T, C // n_head)


@planted("Head h must own the contiguous features h*d_head ... (h+1)*d_head - 1. You interleaved them "
         "(head index as the fast dimension).")
def interleaved(x: Tensor, n_head: int) -> Tensor:
    B, T, C = x.shape
    return x.reshape(B, T, C // n_head, n_head).permute(0, 3, 1, 2)


@planted("You returned [B, T, n_head, d_head]: transpose(1, 2) to put the heads before time, "
         "[B, n_head, T, d_head].")
def no_transpose(x: Tensor, n_head: int) -> Tensor:
    B, T, C = x.shape
    return x.reshape(B, T, n_head, C // n_head)


@planted("Reshaping [B, n_head, T, d_head] straight to [B, T, C] mixes heads and positions: "
         "transpose(1, 2) first.", name="no_transpose")
def merge_no_transpose(x: Tensor) -> Tensor:
    B, H, T, D = x.shape
    return x.reshape(B, T, H * D)


def multi_head_attention(x: Tensor, w_attn: Tensor, b_attn: Tensor, w_proj: Tensor, b_proj: Tensor,
                         n_head: int, *, scale: float | None = None, masked: bool = True,
                         proj: bool = True) -> Tensor:
    """The layer, with keyword switches that the planted mistakes below flip one at a time."""
    T, C = x.shape[-2:]
    q, k, v = (split_heads(t, n_head) for t in F.linear(x, w_attn, b_attn).split(C, dim=-1))
    att = q @ k.transpose(-2, -1) / (math.sqrt(C // n_head) if scale is None else scale)
    if masked:
        att = att.masked_fill(~causal_mask(T), float("-inf"))
    y = merge_heads(F.softmax(att, dim=-1) @ v)
    return F.linear(y, w_proj, b_proj) if proj else y


@planted("No causal mask: every token reads the tokens after it. Mask scores where key j > query i with "
         "-inf before the softmax.")
def no_mask(x: Tensor, *w: Any) -> Tensor:
    return multi_head_attention(x, *w, masked=False)


@planted(NO_SCALE, name="no_scale")
def mha_no_scale(x: Tensor, *w: Any) -> Tensor:
    return multi_head_attention(x, *w, scale=1.0)


@planted("You scaled by sqrt(n_embd). Each head's scores are dot products of d_head = n_embd / n_head "
         "features: divide by sqrt(d_head).")
def scale_by_c(x: Tensor, *w: Any) -> Tensor:
    return multi_head_attention(x, *w, scale=math.sqrt(x.size(-1)))


@planted("You attended with one head over all C features. Split q, k and v into n_head heads of "
         "C / n_head features, attend per head, then merge.")
def single_head(x: Tensor, *w: Any) -> Tensor:
    return multi_head_attention(x, *w[:-1], 1)


@planted("The output projection c_proj is missing: after merging the heads, apply y @ w_proj.T + b_proj.")
def no_proj(x: Tensor, *w: Any) -> Tensor:
    return multi_head_attention(x, *w, proj=False)


def _mha_args() -> list[tuple[Any, ...]]:
    out = []
    for seed, (B, T, C, H) in enumerate([(2, 5, 12, 3), (1, 4, 8, 2), (1, 6, 16, 4)]):
        s = 10 * seed
        out.append((randn(s, B, T, C), randn(s + 1, 3 * C, C) / math.sqrt(C) * 2,
                    randn(s + 2, 3 * C) * 0.1, randn(s + 3, C, C) / math.sqrt(C),
                    randn(s + 4, C) * 0.1, H))
    return out


EXERCISE = Exercise("06_multi_head_attention", "Multi-head attention", [
    value("c_attn_params", "q1", 1, C * 3 * C + 3 * C, {
        "no_bias": (C * 3 * C, "You left out the bias: c_attn is an nn.Linear(768, 2304) with a "
                    "bias of 2304 numbers."),
        "per_head": ((C * 3 * C + 3 * C) // 12, "c_attn projects all twelve heads at once: one "
                     "768 -> 2304 linear layer for the whole block, not one per head."),
    }, rtol=0),
    Question("q2", "split_heads", 2, split_heads, course=(split_heads,),
             cases=calls(lambda: [(randn(1, 2, 5, 12), 3), (randn(2, 1, 4, 8), 4), (randn(3, 3, 2, 6), 2)],
                         label=lambda x, h: f"x {list(x.shape)}, n_head {h}"),
             mistakes=[view_direct, interleaved, no_transpose]),
    Question("q3", "merge_heads", 2, merge_heads, course=(merge_heads,),
             cases=calls(lambda: [(randn(1, 2, 3, 5, 4),), (randn(2, 1, 4, 4, 2),), (randn(3, 2, 1, 3, 6),)]),
             mistakes=[
                 merge_no_transpose,
                 Mistake("view_error", "After transpose(1, 2) the tensor is not contiguous, so .view fails: "
                         "use .contiguous().view(B, T, C) or .reshape(B, T, C).",
                         error=r"view size is not compatible|contiguous"),
             ]),
    Question("q4", "multi_head_attention", 3, multi_head_attention,
             cases=calls(_mha_args, label=lambda x, *w: f"x {list(x.shape)}, n_head {w[-1]}"),
             mistakes=[no_mask, mha_no_scale, scale_by_c, single_head, no_proj]),
])
