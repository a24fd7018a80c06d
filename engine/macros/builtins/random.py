"""``{{random}}``, ``{{pick}}`` and ``{{roll}}``: list splitting, seeded draws, dice.

``random`` and ``roll`` draw from the render's seeded generator and every draw is recorded, so a
render replays exactly from its seed. ``pick`` reproduces SillyTavern's own choice (cyrb53 +
seedrandom over chat id hash, input and offset), so it needs no draw from the seed.
"""

from __future__ import annotations

from collections.abc import Callable

from ...errors import TemplateError
from ..dice import parse_formula, roll_dice
from ..evaluator import Draw, MacroCall, RenderState
from ..prng import pick_index
from ..registry import MacroRegistry
from ..variables import js_trim

__all__ = ["register", "split_items"]

_COMMA = "\x00COMMA\x00"
#: a bound one-die roll keeps the draw records of at most this many faces
_KEPT_FACES = 1024


def split_items(args: list[str]) -> list[str]:
    """ST's list rule: one argument is split again on ``::`` or else on unescaped commas."""
    if len(args) != 1:
        return list(args)
    only = args[0]
    if "::" in only:
        return [js_trim(part) for part in only.split("::")]
    protected = only.replace("\\,", _COMMA)
    return [js_trim(part).replace(_COMMA, ",") for part in protected.split(",")]


def _random(call: MacroCall) -> str:
    items = split_items(call.args)
    if not items:
        return ""
    r = call.state.random()
    index = int(r * len(items))
    choice = items[index]
    call.state.draws.append(Draw("random", call.offset, choice, call.source_text))
    return choice


def _bind_random(args: tuple[str, ...], offset: int, macro: str) -> Callable[[RenderState], str] | None:
    """:func:`_random` for fixed (literal) arguments, with the list split once (see ``..plan``).

    Must equal :func:`_random` (text and draws): ``tests/test_macros_plan_bound.py``.
    """
    items = tuple(split_items(list(args)))
    if not items:
        return lambda state: ""
    count = len(items)
    # a draw record depends on the choice only, and records are immutable: one per item
    records = tuple(Draw("random", offset, choice, macro) for choice in items)

    def draw(state: RenderState) -> str:
        index = int(state.random() * count)
        state.draws.append(records[index])
        return items[index]

    return draw


_random.bind_literal = _bind_random  # type: ignore[attr-defined]


def _pick(call: MacroCall) -> str:
    items = split_items(call.args)
    if not items:
        return ""
    ctx = call.ctx
    chat_hash = ctx.chat_id_hash if ctx.chat_id_hash is not None else 0
    offset = call.state.utf16(call.offset)  # ST's offsets are JavaScript string indices
    index = pick_index(chat_hash, call.state.content, offset, len(items), ctx.pick_reroll_seed)
    return items[index]


def _roll(call: MacroCall) -> str:
    formula = call.args[0]
    result = roll_dice(formula, call.state.random)
    if result is None:
        return ""
    call.state.draws.append(Draw("roll", call.offset, str(result.total), call.source_text, result.rolls))
    return str(result.total)


def _bind_roll(args: tuple[str, ...], offset: int, macro: str) -> Callable[[RenderState], str] | None:
    """:func:`_roll` for a literal formula, parsed once; ``None`` (evaluate it each render) for a
    formula over the dice limit, whose refusal the evaluator reports as a diagnostic.

    Must equal :func:`_roll` (text, draws with dice, diagnostics): ``tests/test_macros_plan_bound.py``.
    """
    try:
        parsed = parse_formula(args[0])
    except TemplateError:
        return None
    if parsed is None:
        return lambda state: ""
    count, sides, modifier = parsed
    dice = range(count)
    if count == 1:
        # one die: the record depends on the face only (immutable, so kept per face seen)
        records: dict[int, Draw] = {}

        def roll_one(state: RenderState) -> str:
            face = int(state.random() * sides) + 1
            record = records.get(face)
            if record is None:
                record = Draw("roll", offset, str(face + modifier), macro, (face,))
                if len(records) < _KEPT_FACES:
                    records[face] = record
            state.draws.append(record)
            return record.value

        return roll_one

    def roll(state: RenderState) -> str:
        rng = state.random
        rolls = tuple(int(rng() * sides) + 1 for _ in dice)
        total = str(sum(rolls) + modifier)
        state.draws.append(Draw("roll", offset, total, macro, rolls))
        return total

    return roll


_roll.bind_literal = _bind_roll  # type: ignore[attr-defined]


def register(registry: MacroRegistry) -> None:
    registry.register("random", _random, max_args=None)
    registry.register("pick", _pick, max_args=None)
    registry.register("roll", _roll, min_args=1, max_args=1)
