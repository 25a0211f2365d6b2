"""Making it fast (A2_making_it_fast): a learner-style wrong answer for every planted mistake of its
bank, gpt2_course/exercises/a2_making_it_fast.py, and other forms learners write that must get the
same hint."""
import torch
from planted import define, one_change, planted_tests, solution_answers

from gpt2_course.grading import check_answer, get_exercise

QUANTIZE = """
def quantize_rows(w):
    scale = {scale}
    return {q}, scale
"""
QUANTIZE_OK = dict(scale="w.abs().amax(dim=1).clamp(min=1e-12) / 127",
                   q="torch.round(w / scale[:, None]).to(torch.int8)")

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
    "by_128": {"scale": "w.abs().amax(dim=1).clamp(min=1e-12) / 128"},
    "no_clamp": {"scale": "w.abs().amax(dim=1) / 127"},
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


def test_a_row_of_zeros_quantizes_to_zeros_with_a_scale_above_zero():
    """The checks hand quantize_rows a matrix with a row of zeros: the bank's reference and the course's
    solution clamp its scale as Int8Linear does, so w / scale is 0, not 0 / 0 = NaN before the cast."""
    q = get_exercise("A2_making_it_fast").question("q3")
    assert any("a row of zeros" in c.label for c in q.cases())
    solution = solution_answers("A2_making_it_fast")["quantize_rows"]
    w = torch.tensor([[0.5, -2.0, 1.0], [0.0, 0.0, 0.0]], dtype=torch.float64)
    for quantize in (solution, q.reference):
        ints, scale = quantize(w.clone())
        assert ints.dtype == torch.int8 and ints[1].tolist() == [0, 0, 0], quantize
        assert ints[0].tolist() == [32, -127, 64] and bool((scale > 0).all()), (quantize, scale)
        assert bool((w / scale[:, None]).isfinite().all()), quantize
    assert check_answer("A2_making_it_fast", "q3", solution).status == "pass"
    clamped = define(QUANTIZE.format(scale="w.abs().amax(dim=1).clamp(min=1e-12) / 127", q=QUANTIZE_OK["q"]))
    assert check_answer("A2_making_it_fast", "q3", clamped["quantize_rows"]).status == "pass"
