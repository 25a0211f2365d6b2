"""Multi-head attention (06_multi_head_attention): a learner-style wrong answer for every planted
mistake of its bank, gpt2_course/exercises/ch06_multi_head_attention.py, and other forms learners
write that must get the same hint."""
from planted import one_change, planted_tests

# One multi-head attention, every mistake one line different from the right answer.
MHA = """
def multi_head_attention(x, w_attn, b_attn, w_proj, b_proj, n_head):
    B, T, C = x.shape
    H = {heads}
    q, k, v = (x @ w_attn.T + b_attn).split(C, dim=2)
    q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
    att = q @ k.transpose(-2, -1) / {scale}
    {mask}
    y = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
    return {out}
"""
MHA_OK = dict(heads="n_head", scale="math.sqrt(C // n_head)",
              mask="att = att.masked_fill(torch.ones(T, T).tril() == 0, float('-inf'))",
              out="y @ w_proj.T + b_proj")

PLANTED = {
    ("q1", "no_bias"): "c_attn_params = 768 * 2304",
    ("q1", "per_head"): "c_attn_params = (768 * 2304 + 2304) // 12",
    ("q2", "interleaved"): """
def split_heads(x, n_head):
    B, T, C = x.shape
    return x.view(B, T, C // n_head, n_head).permute(0, 3, 1, 2)""",
    ("q2", "no_transpose"): """
def split_heads(x, n_head):
    B, T, C = x.shape
    return x.view(B, T, n_head, C // n_head)""",
    ("q2", "view_direct"): """
def split_heads(x, n_head):
    B, T, C = x.shape
    return x.reshape(B, n_head, T, C // n_head)""",
    ("q3", "no_transpose"): """
def merge_heads(x):
    B, H, T, D = x.shape
    return x.reshape(B, T, H * D)""",
    ("q3", "view_error"): """
def merge_heads(x):
    B, H, T, D = x.shape
    return x.transpose(1, 2).view(B, T, H * D)""",
}
PLANTED |= one_change("q4", MHA, MHA_OK, {
    "no_mask": {"mask": "pass"}, "no_scale": {"scale": "1"}, "scale_by_c": {"scale": "math.sqrt(C)"},
    "single_head": {"heads": "1", "scale": "math.sqrt(C)"}, "no_proj": {"out": "y"},
})

test_covered, test_hints, test_distinct = planted_tests("06_multi_head_attention", PLANTED)
