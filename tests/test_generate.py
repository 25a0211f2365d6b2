"""Chapter 9: sampling filters, the KV cache and the generation loop, against transformers."""
from __future__ import annotations

import copy
import math

import pytest
import torch
import transformers
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

import gpt2_course.fast as gpt2_course_fast
from gpt2_course.config import GPT2Config
from gpt2_course.data import EOT_TOKEN_ID, tiktoken_gpt2
from gpt2_course.fast import (
    FusedMLP,
    FusedSelfAttention,
    Int8Linear,
    PreallocatedKVCache,
    copy_bandwidth,
    decode_layout_,
    describe,
    fuse_,
    interleaved_times,
    machine,
    matvec_rates,
    quantize_int8,
    row_layout_,
    to_bf16,
    versions,
    weight_bytes_per_token,
)
from gpt2_course.generate import (
    KVCache,
    generate,
    generate_text,
    sample_next,
    stream,
    top_k_filter,
    top_p_filter,
)
from gpt2_course.loading import course_model, save_model
from gpt2_course.model import GPT2

NEG_INF = float("-inf")


@pytest.fixture(scope="module")
def model() -> GPT2:
    """A small GPT-2 with GPT-2's vocabulary and random weights, scaled so that its next-token
    distributions range from near-certain to a few bits of entropy (GPT-2's init gives near-uniform
    ones) and the blocks, not the echo of the input embedding, decide the argmax."""
    torch.manual_seed(0)
    m = GPT2(GPT2Config(n_ctx=48, n_embd=64, n_layer=3, n_head=4)).eval()
    with torch.no_grad():
        m.wte.weight.mul_(40)
        for name, p in m.named_parameters():
            if name.endswith(("c_attn.weight", "c_fc.weight")):
                p.mul_(200**0.5)
            elif name.endswith("c_proj.weight"):
                p.mul_(200)
    return m


@pytest.fixture(scope="module")
def hf_twin(model, tmp_path_factory):
    """transformers' GPT2LMHeadModel with the same weights."""
    folder = save_model(model, tmp_path_factory.mktemp("twin"))
    hf = transformers.GPT2LMHeadModel.from_pretrained(folder).eval()
    hf.generation_config.eos_token_id = None  # run the full budget, as ours does without eos_token_id
    hf.generation_config.pad_token_id = 0
    return hf


@pytest.fixture(scope="module")
def prompt() -> torch.Tensor:
    return torch.randint(0, 50257, (1, 7), generator=torch.Generator().manual_seed(3))


def kept(logits: torch.Tensor) -> torch.Tensor:
    return logits > NEG_INF


# ---- filters -------------------------------------------------------------------------------------

