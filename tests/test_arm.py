"""Other CPUs: the numeric environment per architecture, and the comparison the ARM record was made with."""
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "arm"))
import compare_outputs  # noqa: E402
from numeric_env import EVERYWHERE, X86_CAPS, for_machine  # noqa: E402


@pytest.mark.parametrize("machine", ["x86_64", "AMD64"])
def test_x86_keeps_the_avx2_caps(machine):
    env = for_machine(machine)
    assert env["ATEN_CPU_CAPABILITY"] == "avx2" and env["MKL_CBWR"] == "AVX2,STRICT"
    assert env == {**X86_CAPS, **EVERYWHERE}


@pytest.mark.parametrize("machine", ["aarch64", "arm64"])
def test_arm_is_held_to_neon_and_gets_no_x86_names(machine):
    """An x86 value of ATEN_CPU_CAPABILITY made PyTorch print a warning into an ARM run's first cell."""
    env = for_machine(machine)
    assert env == {"ATEN_CPU_CAPABILITY": "default", **EVERYWHERE}


def test_other_machines_only_fix_threads_and_hashing():
    assert for_machine("riscv64") == EVERYWHERE


def notebook(path: Path, *outputs: str, stderr: str = "", tags: tuple[str, ...] = ()) -> Path:
    cells = []
    for text in outputs:
        cell = nbformat.v4.new_code_cell("print(x)", metadata={"tags": list(tags)})
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
        if stderr:
            cell.outputs.append(nbformat.v4.new_output("stream", name="stderr", text=stderr))
        cells.append(cell)
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    return path


def test_the_comparison_sorts_cells_as_nbval_with_the_last_digit_tolerance(tmp_path, capsys):
    stored = notebook(tmp_path / "a.ipynb", "loss 1.2693\n", "12 tokens 0.50\n", "p 0.1000\n", "took 3 ms\n")
    other = notebook(tmp_path / "b.ipynb", "loss 1.2692\n", "13 tokens 0.50\n", "p 0.1000\n", "took 9 ms\n")
    assert compare_outputs.compare(stored, other) == (4, 2, 1, 1)  # the timing is sanitized away
    printed = capsys.readouterr().out
    assert "cell 0 (last-digit)" in printed and "<- 1 unit(s) of the last digit" in printed
    assert "cell 1 (FAILS)" in printed


def test_a_new_stderr_output_fails_and_ignored_cells_are_not_compared(tmp_path):
    stored = notebook(tmp_path / "a.ipynb", "x\n")
    warned = notebook(tmp_path / "b.ipynb", "x\n", stderr="UserWarning: ignoring invalid value\n")
    assert compare_outputs.compare(stored, warned) == (1, 0, 0, 1)
    ignored = notebook(tmp_path / "c.ipynb", "x\n", tags=("nbval-ignore-output",))
    assert compare_outputs.compare(ignored, notebook(tmp_path / "d.ipynb", "y\n"))[0] == 0


def test_the_emulator_setup_script_parses():
    done = subprocess.run(["bash", "-n", str(ROOT / "tools" / "arm" / "setup_emulated.sh")],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
