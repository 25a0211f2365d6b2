"""The exercises: generated blanks are in sync, solutions score full marks, blanks score 0, every
hint fires for the mistake it names, and the grader survives hostile submissions.

Planted mistakes are written here as a learner would write them (not by calling the grader's own
mistake implementations), then checked in this process: that is fast. The grader itself, which
needs a kernel per notebook, runs once over all solution and blank notebooks in one batch, and
once on a hostile notebook.
"""
from __future__ import annotations

import contextlib
import csv
import importlib.util
import io
import json
import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from gpt2_course import grading

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = sorted((ROOT / "exercises" / "solutions").glob("*.ipynb"))
BLANKS = [ROOT / "exercises" / p.name for p in SOLUTIONS]
CHAPTERS = {p.stem for p in (ROOT / "chapters").glob("*.ipynb")} | {
    "01_language_modeling", "02_bpe", "03_embeddings", "04_self_attention", "05_masking",
    "06_multi_head_attention", "07_mlp", "08_blocks_and_model", "09_sampling", "10_parameter_count",
    "A1_pretraining"}

# ------------------------------------------------------------------------------------------------
# Planted mistakes: (exercise, question, mistake name) -> code a learner might write.
# ------------------------------------------------------------------------------------------------

MHA = """
def multi_head_attention(x, w_attn, b_attn, w_proj, b_proj, n_head):
    B, T, C = x.shape
    H = {heads}
    q, k, v = (x @ w_attn.T + b_attn).split(C, dim=2)
    q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
    att = q @ k.transpose(-2, -1) / {scale}
    {mask}
    y = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
    return {out}
"""
MHA_OK = dict(heads="n_head", scale="math.sqrt(C // n_head)",
              mask="att = att.masked_fill(torch.ones(T, T).tril() == 0, float('-inf'))",
              out="y @ w_proj.T + b_proj")

