"""benchmarks/generate_steps.py runs appendix A2's own loop functions, read from the notebook."""
from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import torch

from gpt2_course.config import GPT2Config
from gpt2_course.fast import decode_layout_
from gpt2_course.generate import KVCache, generate
from gpt2_course.model import GPT2

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "generate_steps.py"


def load_script():
    spec = importlib.util.spec_from_file_location("generate_steps", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_chapter_loops_are_found_and_agree_with_generate():
    loops = load_script().chapter_loops()
    torch.manual_seed(0)
    model = GPT2(GPT2Config(n_ctx=32, n_embd=32, n_layer=2, n_head=2)).eval()
    fast = decode_layout_(copy.deepcopy(model))
    prompt = torch.randint(0, 50257, (1, 5), generator=torch.Generator().manual_seed(1))
    expected = generate(model, prompt, 6, temperature=0)
    runs = [
        loops["loop_no_cache"](model, prompt, 6),
        loops["loop_cache"](model, prompt, 6, KVCache(2)),
        loops["loop_step"](model, prompt, 6, fused=False, checks=True),
        loops["loop_step"](fast, prompt, 6, fused=True, checks=False, gelu=True),
    ]
    assert all(torch.equal(run, expected) for run in runs)
