"""Chapters 6-8: our GPT-2 against Hugging Face's GPT2LMHeadModel, and its pieces on their own."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
import transformers

from gpt2_course.config import GPT2Config
from gpt2_course.heads import CausalSelfAttention, attention_maps, merge_heads, split_heads
from gpt2_course.loading import load_model
from gpt2_course.mlp import MLP, gelu_tanh
from gpt2_course.model import GPT2

TOLERANCE = 1e-4  # max |logit difference| allowed against transformers, in float32


def random_hf_model(n_layer: int, n_head: int, n_embd: int, n_ctx: int, seed: int = 0):
    """A GPT2LMHeadModel whose every parameter is random, biases and LayerNorms included, with
    attention weights large enough that a wrong scale or a missing mask changes the logits."""
    torch.manual_seed(seed)
    config = transformers.GPT2Config(
        n_layer=n_layer, n_head=n_head, n_embd=n_embd, n_positions=n_ctx, n_ctx=n_ctx,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="eager",
    )
    model = transformers.GPT2LMHeadModel(config).eval()
    assert model.config._attn_implementation == "eager"
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("c_attn.weight"):
                p.normal_(0.0, 0.5 / math.sqrt(n_embd))  # peaky attention: scores of order 1-10
            elif name.endswith("mlp.c_fc.weight"):
                p.normal_(0.0, 2.0 / math.sqrt(n_embd))  # GELU inputs of order 2, where the tanh form differs
            elif name.endswith("mlp.c_proj.weight"):
                p.normal_(0.0, 1.0 / math.sqrt(4 * n_embd))
            elif name.endswith("wte.weight"):
                p.normal_(0.0, 0.1)
            elif name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
                p.normal_(1.0, 0.2)
            else:
                p.normal_(0.0, 0.05 if p.ndim == 1 else 0.02)
    return model


def both(tmp_path, **sizes):
    hf = random_hf_model(**sizes)
    hf.save_pretrained(tmp_path)
    return hf, load_model(tmp_path)


@pytest.mark.parametrize(
    "sizes",
    [dict(n_layer=12, n_head=12, n_embd=768, n_ctx=1024), dict(n_layer=3, n_head=5, n_embd=80, n_ctx=64)],
    ids=["gpt2", "odd-3x5x80"],
)
def test_logits_equal_transformers(tmp_path, sizes):
    hf, ours = both(tmp_path, **sizes)
    gen = torch.Generator().manual_seed(1)
    for T in (1, 7, sizes["n_ctx"]):
        B = 1 if T == sizes["n_ctx"] else 2  # a batch of two for the short ones; one full context
        idx = torch.randint(0, 50257, (B, T), generator=gen)
        with torch.no_grad():
            expected = hf(idx).logits
            got = ours(idx)
        assert got.shape == expected.shape == (B, T, 50257)
        diff = (got - expected).abs().max().item()
        print(f"{sizes} T={T}: max |logit difference| = {diff:.3e}")
        assert diff <= TOLERANCE, f"T={T}: logits differ from transformers by {diff}"


def test_loss_equals_transformers_shifted_loss(tmp_path):
    hf, ours = both(tmp_path, n_layer=2, n_head=4, n_embd=64, n_ctx=32)
    idx = torch.randint(0, 50257, (3, 20), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = hf(idx, labels=idx).loss  # transformers shifts the labels itself
        logits, loss = ours(idx[:, :-1], targets=idx[:, 1:])
    assert logits.shape == (3, 19, 50257)
    assert abs(loss.item() - expected.item()) < 1e-5


def test_untrained_loss_is_log_vocab_size():
    torch.manual_seed(0)
    model = GPT2(GPT2Config(n_layer=2, n_head=4, n_embd=64, n_ctx=64)).eval()
    idx = torch.randint(0, 50257, (4, 64))
    with torch.no_grad():
        _, loss = model(idx[:, :-1], targets=idx[:, 1:])
    assert abs(loss.item() - math.log(50257)) < 0.05


def test_gpt2_init():
    torch.manual_seed(0)
    config = GPT2Config(n_layer=4, n_head=4, n_embd=256, n_ctx=64)
    model = GPT2(config)
    params = dict(model.named_parameters())
    assert "lm_head.weight" not in params  # the head is wte
    assert abs(params["wte.weight"].std().item() - 0.02) < 1e-3
    assert abs(params["h.0.mlp.c_fc.weight"].std().item() - 0.02) < 1e-3
    for name in ("h.0.attn.c_proj.weight", "h.3.mlp.c_proj.weight"):
        assert abs(params[name].std().item() - 0.02 / math.sqrt(2 * config.n_layer)) < 1e-3
    assert all(p.abs().max() == 0 for n, p in params.items() if n.endswith("c_attn.bias"))
    assert torch.equal(params["ln_f.weight"], torch.ones(256))


def test_head_is_tied_to_wte():
    torch.manual_seed(0)
    model = GPT2(GPT2Config(n_layer=1, n_head=2, n_embd=32, n_ctx=16))
    idx = torch.tensor([[1, 2, 3]])
    _, loss = model(idx, targets=torch.tensor([[2, 3, 4]]))
    loss.backward()
    # rows of wte that were never looked up still get gradient, through the output head
    assert model.wte.weight.grad[100].abs().sum() > 0


def test_causal_later_tokens_do_not_change_earlier_logits():
    torch.manual_seed(0)
    model = GPT2(GPT2Config(n_layer=2, n_head=4, n_embd=64, n_ctx=32)).eval()
    a = torch.randint(0, 50257, (1, 12))
    b = a.clone()
    b[0, 8:] = torch.randint(0, 50257, (4,))
    with torch.no_grad():
        la, lb = model(a), model(b)
    assert torch.allclose(la[:, :8], lb[:, :8], atol=1e-6)
    assert not torch.allclose(la[:, 8:], lb[:, 8:], atol=1e-3)


class _LayerCache:
    def __init__(self):
        self.k = self.v = None

    def update(self, k, v):
        self.k = k if self.k is None else torch.cat([self.k, k], dim=-2)
        self.v = v if self.v is None else torch.cat([self.v, v], dim=-2)
        return self.k, self.v


class _Cache:
    """The smallest object with chapter 9's KVCache interface: .layers[i].update and .length."""

    def __init__(self, n_layer):
        self.layers = [_LayerCache() for _ in range(n_layer)]

    @property
    def length(self):
        return 0 if self.layers[0].k is None else self.layers[0].k.size(-2)