PLANTED: dict[tuple[str, str, str], str] = {
    # chapter 1
    ("01_language_modeling", "q1", "bits"): "uniform_loss = math.log2(50257)",
    ("01_language_modeling", "q1", "perplexity"): "uniform_loss = 50257",
    ("01_language_modeling", "q1", "log10"): "uniform_loss = math.log10(50257)",
    ("01_language_modeling", "q2", "loss"): "perplexity_by_hand = -np.mean(np.log([.5, .25, .125, .5]))",
    ("01_language_modeling", "q2", "mean_inverse"): "perplexity_by_hand = np.mean([2, 4, 8, 2])",
    ("01_language_modeling", "q2", "inverse_mean"): "perplexity_by_hand = 1 / np.mean([.5, .25, .125, .5])",
    ("01_language_modeling", "q2", "sum"): "perplexity_by_hand = math.exp(-sum(np.log([.5, .25, .125, .5])))",
    ("01_language_modeling", "q3", "transposed"): """
def bigram_counts(ids, vocab_size):
    c = np.zeros((vocab_size, vocab_size), dtype=int)
    for a, b in zip(ids, ids[1:]):
        c[b][a] += 1
    return c""",
    ("01_language_modeling", "q3", "wrap"): """
def bigram_counts(ids, vocab_size):
    c = np.zeros((vocab_size, vocab_size), dtype=int)
    for i in range(len(ids)):
        c[ids[i], ids[(i + 1) % len(ids)]] += 1
    return c""",
    ("01_language_modeling", "q3", "fancy_index"): """
def bigram_counts(ids, vocab_size):
    c = np.zeros((vocab_size, vocab_size), dtype=int)
    c[ids[:-1], ids[1:]] += 1
    return c""",
    ("01_language_modeling", "q4", "swapped"): """
def next_token_probs(counts, token, lam, unigram):
    row = counts[token]
    if row.sum() == 0:
        return unigram
    return (1 - lam) * row / row.sum() + lam * unigram""",
    ("01_language_modeling", "q4", "column"): """
def next_token_probs(counts, token, lam, unigram):
    col = counts[:, token]
    if col.sum() == 0:
        return unigram
    return lam * col / col.sum() + (1 - lam) * unigram""",
    ("01_language_modeling", "q4", "no_fallback"): """
def next_token_probs(counts, token, lam, unigram):
    with np.errstate(all="ignore"):
        return lam * counts[token] / counts[token].sum() + (1 - lam) * unigram""",
    ("01_language_modeling", "q5", "option_b"): "blind_spot = 'b'",
    ("01_language_modeling", "q5", "option_c"): "blind_spot = 'C'",
    ("01_language_modeling", "q5", "option_d"): "blind_spot = '(d)'",
    # chapter 2
    ("02_bpe", "q1", "vocab"): "gpt2_merges = 50257",
    ("02_bpe", "q1", "bytes_only"): "gpt2_merges = 50257 - 256",
    ("02_bpe", "q1", "eot_only"): "gpt2_merges = 50257 - 1",
    ("02_bpe", "q2", "step_two"): """
def get_pair_counts(ids):
    out = {}
    for i in range(0, len(ids) - 1, 2):
        out[ids[i], ids[i + 1]] = out.get((ids[i], ids[i + 1]), 0) + 1
    return out""",
    ("02_bpe", "q2", "once"): "def get_pair_counts(ids):\n    return {p: 1 for p in zip(ids, ids[1:])}",
    ("02_bpe", "q2", "wrap"): """
from collections import Counter
def get_pair_counts(ids):
    return dict(Counter(zip(ids, ids[1:] + ids[:1])))""",
    ("02_bpe", "q3", "overlap"): """
def merge(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i < len(ids) - 1 and (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
        else:
            out.append(ids[i])
        i += 1
    return out""",
    ("02_bpe", "q3", "first"): """
def merge(ids, pair, new_id):
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == pair:
            return ids[:i] + [new_id] + ids[i + 2:]
    return list(ids)""",
    ("02_bpe", "q3", "right_to_left"): """
def merge(ids, pair, new_id):
    out, i = [], len(ids) - 1
    while i >= 0:
        if i > 0 and (ids[i - 1], ids[i]) == pair:
            out.insert(0, new_id); i -= 2
        else:
            out.insert(0, ids[i]); i -= 1
    return out""",
    ("02_bpe", "q4", "max_pairs"): """
def bpe_train_step(ids, new_id):
    counts = {}
    for p in zip(ids, ids[1:]):
        counts[p] = counts.get(p, 0) + 1
    pair = max(counts)
    return MERGE(ids, pair, new_id), pair""",
    ("02_bpe", "q4", "ties_last"): """
def bpe_train_step(ids, new_id):
    counts = {}
    for p in zip(ids, ids[1:]):
        counts[p] = counts.get(p, 0) + 1
    best = None
    for p, c in counts.items():
        if best is None or c >= counts[best]:
            best = p
    return MERGE(ids, best, new_id), best""",
    ("02_bpe", "q5", "leftmost"): """
def apply_merges(ids, merges):
    ids = list(ids)
    i = 0
    while i < len(ids) - 1:
        if (ids[i], ids[i + 1]) in merges:
            ids[i:i + 2] = [merges[ids[i], ids[i + 1]]]
            i = 0
        else:
            i += 1
    return ids""",
    ("02_bpe", "q5", "latest_first"): """
def apply_merges(ids, merges):
    ids = list(ids)
    while True:
        found = [p for p in zip(ids, ids[1:]) if p in merges]
        if not found:
            return ids
        pair = max(found, key=lambda p: merges[p])
        ids = MERGE(ids, pair, merges[pair])""",
    # chapter 3
    ("03_embeddings", "q1", "wte_only"): "embedding_params = 50257 * 768",
    ("03_embeddings", "q1", "with_head"): "embedding_params = 2 * 50257 * 768 + 1024 * 768",
    ("03_embeddings", "q2", "integer"): """
def one_hot(ids, vocab_size):
    return F.one_hot(ids, vocab_size)""",
    ("03_embeddings", "q3", "transposed"): """
def embed_matmul(ids, weight):
    return F.one_hot(ids, weight.shape[0]).to(weight.dtype) @ weight.T""",
    ("03_embeddings", "q3", "dtype"): """
def embed_matmul(ids, weight):
    return F.one_hot(ids, weight.shape[0]) @ weight""",
    ("03_embeddings", "q4", "no_positions"): "def input_embeddings(idx, wte, wpe):\n    return wte[idx]",
    ("03_embeddings", "q4", "from_one"): """
def input_embeddings(idx, wte, wpe):
    return wte[idx] + wpe[1:idx.shape[1] + 1]""",
    ("03_embeddings", "q4", "by_token"): """
def input_embeddings(idx, wte, wpe):
    return wte[idx] + wpe[idx]""",
    ("03_embeddings", "q4", "concat"): """
def input_embeddings(idx, wte, wpe):
    pos = wpe[:idx.shape[1]].unsqueeze(0).expand(idx.shape[0], -1, -1)
    return torch.cat((wte[idx], pos), dim=2)""",
    # chapter 4
    ("04_self_attention", "q1", "transposed"): "weights_shape = [2, 7, 5]",
    ("04_self_attention", "q1", "features"): "weights_shape = torch.Size([2, 5, 8])",
    ("04_self_attention", "q1", "square"): "weights_shape = (2, 5, 5)",
    ("04_self_attention", "q2", "no_scale"): "def scores(q, k):\n    return q @ k.transpose(-1, -2)",
    ("04_self_attention", "q2", "by_d"): """
def scores(q, k):
    return q @ k.transpose(-1, -2) / q.shape[-1]""",
    ("04_self_attention", "q2", "by_t"): """
def scores(q, k):
    return torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-2])""",
    ("04_self_attention", "q2", "transposed"): """
def scores(q, k):
    return k @ q.transpose(-1, -2) / q.shape[-1] ** 0.5""",
    ("04_self_attention", "q3", "no_scale"): """
def attention_weights(q, k, mask=None):
    s = q @ k.transpose(-2, -1)
    if mask is not None:
        s = s.masked_fill(mask == False, -math.inf)  # noqa: E712
    return torch.softmax(s, dim=-1)""",
    ("04_self_attention", "q3", "softmax_dim"): """
def attention_weights(q, k, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
    if mask is not None:
        s = torch.where(mask, s, -math.inf)
    return s.softmax(dim=-2)""",
    ("04_self_attention", "q3", "mask_zero"): """
def attention_weights(q, k, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
    if mask is not None:
        s = s * mask
    return s.softmax(dim=-1)""",
    ("04_self_attention", "q3", "mask_after"): """
def attention_weights(q, k, mask=None):
    w = (q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])).softmax(-1)
    return w if mask is None else w.masked_fill(~mask, 0.0)""",
    ("04_self_attention", "q3", "inverted"): """
def attention_weights(q, k, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))
    return F.softmax(s, -1)""",
    ("04_self_attention", "q4", "no_scale"): """
def attention(q, k, v, mask=None):
    s = q @ k.mT
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return s.softmax(-1) @ v""",
    ("04_self_attention", "q4", "softmax_dim"): """
def attention(q, k, v, mask=None):
    s = q @ k.mT / math.sqrt(q.size(-1))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return s.softmax(-2) @ v""",
    ("04_self_attention", "q4", "no_softmax"): """
def attention(q, k, v, mask=None):
    return (q @ k.mT / math.sqrt(q.size(-1))) @ v""",
    # chapter 5
    ("05_masking", "q1", "no_diagonal"): "visible_pairs = 1024 * 1023 // 2",
    ("05_masking", "q1", "half"): "visible_pairs = 1024 ** 2 // 2",
    ("05_masking", "q1", "all"): "visible_pairs = 1024 * 1024",
    ("05_masking", "q2", "sees_future"): """
def causal_mask(t_q, t_k=None):
    t_k = t_k or t_q
    return torch.ones(t_q, t_k, dtype=torch.bool).tril(diagonal=t_k - t_q + 1)""",
    ("05_masking", "q2", "no_self"): """
def causal_mask(t_q, t_k=None):
    t_k = t_k or t_q
    return torch.ones(t_q, t_k, dtype=torch.bool).tril(diagonal=t_k - t_q - 1)""",
    ("05_masking", "q2", "upper"): """
def causal_mask(t_q, t_k=None):
    t_k = t_k or t_q
    return torch.ones(t_q, t_k, dtype=torch.bool).triu()""",
    ("05_masking", "q2", "no_offset"): """
def causal_mask(t_q, t_k=None):
    t_k = t_k or t_q
    return torch.ones(t_q, t_k, dtype=torch.bool).tril()""",
    ("05_masking", "q3", "mask_zero"): """
def masked_softmax(scores, mask):
    return torch.softmax(torch.where(mask, scores, torch.zeros_like(scores)), -1)""",
    ("05_masking", "q3", "mask_after"): """
def masked_softmax(scores, mask):
    return scores.softmax(-1) * mask""",
    ("05_masking", "q3", "inverted"): """
def masked_softmax(scores, mask):
    return scores.masked_fill(mask, -float("inf")).softmax(-1)""",
    # chapter 6
    ("06_multi_head_attention", "q1", "no_bias"): "c_attn_params = 768 * 2304",
    ("06_multi_head_attention", "q1", "per_head"): "c_attn_params = (768 * 2304 + 2304) // 12",
    ("06_multi_head_attention", "q2", "view_direct"): """
def split_heads(x, n_head):
    B, T, C = x.shape
    return x.reshape(B, n_head, T, C // n_head)""",
    ("06_multi_head_attention", "q2", "interleaved"): """
def split_heads(x, n_head):
    B, T, C = x.shape
    return x.view(B, T, C // n_head, n_head).permute(0, 3, 1, 2)""",
    ("06_multi_head_attention", "q2", "no_transpose"): """
def split_heads(x, n_head):
    B, T, C = x.shape
    return x.view(B, T, n_head, C // n_head)""",
    ("06_multi_head_attention", "q3", "no_transpose"): """
def merge_heads(x):
    B, H, T, D = x.shape
    return x.reshape(B, T, H * D)""",
    ("06_multi_head_attention", "q3", "view_error"): """
def merge_heads(x):
    B, H, T, D = x.shape
    return x.transpose(1, 2).view(B, T, H * D)""",
    ("06_multi_head_attention", "q4", "no_mask"): MHA.format(**{**MHA_OK, "mask": "pass"}),
    ("06_multi_head_attention", "q4", "no_scale"): MHA.format(**{**MHA_OK, "scale": "1"}),
    ("06_multi_head_attention", "q4", "scale_by_c"): MHA.format(**{**MHA_OK, "scale": "math.sqrt(C)"}),
    ("06_multi_head_attention", "q4", "single_head"): MHA.format(
        **{**MHA_OK, "heads": "1", "scale": "math.sqrt(C)"}),
    ("06_multi_head_attention", "q4", "no_proj"): MHA.format(**{**MHA_OK, "out": "y"}),
    # chapter 7
    ("07_mlp", "q1", "same"): "mlp_hidden = 768",
    ("07_mlp", "q1", "three"): "mlp_hidden = 3 * 768",
    ("07_mlp", "q2", "exact"): "def gelu_tanh(x):\n    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))",
    ("07_mlp", "q2", "relu"): "def gelu_tanh(x):\n    return x.clamp(min=0)",
    ("07_mlp", "q2", "no_half"): """
def gelu_tanh(x):
    return x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))""",
    ("07_mlp", "q2", "x_squared"): """
def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x * x)))""",
    ("07_mlp", "q3", "exact"): """
def mlp(x, w_fc, b_fc, w_proj, b_proj):
    return F.linear(F.gelu(F.linear(x, w_fc, b_fc)), w_proj, b_proj)""",
    ("07_mlp", "q3", "relu"): """
def mlp(x, w_fc, b_fc, w_proj, b_proj):
    return torch.relu(x @ w_fc.T + b_fc) @ w_proj.T + b_proj""",
    ("07_mlp", "q3", "linear"): """
def mlp(x, w_fc, b_fc, w_proj, b_proj):
    return (x @ w_fc.T + b_fc) @ w_proj.T + b_proj""",
    ("07_mlp", "q3", "no_transpose"): """
def mlp(x, w_fc, b_fc, w_proj, b_proj):
    return F.gelu(x @ w_fc + b_fc, approximate="tanh") @ w_proj + b_proj""",
    ("07_mlp", "q4", "no_bias"): "mlp_params = 2 * 768 * 3072",
    ("07_mlp", "q4", "c_fc_only"): "mlp_params = 768 * 3072 + 3072",
    # chapter 8
    ("08_blocks_and_model", "q1", "unbiased"): """
def layer_norm(x, weight, bias, eps=1e-5):
    return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + eps) * weight + bias""",
    ("08_blocks_and_model", "q1", "eps_outside"): """
def layer_norm(x, weight, bias, eps=1e-5):
    std = x.std(-1, keepdim=True, unbiased=False)
    return (x - x.mean(-1, keepdim=True)) / (std + eps) * weight + bias""",
    ("08_blocks_and_model", "q1", "wrong_dim"): """
def layer_norm(x, weight, bias, eps=1e-5):
    mu, var = x.mean(0, keepdim=True), x.var(0, keepdim=True, unbiased=False)
    return (x - mu) / (var + eps).sqrt() * weight + bias""",
    ("08_blocks_and_model", "q1", "no_affine"): """
def layer_norm(x, weight, bias, eps=1e-5):
    mu, var = x.mean(-1, keepdim=True), x.var(-1, keepdim=True, unbiased=False)
    return (x - mu) / (var + eps).sqrt()""",
    ("08_blocks_and_model", "q2", "post_ln"): """
def block_forward(x, ln_1, attn, ln_2, mlp):
    x = ln_1(x + attn(x))
    return ln_2(x + mlp(x))""",
    ("08_blocks_and_model", "q2", "normed_residual"): """
def block_forward(x, ln_1, attn, ln_2, mlp):
    h = ln_1(x)
    h = h + attn(h)
    h = ln_2(h)
    return h + mlp(h)""",
    ("08_blocks_and_model", "q2", "parallel"): """
def block_forward(x, ln_1, attn, ln_2, mlp):
    return x + attn(ln_1(x)) + mlp(ln_2(x))""",
    ("08_blocks_and_model", "q2", "no_attn_residual"): """
def block_forward(x, ln_1, attn, ln_2, mlp):
    x = attn(ln_1(x))
    return x + mlp(ln_2(x))""",
    ("08_blocks_and_model", "q2", "no_mlp_residual"): """
def block_forward(x, ln_1, attn, ln_2, mlp):
    x = x + attn(ln_1(x))
    return mlp(ln_2(x))""",
    ("08_blocks_and_model", "q3", "no_ln_f"): "def tied_logits(x, ln_f, wte):\n    return x @ wte.T",
    ("08_blocks_and_model", "q3", "no_transpose"): "def tied_logits(x, ln_f, wte):\n    return ln_f(x) @ wte",
    ("08_blocks_and_model", "q4", "option_a"): "hf_transposed = 'a'",
    ("08_blocks_and_model", "q4", "option_c"): "hf_transposed = 'c'",
    ("08_blocks_and_model", "q4", "option_d"): "hf_transposed = 'd'",
    # chapter 9
    ("09_sampling", "q1", "multiply"): """
def temperature_probs(logits, t):
    return (logits * t).softmax(-1)""",
    ("09_sampling", "q1", "softmax_dim"): """
def temperature_probs(logits, t):
    return F.softmax(logits / t, dim=0)""",
    ("09_sampling", "q1", "scaled_probs"): """
def temperature_probs(logits, t):
    p = logits.softmax(-1) / t
    return p / p.sum(-1, keepdim=True)""",
    ("09_sampling", "q2", "zero"): """
def top_k_filter(logits, k):
    v, _ = torch.topk(logits, k)
    return torch.where(logits >= v[..., [-1]], logits, torch.zeros_like(logits))""",
    ("09_sampling", "q2", "one_too_few"): """
def top_k_filter(logits, k):
    v, _ = torch.topk(logits, k)
    out = logits.clone()
    out[logits <= v[..., [-1]]] = float("-inf")
    out[logits > v[..., [-1]]] = logits[logits > v[..., [-1]]]
    return out""",
    ("09_sampling", "q2", "one_too_many"): """
def top_k_filter(logits, k):
    k = min(k + 1, logits.shape[-1])
    v, _ = torch.topk(logits, k)
    return logits.masked_fill(logits < v[..., -1:], float("-inf"))""",
    ("09_sampling", "q3", "one_too_few"): """
def top_p_filter(logits, p):
    sorted_logits, idx = logits.sort(-1, descending=True)
    remove = sorted_logits.softmax(-1).cumsum(-1) > p
    return logits.masked_fill(remove.scatter(-1, idx, remove), float("-inf"))""",
    ("09_sampling", "q3", "logits"): """
def top_p_filter(logits, p):
    sorted_logits, idx = logits.sort(-1, descending=True)
    cum = sorted_logits.cumsum(-1)
    remove = cum - sorted_logits >= p
    return logits.masked_fill(remove.scatter(-1, idx, remove), float("-inf"))""",
    ("09_sampling", "q3", "ascending"): """
def top_p_filter(logits, p):
    sorted_logits, idx = logits.sort(-1)
    probs = sorted_logits.softmax(-1)
    remove = probs.cumsum(-1) - probs >= p
    return logits.masked_fill(remove.scatter(-1, idx, remove), float("-inf"))""",
    ("09_sampling", "q3", "zero"): """
def top_p_filter(logits, p):
    sorted_logits, idx = logits.sort(-1, descending=True)
    probs = sorted_logits.softmax(-1)
    remove = probs.cumsum(-1) - probs >= p
    return logits.masked_fill(remove.scatter(-1, idx, remove), 0)""",
    ("09_sampling", "q4", "cat_dim0"): """
class LayerCache:
    def __init__(self):
        self.k = self.v = None
    def update(self, k, v):
        if self.k is not None:
            k, v = torch.cat([self.k, k]), torch.cat([self.v, v])
        self.k, self.v = k, v
        return k, v""",
    ("09_sampling", "q4", "cat_last"): """
class LayerCache:
    def __init__(self):
        self.k = self.v = None
    def update(self, k, v):
        if self.k is not None:
            k, v = torch.cat([self.k, k], -1), torch.cat([self.v, v], -1)
        self.k, self.v = k, v
        return k, v""",
    ("09_sampling", "q4", "no_past"): """
class LayerCache:
    def __init__(self):
        self.k = self.v = None
    def update(self, k, v):
        self.k = k if self.k is None else torch.cat([self.k, k], 2)
        self.v = v if self.v is None else torch.cat([self.v, v], 2)
        return k, v""",
    ("09_sampling", "q4", "new_first"): """
class LayerCache:
    def __init__(self):
        self.k = self.v = None
    def update(self, k, v):
        if self.k is not None:
            k, v = torch.cat([k, self.k], 2), torch.cat([v, self.v], 2)
        self.k, self.v = k, v
        return k, v""",
    ("09_sampling", "q4", "keeps_last"): """
class LayerCache:
    def __init__(self):
        self.k = self.v = None
    def update(self, k, v):
        k_all = k if self.k is None else torch.cat([self.k, k], 2)
        v_all = v if self.v is None else torch.cat([self.v, v], 2)
        self.k, self.v = k, v
        return k_all, v_all""",
    ("09_sampling", "q5", "one_based"): "next_position = 8",
    ("09_sampling", "q5", "restart"): "next_position = 0",
    # chapter 10
    ("10_parameter_count", "q1", "no_biases"): "block_params = 12 * 768 ** 2",
    ("10_parameter_count", "q1", "no_layernorms"): "block_params = 12 * 768 ** 2 + 9 * 768",
    ("10_parameter_count", "q3", "untied"): "gpt2_total = 163_037_184",
    ("10_parameter_count", "q3", "paper"): "gpt2_total = 117e6",
    ("10_parameter_count", "q4", "untied"): "wte_share = 50257 * 768 / 163_037_184",
    ("10_parameter_count", "q4", "percent"): "wte_share = 31.02",
    ("10_parameter_count", "q4", "with_wpe"): "wte_share = (50257 + 1024) * 768 / 124_439_808",
    # appendix A1
    ("A1_pretraining", "q1", "warmup_from_zero"): """
def lr_at(step, warmup, max_steps, max_lr, min_lr):
    if step < warmup:
        return max_lr * step / warmup
    t = (step - warmup) / (max_steps - warmup)
    return min_lr + (max_lr - min_lr) * (1 + math.cos(math.pi * t)) / 2""",
    ("A1_pretraining", "q1", "to_zero"): """
def lr_at(step, warmup, max_steps, max_lr, min_lr):
    if step < warmup:
        return max_lr * (step + 1) / warmup
    t = (step - warmup) / (max_steps - warmup)
    return max_lr * (1 + math.cos(math.pi * t)) / 2""",
    ("A1_pretraining", "q1", "progress_all"): """
def lr_at(step, warmup, max_steps, max_lr, min_lr):
    if step < warmup:
        return max_lr * (step + 1) / warmup
    return min_lr + (max_lr - min_lr) * (1 + math.cos(math.pi * step / max_steps)) / 2""",
    ("A1_pretraining", "q1", "no_half"): """
def lr_at(step, warmup, max_steps, max_lr, min_lr):
    if step < warmup:
        return max_lr * (step + 1) / warmup
    t = (step - warmup) / (max_steps - warmup)
    return min_lr + (max_lr - min_lr) * (1 + math.cos(math.pi * t))""",
    ("A1_pretraining", "q1", "linear"): """
def lr_at(step, warmup, max_steps, max_lr, min_lr):
    if step < warmup:
        return max_lr * (step + 1) / warmup
    return max_lr - (max_lr - min_lr) * (step - warmup) / (max_steps - warmup)""",
    ("A1_pretraining", "q2", "no_shift"): """
def random_windows(data, batch_size, n_ctx, generator):
    ix = torch.randint(len(data) - n_ctx, (batch_size,), generator=generator)
    x = torch.stack([data[i:i + n_ctx] for i in ix])
    return x, x.clone()""",
    ("A1_pretraining", "q2", "same_start"): """
def random_windows(data, batch_size, n_ctx, generator):
    i = int(torch.randint(len(data) - n_ctx, (1,), generator=generator))
    x = data[i:i + n_ctx].repeat(batch_size, 1)
    y = data[i + 1:i + n_ctx + 1].repeat(batch_size, 1)
    return x, y""",
    ("A1_pretraining", "q2", "global_rng"): """
def random_windows(data, batch_size, n_ctx, generator):
    ix = torch.randint(len(data) - n_ctx, (batch_size,))
    return (torch.stack([data[i:i + n_ctx] for i in ix]),
            torch.stack([data[i + 1:i + n_ctx + 1] for i in ix]))""",
    ("A1_pretraining", "q2", "overflow"): """
def random_windows(data, batch_size, n_ctx, generator):
    ix = torch.randint(len(data) - n_ctx + 1, (batch_size,), generator=generator)
    return (torch.stack([data[i:i + n_ctx] for i in ix]),
            torch.stack([data[i + 1:i + n_ctx + 1] for i in ix]))""",
    ("A1_pretraining", "q3", "per_tensor"): """
def clip_grad_norm(grads, max_norm):
    return [g * min(1, max_norm / g.norm().item()) for g in grads]""",
    ("A1_pretraining", "q3", "always"): """
def clip_grad_norm(grads, max_norm):
    norm = torch.cat([g.flatten() for g in grads]).norm()
    return [g * (max_norm / norm) for g in grads]""",
    ("A1_pretraining", "q3", "l1"): """
def clip_grad_norm(grads, max_norm):
    norm = sum(g.abs().sum() for g in grads)
    return [g * max_norm / norm if norm > max_norm else g for g in grads]""",
    ("A1_pretraining", "q4", "all"): """
def decay_param_names(model):
    return sorted(dict(model.named_parameters()))""",
    ("A1_pretraining", "q4", "inverted"): """
def decay_param_names(model):
    return sorted(n for n, p in model.named_parameters() if p.ndim == 1)""",
    ("A1_pretraining", "q4", "by_name"): """
def decay_param_names(model):
    return sorted(n for n, _ in model.named_parameters() if "weight" in n)""",
    ("A1_pretraining", "q5", "chained"): """
import re
def rename(text, mapping):
    for old, new in mapping.items():
        text = re.sub(rf"\\b{old}\\b", new, text)
        text = re.sub(rf"\\b{old.title()}\\b", new.title(), text)
    return text""",
    ("A1_pretraining", "q5", "substring"): """
def rename(text, mapping):
    table = {**mapping, **{k.title(): v.title() for k, v in mapping.items()}}
    out, i = "", 0
    while i < len(text):
        hit = next((k for k in table if text.startswith(k, i)), None)
        out, i = (out + table[hit], i + len(hit)) if hit else (out + text[i], i + 1)
    return out""",
    ("A1_pretraining", "q5", "upper_only"): """
import re
def rename(text, mapping):
    return re.sub(r"\\b[A-Z]+\\b", lambda m: mapping.get(m.group(), m.group()), text)""",
}

