"""Exercises for chapter 2, byte-pair encoding: pair counts, merges, training and encoding."""
from __future__ import annotations

from typing import Any

from gpt2_course.bpe import bpe, merge_pair
from gpt2_course.grading.questions import Exercise, Question, calls, planted, value

Pair = tuple[int, int]


def get_pair_counts(ids: list[int]) -> dict[Pair, int]:
    counts: dict[Pair, int] = {}
    for pair in zip(ids, ids[1:]):
        counts[pair] = counts.get(pair, 0) + 1
    return counts


@planted("You counted only pairs that start at even positions. Pairs overlap: every adjacent pair "
         "counts, zip(ids, ids[1:]).")
def step_two(ids: list[int]) -> dict[Pair, int]:
    counts: dict[Pair, int] = {}
    for pair in zip(ids[::2], ids[1::2]):
        counts[pair] = counts.get(pair, 0) + 1
    return counts


@planted("Each distinct pair was counted once. Count every occurrence: counts[pair] = "
         "counts.get(pair, 0) + 1.")
def once(ids: list[int]) -> dict[Pair, int]:
    return dict.fromkeys(get_pair_counts(ids), 1)


@planted("You counted a pair from the last token back to the first: a sequence of n tokens has n - 1 "
         "adjacent pairs.")
def wrap(ids: list[int]) -> dict[Pair, int]:
    return get_pair_counts(list(ids) + list(ids[:1]))


@planted("After a merge you advanced by one token, so the second token of the pair was used twice: "
         "merge([5, 5, 5], (5, 5), 6) must give [6, 5]. Skip both merged tokens (i += 2).")
def overlap(ids: list[int], pair: Pair, new_id: int) -> list[int]:
    return [new_id if (a, b) == tuple(pair) else a for a, b in zip(ids, [*ids[1:], None])]


@planted("Only the first occurrence was merged. Replace every occurrence, scanning left to right.")
def first(ids: list[int], pair: Pair, new_id: int) -> list[int]:
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == tuple(pair):
            return [*ids[:i], new_id, *ids[i + 2:]]
    return list(ids)


@planted("You scanned from the right: merge([5, 5, 5], (5, 5), 6) must give [6, 5], not [5, 6]. Scan "
         "left to right.")
def right_to_left(ids: list[int], pair: Pair, new_id: int) -> list[int]:
    return merge_pair(list(ids)[::-1], tuple(pair)[::-1], new_id)[::-1]


def bpe_train_step(ids: list[int], new_id: int) -> tuple[list[int], Pair]:
    counts = get_pair_counts(ids)
    pair = max(counts, key=counts.get)
    return merge_pair(ids, pair, new_id), pair


@planted("max(counts) compares the pairs themselves (the largest token ids win), not their counts: use "
         "max(counts, key=counts.get).")
def max_pairs(ids: list[int], new_id: int) -> tuple[list[int], Pair]:
    pair = max(get_pair_counts(ids))
    return merge_pair(ids, pair, new_id), pair


@planted("On a tie you picked the pair seen last. Break ties by first occurrence, as max(counts, "
         "key=counts.get) does on a dict.")
def ties_last(ids: list[int], new_id: int) -> tuple[list[int], Pair]:
    pair = sorted(get_pair_counts(ids).items(), key=lambda kv: kv[1])[-1][0]
    return merge_pair(ids, pair, new_id), pair


@planted("On a tie you picked the pair whose tokens sort first, chapter 2's rule. This question "
         "breaks ties by first occurrence in ids instead: max(counts, key=counts.get).")
def ties_bytes(ids: list[int], new_id: int) -> tuple[list[int], Pair]:
    counts = get_pair_counts(ids)
    pair = min(counts, key=lambda p: (-counts[p], p))
    return merge_pair(ids, pair, new_id), pair


def _apply(ids: list[int], merges: dict[Pair, int], pick: Any) -> list[int]:
    ids = list(ids)
    while known := [p for p in zip(ids, ids[1:]) if p in merges]:
        pair = pick(known)
        ids = merge_pair(ids, pair, merges[pair])
    return ids


