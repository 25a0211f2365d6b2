"""Generation speed against the memory-bandwidth bound, and against transformers' `generate`.

Batch 1, a gpt2-sized model (GPT2Config.from_name("gpt2")) with seeded random float32 weights, a
32-token prompt, 128 new greedy tokens, with 1 and with 2 threads. Variants: the package's
`generate` (KV cache) in float32 with the decode layout (`decode_layout_`, appendix A2) and as
`load_model` returns it, in bf16, with int8 weights in the blocks, and transformers' `generate` in
float32. The weights are written once with `save_model` (Hugging Face
layout); each variant loads them in its own worker process, so the peak resident memory it reports
(ru_maxrss) is its own. The float32 variants must produce identical tokens.

The workers take turns, one generation each per round, so that a machine whose load changes (a
shared one) slows every variant alike; each variant's median round counts. Besides wall-clock
tokens/s the table gives tokens per CPU-second of the worker, which other processes on the machine
disturb less (with one thread it is the compute rate; with more, CPU time sums the threads).

The bound: a batch-1 decode step reads every weight once, so tokens/s cannot exceed the copy
bandwidth divided by the bytes of weights read per token. The copy bandwidth is measured with the
same number of threads right before and right after every generation (workers idle), each time as the
rate of PROBE_COPIES copies of 256 MiB (about half a second: a rate over a stretch of time, as tokens/s are,
not the best instant), and each generation is held against the mean of its two probes: on a shared
machine the bandwidth moves from second to second. 'of bound' is the median over rounds of those
shares. A CPU whose last-level cache holds much of the model can beat the bound, and so can a kernel
that only reads (a copy reads and writes): 'of bound' can exceed 100%.

Usage: python benchmarks/generate.py [--prompt-tokens 32] [--new-tokens 128] [--repeats 5] [--threads 1 2]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from gpt2_course.config import GPT2Config
from gpt2_course.fast import copy_bandwidth, decode_layout_, quantize_int8, to_bf16, weight_bytes_per_token
from gpt2_course.generate import generate
from gpt2_course.loading import load_model, save_model
from gpt2_course.model import GPT2

VARIANTS = {
    "ours, float32": "ours",
    "ours, float32 as loaded": "ours-row-major",
    "transformers, float32": "transformers",
    "ours, bf16": "ours-bf16",
    "ours, int8 blocks": "ours-int8",
}
BASE, OURS = "transformers, float32", "ours, float32"
FLOAT32 = (BASE, OURS, "ours, float32 as loaded")  # must agree on every token
PROBE_COPIES = 16  # of 256 MiB each: about half a second per probe


def worker(variant: str, weights: Path, prompt: list[int], new_tokens: int, threads: int) -> None:
    """Load the weights, warm up, then answer each line on stdin with one timed generation (JSON)."""
    torch.set_num_threads(threads)
    idx = torch.tensor([prompt])
    if variant == "transformers":
        from transformers import GPT2LMHeadModel

        model = GPT2LMHeadModel.from_pretrained(weights, dtype=torch.float32).eval()
        model.generation_config.eos_token_id = None  # never stop early: ours does not either
        model.generation_config.pad_token_id = 0
        nbytes = 4 * (sum(p.numel() for p in model.parameters()) - model.transformer.wpe.weight.numel())

        def run(n: int) -> torch.Tensor:
            with torch.no_grad():
                return model.generate(idx, attention_mask=torch.ones_like(idx), max_new_tokens=n,
                                      do_sample=False, use_cache=True)
    else:
        model = load_model(weights)
        if variant == "ours-bf16":
            model = to_bf16(model)  # decode_layout_ would leave its bf16 matrices alone
        elif variant == "ours-int8":
            model = decode_layout_(quantize_int8(model))  # the layout reaches the float32 head only
        elif variant == "ours":
            decode_layout_(model)
        nbytes = weight_bytes_per_token(model)

        def run(n: int) -> torch.Tensor:
            return generate(model, idx, n, temperature=0)

    run(8)  # warm-up: first calls allocate and pick kernels
    print(json.dumps({"ready": True, "weight_bytes": nbytes}), flush=True)
    for _ in sys.stdin:
        wall, cpu = time.perf_counter(), time.process_time()
        out = run(new_tokens)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(json.dumps({
            "tokens": out[0, len(prompt):].tolist(), "wall": wall, "cpu": cpu,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # KiB on Linux
        }), flush=True)


def measure(threads: int, weights: str, prompt: list[int],
            args: argparse.Namespace) -> tuple[dict[str, dict], list[float]]:
    """Interleaved rounds of every variant with `threads` threads: per variant its rounds and weight
    bytes, and every copy-bandwidth probe taken."""
    torch.set_num_threads(threads)
    workers, info, bandwidths = {}, {}, []
    for label, variant in VARIANTS.items():  # loaded one after another: their loading peaks stay apart
        cmd = [sys.executable, __file__, "--worker", variant, "--weights", weights, "--threads", str(threads),
               "--prompt", json.dumps(prompt), "--new-tokens", str(args.new_tokens)]
        workers[label] = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if not (line := workers[label].stdout.readline()):
            sys.exit(f"the {label} worker failed to start (its error is above)")
        info[label] = {"weight_bytes": json.loads(line)["weight_bytes"], "rounds": []}
    for r in range(args.repeats):
        labels = list(VARIANTS)
        for label in labels[r % len(labels):] + labels[: r % len(labels)]:  # rotate who goes first
            before = copy_bandwidth(repeats=PROBE_COPIES)  # every worker idle: the probe has the machine
            workers[label].stdin.write("run\n")
            workers[label].stdin.flush()
            if not (line := workers[label].stdout.readline()):
                sys.exit(f"the {label} worker died (its error is above)")
            after = copy_bandwidth(repeats=PROBE_COPIES)
            info[label]["rounds"].append({**json.loads(line), "bandwidth": (before + after) / 2})
            bandwidths += [before, after]
    for w in workers.values():
        w.stdin.close()
        w.wait()
    return info, bandwidths


def report(threads: int, info: dict[str, dict], bandwidths: list[float], new_tokens: int) -> bool:
    """Print one thread setting's table; return whether the float32 variants agree on every token."""
    bandwidth = statistics.median(bandwidths)
    low, high = min(bandwidths) / 1e9, max(bandwidths) / 1e9
    print(f"\n{threads} thread(s): copy bandwidth {bandwidth / 1e9:.1f} GB/s (median of {len(bandwidths)} "
          f"probes, {low:.1f}-{high:.1f}), load average {os.getloadavg()[0]:.1f}")
    print(f"{'variant':24s} {'MB/token':>9s} {'bound':>7s} {'tokens/s':>9s} {'of bound':>9s} {'of fp32':>8s} "
          f"{'vs tf':>7s} {'tok/CPU-s':>10s} {'vs tf':>7s} {'peak RSS':>9s}")
    wall = {label: statistics.median(r["wall"] for r in v["rounds"]) for label, v in info.items()}
    cpu = {label: statistics.median(r["cpu"] for r in v["rounds"]) for label, v in info.items()}
    spread = {}
    for label, v in info.items():
        rate = new_tokens / wall[label]
        # each round's tokens/s per byte/s of the bandwidth its own probes measured; times the bytes
        # read per token, that is its share of the bound
        per_byte = statistics.median(new_tokens / r["wall"] / r["bandwidth"] for r in v["rounds"])
        shares = [new_tokens / r["wall"] / r["bandwidth"] * v["weight_bytes"] for r in v["rounds"]]
        spread[label] = f"{min(shares):.0%}-{max(shares):.0%}"
        print(f"{label:24s} {v['weight_bytes'] / 1e6:9.1f} {bandwidth / v['weight_bytes']:7.1f} {rate:9.1f} "
              f"{per_byte * v['weight_bytes']:9.0%} {per_byte * info[OURS]['weight_bytes']:8.0%} "
              f"{wall[BASE] / wall[label]:6.2f}x {new_tokens / cpu[label]:10.1f} "
              f"{cpu[BASE] / cpu[label]:6.2f}x {v['rounds'][-1]['peak_rss_mb']:6.0f} MB")
    print(f"'of bound' in single rounds: {spread[OURS]} for {OURS}, {spread[BASE]} for {BASE}")
    reference = info[BASE]["rounds"][0]["tokens"]
    same = all(r["tokens"] == reference for label in FLOAT32 for r in info[label]["rounds"])
    agree = {label: sum(a == b for a, b in zip(v["rounds"][0]["tokens"], reference, strict=True)) / new_tokens
             for label, v in info.items() if label not in FLOAT32}
    print(f"float32 variants (ours in both layouts, transformers): identical tokens in every round: {same}; "
          + ", ".join(f"{label} agrees on {a:.0%} of the tokens" for label, a in agree.items()))
    return same


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prompt-tokens", type=int, default=32)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--repeats", type=int, default=5, help="interleaved rounds; each variant's median counts")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--worker", choices=list(VARIANTS.values()), help=argparse.SUPPRESS)
    p.add_argument("--weights", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--prompt", type=str, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args.worker, args.weights, json.loads(args.prompt), args.new_tokens, args.threads[0])
        return

    config = GPT2Config.from_name("gpt2")
    torch.manual_seed(0)
    prompt = torch.randint(0, config.vocab_size, (args.prompt_tokens,)).tolist()
    print(f"gpt2-sized model, random weights (seed 0), batch 1, {args.prompt_tokens}-token prompt, "
          f"{args.new_tokens} new greedy tokens, median of {args.repeats} interleaved rounds, "
          f"torch {torch.__version__}")
    print("bound: copy bandwidth / weight bytes per token; 'of fp32': share of the float32 bound; "
          "'vs tf': speed relative to transformers generate")
    all_same = True
    with tempfile.TemporaryDirectory() as tmp:
        save_model(GPT2(config), tmp)
        for threads in args.threads:
            all_same &= report(threads, *measure(threads, tmp, prompt, args), args.new_tokens)
    if not all_same:
        sys.exit("the float32 variants produced different tokens")


if __name__ == "__main__":
    main()
