"""GPT2Config (chapter 3): the released sizes, the pocket model's sizes, and clear errors."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import transformers

from gpt2_course.config import GPT2Config

NAMES = ["gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "pocket"]

# Parameter counts of the released checkpoints (head tied to wte), as published on the
# Hugging Face hub model cards / safetensors metadata.
PUBLISHED_PARAMETERS = {
    "gpt2": 124_439_808,
    "gpt2-medium": 354_823_168,
    "gpt2-large": 774_030_080,
    "gpt2-xl": 1_557_611_200,
}


def test_defaults_match_transformers_gpt2() -> None:
    ref = transformers.GPT2Config()
    ours = GPT2Config()
    assert (ours.vocab_size, ours.n_ctx, ours.n_embd, ours.n_layer, ours.n_head) == (
        ref.vocab_size, ref.n_positions, ref.n_embd, ref.n_layer, ref.n_head
    )
    assert ours.layer_norm_epsilon == ref.layer_norm_epsilon
    assert GPT2Config.from_name("gpt2") == ours


@pytest.mark.parametrize("name", sorted(PUBLISHED_PARAMETERS))
def test_released_sizes_give_the_published_parameter_count(name: str) -> None:
    """Build Hugging Face's GPT-2 with our sizes (on the meta device: no memory) and count."""
    c = GPT2Config.from_name(name)
    ref_config = transformers.GPT2Config(
        vocab_size=c.vocab_size, n_positions=c.n_ctx, n_embd=c.n_embd, n_layer=c.n_layer, n_head=c.n_head
    )
    with torch.device("meta"):
        ref = transformers.GPT2LMHeadModel(ref_config)
    assert sum(p.numel() for p in ref.parameters()) == PUBLISHED_PARAMETERS[name]
    assert c.n_ctx == 1024 and c.vocab_size == 50257
    assert c.head_dim == 64  # every released GPT-2 uses 64-channel heads


def test_pocket_matches_the_shipped_checkpoint() -> None:
    import gpt2_course

    shipped = json.loads((Path(gpt2_course.__file__).parent / "pocket" / "config.json").read_text())
    c = GPT2Config.from_name("pocket")
    keys = ["vocab_size", "n_positions", "n_embd", "n_layer", "n_head"]
    assert (c.vocab_size, c.n_ctx, c.n_embd, c.n_layer, c.n_head) == tuple(shipped[k] for k in keys)
    assert (c.n_layer, c.n_head, c.n_embd, c.n_ctx) == (6, 6, 192, 256)


def test_from_name_returns_fresh_objects() -> None:
    a = GPT2Config.from_name("pocket")
    a.n_layer = 2
    assert GPT2Config.from_name("pocket").n_layer == 6


def test_unknown_name_lists_the_known_names() -> None:
    with pytest.raises(ValueError, match="gpt2-small") as info:
        GPT2Config.from_name("gpt2-small")
    _, _, listed = str(info.value).partition("Known names:")
    assert {n.strip(" .") for n in listed.split(",")} == set(NAMES)


@pytest.mark.parametrize(("n_embd", "n_head"), [(768, 10), (100, 3), (192, 7)])
def test_n_embd_must_divide_into_heads(n_embd: int, n_head: int) -> None:
    with pytest.raises(ValueError, match="divisible by n_head"):
        GPT2Config(n_embd=n_embd, n_head=n_head)


@pytest.mark.parametrize("n_ctx", [0, -1, -1024])
def test_n_ctx_must_be_positive(n_ctx: int) -> None:
    with pytest.raises(ValueError, match="n_ctx"):
        GPT2Config(n_ctx=n_ctx)


@pytest.mark.parametrize("field", ["vocab_size", "n_embd", "n_layer", "n_head"])
def test_other_sizes_must_be_positive(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        GPT2Config(**{field: 0})


def test_valid_custom_config() -> None:
    c = GPT2Config(vocab_size=10, n_ctx=8, n_embd=12, n_layer=1, n_head=3)
    assert c.head_dim == 4
