"""The dice formulas of ``{{roll}}``: droll 0.2's grammar, drawn from a caller-supplied generator.

SillyTavern hands the argument of ``{{roll}}`` to droll, whose whole grammar is
``[count]d<sides>[+|-modifier]`` (count and sides positive, no leading zero, ``d`` in either case,
no spaces, one modifier). ST first turns bare digits ``N`` into ``1dN``. Anything else is invalid
and ST prints ``''``; :func:`roll_dice` returns ``None`` for it.

Each die is ``floor(rng() * sides) + 1``, droll's own formula, so a recorded sequence of ``rng()``
values replays to the same rolls. The generator is a parameter because the engine's draws must
be seeded and recorded by the caller, never taken from a global random source.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from ..errors import TemplateError

__all__ = ["MAX_EXACT", "DiceRoll", "parse_formula", "roll_dice"]

#: droll's regular expression, with ASCII digits (JavaScript's ``\d``) and a full match
#: (JavaScript's ``$`` does not accept a trailing newline, Python's does).
_FORMULA = re.compile(r"([1-9][0-9]*)?[dD]([1-9][0-9]*)([+-][0-9]+)?")
_BARE = re.compile(r"[0-9]+")

#: Sides and modifiers are JavaScript doubles in droll; beyond 2**53 they stop being exact
#: integers (and far beyond they become ``Infinity``). We refuse such formulas instead of
#: imitating the rounding: see docs/DEVIATIONS.md.
MAX_EXACT = 2**53


@dataclass(frozen=True, slots=True)
class DiceRoll:
    """The outcome of one formula: the total (modifier included) and each die in order."""

    total: int
    rolls: tuple[int, ...]


def _bounded_int(digits: str, bound: int) -> int | None:
    """``int(digits)`` if it is at most ``bound``; ``None`` otherwise.

    The length is checked first so that a hostile 100,000-digit number is never converted
    (Python refuses very long int conversions, and they cost quadratic time).
    """
    stripped = digits.lstrip("0") or "0"
    if len(stripped) > len(str(bound)):
        return None
    value = int(stripped)
    return value if value <= bound else None


def parse_formula(formula: str, *, max_dice: int = 1000) -> tuple[int, int, int] | None:
    """``(count, sides, modifier)`` of a valid formula, ``None`` for an invalid one.

    Raises ``TemplateError`` (``MACRO_ROLL_LIMIT``) when the formula asks for more than
    ``max_dice`` dice, before anything is allocated for them. Short formulas are parsed once
    (a prompt rolls the same few formulas every render); a refusal is raised afresh each time.
    """
    if len(formula) <= 64:
        return _parse_cached(formula, max_dice)
    return _parse(formula, max_dice)


def _parse(formula: str, max_dice: int) -> tuple[int, int, int] | None:
    if _BARE.fullmatch(formula):
        formula = "1d" + formula
    match = _FORMULA.fullmatch(formula)
    if match is None:
        return None
    count_text, sides_text, modifier_text = match.groups()
    count = 1
    if count_text is not None:
        bounded = _bounded_int(count_text, max_dice)
        if bounded is None:
            shown = count_text if len(count_text) <= 20 else count_text[:20] + "..."
            raise TemplateError(
                f"{{{{roll}}}} asks for {shown} dice; the limit is {max_dice}",
                code="MACRO_ROLL_LIMIT",
            )
        count = bounded
    sides = _bounded_int(sides_text, MAX_EXACT)
    if sides is None:
        return None
    modifier = 0
    if modifier_text is not None:
        magnitude = _bounded_int(modifier_text[1:], MAX_EXACT)
        if magnitude is None:
            return None
        modifier = -magnitude if modifier_text[0] == "-" else magnitude
    return count, sides, modifier


_parse_cached = lru_cache(maxsize=1024)(_parse)


def roll_dice(
    formula: str, rng: Callable[[], float], *, max_dice: int = 1000
) -> DiceRoll | None:
    """Roll ``formula`` with ``rng`` (floats in [0, 1)); ``None`` when the formula is invalid.

    ``rng`` is called exactly once per die, in order, and never for an invalid formula.
    """
    parsed = parse_formula(formula, max_dice=max_dice)
    if parsed is None:
        return None
    count, sides, modifier = parsed
    rolls = tuple(int(rng() * sides) + 1 for _ in range(count))
    return DiceRoll(total=sum(rolls) + modifier, rolls=rolls)
