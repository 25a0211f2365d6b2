"""Stored outputs are made and checked in one numeric environment, with a last-digit tolerance."""
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from execute import execute  # noqa: E402
from last_digit import same_up_to_last_digit  # noqa: E402
from numeric_env import NUMERIC_ENV  # noqa: E402


@pytest.mark.parametrize("a, b", [
    ("1.2693", "1.2692"), ("gelu(-3) = -0.0040", "gelu(-3) = -0.0041"), ("entropy 5.8340", "entropy 5.8339"),
    ("[10.5287, 10.56]", "[10.5286, 10.57]"), ("0.9999", "1.0000"), ("same text", "same text"),
])
def test_one_unit_in_the_last_printed_digit_is_noise(a, b):
    assert same_up_to_last_digit(a, b)


@pytest.mark.parametrize("a, b", [
    ("1.2693", "1.2695"), ("1.269", "1.2690"), ("12 tokens", "13 tokens"), ("1.2693 nats", "1.2693 bits"),
    ("1.5 2.5", "1.5"), ("p = 0.10", "p = 0.11 and more"), ("-0.0040", "0.0040"),
])
def test_anything_else_is_a_difference(a, b):
    assert not same_up_to_last_digit(a, b)


def run_nbval(tmp_path: Path, code: str, stored: str) -> subprocess.CompletedProcess:
    """nbval, with this repository's conftest, on a one-cell notebook whose stored output is `stored`."""
    cell = nbformat.v4.new_code_cell(code, execution_count=1,
                                     outputs=[nbformat.v4.new_output("stream", name="stdout", text=stored)])
    path = tmp_path / "probe.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), path)
    args = ["-p", "conftest", "-p", "no:cacheprovider", "-q", "--nbval", "--nbval-current-env", str(path)]
    return subprocess.run([sys.executable, "-m", "pytest", *args], cwd=ROOT, capture_output=True, text=True)


def test_nbval_forgives_a_last_digit_flip_and_nothing_more(tmp_path):
    assert run_nbval(tmp_path, 'print("loss 1.2692")', "loss 1.2693\n").returncode == 0
    failed = run_nbval(tmp_path, 'print("loss 1.2692")', "loss 1.2695\n")
    assert failed.returncode == 1 and "1.2695" in failed.stdout


def test_notebook_kernels_run_in_the_pinned_environment(tmp_path):
    code = f"import json, os, torch\nprint(json.dumps({{k: os.environ.get(k) for k in {list(NUMERIC_ENV)}}}),"
    code += " torch.get_num_threads())"
    expected = f"{json.dumps(NUMERIC_ENV)} {NUMERIC_ENV['OMP_NUM_THREADS']}\n"
    result = run_nbval(tmp_path, code, expected)
    assert result.returncode == 0, result.stdout[-2000:]


def test_make_execute_records_in_the_same_environment(tmp_path, monkeypatch):
    for key in NUMERIC_ENV:
        monkeypatch.delenv(key, raising=False)
    code = f"import os\nprint([os.environ.get(k) for k in {list(NUMERIC_ENV)}])"
    path = tmp_path / "probe.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)]), path)
    execute(path)
    stored = nbformat.read(path, as_version=4).cells[0].outputs[0].text
    assert stored.strip() == str(list(NUMERIC_ENV.values()))
