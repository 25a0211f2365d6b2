"""Self-attention (04_self_attention): a learner-style wrong answer for every planted mistake of its
bank, gpt2_course/exercises/ch04_self_attention.py, and other forms learners write that must get the
same hint."""
from planted import planted_tests

PLANTED = {
    ("q1", "features"): "weights_shape = torch.Size([2, 5, 8])",
    ("q1", "square"): "weights_shape = (2, 5, 5)",
    ("q1", "transposed"): "weights_shape = [2, 7, 5]",
    ("q2", "by_d"): """
def scores(q, k):
    return q @ k.transpose(-1, -2) / q.shape[-1]""",
    ("q2", "by_t"): """
def scores(q, k):
    return torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-2])""",
    ("q2", "no_scale"): """
def scores(q, k):
    return q @ k.transpose(-1, -2)""",
    ("q2", "transposed"): """
def scores(q, k):
    return k @ q.transpose(-1, -2) / q.shape[-1] ** 0.5""",
    ("q3", "inverted"): """
def attention_weights(q, k, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))
    return F.softmax(s, -1)""",
    ("q3", "mask_after"): """
def attention_weights(q, k, mask=None):
    w = (q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])).softmax(-1)
    return w if mask is None else w.masked_fill(~mask, 0.0)""",
    ("q3", "mask_zero"): """
def attention_weights(q, k, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
    if mask is not None:
        s = s * mask
    return s.softmax(dim=-1)""",
    ("q3", "no_scale"): """
def attention_weights(q, k, mask=None):
    s = q @ k.transpose(-2, -1)
    if mask is not None:
        s = s.masked_fill(mask == False, -math.inf)  # noqa: E712
    return torch.softmax(s, dim=-1)""",
    ("q3", "softmax_dim"): """
def attention_weights(q, k, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
    if mask is not None:
        s = torch.where(mask, s, -math.inf)
    return s.softmax(dim=-2)""",
    ("q4", "inverted"): """
def attention(q, k, v, mask=None):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else ~mask)""",
    ("q4", "no_scale"): """
def attention(q, k, v, mask=None):
    s = q @ k.mT
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return s.softmax(-1) @ v""",
    ("q4", "no_softmax"): """
def attention(q, k, v, mask=None):
    return (q @ k.mT / math.sqrt(q.size(-1))) @ v""",
    ("q4", "softmax_dim"): """
def attention(q, k, v, mask=None):
    s = q @ k.mT / math.sqrt(q.size(-1))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return s.softmax(-2) @ v""",
}

ALSO = {
    ("q3", "softmax_dim"): ["""
def attention_weights(q, k, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=0)"""],
    ("q4", "softmax_dim"): ["""
def attention(q, k, v, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, 0) @ v"""],
}

test_covered, test_hints, test_distinct = planted_tests("04_self_attention", PLANTED, ALSO)