def random_logits(seed: int, rows: int = 8, vocab: int = 500, scale: float = 3.0) -> torch.Tensor:
    return scale * torch.randn(rows, vocab, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("k", [1, 2, 40, 499, 500, 10_000])
def test_top_k_matches_transformers(k):
    logits = random_logits(k)
    ours = top_k_filter(logits, k)
    theirs = TopKLogitsWarper(top_k=k)(None, logits.clone())
    assert torch.equal(kept(ours), kept(theirs))
    assert (kept(ours).sum(-1) == min(k, 500)).all()
    assert torch.equal(ours[kept(ours)], logits[kept(ours)])  # survivors unchanged


@pytest.mark.parametrize("p", [0.05, 0.3, 0.5, 0.9, 0.95, 0.999])
@pytest.mark.parametrize("scale", [0.5, 3.0, 10.0])
def test_top_p_matches_transformers(p, scale):
    logits = random_logits(int(p * 1000) + int(scale), scale=scale)
    ours = top_p_filter(logits, p)
    theirs = TopPLogitsWarper(top_p=p)(None, logits.clone())
    assert torch.equal(kept(ours), kept(theirs))


@settings(max_examples=200, deadline=None)
@given(
    probs=st.lists(st.floats(0.001, 1.0), min_size=1, max_size=30, unique=True),
    p=st.floats(0.01, 1.0),
)
@example(probs=[0.9999999999999999, 1.0], p=0.5)  # tied in float32 (found by CI): assumed away
def test_top_p_keeps_the_smallest_sufficient_set(probs, p):
    """The definition, checked by brute force on distinct probabilities."""
    probs = torch.tensor(probs, dtype=torch.float64)
    probs = probs / probs.sum()
    # distinct as the filter sees them: it ranks in float32, where 0.9999999999999999 and 1.0 tie
    assume(probs.log().float().softmax(-1).unique().numel() == probs.numel())
    keep = kept(top_p_filter(probs.log(), p))
    ranked = probs.argsort(descending=True)
    n = int(keep.sum())
    assert n >= 1
    assert torch.equal(keep[ranked], torch.arange(len(probs)) < n)  # a prefix of the ranking
    mass = probs[ranked].cumsum(0)
    assert mass[n - 1] >= p - 1e-9 or n == len(probs)  # enough probability...
    assert n == 1 or mass[n - 2] < p + 1e-9  # ...and one token fewer would not be


def test_top_p_always_keeps_the_top_token():
    logits = torch.tensor([[5.0, 1.0, 0.0], [0.0, 0.0, 9.0]])
    assert kept(top_p_filter(logits, 1e-6)).tolist() == [[True, False, False], [False, False, True]]
    assert kept(top_p_filter(logits, 1.0)).all()


def test_filters_leave_their_input_alone():
    logits = random_logits(1)
    copy = logits.clone()
    top_k_filter(logits, 3), top_p_filter(logits, 0.5)
    assert torch.equal(logits, copy)


def test_sampling_frequencies_follow_the_filtered_distribution():
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0])
    g = torch.Generator().manual_seed(0)
    n = 40_000
    for kw, expected in [
        (dict(), logits.softmax(-1)),
        (dict(temperature=0.5), (logits / 0.5).softmax(-1)),
        (dict(temperature=2.0, top_k=2), torch.tensor([math.exp(0.5), 1, 0, 0, 0]) / (math.exp(0.5) + 1)),
        (dict(top_p=0.6), torch.cat([logits[:2].softmax(-1), torch.zeros(3)])),
    ]:
        draws = sample_next(logits.expand(n, -1), generator=g, **kw)[:, 0]
        freq = torch.bincount(draws, minlength=5) / n
        assert (freq - expected).abs().max() < 0.01, kw


def test_temperature_zero_is_argmax():
    logits = random_logits(5)
    assert torch.equal(sample_next(logits, temperature=0)[:, 0], logits.argmax(-1))


@pytest.mark.parametrize(
    "kw, words",
    [
        (dict(temperature=-0.1), "temperature must be >= 0"),
        (dict(temperature=float("nan")), "temperature must be >= 0"),
        (dict(top_k=0), "top_k must be an integer >= 1"),
        (dict(top_k=2.5), "top_k must be an integer >= 1"),
        (dict(top_p=0.0), "top_p must be in (0, 1]"),
        (dict(top_p=1.01), "top_p must be in (0, 1]"),
    ],
)
def test_bad_knobs_name_the_valid_range(model, prompt, kw, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace("]", r"\]")):
        sample_next(torch.zeros(1, 5), **kw)
    with pytest.raises(ValueError, match="must be"):
        generate(model, prompt, 3, **kw)
    with pytest.raises(ValueError, match="must be"):
        stream(model, prompt, 3, **kw)  # raised at the call, before any token is requested


# ---- KV cache ------------------------------------------------------------------------------------

def test_cache_grows_and_matches_full_recomputation(model, prompt):
    cache = KVCache(model.config.n_layer)
    with torch.no_grad():
        first = model(prompt, cache=cache)
        assert cache.length == 7
        assert [tuple(layer.k.shape) for layer in cache.layers] == [(1, 4, 7, 16)] * 3
        steps = [first]
        for t in range(7, 12):
            steps.append(model(torch.tensor([[t * 11]]), cache=cache))
        assert cache.length == 12 and cache.layers[2].v.shape == (1, 4, 12, 16)
        full = model(torch.cat([prompt, torch.tensor([[t * 11 for t in range(7, 12)]])], dim=1))
    assert (torch.cat(steps, dim=1) - full).abs().max() < 1e-4


