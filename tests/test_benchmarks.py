"""The generation benchmarks: what they time agrees, and the claims they check are the right ones."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpt2_course.config import GPT2Config
from gpt2_course.loading import save_model
from gpt2_course.model import GPT2

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_script(name: str):
    if str(BENCHMARKS) not in sys.path:  # where the scripts find _record, as `python benchmarks/x.py` does
        sys.path.append(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_ladder_times_versions_that_agree():
    steps = load_script("generate_steps")
    torch.manual_seed(0)
    model = GPT2(GPT2Config(n_ctx=48, n_embd=32, n_layer=2, n_head=2)).eval()
    result = steps.ladder(model, n_new=6, rounds=2)
    assert result["identical_tokens"]
    assert list(result["seconds"]) == ["no cache", "KV cache (chapter 9)", "+ decode layout",
                                       "+ preallocated cache", "+ fused attention, GELU", "copy"]
    assert all(len(t) == 2 and min(t) > 0 for t in result["seconds"].values())


def test_the_layout_claims_want_the_longer_side_contiguous():
    steps = load_script("generate_steps")
    timed = {"no cache": [8.0, 8.0], "KV cache (chapter 9)": [2.0, 2.0], "+ decode layout": [3.0, 1.0]}
    rates = {"float32": {"tall": {"shape": [8, 2], "rows": [1.0, 1.0], "columns": [2.0, 2.0]},
                         "square": {"shape": [4, 4], "rows": [1.0, 1.0], "columns": [9.0, 9.0]},
                         "wide": {"shape": [2, 8], "rows": [1.0, 1.0], "columns": [2.0, 2.0]}},
             "bfloat16": {"head (wte)": {"shape": [8, 2], "rows": [3.0, 3.0], "columns": [1.0, 1.0]}}}
    found = {c["claim"]: (c["median ratio"], c["holds"]) for c in steps.claims({"seconds": timed}, rates)}
    assert found == {
        "the KV cache is faster than recomputing": (4.0, True),
        "the decode layout is faster than rows": (pytest.approx(4 / 3), True),  # rounds 2/3 and 2: median 4/3
        "float32 tall [8, 2] is read faster by columns": (2.0, True),
        "float32 wide [2, 8] is read faster by rows": (0.5, False),  # the square matrix claims nothing
        "the bf16 head is read faster by rows": (3.0, True),
    }


def test_the_race_compares_each_round_with_transformers_in_the_same_round():
    race = load_script("generate")
    rounds = lambda walls: [{"wall": w, "cpu": w, "bandwidth": 1e9, "peak_rss_mb": 1.0} for w in walls]
    result = {"variants": {race.BASE: {"weight_bytes": 1e8, "rounds": rounds([2.0, 4.0, 2.0])},
                           race.OURS: {"weight_bytes": 1e8, "rounds": rounds([1.0, 4.0, 4.0])}}}
    summary = race.summarize(result, new_tokens=8)
    ours = summary[race.OURS]
    assert ours["vs_transformers"] == 1.0 and ours["vs_transformers_range"] == [0.5, 2.0]  # 2, 1, 0.5
    assert ours["tokens_per_s"] == 2.0 and summary[race.BASE]["tokens_per_s"] == 4.0
    assert ours["vs_transformers_cpu"] == 1.0  # cpu = wall in these rounds
    assert ours["of_bound"] == pytest.approx(0.2)  # 2 tokens/s of a bound of 1e9 / 1e8 = 10


def test_a_generation_worker_reports_the_package_modules_it_ran(tmp_path):
    """generate.py measures in worker processes: their modules go into the record's fingerprint."""
    torch.manual_seed(0)
    save_model(GPT2(GPT2Config(n_ctx=48, n_embd=32, n_layer=2, n_head=2)), tmp_path)
    cmd = [sys.executable, str(BENCHMARKS / "generate.py"), "--worker", "ours", "--weights", str(tmp_path),
           "--threads", "1", "--prompt", "[1, 2, 3]", "--new-tokens", "2"]
    done = subprocess.run(cmd, input="", capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    ready = json.loads(done.stdout.splitlines()[0])
    assert {"gpt2_course.generate", "gpt2_course.loading", "gpt2_course.model"} <= set(ready["modules"])
