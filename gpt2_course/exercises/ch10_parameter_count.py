"""Exercises for chapter 10, the parameter count: one block, the whole model, the embedding's share."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from gpt2_course.exercises._hints import C_FC_BIAS_768, TIED_TWICE
from gpt2_course.grading.questions import Exercise, Question, calls, planted, value
from gpt2_course.params import count_parameters

C = 768


def count_params(config: Any, tied: bool = True, *, biases: bool = True, norms: bool = True,
                 ln_f: bool = True, wpe: bool = True, head: int = 0, c_fc_biases: int = 4) -> int:
    """GPT-2's parameters from its configuration; the keyword switches are the planted mistakes'
    (`c_fc_biases`: c_fc's biases in units of n_embd, 4 in GPT-2)."""
    V, N, C, L = config.vocab_size, config.n_ctx, config.n_embd, config.n_layer
    block = 12 * C * C + ((5 + c_fc_biases) * C if biases else 0) + (4 * C if norms else 0)
    total = V * C + (N * C if wpe else 0) + L * block + (2 * C if ln_f and norms else 0)
    return total + (0 if tied else V * C) + head


@planted(TIED_TWICE)
def tied_twice(config: Any, tied: bool = True) -> int:
    return count_params(config, tied=False)


@planted("With tied=False the head is its own vocab_size x n_embd matrix: count it.")
def never_head(config: Any, tied: bool = True) -> int:
    return count_params(config)


@planted("GPT-2's output head has no bias: an untied head adds vocab_size x n_embd, nothing more.")
def head_bias(config: Any, tied: bool = True) -> int:
    return count_params(config, tied, head=0 if tied else config.vocab_size)


@planted("The biases are missing: every linear layer (c_attn, attn.c_proj, c_fc, mlp.c_proj) has one.")
def no_biases(config: Any, tied: bool = True) -> int:
    return count_params(config, tied, biases=False)


@planted(C_FC_BIAS_768)
def c_fc_bias_768(config: Any, tied: bool = True) -> int:
    return count_params(config, tied, c_fc_biases=1)


@planted("The layer norms are missing: two per block and ln_f, each with 2 x n_embd parameters.")
def no_layernorms(config: Any, tied: bool = True) -> int:
    return count_params(config, tied, norms=False)


@planted("The final layer norm ln_f (2 x n_embd) is missing.")
def no_ln_f(config: Any, tied: bool = True) -> int:
    return count_params(config, tied, ln_f=False)


@planted("The position embedding wpe (n_ctx x n_embd) is missing.")
def no_wpe(config: Any, tied: bool = True) -> int:
    return count_params(config, tied, wpe=False)


_SIZES = {"gpt2": (12, 12, 768, 1024), "gpt2-medium": (24, 16, 1024, 1024), "gpt2-xl": (48, 25, 1600, 1024),
          "pocket": (6, 6, 192, 256), "tiny": (3, 2, 48, 64)}


def config(name: str, vocab_size: int = 50257) -> SimpleNamespace:
    L, H, C, N = _SIZES[name]
    return SimpleNamespace(vocab_size=vocab_size if name != "tiny" else 1000, n_ctx=N, n_embd=C,
                           n_layer=L, n_head=H, name=name)


GPT2 = count_params(config("gpt2"))
UNTIED = count_params(config("gpt2"), tied=False)
SPECS = [("gpt2", True), ("gpt2", False), ("gpt2-medium", True), ("pocket", True), ("tiny", False),
         ("gpt2-xl", True)]

EXERCISE = Exercise("10_parameter_count", "The parameter count", [
    value("block_params", "q1", 1, 12 * C * C + 13 * C, {
        "no_biases": (12 * C * C, "Weights only: every linear layer has a bias and each of the "
                      "two layer norms a gain and a shift."),
        "no_layernorms": (12 * C * C + 9 * C, "You left out the two layer norms, 2 x (768 + 768) "
                          "parameters per block."),
        "c_fc_bias_768": (12 * C * C + 10 * C, C_FC_BIAS_768),
    }, rtol=0),
    Question("q2", "count_params", 3, count_params, course=(count_parameters,),
             cases=calls(lambda: [(config(n), tied) for n, tied in SPECS],
                         label=lambda c, tied: f"{c.name}, tied={tied}"),
             mistakes=[tied_twice, never_head, head_bias, no_biases, c_fc_bias_768, no_layernorms, no_ln_f,
                       no_wpe]),
    value("gpt2_total", "q3", 1, GPT2, {
        "untied": (UNTIED, TIED_TWICE),
        "paper": (117_000_000, "117M is the size the GPT-2 paper reported: a miscount. Add up the "
                  "released model's tensors: 124,439,808."),
        "c_fc_bias_768": (GPT2 - 12 * 3 * C, C_FC_BIAS_768),
        "illustrated": (124_410_624, "124,410,624 is The Illustrated GPT-2's grand total (appendix A3 checks "
                        "it): its table gives mlp.c_fc 768 biases instead of 3072 and leaves out ln_f."),
    }, rtol=0),
    value("wte_share", "q4", 1, 50257 * C / GPT2, {
        "untied": (50257 * C / UNTIED, "The denominator counts the tied head twice: divide by the real "
                   "total, 124,439,808."),
        "percent": (100 * 50257 * C / GPT2, "Give a fraction between 0 and 1, not a percentage."),
        "with_wpe": ((50257 + 1024) * C / GPT2, "That includes wpe: the question asks for the "
                     "token embedding wte alone."),
    }),
])
