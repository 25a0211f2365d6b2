"""Making it fast (A2_making_it_fast): a learner-style wrong answer for every planted mistake of its
bank, gpt2_course/exercises/a2_making_it_fast.py, and other forms learners write that must get the
same hint."""
from planted import one_change, planted_tests

QUANTIZE = """
def quantize_rows(w):
    scale = {scale}
    return {q}, scale
"""
QUANTIZE_OK = dict(scale="w.abs().amax(dim=1) / 127", q="torch.round(w / scale[:, None]).to(torch.int8)")

LAYOUT = """
def decode_layout(w):
    out, inp = w.shape
    if {test}:
        return {wide}
    return {tall}
"""
LAYOUT_OK = dict(test="out >= inp", wide="w.T.contiguous().T", tall="w.contiguous()")

PLANTED = {
    ("q1", "params"): "gpt2_bytes = 124_439_808 - 1024 * 768",
    ("q1", "with_wpe"): "gpt2_bytes = 4 * 124_439_808",
    ("q1", "untied"): "gpt2_bytes = 4 * (124_439_808 + 50257 * 768 - 1024 * 768)",
    ("q2", "params"): "ceiling = 20e9 / 123_653_376",
    ("q2", "with_wpe"): "ceiling = 20e9 / (4 * 124_439_808)",
    ("q2", "bf16"): "ceiling = 20e9 / (2 * 123_653_376)",
}
PLANTED |= one_change("q3", QUANTIZE, QUANTIZE_OK, {
    "per_tensor": {"scale": "w.abs().max() / 127", "q": "torch.round(w / scale).to(torch.int8)"},
    "truncate": {"q": "(w / scale[:, None]).to(torch.int8)"},
    "by_128": {"scale": "w.abs().amax(dim=1) / 128"},
    "signed_max": {"scale": "w.max(dim=1).values / 127"},
})
PLANTED |= one_change("q4", LAYOUT, LAYOUT_OK, {
    "always_columns": {"tall": "w.T.contiguous().T"},
    "reversed_rule": {"test": "out < inp"},
    "transposed": {"wide": "w.T.contiguous()"},
    "square_rows": {"test": "out > inp"},
    "unchanged": {"wide": "w"},
})

test_covered, test_hints, test_distinct = planted_tests("A2_making_it_fast", PLANTED)
