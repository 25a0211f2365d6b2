"""Benchmark records that name the code that made them.

A record in benchmarks/results/ is a measurement the book prints and the tests read; it stays
true only while the code that made it is this checkout's. `write_record` stores with it the
fingerprint (`gpt2_course.fingerprint`) of everything that ran: every package module imported
in the measuring processes (a script's worker processes report theirs), the benchmark script's
own code, its command-line config and torch's version. `record_changes` says what differs now,
and tests/test_benchmark_records.py fails on a record this checkout would not make, naming what
changed and the command that makes it again.

The script is not a package module, so it enters the fingerprint as data: its path and the hash
of its syntax tree, which, like a module's, ignores comments and docstrings.

>>> started = code_now("benchmarks/bpe.py", {"repeat": 2})
>>> write_record("out.json", {"mb_per_s": 1.0}, "benchmarks/bpe.py", {"repeat": 2}, started)
>>> record_changes(json.loads(Path("out.json").read_text()))
[]
"""
from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from pathlib import Path

from gpt2_course.fingerprint import _code_sha, fingerprint, modules_that_ran, what_changed

__all__ = ["cli_config", "code_now", "modules_that_ran", "provenance", "record_changes", "script_code",
           "write_record"]

ROOT = Path(__file__).resolve().parents[1]


def _script_name(script: str | Path) -> str:
    """The script's path from the repository root (as recorded), or as given outside it."""
    path = Path(script).resolve()
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def script_code(script: str | Path) -> str:
    """The script as fingerprint data: its path and its code's hash."""
    name = _script_name(script)
    return f"{name}: {_code_sha((ROOT / name).read_text(encoding='utf-8'))}"


def cli_config(args: argparse.Namespace, *skip: str) -> dict:
    """The command line's settings as JSON values, without `json` (where the record goes, which
    changes nothing measured) and the `skip`ped ones."""
    return {k: str(v) if isinstance(v, Path) else v for k, v in sorted(vars(args).items())
            if k not in {"json", *skip}}


def code_now(script: str | Path, config: dict, also_ran: Iterable[str] = ()) -> dict:
    """The fingerprint of this process's package modules (and `also_ran`, those of its workers),
    the script's code, the config and torch. Taken at the start, it lets `write_record` refuse a
    record whose code changed on disk while it was being measured."""
    modules = sorted(set(modules_that_ran()) | set(also_ran))
    return fingerprint(config, [script_code(script)], modules)


def write_record(path: str | Path, record: dict, script: str | Path, config: dict, started: dict,
                 also_ran: Iterable[str] = (), torch_exempt: str | None = None) -> None:
    """Write `record` as JSON with the fingerprint of what made it (after the measurement, so
    that every module it imported is in it). `torch_exempt` says why this record's torch may
    differ from this checkout's (a build the course does not pin, as CUDA's)."""
    now = code_now(script, config, also_ran)
    moved = [m for m, sha in started["modules"].items() if now["modules"].get(m, sha) != sha]
    moved += ["the script"] if started["data"] != now["data"] else []
    if moved:
        raise RuntimeError(f"the code of {', '.join(moved)} changed while the benchmark ran: its numbers may "
                           "come from either version. Run it again.")
    out = {**record, "script": _script_name(script), "config": config, "fingerprint": now}
    if torch_exempt:
        out["torch_exempt"] = torch_exempt
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")


def record_changes(record: dict) -> list[str]:
    """What differs between what made `record` and this checkout (empty: its code would make
    it): the script, a module, the config or torch, unless the record says why its torch is exempt."""
    changed = what_changed(record["fingerprint"], record["config"], [script_code(ROOT / record["script"])])
    changed = [f"script {record['script']}" if part == "data" else part for part in changed]
    return [part for part in changed if not (part == "torch" and record.get("torch_exempt"))]


def provenance(record: dict) -> str:
    """One line a page prints beside a record's numbers: whether this checkout's code made it, or
    what changed since. Only a record that `needs` hardware this course cannot count on (a GPU)
    may be stale, and then every page that reads it prints this line (tests/test_benchmark_records.py)."""
    changed = record_changes(record)
    if not changed:
        return f"{record['script']}: made by this checkout's code"
    return f"{record['script']}: recorded by earlier code; changed since: {', '.join(changed)}"
