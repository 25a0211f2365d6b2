"""Generation speed: our GPT-2 with and without the KV cache, against transformers' `generate`.

Batch 1, float32, a gpt2-sized model (GPT2Config.from_name("gpt2")) with seeded random weights,
a 32-token prompt, 128 new greedy tokens. The weights are written once with `save_model` (Hugging
Face layout) and every variant loads them in its own subprocess, so the peak resident memory each
reports (ru_maxrss) is its own. The three variants must produce identical tokens.

Also prints the memory-bandwidth bound: a batch-1 step reads every weight once (the output head
reads all of wte; the position table only one row), so tokens/s cannot exceed
bandwidth / bytes of weights per token, with the bandwidth measured on 1 GiB (a copy, and a
matrix-vector product). A CPU whose last-level cache holds much of the model can beat that bound.

Usage: python benchmarks/generate.py [--prompt-tokens 32] [--new-tokens 128] [--repeats 3]
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from gpt2_course.config import GPT2Config
from gpt2_course.generate import generate
from gpt2_course.loading import load_model, save_model
from gpt2_course.model import GPT2
from gpt2_course.params import count_parameters

VARIANTS = {
    "ours, KV cache": "ours-cache",
    "ours, no cache": "ours-nocache",
    "transformers generate": "transformers",
}


def run_variant(variant: str, weights: Path, prompt: list[int], new_tokens: int, repeats: int) -> dict:
    """Load the weights, generate `repeats` times after one warm-up, report the best time."""
    idx = torch.tensor([prompt])
    if variant == "transformers":
        from transformers import GPT2LMHeadModel

        model = GPT2LMHeadModel.from_pretrained(weights, torch_dtype=torch.float32).eval()
        model.generation_config.eos_token_id = None  # never stop early: ours does not either
        model.generation_config.pad_token_id = 0

        def run(n: int) -> torch.Tensor:
            with torch.no_grad():
                return model.generate(idx, attention_mask=torch.ones_like(idx), max_new_tokens=n,
                                      do_sample=False, use_cache=True)
    else:
        model = load_model(weights).float().eval()
        use_cache = variant == "ours-cache"

        def run(n: int) -> torch.Tensor:
            return generate(model, idx, n, temperature=0, use_cache=use_cache)

    run(8)  # warm-up: first calls allocate and pick kernels
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = run(new_tokens)
        times.append(time.perf_counter() - start)
    return {
        "tokens": out[0, len(prompt):].tolist(),
        "seconds": min(times),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # KiB on Linux
        "threads": torch.get_num_threads(),
    }


def bandwidth(nbytes: int = 2**30, repeats: int = 5) -> tuple[float, float]:
    """Bytes per second (copy: read + write; matvec: read) over nbytes, far more than the caches hold.

    A copy is the usual yardstick; a matrix-vector product is what a batch-1 step is made of.
    """
    src = torch.ones(nbytes // 4 // 4096, 4096)
    dst, x = torch.empty_like(src), torch.ones(4096)

    def best(fn) -> float:
        fn()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return min(times)

    return 2 * nbytes / best(lambda: dst.copy_(src)), nbytes / best(lambda: torch.mv(src, x))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prompt-tokens", type=int, default=32)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--child", choices=list(VARIANTS.values()), help=argparse.SUPPRESS)
    p.add_argument("--weights", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--prompt", type=str, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        result = run_variant(args.child, args.weights, json.loads(args.prompt), args.new_tokens, args.repeats)
        print(json.dumps(result))
        return

    config = GPT2Config.from_name("gpt2")
    torch.manual_seed(0)
    prompt = torch.randint(0, config.vocab_size, (args.prompt_tokens,)).tolist()
    print(f"gpt2-sized model ({count_parameters(config):,} parameters, random weights, seed 0), float32, "
          f"batch 1, {args.prompt_tokens}-token prompt, {args.new_tokens} new greedy tokens, "
          f"best of {args.repeats}")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        save_model(GPT2(config), tmp)
        for label, variant in VARIANTS.items():
            cmd = [sys.executable, __file__, "--child", variant, "--weights", tmp,
                   "--prompt", json.dumps(prompt), "--new-tokens", str(args.new_tokens),
                   "--repeats", str(args.repeats)]
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode:
                sys.exit(f"{label} failed:\n{out.stderr}")
            results[label] = json.loads(out.stdout.strip().splitlines()[-1])

    print(f"torch {torch.__version__}, {results['ours, KV cache']['threads']} threads")
    base = results["transformers generate"]
    print(f"{'variant':24s} {'tokens/s':>9s} {'vs transformers':>16s} {'peak RSS':>11s}")
    for label, r in results.items():
        rate = args.new_tokens / r["seconds"]
        ratio = base["seconds"] / r["seconds"]
        print(f"{label:24s} {rate:9.1f} {ratio:15.2f}x {r['peak_rss_mb']:8.0f} MB")
    same = all(r["tokens"] == base["tokens"] for r in results.values())
    print("identical tokens in all three:", same)

    copy, read = bandwidth()
    weight_bytes = 4 * (count_parameters(config) - config.n_ctx * config.n_embd)
    cached = args.new_tokens / results["ours, KV cache"]["seconds"]
    print(f"weights read per token: {weight_bytes / 1e6:.1f} MB "
          "(float32, all but wpe; the head reads all of wte)")
    for what, bw in [("copy (read + write)", copy), ("matvec (read)", read)]:
        print(f"{what:20s} {bw / 1e9:5.1f} GB/s -> bound {bw / weight_bytes:5.1f} tokens/s; "
              f"ours with cache runs at {cached / (bw / weight_bytes):.0%} of it")
    if not same:
        sys.exit("the variants produced different tokens")


if __name__ == "__main__":
    main()