def test_cache_contract_gives_the_same_logits():
    torch.manual_seed(0)
    model = GPT2(GPT2Config(n_layer=3, n_head=4, n_embd=64, n_ctx=32)).eval()
    idx = torch.randint(0, 50257, (2, 10))
    cache = _Cache(3)
    with torch.no_grad():
        full = model(idx)
        pieces = [model(idx[:, :6], cache=cache)]  # a prompt, then one token at a time
        pieces += [model(idx[:, t : t + 1], cache=cache) for t in range(6, 10)]
    assert cache.length == 10
    assert torch.allclose(torch.cat(pieces, dim=1), full, atol=1e-5)
    with pytest.raises(ValueError, match="n_ctx"):
        model(torch.zeros(1, 23, dtype=torch.long), cache=cache)  # 10 cached + 23 new > 32


def test_attention_maps_equal_transformers_attentions(tmp_path):
    hf, ours = both(tmp_path, n_layer=3, n_head=5, n_embd=80, n_ctx=64)
    idx = torch.randint(0, 50257, (1, 9), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        expected = torch.stack(hf(idx, output_attentions=True).attentions)[:, 0]
    maps = attention_maps(ours, idx[0])
    assert maps.shape == (3, 5, 9, 9)
    assert (maps - expected).abs().max() < 1e-5
    assert torch.allclose(maps.sum(-1), torch.ones(3, 5, 9))
    assert torch.equal(attention_maps(ours, idx), maps)
    assert all(not block.attn._forward_pre_hooks for block in ours.h)  # hooks removed
    with pytest.raises(ValueError, match="one sequence"):
        attention_maps(ours, idx.repeat(2, 1))


def test_split_and_merge_heads():
    x = torch.randn(2, 5, 12)
    heads = split_heads(x, 3)
    assert heads.shape == (2, 3, 5, 4)
    assert torch.equal(heads[:, 1], x[..., 4:8])  # head 1 holds channels 4..7
    assert torch.equal(merge_heads(heads), x)


def test_attention_layer_equals_transformers():
    torch.manual_seed(0)
    config = GPT2Config(n_layer=1, n_head=4, n_embd=32, n_ctx=16)
    ours = CausalSelfAttention(config)
    hf_config = transformers.GPT2Config(n_embd=32, n_head=4, n_positions=16, attn_pdrop=0.0, resid_pdrop=0.0,
                                        attn_implementation="eager")
    hf = transformers.models.gpt2.modeling_gpt2.GPT2Attention(hf_config).eval()
    with torch.no_grad():
        for name in ("c_attn", "c_proj"):
            getattr(ours, name).weight.normal_(0, 0.3)
            getattr(ours, name).bias.normal_(0, 0.3)
            getattr(hf, name).weight.copy_(getattr(ours, name).weight.T)  # Conv1D stores [in, out]
            getattr(hf, name).bias.copy_(getattr(ours, name).bias)
    x = torch.randn(2, 7, 32)
    with torch.no_grad():
        assert (ours(x) - hf(x)[0]).abs().max() < 1e-5


def test_gelu_tanh_and_mlp():
    x = torch.linspace(-6, 6, 1001)
    assert torch.allclose(gelu_tanh(x), F.gelu(x, approximate="tanh"), atol=1e-6)
    assert (gelu_tanh(x) - F.gelu(x)).abs().max() > 1e-4  # not the exact GELU
    mlp = MLP(GPT2Config(n_embd=16, n_head=4))
    assert mlp.c_fc.weight.shape == (64, 16) and mlp.c_proj.weight.shape == (16, 64)
    assert mlp(torch.randn(3, 5, 16)).shape == (3, 5, 16)


@pytest.fixture(scope="module")
def small_model():
    torch.manual_seed(0)
    return GPT2(GPT2Config(n_layer=1, n_head=2, n_embd=16, n_ctx=8)).eval()


def test_sequence_longer_than_n_ctx(small_model):
    with pytest.raises(ValueError, match=r"n_ctx = 8"):
        small_model(torch.zeros(1, 9, dtype=torch.long))
    assert small_model(torch.zeros(1, 8, dtype=torch.long)).shape == (1, 8, 50257)


@pytest.mark.parametrize("bad", [50257, 99999, -1])
def test_token_id_out_of_range(small_model, bad):
    with pytest.raises(ValueError, match=rf"token id {bad} is out of range.*0\.\.50256"):
        small_model(torch.tensor([[1, bad, 2]]))


def test_empty_sequence(small_model):
    with pytest.raises(ValueError, match="empty"):
        small_model(torch.zeros(2, 0, dtype=torch.long))


def test_wrong_kind_of_input(small_model):
    with pytest.raises(TypeError, match="token ids"):
        small_model(torch.zeros(1, 3))
    with pytest.raises(TypeError, match="token ids"):
        small_model([[1, 2, 3]])
    with pytest.raises(ValueError, match=r"\[batch, time\]"):
        small_model(torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="targets"):
        small_model(torch.tensor([[1, 2, 3]]), targets=torch.tensor([[2, 3]]))


def test_logits_from_selects_positions_and_their_targets(small_model):
    idx = torch.randint(0, 50257, (2, 8), generator=torch.Generator().manual_seed(5))
    targets = torch.randint(0, 50257, (2, 8), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        full = small_model(idx)
        for start in (0, 3, -1, -8):
            part = small_model(idx, logits_from=start)
            assert part.shape == (2, 8 - start % 8, 50257)
            assert torch.allclose(part, full[:, start:], atol=1e-5)
        _, loss = small_model(idx, targets=targets, logits_from=5)
        expected = F.cross_entropy(full[:, 5:].flatten(0, 1), targets[:, 5:].flatten())
    assert abs(loss.item() - expected.item()) < 1e-5
    for bad in (8, -9, 1.5):
        with pytest.raises(ValueError, match=r"logits_from must be an index into the 8 positions, -8\.\.7"):
            small_model(idx, logits_from=bad)


def test_load_model_stores_the_decode_layout_and_the_file_values(tmp_path):
    hf, ours = both(tmp_path, n_layer=2, n_head=4, n_embd=64, n_ctx=32)
    state = {k.removeprefix("transformer."): v for k, v in hf.state_dict().items()}
    for name, p in ours.named_parameters():
        conv1d = name.startswith("h.") and name.endswith("weight") and ".c_" in name  # stored [in, out]
        assert torch.equal(p, state[name].T if conv1d else state[name]), name
        by_columns = p.dim() == 2 and p.size(0) >= p.size(1) and name != "wpe.weight"
        assert p.t().is_contiguous() if by_columns else p.is_contiguous(), name
