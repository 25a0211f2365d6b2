"""Appendix A2's ideas one at a time at gpt2 size, and the matrix-vector rates behind its decode layout.

A gpt2-sized model (GPT2Config.from_name("gpt2")) with seeded random float32 weights, batch 1, a
32-token prompt, greedy decoding.

1. The ladder: the versions of `gpt2_course.fast.versions`, the package's `generate` with one more of
   the appendix's ideas each (no cache; chapter 9's KV cache; the decode layout `load_model` applies;
   a preallocated cache; fused attention and GELU), timed in interleaved rounds together with a copy
   of 256 MiB whose rate sets the bandwidth bound. The versions must produce identical tokens.
2. The layouts: `gpt2_course.fast.matvec_rates` of gpt2's four block matrices (twelve of each, one per
   layer) and of its output head, by rows and by columns, in float32, and of the head in bfloat16.

Times are CPU seconds of this thread (time.thread_time), which other processes on a shared machine
disturb less than wall-clock time (memory contention still counts). Each number is the median of the
rounds; the range across rounds is printed beside it. The claims appendix A2 makes about these
numbers are checked at the end, and the run exits with status 1 if one fails. --json records every
round with the machine (CPU, capabilities, load average); appendix A2 prints
benchmarks/results/generate_steps.json.

Usage: python benchmarks/generate_steps.py [--new-tokens 64] [--rounds 5] [--threads 1] [--json PATH]
"""
from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import time
from pathlib import Path

import torch
from _record import cli_config, code_now, write_record

from gpt2_course.config import GPT2Config
from gpt2_course.fast import (
    decode_layout_,
    interleaved_times,
    machine,
    matvec_rates,
    versions,
    weight_bytes_per_token,
)
from gpt2_course.model import GPT2


def block_shapes(config: GPT2Config) -> dict[str, tuple[int, int]]:
    """[out, in] of a block's four matrices and of the output head."""
    C = config.n_embd
    return {"c_attn": (3 * C, C), "attn.c_proj": (C, C), "mlp.c_fc": (4 * C, C), "mlp.c_proj": (C, 4 * C),
            "head (wte)": (config.vocab_size, C)}


def ladder(model: GPT2, n_new: int, rounds: int) -> dict:
    """Seconds per round of every version and of a 256 MiB copy, and whether the tokens agree."""
    prompt = torch.randint(0, model.config.vocab_size, (1, 32), generator=torch.Generator().manual_seed(0))
    fns = versions(model, prompt, n_new)
    outputs = {name: fn() for name, fn in fns.items()}  # also the warm-up
    same = all(torch.equal(out, outputs["no cache"]) for out in outputs.values())
    src = torch.ones(2**26)  # 256 MiB: one copy per round, timed among the versions
    dst = torch.empty_like(src)
    dst.copy_(src)
    seconds = interleaved_times({**fns, "copy": lambda: dst.copy_(src)}, rounds, clock=time.thread_time)
    return {"seconds": seconds, "copy_bytes": 2 * src.nbytes, "identical_tokens": same}


def layouts(config: GPT2Config, rounds: int) -> dict:
    """GB/s per round of each matrix in both layouts: float32 blocks and head, and the bf16 head."""
    shapes = block_shapes(config)
    head = {"head (wte)": shapes.pop("head (wte)")}
    rates = {"float32": {**matvec_rates(shapes, copies=config.n_layer, rounds=rounds),
                         **matvec_rates(head, copies=1, rounds=rounds)},
             "bfloat16": matvec_rates(head, copies=1, rounds=rounds, dtype=torch.bfloat16)}
    return {dtype: {name: {"shape": list((shapes | head)[name]), **r} for name, r in by_name.items()}
            for dtype, by_name in rates.items()}


