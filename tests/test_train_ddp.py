"""Data-parallel training (appendix A1, "When one machine is not enough"): two processes under
torchrun, on CPU with gloo, compute what one process computes, and checkpoints move between them.

The module's fixture runs the single-process runs here, then two torchrun launches side by side:
`gpt2-course train --nproc 2` (which runs `torchrun ... -m gpt2_course.train`), and this file
itself as a torchrun script (`worker`), for the runs that call `train` several times in one
process group: gradient accumulation, an interrupted run resumed, checkpoints changing hands.
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import pytest
import torch

from gpt2_course import cli
from gpt2_course.data import token_ids
from gpt2_course.train import (
    TrainConfig,
    check_split,
    config_flags,
    get_batch,
    process_group,
    resolve_backend,
    train,
)

train_module = sys.modules["gpt2_course.train"]  # the module: `gpt2_course.train` is its function train
PACKAGE_ROOT = Path(train_module.__file__).parents[1]

TINY = TrainConfig(n_layer=1, n_head=2, n_embd=16, n_ctx=32, batch_size=4, steps=4, warmup=1, eval_every=2,
                   ckpt_every=100, cast_shuffles=0, bf16=False, dropout=0.0,  # dropout: see A1
                   dist_timeout=60)  # a process whose partner died fails in a minute, not half an hour
CLI_RUN = replace(TINY, eval_every=0)  # the command line cannot shorten the validation split
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}  # two processes share two cores
LIMIT = 180  # seconds for both launches together (they take about 20 on 2 idle cores), then they are stopped
LOSS_TOL, WEIGHT_TOL = 2e-4, 1e-5  # losses are logged to 4 decimals; float32 sums in another order


def short_validation(split: str):
    """The first 257 validation tokens (8 windows of TINY's), so that evaluating takes no time."""
    return token_ids(split)[:257] if split == "validation" else token_ids(split)


def quick(patch: pytest.MonkeyPatch) -> None:
    """Make `train` cheap to call many times: a short validation split, the training tokens built once."""
    patch.setattr(train_module, "token_ids", short_validation)
    patch.setattr(train_module, "training_tokens", functools.cache(train_module.training_tokens))


def worker(root: Path) -> None:
    """Under torchrun, in every process: the two-process runs that the tests below compare."""
    import torch.distributed as dist

    quick(pytest.MonkeyPatch())
    with process_group(replace(TINY, backend="gloo")):
        train(replace(TINY, out_dir=str(root / "ddp")), progress=False)
        train(replace(TINY, out_dir=str(root / "ddp_accum"), grad_accum=2), progress=False)
        train(replace(TINY, out_dir=str(root / "ddp_cut")), progress=False, until=2)  # "interrupted"
        if dist.get_rank() == 0:  # the same checkpoint, for a single process to continue
            shutil.copytree(root / "ddp_cut", root / "two_then_one")
        dist.barrier()
        train(replace(TINY, out_dir=str(root / "ddp_cut")), progress=False)  # resumed on two processes
        train(replace(TINY, out_dir=str(root / "one_then_two")), progress=False)  # a one-process checkpoint


def history(out_dir: Path) -> list[dict]:
    """A finished run's log, without its wall-clock times."""
    stages = json.loads((out_dir / "model" / "training_log.json").read_text())["stages"]
    return [{k: v for k, v in r.items() if k != "time"} for r in stages[-1]["history"]]


def weights(out_dir: Path) -> dict[str, torch.Tensor]:
    """A run's last float32 weights (its checkpoint; the saved model is float16)."""
    return torch.load(out_dir / "ckpt.pt", weights_only=False)["model"]


def assert_same_run(a: Path, b: Path, exact: bool = False) -> None:
    """Runs a and b logged the same losses and ended with the same weights (to float rounding)."""
    ha, hb = history(a), history(b)
    assert [r.keys() for r in ha] == [r.keys() for r in hb] and len(ha) == TINY.steps
    if exact:
        assert ha == hb
    for ra, rb in zip(ha, hb):
        for key in ra.keys() - {"step"}:
            assert abs(ra[key] - rb[key]) <= LOSS_TOL, (a.name, b.name, ra, rb)
    wa, wb = weights(a), weights(b)
    for name, p in wa.items():
        assert torch.equal(p, wb[name]) if exact else (p - wb[name]).abs().max() < WEIGHT_TOL, name


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ddp")
    with pytest.MonkeyPatch.context() as patch:
        quick(patch)
        train(replace(TINY, out_dir=str(root / "one_then_two")), progress=False, until=2)  # worker: 2 more
        launched = launch_both(root)
        for name, c in {"one": TINY, "one_accum": replace(TINY, grad_accum=4), "one_cli": CLI_RUN}.items():
            train(replace(c, out_dir=str(root / name)), progress=False)  # while the two launches run
        wait_for(launched, root)
        assert torch.load(root / "two_then_one" / "ckpt.pt", weights_only=False)["step"] == 2  # worker's cut
        train(replace(TINY, out_dir=str(root / "two_then_one")), progress=False)  # 2 processes, then 1
    return root


def launch_both(root: Path) -> dict[str, subprocess.Popen]:
    """Start both torchrun launches, side by side: most of their time is starting Python and torch."""
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    commands = {
        "cli": [sys.executable, "-m", "gpt2_course.cli", "train", "--nproc", "2",
                *config_flags(replace(CLI_RUN, out_dir=str(root / "ddp_cli")))],
        "worker": [*torchrun, __file__, str(root)],
    }
    env = {**os.environ, **ONE_THREAD,  # the package under test, whatever the environment's install points to
           "PYTHONPATH": os.pathsep.join([str(PACKAGE_ROOT), os.environ.get("PYTHONPATH", "")])}
    launched = {}
    for name, cmd in commands.items():
        with open(root / f"{name}.out", "w") as out, open(root / f"{name}.err", "w") as err:
            launched[name] = subprocess.Popen(cmd, env=env, stdout=out, stderr=err,
                                              start_new_session=True)  # a process group of its own, to stop
    return launched


def wait_for(launched: dict[str, subprocess.Popen], root: Path) -> None:
    """Both launches end, successfully, within LIMIT seconds; else they are stopped and the test fails."""
    deadline = time.monotonic() + LIMIT
    try:
        for p in launched.values():
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        for p in launched.values():
            stop(p)
        pytest.fail(f"the torchrun launches did not finish in {LIMIT} s; stopped them:\n" + "\n".join(
            f"{name}: {(root / f'{name}.err').read_text()[-2000:]}" for name in launched))
    for name, p in launched.items():
        assert p.returncode == 0, f"{p.args}\n{(root / f'{name}.err').read_text()[-4000:]}"


def stop(p: subprocess.Popen) -> None:
    """End a launch: SIGTERM to its process group (torchrun then stops its ranks, which run in
    sessions of their own), SIGKILL if it is still there 10 s later. A rank that outlives its
    torchrun fails at its next exchange, within TINY.dist_timeout."""
    if p.poll() is not None:
        return
    os.killpg(p.pid, signal.SIGTERM)
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=10)


