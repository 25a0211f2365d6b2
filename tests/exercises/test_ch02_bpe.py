"""Byte-pair encoding (02_bpe): a learner-style wrong answer for every planted mistake of its bank,
gpt2_course/exercises/ch02_bpe.py, and other forms learners write that must get the same hint."""
from planted import planted_tests

PLANTED = {
    ("q1", "bytes_only"): "gpt2_merges = 50257 - 256",
    ("q1", "eot_only"): "gpt2_merges = 50257 - 1",
    ("q1", "vocab"): "gpt2_merges = 50257",
    ("q2", "once"): """
def get_pair_counts(ids):
    return {p: 1 for p in zip(ids, ids[1:])}""",
    ("q2", "step_two"): """
def get_pair_counts(ids):
    out = {}
    for i in range(0, len(ids) - 1, 2):
        out[ids[i], ids[i + 1]] = out.get((ids[i], ids[i + 1]), 0) + 1
    return out""",
    ("q2", "wrap"): """
from collections import Counter
def get_pair_counts(ids):
    return dict(Counter(zip(ids, ids[1:] + ids[:1])))""",
    ("q3", "first"): """
def merge(ids, pair, new_id):
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == pair:
            return ids[:i] + [new_id] + ids[i + 2:]
    return list(ids)""",
    ("q3", "overlap"): """
def merge(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i < len(ids) - 1 and (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
        else:
            out.append(ids[i])
        i += 1
    return out""",
    ("q3", "right_to_left"): """
def merge(ids, pair, new_id):
    out, i = [], len(ids) - 1
    while i >= 0:
        if i > 0 and (ids[i - 1], ids[i]) == pair:
            out.insert(0, new_id); i -= 2
        else:
            out.insert(0, ids[i]); i -= 1
    return out""",
    ("q4", "max_pairs"): """
def bpe_train_step(ids, new_id):
    counts = {}
    for p in zip(ids, ids[1:]):
        counts[p] = counts.get(p, 0) + 1
    pair = max(counts)
    return MERGE(ids, pair, new_id), pair""",
    ("q4", "ties_last"): """
def bpe_train_step(ids, new_id):
    counts = {}
    for p in zip(ids, ids[1:]):
        counts[p] = counts.get(p, 0) + 1
    best = None
    for p, c in counts.items():
        if best is None or c >= counts[best]:
            best = p
    return MERGE(ids, best, new_id), best""",
    ("q4", "ties_bytes"): """
def bpe_train_step(ids, new_id):
    counts = {}
    for p in zip(ids, ids[1:]):
        counts[p] = counts.get(p, 0) + 1
    best = min(counts, key=lambda p: (-counts[p], p))
    return MERGE(ids, best, new_id), best""",
    ("q5", "latest_first"): """
def apply_merges(ids, merges):
    ids = list(ids)
    while True:
        found = [p for p in zip(ids, ids[1:]) if p in merges]
        if not found:
            return ids
        pair = max(found, key=lambda p: merges[p])
        ids = MERGE(ids, pair, merges[pair])""",
    ("q5", "leftmost"): """
def apply_merges(ids, merges):
    ids = list(ids)
    i = 0
    while i < len(ids) - 1:
        if (ids[i], ids[i + 1]) in merges:
            ids[i:i + 2] = [merges[ids[i], ids[i + 1]]]
            i = 0
        else:
            i += 1
    return ids""",
}

test_covered, test_hints, test_distinct = planted_tests("02_bpe", PLANTED)
