"""tools/check_numbers.py must catch every typed figure issue 16 found, and let glue through."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import check_numbers  # noqa: E402

ALLOW = check_numbers.load_allowlist()

# The examples of issue 16, as the prose once had them.
REINTRODUCED = [
    "The tokenizer splits it into ten tokens, ten ids.",
    "Far from zero the two agree to better than 10⁻⁹.",
    "Far from zero the two agree to better than 1e-9.",
    "Top-40 keeps the favourite, and top-40 gives the others a small chance.",
    "The largest budget that fits: 256 tokens.",
    "In gpt2-xl the embeddings' share falls to a tenth.",
    "The pocket model is required to beat the bigram by at least one nat.",
    "The validation loss is 0.867 nats lower.",
    "Training took about an hour on a two-core laptop.",
    "Which heads attend to the previous token depends on the checkpoint.",
    "It shows whether and how cleanly the model copies names.",
    "About one validation pair in five would get probability zero.",
    "The throughput is 5.2 MB of text per second.",
    "| tokenizer | 1,234 |",
    "21% of the pairs are unseen.",
]


@pytest.mark.parametrize("sentence", REINTRODUCED)
def test_catches_each_example_of_issue_16(sentence):
    assert check_numbers.find(sentence, "test", ALLOW), f"not flagged: {sentence!r}"


ALLOWED = [
    "The loss is {glue:text}`ch01_val_loss:.4f` nats and {glue:text}`ch01_n_tokens:,` tokens.",
    "GPT-2 has a vocabulary of 50,257 tokens and a width of 768; see [chapter 5](05_masking.ipynb).",
    "The code `x[:, :256]` and the math $\\sqrt{64} = 8$ are not prose.",
    "```python\nloss = 4.3868\n```",
    "Generation adds one token at a time; position 2 is *obey*; every row sums to 1.",
    "The MLP widens 768 → 3,072 → 768, and layer norm adds 1e-5.",
]


@pytest.mark.parametrize("text", ALLOWED)
def test_glue_code_math_and_definitions_pass(text):
    assert check_numbers.find(text, "test", ALLOW) == []


def test_math_decimals_are_still_checked():
    assert check_numbers.find("so $\\mathcal{L} = 5.2489$ nats", "test", ALLOW)


def test_allowlist_is_narrow():
    """The phrase around a constant is allowed, not the number everywhere."""
    assert not check_numbers.find("a 256 byte values table", "t", ALLOW)
    assert check_numbers.find("we kept 768 tokens", "t", ALLOW) == []  # 768 is n_embd ...
    assert check_numbers.find("we kept 769 tokens", "t", ALLOW)  # ... but 769 is not


def test_every_allowlist_line_has_a_reason(tmp_path):
    bad = tmp_path / "allow.txt"
    bad.write_text("\\b768\\b\n")
    with pytest.raises(SystemExit, match="why it may be typed"):
        check_numbers.load_allowlist(bad)


def test_command_fails_and_names_the_cell(tmp_path):
    nb = {"cells": [{"cell_type": "markdown", "id": "abc123", "metadata": {},
                     "source": ["The model is ten tokens long."]}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "ch.ipynb"
    path.write_text(json.dumps(nb))
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "check_numbers.py"), str(path)],
                         capture_output=True, text=True)
    assert run.returncode == 1
    assert "cell abc123" in run.stdout and "'ten tokens'" in run.stdout
    path.write_text(json.dumps({**nb, "cells": [{**nb["cells"][0], "source": ["No figures."]}]}))
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "check_numbers.py"), str(path)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout
