"""Exercises for chapter 8, blocks and the model: layer norm, the pre-LN block, tied logits."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn

from gpt2_course.grading.questions import Exercise, Mistake, Question, calls, choice, planted, randn
from gpt2_course.masking import causal_mask

Tensor = torch.Tensor
Fn = Callable[[Tensor], Tensor]


def layer_norm(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
    mean, var = x.mean(-1, keepdim=True), x.var(-1, keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


@planted("You used the unbiased variance (dividing by n - 1), torch.var's default. LayerNorm divides by "
         "n: x.var(-1, keepdim=True, unbiased=False).")
def unbiased(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
    mean, var = x.mean(-1, keepdim=True), x.var(-1, keepdim=True, unbiased=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


@planted("eps goes inside the square root: (x - mean) / sqrt(var + eps), not (x - mean) / (std + eps).")
def eps_outside(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
    mean, var = x.mean(-1, keepdim=True), x.var(-1, keepdim=True, unbiased=False)
    return (x - mean) / (var.sqrt() + eps) * weight + bias


@planted("Each position is normalized over its own features, the last dimension (dim=-1); you normalized "
         "across the first dimension.")
def wrong_dim(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
    mean, var = x.mean(0, keepdim=True), x.var(0, keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


@planted("The learned scale and shift are missing: multiply by weight, then add bias.")
def no_affine(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
    return layer_norm(x, torch.ones_like(weight), torch.zeros_like(bias), eps)


def block_forward(x: Tensor, ln_1: Fn, attn: Fn, ln_2: Fn, mlp: Fn) -> Tensor:
    x = x + attn(ln_1(x))
    return x + mlp(ln_2(x))


@planted("That is the post-LN block of the original Transformer, ln(x + f(x)). GPT-2 is pre-LN: "
         "x = x + attn(ln_1(x)), then x = x + mlp(ln_2(x)).")
def post_ln(x: Tensor, ln_1: Fn, attn: Fn, ln_2: Fn, mlp: Fn) -> Tensor:
    x = ln_1(x + attn(x))
    return ln_2(x + mlp(x))


@planted("The residual stream must carry x itself: x + attn(ln_1(x)), not ln_1(x) + attn(ln_1(x)).")
def normed_residual(x: Tensor, ln_1: Fn, attn: Fn, ln_2: Fn, mlp: Fn) -> Tensor:
    x = ln_1(x)
    x = ln_2(x + attn(x))
    return x + mlp(x)


@planted("Both branches read the same input: that is a 'parallel' block (GPT-J). In GPT-2 the MLP reads "
         "the stream after attention's output was added.")
def parallel(x: Tensor, ln_1: Fn, attn: Fn, ln_2: Fn, mlp: Fn) -> Tensor:
    return x + attn(ln_1(x)) + mlp(ln_2(x))


@planted("The attention branch lost its residual connection: x = x + attn(ln_1(x)).")
def no_attn_residual(x: Tensor, ln_1: Fn, attn: Fn, ln_2: Fn, mlp: Fn) -> Tensor:
    x = attn(ln_1(x))
    return x + mlp(ln_2(x))


@planted("The MLP branch lost its residual connection: x = x + mlp(ln_2(x)).")
def no_mlp_residual(x: Tensor, ln_1: Fn, attn: Fn, ln_2: Fn, mlp: Fn) -> Tensor:
    x = x + attn(ln_1(x))
    return mlp(ln_2(x))


def tied_logits(x: Tensor, ln_f: Fn, wte: Tensor) -> Tensor:
    return ln_f(x) @ wte.T


@planted("The final layer norm is missing: logits = ln_f(x) @ wte.T.")
def no_ln_f(x: Tensor, ln_f: Fn, wte: Tensor) -> Tensor:
    return x @ wte.T


def _ln_args() -> list[tuple[Any, ...]]:
    return [(randn(1, 4, 8) * 3 + 1, randn(2, 8), randn(3, 8), 1e-5),
            (randn(4, 2, 3, 6), randn(5, 6), randn(6, 6), 1e-5),
            (1 + 1e-3 * randn(7, 3, 8), randn(8, 8), randn(9, 8), 1e-5)]


def _block_args() -> list[tuple[Any, ...]]:
    out = []
    for s, (B, T, C) in enumerate([(2, 4, 6), (1, 5, 8)]):
        torch.manual_seed(100 + s)
        ln_1, ln_2 = nn.LayerNorm(C).double(), nn.LayerNorm(C).double()
        for ln in (ln_1, ln_2):
            nn.init.normal_(ln.weight, 1.0, 0.3)
            nn.init.normal_(ln.bias, 0.0, 0.3)
        w_v, w_1, w_2 = randn(10 * s + 1, C, C), randn(10 * s + 2, C, 2 * C), randn(10 * s + 3, 2 * C, C)
        causal_avg = causal_mask(T).double() / torch.arange(1, T + 1, dtype=torch.float64)[:, None]

        def attn(h: Tensor, w_v: Tensor = w_v, avg: Tensor = causal_avg) -> Tensor:
            return avg @ (h @ w_v) * 0.5

        def mlp(h: Tensor, w_1: Tensor = w_1, w_2: Tensor = w_2) -> Tensor:
            return torch.tanh(h @ w_1) @ w_2 * 0.3

        ln_1.requires_grad_(False)
        ln_2.requires_grad_(False)
        out.append((randn(10 * s + 4, B, T, C) * 2, ln_1, attn, ln_2, mlp))
    return out


def _logits_args() -> list[tuple[Any, ...]]:
    out = []
    for s, (shape, V) in enumerate([((2, 3, 4), 10), ((5, 6), 7)]):
        torch.manual_seed(200 + s)
        ln = nn.LayerNorm(shape[-1]).double().requires_grad_(False)
        nn.init.normal_(ln.weight, 1.0, 0.3)
        out.append((randn(s, *shape) * 3 + 1, ln, randn(s + 5, V, shape[-1])))
    return out


def _shapes(*a: Any) -> str:
    return f"x {list(a[0].shape)}"


EXERCISE = Exercise("08_blocks_and_model", "Blocks and the model", [
    Question("q1", "layer_norm", 2, layer_norm, cases=calls(_ln_args, label=_shapes),
             mistakes=[unbiased, eps_outside, wrong_dim, no_affine]),
    Question("q2", "block_forward", 3, block_forward, cases=calls(_block_args, label=_shapes),
             mistakes=[post_ln, normed_residual, parallel, no_attn_residual, no_mlp_residual]),
    Question("q3", "tied_logits", 1, tied_logits, cases=calls(_logits_args, label=_shapes), mistakes=[
        no_ln_f,
        Mistake("no_transpose", "wte is [vocab_size, n_embd]: multiply by its transpose, wte.T, to get one "
                "logit per vocabulary entry.", error=r"shapes cannot be multiplied|size mismatch"),
    ]),
    choice("hf_transposed", "q4", "b", {
        "a": "The embedding tables have the same layout in both libraries, [vocab or n_ctx, n_embd]. "
             "What differs is how a linear layer stores its weight.",
        "c": "Embeddings and layer norms are stored alike. Only the Conv1D layers (Hugging Face's "
             "[in, out]) differ from nn.Linear's [out, in].",
        "d": "Hugging Face's GPT-2 uses Conv1D layers that store weights as [in, out]; nn.Linear "
             "stores [out, in]. Those four must be transposed.",
    }),
])
