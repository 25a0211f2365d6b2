"""nbval's comparison, with one tolerance: a printed decimal may differ by one unit in its last digit.

Why: a float printed to k decimals flips its last digit whenever the true value sits near a
rounding boundary and the arithmetic differs in its last bits, which the pinned numeric
environment (numeric_env.py) prevents on every CPU we know of but cannot promise for every
future CPU or library. A flip of one unit in the last printed digit is such noise; anything
else — another digit, another integer, another word, a missing line — still fails.

    >>> same_up_to_last_digit("loss 1.2693, 12 tokens", "loss 1.2692, 12 tokens")
    True
    >>> same_up_to_last_digit("loss 1.2693", "loss 1.2695"), same_up_to_last_digit("12 tokens", "13 tokens")
    (False, False)
"""
from __future__ import annotations

import re

_DECIMAL = re.compile(r"(-?\d+\.\d+)")


def _close(a: str, b: str) -> bool:
    if len(a.split(".")[1]) != len(b.split(".")[1]):
        return False
    return abs(int(a.replace(".", "")) - int(b.replace(".", ""))) <= 1


def same_up_to_last_digit(a: str, b: str) -> bool:
    """True if a and b are equal except for decimals one unit apart in their last digit."""
    if a == b:
        return True
    pa, pb = _DECIMAL.split(a), _DECIMAL.split(b)
    if len(pa) != len(pb):
        return False
    # split() alternates text (even indices) and captured decimals (odd indices)
    return all(x == y if k % 2 == 0 else _close(x, y) for k, (x, y) in enumerate(zip(pa, pb)))


class TolerantText(str):
    """A sanitized output string whose != is same_up_to_last_digit (nbval compares with !=)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and same_up_to_last_digit(str(self), str(other))

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = str.__hash__


def install() -> None:
    """Make nbval compare text outputs with the last-digit tolerance."""
    from nbval.plugin import IPyNbCell

    plain = IPyNbCell.sanitize

    def sanitize(self, s):
        out = plain(self, s)
        return TolerantText(out) if isinstance(out, str) else out

    IPyNbCell.sanitize = sanitize
