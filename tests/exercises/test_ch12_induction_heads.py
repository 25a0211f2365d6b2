"""Induction heads (12_induction_heads): a learner-style wrong answer for every planted mistake of
its bank, gpt2_course/exercises/ch12_induction_heads.py, and other forms learners write that must
get the same hint."""
from planted import planted_tests

PLANTED = {
    ("q1", "own_token"): """
def previous_token_score(maps):
    return torch.diagonal(maps, dim1=-2, dim2=-1).mean(-1)""",
    ("q1", "divide_by_t"): """
def previous_token_score(maps):
    T = maps.shape[-1]
    return sum(maps[..., t, t - 1] for t in range(1, T)) / T""",
    ("q2", "duplicate_token"): """
def prefix_matching_score(maps, period):
    T = maps.shape[-1]
    return torch.stack([maps[..., t, t - period] for t in range(period, T)], -1).mean(-1)""",
    ("q2", "from_first_copy"): """
def prefix_matching_score(maps, period):
    return torch.diagonal(maps, offset=-(period - 1), dim1=-2, dim2=-1).mean(-1)""",
    ("q3", "reversed_gain"): """
def in_context_gain(losses, period):
    return losses[:, period:].mean(1) - losses[:, :period - 1].mean(1)""",
    ("q3", "with_copy_start"): """
def in_context_gain(losses, period):
    return losses[:, :period - 1].mean(1) - losses[:, period - 1:].mean(1)""",
    ("q3", "one_number"): """
def in_context_gain(losses, period):
    return losses[:, :period - 1].mean() - losses[:, period:].mean()""",
    ("q4", "interleaved"): """
def silence_head(y, head, n_head):
    y = y.clone()
    y[:, :, head::n_head] = 0
    return y""",
    ("q4", "keep_only"): """
def silence_head(y, head, n_head):
    d = y.shape[-1] // n_head
    out = torch.zeros_like(y)
    out[..., head * d:(head + 1) * d] = y[..., head * d:(head + 1) * d]
    return out""",
    ("q4", "next_head"): """
def silence_head(y, head, n_head):
    d = y.shape[-1] // n_head
    out = y.clone()
    out[..., (head + 1) * d:(head + 2) * d] = 0
    return out""",
    ("q4", "in_place"): """
def silence_head(y, head, n_head):
    d = y.shape[-1] // n_head
    y[:, :, head * d:(head + 1) * d] = 0
    return y""",
    ("q5", "first_occurrence"): """
def copy_rule_right(tokens):
    tokens = tokens.tolist()
    right = 0
    for t in range(len(tokens) - 1):
        if tokens[t] in tokens[:t]:
            j = tokens.index(tokens[t])
            right += tokens[j + 1] == tokens[t + 1]
    return torch.tensor(right / (len(tokens) - 1), dtype=torch.float64)""",
    ("q5", "fires_only"): """
def copy_rule_right(tokens):
    tokens = tokens.tolist()
    fires = sum(tokens[t] in tokens[:t] for t in range(len(tokens) - 1))
    return torch.tensor(fires / (len(tokens) - 1), dtype=torch.float64)""",
}

test_covered, test_hints, test_distinct = planted_tests("12_induction_heads", PLANTED)
