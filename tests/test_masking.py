"""causal_mask (chapter 5): the lower triangle, its offset form for generation, and no leaks."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from gpt2_course.attention import attention, attention_weights
from gpt2_course.masking import causal_mask


@pytest.mark.parametrize("t", [1, 2, 4, 17])
def test_square_mask_is_the_lower_triangle(t: int) -> None:
    m = causal_mask(t)
    assert m.dtype == torch.bool and m.shape == (t, t)
    assert torch.equal(m, torch.ones(t, t).tril().bool())


@settings(max_examples=60, deadline=None)
@given(t_q=st.integers(1, 20), extra=st.integers(0, 20))
def test_offset_mask_is_the_last_rows_of_the_full_mask(t_q: int, extra: int) -> None:
    """Query i of the last t_q positions sits at t_k - t_q + i and sees keys 0..that position."""
    t_k = t_q + extra
    m = causal_mask(t_q, t_k)
    assert m.shape == (t_q, t_k)
    assert torch.equal(m, torch.ones(t_k, t_k).tril().bool()[-t_q:])
    assert torch.equal(m, torch.ones(t_q, t_k).tril(diagonal=t_k - t_q).bool())
    assert torch.all(m.any(-1))  # no row is fully masked: each query sees at least itself


def test_newest_token_sees_everything() -> None:
    assert torch.equal(causal_mask(1, 6), torch.ones(1, 6, dtype=torch.bool))


def test_device_argument() -> None:
    assert causal_mask(3, device="cpu").device.type == "cpu"
    assert causal_mask(2, 5, device=torch.device("meta")).device.type == "meta"


@pytest.mark.parametrize(("t_q", "t_k"), [(0, 3), (4, 3), (-1, None)])
def test_bad_sizes_raise(t_q: int, t_k: int | None) -> None:
    with pytest.raises(ValueError, match="t_q"):
        causal_mask(t_q, t_k)


def embed_and_attend(tokens: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """A one-head attention layer over token embeddings, with fixed random weights."""
    g = torch.Generator().manual_seed(0)
    table = torch.randn(50, 16, generator=g, dtype=torch.float64)
    w_q, w_k, w_v = (torch.randn(16, 16, generator=g, dtype=torch.float64) / 4 for _ in range(3))
    x = table[tokens]
    return attention(x @ w_q, x @ w_k, x @ w_v, mask)


@settings(max_examples=50, deadline=None)
@given(seq=st.lists(st.integers(0, 49), min_size=2, max_size=12), data=st.data())
def test_changing_a_later_token_never_changes_earlier_outputs(seq: list[int], data: st.DataObject) -> None:
    t = data.draw(st.integers(1, len(seq) - 1), label="changed position")
    new = data.draw(st.integers(0, 49).filter(lambda x: x != seq[t]), label="new token")
    a, b = torch.tensor(seq), torch.tensor(seq)
    b[t] = new
    out_a, out_b = embed_and_attend(a, causal_mask(len(seq))), embed_and_attend(b, causal_mask(len(seq)))
    assert torch.equal(out_a[:t], out_b[:t])  # bit for bit: the past never sees the change
    assert not torch.equal(out_a[t], out_b[t])  # ... while the changed position itself does


def test_without_the_mask_the_future_leaks() -> None:
    """The same check fails when the mask is forgotten (the Annotated GPT-2's bug)."""
    a = torch.tensor([3, 14, 15, 9, 26])
    b = a.clone()
    b[-1] = 42
    out_a, out_b = embed_and_attend(a, None), embed_and_attend(b, None)
    assert (out_a[0] - out_b[0]).abs().max() > 1e-3


def test_masked_weights_are_exact_zeros() -> None:
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 3, 9, 8, generator=g), torch.randn(2, 3, 9, 8, generator=g)
    w = attention_weights(q * 100, k, causal_mask(9))  # large scores: exp would underflow anyway
    assert torch.all(w.masked_select(~causal_mask(9)) == 0.0)
    w = attention_weights(q, k, causal_mask(9))
    assert torch.all(w.masked_select(~causal_mask(9)) == 0.0)
    assert torch.all(w.masked_select(causal_mask(9)) > 0.0)


def test_fp16_masked_weights_are_exact_zeros() -> None:
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(4, 6, 16, generator=g).half() for _ in range(2))
    w = attention_weights(q, k, causal_mask(6))
    assert w.dtype == torch.float16
    assert torch.all(w.masked_select(~causal_mask(6)) == 0.0)
    assert not torch.isnan(w).any()


def test_one_query_at_a_time_equals_all_at_once() -> None:
    """Generation (chapter 9) computes the newest row with causal_mask(1, t); it must match training."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 7, 8, generator=g, dtype=torch.float64) for _ in range(3))
    full = attention(q, k, v, causal_mask(7))
    for t in range(1, 8):
        step = attention(q[:, t - 1 : t], k[:, :t], v[:, :t], causal_mask(1, t))
        torch.testing.assert_close(step, full[:, t - 1 : t])
    torch.testing.assert_close(full, F.scaled_dot_product_attention(q, k, v, is_causal=True))


def test_masked_keys_get_zero_weight_however_negative_the_visible_scores() -> None:
    """A finite fill (OpenAI's -1e10, old code's -1e4) loses to visible scores below it; -inf never does."""
    k = torch.ones(4, 8)
    q = torch.full((4, 8), -1e11)  # every score is -1e11 * 8 / sqrt(8), far below -1e10
    w = attention_weights(q, k, causal_mask(4))
    torch.testing.assert_close(w, causal_mask(4).float() / causal_mask(4).sum(-1, keepdim=True))
