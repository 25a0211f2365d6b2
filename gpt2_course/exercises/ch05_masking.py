"""Exercises for chapter 5, masking: the causal mask and a masked softmax."""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from gpt2_course.exercises._hints import MASK_AFTER, MASK_INVERTED, MASK_ZERO, SEES_FUTURE, SOFTMAX_DIM
from gpt2_course.grading.questions import Exercise, Question, calls, planted, randn, value
from gpt2_course.masking import causal_mask

T = 1024


def _grid(t_q: int, t_k: int | None, offset: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Query positions [t_q, 1] and key positions [1, t_k] (queries are the last t_q keys)."""
    t_k = t_q if t_k is None else t_k
    return torch.arange(t_q)[:, None] + (t_k - t_q if offset else 0), torch.arange(t_k)[None, :]


def _tril(t_q: int, t_k: int | None, diagonal: int) -> torch.Tensor:
    return torch.ones(t_q, t_q if t_k is None else t_k).tril(diagonal).bool()


@planted(SEES_FUTURE, also=(lambda t_q, t_k=None: _tril(t_q, t_k, 1),))
def sees_future(t_q: int, t_k: int | None = None) -> torch.Tensor:
    i, j = _grid(t_q, t_k)
    return j <= i + 1


@planted("The diagonal is False, so a token cannot see itself (j < i). A token sees keys up to and "
         "including its own position: j <= i.", also=(lambda t_q, t_k=None: _tril(t_q, t_k, -1),))
def no_self(t_q: int, t_k: int | None = None) -> torch.Tensor:
    i, j = _grid(t_q, t_k)
    return j < i


@planted("You built the upper triangle: every token sees the future and not the past. Query i may "
         "see key j when j <= i.", also=(lambda t_q, t_k=None: ~_tril(t_q, t_k, -1),))
def upper(t_q: int, t_k: int | None = None) -> torch.Tensor:
    i, j = _grid(t_q, t_k)
    return j >= i


@planted("With t_k > t_q the queries are the *last* t_q positions: query i sits at position "
         "t_k - t_q + i. You aligned them with the first keys, so the newest token cannot see the "
         "latest keys.")
def no_offset(t_q: int, t_k: int | None = None) -> torch.Tensor:
    i, j = _grid(t_q, t_k, offset=False)
    return j <= i


def explain_mask(where: tuple[int, ...], expected: bool, shape: tuple[int, ...]) -> str:
    """A differing entry of a causal mask, in words."""
    t_q, t_k = shape[-2], shape[-1]
    i, j = where[-2], where[-1]
    pos = t_k - t_q + i
    if expected:
        return (f"query {i} cannot see key {j}, " + ("its own position" if j == pos else
                f"a past position (query {i} sits at position {pos})"))
    return f"query {i} can see key {j}, a future position (query {i} sits at position {pos})"


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return F.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)


@planted(MASK_ZERO)
def mask_zero(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return F.softmax(scores.masked_fill(~mask, 0.0), dim=-1)


@planted(MASK_AFTER)
def mask_after(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return F.softmax(scores, dim=-1) * mask


@planted(MASK_INVERTED)
def inverted(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return F.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)


@planted(SOFTMAX_DIM, also=(lambda scores, mask: F.softmax(scores.masked_fill(~mask, float("-inf")), 0),))
def softmax_dim(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return F.softmax(scores.masked_fill(~mask, float("-inf")), dim=-2)


def _mask_args() -> list[tuple[Any, ...]]:
    return [(randn(1, 4, 4), causal_mask(4)), (randn(2, 2, 3, 5), causal_mask(3, 5)),
            (randn(3, 3, 5), torch.tensor([[True, True, True, False, False]] * 3))]


EXERCISE = Exercise("05_masking", "Masking", [
    value("visible_pairs", "q1", 1, T * (T + 1) // 2, {
        "no_diagonal": (T * (T - 1) // 2, "You left out the diagonal: every token sees itself."),
        "half": (T * T // 2, "Half of the square misses half of the diagonal: the lower triangle "
                 "including the diagonal has T (T + 1) / 2 entries."),
        "all": (T * T, "That is every (query, key) pair: the mask hides the upper triangle."),
    }, rtol=0),
    Question("q2", "causal_mask", 3, causal_mask, strict_dtype=True, course=(causal_mask,),
             explain=explain_mask,
             cases=calls(lambda: [(4,), (1,), (3, 5), (1, 6), (2, 2), (6,)],
                         label=lambda *a: f"causal_mask{a}"),
             mistakes=[sees_future, no_self, upper, no_offset]),
    Question("q3", "masked_softmax", 2, masked_softmax, cases=calls(_mask_args),
             mistakes=[mask_zero, mask_after, inverted, softmax_dim]),
])