def test_layer_cache_update_returns_past_and_new():
    layer = KVCache(1).layers[0]
    k1, v1, k2, v2 = (torch.randn(2, 3, n, 4) for n in (5, 5, 2, 2))
    assert layer.length == 0
    k, v = layer.update(k1, v1)
    assert torch.equal(k, k1) and torch.equal(v, v1)
    k, v = layer.update(k2, v2)
    assert torch.equal(k, torch.cat([k1, k2], dim=2)) and torch.equal(v, torch.cat([v1, v2], dim=2))
    assert layer.length == 7


def test_preallocated_cache_returns_what_concatenation_does():
    grow, fixed = KVCache(1).layers[0], PreallocatedKVCache(1, max_len=9).layers[0]
    for n in (5, 1, 1, 2):
        k, v = torch.randn(2, 3, n, 4), torch.randn(2, 3, n, 4)
        for got, expected in zip(fixed.update(k, v), grow.update(k, v), strict=True):
            assert torch.equal(got, expected)
    assert fixed.length == grow.length == 9
    with pytest.raises(ValueError, match="larger max_len"):
        fixed.update(torch.randn(2, 3, 1, 4), torch.randn(2, 3, 1, 4))


class Spy(torch.nn.Module):
    """The model, recording every call generate makes to its forward and the logits it returns."""

    def __init__(self, model: GPT2):
        super().__init__()
        self.model, self.config, self.calls = model, model.config, []

    def forward(self, idx, cache=None, logits_from=0):
        logits = self.model(idx, cache=cache, logits_from=logits_from)
        self.calls.append((idx, logits))
        return logits


@pytest.mark.parametrize("use_cache", [True, False])
def test_generate_is_the_forward_pass(model, prompt, use_cache):
    """Greedy generate, with and without the cache, against chapter 8's forward on the whole sequence:
    each step's logits are the full forward's last row, and each token is their argmax."""
    spy = Spy(model)
    out = generate(spy, prompt, 12, temperature=0, use_cache=use_cache)
    assert len(spy.calls) == 12
    with torch.no_grad():
        for t, (fed, logits) in enumerate(spy.calls):
            context = out[:, : prompt.size(1) + t]
            assert torch.equal(fed, context if not use_cache or t == 0 else context[:, -1:])
            expected = model(context)[:, -1]
            assert logits.shape == (1, 1, 50257)  # the head ran on the last position only
            assert (logits[:, -1] - expected).abs().max() < 1e-4 * expected.abs().max()
            assert out[0, prompt.size(1) + t] == expected.argmax()


def test_generate_follows_an_edited_block(model, prompt):
    """A learner who changes a block sees generate change with it: there is no second forward."""
    edited = copy.deepcopy(model)
    edited.h[1].forward = lambda x, kv=None: x + edited.h[1].attn(edited.h[1].ln_1(x), kv)  # no MLP
    with torch.no_grad():
        x, expected = prompt, []
        for _ in range(10):
            token = edited(x)[:, -1].argmax(-1, keepdim=True)
            expected.append(token)
            x = torch.cat([x, token], dim=1)
    ours = generate(edited, prompt, 10, temperature=0)
    assert torch.equal(ours[:, 7:], torch.cat(expected, dim=1))
    assert not torch.equal(ours, generate(model, prompt, 10, temperature=0))


def test_a_given_cache_is_filled_and_checked(model, prompt):
    cache = PreallocatedKVCache(model.config.n_layer, max_len=12)
    out = generate(model, prompt, 5, temperature=0, cache=cache)
    assert cache.length == 11  # the prompt and every new token but the last, which is not fed back
    assert torch.equal(out, generate(model, prompt, 5, temperature=0))
    with pytest.raises(ValueError, match="already holds 11 positions"):
        generate(model, prompt, 5, cache=cache)
    with pytest.raises(ValueError, match="use_cache=False"):
        stream(model, prompt, 5, use_cache=False, cache=KVCache(model.config.n_layer))