# Chapter 10's formula: every mistake is one line different from the solution.
COUNT = """
def count_params(config, tied=True):
    V, N, C, L = config.vocab_size, config.n_ctx, config.n_embd, config.n_layer
    per_block = {ln} * 2 * C + {weights} + {biases}
    total = V * C + {wpe} + L * per_block + {ln_f}
    return {ret}
"""
COUNT_OK = dict(ln="2", weights="12 * C * C", biases="13 * C - 4 * C", wpe="N * C", ln_f="2 * C",
                ret="total if tied else total + V * C")
for _name, _change in {
    "tied_twice": {"ret": "total + V * C"}, "never_head": {"ret": "total"},
    "head_bias": {"ret": "total if tied else total + V * C + V"}, "no_biases": {"biases": "0"},
    "no_layernorms": {"ln": "0", "ln_f": "0"}, "no_ln_f": {"ln_f": "0"}, "no_wpe": {"wpe": "0"},
}.items():
    PLANTED["10_parameter_count", "q2", _name] = COUNT.format(**{**COUNT_OK, **_change})


def _define(code: str) -> dict:
    """Run a learner's cell in a fresh namespace, with the notebook's usual imports."""
    ns: dict = {"math": math, "np": np, "torch": torch, "F": F, "__name__": "__main__"}
    ns["MERGE"] = grading._merge  # questions that build on an earlier answer get a correct one
    exec(compile(code, "<planted>", "exec"), ns)
    return ns


