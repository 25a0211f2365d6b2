"""The `gpt2-course` command line: it works, and bad input gets one clear line, not a traceback."""
import subprocess
import sys

import pytest

from gpt2_course.cli import main


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpt2_course.cli", *args], capture_output=True, text=True, timeout=300
    )


def test_generate_streams_a_seeded_continuation():
    first = cli("generate", "--max-new-tokens", "12", "--top-k", "40", "--seed", "3", "ROMEO:")
    second = cli("generate", "--max-new-tokens", "12", "--top-k", "40", "--seed", "3", "ROMEO:")
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("ROMEO:") and len(first.stdout) > len("ROMEO:\n")
    assert first.stdout == second.stdout


def test_params_prints_the_breakdown():
    result = cli("params", "gpt2-xl")
    assert result.returncode == 0, result.stderr
    assert "1,557,611,200" in result.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["generate", "--temperature", "-1", "x"], "temperature must be >= 0"),
        (["generate", "--top-k", "0", "x"], "top_k"),
        (["generate", "--top-p", "1.5", "x"], "top_p"),
        (["generate", "--max-new-tokens", "300", "x"], "n_ctx = 256"),
        (["generate", "--model", "no-such-model", "x"], "Known names: pocket"),
        (["params", "gpt2-huge"], "gpt2-xl"),
    ],
)
def test_bad_input_is_one_clear_line(args, message, capsys):
    # In-process (a subprocess each costs seconds of imports): any exception other than the
    # clean exit would escape pytest.raises, as it would reach the user as a traceback.
    with pytest.raises(SystemExit) as exit_:
        main(args)
    out, err = capsys.readouterr()
    assert exit_.value.code == 2
    assert message in err and err.count("\n") == 1, err
    assert out == ""
