"""Exercises for chapter 3, embeddings: one-hot rows, lookups as products, positions."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from gpt2_course.grading.questions import Exercise, Mistake, Question, calls, planted, randint, randn, value

V, N, C = 50257, 1024, 768


def one_hot(ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    return F.one_hot(ids, vocab_size).to(torch.float64)


@planted("F.one_hot returns integers (int64). Convert to float (.float() or .to(weight.dtype)) so the "
         "one-hot rows can multiply float weights.")
def integer(ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    return F.one_hot(ids, vocab_size)


def embed_matmul(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return F.one_hot(ids, weight.size(0)).to(weight.dtype) @ weight


def input_embeddings(idx: torch.Tensor, wte: torch.Tensor, wpe: torch.Tensor) -> torch.Tensor:
    return wte[idx] + wpe[torch.arange(idx.size(-1))]


@planted("The position embedding is missing: add wpe[0..T-1] to the token vectors, or the model "
         "cannot tell word order.")
def no_positions(idx: torch.Tensor, wte: torch.Tensor, wpe: torch.Tensor) -> torch.Tensor:
    return wte[idx]


@planted("Positions start at 0: the first token gets wpe[0], not wpe[1].")
def from_one(idx: torch.Tensor, wte: torch.Tensor, wpe: torch.Tensor) -> torch.Tensor:
    return wte[idx] + wpe[torch.arange(1, idx.size(-1) + 1)]


@planted("You looked up wpe with the token ids. wpe is indexed by position 0, 1, ..., T-1 "
         "(torch.arange(T)).")
def by_token(idx: torch.Tensor, wte: torch.Tensor, wpe: torch.Tensor) -> torch.Tensor:
    return wte[idx] + wpe[idx]


@planted("GPT-2 adds the position vector to the token vector; concatenating doubles the width.")
def concat(idx: torch.Tensor, wte: torch.Tensor, wpe: torch.Tensor) -> torch.Tensor:
    return torch.cat([wte[idx], wpe[torch.arange(idx.size(-1))].expand(*idx.shape, -1)], dim=-1)


EXERCISE = Exercise("03_embeddings", "Embeddings", [
    value("embedding_params", "q1", 1, V * C + N * C, {
        "wte_only": (V * C, "That is the token embedding alone: the position embedding wpe adds "
                     "n_ctx x n_embd = 1024 x 768 more."),
        "with_head": (2 * V * C + N * C, "GPT-2's output head is tied to wte: it reuses the same "
                      "matrix and adds no parameters."),
    }, rtol=0),
    Question("q2", "one_hot", 1, one_hot, strict_dtype=True,
             cases=calls(lambda: [(randint(1, 5), 10), (randint(2, 2, 3, high=7), 7), (torch.tensor([0]), 3)],
                         label=lambda ids, v: f"ids {list(ids.shape)}, vocab_size {v}"),
             mistakes=[integer]),
    Question("q3", "embed_matmul", 2, embed_matmul,
             cases=calls(lambda: [(randint(1, 5), randn(2, 10, 4)), (randint(3, 2, 6), randn(4, 10, 3)),
                                  (torch.tensor([9, 0, 9]), randn(5, 10, 16))]),
             mistakes=[
                 Mistake("transposed", "weight is [vocab_size, n_embd]: one_hot(ids) [..., vocab_size] @ "
                         "weight gives [..., n_embd] directly, no transpose.",
                         error=r"shapes cannot be multiplied|size mismatch"),
                 Mistake("dtype", "The one-hot matrix is integer and the weights are float: convert it "
                         "with .to(weight.dtype) before the product.", error=r"dtype|scalar type"),
             ]),
    Question("q4", "input_embeddings", 2, input_embeddings,
             cases=calls(lambda: [(randint(6, 2, 5), randn(7, 10, 4), randn(8, 16, 4)),
                                  (randint(9, 1, 8), randn(10, 10, 6), randn(11, 16, 6))]),
             mistakes=[no_positions, from_one, by_token, concat]),
])
