"""Find numbers typed into the book's prose instead of glued from the code that computes them.

Usage: python tools/check_numbers.py [FILE ...]   (default: chapters/*.ipynb and book/*.md)

Scans markdown cells and pages for figures a computation could have produced: digits
(1,424,720  0.867  21%  10⁻⁹  1e-9), number words next to a unit ("ten tokens", "one nat",
"an hour"), fractions and multiples ("a tenth", "one in five", "twice"), and hedges that
stand in for reading the output ("depends on the checkpoint"). Not scanned: glue roles
({glue:text}`ch03_n:.3f`), inline code, code blocks, math (except decimals inside it),
link targets and directive options. A hit is allowed when a pattern of
tools/numbers_allowlist.txt matches text that covers it: definitional constants (768,
50,257, 1e-5), chapter references, indices that name an element ("position 2"). Alt text
(`:alt:`) is prose too: describe a figure's shape there, and print its numbers in a cell.
Exit status 1 when something is neither glued nor allowed; each line says where and what to do.
"""
from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ALLOWLIST = ROOT / "tools" / "numbers_allowlist.txt"

_WORDS = ("one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
          "fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy "
          "eighty ninety hundred thousand million billion dozen a an").split()
_UNITS = ("tokens? ids? nats? bits? hours? minutes? seconds? steps? times percent layers? heads? "
          "parameters? plays? characters? pairs? merges? bytes? epochs?").split()
PATTERNS = {
    "number": re.compile(
        r"(?<![\w.])[-−]?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?([eE][-−+]?\d+)?(\s?[%‰×x])?"
        r"([⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+)?(?![\w])"),
    "number word": re.compile(  # "ten tokens", "two hundred merges" ("one token" is not a count)
        rf"\b({'|'.join(_WORDS[1:28])})([- ](and )?({'|'.join(_WORDS[:28])}))*\s+"
        rf"(?:{'|'.join(_UNITS)})\b", re.I),
    "one unit": re.compile(r"\b(one|a single)\s+(nats?|bits?|percent|epochs?)\b", re.I),
    "time": re.compile(r"\b(an?|one|half an?)\s+(hour|minute)s?\b", re.I),
    "fraction": re.compile(  # "falls to a tenth", "a third of them", "one in five", "twice"
        r"\b(to|about|roughly|nearly|almost|than|only|just)\s+(a|one)\s+"
        r"(half|third|quarter|fifth|tenth|hundredth|thousandth)\b"
        r"|\b(a|one|two)\s+(half|thirds?|quarters?|fifths?|tenths?|hundredths?)\s+of\b"
        r"|\btwice\b|\bthrice\b|\b\w+fold\b|\bhalf of\b"
        r"|\bone(\s+\w+){0,2}\s+in\s+(two|three|four|five|six|seven|eight|nine|ten|\d+)\b", re.I),
    "hedge": re.compile(
        r"\bdepends? on the (checkpoint|run|machine|model|seed)\b|\bdepending on\b"
        r"|\bwhether and how\b|\bmay or may not\b|\bmore or less\b|\bif all goes well\b", re.I),
}

# What is not prose: removed (replaced by spaces, so positions and context stay) before scanning.
_NOT_PROSE = [
    re.compile(r"```(?!\{)[\s\S]*?```"),  # code blocks (directive fences are kept)
    re.compile(r"<!--[\s\S]*?-->"),  # comments
    re.compile(r"\{[\w:-]+\}`[^`]*`"),  # roles: {glue:text}`key:.3f`, {ref}`...`, {doc}`...`
    re.compile(r"`[^`\n]*`"),  # inline code
    re.compile(r"\]\([^)]*\)"),  # link targets
    re.compile(r"\b[A-Z][A-Za-z]*-\d+\b"),  # names: GPT-2, UTF-8, Latin-1 (lowercase top-40 is a number)
    re.compile(r"https?://\S+"),
    re.compile(r"^\s*:(?!alt:)[\w-]+:.*$", re.M),  # directive options, except :alt: text
    re.compile(r"^(\s*)(\d+\.|[-*])\s", re.M),  # list markers
    re.compile(r"^\s*(```|:::)\{[^}]*\}.*$", re.M),  # directive heads
]
_MATH = re.compile(r"\$\$[\s\S]*?\$\$|\$[^$\n]+\$")
_MATH_DECIMAL = re.compile(r"\d+\.\d+|\d+\{,\}\d{3}\.\d+")


@dataclass
class Hit:
    where: str
    kind: str
    text: str
    context: str

    def __str__(self) -> str:
        return (f"{self.where}: {self.kind} {self.text!r} typed in prose: «{self.context}»\n"
                "    glue it from the cell that computes it, or, if it is a definition, add a "
                "pattern with its reason to tools/numbers_allowlist.txt")


def load_allowlist(path: Path = ALLOWLIST) -> list[re.Pattern]:
    """Lines `PATTERN  ::  why`; blank lines and lines starting with # are comments."""
    patterns = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        pattern, sep, why = line.partition("  ::  ")
        if not sep or not why.strip():
            sys.exit(f"{path}:{n}: write `PATTERN  ::  why it may be typed`, got {line!r}")
        patterns.append(re.compile(pattern.strip()))
    return patterns


def _spaces(s: str) -> str:
    return re.sub(r"[^\n]", " ", s)


def prose(markdown: str) -> str:
    """`markdown` with everything that is not prose blanked out (same length, same lines)."""
    text = markdown
    for pattern in _NOT_PROSE:
        text = pattern.sub(lambda m: _spaces(m.group(0)), text)

    def math(m: re.Match) -> str:  # keep decimals inside math, blank the rest
        kept = list(_spaces(m.group(0)))
        for d in _MATH_DECIMAL.finditer(m.group(0)):
            kept[d.start():d.end()] = d.group(0)
        return "".join(kept)
    return _MATH.sub(math, text)


def find(markdown: str, where: str, allow: list[re.Pattern]) -> list[Hit]:
    """Typed figures in one markdown text that no allowlist pattern covers."""
    text = prose(markdown)
    flat = text.replace("\n", " ")  # a phrase may wrap; same length, so the same positions
    covered = [m.span() for a in allow for t in (text, flat) for m in a.finditer(t)]
    hits = []
    for kind, pattern in PATTERNS.items():
        for m in pattern.finditer(text):
            if any(lo <= m.start() and m.end() <= hi for lo, hi in covered):
                continue
            line = text.count("\n", 0, m.start())
            context = " ".join(text[max(0, m.start() - 50):m.end() + 30].split())
            hits.append(Hit(f"{where}, line {line + 1}", kind, m.group(0).strip(), context))
    return hits


def markdown_sources(path: Path) -> list[tuple[str, str]]:
    """(where, markdown) for each markdown cell of a notebook, or the whole of a .md page."""
    rel = path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        return [(f"{rel} cell {c.get('id', i)}", "".join(c["source"]))
                for i, c in enumerate(cells) if c["cell_type"] == "markdown"]
    return [(str(rel), path.read_text(encoding="utf-8"))]


def main(argv: list[str]) -> int:
    files = [Path(a) for a in argv] or sorted(ROOT.glob("chapters/*.ipynb")) + sorted(ROOT.glob("book/*.md"))
    allow = load_allowlist()
    hits = [h for f in files for where, md in markdown_sources(f) for h in find(md, where, allow)]
    for h in hits:
        print(h)
    if hits:
        print(f"\n{len(hits)} typed figure(s) in prose; see CONTRIBUTING.md, 'Numbers in prose'.")
    return 1 if hits else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
