"""Exercises for chapter 4, self-attention: scores, masked attention weights, attention."""
from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from gpt2_course.attention import attention, attention_weights
from gpt2_course.exercises._hints import MASK_AFTER, MASK_INVERTED, MASK_ZERO, NO_SCALE, SOFTMAX_DIM
from gpt2_course.grading.questions import Exercise, Question, calls, planted, randn, shape, value
from gpt2_course.masking import causal_mask

Tensor = torch.Tensor


def scores(q: Tensor, k: Tensor) -> Tensor:
    return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))


@planted(NO_SCALE)
def no_scale(q: Tensor, k: Tensor) -> Tensor:
    return q @ k.transpose(-2, -1)


@planted("You divided by d_head; divide by its square root, sqrt(d_head), which keeps the scores' "
         "variance near 1.")
def by_d(q: Tensor, k: Tensor) -> Tensor:
    return q @ k.transpose(-2, -1) / q.size(-1)


@planted("You scaled by the square root of the sequence length (q.size(-2)). The scale uses the head "
         "size, the last dimension: q.size(-1).")
def by_t(q: Tensor, k: Tensor) -> Tensor:
    return q @ k.transpose(-2, -1) / math.sqrt(q.size(-2))


@planted("Query i must pair with key j in scores[..., i, j]: compute q @ k^T, not k @ q^T.")
def transposed(q: Tensor, k: Tensor) -> Tensor:
    return k @ q.transpose(-2, -1) / math.sqrt(q.size(-1))


def _masked(s: Tensor, mask: Tensor | None, fill: float = float("-inf"), dim: int = -1) -> Tensor:
    return F.softmax(s if mask is None else s.masked_fill(~mask, fill), dim=dim)


def _sdpa_inverted(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> Tensor:
    """F.scaled_dot_product_attention with attn_mask=~mask: the mask's meaning flipped."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else ~mask)


@planted(NO_SCALE, name="no_scale")
def weights_no_scale(q: Tensor, k: Tensor, mask: Tensor | None = None) -> Tensor:
    return _masked(no_scale.impl(q, k), mask)


@planted(SOFTMAX_DIM, also=(lambda q, k, mask=None: _masked(scores(q, k), mask, dim=0),))
def softmax_dim(q: Tensor, k: Tensor, mask: Tensor | None = None) -> Tensor:
    return _masked(scores(q, k), mask, dim=-2)


@planted(MASK_ZERO)
def mask_zero(q: Tensor, k: Tensor, mask: Tensor | None = None) -> Tensor:
    return _masked(scores(q, k), mask, fill=0.0)


@planted(MASK_AFTER)
def mask_after(q: Tensor, k: Tensor, mask: Tensor | None = None) -> Tensor:
    w = F.softmax(scores(q, k), dim=-1)
    return w if mask is None else w * mask


@planted(MASK_INVERTED)
def inverted(q: Tensor, k: Tensor, mask: Tensor | None = None) -> Tensor:
    return _masked(scores(q, k), None if mask is None else ~mask)


@planted(NO_SCALE, name="no_scale")
def attention_no_scale(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> Tensor:
    return weights_no_scale.impl(q, k, mask) @ v


@planted(SOFTMAX_DIM, name="softmax_dim",
         also=(lambda q, k, v, mask=None: _masked(scores(q, k), mask, dim=0) @ v,))
def attention_softmax_dim(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> Tensor:
    return softmax_dim.impl(q, k, mask) @ v


@planted(MASK_INVERTED, also=(_sdpa_inverted,), name="inverted")
def attention_inverted(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> Tensor:
    return inverted.impl(q, k, mask) @ v


@planted("The scores went straight into the product with v: turn them into weights with a softmax over "
         "the keys first.")
def no_softmax(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> Tensor:
    return scores(q, k) @ v


def _qk_args() -> list[tuple[Any, ...]]:
    return [(randn(1, 4, 6), randn(2, 4, 6)), (randn(3, 2, 3, 8), randn(4, 2, 5, 8)),
            (randn(5, 1, 2, 5, 16), randn(6, 1, 2, 5, 16))]


def _qk_mask_args() -> list[tuple[Any, ...]]:
    pad = torch.tensor([[True, True, True, False, False]] * 3)
    return [(randn(1, 4, 6) * 2, randn(2, 4, 6), None),
            (randn(3, 4, 6) * 2, randn(4, 4, 6), causal_mask(4)),
            (randn(5, 2, 3, 8) * 2, randn(6, 2, 5, 8), causal_mask(3, 5)),
            (randn(7, 3, 8), randn(8, 5, 8), pad)]


def _qkv_mask_args() -> list[tuple[Any, ...]]:
    return [(q, k, randn(20 + i, *k.shape[:-1], 3), m) for i, (q, k, m) in enumerate(_qk_mask_args())]


def _mask_label(*args: Any) -> str:
    shapes = ", ".join(shape(a) for a in args[:-1])
    return f"{shapes}, {'no mask' if args[-1] is None else 'mask ' + shape(args[-1])}"


EXERCISE = Exercise("04_self_attention", "Self-attention", [
    value("weights_shape", "q1", 1, (2, 5, 7), {
        "transposed": ((2, 7, 5), "Rows are queries and columns are keys: the weights are "
                       "[batch, T_q, T_k]."),
        "features": ((2, 5, 8), "The weights spread each query over the *keys*, not over the "
                     "features: the last dimension is T_k = 7. (The output, softmax(q k^T / sqrt(d)) v, is "
                     "[2, 5, D_v], D_v being the values' width.)"),
        "square": ((2, 5, 5), "The keys come from a sequence of 7 tokens: the weights are "
                   "T_q x T_k = 5 x 7."),
    }),
    Question("q2", "scores", 2, scores, cases=calls(_qk_args), mistakes=[no_scale, by_d, by_t, transposed]),
    Question("q3", "attention_weights", 2, attention_weights, course=(attention_weights,),
             cases=calls(_qk_mask_args, label=_mask_label),
             mistakes=[weights_no_scale, softmax_dim, mask_zero, mask_after, inverted]),
    Question("q4", "attention", 2, attention, course=(attention, attention_weights),
             cases=calls(_qkv_mask_args, label=_mask_label),
             mistakes=[attention_no_scale, attention_softmax_dim, no_softmax, attention_inverted]),
])
