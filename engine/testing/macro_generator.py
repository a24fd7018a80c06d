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
from collections.abc import Sequence
from typing import Any

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


class MacroTextGenerator:
    """Draws macro-heavy texts from a seeded :class:`random.Random` (same seed, same texts).

    ``max_leaves`` bounds the nesting and concatenation of one text, as in
    :func:`~tavernbox.testing.macro_strategies.macro_templates`.
    """

    def __init__(self, rng: random.Random, max_leaves: int = 12) -> None:
        self.rng = rng
        self.max_leaves = max_leaves
        self._budget = 0
        self._random = rng.random

    # ``Random.choice``/``randrange``/``randint`` cost ~1 us each in Python (argument checks and
    # ``_randbelow``), two thirds of a text's generation; one ``random()`` scaled to the range
    # draws from the same uniform distribution (the bias is below 2**-50) in a fifth of that
    def _pick(self, seq: Sequence[str] | Sequence[int]) -> Any:
        return seq[int(self._random() * len(seq))]

    def _below(self, n: int) -> int:
        return int(self._random() * n)

    def _int(self, lo: int, hi: int) -> int:
        return lo + int(self._random() * (hi - lo + 1))

    def text(self) -> str:
        """One text: one to five pieces, each a fragment tree or plain text."""
        rng = self.rng
        parts = []
        for _ in range(self._int(1, 5)):
            self._budget = self._int(1, self.max_leaves)
            parts.append(self._node() if rng.random() < 0.8 else self._plain())
        return "".join(parts)

    def fragment(self) -> str:
        """One fragment (for splicing into corpus texts)."""
        self._budget = self._int(1, 4)
        return self._node()

    # ---- pieces ---------------------------------------------------------------------------
    def _plain(self) -> str:
        rnd = self._random
        return "".join([_PLAIN_ALPHABET[int(rnd() * _PLAIN_LEN)] for _ in range(self._int(0, 12))])

    def _name(self) -> str:
        name = self._pick(MACRO_NAMES)
        rnd = self._random
        return "".join([c.upper() if rnd() < 0.5 else c.lower() for c in name])

    def _flags(self) -> str:
        return "".join([self._pick(_FLAGS) for _ in range(self._pick((0, 0, 0, 1, 2)))])

    def _child(self) -> str:
        """A nested piece while the budget lasts, else a leaf."""
        if self._budget <= 0:
            return self._leaf()
        self._budget -= 1
        return self._node()

    def _leaf(self) -> str:
        pick = self._below(4)
        if pick == 0:
            return self._plain()
        if pick == 1:
            return self._pick(_BROKEN)
        if pick == 2:
            return self._inline(leaf=True)
        return self._shorthand(leaf=True)

    def _node(self) -> str:
        pick = self._below(8)
        if pick <= 1:
            return self._inline()
        if pick == 2:
            return self._scoped()
        if pick == 3:
            return self._if_else()
        if pick == 4:
            return self._shorthand()
        if pick == 5:
            return self._pick(_BROKEN)
        if pick == 6:
            return "".join(self._child() for _ in range(self._int(2, 4)))
        return self._plain()

    def _arg(self, leaf: bool = False) -> str:
        pick = self._below(3)
        if pick == 0:
            return self._plain()
        if pick == 1 or leaf:
            return self._pick(_MEANINGFUL)
        return self._child()

    def _inline(self, leaf: bool = False) -> str:
        form = self._below(4)
        if form == 0:
            tail = ""
        elif form == 1:
            tail = "".join(
                "::" + self._pick(_PADDING) + self._arg(leaf) + self._pick(_PADDING) for _ in range(self._int(1, 3))
            )
        elif form == 2:
            tail = ":" + self._arg(leaf)
        else:
            tail = " " + self._arg(leaf)
        return "{{" + self._pick(_PADDING) + self._flags() + self._name() + tail + self._pick(_PADDING) + "}}"

    def _scoped(self) -> str:
        rng = self.rng
        name = self._pick(_SCOPED)
        opener_args = ""
        if name in ("setvar", "setglobalvar"):
            opener_args = "::" + self._pick(_VAR_NAMES)
        elif name == "if":
            opener_args = " " + (self._pick(_SCOPED_CONDITIONS) if rng.random() < 0.7 else self._child())
        flag = self._pick(("", "", "#"))
        body = "".join(self._plain() if rng.random() < 0.5 else self._child() for _ in range(self._int(0, 3)))
        closer = self._pick((name, name.upper(), name, "other"))
        closing = "" if self._below(10) == 0 else "{{/" + closer + "}}"
        cased = "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in name)
        return "{{" + flag + cased + opener_args + "}}" + body + closing

    def _if_else(self) -> str:
        rng = self.rng
        cond = self._pick(_IF_CONDITIONS) if rng.random() < 0.7 else self._child()
        parts = ["{{if " + cond + "}}", self._plain() if rng.random() < 0.5 else self._child()]
        for _ in range(self._int(0, 2)):
            parts += ["{{else}}", self._plain() if rng.random() < 0.5 else self._child()]
        if self._below(10):
            parts.append("{{/if}}")
        return "".join(parts)

    def _shorthand(self, leaf: bool = False) -> str:
        op = self._pick(_OPERATORS)
        value = ""
        if op not in ("", "++", "--"):
            value = self._arg(leaf)
        return (
            "{{" + self._pick(_PADDING) + self._pick(".$") + self._pick(_VAR_NAMES) + self._pick(_PADDING) + op
            + self._pick(_PADDING) + value + "}}"
        )
