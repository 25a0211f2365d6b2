"""The trainer on an NVIDIA GPU: the same run on the GPU as on the CPU, under torchrun with nccl,
and its throughput (issue 33; appendix A1, "When one machine is not enough").

Needs a CUDA machine; the course never does (CI runs tests/test_train_ddp.py on CPU with gloo).

    python benchmarks/train_gpu.py --json benchmarks/results/train_gpu.json

1. Equality: a tiny run (A1's toy shape, 8 steps) in one process on the CPU, in one process on
   the GPU, and under `torchrun --nproc-per-node G` with nccl (G = the GPUs there are) logs the same
   losses (within LOSS_TOL) and ends with the same weights (within WEIGHT_TOL). With one GPU, nccl
   runs one rank (no all-reduce); the script says so and also tries two ranks on the one GPU, which
   NCCL refuses, and records its message.
2. Throughput: the pocket model's configuration and GPT-2 small's (124 M, 1,024-token windows),
   bfloat16 autocast, tokens per second over the last half of the steps (the log's times are
   rounded to 0.1 s, so a span of many steps); GPT-2 small also with torch.compile.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch
from _record import cli_config, code_now, write_record

from gpt2_course.train import TrainConfig, config_flags, train

TINY = TrainConfig(n_layer=2, n_head=2, n_embd=32, n_ctx=32, batch_size=8, steps=8, warmup=1, eval_every=0,
                   ckpt_every=100, cast_shuffles=0, bf16=False, dropout=0.0, dist_timeout=120)
LOSS_TOL, WEIGHT_TOL = 2e-4, 1e-4  # float32 on two devices: the same sums in another order
ROOT = Path(__file__).resolve().parents[1]


def last_stage(out: Path) -> dict:
    return json.loads((out / "model" / "training_log.json").read_text())["stages"][-1]


def run_history(out: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "time"} for r in last_stage(out)["history"]]


def weights(out: Path) -> dict[str, torch.Tensor]:
    return {k: v.float().cpu() for k, v in torch.load(out / "ckpt.pt", weights_only=False,
                                                        map_location="cpu")["model"].items()}


def gap(a: Path, b: Path) -> dict:
    """Largest loss and weight differences between two finished runs."""
    ha, hb = run_history(a), run_history(b)
    assert len(ha) == len(hb) == TINY.steps, (len(ha), len(hb))
    loss = max(abs(ra[k] - rb[k]) for ra, rb in zip(ha, hb) for k in ra.keys() - {"step"})
    wa, wb = weights(a), weights(b)
    return {"loss": loss, "weight": max((wa[n] - wb[n]).abs().max().item() for n in wa)}


def torchrun(nproc: int, c: TrainConfig, log: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
           "-m", "gpt2_course.train", *config_flags(c)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    log.write_text(p.stdout + p.stderr)
    return p


def on(device: str, c: TrainConfig, **kw):
    """train() with the GPU hidden (device='cpu') or visible."""
    if device == "cpu":
        hidden = torch.cuda.is_available
        torch.cuda.is_available = lambda: False
        try:
            return train(c, **kw)
        finally:
            torch.cuda.is_available = hidden
    return train(c, **kw)


def equality(root: Path) -> dict:
    out = {}
    on("cpu", replace(TINY, out_dir=str(root / "cpu")), progress=False)
    on("cuda", replace(TINY, out_dir=str(root / "gpu")), progress=False)
    out["gpu_vs_cpu"] = gap(root / "gpu", root / "cpu")
    gpus = torch.cuda.device_count()
    p = torchrun(gpus, replace(TINY, backend="nccl", out_dir=str(root / "nccl")), root / "nccl.log")
    assert p.returncode == 0, (root / "nccl.log").read_text()[-4000:]
    out[f"nccl_{gpus}_ranks_vs_gpu"] = gap(root / "nccl", root / "gpu")
    out["nccl_first_line"] = p.stdout.splitlines()[0]
    out["torchrun_modules"] = sorted(last_stage(root / "nccl")["fingerprint"]["modules"])  # what ran there
    if gpus == 1:  # two ranks on one GPU: NCCL needs a GPU per rank
        p = torchrun(2, replace(TINY, backend="nccl", out_dir=str(root / "nccl2")), root / "nccl2.log")
        text = (root / "nccl2.log").read_text()
        said = [ln.strip() for ln in text.splitlines() if "Duplicate GPU" in ln or "ncclInvalidUsage" in ln
                or ("NCCL" in ln and "rror" in ln)]
        out["nccl_2_ranks_on_1_gpu"] = {"returncode": p.returncode, "message": (said or [text[-300:]])[0]}
    for name, g in out.items():
        if isinstance(g, dict) and "loss" in g:
            assert g["loss"] <= LOSS_TOL and g["weight"] <= WEIGHT_TOL, (name, g)
    return out


def throughput(root: Path, name: str, c: TrainConfig) -> dict:
    t0 = time.time()
    _, history = on("cuda", replace(c, out_dir=str(root / name)), progress=False)
    wall = time.time() - t0
    times = [r["time"] for r in history]
    half = len(times) // 2
    tokens = c.batch_size * c.n_ctx
    span = times[-1] - times[half]
    knobs = ("n_layer", "n_head", "n_embd", "n_ctx", "batch_size", "steps", "bf16", "compile")
    return {"config": {k: getattr(c, k) for k in knobs},
            "tokens_per_step": tokens, "wall_s": round(wall, 1),
            "tokens_per_s_last_half": round(tokens * (len(times) - 1 - half) / span) if span > 0 else None,
            "final_train_loss": history[-1]["train_loss"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", type=Path)
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    started = code_now(__file__, cli_config(args))
    if not torch.cuda.is_available():
        sys.exit("train_gpu.py needs an NVIDIA GPU with CUDA; this machine has none (CPU runs: "
                 "tests/test_train_ddp.py).")
    record = {"command": "python " + " ".join(sys.argv), "date": time.strftime("%Y-%m-%d"),
              "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0),
              "gpus": torch.cuda.device_count(), "cpu": platform.processor() or platform.machine(),
              "nccl": ".".join(map(str, torch.cuda.nccl.version()))}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        record["equality"] = equality(root)
        torchrun_ran = record["equality"].pop("torchrun_modules")
        print(json.dumps(record["equality"], indent=1), flush=True)
        record["throughput"] = {
            "pocket": throughput(root, "pocket", replace(TrainConfig(), steps=args.steps, eval_every=0,
                                                         ckpt_every=10**6, cast_shuffles=0, batch_size=64)),
            "gpt2_small": throughput(root, "small", replace(
                TrainConfig(), n_layer=12, n_head=12, n_embd=768, n_ctx=1024, batch_size=16, steps=args.steps,
                eval_every=0, ckpt_every=10**6, cast_shuffles=0, dropout=0.0)),
        }
        small = record["throughput"]["gpt2_small"]["config"]
        record["throughput"]["gpt2_small_compiled"] = throughput(root, "small_compiled", replace(
            TrainConfig(), **{**small, "compile": True}, eval_every=0, ckpt_every=10**6, cast_shuffles=0,
            dropout=0.0))
    print(json.dumps(record["throughput"], indent=1))
    if args.json:
        why = ("a CUDA build of torch on a lent GPU machine: the course pins torch for the CPU, so this "
               "record's torch is never this checkout's; its code is checked")
        write_record(args.json, record, __file__, cli_config(args), started, torchrun_ran, torch_exempt=why)


if __name__ == "__main__":
    main()