def test_two_processes_log_and_weights_equal_one_process(runs):
    """`gpt2-course train --nproc 2` (torchrun -m gpt2_course.train) against the same run in one process."""
    assert_same_run(runs / "one_cli", runs / "ddp_cli")
    printed = (runs / "cli.out").read_text().splitlines()
    assert printed[0] == "2 processes (gloo), 4 windows per step: 2 per process in 1 micro-batch(es)"
    assert len(printed) == 3, printed  # rank 0 alone prints: the split, the last record, the weights' folder


def test_the_validation_loss_is_rank_0s_logged_by_every_process(runs):
    assert_same_run(runs / "one", runs / "ddp")  # the worker's run, which evaluates every 2 steps
    assert [r.get("val_loss") is not None for r in history(runs / "ddp")] == [False, True, False, True]


def test_gradient_accumulation_is_the_same_step(runs):
    assert_same_run(runs / "one", runs / "one_accum")  # 4 micro-batches of one window, one process
    assert_same_run(runs / "one", runs / "ddp_accum")  # 2 processes x 2 micro-batches


def test_an_interrupted_two_process_run_resumes_exactly(runs):
    assert_same_run(runs / "ddp_cut", runs / "ddp", exact=True)  # same processes, same bits


def test_checkpoints_move_between_numbers_of_processes(runs):
    assert_same_run(runs / "two_then_one", runs / "one")  # 2 processes, then 1 (the fixture)
    assert_same_run(runs / "one_then_two", runs / "one")  # 1 process, then 2 (the worker)
    state = torch.load(runs / "two_then_one" / "ckpt.pt", weights_only=False)
    assert state["config"] == asdict(replace(TINY, out_dir=str(runs / "two_then_one")))


def test_the_processes_windows_are_the_single_process_batch_cut_in_order():
    data = torch.arange(1000)
    whole, _ = get_batch(data, 6, 8, torch.Generator().manual_seed(0))
    shares = [get_batch(data, 6, 8, torch.Generator().manual_seed(0), rank, 3)[0] for rank in range(3)]
    assert [len(s) for s in shares] == [2, 2, 2] and torch.equal(torch.cat(shares), whole)


