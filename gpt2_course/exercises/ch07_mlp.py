"""Exercises for chapter 7, the MLP: GELU in its tanh form, the two-layer MLP, its size."""
from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from gpt2_course.exercises._hints import C_FC_BIAS_768, EXACT_GELU, RELU
from gpt2_course.grading.questions import Exercise, Mistake, Question, calls, planted, randn, value
from gpt2_course.mlp import gelu_tanh

Tensor = torch.Tensor
C = 768


@planted(EXACT_GELU)
def exact(x: Tensor) -> Tensor:
    return F.gelu(x)


@planted(RELU)
def relu(x: Tensor) -> Tensor:
    return F.relu(x)


@planted("The factor 0.5 is missing: GELU(x) = 0.5 x (1 + tanh(...)).")
def no_half(x: Tensor) -> Tensor:
    return 2 * gelu_tanh(x)


@planted("The cubic term is 0.044715 x^3, not x^2.")
def x_squared(x: Tensor) -> Tensor:
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**2)))


def mlp(x: Tensor, w_fc: Tensor, b_fc: Tensor, w_proj: Tensor, b_proj: Tensor,
        act: Any = gelu_tanh) -> Tensor:
    return act(x @ w_fc.T + b_fc) @ w_proj.T + b_proj


@planted(EXACT_GELU, name="exact")
def mlp_exact(*args: Tensor) -> Tensor:
    return mlp(*args, act=F.gelu)


@planted(RELU, name="relu")
def mlp_relu(*args: Tensor) -> Tensor:
    return mlp(*args, act=F.relu)


@planted("There is no activation between the layers, so two linear layers collapse into one: apply "
         "gelu_tanh to the hidden layer.")
def linear(*args: Tensor) -> Tensor:
    return mlp(*args, act=lambda h: h)


def _mlp_args() -> list[tuple[Any, ...]]:
    out = []
    for s, (shape, C) in enumerate([((2, 3, 4), 4), ((5, 8), 8)]):
        out.append((randn(s, *shape) * 2, randn(s + 10, 4 * C, C), randn(s + 20, 4 * C),
                    randn(s + 30, C, 4 * C) / 4, randn(s + 40, C)))
    return out


EXERCISE = Exercise("07_mlp", "The MLP", [
    value("mlp_hidden", "q1", 1, 4 * C, {
        "same": (C, "That is n_embd. GPT-2's MLP widens each vector four times before projecting it back."),
        "three": (3 * C, "3 x 768 is the width of c_attn (q, k and v). The MLP is 4 x 768 wide."),
    }, rtol=0),
    Question("q2", "gelu_tanh", 2, gelu_tanh, rtol=1e-6, atol=1e-7, course=(gelu_tanh,),
             cases=calls(lambda: [(torch.linspace(-4, 4, 81, dtype=torch.float64),), (randn(1, 3, 5) * 2,)],
                         label=lambda x: f"x {list(x.shape)}"),
             mistakes=[exact, relu, no_half, x_squared]),
    Question("q3", "mlp", 2, mlp, cases=calls(_mlp_args), mistakes=[
        mlp_exact, mlp_relu, linear,
        Mistake("no_transpose", "nn.Linear stores its weight as [out_features, in_features]: the layer "
                "computes x @ w.T + b.", error=r"shapes cannot be multiplied|size mismatch"),
    ]),
    value("mlp_params", "q4", 1, C * 4 * C + 4 * C + 4 * C * C + C, {
        "no_bias": (8 * C * C, "You left out the biases: c_fc has 3072 and c_proj 768."),
        "c_fc_only": (C * 4 * C + 4 * C, "That is c_fc alone: add c_proj, 3072 -> 768 with its bias."),
        "c_fc_bias_768": (C * 4 * C + C + 4 * C * C + C, C_FC_BIAS_768),
    }, rtol=0),
])
