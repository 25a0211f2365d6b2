"""The MLP (07_mlp): a learner-style wrong answer for every planted mistake of its bank,
gpt2_course/exercises/ch07_mlp.py, and other forms learners write that must get the same hint."""
from planted import planted_tests

PLANTED = {
    ("q1", "same"): "mlp_hidden = 768",
    ("q1", "three"): "mlp_hidden = 3 * 768",
    ("q2", "exact"): """
def gelu_tanh(x):
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))""",
    ("q2", "no_half"): """
def gelu_tanh(x):
    return x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))""",
    ("q2", "relu"): """
def gelu_tanh(x):
    return x.clamp(min=0)""",
    ("q2", "x_squared"): """
def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x * x)))""",
    ("q3", "exact"): """
def mlp(x, w_fc, b_fc, w_proj, b_proj):
    return F.linear(F.gelu(F.linear(x, w_fc, b_fc)), w_proj, b_proj)""",
    ("q3", "linear"): """
def mlp(x, w_fc, b_fc, w_proj, b_proj):
    return (x @ w_fc.T + b_fc) @ w_proj.T + b_proj""",
    ("q3", "no_transpose"): """
def mlp(x, w_fc, b_fc, w_proj, b_proj):
    return F.gelu(x @ w_fc + b_fc, approximate="tanh") @ w_proj + b_proj""",
    ("q3", "relu"): """
def mlp(x, w_fc, b_fc, w_proj, b_proj):
    return torch.relu(x @ w_fc.T + b_fc) @ w_proj.T + b_proj""",
    ("q4", "c_fc_only"): "mlp_params = 768 * 3072 + 3072",
    ("q4", "no_bias"): "mlp_params = 2 * 768 * 3072",
    ("q4", "c_fc_bias_768"): "mlp_params = (768 * 3072 + 768) + (3072 * 768 + 768)",
}

test_covered, test_hints, test_distinct = planted_tests("07_mlp", PLANTED)
