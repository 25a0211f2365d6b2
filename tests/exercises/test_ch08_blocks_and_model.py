"""Blocks and the model (08_blocks_and_model): a learner-style wrong answer for every planted mistake
of its bank, gpt2_course/exercises/ch08_blocks_and_model.py, and other forms learners write that
must get the same hint."""
from planted import planted_tests

PLANTED = {
    ("q1", "eps_outside"): """
def layer_norm(x, weight, bias, eps=1e-5):
    std = x.std(-1, keepdim=True, unbiased=False)
    return (x - x.mean(-1, keepdim=True)) / (std + eps) * weight + bias""",
    ("q1", "no_affine"): """
def layer_norm(x, weight, bias, eps=1e-5):
    mu, var = x.mean(-1, keepdim=True), x.var(-1, keepdim=True, unbiased=False)
    return (x - mu) / (var + eps).sqrt()""",
    ("q1", "unbiased"): """
def layer_norm(x, weight, bias, eps=1e-5):
    return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + eps) * weight + bias""",
    ("q1", "wrong_dim"): """
def layer_norm(x, weight, bias, eps=1e-5):
    mu, var = x.mean(0, keepdim=True), x.var(0, keepdim=True, unbiased=False)
    return (x - mu) / (var + eps).sqrt() * weight + bias""",
    ("q2", "no_attn_residual"): """
def block_forward(x, ln_1, attn, ln_2, mlp):
    x = attn(ln_1(x))
    return x + mlp(ln_2(x))""",
    ("q2", "no_mlp_residual"): """
def block_forward(x, ln_1, attn, ln_2, mlp):
    x = x + attn(ln_1(x))
    return mlp(ln_2(x))""",
    ("q2", "normed_residual"): """
def block_forward(x, ln_1, attn, ln_2, mlp):
    h = ln_1(x)
    h = h + attn(h)
    h = ln_2(h)
    return h + mlp(h)""",
    ("q2", "parallel"): """
def block_forward(x, ln_1, attn, ln_2, mlp):
    return x + attn(ln_1(x)) + mlp(ln_2(x))""",
    ("q2", "post_ln"): """
def block_forward(x, ln_1, attn, ln_2, mlp):
    x = ln_1(x + attn(x))
    return ln_2(x + mlp(x))""",
    ("q3", "no_ln_f"): """
def tied_logits(x, ln_f, wte):
    return x @ wte.T""",
    ("q3", "no_transpose"): """
def tied_logits(x, ln_f, wte):
    return ln_f(x) @ wte""",
    ("q4", "option_a"): "hf_transposed = 'a'",
    ("q4", "option_c"): "hf_transposed = 'c'",
    ("q4", "option_d"): "hf_transposed = 'd'",
}

test_covered, test_hints, test_distinct = planted_tests("08_blocks_and_model", PLANTED)
