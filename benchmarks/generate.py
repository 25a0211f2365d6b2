"""Generation speed against the memory-bandwidth bound, and against transformers' `generate`.

Batch 1, a gpt2-sized model (GPT2Config.from_name("gpt2")) with seeded random float32 weights, a
32-token prompt, 128 new greedy tokens, with 1 and with 2 threads. Variants: the package's `generate`
on the model as `load_model` returns it (appendix A2's decode layout), on the same weights stored by
rows (nn.Linear's own layout), with appendix A2's fast path (`fuse_` and a preallocated cache), in bf16,
with int8 weights in the blocks, and transformers' `generate` in float32. The weights are written once
with `save_model` (Hugging Face layout); each variant loads them in its own worker process, so the peak
resident memory it reports (ru_maxrss) is its own. The float32 variants must produce identical tokens.

The workers take turns, one generation each per round, so that a machine whose load changes (a
shared one) slows every variant alike; each variant's median round counts, and 'vs tf' is the median
over rounds of the ratio to transformers in the same round, with its range across rounds. Besides
wall-clock tokens/s the table gives tokens per CPU-second of the worker, which other processes on the
machine disturb less (with one thread it is the compute rate; with more, CPU time sums the threads),
and its median per-round ratio to transformers'.

The bound: a batch-1 decode step reads every weight once, so tokens/s cannot exceed the copy
bandwidth divided by the bytes of weights read per token. The copy bandwidth is measured with the
same number of threads right before and right after every generation (workers idle), each time as the
rate of PROBE_COPIES copies of 256 MiB (about half a second: a rate over a stretch of time, as tokens/s are,
not the best instant), and each generation is held against the mean of its two probes: on a shared
machine the bandwidth moves from second to second. 'of bound' is the median over rounds of those
shares. A CPU whose last-level cache holds much of the model can beat the bound, and so can a kernel
that only reads (a copy reads and writes): 'of bound' can exceed 100%.

The claim the course makes (the package's `generate` on a loaded model is at least as fast as
transformers', at every thread count measured) is checked at the end on the per-round ratios of CPU
time: on a machine shared with other programs, wall-clock time also measures when the scheduler gave
each worker a core (a run with a load average of 8 to 29 on 2 cores put the same two programs anywhere
from 0.63x to 1.17x apart in wall-clock time, and 1.11x in CPU time). The wall-clock ratio is printed
and recorded beside it. The run exits with status 1 if the claim or the token check fails. --json
records every round with the machine (CPU, capabilities, load average) in
benchmarks/results/generate.json, which appendix A2 prints.

Usage: python benchmarks/generate.py [--prompt-tokens 32] [--new-tokens 128] [--repeats 5] [--threads 1 2]
                                     [--json benchmarks/results/generate.json]
"""
from __future__ import annotations

import argparse
import datetime
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
from _record import cli_config, code_now, modules_that_ran, write_record

from gpt2_course.config import GPT2Config
from gpt2_course.fast import (
    PreallocatedKVCache,
    copy_bandwidth,
    fuse_,
    machine,
    quantize_int8,
    row_layout_,
    to_bf16,
    weight_bytes_per_token,
)
from gpt2_course.generate import generate
from gpt2_course.loading import load_model, save_model
from gpt2_course.model import GPT2

VARIANTS = {
    "ours, float32 as loaded": "ours",
    "transformers, float32": "transformers",
    "ours, float32 by rows": "ours-rows",
    "ours, A2's fast path": "ours-fast",
    "ours, bf16": "ours-bf16",
    "ours, int8 blocks": "ours-int8",
}
BASE, OURS = "transformers, float32", "ours, float32 as loaded"
FLOAT32 = (BASE, OURS, "ours, float32 by rows", "ours, A2's fast path")  # must agree on every token
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
        cache = None
        if variant == "ours-bf16":
            model = to_bf16(model)
        elif variant == "ours-int8":
            model = quantize_int8(model)
        elif variant == "ours-rows":
            row_layout_(model)
        elif variant == "ours-fast":
            fuse_(model)
            cache = lambda n: PreallocatedKVCache(model.config.n_layer, max_len=len(prompt) + n)  # noqa: E731
        nbytes = weight_bytes_per_token(model)

        def run(n: int) -> torch.Tensor:
            return generate(model, idx, n, temperature=0, cache=None if cache is None else cache(n))

    run(8)  # warm-up: first calls allocate and pick kernels
    ready = {"ready": True, "weight_bytes": nbytes, "modules": modules_that_ran()}  # for the record
    print(json.dumps(ready), flush=True)
    for _ in sys.stdin:
        wall, cpu = time.perf_counter(), time.process_time()
        out = run(new_tokens)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(json.dumps({
            "tokens": out[0, len(prompt):].tolist(), "wall": wall, "cpu": cpu,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # KiB on Linux
        }), flush=True)


