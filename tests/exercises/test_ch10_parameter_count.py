"""The parameter count (10_parameter_count): a learner-style wrong answer for every planted mistake of
its bank, gpt2_course/exercises/ch10_parameter_count.py, and other forms learners write that must
get the same hint."""
from planted import one_change, planted_tests

# One parameter count, every mistake one line different from the right answer.
COUNT = """
def count_params(config, tied=True):
    V, N, C, L = config.vocab_size, config.n_ctx, config.n_embd, config.n_layer
    per_block = {ln} * 2 * C + {weights} + {biases}
    total = V * C + {wpe} + L * per_block + {ln_f}
    return {ret}
"""
COUNT_OK = dict(ln="2", weights="12 * C * C", biases="13 * C - 4 * C", wpe="N * C", ln_f="2 * C",
                ret="total if tied else total + V * C")

PLANTED = {
    ("q1", "no_biases"): "block_params = 12 * 768 ** 2",
    ("q1", "no_layernorms"): "block_params = 12 * 768 ** 2 + 9 * 768",
    ("q1", "c_fc_bias_768"): "block_params = 12 * 768 ** 2 + 4 * 768 + (3 * 768 + 768 + 768 + 768)",
    ("q3", "paper"): "gpt2_total = 117e6",
    ("q3", "c_fc_bias_768"): "gpt2_total = 124_439_808 - 12 * (3072 - 768)",
    ("q3", "illustrated"): "gpt2_total = 124_410_624",
    ("q3", "untied"): "gpt2_total = 163_037_184",
    ("q4", "percent"): "wte_share = 31.02",
    ("q4", "untied"): "wte_share = 50257 * 768 / 163_037_184",
    ("q4", "with_wpe"): "wte_share = (50257 + 1024) * 768 / 124_439_808",
}
PLANTED |= one_change("q2", COUNT, COUNT_OK, {
    "tied_twice": {"ret": "total + V * C"}, "never_head": {"ret": "total"},
    "head_bias": {"ret": "total if tied else total + V * C + V"}, "no_biases": {"biases": "0"},
    "c_fc_bias_768": {"biases": "3 * C + C + C + C"},
    "no_layernorms": {"ln": "0", "ln_f": "0"}, "no_ln_f": {"ln_f": "0"}, "no_wpe": {"wpe": "0"},
})

test_covered, test_hints, test_distinct = planted_tests("10_parameter_count", PLANTED)