def claims(steps: dict, rates: dict) -> list[dict]:
    """The appendix's statements about these numbers, each with its median ratio over rounds."""
    s = steps["seconds"]

    def faster(slow: list[float], fast: list[float]) -> float:  # median over rounds of slow / fast time
        return statistics.median(a / b for a, b in zip(slow, fast, strict=True))

    def wider(r: dict[str, list[float]], first: str, second: str) -> float:  # median of rate ratios
        return statistics.median(a / b for a, b in zip(r[first], r[second], strict=True))

    found = [
        ("the KV cache is faster than recomputing", faster(s["no cache"], s["KV cache (chapter 9)"])),
        ("the decode layout is faster than rows", faster(s["KV cache (chapter 9)"], s["+ decode layout"])),
    ]
    for name, r in rates["float32"].items():
        out, inp = r["shape"]
        if out != inp:  # an oblong matrix: stored with its longer side contiguous, it is read faster
            first, second = ("columns", "rows") if out > inp else ("rows", "columns")
            found.append((f"float32 {name} {[out, inp]} is read faster by {first}", wider(r, first, second)))
    bf16_head = rates["bfloat16"]["head (wte)"]
    found.append(("the bf16 head is read faster by rows", wider(bf16_head, "rows", "columns")))
    return [{"claim": text, "median ratio": ratio, "holds": ratio > 1} for text, ratio in found]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", type=Path, help="also record the results (and the machine) in this file")
    args = p.parse_args()
    started = code_now(__file__, cli_config(args))
    torch.set_num_threads(args.threads)
    config = GPT2Config.from_name("gpt2")
    torch.manual_seed(0)
    model = decode_layout_(GPT2(config).eval())  # as load_model would return it
    steps = ladder(model, args.new_tokens, args.rounds)
    rates = layouts(config, args.rounds)
    weight_bytes = weight_bytes_per_token(model)
    copy_seconds = steps["seconds"].pop("copy")
    bandwidth = statistics.median(steps["copy_bytes"] / t for t in copy_seconds)
    bound = bandwidth / weight_bytes
    m = machine()
    print(f"gpt2-sized model, random weights (seed 0), batch 1, 32-token prompt, {args.new_tokens} new "
          f"greedy tokens, {args.threads} thread(s), median of {args.rounds} interleaved rounds "
          "(range in brackets)")
    print("machine:", m)
    print(f"copy bandwidth {bandwidth / 1e9:.1f} GB/s, bound {bound:.1f} tokens/s "
          "(tokens/s include the prefill)")
    print(f"{'version':26s} {'tokens/s':>20s} {'of bound':>9s}")
    for name, t in steps["seconds"].items():
        rate = args.new_tokens / statistics.median(t)
        print(f"{name:26s} {rate:7.1f} ({args.new_tokens / max(t):5.1f}-{args.new_tokens / min(t):5.1f}) "
              f"{rate / bound:9.0%}")
    print(f"identical greedy tokens in all versions: {steps['identical_tokens']}")
    print(f"\n{'matrix [out, in], GB/s':30s} {'by rows':>20s} {'by columns':>20s}")
    for dtype, by_name in rates.items():
        for name, r in by_name.items():
            cells = [f"{statistics.median(r[k]):6.1f} ({min(r[k]):5.1f}-{max(r[k]):5.1f})"
                     for k in ("rows", "columns")]
            print(f"{dtype + ' ' + name + ' ' + str(r['shape']):30s} {cells[0]:>20s} {cells[1]:>20s}")
    found = claims(steps, rates)
    print()
    for c in found:
        verdict = "holds" if c["holds"] else "FAILS"
        print(f"claim: {c['claim']}: median ratio {c['median ratio']:.2f}: {verdict}")
    if args.json:
        record = {"command": "python " + " ".join(sys.argv), "date": datetime.date.today().isoformat(),
                  "machine": m, "threads": args.threads, "rounds": args.rounds, "new_tokens": args.new_tokens,
                  "weight_bytes": weight_bytes, "bandwidth": bandwidth, "copy_seconds": copy_seconds,
                  "versions": steps["seconds"], "identical_tokens": steps["identical_tokens"],
                  "matvec_gbs": rates, "claims": found}
        write_record(args.json, record, __file__, cli_config(args), started)
        print(f"recorded in {args.json}")
    if not steps["identical_tokens"]:
        sys.exit("the versions produced different tokens")
    if not all(c["holds"] for c in found):
        sys.exit("a claim failed (see above)")


if __name__ == "__main__":
    main()