def measure(threads: int, weights: str, prompt: list[int], args: argparse.Namespace) -> dict:
    """Interleaved rounds of every variant with `threads` threads: per variant its rounds and weight
    bytes, every copy-bandwidth probe taken, the load average before and after, and the package
    modules the workers imported (for the record's fingerprint)."""
    torch.set_num_threads(threads)
    workers, info, bandwidths, ran = {}, {}, [], set()
    load_before = os.getloadavg()[0]
    for label, variant in VARIANTS.items():  # loaded one after another: their loading peaks stay apart
        cmd = [sys.executable, __file__, "--worker", variant, "--weights", weights, "--threads", str(threads),
               "--prompt", json.dumps(prompt), "--new-tokens", str(args.new_tokens)]
        workers[label] = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if not (line := workers[label].stdout.readline()):
            sys.exit(f"the {label} worker failed to start (its error is above)")
        ready = json.loads(line)
        info[label], ran = {"weight_bytes": ready["weight_bytes"], "rounds": []}, ran | set(ready["modules"])
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
    return {"variants": info, "bandwidths": bandwidths, "load_average": [load_before, os.getloadavg()[0]],
            "modules": sorted(ran)}


def summarize(result: dict, new_tokens: int) -> dict:
    """Per variant: median tokens/s, share of the bound, and the per-round ratio to transformers."""
    info = result["variants"]
    base = info[BASE]["rounds"]
    summary = {}
    for label, v in info.items():
        rounds = v["rounds"]
        shares = [new_tokens / r["wall"] / r["bandwidth"] * v["weight_bytes"] for r in rounds]
        vs_tf = [b["wall"] / r["wall"] for r, b in zip(rounds, base, strict=True)]
        vs_tf_cpu = [b["cpu"] / r["cpu"] for r, b in zip(rounds, base, strict=True)]
        summary[label] = {
            "tokens_per_s": statistics.median(new_tokens / r["wall"] for r in rounds),
            "tokens_per_cpu_s": statistics.median(new_tokens / r["cpu"] for r in rounds),
            "of_bound": statistics.median(shares), "of_bound_range": [min(shares), max(shares)],
            "vs_transformers": statistics.median(vs_tf), "vs_transformers_range": [min(vs_tf), max(vs_tf)],
            "vs_transformers_cpu": statistics.median(vs_tf_cpu),
            "weight_mb": v["weight_bytes"] / 1e6, "peak_rss_mb": rounds[-1]["peak_rss_mb"],
        }
    return summary


def report(threads: int, result: dict, summary: dict, new_tokens: int) -> bool:
    """Print one thread setting's table; return whether the float32 variants agree on every token."""
    bandwidths = result["bandwidths"]
    low, high = min(bandwidths) / 1e9, max(bandwidths) / 1e9
    load = result["load_average"]
    print(f"\n{threads} thread(s): copy bandwidth {statistics.median(bandwidths) / 1e9:.1f} GB/s (median of "
          f"{len(bandwidths)} probes, {low:.1f}-{high:.1f}), load average {load[0]:.1f} before, "
          f"{load[1]:.1f} after")
    print(f"{'variant':24s} {'MB/token':>9s} {'tokens/s':>9s} {'of bound':>9s} {'vs tf (range)':>19s} "
          f"{'tok/CPU-s':>10s} {'vs tf':>6s} {'peak RSS':>9s}")
    for label, s in summary.items():
        lo, hi = s["vs_transformers_range"]
        print(f"{label:24s} {s['weight_mb']:9.1f} {s['tokens_per_s']:9.1f} {s['of_bound']:9.0%} "
              f"{s['vs_transformers']:6.2f}x ({lo:.2f}-{hi:.2f}) {s['tokens_per_cpu_s']:10.1f} "
              f"{s['vs_transformers_cpu']:5.2f}x "
              f"{s['peak_rss_mb']:6.0f} MB")
    info = result["variants"]
    reference = info[BASE]["rounds"][0]["tokens"]
    same = all(r["tokens"] == reference for label in FLOAT32 for r in info[label]["rounds"])
    agree = {label: sum(a == b for a, b in zip(v["rounds"][0]["tokens"], reference, strict=True)) / new_tokens
             for label, v in info.items() if label not in FLOAT32}
    print(f"float32 variants: identical tokens in every round: {same}; "
          + ", ".join(f"{label} agrees on {a:.0%} of the tokens" for label, a in agree.items()))
    return same