def _all_mistakes() -> list[tuple[str, str, str]]:
    return [(ex, q.id, m.name) for ex in grading.exercise_ids() for q in grading.get_exercise(ex).questions
            for m in q.mistakes]


def test_every_planted_mistake_has_a_learner_style_variant():
    assert set(PLANTED) == set(_all_mistakes())


@pytest.mark.parametrize("key", sorted(PLANTED), ids="-".join)
def test_planted_mistake_triggers_exactly_its_hint(key):
    exercise, qid, mistake = key
    q = grading.get_exercise(exercise).question(qid)
    answer = _define(PLANTED[key])[q.name]
    result = grading.check_answer(exercise, qid, answer)
    assert (result.status, result.hint) == ("fail", mistake), result
    hint = next(m.hint for m in q.mistakes if m.name == mistake)
    assert hint in result.message


def test_planted_mistakes_are_distinguishable_and_wrong():
    """No planted mistake passes for the reference, and no two give the same outputs."""
    for exercise in grading.exercise_ids():
        for q in grading.get_exercise(exercise).questions:
            ref, planted = grading._expected(exercise, q.id)
            names = list(planted)
            for i, a in enumerate(names):
                assert not grading._same(ref, planted[a], q), (exercise, q.id, a)
                for b in names[i + 1:]:
                    assert not grading._same(planted[a], planted[b], q), (exercise, q.id, a, b)


