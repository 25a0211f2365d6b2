"""Stored results' fingerprints: every module that ran, the config, the data and torch."""
from __future__ import annotations

import json

import pytest

import gpt2_course.finetune  # noqa: F401  (so that it has run)
from gpt2_course.fingerprint import fingerprint, load_results, modules_that_ran, save_results, what_changed


def test_modules_that_ran_are_the_imported_package_modules():
    ran = modules_that_ran()
    assert {"gpt2_course", "gpt2_course.finetune", "gpt2_course.model", "gpt2_course.fingerprint"} <= set(ran)
    assert all(m == "gpt2_course" or m.startswith("gpt2_course.") for m in ran)


def test_a_fingerprint_names_each_part():
    fp = fingerprint({"steps": 3}, [b"passages"], ["gpt2_course.finetune", "gpt2_course.nonexistent"])
    assert set(fp) == {"torch", "config", "data", "modules"}
    assert fp["modules"]["gpt2_course.nonexistent"] == "missing"
    assert fingerprint({"steps": 3}, ["passages"], ["gpt2_course.finetune"])["data"] == fp["data"]


def test_what_changed_names_config_data_module_and_torch():
    stored = fingerprint({"steps": 3}, [b"passages"], ["gpt2_course.finetune", "gpt2_course.model"])
    assert what_changed(stored, {"steps": 3}, [b"passages"]) == []
    assert what_changed(stored, {"steps": 4}, [b"passages"]) == ["config"]
    assert what_changed(stored, {"steps": 3}, [b"other passages"]) == ["data"]
    edited = {**stored, "torch": "0.0", "modules": {**stored["modules"], "gpt2_course.model": "0" * 64}}
    assert what_changed(edited, {"steps": 3}, [b"passages"]) == ["torch", "module gpt2_course.model"]


def test_results_round_trip_and_refuse_what_changed(tmp_path):
    path, data = tmp_path / "r.json", [b"passages", tmp_path / "weights.bin"]
    (tmp_path / "weights.bin").write_bytes(b"\x00\x01")
    save_results(path, {"acc": 0.9}, {"steps": 3}, data)
    assert load_results(path, {"steps": 3}, data, "make it")["acc"] == 0.9
    assert "gpt2_course.fingerprint" in json.loads(path.read_text())["fingerprint"]["modules"]
    (tmp_path / "weights.bin").write_bytes(b"\x00\x02")
    with pytest.raises(ValueError, match="another data than this checkout's.*make it"):
        load_results(path, {"steps": 3}, data, "make it")
    with pytest.raises(FileNotFoundError, match="make it"):
        load_results(tmp_path / "none.json", {}, [], "make it")


def test_a_module_counts_by_its_code_not_its_comments_or_docstrings():
    from gpt2_course.fingerprint import _code_sha
    plain = "x = 1\n\ndef f(a):\n    return a + x\n"
    explained = '"""A module."""\nx = 1  # one\n\ndef f(a):\n    """Add x."""\n    return a + x  # sum\n'
    assert _code_sha(plain) == _code_sha(explained)
    assert _code_sha(plain) != _code_sha(plain.replace("a + x", "a - x"))
    assert _code_sha("def f():\n    'only a docstring'\n") == _code_sha("def f():\n    pass\n")


def test_results_are_not_written_if_the_code_changed_during_the_run(tmp_path):
    started = fingerprint({"steps": 3}, [b"passages"])
    moved = {**started, "modules": {**started["modules"], "gpt2_course.model": "0" * 64}}
    with pytest.raises(RuntimeError, match="gpt2_course.model changed while the run was going"):
        save_results(tmp_path / "r.json", {"acc": 0.9}, {"steps": 3}, [b"passages"], started=moved)
    assert not (tmp_path / "r.json").exists()
    save_results(tmp_path / "r.json", {"acc": 0.9}, {"steps": 3}, [b"passages"], started=started)
