"""Compare a notebook's stored outputs with the outputs of another run of it, as nbval would.

Usage: python tools/arm/compare_outputs.py STORED.ipynb OTHER.ipynb [...pairs]

For each code cell nbval checks (no `nbval-skip`/`nbval-ignore-output` tag or marker), the text
outputs are sanitized with tests/sanitize.cfg and compared key by key, as nbval does; a cell whose
texts differ is `last-digit` when tools/last_digit.py forgives it (what `make test` does) and
`FAILS` otherwise. Each differing line is printed with the largest gap between its decimals in
units of their last printed digit: the record of how far another CPU's digits move.
"""
from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
from last_digit import _DECIMAL, same_up_to_last_digit  # noqa: E402

SKIP = {"metadata", "traceback", "prompt_number", "output_type", "name", "execution_count",
        "application/vnd.jupyter.widget-view+json", "image/png", "image/jpeg"}
PATTERNS = re.findall(r"^regex: (.*)$\n^replace: (.*)$", (ROOT / "tests/sanitize.cfg").read_text(), re.M)


def sanitize(s: str) -> str:
    for regex, replace in PATTERNS:
        s = re.sub(regex, replace, s)
    return s


def texts(cell) -> dict[str, list[str]]:
    """nbval's flattening: each output key (streams by their name) -> its sanitized texts, in order."""
    out: dict[str, list[str]] = defaultdict(list)
    streams: dict[str, str] = {}
    for o in cell.get("outputs", []):
        if o.output_type == "stream":  # nbval coalesces consecutive stream outputs
            streams[o.name] = streams.get(o.name, "") + o.text
            continue
        for key, value in o.items():
            if key == "data":
                for k, v in value.items():
                    if k not in SKIP:
                        out[k].append(sanitize(v if isinstance(v, str) else str(v)))
            elif key not in SKIP:
                out[key].append(sanitize(str(value)))
    for name, text in streams.items():
        out[name].append(sanitize(text))
    return out


def checked(cell) -> bool:
    tags = set(cell.get("metadata", {}).get("tags", []))
    marks = "".join(cell.source.splitlines()[:1])
    return cell.cell_type == "code" and not tags & {"nbval-skip", "nbval-ignore-output"} and \
        "NBVAL_IGNORE_OUTPUT" not in marks and "NBVAL_SKIP" not in marks


def units_apart(a: str, b: str) -> int | None:
    """Largest gap between corresponding decimals of two lines, in units of the last digit."""
    da, db = _DECIMAL.findall(a), _DECIMAL.findall(b)
    if len(da) != len(db) or _DECIMAL.sub("#", a) != _DECIMAL.sub("#", b):
        return None
    gaps = [abs(int(x.replace(".", "")) - int(y.replace(".", ""))) for x, y in zip(da, db)
            if len(x.split(".")[1]) == len(y.split(".")[1])]
    return max(gaps, default=0)


def compare(stored: Path, other: Path) -> tuple[int, int, int, int]:
    a, b = nbformat.read(stored, 4), nbformat.read(other, 4)
    n = same = tolerated = failed = 0
    for i, (c, d) in enumerate(zip(a.cells, b.cells)):
        if not checked(c):
            continue
        n += 1
        ta, tb = texts(c), texts(d)
        if ta == tb:
            same += 1
            continue
        keys = sorted(set(ta) | set(tb))
        ok = set(ta) == set(tb) and all(len(ta[k]) == len(tb[k]) and all(
            same_up_to_last_digit(x, y) for x, y in zip(ta[k], tb[k])) for k in keys)
        tolerated += ok
        failed += not ok
        print(f"  cell {i} ({'last-digit' if ok else 'FAILS'}):")
        for k in keys:
            x, y = "\n".join(ta.get(k, [])).splitlines(), "\n".join(tb.get(k, [])).splitlines()
            for la, lb in zip(x, y):
                if la != lb:
                    gap = units_apart(la, lb)
                    print(f"    [{k}] stored: {la.strip()[:110]}")
                    print(f"    [{k}] other:  {lb.strip()[:110]}"
                          + (f"   <- {gap} unit(s) of the last digit" if gap is not None else ""))
            for line in x[len(y):]:
                print(f"    [{k}] stored only: {line.strip()[:110]}")
            for line in y[len(x):]:
                print(f"    [{k}] other only:  {line.strip()[:110]}")
    print(f"{stored.name}: {n} checked cells, {same} identical, {tolerated} equal up to the last digit, "
          f"{failed} differ")
    return n, same, tolerated, failed


if __name__ == "__main__":
    args = [Path(p) for p in sys.argv[1:]]
    if not args or len(args) % 2:
        sys.exit(__doc__)
    totals = [sum(t) for t in zip(*(compare(args[k], args[k + 1]) for k in range(0, len(args), 2)))]
    print(f"all: {totals[0]} checked cells, {totals[1]} identical, {totals[2]} equal up to the last digit, "
          f"{totals[3]} differ")