def test_references_agree_with_the_course_package():
    """The grader's reference answers are the functions the chapters build."""
    from gpt2_course import bpe, generate, train
    from gpt2_course.attention import attention, attention_weights
    from gpt2_course.config import GPT2Config
    from gpt2_course.heads import merge_heads, split_heads
    from gpt2_course.masking import causal_mask
    from gpt2_course.mlp import gelu_tanh
    from gpt2_course.params import count_parameters

    def lr_at(step, warmup, max_steps, max_lr, min_lr):
        return train.lr_at(step, train.TrainConfig(warmup=warmup, steps=max_steps, lr=max_lr, min_lr=min_lr))

    course = [("02_bpe", "q3", bpe.merge_pair), ("02_bpe", "q5", bpe.bpe),
              ("04_self_attention", "q3", attention_weights), ("04_self_attention", "q4", attention),
              ("05_masking", "q2", causal_mask), ("06_multi_head_attention", "q2", split_heads),
              ("06_multi_head_attention", "q3", merge_heads), ("07_mlp", "q2", gelu_tanh),
              ("09_sampling", "q2", generate.top_k_filter), ("09_sampling", "q3", generate.top_p_filter),
              ("09_sampling", "q4", generate.LayerCache), ("A1_pretraining", "q1", lr_at),
              ("A1_pretraining", "q2", train.get_batch), ("A1_pretraining", "q5", train.rename)]
    for exercise, qid, fn in course:
        result = grading.check_answer(exercise, qid, fn, allow_course_code=True)
        assert result.status == "pass", (exercise, qid, result)
    for name in ("gpt2", "gpt2-medium", "gpt2-xl", "pocket"):
        assert grading._count(grading._config(name)) == count_parameters(GPT2Config.from_name(name)), name