def test_prompt_ids_are_checked_once_with_a_clear_error(model):
    for bad in (torch.tensor([[3, 50257]]), torch.tensor([[-1, 3]]), torch.tensor([[1.0, 2.0]])):
        with pytest.raises(ValueError, match=r"token ids in 0\.\.50256"):
            generate(model, bad, 3)


SETTINGS = [
    dict(temperature=0),
    dict(),
    dict(temperature=0.7, top_k=40),
    dict(top_p=0.9),
    dict(temperature=1.3, top_k=200, top_p=0.8),
]


@pytest.mark.parametrize("kw", SETTINGS, ids=str)
def test_cache_gives_identical_tokens(model, kw):
    idx = torch.randint(0, 50257, (2, 5), generator=torch.Generator().manual_seed(9))
    runs = [generate(model, idx, 30, use_cache=c, generator=torch.Generator().manual_seed(1), **kw)
            for c in (True, False)]
    assert runs[0].shape == (2, 35)
    assert torch.equal(runs[0], runs[1])


def test_cache_gives_identical_tokens_on_the_pocket_model():
    pocket = course_model()
    idx = torch.tensor([tiktoken_gpt2().encode_ordinary("ROMEO:\n")])
    for kw in (dict(temperature=0), dict(temperature=0.8, top_k=40, top_p=0.95)):
        runs = [generate(pocket, idx, 40, use_cache=c, generator=torch.Generator().manual_seed(5), **kw)
                for c in (True, False)]
        assert torch.equal(runs[0], runs[1]), kw


# ---- against transformers' generate -------------------------------------------------------------

def test_greedy_matches_transformers(model, hf_twin, prompt):
    ours = generate(model, prompt, 40, temperature=0)
    theirs = hf_twin.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=40,
                              do_sample=False)
    assert torch.equal(ours, theirs)


@pytest.mark.parametrize("kw", SETTINGS[1:], ids=str)
def test_seeded_sampling_matches_transformers(model, hf_twin, prompt, kw):
    """Both draw with torch.multinomial from the default generator after the same filters."""
    hf_kw = dict(temperature=kw.get("temperature", 1.0), top_k=kw.get("top_k", 0), top_p=kw.get("top_p", 1.0))
    torch.manual_seed(11)
    theirs = hf_twin.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=40,
                              do_sample=True, **hf_kw)
    torch.manual_seed(11)
    ours = generate(model, prompt, 40, **kw)
    assert torch.equal(ours, theirs)


# ---- the loop: seeds, stopping, prompts, limits -------------------------------------------------

def test_seeds(model, prompt):
    run = lambda seed: generate(model, prompt, 30, generator=torch.Generator().manual_seed(seed))
    assert torch.equal(run(1), run(1))
    assert not torch.equal(run(1), run(2))


def test_stream_yields_what_generate_returns(model, prompt):
    tokens = list(stream(model, prompt, 20, top_k=10, generator=torch.Generator().manual_seed(4)))
    assert len(tokens) == 20 and all(t.shape == (1, 1) for t in tokens)
    whole = generate(model, prompt, 20, top_k=10, generator=torch.Generator().manual_seed(4))
    assert torch.equal(torch.cat([prompt, *tokens], dim=1), whole)


def test_stops_at_eos(model, prompt):
    free = generate(model, prompt, 20, temperature=0)[0, 7:].tolist()
    eos = free[5]
    stop = free.index(eos)  # its first occurrence, which may come before index 5
    out = generate(model, prompt, 20, temperature=0, eos_token_id=eos)
    assert out[0, 7:].tolist() == free[: stop + 1]
    assert len(list(stream(model, prompt, 20, temperature=0, eos_token_id=eos))) == stop + 1


