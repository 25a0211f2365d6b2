"""Training throughput of the pocket recipe: our GPT-2 eager and compiled against Hugging Face's
GPT2LMHeadModel, same sizes, same batch, bf16 autocast on the CPU (or a GPU when present).

Usage: python benchmarks/train_step.py [--steps N] [--batch-size B] [--repeats R]

Each variant is a full training step as appendix A1 runs it: forward with loss, backward, gradient
clipping, AdamW. Variants start from the same random weights; each one first runs warm-up steps
(for the compiled one these include compiling), then R rounds of N timed steps, interleaved so a
busy machine slows every variant alike; the best round counts. The first three losses are printed:
the eager models must agree to a few decimals (same maths, different kernels). Goal: ours eager
within 10% of transformers, compiled faster.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from transformers import GPT2LMHeadModel
from transformers.utils import logging as hf_logging

from gpt2_course.loading import save_model
from gpt2_course.model import GPT2
from gpt2_course.train import TrainConfig, _optimizer, optimizer_step

Step = Callable[[torch.Tensor, torch.Tensor], float]


def make_step(model: torch.nn.Module, forward: Callable, c: TrainConfig) -> Step:
    """One training step of `model` through `forward(x, y) -> loss`: train()'s own optimizer_step."""
    opt = _optimizer(model, c)
    return lambda x, y: optimizer_step(forward, x, y, model, opt, c.grad_clip)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=4, help="timed steps per round")
    p.add_argument("--batch-size", type=int, default=TrainConfig.batch_size)
    p.add_argument("--repeats", type=int, default=3, help="rounds; each variant's best round counts")
    args = p.parse_args()
    c = TrainConfig(batch_size=args.batch_size)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    hf_logging.set_verbosity_error()

    torch.manual_seed(0)
    ours = GPT2(c.model_config()).to(device)
    ours_compiled = GPT2(ours.config).to(device)
    ours_compiled.load_state_dict(ours.state_dict())
    with tempfile.TemporaryDirectory() as tmp:  # the same weights, through chapter 8's Hugging Face layout
        save_model(ours, tmp)
        hf = GPT2LMHeadModel.from_pretrained(tmp, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0).to(device)
    compiled = torch.compile(ours_compiled)
    variants = {
        "transformers (eager)": make_step(
            hf, lambda x, y: F.cross_entropy(hf(x).logits.flatten(0, 1), y.flatten()), c),
        "ours (eager)": make_step(ours, lambda x, y: ours(x, y)[1], c),
        "ours (torch.compile)": make_step(ours_compiled, lambda x, y: compiled(x, y)[1], c),
    }

    gen = torch.Generator().manual_seed(0)
    shape = (c.batch_size, c.n_ctx + 1)
    batches = [torch.randint(0, 50257, shape, generator=gen).to(device) for _ in range(3)]
    print(f"pocket-sized GPT-2 ({sum(q.numel() for q in ours.parameters()):,} parameters), batch "
          f"{c.batch_size} x {c.n_ctx} tokens, bf16 autocast, {device.type}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} thread(s)")
    print(f"{'variant':22s} first losses (warm-up, compile time included)")
    for label, step in variants.items():
        start = time.perf_counter()
        losses = [step(b[:, :-1], b[:, 1:]) for b in batches]
        print(f"{label:22s} {' '.join(f'{v:.3f}' for v in losses)}   ({time.perf_counter() - start:.0f} s)")

    best = {label: float("inf") for label in variants}
    for r in range(args.repeats):
        labels = list(variants)
        for label in labels[r % 3:] + labels[: r % 3]:  # rotate who goes first
            start = time.perf_counter()
            for i in range(args.steps):
                b = batches[i % len(batches)]
                variants[label](b[:, :-1], b[:, 1:])
            best[label] = min(best[label], (time.perf_counter() - start) / args.steps)

    base = "transformers (eager)"
    print(f"\n{'variant':22s} {'s/step':>8s} {'tokens/s':>9s} {'ratio':>7s}")
    for label, t in best.items():
        print(f"{label:22s} {t:8.3f} {c.batch_size * c.n_ctx / t:9.0f} {best[base] / t:6.2f}x")
    print("(ratio: speed relative to transformers; best of", args.repeats, "rounds of", args.steps, "steps)")


if __name__ == "__main__":
    main()
