"""Appendix A2's versions of the generation loop, one idea at a time, at gpt2 size.

The chapter measures its ladder on the pocket model, whose bytes are mostly the output head; this
runs the chapter's own loop functions (read from the notebook, so nothing is copied) on a
gpt2-sized model with seeded random float32 weights: batch 1, a 32-token prompt, greedy. Each
version's median of interleaved rounds counts; a copy of 256 MiB is timed in every round too, with
the same number of threads, and its median sets the bound (bytes of weights per token).
The versions must produce identical tokens.

Usage: python benchmarks/generate_steps.py [--new-tokens 64] [--rounds 3] [--threads 1]
"""
from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

import torch
import torch.nn.functional as F

from gpt2_course.attention import attention
from gpt2_course.config import GPT2Config
from gpt2_course.fast import decode_layout_, interleaved_medians, weight_bytes_per_token
from gpt2_course.generate import KVCache, generate
from gpt2_course.heads import merge_heads
from gpt2_course.masking import causal_mask
from gpt2_course.model import GPT2

CHAPTER = Path(__file__).resolve().parents[1] / "chapters" / "A2_making_it_fast.ipynb"
LOOPS = ("def loop_no_cache", "def step(")  # the cells that define the chapter's loops


def chapter_loops() -> dict:
    """The namespace of A2's loop cells: loop_no_cache, loop_cache, step, loop_step."""
    cells = json.loads(CHAPTER.read_text())["cells"]
    found = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"
             and any(mark in "".join(c["source"]) for mark in LOOPS)]
    if len(found) != len(LOOPS):
        raise SystemExit(f"{CHAPTER.name}: expected one cell for each of {LOOPS}, found {len(found)}")
    namespace = dict(torch=torch, F=F, attention=attention, causal_mask=causal_mask, merge_heads=merge_heads,
                     KVCache=KVCache)
    for source in found:
        exec(compile(source, str(CHAPTER), "exec"), namespace)
    return namespace


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    loops = chapter_loops()
    config = GPT2Config.from_name("gpt2")
    torch.manual_seed(0)
    model = GPT2(config).eval()
    fast = decode_layout_(copy.deepcopy(model))
    prompt = torch.randint(0, config.vocab_size, (1, 32))
    L, n = config.n_layer, args.new_tokens
    versions = {
        "no cache": lambda: loops["loop_no_cache"](model, prompt, n),
        "KV cache (torch.cat)": lambda: loops["loop_cache"](model, prompt, n, KVCache(L)),
        "preallocated cache": lambda: loops["loop_cache"](model, prompt, n, KVCache(L, max_len=32 + n)),
        "+ fused attention": lambda: loops["loop_step"](model, prompt, n, fused=True, checks=True),
        "+ checks once per call": lambda: loops["loop_step"](model, prompt, n, fused=True, checks=False),
        "+ fused GELU": lambda: loops["loop_step"](model, prompt, n, fused=True, checks=False, gelu=True),
        "+ decode layout": lambda: loops["loop_step"](fast, prompt, n, fused=True, checks=False, gelu=True),
        "package generate": lambda: generate(fast, prompt, n, temperature=0),
    }
    outputs = {name: fn() for name, fn in versions.items()}  # also the warm-up
    same = all(torch.equal(out, outputs["no cache"]) for out in outputs.values())
    src = torch.ones(2**26)  # 256 MiB: one copy per round, timed among the versions
    dst = torch.empty_like(src)
    dst.copy_(src)
    seconds = interleaved_medians({**versions, "copy": lambda: dst.copy_(src)}, rounds=args.rounds)
    bandwidth = 2 * src.nbytes / seconds.pop("copy")  # read and written, counted twice (as copy_bandwidth)
    bound = bandwidth / weight_bytes_per_token(model)
    print(f"gpt2-sized model, random weights (seed 0), batch 1, 32-token prompt, {n} new greedy tokens, "
          f"{args.threads} thread(s), median of {args.rounds} interleaved rounds, torch {torch.__version__}")
    print(f"copy bandwidth {bandwidth / 1e9:.1f} GB/s, bound {bound:.1f} tokens/s "
          "(tokens/s include the prompt's prefill; machine-dependent)")
    print(f"{'version':24s} {'tokens/s':>9s} {'of bound':>9s} {'vs previous':>12s}")
    previous = None
    for name, t in seconds.items():
        rate = n / t
        step = "" if previous is None else f"{rate / previous:.2f}x"
        print(f"{name:24s} {rate:9.1f} {rate / bound:9.0%} {step:>12s}")
        previous = rate
    print(f"identical greedy tokens in all versions: {same}")
    if not same:
        raise SystemExit("the versions produced different tokens")


if __name__ == "__main__":
    main()