def test_finished_rows_are_padded_with_eos(model):
    idx = torch.randint(0, 50257, (2, 4), generator=torch.Generator().manual_seed(2))
    free = generate(model, idx, 15, temperature=0)[:, 4:]
    eos = free[0, 3].item()
    assert eos not in free[1].tolist(), "pick another seed: row 1 must not stop"
    out = generate(model, idx, 15, temperature=0, eos_token_id=eos)[:, 4:]
    stop = free[0].tolist().index(eos)
    assert torch.equal(out[1], free[1])  # row 1 runs the full budget
    assert out[0, : stop + 1].tolist() == free[0, : stop + 1].tolist()
    assert (out[0, stop:] == eos).all()


def test_empty_prompt_starts_from_endoftext(model):
    empty = torch.zeros((1, 0), dtype=torch.long)
    out = generate(model, empty, 10, generator=torch.Generator().manual_seed(0))
    assert out.shape == (1, 11) and out[0, 0] == EOT_TOKEN_ID
    same = generate(model, torch.tensor([[EOT_TOKEN_ID]]), 10, generator=torch.Generator().manual_seed(0))
    assert torch.equal(out, same)


def test_context_limit(model, prompt):
    n_ctx = model.config.n_ctx
    assert generate(model, prompt, n_ctx - 7, temperature=0).shape == (1, n_ctx)  # exactly full: fine
    with pytest.raises(ValueError, match=r"n_ctx = 48.*at most 41 new tokens"):
        generate(model, prompt, n_ctx - 6)
    with pytest.raises(ValueError, match="n_ctx"):
        stream(model, torch.zeros((1, 49), dtype=torch.long), 0)


def test_budget_and_prompt_shape(model, prompt):
    assert torch.equal(generate(model, prompt, 0), prompt)
    with pytest.raises(ValueError, match="max_new_tokens must be >= 0"):
        generate(model, prompt, -1)
    with pytest.raises(ValueError, match=r"\[batch, time\]"):
        generate(model, prompt[0], 3)


def test_generate_text_decodes_what_was_generated(model):
    enc = tiktoken_gpt2()
    pieces = list(generate_text(model, "To be", 30, top_k=50, seed=8))
    ids = generate(model, torch.tensor([enc.encode_ordinary("To be")]), 30, top_k=50,
                   generator=torch.Generator().manual_seed(8), eos_token_id=EOT_TOKEN_ID)[0, 2:].tolist()
    if EOT_TOKEN_ID in ids:
        ids = ids[: ids.index(EOT_TOKEN_ID)]
    assert "".join(pieces) == enc.decode(ids)
    assert pieces == list(generate_text(model, "To be", 30, top_k=50, seed=8))


def test_generate_text_never_splits_a_character():
    """A model that always says '😀' (two tokens, neither valid UTF-8 alone), then stops."""
    enc = tiktoken_gpt2()
    script = enc.encode_ordinary("😀") * 2 + [EOT_TOKEN_ID]

    class Scripted(torch.nn.Module):
        config = GPT2Config(n_ctx=32, n_embd=8, n_layer=1, n_head=1)

        def __init__(self):
            super().__init__()
            self.dummy = torch.nn.Parameter(torch.zeros(1))

        def forward(self, idx, cache=None, logits_from=0):
            seen = idx.size(1) + (cache.length if cache is not None else 0)
            logits = torch.full((1, idx.size(1), 50257), -1e9)
            logits[0, -1, script[seen - 1]] = 0.0  # the prompt is one token
            logits = logits[:, logits_from:]
            if cache is not None:
                for layer in cache.layers:
                    layer.update(torch.zeros(1, 1, idx.size(1), 1), torch.zeros(1, 1, idx.size(1), 1))
            return logits

    pieces = list(generate_text(Scripted(), "!", 10, temperature=0))
    assert pieces == ["😀", "😀"]


# ---- appendix A2: the machine, bytes per token, layouts, the fast path, bf16 and int8 weights -----

