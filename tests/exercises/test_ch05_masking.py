"""Masking (05_masking): a learner-style wrong answer for every planted mistake of its bank,
gpt2_course/exercises/ch05_masking.py, and other forms learners write that must get the same hint."""
from planted import planted_tests

PLANTED = {
    ("q1", "all"): "visible_pairs = 1024 * 1024",
    ("q1", "half"): "visible_pairs = 1024 ** 2 // 2",
    ("q1", "no_diagonal"): "visible_pairs = 1024 * 1023 // 2",
    ("q2", "no_offset"): """
def causal_mask(t_q, t_k=None):
    t_k = t_k or t_q
    return torch.ones(t_q, t_k, dtype=torch.bool).tril()""",
    ("q2", "no_self"): """
def causal_mask(t_q, t_k=None):
    t_k = t_k or t_q
    return torch.ones(t_q, t_k, dtype=torch.bool).tril(diagonal=t_k - t_q - 1)""",
    ("q2", "sees_future"): """
def causal_mask(t_q, t_k=None):
    t_k = t_k or t_q
    return torch.ones(t_q, t_k, dtype=torch.bool).tril(diagonal=t_k - t_q + 1)""",
    ("q2", "upper"): """
def causal_mask(t_q, t_k=None):
    t_k = t_k or t_q
    return torch.ones(t_q, t_k, dtype=torch.bool).triu()""",
    ("q3", "inverted"): """
def masked_softmax(scores, mask):
    return scores.masked_fill(mask, -float("inf")).softmax(-1)""",
    ("q3", "mask_after"): """
def masked_softmax(scores, mask):
    return scores.softmax(-1) * mask""",
    ("q3", "mask_zero"): """
def masked_softmax(scores, mask):
    return torch.softmax(torch.where(mask, scores, torch.zeros_like(scores)), -1)""",
    ("q3", "softmax_dim"): """
def masked_softmax(scores, mask):
    return scores.masked_fill(~mask, float("-inf")).softmax(dim=-2)""",
}

ALSO = {
    ("q2", "sees_future"): ["""
def causal_mask(t_q, t_k=None):
    t_k = t_k or t_q
    return torch.tril(torch.ones(t_q, t_k), diagonal=1).bool()"""],
    ("q2", "upper"): ["""
def causal_mask(t_q, t_k=None):
    return torch.ones(t_q, t_k or t_q).triu().bool()"""],
    ("q3", "softmax_dim"): ["""
def masked_softmax(scores, mask):
    return F.softmax(scores.masked_fill(~mask, float("-inf")), dim=0)"""],
}

test_covered, test_hints, test_distinct = planted_tests("05_masking", PLANTED, ALSO)
