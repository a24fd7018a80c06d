"""droll 0.2.1 grammar and draws for {{roll}}.

Totals and rolls were produced by droll under Node with ``Math.random`` replaced by the same
scripted sequence the tests feed to ``roll_dice``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tavernbox.errors import TemplateError
from tavernbox.macros.dice import DiceRoll, parse_formula, roll_dice

SEQUENCE = [0, 0.5, 0.999999, 0.25, 0.75, 0.1, 0.9]


def scripted() -> Callable[[], float]:
    index = 0

    def draw() -> float:
        nonlocal index
        value = SEQUENCE[index % len(SEQUENCE)]
        index += 1
        return value

    return draw


@pytest.mark.parametrize(
    ("formula", "total", "rolls"),
    [
        ("1d1", 1, [1]),
        ("2d1+3", 5, [1, 1]),
        ("1d1-3", -2, [1]),
        ("d6", 1, [1]),
        ("D6", 1, [1]),
        ("6", 1, [1]),
        ("20", 1, [1]),
        ("3d6+4", 15, [1, 4, 6]),
        ("1D20+007", 8, [1]),
        ("10d10-0", 57, [1, 6, 10, 3, 8, 2, 10, 1, 6, 10]),
        ("4d4+100", 110, [1, 3, 4, 2]),
        ("1d6-5", -4, [1]),
        ("7d9", 35, [1, 5, 9, 3, 7, 1, 9]),
        ("1d9007199254740991", 1, [1]),
    ],
)
def test_roll_matches_droll(formula: str, total: int, rolls: list[int]) -> None:
    assert roll_dice(formula, scripted()) == DiceRoll(total=total, rolls=tuple(rolls))


@pytest.mark.parametrize(
    "formula",
    [
        "0d6", "1d0", "2d6kh1", "1d20+1d4", "d%", "1d1 + 1", "abc", "", "1d6\n", "01d6", "1d06",
        "+1d6", "1d6+", "0", "007", "2d6 ", " 2d6", "d\uff11", "1d\u0666", "1d6+-1", "1d6++1",
        "1d" + "9" * 17,  # past 2**53: refused rather than rounded like a JS double
        "1d6+" + "9" * 5000,  # a hostile modifier is refused without a huge int conversion
    ],
)
def test_invalid_formulas_give_none_and_draw_nothing(formula: str) -> None:
    def never() -> float:
        raise AssertionError("rng called for an invalid formula")

    assert roll_dice(formula, never) is None


def test_one_draw_per_die_in_order() -> None:
    draws: list[float] = []

    def rng() -> float:
        draws.append(0.5)
        return 0.5

    result = roll_dice("5d10+2", rng)
    assert result == DiceRoll(total=5 * 6 + 2, rolls=(6,) * 5)
    assert len(draws) == 5


def test_each_die_is_floor_rng_times_sides_plus_one() -> None:
    assert roll_dice("1d6", lambda: 0.0) == DiceRoll(1, (1,))
    assert roll_dice("1d6", lambda: 0.9999999999999999) == DiceRoll(6, (6,))
    assert roll_dice("1d6", lambda: 1 / 6) == DiceRoll(2, (2,))


def test_dice_limit_raises_before_drawing() -> None:
    assert roll_dice("1000d1", lambda: 0.0) == DiceRoll(1000, (1,) * 1000)
    with pytest.raises(TemplateError) as caught:
        roll_dice("1001d1", lambda: 0.0)
    assert caught.value.code == "MACRO_ROLL_LIMIT"


def test_dice_limit_is_configurable_and_cheap_for_huge_counts() -> None:
    with pytest.raises(TemplateError) as caught:
        roll_dice("3d6", lambda: 0.0, max_dice=2)
    assert caught.value.code == "MACRO_ROLL_LIMIT"
    with pytest.raises(TemplateError) as caught:
        roll_dice("9" * 10000 + "d6", lambda: 0.0)
    assert caught.value.code == "MACRO_ROLL_LIMIT"
    assert len(caught.value.message) < 200


def test_parse_formula_parts() -> None:
    assert parse_formula("3d6+4") == (3, 6, 4)
    assert parse_formula("d20-1") == (1, 20, -1)
    assert parse_formula("12") == (1, 12, 0)
    assert parse_formula("1d6-0") == (1, 6, 0)
    assert parse_formula("x") is None
