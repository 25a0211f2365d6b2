"""Exercises for chapter 9, sampling and the KV cache: temperature, top-k, top-p, the cache."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from gpt2_course.exercises._hints import ZERO_FILL
from gpt2_course.generate import LayerCache, top_k_filter, top_p_filter
from gpt2_course.grading.questions import Case, Exercise, Question, calls, planted, randn, value

Tensor = torch.Tensor


def temperature_probs(logits: Tensor, temperature: float) -> Tensor:
    return F.softmax(logits / temperature, dim=-1)


def _power(logits: Tensor, exponent: float) -> Tensor:
    p = F.softmax(logits, dim=-1) ** exponent
    return p / p.sum(-1, keepdim=True)


@planted("You multiplied the logits by the temperature: divide them by it, so a temperature below 1 "
         "sharpens the distribution.", also=(lambda logits, t: _power(logits, t),))
def multiply(logits: Tensor, temperature: float) -> Tensor:
    return F.softmax(logits * temperature, dim=-1)


@planted("Softmax over the wrong dimension: each row of logits (the last dimension, the vocabulary) is "
         "its own distribution.")
def softmax_dim(logits: Tensor, temperature: float) -> Tensor:
    return F.softmax(logits / temperature, dim=0)


@planted("Dividing the probabilities by T and renormalizing changes nothing. Scale the logits: "
         "softmax(logits / T).")
def scaled_probs(logits: Tensor, temperature: float) -> Tensor:
    p = F.softmax(logits, dim=-1) / temperature
    return p / p.sum(-1, keepdim=True)


@planted("softmax(logits) ** (1 / T) has the right shape of distribution, but its rows no longer sum to "
         "1: divide by their sum, or compute softmax(logits / T) directly.",
         also=(lambda logits, t: F.softmax(logits, dim=-1) ** t,))
def power_unnormalized(logits: Tensor, temperature: float) -> Tensor:
    return F.softmax(logits, dim=-1) ** (1 / temperature)


def _kth(logits: Tensor, k: int) -> Tensor:
    return torch.topk(logits, min(k, logits.size(-1)), dim=-1).values[..., -1:]


@planted(ZERO_FILL)
def zero(logits: Tensor, k: int) -> Tensor:
    return logits.masked_fill(logits < _kth(logits, k), 0.0)


@planted("You kept one token too few: keep logits >= the k-th largest value (the k-th itself stays).")
def one_too_few(logits: Tensor, k: int) -> Tensor:
    return logits.masked_fill(logits <= _kth(logits, k), float("-inf"))


@planted("You kept one token too many: exactly k tokens survive.")
def one_too_many(logits: Tensor, k: int) -> Tensor:
    return top_k_filter(logits, k + 1)


def _nucleus(logits: Tensor, p: float, drop: Callable[[Tensor, Tensor], Tensor], descending: bool = True,
             mass: Callable[[Tensor], Tensor] = lambda s: F.softmax(s, dim=-1), fill: float = float("-inf")
             ) -> Tensor:
    """Top-p with one step swapped out: `drop(cumulative mass, mass)` picks the sorted tokens to drop."""
    order = torch.sort(logits, dim=-1, descending=descending)
    m = mass(order.values)
    dropped = drop(m.cumsum(-1), m)
    return logits.masked_fill(torch.zeros_like(dropped).scatter(-1, order.indices, dropped), fill)


def _keep_first(cum: Tensor, m: Tensor, p: float) -> Tensor:
    """Hugging Face's form without its shift: drop where cumsum > p, but never the first token."""
    drop = cum > p
    drop[..., 0] = False
    return drop


@planted("Top-p kept one token too few: you dropped the token whose probability carries the total past "
         "p. Keep a token while the mass *before* it is below p (shift the cumulative sum by one), so at "
         "least one token survives.",
         also=(lambda logits, p: _nucleus(logits, p, lambda cum, m: _keep_first(cum, m, p)),
               lambda logits, p: _nucleus(logits, p, lambda cum, m: cum >= p)), name="one_too_few")
def top_p_one_too_few(logits: Tensor, p: float) -> Tensor:
    return _nucleus(logits, p, lambda cum, m: cum > p)


@planted("You accumulated logits, not probabilities: softmax the sorted logits before the cumulative sum.")
def logits(logits: Tensor, p: float) -> Tensor:
    return _nucleus(logits, p, lambda cum, m: cum - m >= p, mass=lambda s: s)


@planted("The nucleus is the *most* probable tokens: sort in descending order.")
def ascending(logits: Tensor, p: float) -> Tensor:
    return _nucleus(logits, p, lambda cum, m: cum - m >= p, descending=False)


@planted(ZERO_FILL, name="zero")
def top_p_zero(logits: Tensor, p: float) -> Tensor:
    return _nucleus(logits, p, lambda cum, m: cum - m >= p, fill=0.0)


