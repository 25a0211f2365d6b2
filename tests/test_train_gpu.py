"""benchmarks/train_gpu.py: the GPU record it left, and its refusal on a machine without a GPU."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "train_gpu.py"
RECORD = json.loads((ROOT / "benchmarks" / "results" / "train_gpu.json").read_text())


def test_the_recorded_gpu_runs_equal_the_cpu_run_and_each_other():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        from train_gpu import LOSS_TOL, WEIGHT_TOL
    finally:
        sys.path.pop(0)
    runs = {k: v for k, v in RECORD["equality"].items() if isinstance(v, dict) and "loss" in v}
    assert {"gpu_vs_cpu", f"nccl_{RECORD['gpus']}_ranks_vs_gpu"} <= runs.keys()
    for name, gap in runs.items():
        assert gap["loss"] <= LOSS_TOL and gap["weight"] <= WEIGHT_TOL, name


def test_the_record_names_its_machine_and_every_throughput_is_a_rate():
    assert RECORD["gpu"] and RECORD["torch"] and RECORD["date"]
    for name, t in RECORD["throughput"].items():
        c = t["config"]
        assert t["tokens_per_s_last_half"] > 0 and t["tokens_per_step"] == c["batch_size"] * c["n_ctx"], name


@pytest.mark.skipif(torch.cuda.is_available(), reason="this checks the message on machines without a GPU")
def test_without_a_gpu_it_says_so_and_where_the_cpu_runs_are():
    p = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "needs an NVIDIA GPU" in p.stderr and "test_train_ddp.py" in p.stderr
