"""Chapter 10: parameter counts by formula, from our module and from transformers' GPT2LMHeadModel."""
from __future__ import annotations

import math

import pytest
import torch
import transformers
from hypothesis import given, settings
from hypothesis import strategies as st

from gpt2_course.config import GPT2Config
from gpt2_course.loading import course_model
from gpt2_course.model import GPT2
from gpt2_course.params import (
    RENAMED_MILLIONS,
    TABLE2_MILLIONS,
    count_parameters,
    format_breakdown,
    gpt1_parameters,
    parameter_breakdown,
    with_gpt1_vocabulary,
)

# The published sizes of OpenAI's checkpoints (tied head), as transformers counts them.
RELEASED = {
    "gpt2": 124_439_808, "gpt2-medium": 354_823_168, "gpt2-large": 774_030_080, "gpt2-xl": 1_557_611_200,
}


def hf_config(c: GPT2Config, **kw) -> transformers.GPT2Config:
    return transformers.GPT2Config(vocab_size=c.vocab_size, n_positions=c.n_ctx, n_embd=c.n_embd,
                                   n_layer=c.n_layer, n_head=c.n_head, **kw)


@pytest.mark.parametrize("name", list(RELEASED))
def test_formula_equals_meta_modules_equals_published(name):
    config = GPT2Config.from_name(name)
    with torch.device("meta"):
        ours, theirs = GPT2(config), transformers.GPT2LMHeadModel(hf_config(config))
    assert count_parameters(config) == count_parameters(ours) == count_parameters(theirs) == RELEASED[name]
    assert ours.wte.weight.device.type == "meta"  # nothing was allocated


def test_untied_head():
    config = GPT2Config.from_name("gpt2")
    with torch.device("meta"):
        untied = transformers.GPT2LMHeadModel(hf_config(config, tie_word_embeddings=False))
    head = config.vocab_size * config.n_embd
    assert count_parameters(untied) == count_parameters(config) + head == 163_037_184


def test_tied_weights_count_once():
    config = GPT2Config.from_name("gpt2")
    with torch.device("meta"):
        hf = transformers.GPT2LMHeadModel(hf_config(config))
    assert hf.lm_head.weight is hf.transformer.wte.weight
    assert sum(t.numel() for t in hf.state_dict().values()) == 163_037_184  # the naive sum counts it twice
    assert count_parameters(hf) == 124_439_808


@settings(max_examples=40, deadline=None)
@given(
    vocab=st.integers(1, 300), n_ctx=st.integers(1, 64), n_head=st.integers(1, 6),
    head_dim=st.integers(1, 12), n_layer=st.integers(1, 5),
)
def test_formula_matches_module_for_any_shape(vocab, n_ctx, n_head, head_dim, n_layer):
    config = GPT2Config(vocab_size=vocab, n_ctx=n_ctx, n_embd=n_head * head_dim, n_layer=n_layer,
                        n_head=n_head)
    with torch.device("meta"):
        model = GPT2(config)
    assert count_parameters(config) == count_parameters(model)
    C = config.n_embd
    assert count_parameters(config) == (vocab + n_ctx) * C + n_layer * (12 * C * C + 13 * C) + 2 * C


def test_breakdown_rows_cover_every_parameter_once():
    config = GPT2Config(vocab_size=11, n_ctx=5, n_embd=12, n_layer=3, n_head=3)
    params = dict(GPT2(config).named_parameters())
    covered = []
    for row in parameter_breakdown(config):
        blocks = range(row.copies) if row.name.startswith("h.*.") else [None]
        assert row.copies == (config.n_layer if row.name.startswith("h.*.") else 1)
        for i in blocks:
            name = row.name.replace("*", str(i))
            assert tuple(params[f"{name}.weight"].shape) == row.weight
            assert (params[f"{name}.bias"].numel() if f"{name}.bias" in params else 0) == row.bias
            covered += [f"{name}.weight"] + ([f"{name}.bias"] if row.bias else [])
    assert sorted(covered) == sorted(params)
    assert sum(row.total for row in parameter_breakdown(config)) == count_parameters(config)


def test_pocket_model():
    config = GPT2Config.from_name("pocket")
    assert count_parameters(course_model()) == count_parameters(config)
    C = 192
    assert count_parameters(config) == (50257 + 256) * C + 6 * (12 * C * C + 13 * C) + 2 * C


def test_format_breakdown():
    config = GPT2Config.from_name("gpt2-xl")
    text = format_breakdown(config)
    for row in parameter_breakdown(config):
        assert row.name in text and f"{row.total:,}" in text
    assert "1,557,611,200" in text
    assert f"{1_557_611_200 + 50257 * 1600:,}" in text  # untied
    assert f"{1_557_611_200 * 4 / 1e6:,.1f} MB" in text and f"{1_557_611_200 * 2 / 1e6:,.1f} MB" in text
    for dtype in ("float32", "float16", "bfloat16"):
        assert dtype in text


def test_wrong_argument_says_what_to_pass():
    with pytest.raises(TypeError, match=r"GPT2Config.from_name\('gpt2'\)"):
        count_parameters("gpt2")


def test_gpt1_count_from_its_released_shapes():
    # openai/finetune-transformer-lm, model/params_shapes.json: positions, tokens, then 12 blocks of
    # c_attn w, b, c_proj w, b, ln_1 g, b, c_fc w, b, c_proj w, b, ln_2 g, b; nothing after the blocks
    block = [(1, 768, 2304), (2304,), (1, 768, 768), (768,), (768,), (768,), (1, 768, 3072), (3072,),
             (1, 3072, 768), (768,), (768,), (768,)]
    shapes = [(512, 768), (40478, 768)] + 12 * block
    assert gpt1_parameters() == sum(math.prod(s) for s in shapes) == 116_534_784


def test_gpt1_vocabulary_gives_table2_and_512_positions_does_not():
    for name, millions in TABLE2_MILLIONS.items():
        config = GPT2Config.from_name(name)
        assert round(with_gpt1_vocabulary(config) / 1e6) == millions
        assert round(count_parameters(config) / 1e6) == RENAMED_MILLIONS[name]
    assert round(with_gpt1_vocabulary(GPT2Config.from_name("gpt2-medium"), n_ctx=512) / 1e6) == 344
