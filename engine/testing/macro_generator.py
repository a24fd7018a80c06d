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

What a seed draws is fixed (campaigns are replayed from their seed): every choice is one
``random()`` on the given :class:`random.Random`, scaled to its range, in a fixed order, and
``tests/test_macro_generator_speed.py`` pins digests of the texts. The shortcuts below (a name's
casing and a run of plain characters each from one ``getrandbits`` call) consume the same
Mersenne Twister words and give the same characters as those ``random()`` calls would.
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

# ---- draws in bulk ------------------------------------------------------------------------------
# CPython's ``random()`` takes the next two 32-bit Mersenne Twister words ``w0, w1`` and returns
# ``k / 2**53`` with ``k = (w0 >> 5) * 2**26 + (w1 >> 6)`` (exact in a double). ``getrandbits(64 * n)``
# takes the same ``2 * n`` words in the same order, the first as the least significant, so draw
# ``i``'s ``w0`` is bits ``64 * i`` to ``64 * i + 31`` of it. Two runs of draws are read that way,
# for a plain :class:`random.Random` only (a subclass may draw differently; it is drawn from
# through its own ``random()``).


def _case_table(names: tuple[str, ...]) -> dict[str, tuple[int, int, int, int]]:
    """Per name: the bits for its draws, its bytes at a stride of 8, where its letters' case bit
    (0x20) sits in that layout, and its upper case in that layout (see ``_grammar``'s ``case``)."""
    table = {}
    for name in names:
        assert name.isascii(), name
        table[name] = (64 * len(name), 8 * len(name),
                       sum((0x20 if c.isalpha() else 0) << (64 * i) for i, c in enumerate(name)),
                       sum(ord(c.upper()) << (64 * i) for i, c in enumerate(name)))
    return table


# A name's casing is one ``random() < 0.5`` per character (upper when true): true exactly when bit
# 31 of the draw's ``w0`` is clear. Shifted right by 26, that bit is the ASCII case bit (0x20) of
# byte ``8 * i`` in the little-endian bytes, so masking it to the letters and setting it over the
# upper-case name laid out at that stride gives the cased name as every eighth byte.
_CASES = _case_table(MACRO_NAMES + _SCOPED)

# A plain character is ``_PLAIN_ALPHABET[floor(random() * 30)]``. The top 16 bits ``h`` of ``w0`` put
# the draw in ``[h / 2**16, (h + 1) / 2**16)``, and as the character only grows with the draw it is
# the same for every draw in that bin unless a character's boundary falls inside it (28 bins of
# 65536): ``_PLAIN_BY_TOP_HALF[h]`` is that character, or None for those bins, whose characters are
# then computed from both words as ``random()`` computes them (``_exact_plain``).
_MAX_PLAIN = 12
# per run length n: the top 16 bits of each draw's w0 (bytes 2-3 of its 8), and all its words
_TOP_HALVES = tuple(struct.Struct("<" + "2xH4x" * n).unpack for n in range(_MAX_PLAIN + 1))
_WORDS = tuple(struct.Struct("<" + "I" * (2 * n)).unpack for n in range(_MAX_PLAIN + 1))


def _draw_char(k: int) -> str:
    """The plain character of the draw ``random() == k / 2**53``."""
    return _PLAIN_ALPHABET[floor(k * (1.0 / 9007199254740992.0) * _N_PLAIN)]


