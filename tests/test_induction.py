"""Chapter 12's induction-head toolkit: data, the attention-only model, the scores, ablation,
composition and the copy rule, each against a direct computation."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn as nn

from gpt2_course.config import GPT2Config
from gpt2_course.heads import attention_maps
from gpt2_course.induction import (
    AttnOnly,
    History,
    ablate_heads,
    check_ids,
    composition_maps,
    copy_losses,
    copy_rule,
    head_scores,
    head_write,
    prefix_matching_scores,
    previous_token_scores,
    repeated_tokens,
    train_attn_only,
    transition_step,
)
from gpt2_course.masking import causal_mask
from gpt2_course.model import GPT2

CONFIG = GPT2Config(vocab_size=20, n_ctx=12, n_embd=16, n_layer=2, n_head=2)


def small_model(config: GPT2Config = CONFIG, seed: int = 0) -> AttnOnly:
    torch.manual_seed(seed)
    model = AttnOnly(config)
    with torch.no_grad():  # larger weights than GPT-2's init, so that attention is far from uniform
        for p in model.parameters():
            p.normal_(0, 0.5)
    return model.eval()


def test_repeated_tokens_repeat_with_a_period_in_range() -> None:
    x = repeated_tokens(50, 24, 64, 3, 7, torch.Generator().manual_seed(0))
    assert x.shape == (50, 24) and x.dtype == torch.int64 and 0 <= x.min() and x.max() < 64
    periods = set()
    for row in x.tolist():
        period = next(p for p in range(1, 24) if row[p:] == row[:-p])
        assert 3 <= period <= 7 and len(set(row[:period])) == period  # a span of distinct tokens
        periods.add(period)
    assert periods >= {3, 4, 5, 6, 7}
    again = repeated_tokens(50, 24, 64, 3, 7, torch.Generator().manual_seed(0))
    assert torch.equal(x, again)


@pytest.mark.parametrize(("lo", "hi", "n_ctx"), [(0, 3, 10), (5, 4, 10), (3, 10, 10)])
def test_repeated_tokens_rejects_periods_without_a_repeat(lo: int, hi: int, n_ctx: int) -> None:
    with pytest.raises(ValueError, match="min_period <= max_period < n_ctx"):
        repeated_tokens(2, n_ctx, 10, lo, hi, torch.Generator())


def test_attn_only_has_no_mlp_and_its_own_head() -> None:
    model = AttnOnly(CONFIG)
    assert not any("mlp" in name for name, _ in model.named_modules())
    assert model.lm_head.weight.data_ptr() != model.wte.weight.data_ptr()
    assert model(torch.zeros(3, 5, dtype=torch.long)).shape == (3, 5, CONFIG.vocab_size)
    with pytest.raises(ValueError, match="out of range"):
        model(torch.tensor([[CONFIG.vocab_size]]))
    with pytest.raises(ValueError, match="longer than the model's context"):
        model(torch.zeros(1, CONFIG.n_ctx + 1, dtype=torch.long))


@pytest.mark.parametrize(("idx", "error", "match"), [
    (torch.tensor([3, 5]), ValueError, r"\[batch, time\], got \(2,\); idx\[None\]"),
    (torch.zeros(1, 0, dtype=torch.long), ValueError, "empty sequence"),
    (torch.tensor([[1.0, 2.0]]), TypeError, "tensor of torch.float32"),
    ([[1, 2]], TypeError, "got list"),
    (torch.tensor([[-1]]), ValueError, "token id -1 is out of range"),
    (torch.zeros(1, 13, dtype=torch.long), ValueError, "13 tokens is longer than the model's context"),
])
def test_attn_only_refuses_what_it_cannot_read(idx: object, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        AttnOnly(CONFIG)(idx)
    with pytest.raises(error, match=match):
        check_ids(idx, CONFIG)


def test_attn_only_starts_from_gpt2_s_initialisation_without_the_c_proj_rescale() -> None:
    torch.manual_seed(0)
    model = AttnOnly(GPT2Config(vocab_size=500, n_ctx=64, n_embd=64, n_layer=2, n_head=2))
    for name, p in model.named_parameters():
        if name.endswith("bias") or name.startswith(("ln", "h.0.ln", "h.1.ln")):
            continue
        assert abs(p.std().item() - 0.02) < 0.002, name  # c_proj too: 0.02, not 0.02 / sqrt(2 * n_layer)
    biases = [b for name, b in model.named_parameters() if name.endswith("attn.c_attn.bias")]
    assert biases and all(torch.count_nonzero(b) == 0 for b in biases)


def ideal_maps(T: int, period: int) -> torch.Tensor:
    """[2, T, T]: a perfect previous-token head and a perfect induction head."""
    prev = torch.zeros(T, T)
    prev[0, 0] = 1
    prev[torch.arange(1, T), torch.arange(T - 1)] = 1
    ind = torch.eye(T)
    t = torch.arange(period, T)
    ind[t] = 0
    ind[t, t - period + 1] = 1
    return torch.stack([prev, ind])


@pytest.mark.parametrize(("T", "period"), [(6, 3), (10, 2), (9, 8)])
def test_scores_of_ideal_heads(T: int, period: int) -> None:
    maps = ideal_maps(T, period)
    assert previous_token_scores(maps[0]).item() == 1.0
    assert prefix_matching_scores(maps[1], period).item() == 1.0
    assert prefix_matching_scores(maps[0], period).item() == (1.0 if period == 2 else 0.0)


def test_scores_of_an_even_head_are_the_mean_of_its_weights() -> None:
    T, period = 8, 3
    mask = causal_mask(T)
    even = mask / mask.sum(-1, keepdim=True)
    expected = sum(1 / (t + 1) for t in range(1, T)) / (T - 1)
    assert previous_token_scores(even).item() == pytest.approx(expected)
    expected = sum(1 / (t + 1) for t in range(period, T)) / (T - period)
    assert prefix_matching_scores(even, period).item() == pytest.approx(expected)


def test_repeated_tokens_rejects_a_span_longer_than_the_vocabulary() -> None:
    with pytest.raises(ValueError, match="max_period <= vocab_size"):
        repeated_tokens(2, 12, 5, 3, 6, torch.Generator())


@pytest.mark.parametrize("period", [0, 6, -1])
def test_prefix_matching_rejects_a_period_without_a_repeat(period: int) -> None:
    with pytest.raises(ValueError, match="period must lie in 1..5"):
        prefix_matching_scores(torch.ones(6, 6), period)


def test_head_scores_average_attention_maps_over_the_probe() -> None:
    model = small_model()
    probe = repeated_tokens(3, 10, CONFIG.vocab_size, 5, 5, torch.Generator().manual_seed(1))
    prev, prefix = head_scores(model, probe, 5)
    assert prev.shape == prefix.shape == (CONFIG.n_layer, CONFIG.n_head)
    maps = torch.stack([attention_maps(model, row) for row in probe])
    t = torch.arange(5, 10)
    assert torch.allclose(prefix, maps[..., t, t - 4].mean((0, -1)))
    assert torch.allclose(prev, torch.stack([previous_token_scores(m) for m in maps]).mean(0))


class Constant(nn.Module):
    """A 'model' whose logits are fixed: uniform, or sure of the token `sure` everywhere."""

    def __init__(self, vocab: int, sure: int | None = None):
        super().__init__()
        self.vocab, self.sure = vocab, sure

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        logits = torch.zeros(*idx.shape, self.vocab)
        if self.sure is not None:
            logits[..., self.sure] = 50.0
        return logits


def test_copy_losses_split_the_probe_at_the_period() -> None:
    probe = repeated_tokens(4, 8, 10, 4, 4, torch.Generator().manual_seed(0))
    assert copy_losses(Constant(10), probe, 4).tolist() == pytest.approx([math.log(10)] * 2)
    # sure of token 7: loss ~0 exactly where the target is 7, ~50 elsewhere
    probe = torch.tensor([[1, 2, 7, 3, 1, 2, 7, 3]])
    first, second = copy_losses(Constant(10, sure=7), probe, 4).tolist()
    # each copy scores its targets 2, 7, 3 (its first token, 1, is left out): 50 + 0 + 50 nats
    assert first == pytest.approx(100 / 3, abs=1e-3) and second == pytest.approx(100 / 3, abs=1e-3)


def test_ablate_heads_equals_zeroing_c_proj_columns_and_is_undone() -> None:
    model = small_model()
    x = torch.randint(CONFIG.vocab_size, (2, 9), generator=torch.Generator().manual_seed(0))
    before = model(x)
    with ablate_heads(model, [(1, 0), (0, 1)]):
        ablated = model(x)
    d = CONFIG.n_embd // CONFIG.n_head
    zeroed = small_model()
    with torch.no_grad():
        zeroed.h[1].attn.c_proj.weight[:, :d] = 0
        zeroed.h[0].attn.c_proj.weight[:, d:] = 0
    assert torch.allclose(ablated, zeroed(x), atol=1e-5)
    assert not torch.allclose(ablated, before, atol=1e-3)
    assert torch.equal(model(x), before)  # the hooks are gone after the block


def test_mean_ablation_fills_the_head_s_channels_with_their_mean_over_the_tokens() -> None:
    model = small_model()
    x = torch.randint(CONFIG.vocab_size, (2, 9), generator=torch.Generator().manual_seed(0))
    other = torch.randint(CONFIG.vocab_size, (3, 7), generator=torch.Generator().manual_seed(1))
    d = CONFIG.n_embd // CONFIG.n_head
    seen = {}
    hook = model.h[1].attn.c_proj.register_forward_pre_hook(lambda _m, a: seen.__setitem__("y", a[0]))
    model(other)
    hook.remove()
    mean = seen["y"][..., d:].mean((0, 1))  # head 1 of layer 1, over the other tokens' rows and positions
    with torch.no_grad():
        shifted = small_model()  # head 1's output replaced by its mean: c_proj's bias takes its share
        c_proj = shifted.h[1].attn.c_proj
        c_proj.bias += c_proj.weight[:, d:] @ mean
        c_proj.weight[:, d:] = 0
    before = model(x)
    with ablate_heads(model, [(1, 1)], mean_over=other):
        ablated = model(x)
    assert torch.allclose(ablated, shifted(x), atol=1e-5)
    assert torch.equal(model(x), before)


def test_ablating_every_head_leaves_each_position_alone() -> None:
    model = small_model()
    x = torch.randint(CONFIG.vocab_size, (1, 9), generator=torch.Generator().manual_seed(0))
    y = x.clone()
    y[0, 0] = (x[0, 0] + 1) % CONFIG.vocab_size
    heads = [(layer, h) for layer in range(CONFIG.n_layer) for h in range(CONFIG.n_head)]
    with ablate_heads(model, heads):
        assert torch.allclose(model(x)[0, 1:], model(y)[0, 1:])  # no head carries token 0 forward
    assert not torch.allclose(model(x)[0, 1:], model(y)[0, 1:])


def test_ablate_heads_works_on_gpt2_and_rejects_missing_heads() -> None:
    torch.manual_seed(0)
    gpt2 = GPT2(GPT2Config(vocab_size=30, n_ctx=8, n_embd=16, n_layer=2, n_head=4)).eval()
    x = torch.randint(30, (1, 6))
    with ablate_heads(gpt2, [(1, 3)]):
        ablated = gpt2(x)
    assert not torch.allclose(ablated, gpt2(x), atol=1e-4)
    for bad in [(2, 0), (0, 4), (-1, 0)]:
        with pytest.raises(ValueError, match="no head"), ablate_heads(gpt2, [bad]):
            pass


def test_head_writes_add_up_to_the_attention_layer() -> None:
    model = small_model()
    x = torch.randn(2, 7, CONFIG.n_embd, generator=torch.Generator().manual_seed(0))
    block = model.h[0]
    total = sum(head_write(block, x, h) for h in range(CONFIG.n_head)) + block.attn.c_proj.bias
    assert torch.allclose(total, block.attn(block.ln_1(x)), atol=1e-5)


def test_composition_maps_intact_is_the_head_s_attention() -> None:
    model = small_model()
    idx = torch.randint(CONFIG.vocab_size, (1, 10), generator=torch.Generator().manual_seed(0))
    maps = composition_maps(model, idx, source=(0, 1), target=(1, 0))
    assert set(maps) == {"intact", "keys without", "queries without", "both without"}
    assert torch.allclose(maps["intact"], attention_maps(model, idx)[1, 0], atol=1e-6)
    # with the source head silenced, both-without is the same head's attention
    with ablate_heads(model, [(0, 1)]):
        silenced = attention_maps(model, idx)[1, 0]
    assert torch.allclose(maps["both without"], silenced, atol=1e-5)
    assert not torch.allclose(maps["keys without"], maps["intact"], atol=1e-3)
    with pytest.raises(ValueError, match="must come before"):
        composition_maps(model, idx, source=(1, 0), target=(1, 1))


def copy_rule_by_hand(windows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n, T = windows.shape
    fires, right = np.zeros((n, T - 1), bool), np.zeros((n, T - 1), bool)
    for i in range(n):
        for t in range(T - 1):
            earlier = [j for j in range(t) if windows[i, j] == windows[i, t]]
            if earlier:
                fires[i, t] = True
                right[i, t] = windows[i, earlier[-1] + 1] == windows[i, t + 1]
    return fires, right


def test_copy_rule_matches_a_direct_loop() -> None:
    fires, right = copy_rule(torch.tensor([[0, 1, 2, 0, 1, 2]]))
    assert fires.tolist() == [[False, False, False, True, True]] and torch.equal(fires, right)
    rng = np.random.default_rng(0)
    for vocab in (3, 8, 50):
        w = rng.integers(0, vocab, size=(6, 15))
        fires, right = copy_rule(w)
        by_hand = copy_rule_by_hand(w)
        assert np.array_equal(fires.numpy(), by_hand[0]) and np.array_equal(right.numpy(), by_hand[1])


@pytest.mark.parametrize("shape", [(5,), (3, 1), (2, 2, 2)])
def test_copy_rule_rejects_bad_shapes(shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match=r"windows must be \[n, T\]"):
        copy_rule(np.zeros(shape, np.int64))


def test_train_attn_only_is_seeded_and_measures_every_few_steps() -> None:
    config = GPT2Config(vocab_size=16, n_ctx=12, n_embd=16, n_layer=2, n_head=1)
    probe = repeated_tokens(2, 8, 16, 4, 4, torch.Generator().manual_seed(9))
    kw = dict(min_period=3, max_period=5, batch_size=4, every=5, progress=False)
    model, hist = train_attn_only(config, 12, 0, probe, 4, **kw)
    assert hist.steps.tolist() == [0, 5, 10, 12]
    assert hist.losses.shape == (4, 2) and hist.previous.shape == hist.prefix.shape == (4, 2, 1)
    assert not model.training
    _, again = train_attn_only(config, 12, 0, probe, 4, **kw)
    _, other = train_attn_only(config, 12, 1, probe, 4, **kw)
    assert torch.equal(hist.losses, again.losses) and not torch.equal(hist.losses, other.losses)
    _, flat = train_attn_only(config, 12, 0, probe, 4, repeats=False, **kw)
    assert not torch.equal(hist.losses[1:], flat.losses[1:])


def test_transition_step_is_the_first_crossing_of_the_last_layer() -> None:
    prefix = torch.zeros(5, 2, 2)
    prefix[:, 0, 0] = 0.9  # layer 0 does not count
    prefix[3:, 1, 1] = torch.tensor([0.6, 0.7])
    hist = History(torch.tensor([0, 10, 20, 30, 40]), torch.zeros(5, 2), torch.zeros(5, 2, 2), prefix)
    assert transition_step(hist, 0.5) == 30
    assert transition_step(hist, 0.65) == 40
    assert transition_step(hist, 0.8) is None
