"""Encode throughput on the 38 plays: chapter 2's GPT2Tokenizer, Hugging Face's pure-Python
("slow") GPT2Tokenizer and tiktoken, all built from the same local GPT-2 vocabulary files.

Usage: python benchmarks/bpe.py [--repeat N] [--json PATH]

Each tokenizer is built fresh (empty caches) and encodes every play once ("cold"), then again
("warm", caches full); with --repeat N the best of N such runs is kept. Throughput is measured in
CPU time of this process (time.process_time), which other processes on a shared machine do not
inflate as they inflate wall-clock time; the wall-clock figure is printed alongside (on an idle
machine the two agree). The script exits with an
error if the three tokenizers do not produce identical ids. Goal: ours >= 1.0x the pure-Python peer.
With --json the results are also written to PATH; chapter 2 prints its table from
benchmarks/results/bpe.json, so the page shows a measurement, not typed numbers.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable

import tiktoken
import transformers
from _record import cli_config, code_now, write_record
from transformers import GPT2Tokenizer as HFSlowGPT2Tokenizer
from transformers.utils import logging as hf_logging

from gpt2_course.bpe import GPT2Tokenizer
from gpt2_course.data import gpt2_vocab_files, list_plays, load_play, tiktoken_gpt2


def make_ours() -> Callable[[str], list[int]]:
    return GPT2Tokenizer.from_gpt2().encode


def make_hf_slow() -> Callable[[str], list[int]]:
    hf_logging.set_verbosity_error()  # silence "sequence longer than 1024 tokens"
    files = gpt2_vocab_files()
    tok = HFSlowGPT2Tokenizer(vocab_file=str(files["encoder.json"]), merges_file=str(files["vocab.bpe"]))
    return tok.encode


def make_tiktoken() -> Callable[[str], list[int]]:
    tiktoken_gpt2.cache_clear()  # a fresh Encoding, like the others
    return tiktoken_gpt2().encode_ordinary


def run(make: Callable[[], Callable[[str], list[int]]], texts: list[str]) -> tuple[float, float, float, list]:
    """CPU seconds of a cold and a warm pass over texts, wall seconds of the cold one, and its ids."""
    encode = make()
    cpu, wall = time.process_time(), time.perf_counter()
    ids = [encode(t) for t in texts]
    cold, cold_wall = time.process_time() - cpu, time.perf_counter() - wall
    cpu = time.process_time()
    for t in texts:
        encode(t)
    return cold, time.process_time() - cpu, cold_wall, ids


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=1, help="keep the best of N runs (default 1)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    started = code_now(__file__, cli_config(args))

    texts = [load_play(name) for name in list_plays()]
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    contenders = {
        "ours (gpt2_course.GPT2Tokenizer)": make_ours,
        f"transformers {transformers.__version__} slow GPT2Tokenizer": make_hf_slow,
        f"tiktoken {tiktoken.__version__}": make_tiktoken,
    }
    print(f"{len(texts)} plays, {mb:.2f} MB of UTF-8; Python {platform.python_version()}, "
          f"{os.cpu_count()} CPUs; best of {args.repeat}")
    results, reference = {}, None
    for name, make in contenders.items():
        best_cold = best_warm = best_wall = float("inf")
        for _ in range(args.repeat):
            cold, warm, wall, ids = run(make, texts)
            best_cold, best_warm, best_wall = min(best_cold, cold), min(best_warm, warm), min(best_wall, wall)
        if reference is None:
            reference = ids
        elif ids != reference:
            sys.exit(f"FAIL: {name} produced different ids from ours")
        results[name] = (mb / best_cold, mb / best_warm, mb / best_wall)
    print("identical ids from all three on every play")

    peer = results[next(n for n in results if "slow" in n)]
    print(f"\n{'encode throughput, CPU time':44}{'cold MB/s':>10}{'x peer':>8}{'warm MB/s':>11}{'x peer':>8}"
          f"{'cold wall MB/s':>16}")
    for name, (cold, warm, wall) in results.items():
        print(f"{name:44}{cold:10.2f}{cold / peer[0]:8.2f}{warm:11.2f}{warm / peer[1]:8.2f}{wall:16.2f}")
    ours = results[next(iter(results))]
    verdict = "met" if ours[0] >= peer[0] and ours[1] >= peer[1] else "NOT met"
    print(f"\ngoal ours >= 1.0x the pure-Python peer (cold and warm): {verdict}")
    if args.json:
        record = {
            "command": "python benchmarks/bpe.py " + " ".join(sys.argv[1:]),
            "python": platform.python_version(), "cpus": os.cpu_count(), "repeat": args.repeat,
            "megabytes": round(mb, 3), "plays": len(texts),
            "mb_per_s": {name: {"cold": round(c, 3), "warm": round(w, 3), "cold_wall": round(wl, 3)}
                         for name, (c, w, wl) in results.items()},
        }
        write_record(args.json, record, __file__, cli_config(args), started)


if __name__ == "__main__":
    main()
