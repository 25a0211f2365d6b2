"""Generation speed: our GPT-2 with and without the KV cache, against transformers' `generate`.

Batch 1, float32, a gpt2-sized model (GPT2Config.from_name("gpt2")) with seeded random weights,
a 32-token prompt, 128 new greedy tokens. The weights are written once with `save_model` (Hugging
Face layout); each variant loads them in its own worker process, so the peak resident memory it
reports (ru_maxrss) is its own. The three variants must produce identical tokens.

The workers take turns, one generation each per round, so that a machine whose load changes
(a shared one) slows every variant alike; each variant's best round counts. Besides wall-clock
tokens/s the table gives tokens per CPU-second of the worker, which other processes on the
machine barely disturb (with one thread it is the compute rate; with more, CPU time sums the threads).

Also prints the memory-bandwidth bound: a batch-1 step reads every weight once (the output head
reads all of wte; the position table only one row), so tokens/s cannot exceed
bandwidth / bytes of weights per token, with the bandwidth measured on 1 GiB (a copy, and a
matrix-vector product). A CPU whose last-level cache holds much of the model can beat that bound.

Usage: python benchmarks/generate.py [--prompt-tokens 32] [--new-tokens 128] [--repeats 5]
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


def worker(variant: str, weights: Path, prompt: list[int], new_tokens: int) -> None:
    """Load the weights, warm up, then answer each line on stdin with one timed generation (JSON)."""
    idx = torch.tensor([prompt])
    if variant == "transformers":
        from transformers import GPT2LMHeadModel

        model = GPT2LMHeadModel.from_pretrained(weights, dtype=torch.float32).eval()
        model.generation_config.eos_token_id = None  # never stop early: ours does not either
        model.generation_config.pad_token_id = 0

        def run(n: int) -> torch.Tensor:
            with torch.no_grad():
                return model.generate(idx, attention_mask=torch.ones_like(idx), max_new_tokens=n,
                                      do_sample=False, use_cache=True)
    else:
        model = load_model(weights)
        use_cache = variant == "ours-cache"

        def run(n: int) -> torch.Tensor:
            return generate(model, idx, n, temperature=0, use_cache=use_cache)

    run(8)  # warm-up: first calls allocate and pick kernels
    print(json.dumps({"ready": True}), flush=True)
    for _ in sys.stdin:
        wall, cpu = time.perf_counter(), time.process_time()
        out = run(new_tokens)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(json.dumps({
            "tokens": out[0, len(prompt):].tolist(), "wall": wall, "cpu": cpu,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # KiB on Linux
            "threads": torch.get_num_threads(),
        }), flush=True)


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
    p.add_argument("--repeats", type=int, default=5, help="rounds; each variant's best round counts")
    p.add_argument("--worker", choices=list(VARIANTS.values()), help=argparse.SUPPRESS)
    p.add_argument("--weights", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--prompt", type=str, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args.worker, args.weights, json.loads(args.prompt), args.new_tokens)
        return

    config = GPT2Config.from_name("gpt2")
    torch.manual_seed(0)
    prompt = torch.randint(0, config.vocab_size, (args.prompt_tokens,)).tolist()
    print(f"gpt2-sized model ({count_parameters(config):,} parameters, random weights, seed 0), float32, "
          f"batch 1, {args.prompt_tokens}-token prompt, {args.new_tokens} new greedy tokens, "
          f"best of {args.repeats} interleaved rounds")
    rounds: dict[str, list[dict]] = {label: [] for label in VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        save_model(GPT2(config), tmp)
        workers = {}
        for label, variant in VARIANTS.items():  # loaded one after another: their loading peaks stay apart
            cmd = [sys.executable, __file__, "--worker", variant, "--weights", tmp,
                   "--prompt", json.dumps(prompt), "--new-tokens", str(args.new_tokens)]
            workers[label] = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            if not workers[label].stdout.readline():
                sys.exit(f"the {label} worker failed to start (its error is above)")
        for r in range(args.repeats):
            labels = list(VARIANTS)
            for label in labels[r % 3:] + labels[: r % 3]:  # rotate who goes first
                workers[label].stdin.write("run\n")
                workers[label].stdin.flush()
                if not (line := workers[label].stdout.readline()):
                    sys.exit(f"the {label} worker died (its error is above)")
                rounds[label].append(json.loads(line))
        for w in workers.values():
            w.stdin.close()
            w.wait()

    print(f"torch {torch.__version__}, {rounds['ours, KV cache'][0]['threads']} thread(s)")
    wall = {label: min(r["wall"] for r in rs) for label, rs in rounds.items()}
    cpu = {label: min(r["cpu"] for r in rs) for label, rs in rounds.items()}
    base = "transformers generate"
    print(f"{'variant':24s} {'tokens/s':>9s} {'ratio':>7s} {'tokens/CPU-s':>13s} {'ratio':>7s} "
          f"{'peak RSS':>11s}")
    for label, rs in rounds.items():
        print(f"{label:24s} {args.new_tokens / wall[label]:9.1f} {wall[base] / wall[label]:6.2f}x "
              f"{args.new_tokens / cpu[label]:13.1f} {cpu[base] / cpu[label]:6.2f}x "
              f"{rs[-1]['peak_rss_mb']:8.0f} MB")
    print("(ratio: speed relative to transformers generate)")
    same = all(r["tokens"] == rounds[base][0]["tokens"] for rs in rounds.values() for r in rs)
    print("identical tokens in all three (every round):", same)

    copy, read = bandwidth()
    weight_bytes = 4 * (count_parameters(config) - config.n_ctx * config.n_embd)
    cached = args.new_tokens / wall["ours, KV cache"]
    print(f"weights read per token: {weight_bytes / 1e6:.1f} MB "
          "(float32, all but wpe; the head reads all of wte)")
    for what, bw in [("copy (read + write)", copy), ("matvec (read)", read)]:
        print(f"{what:20s} {bw / 1e9:5.1f} GB/s -> bound {bw / weight_bytes:5.1f} tokens/s; "
              f"ours with cache (wall) runs at {cached / (bw / weight_bytes):.0%} of it")
    if not same:
        sys.exit("the variants produced different tokens")


if __name__ == "__main__":
    main()