@pytest.mark.parametrize("batch, world, accum, message", [
    (2, 4, 1, "4 processes but only 2 windows per step"),
    (4, 3, 1, "does not split evenly into 3 process(es)"),
    (4, 2, 4, "use a multiple of 8"),
    (4, 1, 0, "grad_accum must be positive"),
])
def test_an_uneven_split_is_refused(batch, world, accum, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_split(replace(TINY, batch_size=batch, grad_accum=accum), world)


@pytest.mark.parametrize("args, message", [
    (["--nproc", "8", "--batch-size", "4"], "8 processes but only 4 windows per step"),
    (["--nproc", "3", "--batch-size", "4"], "use a multiple of 3"),
    (["--nproc", "2", "--backend", "nccl"], "nccl needs NVIDIA GPUs"),
    (["--nproc", "2", "--backend", "mpi"], "not available in this PyTorch build"),
])
def test_train_nproc_refuses_bad_input_before_starting_torchrun(args, message, monkeypatch, capsys, tmp_path):
    if "nccl" in args and torch.cuda.is_available():
        pytest.skip("this machine has a GPU: nccl is a valid backend here")
    started = []
    monkeypatch.setattr(train_module.subprocess, "run", lambda *a, **k: started.append(a))
    with pytest.raises(SystemExit) as exit_:
        cli.main(["train", *args, "--out-dir", str(tmp_path / "run")])
    assert exit_.value.code == 2 and not started
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_missing_torch_distributed_is_named(monkeypatch):
    monkeypatch.setattr(train_module.dist, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="no torch.distributed"):
        resolve_backend("gloo")


def test_under_torchrun_a_bad_split_fails_before_joining(monkeypatch):
    """The check runs before init_process_group, which would wait for the other processes."""
    monkeypatch.setenv("WORLD_SIZE", "3")
    joined = []
    monkeypatch.setattr(train_module.dist, "init_process_group", lambda *a, **k: joined.append(a))
    with pytest.raises(ValueError, match="3 process"):
        with process_group(TINY):
            pass
    assert not joined


def test_more_processes_than_gpus_is_refused_before_joining(monkeypatch):
    """On one GPU, torchrun's second process would fail deep in CUDA ("invalid device ordinal"), or
    NCCL would refuse two processes on one device; say what to change instead (seen on an H100)."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(train_module.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(train_module.torch.cuda, "device_count", lambda: 1)
    joined = []
    monkeypatch.setattr(train_module.dist, "init_process_group", lambda *a, **k: joined.append(a))
    with pytest.raises(ValueError, match="process 1 on a machine with 1 GPU.*--nproc-per-node 1 or fewer"):
        with process_group(replace(TINY, backend="gloo")):
            pass
    assert not joined


def test_nproc_starts_torchrun_on_this_module_with_the_same_flags(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(train_module.subprocess, "run", lambda cmd, **k: seen.append(cmd) or
                        subprocess.CompletedProcess(cmd, 0))
    c = replace(TINY, out_dir=str(tmp_path))
    with pytest.raises(SystemExit) as exit_:
        train_module.main(["--nproc", "2", *config_flags(c)])
    assert exit_.value.code == 0
    cmd = seen[0]
    assert cmd[1:6] == ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m"]
    assert cmd[6] == "gpt2_course.train" and train_module.parse_config(cmd[7:]) == c


def test_until_stops_with_a_checkpoint_that_the_same_command_continues(monkeypatch, tmp_path, capsys):
    quick(monkeypatch)
    flags = config_flags(replace(CLI_RUN, out_dir=str(tmp_path / "cut")))
    train_module.main([*flags, "--until", "2"])
    assert "stopped after step 2 of 4" in capsys.readouterr().out
    assert not (tmp_path / "cut" / "model").exists()  # no weights before the last step
    train_module.main(flags)
    train(replace(CLI_RUN, out_dir=str(tmp_path / "straight")), progress=False)
    assert_same_run(tmp_path / "cut", tmp_path / "straight", exact=True)


@pytest.mark.parametrize("until", [0, 5])
def test_until_outside_the_run_is_refused(until, tmp_path):
    with pytest.raises(ValueError, match=r"--until .*: give a step from 1 to --steps \(4\)"):
        train_module.main([*config_flags(replace(CLI_RUN, out_dir=str(tmp_path))), "--until", str(until)])


def test_nproc_passes_until_and_time_allreduce_on_to_torchrun(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(train_module.subprocess, "run", lambda cmd, **k: seen.append(cmd) or
                        subprocess.CompletedProcess(cmd, 0))
    for extra in (["--until", "3"], ["--time-allreduce"]):
        with pytest.raises(SystemExit):
            train_module.main(["--nproc", "2", *config_flags(replace(TINY, out_dir=str(tmp_path))), *extra])
        assert seen[-1][-len(extra):] == extra


if __name__ == "__main__":  # run by torchrun, from the fixture `runs`
    worker(Path(sys.argv[1]))