@planted("Merges applied out of rank order: you merged the leftmost mergeable pair first. BPE applies "
         "the merge learned earliest (lowest rank) first, wherever it is in the sequence.")
def leftmost(ids: list[int], merges: dict[Pair, int]) -> list[int]:
    return _apply(ids, merges, lambda known: known[0])


@planted("Merges applied out of rank order: you applied the most recently learned merge first. Apply "
         "the lowest rank (earliest learned) first.")
def latest_first(ids: list[int], merges: dict[Pair, int]) -> list[int]:
    rank = {pair: r for r, pair in enumerate(merges)}
    return _apply(ids, merges, lambda known: max(known, key=rank.__getitem__))


def _learn_merges(text: str, n: int) -> dict[Pair, int]:
    ids, merges = list(text.encode("utf-8")), {}
    for new_id in range(256, 256 + n):
        ids, pair = bpe_train_step(ids, new_id)
        merges[pair] = new_id
    return merges


def _merges_args() -> list[tuple[Any, ...]]:
    crafted = {(1, 2): 10, (3, 4): 11, (2, 3): 12, (10, 11): 13}
    learned = _learn_merges("the cat sat on the mat; the cat ate the hat", 12)
    return [
        ([1, 2, 3, 4], {(2, 3): 10, (1, 2): 11, (10, 4): 12}),
        ([1, 2, 3, 4], crafted),
        ([5, 1, 2, 3, 4, 1, 2], crafted),
        (list(b"the hat sat on the cat"), learned),
        (list(b"x"), learned),
    ]


EXERCISE = Exercise("02_bpe", "Byte-pair encoding", [
    value("gpt2_merges", "q1", 1, 50000, {
        "vocab": (50257, "That is the vocabulary size. Not every token is a merge: subtract the "
                  "256 single-byte tokens and <|endoftext|>."),
        "bytes_only": (50001, "You subtracted the 256 byte tokens but not <|endoftext|>, which is "
                       "a special token, not a merge."),
        "eot_only": (50256, "You subtracted <|endoftext|> but not the 256 single-byte tokens the "
                     "merges start from."),
    }, rtol=0),
    Question("q2", "get_pair_counts", 2, get_pair_counts,
             cases=calls(lambda: [([1, 2, 3, 1, 2],), ([5, 5, 5, 5],), ([1, 2, 1, 2, 1, 2, 3],),
                                  ([7],), ([],), (list(b"hello hello"),)],
                         label=lambda ids: f"ids {ids[:12]}"),
             mistakes=[step_two, once, wrap]),
    Question("q3", "merge", 2, merge_pair, course=(merge_pair,),
             cases=calls(lambda: [([1, 2, 3, 1, 2], (1, 2), 9), ([5, 5, 5], (5, 5), 6),
                                  ([5, 5, 5, 5], (5, 5), 6), ([1, 2, 1, 2, 1], (1, 2), 8),
                                  ([3, 1], (1, 2), 7), ([2, 1], (1, 2), 7)],
                         label=lambda ids, pair, new: f"merge({ids}, {pair}, {new})"),
             mistakes=[overlap, first, right_to_left]),
    Question("q4", "bpe_train_step", 2, bpe_train_step,
             cases=calls(lambda: [([1, 2, 1, 2, 3, 4, 3, 4, 9, 1], 10), ([4, 4, 4, 1, 2, 1, 2, 1, 2], 10),
                                  (list(b"hello hello world"), 256)],
                         label=lambda ids, new: f"ids {ids[:10]}..., new_id {new}"),
             mistakes=[max_pairs, ties_last, ties_bytes]),
    Question("q5", "apply_merges", 3, bpe, course=(bpe,),
             cases=calls(_merges_args, label=lambda ids, m: f"ids {ids[:8]}, {len(m)} merges"),
             mistakes=[leftmost, latest_first]),
])