def test_exercises_cover_every_chapter():
    assert set(grading.exercise_ids()) == CHAPTERS
    assert [p.stem for p in SOLUTIONS] == sorted(CHAPTERS)
    for exercise in grading.exercise_ids():
        assert 3 <= len(grading.get_exercise(exercise).questions) <= 6, exercise


# ------------------------------------------------------------------------------------------------
# The generated files
# ------------------------------------------------------------------------------------------------


def _tool():
    """tools/exercises.py, imported (running it in a subprocess would import torch again)."""
    spec = importlib.util.spec_from_file_location("exercises_tool", ROOT / "tools" / "exercises.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_files_are_in_sync():
    assert _tool().check() == []


def test_check_notices_an_edited_solution(tmp_path):
    tool = _tool()
    for sub in ("exercises/solutions", "book/exercises"):
        (tmp_path / sub).mkdir(parents=True)
    copied = ["_config.yml", "book/exercises/index.md", *[f"exercises/solutions/{p.name}" for p in SOLUTIONS]]
    for f in copied:
        (tmp_path / f).write_text((ROOT / f).read_text(encoding="utf-8"), encoding="utf-8")
    assert tool.check(tmp_path)  # nothing generated yet
    assert tool.write(tmp_path) == []
    assert tool.check(tmp_path) == []
    sol = tmp_path / "exercises/solutions/05_masking.ipynb"
    sol.write_text(sol.read_text(encoding="utf-8").replace("1024 * 1025 // 2", "524800"), encoding="utf-8")
    assert any("05_masking.md is stale" in p for p in tool.check(tmp_path))
    text = sol.read_text(encoding="utf-8")
    sol.write_text(text.replace('check(\\"q3\\")', 'check(\\"q4\\")'), encoding="utf-8")
    assert any("check cells ['q1', 'q2', 'q4']" in p for p in tool.check(tmp_path))
    (tmp_path / "exercises/99_extra.ipynb").write_text("{}")
    assert any("99_extra.ipynb has no solution notebook" in p for p in tool.check(tmp_path))


def test_every_exercise_page_is_in_the_table_of_contents():
    toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    for path in SOLUTIONS:
        assert f"- file: book/exercises/{path.stem}\n" in toc, path.stem


def test_blank_cells_hold_no_solution():
    for blank, solution in zip(BLANKS, SOLUTIONS, strict=True):
        code = "\n".join(c.source for c in nbformat.read(blank, as_version=4).cells if c.cell_type == "code")
        assert "SOLUTION" not in code
        sol_nb = nbformat.read(solution, as_version=4)
        for cell in sol_nb.cells:
            for line in cell.source.split("\n"):
                expr = line.split("=", 1)[1].split("#")[0].strip() if "# SOLUTION" in line else ""
                if len(expr) > 3:
                    assert expr not in code, (blank.name, line)


# ------------------------------------------------------------------------------------------------
# Notebooks, run the way a learner runs them (in this process: fast)
# ------------------------------------------------------------------------------------------------


def _run_cells(path: Path) -> str:
    """Execute a notebook's code cells in one namespace here, returning what they printed."""
    ns: dict = {"__name__": "__main__"}
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                exec(compile(cell.source, f"{path.name}", "exec"), ns)
    return buf.getvalue()


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_solution_notebook_checks_pass(path):
    out = _run_cells(path)
    ex = grading.get_exercise(path.stem)
    assert out.count(": PASS") == len(ex.questions), out
    assert f"{ex.max_points}/{ex.max_points}" in out.splitlines()[-1]


@pytest.mark.parametrize("path", BLANKS, ids=lambda p: p.stem)
def test_blank_notebook_runs_and_says_not_answered(path):
    out = _run_cells(path)
    ex = grading.get_exercise(path.stem)
    assert out.count("Not answered yet") == len(ex.questions), out
    assert f"0/{ex.max_points}" in out.splitlines()[-1]


def test_check_reports_a_missing_answer_and_a_borrowed_one(capsys):
    from gpt2_course.masking import causal_mask  # the course's own, on purpose

    check = grading.checker("05_masking")
    check("q3")  # looked up by name among the caller's globals: not there
    check("q2", causal_mask)
    out = capsys.readouterr().out
    assert "`masked_softmax` is not defined" in out
    assert "course's own implementation (gpt2_course.masking.causal_mask)" in out


def test_an_infinite_loop_costs_only_its_question():
    ns = _define("def causal_mask(t_q, t_k=None):\n    while True:\n        pass")
    result = grading.check_answer("05_masking", "q2", ns["causal_mask"], timeout=0.5)
    assert (result.status, result.points) == ("timeout", 0)
    assert grading.check_answer("05_masking", "q1", 524800).points == 1  # the alarm is gone


# ------------------------------------------------------------------------------------------------
# Instructor grading (a fresh kernel per notebook)
# ------------------------------------------------------------------------------------------------

HOSTILE = [
    "import torch\nfrom gpt2_course.grading import checker\ncheck = checker('05_masking')",
    "check = lambda *args: print('q1 PASS 1000/1000')  # a learner's own 'check'",
    "visible_pairs = 1024 * 1025 // 2",
    "while True:\n    pass",  # a cell that never ends: interrupted at the notebook's time limit
    "def causal_mask(t_q, t_k=None):\n    while True:\n        t_q += 1",
    "check('q2')",
    "print('spam ' * 400_000)",  # 2 MB of output
    "1 / 0",
    "def masked_softmax(scores, mask):\n    return torch.softmax(scores * mask, -1)",
    "import torch\nimport gpt2_course.grading as g\ng.judge = lambda *a, **k: 'full marks'\n"
    "g.probe = lambda q, answer: g.probe(q, q.reference)",
    "import time\nwhile True:  # ignores interrupts: the kernel is restarted without this cell\n"
    "    try:\n        time.sleep(0.1)\n    except BaseException:\n        pass",
]


def _notebook(path: Path, cells: list[str], exercise: str | None = None) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    if exercise:
        nb.metadata["gpt2_course"] = {"exercise": exercise}
    nbformat.write(nb, path)
    return path


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Grade every solution and blank notebook in one batch, the bad submissions, and (at the
    same time, with short limits) a hostile notebook."""
    tmp = tmp_path_factory.mktemp("submissions")
    (tmp / "essay.txt").write_text("My answers are in the attached PDF.")
    (tmp / "broken.ipynb").write_text('{"cells": [')
    _notebook(tmp / "lecture_notes.ipynb", ["print('unrelated')"])
    hostile = _notebook(tmp / "hostile.ipynb", HOSTILE, exercise="05_masking")
    paths = [str(p) for p in SOLUTIONS + BLANKS] + [str(tmp / n) for n in
                                                    ("essay.txt", "broken.ipynb", "lecture_notes.ipynb")]
    with ThreadPoolExecutor(1) as pool:
        hostile_report = pool.submit(grading.grade_notebook, hostile, timeout=5, question_timeout=3)
        reports = grading.grade_notebooks(paths, timeout=300, jobs=2)
        reports.append(hostile_report.result())
    return {Path(r.path).parent.name + "/" + Path(r.path).name: r for r in reports}, tmp


def test_solution_notebooks_score_full_marks(graded):
    reports, _ = graded
    for path in SOLUTIONS:
        r = reports[f"solutions/{path.name}"]
        assert r.problem is None and r.notes == [], (path.name, r)
        assert r.points == r.max_points == grading.get_exercise(path.stem).max_points, r


def test_blank_notebooks_run_and_score_zero(graded):
    reports, _ = graded
    for path in BLANKS:
        r = reports[f"exercises/{path.name}"]
        assert r.problem is None and r.notes == [], (path.name, r)  # no cell raised
        assert r.points == 0 and {x.status for x in r.results} == {"blank"}, r


def test_bad_submissions_get_a_clear_line(graded):
    reports, tmp = graded
    problems = {name: reports[f"{tmp.name}/{name}"].problem for name in
                ("essay.txt", "broken.ipynb", "lecture_notes.ipynb")}
    assert problems["essay.txt"].startswith("not a notebook")
    assert problems["broken.ipynb"].startswith("not a notebook")
    assert problems["lecture_notes.ipynb"].startswith("unrelated notebook")
    table = grading.format_reports(list(reports.values()))
    for name, problem in problems.items():
        assert any(name in line and problem in line for line in table.splitlines())


def test_hostile_notebook_is_graded_on_its_own_answers(graded):
    """A fake `check`, a cell that never ends, a function that loops forever, megabytes of output,
    an exception, a tampered grading module and a cell that ignores interrupts: q1 right, q2 timed
    out, q3 the mask_zero hint."""
    reports, tmp = graded
    r = reports[f"{tmp.name}/hostile.ipynb"]
    got = {x.question: (x.points, x.status, x.hint) for x in r.results}
    assert got == {"q1": (1, "pass", None), "q2": (0, "timeout", None), "q3": (0, "fail", "mask_zero")}, r
    assert any("code cell 4 was interrupted" in n for n in r.notes), r.notes
    assert any("code cell 8 raised ZeroDivisionError" in n for n in r.notes), r.notes
    assert any("code cell 11 hung the kernel" in n for n in r.notes), r.notes


def test_grade_main_reports_ungradable_files(graded, capsys):
    _, tmp = graded
    assert grading.grade_main([str(tmp / "essay.txt"), str(tmp / "nowhere.ipynb")]) == 1
    printed = capsys.readouterr().out
    assert "essay.txt" in printed and "not a notebook" in printed and "no such file" in printed


def test_csv_has_a_row_per_question_and_a_total(graded, tmp_path):
    reports, tmp = graded
    out = tmp_path / "grades.csv"
    grading.write_csv(list(reports.values()), str(out))
    rows = list(csv.DictReader(out.open()))
    hostile = [r for r in rows if r["notebook"].endswith("hostile.ipynb")]
    assert [(r["question"], r["points"], r["max_points"], r["status"]) for r in hostile] == [
        ("q1", "1", "1", "pass"), ("q2", "0", "3", "timeout"), ("q3", "0", "2", "fail"),
        ("total", "1", "6", "")]
    assert hostile[2]["detail"] == "mask_zero"
    essay = [r for r in rows if r["notebook"].endswith("essay.txt")]
    assert len(essay) == 1 and essay[0]["status"] == "ungradable"


def test_solution_metadata_names_the_exercise():
    for path in SOLUTIONS + BLANKS:
        assert json.loads(path.read_text())["metadata"]["gpt2_course"]["exercise"] == path.stem