def test_machine_is_read_from_the_machine():
    m = machine()
    assert m["threads"] == torch.get_num_threads() and m["torch"] == torch.__version__
    assert m["cpu"] and set(m["capabilities"]) <= set(gpt2_course_fast.CAPABILITIES)
    line = describe(m)
    assert str(m["cpu"]) in line and f"{m['threads']} thread(s)" in line


def test_weight_bytes_count_every_weight_but_the_position_table(model):
    n_params = sum(p.numel() for p in model.parameters())  # wte counted once: it is the head too
    assert weight_bytes_per_token(model) == 4 * (n_params - model.wpe.weight.numel())
    assert weight_bytes_per_token(to_bf16(model)) == weight_bytes_per_token(model) // 2


def test_int8_linear_is_close_to_the_float_layer():
    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 48)
    q = Int8Linear(linear)
    assert q.weight.dtype == torch.int8 and q.weight.abs().max() == 127
    x = torch.randn(2, 5, 64)
    with torch.no_grad():
        expected = linear(x)
    err = (q(x) - expected).abs().max()
    assert q(x).shape == (2, 5, 48)
    assert 0 < err < 0.01 * expected.abs().max()  # rounding to 255 levels per row, no more


def test_quantized_models_generate_and_keep_the_original(model, prompt):
    before = {name: p.clone() for name, p in model.state_dict().items()}
    q = quantize_int8(model)
    assert all(isinstance(m, Int8Linear) for b in q.h for m in (b.attn.c_attn, b.attn.c_proj, b.mlp.c_fc))
    assert weight_bytes_per_token(q) < 0.3 * weight_bytes_per_token(model) + 4 * model.wte.weight.numel()
    for variant in (q, to_bf16(model)):
        out = generate(variant, prompt, 5, temperature=0)
        assert out.shape == (1, 12) and torch.equal(out[:, :7], prompt)
    assert all(torch.equal(p, before[name]) for name, p in model.state_dict().items())


def test_decode_layout_changes_strides_not_values(model):
    fast = decode_layout_(copy.deepcopy(model))
    for (name, p), q in zip(model.named_parameters(), fast.parameters(), strict=True):
        assert torch.equal(p, q), name
        if p.dim() == 2 and p.size(0) >= p.size(1) and name != "wpe.weight":
            assert q.t().is_contiguous() and q.stride() == (1, p.size(0)), name  # by columns
        else:
            assert q.is_contiguous(), name  # wpe, mlp.c_proj [C, 4C], the vectors: by rows
    again = decode_layout_(copy.deepcopy(fast))  # applying it twice moves nothing
    assert decode_layout_(fast) is fast
    assert all(q.stride() == r.stride() for q, r in zip(fast.parameters(), again.parameters(), strict=True))
    rows = row_layout_(copy.deepcopy(fast))  # and back
    assert all(p.is_contiguous() and torch.equal(p, q) for p, q in zip(rows.parameters(), model.parameters()))
    bf16 = to_bf16(fast)
    assert all(p.is_contiguous() for p in bf16.parameters())  # bf16 kernels want rows
    assert all(p.is_contiguous() for p in decode_layout_(bf16).parameters())  # and decode_layout_ leaves them


@pytest.mark.parametrize("kw", SETTINGS, ids=str)
def test_decode_layout_gives_identical_tokens(model, prompt, kw):
    """Against the row-major model and against chapter 8's forward without a cache."""
    fast = decode_layout_(copy.deepcopy(model))
    seeded = lambda: torch.Generator().manual_seed(5)
    run = lambda m, cache: generate(m, prompt, 30, use_cache=cache, generator=seeded(), **kw)
    reference = run(model, False)
    assert torch.equal(run(fast, True), reference) and torch.equal(run(fast, False), reference)


def test_decode_layout_logits_equal_transformers(model, hf_twin, prompt):
    fast = decode_layout_(copy.deepcopy(model))
    with torch.no_grad():
        expected = hf_twin(prompt).logits[:, -1]
        prefill = fast(prompt, cache=KVCache(model.config.n_layer), logits_from=-1)[:, -1]
    assert (prefill - expected).abs().max() < 1e-4 * expected.abs().max()


