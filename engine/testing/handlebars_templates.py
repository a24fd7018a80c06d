"""Generated Handlebars story strings with their data: a seeded generator and a Hypothesis strategy.

Both draw from one grammar of story-string material (:class:`StoryStringGenerator`): text with
line breaks, indentation, stray braces and backslashes; mustaches over card fields, ``this``,
``../``, ``@index``/``@key``/``@first``/``@last``/``@root``, segment literals and ``length``;
``{{#if}}``/``{{else if}}``/``{{else}}``, ``{{#unless}}``, ``{{#each}}`` (with block
parameters), ``{{#with}}``, ``{{^x}}``, sections over plain names; sub-expressions, ``lookup``,
``includeZero=``, literals; both comment forms; ``~`` on either side; block tags alone on their
lines (the standalone rules); SillyTavern-style names nothing defines (``{{random::a::b}}``,
``{{trim}}``); and, now and then, a malformed tag. The data mixes strings (empty ones too),
numbers, booleans, ``null``, lists and objects.

``seeded_cases(seed, count)`` is reproducible; ``story_string_cases()`` is the Hypothesis
strategy (it draws the generator's choices, so Hypothesis can shrink them).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

__all__ = ["StoryStringGenerator", "seeded_cases", "story_string_cases"]

T = TypeVar("T")

FIELDS = ("description", "personality", "scenario", "persona", "system", "char", "user", "wiBefore", "wiAfter",
          "mesExamples", "items", "empty", "zero", "flag", "nothing", "obj", "missing")
TEXTS = ("", "\n", " ", "\t", "Hello", " a b ", "line\n", "\n\nx\n", "  \n  ", "{", "}", "\\", "é✓", "x{y}z",
         "a\\{{b}}", "\\\\{{char}}", "\r\n", "--", "~")
SCALARS: tuple[Any, ...] = ("", "text", " padded ", "multi\nline", "0", 0, 1, -1, 1.5, True, False, None,
                            "{{user}}", "ünï", "a,b")


class StoryStringGenerator:
    """One template and its data, from a source of choices (``pick`` and ``number``)."""

    def __init__(self, pick: Callable[[Sequence[Any]], Any], number: Callable[[int, int], int]) -> None:
        self.pick = pick
        self.number = number
        self.names: list[str] = []  # block parameters in scope

    def case(self) -> tuple[str, dict[str, Any]]:
        return self.template(depth=0), self.data()

    # --- data ---------------------------------------------------------------------------------
    def data(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for field in FIELDS:
            if field == "missing" or self.number(0, 4) == 0:
                continue
            data[field] = self.value(field, 0)
        return data

    def value(self, field: str, depth: int) -> Any:
        fixed = {"empty": "", "zero": 0, "nothing": None}
        if field in fixed:
            return fixed[field]
        kind = self.number(0, 9)
        if depth < 2 and (kind == 0 or field == "items"):
            return [self.value("x", depth + 1) for _ in range(self.number(0, 3))]
        if depth < 2 and (kind == 1 or field == "obj"):
            keys = ("name", "1", "a", "0", "text")
            return {self.pick(keys): self.value("x", depth + 1) for _ in range(self.number(0, 3))}
        return self.pick(SCALARS)

    # --- template -----------------------------------------------------------------------------
    def template(self, depth: int) -> str:
        return "".join(self.part(depth) for _ in range(self.number(1, 5)))

    def part(self, depth: int) -> str:
        roll = self.number(0, 19)
        if roll < 6:
            return self.pick(TEXTS)
        if roll < 11:
            return self.mustache()
        if roll < 16 and depth < 3:
            return self.block(depth)
        if roll < 18:
            return self.comment()
        if roll == 18 and self.number(0, 3) == 0:
            return self.pick(("{{/if}}", "{{else}}", "{{#if a}}", "{{foo", "{{> partial}}", "{{foo bar=}}",
                              "{{a.[b}}", "{{../}}", "{{foo/../bar}}", "{{#each}}{{/each}}", "{{", "}}", "{{x.1}}"))
        return "\n" + self.pick(("", "  ", "\t")) + self.block(depth) + "\n" if depth < 3 else "\n"

    def tilde(self) -> str:
        return "~" if self.number(0, 4) == 0 else ""

    def path(self) -> str:
        roll = self.number(0, 14)
        if roll < 6:
            return self.pick(FIELDS)
        if roll == 6:
            return self.pick(("this", ".", "this.name", "./description"))
        if roll == 7:
            return "../" + self.pick(FIELDS)
        if roll == 8:
            return "@" + self.pick(("index", "key", "first", "last", "root.description", "root", "../index"))
        if roll == 9:
            return self.pick(FIELDS) + "." + self.pick(("length", "name", "[1]", "[0]", "a"))
        if roll == 10 and self.names:
            return self.pick(self.names)
        if roll == 11:
            return self.pick(("[description]", "[a b]", "obj/name", "obj.[1]"))
        if roll == 12:
            return self.pick(("random::a::b", "trim", "roll:1d6", "lastMessage", "setvar::x::1", "helperMissing"))
        return self.pick(FIELDS)

    def param(self) -> str:
        roll = self.number(0, 9)
        if roll < 5:
            return self.path()
        if roll < 8:
            return self.pick(('"str"', "'s q'", '"a \\"q\\""', "1", "0", "-2", "1.50", "true", "false", "null",
                              "undefined"))
        helper = self.pick(("lookup", "lookup", "trim", "foo", "random::x::y", "if"))
        return "(" + helper + " " + self.path() + " " + self.param() + ")"

    def mustache(self) -> str:
        open_, close = self.pick((("{{", "}}"), ("{{", "}}"), ("{{{", "}}}"), ("{{&", "}}")))
        inner = self.path()
        roll = self.number(0, 7)
        if roll == 0:
            inner = "lookup " + self.path() + " " + self.param()
        elif roll == 1 and self.number(0, 2) == 0:
            inner = self.path() + " " + self.param()
        elif roll == 2:
            inner = self.pick(('"description"', "1", "true", "null"))
        start = open_[:2] + self.tilde() + open_[2:]
        end = close[:-2] + self.tilde() + close[-2:] if close == "}}" else "}" + self.tilde() + "}}"
        return f"{start}{self.pick(('', ' '))}{inner}{self.pick(('', ' '))}{end}"

    def comment(self) -> str:
        body = self.pick(("", " note ", "multi\nline", "}", "--"))
        if self.number(0, 1):
            return "{{" + self.tilde() + "!--" + body + "--" + self.tilde() + "}}"
        return "{{" + self.tilde() + "!" + body.replace("}", "") + self.tilde() + "}}"

    def block(self, depth: int) -> str:
        kind = self.pick(("if", "if", "unless", "each", "with", "section", "inverse", "each_as"))
        helper = kind
        args = " " + self.param()
        params: list[str] = []
        if kind == "section":
            helper, args = self.pick(FIELDS + ("random::a::b",)), ""
        elif kind == "inverse":
            helper, args = self.pick(("if", "each", "with") + FIELDS), ""
            if helper in ("if", "each", "with"):
                args = " " + self.path()
        elif kind == "each_as":
            helper = self.pick(("each", "with"))
            params = ["item", "idx"] if helper == "each" else ["item"]
            args = " " + self.path() + " as |" + " ".join(params) + "|"
        if kind == "if" and self.number(0, 5) == 0:
            args += " includeZero=" + self.pick(("true", "false"))
        opener = "^" if kind == "inverse" else "#"
        self.names.extend(params)
        body = self.template(depth + 1)
        for name in params:
            self.names.remove(name)
        inverse = ""
        roll = self.number(0, 5)
        if roll == 0:
            inverse = "{{" + self.tilde() + "else" + self.tilde() + "}}" + self.template(depth + 1)
        elif roll == 1:
            inverse = "{{" + self.tilde() + "^" + self.tilde() + "}}" + self.template(depth + 1)
        elif roll == 2 and kind != "inverse":
            inverse = "{{else if " + self.param() + self.tilde() + "}}" + self.template(depth + 1)
            if self.number(0, 1):
                inverse += "{{else}}" + self.template(depth + 1)
        lines = self.number(0, 2) == 0
        nl = ("\n" + self.pick(("", "  "))) if lines else ""
        close_name = helper if self.number(0, 30) else "other"
        return (f"{{{{{self.tilde()}{opener}{helper}{args}{self.tilde()}}}}}{nl}{body}{nl}{inverse}{nl}"
                f"{{{{{self.tilde()}/{close_name}{self.tilde()}}}}}")


def seeded_cases(seed: int, count: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """``count`` reproducible cases from ``seed``."""
    rng = random.Random(seed)
    for _ in range(count):
        yield StoryStringGenerator(rng.choice, rng.randint).case()


def story_string_cases() -> Any:
    """A Hypothesis strategy of ``(template, data)``."""
    from hypothesis import strategies as st

    @st.composite
    def cases(draw: Any) -> tuple[str, dict[str, Any]]:
        def pick(options: Sequence[T]) -> T:
            return draw(st.sampled_from(options))

        def number(low: int, high: int) -> int:
            return draw(st.integers(low, high))

        return StoryStringGenerator(pick, number).case()

    return cases()
