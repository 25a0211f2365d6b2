"""Hints that several chapters' banks share (one wording for one mistake)."""

NO_SCALE = ("The scores are missing the 1/sqrt(d_head) scale: divide q @ k^T by the square root of "
            "the head size (the last dimension of q), or the softmax saturates as d_head grows.")
SOFTMAX_DIM = ("Softmax over the wrong dimension: each query's weights over the keys (the last "
               "dimension, dim=-1) must sum to 1; you normalized over the queries.")
MASK_ZERO = ("Masked scores were set to 0 instead of -inf. exp(0) = 1, so hidden positions still "
             "get weight: use scores.masked_fill(~mask, float('-inf')).")
MASK_AFTER = ("The mask was applied after the softmax: zeroing weights afterwards leaves rows that "
              "no longer sum to 1. Set masked scores to -inf before the softmax.")
MASK_INVERTED = ("The mask is inverted: True means 'may look'. You hid the allowed positions and "
                 "kept the forbidden ones (masked_fill(~mask, ...), not masked_fill(mask, ...)).")
SEES_FUTURE = ("Mask off by one: each token sees the next token too (key j <= i + 1). A token may see "
               "keys up to and including its own position, never the future.")
EXACT_GELU = ("That is the exact GELU, x * Phi(x) with erf. GPT-2 uses the tanh approximation "
              "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); its weights were trained with it.")
RELU = "That is ReLU. GPT-2 uses GELU (tanh approximation), smooth and slightly negative below 0."
C_FC_BIAS_768 = ("You gave mlp.c_fc 768 biases, as The Illustrated GPT-2's parameter table does (appendix "
                 "A3 checks it): c_fc widens 768 channels to 3072 and has one bias per output channel, 3072.")
TIED_TWICE = ("You counted the tied head twice: GPT-2's output layer reuses the token embedding wte "
              "(logits = h @ wte.T), so it adds no parameters of its own.")
ZERO_FILL = ("Filtered logits were set to 0, and exp(0) still gives them probability: set them to "
             "-inf.")
