"""attention / attention_weights (chapter 4) against PyTorch's reference, and the heatmap helper."""
from __future__ import annotations

import math

import matplotlib
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from gpt2_course.attention import attention, attention_weights
from gpt2_course.masking import causal_mask

matplotlib.use("Agg")


def qkv(*shape_q: int, t_k: int | None = None, d_v: int | None = None, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    *lead, t_q, d = shape_q
    t_k = t_q if t_k is None else t_k
    q = torch.randn(*lead, t_q, d, generator=g, dtype=torch.float64)
    k = torch.randn(*lead, t_k, d, generator=g, dtype=torch.float64)
    v = torch.randn(*lead, t_k, d if d_v is None else d_v, generator=g, dtype=torch.float64)
    return q, k, v


@pytest.mark.parametrize("shape", [(5, 8), (3, 7, 16), (2, 4, 9, 64), (2, 3, 1, 32)])
def test_matches_sdpa_without_mask(shape: tuple[int, ...]) -> None:
    q, k, v = qkv(*shape)
    torch.testing.assert_close(attention(q, k, v), F.scaled_dot_product_attention(q, k, v))


@pytest.mark.parametrize("shape", [(6, 8), (2, 4, 9, 64), (1, 12, 17, 64)])
def test_matches_sdpa_with_causal_mask(shape: tuple[int, ...]) -> None:
    q, k, v = qkv(*shape)
    t = shape[-2]
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(attention(q, k, v, causal_mask(t)), want)
    with_mask = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(t))
    torch.testing.assert_close(attention(q, k, v, causal_mask(t)), with_mask)


@pytest.mark.parametrize(("t_q", "t_k"), [(1, 1), (1, 7), (3, 10), (10, 10)])
def test_matches_sdpa_for_the_newest_queries(t_q: int, t_k: int) -> None:
    """Generation: the queries are the last t_q positions of t_k keys (bottom-right aligned mask)."""
    q, k, v = qkv(2, 3, t_q, 16, t_k=t_k)
    mask = causal_mask(t_q, t_k)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(attention(q, k, v, mask), want)


def test_value_width_may_differ_from_query_width() -> None:
    q, k, v = qkv(2, 5, 8, d_v=3)
    out = attention(q, k, v)
    assert out.shape == (2, 5, 3)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v))


def test_scale_is_sqrt_of_query_width() -> None:
    q, k, _ = qkv(4, 16)
    want = torch.softmax(q @ k.T / math.sqrt(16), dim=-1)
    torch.testing.assert_close(attention_weights(q, k), want)
    unscaled = torch.softmax(q @ k.T, dim=-1)
    assert not torch.allclose(attention_weights(q, k), unscaled)


def test_float32_batched_heads_match_sdpa() -> None:
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 6, 33, 32, generator=g) for _ in range(3))
    mask = causal_mask(33)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(attention(q, k, v, mask), want)


@settings(max_examples=40, deadline=None)
@given(
    t_q=st.integers(1, 12), extra=st.integers(0, 6), d=st.integers(1, 24),
    scale=st.floats(0.01, 30.0), seed=st.integers(0, 10_000), masked=st.booleans(),
)
def test_rows_sum_to_one(t_q: int, extra: int, d: int, scale: float, seed: int, masked: bool) -> None:
    q, k, _ = qkv(t_q, d, t_k=t_q + extra, seed=seed)
    w = attention_weights(q * scale, k, causal_mask(t_q, t_q + extra) if masked else None)
    assert w.shape == (t_q, t_q + extra)
    assert torch.all(w >= 0)
    torch.testing.assert_close(w.sum(-1), torch.ones(t_q, dtype=w.dtype))


def test_output_is_a_convex_combination_of_values() -> None:
    q, k, v = qkv(5, 4, t_k=6)
    out = attention(q, k, v)
    assert torch.all(out <= v.max(0).values + 1e-12) and torch.all(out >= v.min(0).values - 1e-12)


def test_identical_keys_give_uniform_weights() -> None:
    q = torch.randn(3, 8, generator=torch.Generator().manual_seed(0))
    k = torch.ones(5, 8)
    torch.testing.assert_close(attention_weights(q, k), torch.full((3, 5), 0.2))


def test_heatmap_labels_rows_and_columns_with_tokens() -> None:
    import matplotlib.pyplot as plt

    from gpt2_course.plots import attention_heatmap

    tokens = ["a", " robot", " must", "\n"]
    w = attention_weights(*qkv(4, 8)[:2], causal_mask(4))
    ax = attention_heatmap(w, tokens, title="test")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", " robot", " must", "\\n"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", " robot", " must", "\\n"]
    assert ax.get_title() == "test"
    torch.testing.assert_close(torch.as_tensor(ax.images[0].get_array()), w.float())
    plt.close(ax.figure)


def test_heatmap_rejects_mismatched_tokens() -> None:
    import matplotlib.pyplot as plt

    from gpt2_course.plots import attention_heatmap

    with pytest.raises(ValueError, match="len\\(tokens\\)"):
        attention_heatmap(torch.eye(3), ["a", "b"])
    plt.close("all")


def test_role_scores_of_a_previous_token_head_and_of_a_uniform_one() -> None:
    from gpt2_course.attention import role_scores

    T = 6
    previous = torch.zeros(T, T)
    previous[0, 0] = 1.0
    previous[torch.arange(1, T), torch.arange(T - 1)] = 1.0
    uniform = causal_mask(T).float() / causal_mask(T).sum(-1, keepdim=True)
    roles = role_scores(torch.stack([previous, uniform]))  # two heads
    assert roles["previous"].tolist() == [1.0, pytest.approx(roles["uniform"][1].item())]
    assert roles["first"][0] == 0 and roles["itself"][0] == 0
    torch.testing.assert_close(roles["first"][1], roles["uniform"][1])
    torch.testing.assert_close(roles["itself"][1], roles["uniform"][1])
    expected = sum(1 / (t + 1) for t in range(2, T)) / (T - 2)
    assert roles["uniform"][1].item() == pytest.approx(expected)


def test_role_scores_and_heads_with_reject_bad_input() -> None:
    from gpt2_course.attention import heads_with, role_scores

    with pytest.raises(ValueError, match="T >= 3"):
        role_scores(torch.ones(2, 2))
    with pytest.raises(ValueError, match="kind must be"):
        heads_with({"previous": torch.zeros(1, 1, 1)}, "last")


def test_heads_with_averages_over_the_windows() -> None:
    from gpt2_course.attention import heads_with

    scores = torch.tensor([[[0.3, 0.1]], [[0.2, 0.5]]])  # [windows=2, layers=1, heads=2]
    assert heads_with({"previous": scores}, "previous") == [(0, 0), (0, 1)]
    assert heads_with({"previous": scores}, "previous", at_least=0.26) == [(0, 1)]


def test_head_roles_reads_the_attention_maps_of_fixed_validation_windows() -> None:
    from gpt2_course import course_model
    from gpt2_course.attention import ROLE_T, ROLE_WINDOWS, head_roles, role_scores
    from gpt2_course.data import token_ids
    from gpt2_course.heads import attention_maps

    model = course_model()
    roles = head_roles(model)
    n = (ROLE_WINDOWS, model.config.n_layer, model.config.n_head)
    assert all(roles[k].shape == n for k in ("previous", "first", "itself", "uniform"))
    first = torch.from_numpy(token_ids("validation")[:ROLE_T].astype("int64"))
    torch.testing.assert_close(roles["previous"][0], role_scores(attention_maps(model, first))["previous"])
    torch.testing.assert_close(head_roles(model)["itself"], roles["itself"])  # the same answer every time