class _Cache(LayerCache):
    """LayerCache with one step of `update` swapped out by the planted mistakes below."""

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        if self.k is None:
            k_all, v_all = k, v
        else:
            k_all, v_all = self.join(self.k, k), self.join(self.v, v)
        self.k, self.v = self.keep(k, v, k_all, v_all)
        return self.output(k, v, k_all, v_all)

    def join(self, past: Tensor, new: Tensor) -> Tensor:
        return torch.cat([past, new], dim=-2)

    def keep(self, k: Tensor, v: Tensor, k_all: Tensor, v_all: Tensor) -> tuple[Tensor, Tensor]:
        return k_all, v_all

    def output(self, k: Tensor, v: Tensor, k_all: Tensor, v_all: Tensor) -> tuple[Tensor, Tensor]:
        return k_all, v_all


@planted("torch.cat joins along dim 0 (the batch) unless told otherwise: keys and values grow along "
         "time, dim=-2.")
class cat_dim0(_Cache):
    def join(self, past: Tensor, new: Tensor) -> Tensor:
        return torch.cat([past, new], dim=0)


@planted("You concatenated along the last dimension (the features): keys and values grow along time, "
         "dim=-2.")
class cat_last(_Cache):
    def join(self, past: Tensor, new: Tensor) -> Tensor:
        return torch.cat([past, new], dim=-1)


@planted("update must return the past *and* the new keys and values, so that the new query can attend to "
         "the whole history.")
class no_past(_Cache):
    def output(self, k: Tensor, v: Tensor, k_all: Tensor, v_all: Tensor) -> tuple[Tensor, Tensor]:
        return k, v


@planted("The new keys go after the past ones: torch.cat([past, new], dim=-2) keeps positions in order.")
class new_first(_Cache):
    def join(self, past: Tensor, new: Tensor) -> Tensor:
        return torch.cat([new, past], dim=-2)


@planted("The cache stored only the newest keys and values, so it forgets all but the last step: store "
         "the concatenation.")
class keeps_last(_Cache):
    def keep(self, k: Tensor, v: Tensor, k_all: Tensor, v_all: Tensor) -> tuple[Tensor, Tensor]:
        return k, v


def _logits_cases(*specs: tuple[tuple[int, ...], Any]) -> Callable[[], list[tuple[Any, ...]]]:
    return lambda: [(randn(i, *shape) * 2, arg) for i, (shape, arg) in enumerate(specs)]


def _cache_cases() -> list[Case]:
    def run(cls: Any, B: int, H: int, steps: tuple[int, ...], D: int, seed: int) -> tuple[Any, ...]:
        cache, outs = cls(), []
        for i, t in enumerate(steps):
            k, v = randn(seed + 2 * i, B, H, t, D), randn(seed + 2 * i + 1, B, H, t, D)
            outs.append(tuple(cache.update(k, v)))
        return tuple(outs)

    specs = [(1, 2, (3, 1, 1), 4), (2, 3, (2, 2, 1, 1), 2), (1, 2, (2, 2, 2), 3)]
    return [Case(f"B={B}, H={H}, D={D}: updates with {list(steps)} new positions",
                 lambda cls, spec=(B, H, steps, D, 10 * n): run(cls, *spec))
            for n, (B, H, steps, D) in enumerate(specs)]


EXERCISE = Exercise("09_sampling", "Sampling", [
    Question("q1", "temperature_probs", 2, temperature_probs,
             cases=calls(_logits_cases(((6,), 0.5), ((3, 6), 2.0), ((2, 7), 0.7)),
                         label=lambda x, t: f"logits {list(x.shape)}, temperature {t}"),
             mistakes=[multiply, softmax_dim, scaled_probs, power_unnormalized]),
    Question("q2", "top_k_filter", 2, top_k_filter, course=(top_k_filter,),
             cases=calls(_logits_cases(((10,), 3), ((3, 8), 2), ((2, 5), 1), ((2, 5), 5)),
                         label=lambda x, k: f"logits {list(x.shape)}, k {k}"),
             mistakes=[zero, one_too_few, one_too_many]),
    Question("q3", "top_p_filter", 3, top_p_filter, course=(top_p_filter,),
             cases=calls(_logits_cases(((8,), 0.9), ((3, 10), 0.5), ((2, 6), 0.05), ((2, 6), 1.0)),
                         label=lambda x, p: f"logits {list(x.shape)}, p {p}"),
             mistakes=[top_p_one_too_few, logits, ascending, top_p_zero]),
    Question("q4", "LayerCache", 3, LayerCache, course=(LayerCache,), cases=_cache_cases,
             mistakes=[cat_dim0, cat_last, no_past, new_first, keeps_last]),
    value("next_position", "q5", 1, 7, {
        "one_based": (8, "Positions count from 0: with 7 positions cached (0 to 6), the new token "
                      "sits at position 7."),
        "restart": (0, "Without the cache's length the new token would get position 0, the "
                    "embedding of the first token. Positions continue from cache.length."),
    }, rtol=0),
])