def summary_record(result: dict) -> dict:
    """What --json keeps of one thread setting besides the summary: every round, without the tokens."""
    rounds = {label: [{k: r[k] for k in ("wall", "cpu", "bandwidth")} for r in v["rounds"]]
              for label, v in result["variants"].items()}
    return {"bandwidths": result["bandwidths"], "load_average": result["load_average"], "rounds": rounds}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prompt-tokens", type=int, default=32)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--repeats", type=int, default=5, help="interleaved rounds; each variant's median counts")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--json", type=Path, help="also record the results (and the machine) in this file")
    p.add_argument("--worker", choices=list(VARIANTS.values()), help=argparse.SUPPRESS)
    p.add_argument("--weights", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--prompt", type=str, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args.worker, args.weights, json.loads(args.prompt), args.new_tokens, args.threads[0])
        return
    settings = cli_config(args, "worker", "weights", "prompt")  # the workers' flags come from these
    started, workers_ran = code_now(__file__, settings), set()

    config = GPT2Config.from_name("gpt2")
    torch.manual_seed(0)
    prompt = torch.randint(0, config.vocab_size, (args.prompt_tokens,)).tolist()
    print(f"gpt2-sized model, random weights (seed 0), batch 1, {args.prompt_tokens}-token prompt, "
          f"{args.new_tokens} new greedy tokens, median of {args.repeats} interleaved rounds")
    print("machine:", machine())
    print("bound: copy bandwidth / weight bytes per token; 'vs tf': speed relative to transformers' generate")
    record = {"command": "python " + " ".join(sys.argv), "date": datetime.date.today().isoformat(),
              "machine": machine(), "prompt_tokens": args.prompt_tokens, "new_tokens": args.new_tokens,
              "repeats": args.repeats, "threads": {}}
    all_same, claims = True, []
    with tempfile.TemporaryDirectory() as tmp:
        save_model(GPT2(config), tmp)
        for threads in args.threads:
            result = measure(threads, tmp, prompt, args)
            workers_ran |= set(result["modules"])
            summary = summarize(result, args.new_tokens)
            all_same &= report(threads, result, summary, args.new_tokens)
            record["threads"][str(threads)] = {**summary_record(result), "summary": summary}
            ratio = summary[OURS]["vs_transformers_cpu"]
            claims.append({"claim": f"{OURS} >= {BASE} in tokens per CPU-second, {threads} thread(s)",
                           "median ratio": ratio, "holds": ratio >= 1.0,
                           "wall-clock median ratio": summary[OURS]["vs_transformers"]})
    record["claims"], record["identical_float32_tokens"] = claims, all_same
    print()
    for c in claims:
        verdict = "holds" if c["holds"] else "FAILS"
        print(f"claim: {c['claim']}: median ratio {c['median ratio']:.2f} (wall clock "
              f"{c['wall-clock median ratio']:.2f}): {verdict}")
    if args.json:
        write_record(args.json, record, __file__, settings, started, also_ran=workers_ran)
        print(f"recorded in {args.json}")
    if not all_same:
        sys.exit("the float32 variants produced different tokens")
    if not all(c["holds"] for c in claims):
        sys.exit("a claim failed (see above)")


if __name__ == "__main__":
    main()
