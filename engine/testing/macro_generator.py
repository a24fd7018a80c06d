"""A fast generator of macro text for fuzzing campaigns: the grammar of :func:`macro_templates`,
drawn with :class:`random.Random` instead of Hypothesis.

Hypothesis spends 5-50 ms drawing one :func:`~tavernbox.testing.macro_strategies.macro_templates`
example (its choice-sequence machinery, recorded for shrinking), far more than the engine spends
rendering it, which held ``tavernbox fuzz`` to about 180 inputs a second. A campaign of millions
of inputs needs generation that costs about what a render costs: this module draws the same
shapes (known names in random case, the three argument forms, flags, nesting, scoped pairs,
``{{if}}``/``{{else}}``, the variable shorthand with every operator, broken pieces and edge
characters) in tens of microseconds. Failures found from it are shrunk by a delta-debugging
pass in :mod:`tavernbox.cli.fuzz`; the Hypothesis strategies remain the public, shrinkable API.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from math import floor
from operator import itemgetter

from .macro_strategies import _FLAGS, _OPERATORS, _VAR_NAMES, MACRO_NAMES

__all__ = ["MacroTextGenerator"]

_PLAIN_ALPHABET = "abcXYZ 019,-\n\t{}:|\\!#/.$é😀<>\"'"
_PLAIN_LEN = len(_PLAIN_ALPHABET)
_PADDING = ("", "", " ", "  ", "\n", " \n ")
_MEANINGFUL = (
    "1d6", "2d1+3", "1d1-3", "d20", "6", "0d6", "1001d6", "abc", "UTC+2", "UTC-5:30", "UTC+99",
    "YYYY-MM-DD HH:mm", "LLLL", "[at] LT", "dddd Do", "2023-01-01", "2023-01-02T10:00Z",
    "a,b\\,c", "0", "1", "false", "off", "true", "-1", "10001", "007", "2.5", "[1,2]",
    '{"a":1}', "", " ", "!", "x",
)
_BROKEN = (
    "{{", "}}", "{{user", "{{ hehe", "{{/if}}", "{{/setvar}}", "{{else}}", "{{{", "}}}", "\\{\\{user\\}\\}",
    "\\{{user}}", "{{user!}}", "{{reverse::a|b}}", "{{// a \\| b }}", "{{§§ x}}", "{{::}}", "{{:}}",
    "{{ }}", "{{.}}", "{{$}}", "{{.1}}", "<USER>", "<BOT>", "<CHAR>", "<GROUP>", "{{time_UTC+2}}",
    "{{//}}", "{{///}}", "{{#}}", "{{!}}", "\\", "{{user}}}}", "{{{{char}}}}",
)
_SCOPED = ("setvar", "trim", "reverse", "if", "//", "setglobalvar", "foo", "user")
_SCOPED_CONDITIONS = ("1", "0", "!x", ".x", "$flag", "description", "")
_IF_CONDITIONS = ("1", "0", "!0", "false", "yes", ".flag", "$flag", "user", "noop", "")


_SCOPED_WITH_VAR = frozenset(("setvar", "setglobalvar"))
#: whether each of ``_OPERATORS`` takes a value after it
_OPERATOR_TAKES_VALUE = tuple(op not in ("", "++", "--") for op in _OPERATORS)

# Lengths as floats: ``random() * 30.0`` is the same product as ``random() * 30`` (the int converts
# exactly) without the conversion.
_N_NAMES = float(len(MACRO_NAMES))
_N_PLAIN = float(len(_PLAIN_ALPHABET))
_N_MEANINGFUL = float(len(_MEANINGFUL))
_N_BROKEN = float(len(_BROKEN))
_N_VAR_NAMES = float(len(_VAR_NAMES))
_N_OPERATORS = float(len(_OPERATORS))
_N_SCOPED = float(len(_SCOPED))
_N_SCOPED_CONDITIONS = float(len(_SCOPED_CONDITIONS))
_N_IF_CONDITIONS = float(len(_IF_CONDITIONS))
_N_FLAGS = float(len(_FLAGS))

# Random casing of a name, one ``random() < 0.5`` per character (upper when true), drawn in one
# ``getrandbits`` call. CPython's ``random()`` is ``((w0 >> 5) * 2**26 + (w1 >> 6)) / 2**53`` over the
# next two 32-bit Mersenne Twister words, so it is below 0.5 exactly when bit 31 of ``w0`` is clear;
# ``getrandbits(64 * n)`` consumes the same ``2 * n`` words in the same order, least significant
# word first, so byte ``8 * i + 3`` of its little-endian bytes holds that bit of draw ``i``. The
# top bit is turned into the ASCII case bit (0x20) by a table, kept on letters only, and set over
# the upper-case name. Only for a plain :class:`random.Random` (a subclass may draw differently).
_TOP_BIT_TO_CASE_BIT = bytes(0x20 if b & 0x80 else 0 for b in range(256))


def _case_table(names: tuple[str, ...]) -> dict[str, tuple[int, int, int, int]]:
    """Per name: its length, the 64-bit-per-draw width, the case bits it may take, its upper case."""
    table = {}
    for name in names:
        assert name.isascii(), name
        letters = bytes(0x20 if c.isalpha() else 0 for c in name)
        table[name] = (len(name), 64 * len(name), int.from_bytes(letters, "big"),
                       int.from_bytes(name.upper().encode(), "big"))
    return table


_CASES = _case_table(MACRO_NAMES + _SCOPED)


# Plain text from one ``getrandbits`` call. Its characters are ``_PLAIN_ALPHABET[floor(random() * 30)]``
# and ``random()`` is ``k / 2**53`` with ``k = (w0 >> 5) * 2**26 + (w1 >> 6)``: the top 16 bits of
# ``w0`` place it in ``[h / 2**16, (h + 1) / 2**16)``, and as the character only grows with the
# draw, it is the same for every draw in that bin unless a character's boundary falls inside it
# (28 bins of 65536). ``_PLAIN_BY_TOP_HALF[h]`` is that character, or None for those bins, whose
# characters are then computed exactly as ``random()`` does (``_exact_plain``).
_MAX_PLAIN = 12
_TOP_HALVES = (None,) + tuple(struct.Struct("<" + "2xH4x" * n).unpack for n in range(1, _MAX_PLAIN + 1))
_WORDS = (None,) + tuple(struct.Struct("<" + "I" * (2 * n)).unpack for n in range(1, _MAX_PLAIN + 1))


def _draw_char(k: int) -> str:
    """The plain character of the draw ``random() == k / 2**53`` (as ``_PLAIN_ALPHABET[int(random() * 30)]``)."""
    return _PLAIN_ALPHABET[floor(k * (1.0 / 9007199254740992.0) * _N_PLAIN)]


def _plain_table() -> tuple[str | None, ...]:
    """Per value of a draw's top 16 bits, its plain character, or None where that depends on the rest."""
    size = len(_PLAIN_ALPHABET)
    table: list[str | None] = []
    for index, char in enumerate(_PLAIN_ALPHABET):  # bins whose lowest draw is this character
        table += [char] * (-(-(index + 1) * 65536 // size) - -(-index * 65536 // size))
    assert len(table) == 65536
    for top in range(65536):
        if top == 65535 or table[top] != table[top + 1]:  # the only bins a boundary can fall into
            if _draw_char(top << 37) != _draw_char(((top + 1) << 37) - 1):
                table[top] = None
    return tuple(table)


_PLAIN_BY_TOP_HALF = _plain_table()


def _exact_plain(data: bytes, n: int) -> str:
    """The ``n`` plain characters of ``data`` (``getrandbits(64 * n)`` as little-endian bytes), each
    computed from its two words exactly as CPython's ``random()`` computes its float."""
    words = _WORDS[n](data)
    return "".join([_draw_char((words[i] >> 5) * 67108864 + (words[i + 1] >> 6)) for i in range(0, 2 * n, 2)])


def _is_plain_random(rng: random.Random) -> bool:
    cls = type(rng)
    return cls.random is random.Random.random and cls.getrandbits is random.Random.getrandbits


def _casing(rng: random.Random) -> Callable[[str], str]:
    """A function casing each character of a name at random, drawing as ``random() < 0.5`` each."""
    rnd = rng.random
    if not _is_plain_random(rng):
        def by_draws(name: str) -> str:
            return "".join([c.upper() if rnd() < 0.5 else c.lower() for c in name])
        return by_draws
    bits = rng.getrandbits
    cases = _CASES
    from_bytes = int.from_bytes
    table = _TOP_BIT_TO_CASE_BIT

    def by_bits(name: str) -> str:
        size, width, letters, upper = cases[name]
        lower_bits = from_bytes(bits(width).to_bytes(size * 8, "little")[3::8].translate(table), "big")
        return ((lower_bits & letters) | upper).to_bytes(size, "big").decode("ascii")
    return by_bits


class MacroTextGenerator:
    """Draws macro-heavy texts from a seeded :class:`random.Random` (same seed, same texts).

    ``max_leaves`` bounds the nesting and concatenation of one text, as in
    :func:`~tavernbox.testing.macro_strategies.macro_templates`.

    Every choice is one ``random()`` scaled to its range (``Random.choice``/``randrange`` cost ~1 us
    each in Python; the bias of scaling is below 2**-50). The sequence of draws, and so every text
    for a seed, is fixed: ``tests/test_macro_generator_speed.py`` holds digests of the outputs, so a
    faster rewrite cannot change what a campaign fuzzes or replays. The grammar is written as
    closures over the bound ``random`` (a Python call per choice was most of the time), branches
    compare the scaled float (``int(x) < k`` is ``x < k`` for ``x >= 0``) and indices use
    :func:`math.floor` (several times cheaper than ``int()`` on a float, and equal for ``x >= 0``).
    """

    def __init__(self, rng: random.Random, max_leaves: int = 12) -> None:
        self.rng = rng
        self.max_leaves = max_leaves
        self._text, self._fragment = _grammar(rng)

    def text(self) -> str:
        """One text: one to five pieces, each a fragment tree or plain text."""
        return self._text(self.max_leaves)

    def fragment(self) -> str:
        """One fragment (for splicing into corpus texts)."""
        return self._fragment()


def _grammar(rng: random.Random) -> tuple[Callable[[int], str], Callable[[], str]]:
    """The grammar's pieces as closures over ``rng``; returns ``(text(max_leaves), fragment())``.

    The order of draws in each piece is the contract (see :class:`MacroTextGenerator`).
    """
    rnd = rng.random
    case = _casing(rng)
    budget = 0

    if _is_plain_random(rng):
        bits = rng.getrandbits

        def plain() -> str:
            n = floor(rnd() * 13.0)
            if n:
                data = bits(64 * n).to_bytes(8 * n, "little")
                try:  # None (a bin split between two characters) cannot be joined
                    return "".join(itemgetter(*_TOP_HALVES[n](data))(_PLAIN_BY_TOP_HALF))
                except TypeError:
                    return _exact_plain(data, n)
            return ""
    else:
        def plain() -> str:
            n = floor(rnd() * 13.0)
            if n:
                return "".join([_PLAIN_ALPHABET[floor(rnd() * _N_PLAIN)] for _ in range(n)])
            return ""

    def child() -> str:
        """A nested piece while the budget lasts, else a leaf."""
        nonlocal budget
        if budget <= 0:
            return leaf()
        budget -= 1
        return node()

    def leaf() -> str:
        x = rnd() * 4.0
        if x < 1.0:
            return plain()
        if x < 2.0:
            return _BROKEN[floor(rnd() * _N_BROKEN)]
        if x < 3.0:
            return inline(True)
        return shorthand(True)

    def node() -> str:
        x = rnd() * 8.0
        if x < 2.0:
            return inline(False)
        if x < 3.0:
            return scoped()
        if x < 4.0:
            return if_else()
        if x < 5.0:
            return shorthand(False)
        if x < 6.0:
            return _BROKEN[floor(rnd() * _N_BROKEN)]
        if x < 7.0:
            out = ""
            for _ in range(2 + floor(rnd() * 3.0)):
                out += child()
            return out
        return plain()

    def arg(leaf: bool) -> str:
        x = rnd() * 3.0
        if x < 1.0:
            return plain()
        if x < 2.0 or leaf:
            return _MEANINGFUL[floor(rnd() * _N_MEANINGFUL)]
        return child()

    def inline(leaf: bool) -> str:
        x = rnd() * 4.0
        if x < 1.0:
            tail = ""
        elif x < 2.0:
            tail = ""
            for _ in range(1 + floor(rnd() * 3.0)):
                tail += "::" + _PADDING[floor(rnd() * 6.0)] + arg(leaf) + _PADDING[floor(rnd() * 6.0)]
        elif x < 3.0:
            tail = ":" + arg(leaf)
        else:
            tail = " " + arg(leaf)
        head = "{{" + _PADDING[floor(rnd() * 6.0)]
        x = rnd() * 5.0  # how many flags: (0, 0, 0, 1, 2)
        if x >= 3.0:
            head += _FLAGS[floor(rnd() * _N_FLAGS)]
            if x >= 4.0:
                head += _FLAGS[floor(rnd() * _N_FLAGS)]
        return head + case(MACRO_NAMES[floor(rnd() * _N_NAMES)]) + tail + _PADDING[floor(rnd() * 6.0)] + "}}"

    def scoped() -> str:
        name = _SCOPED[floor(rnd() * _N_SCOPED)]
        if name in _SCOPED_WITH_VAR:
            opener_args = "::" + _VAR_NAMES[floor(rnd() * _N_VAR_NAMES)]
        elif name == "if":
            if rnd() < 0.7:
                opener_args = " " + _SCOPED_CONDITIONS[floor(rnd() * _N_SCOPED_CONDITIONS)]
            else:
                opener_args = " " + child()
        else:
            opener_args = ""
        flag = "#" if rnd() * 3.0 >= 2.0 else ""  # ("", "", "#")
        body = ""
        for _ in range(floor(rnd() * 4.0)):
            body += plain() if rnd() < 0.5 else child()
        x = rnd() * 4.0  # the closer: (name, name.upper(), name, "other")
        closer = name if x < 1.0 else name.upper() if x < 2.0 else name if x < 3.0 else "other"
        closing = "" if rnd() * 10.0 < 1.0 else "{{/" + closer + "}}"
        return "{{" + flag + case(name) + opener_args + "}}" + body + closing

    def if_else() -> str:
        cond = _IF_CONDITIONS[floor(rnd() * _N_IF_CONDITIONS)] if rnd() < 0.7 else child()
        out = "{{if " + cond + "}}" + (plain() if rnd() < 0.5 else child())
        for _ in range(floor(rnd() * 3.0)):
            out += "{{else}}" + (plain() if rnd() < 0.5 else child())
        if rnd() * 10.0 >= 1.0:
            out += "{{/if}}"
        return out

    def shorthand(leaf: bool) -> str:
        i = floor(rnd() * _N_OPERATORS)
        value = arg(leaf) if _OPERATOR_TAKES_VALUE[i] else ""
        return ("{{" + _PADDING[floor(rnd() * 6.0)] + ("." if rnd() < 0.5 else "$")
                + _VAR_NAMES[floor(rnd() * _N_VAR_NAMES)] + _PADDING[floor(rnd() * 6.0)] + _OPERATORS[i]
                + _PADDING[floor(rnd() * 6.0)] + value + "}}")

    def text(max_leaves: int) -> str:
        nonlocal budget
        out = ""
        for _ in range(1 + floor(rnd() * 5.0)):
            budget = 1 + floor(rnd() * max_leaves)
            out += node() if rnd() < 0.8 else plain()
        return out

    def fragment() -> str:
        nonlocal budget
        budget = 1 + floor(rnd() * 4.0)
        return node()

    return text, fragment