def _plain_table() -> tuple[str | None, ...]:
    """Per value of a draw's top 16 bits, its plain character, or None where that depends on the rest."""
    size = len(_PLAIN_ALPHABET)
    table: list[str | None] = []
    for index, char in enumerate(_PLAIN_ALPHABET):  # the bins whose lowest draw is this character
        table += [char] * (-(-(index + 1) * 65536 // size) - -(-index * 65536 // size))
    assert len(table) == 65536
    for index in range(1, size + 1):  # a boundary can only fall into the last bin of a run
        top = -(-index * 65536 // size) - 1
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
    """Whether ``rng`` draws with CPython's own ``random()``/``getrandbits`` (nothing overrides them)."""
    cls, own = type(rng), getattr(rng, "__dict__", {})
    return (cls.random is random.Random.random and cls.getrandbits is random.Random.getrandbits
            and "random" not in own and "getrandbits" not in own)


class MacroTextGenerator:
    """Draws macro-heavy texts from a seeded :class:`random.Random` (same seed, same texts).

    ``max_leaves`` bounds the nesting and concatenation of one text, as in
    :func:`~tavernbox.testing.macro_strategies.macro_templates`.

    Speed (``benchmarks/bench_fuzz.py``, ``generate``): ``Random.choice``/``randrange`` cost ~1 us
    each in Python, so every choice is one ``random()`` scaled to its range (the bias is below
    2**-50). A Python call per choice was then most of the time, so the grammar is closures over
    the bound ``random``, branches compare the scaled float (``int(x) < k`` is ``x < k`` for
    ``x >= 0``), indices use :func:`math.floor` (several times cheaper than ``int()`` on a float,
    and equal for ``x >= 0``), and casing and plain runs are read from one ``getrandbits`` each.
    """

    def __init__(self, rng: random.Random, max_leaves: int = 12) -> None:
        self.rng = rng
        self.max_leaves = max_leaves
        self._text, self._fragment = _grammar(rng)

    def __reduce__(self) -> tuple[type[MacroTextGenerator], tuple[random.Random, int]]:
        # the closures cannot be pickled or copied; they are rebuilt over the (copied) rng
        return (MacroTextGenerator, (self.rng, self.max_leaves))

    def text(self) -> str:
        """One text: one to five pieces, each a fragment tree or plain text."""
        return self._text(self.max_leaves)

    def fragment(self) -> str:
        """One fragment (for splicing into corpus texts)."""
        return self._fragment()


def _grammar(rng: random.Random) -> tuple[Callable[[int], str], Callable[[], str]]:
    """The grammar's pieces as closures over ``rng``; returns ``(text(max_leaves), fragment())``.

    The order of the draws in each piece is the contract (see the module's docstring); a nested
    piece is drawn while the budget lasts (``budget > 0``, which it spends), else a leaf.
    """
    rnd = rng.random
    budget = 0

    if _is_plain_random(rng):
        bits = rng.getrandbits
        cases = _CASES

        def case(name: str) -> str:
            width, size, letters, upper = cases[name]
            return ((bits(width) >> 26 & letters) | upper).to_bytes(size, "little")[::8].decode("ascii")

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
        def case(name: str) -> str:
            return "".join([c.upper() if rnd() < 0.5 else c.lower() for c in name])

        def plain() -> str:
            n = floor(rnd() * 13.0)
            if n:
                return "".join([_PLAIN_ALPHABET[floor(rnd() * _N_PLAIN)] for _ in range(n)])
            return ""

    def child() -> str:
        nonlocal budget
        if budget > 0:
            budget -= 1
            return node()
        return leaf()

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
        nonlocal budget
        x = rnd() * 8.0  # inline, inline, scoped, if/else, shorthand, broken, concatenation, plain
        if x < 4.0:
            if x < 2.0:
                return inline(False)
            if x < 3.0:
                return scoped()
            return if_else()
        if x < 6.0:
            if x < 5.0:
                return shorthand(False)
            return _BROKEN[floor(rnd() * _N_BROKEN)]
        if x < 7.0:  # two to four children
            out = ""
            for _ in range(2 + floor(rnd() * 3.0)):
                if budget > 0:
                    budget -= 1
                    out += node()
                else:
                    out += leaf()
            return out
        return plain()

    def arg(leaf_only: bool) -> str:
        nonlocal budget
        x = rnd() * 3.0
        if x < 1.0:
            return plain()
        if x < 2.0 or leaf_only:
            return _MEANINGFUL[floor(rnd() * _N_MEANINGFUL)]
        if budget > 0:
            budget -= 1
            return node()
        return leaf()

    # Pieces are built by f-strings (one allocation each, where ``+`` makes one per operand); their
    # fields are evaluated, and so drawn, left to right, and ``{{{{``/``}}}}`` in them is ``{{``/``}}``.

    def inline(leaf_only: bool) -> str:
        x = rnd() * 4.0  # no arguments, ``::`` arguments, ``:`` argument, `` `` argument
        if x < 1.0:
            tail = ""
        elif x < 2.0:
            tail = ""
            for _ in range(1 + floor(rnd() * 3.0)):
                tail += f"::{_PADDING[floor(rnd() * 6.0)]}{arg(leaf_only)}{_PADDING[floor(rnd() * 6.0)]}"
        elif x < 3.0:
            tail = ":" + arg(leaf_only)
        else:
            tail = " " + arg(leaf_only)
        padding = _PADDING[floor(rnd() * 6.0)]
        x = rnd() * 5.0  # how many flags: (0, 0, 0, 1, 2)
        if x < 3.0:
            flags = ""
        elif x < 4.0:
            flags = _FLAGS[floor(rnd() * _N_FLAGS)]
        else:
            flags = f"{_FLAGS[floor(rnd() * _N_FLAGS)]}{_FLAGS[floor(rnd() * _N_FLAGS)]}"
        return f"{{{{{padding}{flags}{case(MACRO_NAMES[floor(rnd() * _N_NAMES)])}{tail}{_PADDING[floor(rnd() * 6.0)]}}}}}"

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
        closing = "" if rnd() * 10.0 < 1.0 else f"{{{{/{closer}}}}}"
        return f"{{{{{flag}{case(name)}{opener_args}}}}}{body}{closing}"

    def if_else() -> str:
        cond = _IF_CONDITIONS[floor(rnd() * _N_IF_CONDITIONS)] if rnd() < 0.7 else child()
        out = f"{{{{if {cond}}}}}{plain() if rnd() < 0.5 else child()}"
        for _ in range(floor(rnd() * 3.0)):
            out += f"{{{{else}}}}{plain() if rnd() < 0.5 else child()}"
        if rnd() * 10.0 >= 1.0:
            out += "{{/if}}"
        return out

    def shorthand(leaf_only: bool) -> str:
        i = floor(rnd() * _N_OPERATORS)
        value = arg(leaf_only) if _OPERATOR_TAKES_VALUE[i] else ""
        return (f"{{{{{_PADDING[floor(rnd() * 6.0)]}{'.' if rnd() < 0.5 else '$'}"
                f"{_VAR_NAMES[floor(rnd() * _N_VAR_NAMES)]}{_PADDING[floor(rnd() * 6.0)]}{_OPERATORS[i]}"
                f"{_PADDING[floor(rnd() * 6.0)]}{value}}}}}")

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
