"""Exercises for chapter 1, language modeling: losses in nats, perplexity, bigram counts."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from gpt2_course.grading.questions import Exercise, Question, calls, choice, planted, value

V = 50257


def bigram_counts(ids: Any, vocab_size: int) -> np.ndarray:
    ids = np.asarray(ids)
    counts = np.zeros((vocab_size, vocab_size), dtype=np.int64)
    np.add.at(counts, (ids[:-1], ids[1:]), 1)
    return counts


@planted("Rows and columns are swapped: counts[a, b] must count how often b follows a (row = current "
         "token, column = next token).")
def transposed(ids: Any, vocab_size: int) -> np.ndarray:
    return bigram_counts(ids, vocab_size).T


@planted("You counted a pair from the last token back to the first. A text of n tokens has n - 1 "
         "pairs: zip(ids[:-1], ids[1:]).")
def wrap(ids: Any, vocab_size: int) -> np.ndarray:
    return bigram_counts(list(ids) + [ids[0]], vocab_size)


@planted("Repeated pairs were counted once: counts[a, b] += 1 with index arrays writes each repeated "
         "(a, b) only once. Use np.add.at(counts, (a, b), 1) or a plain loop.")
def fancy_index(ids: Any, vocab_size: int) -> np.ndarray:
    ids = np.asarray(ids)
    counts = np.zeros((vocab_size, vocab_size), dtype=np.int64)
    counts[ids[:-1], ids[1:]] += 1
    return counts


def next_token_probs(counts: Any, token: int, lam: float, unigram: Any) -> np.ndarray:
    row = counts[token]
    if row.sum() == 0:
        return unigram.copy()
    return lam * row / row.sum() + (1 - lam) * unigram


@planted("The weights are swapped: lam weighs the bigram estimate, lam * bigram + (1 - lam) * unigram.")
def swapped(counts: Any, token: int, lam: float, unigram: Any) -> np.ndarray:
    return next_token_probs(counts, token, 1 - lam, unigram)


@planted("You read a column, counts[:, token]: those count what comes *before* the token. What follows "
         "it is its row, counts[token].")
def column(counts: Any, token: int, lam: float, unigram: Any) -> np.ndarray:
    return next_token_probs(counts.T, token, lam, unigram)


@planted("A token never seen as context has an all-zero row: 0 / 0 gives NaN. Fall back to the unigram "
         "distribution for it.")
def no_fallback(counts: Any, token: int, lam: float, unigram: Any) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return lam * counts[token] / counts[token].sum() + (1 - lam) * unigram


def _ids() -> list[Any]:
    rng = np.random.default_rng(1)
    return [np.array([0, 1, 2, 1, 2, 0]), rng.integers(0, 5, size=40), np.array([4, 4, 4, 4, 1]),
            np.array([2])]


def _probs_args() -> list[tuple[Any, ...]]:
    ids = np.random.default_rng(2).integers(0, 5, size=60)  # token 5 never occurs
    counts = bigram_counts(ids, 6)
    unigram = np.bincount(ids, minlength=6) + 1.0
    unigram = unigram / unigram.sum()
    return [(counts, t, lam, unigram) for t, lam in [(0, 0.7), (3, 0.25), (1, 1.0), (5, 0.7)]]


EXERCISE = Exercise("01_language_modeling", "Language modeling", [
    value("uniform_loss", "q1", 1, math.log(V), {
        "bits": (math.log2(V), "That is in bits (log base 2). The course measures cross-entropy "
                 "in nats: use the natural log, math.log."),
        "perplexity": (V, "That is the perplexity. The cross-entropy is its natural log: the "
                       "loss of a uniform guess over V tokens is ln V."),
        "log10": (math.log10(V), "That is log base 10. Cross-entropy in nats uses the natural log."),
    }),
    value("perplexity_by_hand", "q2", 1, 2 ** 1.75, {
        "loss": (1.75 * math.log(2), "That is the cross-entropy (mean negative log-probability). "
                 "The perplexity is its exponential."),
        "mean_inverse": (4.0, "You averaged 1/p. Perplexity averages the log-probabilities, then "
                         "exponentiates: a geometric, not an arithmetic, mean of 1/p."),
        "inverse_mean": (1 / 0.34375, "You took 1 / (mean probability). Average -log p first, then "
                         "exponentiate."),
        "sum": (2 ** 7, "You summed the negative log-probabilities: take their mean, so the "
                "perplexity does not grow with the length of the text."),
    }, rtol=1.5e-3),  # two decimals by hand (3.36) pass; 3.37 does not
    Question("q3", "bigram_counts", 2, bigram_counts,
             cases=calls(lambda: [(ids, 6) for ids in _ids()],
                         label=lambda ids, v: f"ids of length {len(ids)}, vocab_size {v}"),
             mistakes=[transposed, wrap, fancy_index]),
    Question("q4", "next_token_probs", 2, next_token_probs,
             cases=calls(_probs_args, label=lambda c, t, lam, u: f"token {t}, lam {lam}"),
             mistakes=[swapped, column, no_fallback]),
    choice("blind_spot", "q5", "a", {
        "b": "Smoothing mixes the same unigram vector into every row, but the bigram part would "
             "still tell the contexts apart if the model saw them. Look at what the probability "
             "p(next | current) is conditioned on.",
        "c": "GPT-2's 50,257 tokens tell ' king' from ' be' perfectly well. The model never looks "
             "at either: what does it condition on?",
        "d": "Whether a text was held out changes how well the model does on it, not which tokens "
             "it conditions on.",
    }),
])