def test_int8_of_a_decode_layout_model(model, prompt):
    """Int8Linear stores its own rows, whatever the layout of the float weights it quantizes."""
    fast = decode_layout_(copy.deepcopy(model))
    assert torch.equal(generate(quantize_int8(fast), prompt, 8, temperature=0),
                       generate(quantize_int8(model), prompt, 8, temperature=0))


def test_fused_modules_compute_what_chapters_6_and_7_do(model):
    fused = fuse_(copy.deepcopy(model))
    assert all(type(b.attn) is FusedSelfAttention and type(b.mlp) is FusedMLP for b in fused.h)
    assert all(torch.equal(p, q) for p, q in zip(fused.parameters(), model.parameters(), strict=True))
    idx = torch.randint(0, 50257, (2, 9), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        for cache in (None, KVCache(model.config.n_layer)):  # a whole sequence, and a prefill
            expected = model(idx)
            got = fused(idx, cache=cache)
            assert (got - expected).abs().max() < 1e-4 * expected.abs().max()
        step = fused(torch.tensor([[5], [6]]), cache=cache)  # one new token: no mask at all
        expected = model(torch.cat([idx, torch.tensor([[5], [6]])], dim=1))[:, -1:]
        assert (step - expected).abs().max() < 1e-4 * expected.abs().max()


@pytest.mark.parametrize("kw", SETTINGS, ids=str)
def test_the_fast_path_gives_identical_tokens(model, prompt, kw):
    fast = fuse_(decode_layout_(copy.deepcopy(model)))
    seeded = lambda: torch.Generator().manual_seed(5)
    reference = generate(model, prompt, 30, use_cache=False, generator=seeded(), **kw)
    cache = PreallocatedKVCache(model.config.n_layer, max_len=37)
    assert torch.equal(generate(fast, prompt, 30, generator=seeded(), cache=cache, **kw), reference)


def test_the_ladder_versions_agree_and_leave_the_model_alone(model, prompt):
    before = [(p.clone(), p.stride()) for p in model.parameters()]
    ladder = versions(model, prompt, 9)
    assert list(ladder) == ["no cache", "KV cache (chapter 9)", "+ decode layout", "+ preallocated cache",
                            "+ fused attention, GELU"]
    outputs = [fn() for fn in ladder.values()]
    assert all(torch.equal(out, outputs[0]) for out in outputs) and outputs[0].shape == (1, 16)
    after = zip(model.parameters(), before, strict=True)
    assert all(torch.equal(p, q) and p.stride() == stride for p, (q, stride) in after)


def test_copy_bandwidth_counts_read_and_write():
    ticks = iter([10.0, 13.0])  # a fake clock: the three copies take 3 s together
    assert copy_bandwidth(nbytes=4096, repeats=3, clock=ticks.__next__) == 2 * 4096


def test_interleaved_times_take_turns():
    calls = []
    clock = iter([0, 1, 1, 3, 3, 4, 4, 9, 9, 10, 10, 11]).__next__
    times = interleaved_times({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")},
                              rounds=3, clock=clock)
    assert calls == ["a", "b"] * 3
    assert times == {"a": [1, 1, 1], "b": [2, 5, 1]}


def test_matvec_rates_count_the_bytes_of_every_copy():
    ticks = iter(range(0, 1000, 2)).__next__  # a fake clock: every timed call takes 2 s
    rates = matvec_rates({"m": (6, 4)}, copies=3, rounds=2, clock=ticks)
    assert rates == {"m": {"rows": [3 * 6 * 4 * 4 / 2 / 1e9] * 2, "columns": [3 * 6 * 4 * 4 / 2 / 1e9] * 2}}
    bf16 = matvec_rates({"m": (6, 4)}, copies=1, rounds=1, dtype=torch.bfloat16, clock=ticks)
    assert bf16["m"]["rows"] == [6 * 4 * 2 / 2 / 1e9]
