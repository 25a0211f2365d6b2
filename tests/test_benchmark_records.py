"""The records in benchmarks/results/ were made by this checkout's code (benchmarks/_record.py).

A record the book prints or a test reads is a claim about today's code: if a module that ran, the
benchmark script, its config or torch changed since it was measured, the claim is stale, and the
test for it fails with the command that measures it again.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
sys.path.append(str(BENCHMARKS))  # where the scripts find their helper, as `python benchmarks/x.py` does

from _record import code_now, provenance, record_changes, write_record  # noqa: E402

fingerprint_module = sys.modules["gpt2_course.fingerprint"]  # its _source_sha is patched to fake an edit
RECORDS = sorted((BENCHMARKS / "results").glob("*.json"))


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.name)
def test_each_record_was_made_by_this_checkouts_code(path):
    record = json.loads(path.read_text(encoding="utf-8"))
    name = path.relative_to(ROOT)
    command = re.sub(r"--json \S+", f"--json {name}", record.get("command", "(the record names no command)"))
    where = " on a machine with an NVIDIA GPU" if "train_gpu" in path.name else ""
    assert "fingerprint" in record, (
        f"{name} has no fingerprint, so nothing shows that this checkout's code made it. "
        f"Re-record it from the repository root{where}: {command}")
    changed = record_changes(record)
    if changed and record.get("needs"):  # hardware CI lacks: stale only while every page reading it says so
        readers = pages_reading(path.name)
        assert readers, f"{name} is stale and no page prints that. Re-record it{where}: {command}"
        for page in readers:
            assert provenance(record) in stored_text(page), (
                f"{page.name} reads {name} but does not print what changed since it was recorded, "
                f"{provenance(record)!r}: execute it again, or re-record the record{where}: {command}")
        return
    assert not changed, (f"{name} was made by another {', '.join(changed)} than this checkout's. "
                         f"Re-record it from the repository root{where}: {command}")


def pages_reading(record_name: str) -> list[Path]:
    """The chapters whose code opens the record (its file name in a code cell)."""
    def code(nb: Path) -> str:
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        return "".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    return [nb for nb in sorted((ROOT / "chapters").glob("*.ipynb")) if record_name in code(nb)]


def stored_text(notebook: Path) -> str:
    """Everything the notebook's stored outputs print."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return "".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
                   for c in cells if c["cell_type"] == "code" for o in c.get("outputs", []))


def test_every_benchmark_that_writes_a_record_fingerprints_it():
    writers = [p for p in BENCHMARKS.glob("*.py") if "--json" in p.read_text(encoding="utf-8")]
    assert {p.name for p in writers} >= {"bpe.py", "generate.py", "generate_steps.py", "train_gpu.py"}
    for p in writers:
        assert re.search(r"\bwrite_record\(", p.read_text(encoding="utf-8")), f"{p.name}: no fingerprint"


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "bench.py"
    path.write_text('"""Times a thing."""\nimport gpt2_course.model\n\nprint(1)  # the measurement\n')
    return path


def write(tmp_path, script, **kw) -> dict:
    config = {"repeat": 2}
    write_record(tmp_path / "r.json", {"rate": 1.0}, script, config, code_now(script, config), **kw)
    return json.loads((tmp_path / "r.json").read_text())


def test_a_record_names_what_changed(tmp_path, script, monkeypatch):
    import gpt2_course.model  # noqa: F401  (what the script's measuring process ran)
    record = write(tmp_path, script, also_ran=["gpt2_course.loading"])
    assert record["rate"] == 1.0 and record["config"] == {"repeat": 2}
    assert {"gpt2_course.model", "gpt2_course.loading", "gpt2_course.fingerprint"} <= set(
        record["fingerprint"]["modules"])
    assert record_changes(record) == []
    script.write_text(script.read_text().replace("Times a thing", "Times it") + "# a comment\n")
    assert record_changes(record) == [], "comments and docstrings are not code"
    script.write_text(script.read_text().replace("print(1)", "print(2)"))
    assert record_changes(record) == [f"script {script.resolve()}"]
    script.write_text(script.read_text().replace("print(2)", "print(1)"))
    real = fingerprint_module._source_sha
    monkeypatch.setattr(fingerprint_module, "_source_sha",  # as if loading.py's code had been edited
                        lambda m: "0" * 64 if m == "gpt2_course.loading" else real(m))
    assert record_changes(record) == ["module gpt2_course.loading"]
    assert record_changes({**record, "config": {"repeat": 3}})[:1] == ["config"]


def test_torch_counts_unless_the_record_says_why_not(tmp_path, script):
    record = write(tmp_path, script)
    other = {**record, "fingerprint": {**record["fingerprint"], "torch": "2.11.0+cu130"}}
    assert record["fingerprint"]["torch"] == torch.__version__ and record_changes(other) == ["torch"]
    exempt = write(tmp_path, script, torch_exempt="a CUDA build")
    assert record_changes({**exempt, "fingerprint": {**exempt["fingerprint"], "torch": "2.11.0+cu130"}}) == []


def test_a_record_is_not_written_if_the_code_changed_while_it_ran(tmp_path, script):
    config = {"repeat": 2}
    started = code_now(script, config)
    script.write_text(script.read_text().replace("print(1)", "print(2)"))
    with pytest.raises(RuntimeError, match="the script changed while the benchmark ran"):
        write_record(tmp_path / "r.json", {"rate": 1.0}, script, config, started)
    assert not (tmp_path / "r.json").exists()


def test_provenance_names_what_changed_since_a_record(tmp_path, script):
    record = write(tmp_path, script)
    script.write_text(script.read_text().replace("print(1)", "print(2)"))
    name = script.resolve()
    assert provenance(record) == f"{name}: recorded by earlier code; changed since: script {name}"
    script.write_text(script.read_text().replace("print(2)", "print(1)"))
    assert provenance(record) == f"{name}: made by this checkout's code"
