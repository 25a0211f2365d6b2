"""Exercises for chapter 12, induction heads: the two head scores, the in-context gain, silencing
one head, and the induction rule run on tokens."""
from __future__ import annotations

import torch

from gpt2_course.grading.questions import Case, Exercise, Question, calls, planted
from gpt2_course.induction import copy_rule, prefix_matching_scores, previous_token_scores

Tensor = torch.Tensor


def _maps(seed: int, *shape: int) -> Tensor:
    """Random causal attention maps [..., T, T]: rows sum to 1 over the keys a query may see."""
    g = torch.Generator().manual_seed(seed)
    T = shape[-1]
    scores = torch.randn(*shape, generator=g, dtype=torch.float64)
    return scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf")).softmax(-1)


@planted("You read A[t, t], each query's weight on itself. The previous token is one key to the left "
         "of the diagonal: A[t, t - 1], for t = 1 .. T - 1.")
def own_token(maps: Tensor) -> Tensor:
    return maps.diagonal(dim1=-2, dim2=-1).mean(-1)


@planted("You divided the sum by T. Only the T - 1 queries t = 1 .. T - 1 have a previous token: "
         "average over those.")
def divide_by_t(maps: Tensor) -> Tensor:
    return maps.diagonal(offset=-1, dim1=-2, dim2=-1).sum(-1) / maps.size(-1)


def _prefix(maps: Tensor, period: int, back: int, first: int) -> Tensor:
    t = torch.arange(first, maps.size(-1))
    return maps[..., t, t - back].mean(-1)


@planted("You read key t - period, the earlier occurrence of the query's own token (that is a "
         "duplicate-token score). An induction head reads the token after it, key t - period + 1.")
def duplicate_token(maps: Tensor, period: int) -> Tensor:
    return _prefix(maps, period, period, period)


@planted("You started at query period - 1, which is still in the first copy and has no earlier "
         "occurrence. Only queries t = period .. T - 1 are in the repeat.")
def from_first_copy(maps: Tensor, period: int) -> Tensor:
    return _prefix(maps, period, period - 1, period - 1)


def in_context_gain(losses: Tensor, period: int) -> Tensor:
    """losses [n, T - 1] of a probe that repeats with `period` (losses[:, i] is the loss on token
    i + 1) -> [n]: the first copy's mean loss minus the second copy's, each without its first token."""
    return losses[:, : period - 1].mean(-1) - losses[:, period:].mean(-1)


@planted("Gain is the first copy's loss minus the second copy's: reading the earlier copy makes the "
         "second cheaper, so a working copier has a positive gain.")
def reversed_gain(losses: Tensor, period: int) -> Tensor:
    return -in_context_gain(losses, period)


@planted("Your second copy starts at its first token (losses[:, period - 1], the loss on token "
         "`period`), which nothing before it predicts. Leave it out: the second copy is losses[:, period:].")
def with_copy_start(losses: Tensor, period: int) -> Tensor:
    return losses[:, : period - 1].mean(-1) - losses[:, period - 1:].mean(-1)


@planted("You averaged over the whole batch. Return one gain per row, shape [n]: .mean(-1), not .mean().")
def one_number(losses: Tensor, period: int) -> Tensor:
    return in_context_gain(losses, period).mean()


def silence_head(y: Tensor, head: int, n_head: int) -> Tensor:
    """y [B, T, C], the heads' outputs side by side (c_proj's input) -> a copy with `head` zeroed."""
    d = y.size(-1) // n_head
    out = y.clone()
    out[..., head * d:(head + 1) * d] = 0
    return out


@planted("Head h owns the contiguous channels h * d .. (h + 1) * d - 1 (chapter 6's split_heads), "
         "not every n_head-th channel.")
def interleaved(y: Tensor, head: int, n_head: int) -> Tensor:
    out = y.clone()
    out[..., head::n_head] = 0
    return out


@planted("You kept the head and silenced all the others. Ablating a head zeroes its own channels and "
         "leaves the rest as they are.")
def keep_only(y: Tensor, head: int, n_head: int) -> Tensor:
    return y - silence_head(y, head, n_head)


@planted("Head h's channels start at h * d with d = C // n_head; your slice is one head off.")
def next_head(y: Tensor, head: int, n_head: int) -> Tensor:
    d = y.size(-1) // n_head
    out = y.clone()
    out[..., (head + 1) * d:(head + 2) * d] = 0
    return out


@planted("You zeroed the head's channels in y itself, so the caller's y changed too. Work on a copy: "
         "out = y.clone(), then zero the channels of out.")
def in_place(y: Tensor, head: int, n_head: int) -> Tensor:
    d = y.size(-1) // n_head
    y[..., head * d:(head + 1) * d] = 0
    return y


def _y_cases() -> list[Case]:
    """The three calls, then y itself after a call: the question says not to change it."""
    def y_after(f) -> Tensor:
        y = torch.randn(2, 3, 12, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
        f(y, 1, 3)
        return y

    return calls(_y_args, label=lambda y, h, n: f"y {list(y.shape)}, head {h} of {n}")() + [
        Case("y itself after a call with head 1 of 3 (it must not change)", y_after)]


def copy_rule_right(tokens: Tensor) -> Tensor:
    """tokens [T] -> the share of positions 0 .. T - 2 where the induction rule predicts the next token."""
    return copy_rule(tokens[None])[1].double().mean()


def _rule(tokens: Tensor, pick, count_fires: bool = False) -> Tensor:
    hits = []
    for t in range(len(tokens) - 1):
        earlier = [j for j in range(t) if tokens[j] == tokens[t]]
        if count_fires:
            hits.append(bool(earlier))
        else:
            hits.append(bool(earlier) and bool(tokens[pick(earlier) + 1] == tokens[t + 1]))
    return torch.tensor(hits, dtype=torch.float64).mean()


@planted("You copied after the *first* earlier occurrence. The rule uses the most recent one, the "
         "latest j < t with the same token.")
def first_occurrence(tokens: Tensor) -> Tensor:
    return _rule(tokens, lambda earlier: earlier[0])


@planted("You counted where the rule fires (an earlier occurrence exists), not where its prediction "
         "equals the actual next token.")
def fires_only(tokens: Tensor) -> Tensor:
    return _rule(tokens, None, count_fires=True)


def _tokens() -> list[tuple[Tensor]]:
    rows = [[0, 1, 2, 0, 1, 3, 0, 1, 2], [5, 5, 5, 1, 5, 2, 5, 1],
            [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9]]
    g = torch.Generator().manual_seed(12)
    rows.append(torch.randint(4, (20,), generator=g).tolist())
    return [(torch.tensor(r),) for r in rows]


def _gain_args() -> list[tuple[Tensor, int]]:
    g = torch.Generator().manual_seed(3)
    return [(torch.rand(2, 2 * p - 1, generator=g, dtype=torch.float64) * 4, p) for p in (3, 5, 8)]


def _y_args() -> list[tuple[Tensor, int, int]]:
    g = torch.Generator().manual_seed(4)
    heads = [(1, 3), (0, 4), (2, 3)]
    return [(torch.randn(2, 3, 12, generator=g, dtype=torch.float64), h, n) for h, n in heads]


EXERCISE = Exercise("12_induction_heads", "Induction heads", [
    Question("q1", "previous_token_score", 2, previous_token_scores, course=(previous_token_scores,),
             cases=calls(lambda: [(_maps(1, 6, 6),), (_maps(2, 2, 3, 9, 9),), (_maps(3, 4, 4),)],
                         label=lambda m: f"maps {list(m.shape)}"),
             mistakes=[own_token, divide_by_t]),
    Question("q2", "prefix_matching_score", 3, prefix_matching_scores, course=(prefix_matching_scores,),
             cases=calls(lambda: [(_maps(4, 8, 8), 4), (_maps(5, 2, 10, 10), 3), (_maps(6, 3, 12, 12), 6)],
                         label=lambda m, p: f"maps {list(m.shape)}, period {p}"),
             mistakes=[duplicate_token, from_first_copy]),
    Question("q3", "in_context_gain", 2, in_context_gain,
             cases=calls(_gain_args, label=lambda losses, p: f"losses {list(losses.shape)}, period {p}"),
             mistakes=[reversed_gain, with_copy_start, one_number]),
    Question("q4", "silence_head", 2, silence_head, cases=_y_cases,
             mistakes=[interleaved, keep_only, next_head, in_place]),
    Question("q5", "copy_rule_right", 2, copy_rule_right, course=(copy_rule,),
             cases=calls(_tokens, label=lambda t: f"tokens {t.tolist()}"),
             mistakes=[first_occurrence, fires_only]),
])
