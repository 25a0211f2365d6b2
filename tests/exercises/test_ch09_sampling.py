"""Sampling (09_sampling): a learner-style wrong answer for every planted mistake of its bank,
gpt2_course/exercises/ch09_sampling.py, and other forms learners write that must get the same hint."""
from planted import planted_tests

PLANTED = {
    ("q1", "multiply"): """
def temperature_probs(logits, t):
    return (logits * t).softmax(-1)""",
    ("q1", "power_unnormalized"): """
def temperature_probs(logits, t):
    return logits.softmax(-1) ** (1 / t)""",
    ("q1", "scaled_probs"): """
def temperature_probs(logits, t):
    p = logits.softmax(-1) / t
    return p / p.sum(-1, keepdim=True)""",
    ("q1", "softmax_dim"): """
def temperature_probs(logits, t):
    return F.softmax(logits / t, dim=0)""",
    ("q2", "one_too_few"): """
def top_k_filter(logits, k):
    v, _ = torch.topk(logits, k)
    out = logits.clone()
    out[logits <= v[..., [-1]]] = float("-inf")
    out[logits > v[..., [-1]]] = logits[logits > v[..., [-1]]]
    return out""",
    ("q2", "one_too_many"): """
def top_k_filter(logits, k):
    k = min(k + 1, logits.shape[-1])
    v, _ = torch.topk(logits, k)
    return logits.masked_fill(logits < v[..., -1:], float("-inf"))""",
    ("q2", "zero"): """
def top_k_filter(logits, k):
    v, _ = torch.topk(logits, k)
    return torch.where(logits >= v[..., [-1]], logits, torch.zeros_like(logits))""",
    ("q3", "ascending"): """
def top_p_filter(logits, p):
    sorted_logits, idx = logits.sort(-1)
    probs = sorted_logits.softmax(-1)
    remove = probs.cumsum(-1) - probs >= p
    return logits.masked_fill(remove.scatter(-1, idx, remove), float("-inf"))""",
    ("q3", "logits"): """
def top_p_filter(logits, p):
    sorted_logits, idx = logits.sort(-1, descending=True)
    cum = sorted_logits.cumsum(-1)
    remove = cum - sorted_logits >= p
    return logits.masked_fill(remove.scatter(-1, idx, remove), float("-inf"))""",
    ("q3", "one_too_few"): """
def top_p_filter(logits, p):
    sorted_logits, idx = logits.sort(-1, descending=True)
    remove = sorted_logits.softmax(-1).cumsum(-1) > p
    return logits.masked_fill(remove.scatter(-1, idx, remove), float("-inf"))""",
    ("q3", "zero"): """
def top_p_filter(logits, p):
    sorted_logits, idx = logits.sort(-1, descending=True)
    probs = sorted_logits.softmax(-1)
    remove = probs.cumsum(-1) - probs >= p
    return logits.masked_fill(remove.scatter(-1, idx, remove), 0)""",
    ("q4", "cat_dim0"): """
class LayerCache:
    def __init__(self):
        self.k = self.v = None
    def update(self, k, v):
        if self.k is not None:
            k, v = torch.cat([self.k, k]), torch.cat([self.v, v])
        self.k, self.v = k, v
        return k, v""",
    ("q4", "cat_last"): """
class LayerCache:
    def __init__(self):
        self.k = self.v = None
    def update(self, k, v):
        if self.k is not None:
            k, v = torch.cat([self.k, k], -1), torch.cat([self.v, v], -1)
        self.k, self.v = k, v
        return k, v""",
    ("q4", "keeps_last"): """
class LayerCache:
    def __init__(self):
        self.k = self.v = None
    def update(self, k, v):
        k_all = k if self.k is None else torch.cat([self.k, k], 2)
        v_all = v if self.v is None else torch.cat([self.v, v], 2)
        self.k, self.v = k, v
        return k_all, v_all""",
    ("q4", "new_first"): """
class LayerCache:
    def __init__(self):
        self.k = self.v = None
    def update(self, k, v):
        if self.k is not None:
            k, v = torch.cat([k, self.k], 2), torch.cat([v, self.v], 2)
        self.k, self.v = k, v
        return k, v""",
    ("q4", "no_past"): """
class LayerCache:
    def __init__(self):
        self.k = self.v = None
    def update(self, k, v):
        self.k = k if self.k is None else torch.cat([self.k, k], 2)
        self.v = v if self.v is None else torch.cat([self.v, v], 2)
        return k, v""",
    ("q5", "one_based"): "next_position = 8",
    ("q5", "restart"): "next_position = 0",
}

ALSO = {
    ("q1", "power_unnormalized"): ["""
def temperature_probs(logits, t):
    return F.softmax(logits, dim=-1) ** t"""],
    ("q1", "multiply"): ["""
def temperature_probs(logits, t):
    p = logits.softmax(-1) ** t
    return p / p.sum(-1, keepdim=True)"""],
    ("q3", "one_too_few"): ["""
def top_p_filter(logits, p):
    sorted_logits, idx = torch.sort(logits, descending=True)
    cum = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)
    remove = cum > p
    remove[..., 0] = False
    return logits.masked_fill(remove.scatter(-1, idx, remove), float("-inf"))"""],
}

test_covered, test_hints, test_distinct = planted_tests("09_sampling", PLANTED, ALSO)
