"""EJS fuzz inputs from a seeded ``random.Random``: the grammar of ``ejs_strategies``, drawn fast.

Why: ``tavernbox fuzz --target ejs`` drew every ``(template, variables)`` case through
Hypothesis, 5-15 ms a case, more than the sandboxed render it then checked. This draws the same
grammar (the same tag kinds, closers, whitespace, expressions, control flow, local functions,
failing tags, tag soup and variables, from the same tables in ``ejs_strategies``) with one
``random()`` call per choice, ~0.1 ms a case. Hypothesis still draws a share of a campaign's
inputs (its generation explores differently and replays the failures it saved).

``profile(templates)`` counts sizes and constructs, so that a faster campaign can be shown not
to come from easier inputs (``tavernbox fuzz`` and ``benchmarks/bench_fuzz.py`` report it).
"""

from __future__ import annotations

import json
import random
import re
import statistics
from collections.abc import Iterable
from typing import Any

__all__ = ["CONSTRUCTS", "EjsCaseGenerator", "profile"]

from .ejs_strategies import (
    BINARY,
    CLOSERS,
    COMMENT_PIECES,
    FAILURES,
    FOR_SOURCES,
    KINDS,
    LITERAL_TEXT,
    LITERALS,
    LOOKUPS,
    N_FLOATS,
    OBJ_KEYS,
    OUTPUT_TAILS,
    SCALAR_FLOATS,
    SCRIPT_AFTER,
    SCRIPT_GAP,
    SCRIPT_LEAD,
    SCRIPT_OPEN,
    SOUP_TOKENS,
    STRING_CHARS,
    TEXT_ATOMS,
    WHITESPACE,
    WRAPPERS,
)


class EjsCaseGenerator:
    """Draws ``(template, variables)`` cases like ``ejs_strategies.ejs_cases()``, from ``rng``.

    Every choice is ``self._pick(list)``: one ``random()`` call. Shapes follow the strategies:
    four in five templates are blocks of up to five parts (three inside a block) nested at most
    two deep, one in five is tag soup of up to ten tokens; expressions nest at most two wrappers.
    """

    def __init__(self, rng: random.Random) -> None:
        self._random = rng.random

    # --- choices ----------------------------------------------------------------------------------

    def _pick(self, items: list[Any]) -> Any:
        return items[int(self._random() * len(items))]

    def _int(self, low: int, high: int) -> int:
        """A uniform integer in ``[low, high]``."""
        return low + int(self._random() * (high - low + 1))

    def _chance(self, p: float) -> bool:
        return self._random() < p

    # --- the template grammar --------------------------------------------------------------------

    def _string_literal(self) -> str:
        return json.dumps("".join(self._pick(STRING_CHARS) for _ in range(self._int(0, 8))), ensure_ascii=False)

    def _atom(self, names: tuple[str, ...]) -> str:
        kinds = 4 if names else 3
        kind = int(self._random() * kinds)
        if kind == 0:
            return self._pick(LITERALS)  # type: ignore[no-any-return]
        if kind == 1:
            return self._pick(LOOKUPS)  # type: ignore[no-any-return]
        if kind == 2:
            return self._string_literal()
        return self._pick(list(names))  # type: ignore[no-any-return]

    def expression(self, names: tuple[str, ...] = (), depth: int = 2) -> str:
        """An expression over ``variables`` and ``names``, at most ``depth`` wrappers deep."""
        if depth == 0 or self._int(0, 2) > 0:
            return self._atom(names)
        wrapper = self._pick(WRAPPERS)
        inner = self.expression(names, depth - 1)
        if wrapper == "binary":
            return f"({inner}{self._pick(BINARY)}{self.expression(names, depth - 1)})"
        if wrapper == "ternary":
            return f"({inner} ? {self._atom(names)} : {self._atom(names)})"
        if wrapper == "await":
            return f"await Promise.resolve({inner})"
        if wrapper == "string":
            return f"String({inner})"
        return f"[{inner}]"

    def _script(self, body: str) -> str:
        return (f"{self._pick(SCRIPT_LEAD)}{self._pick(SCRIPT_OPEN)}{self._pick(SCRIPT_GAP)}{body}"
                f"{self._pick(WHITESPACE)}{self._pick(CLOSERS)}{self._pick(SCRIPT_AFTER)}")

    def _text(self) -> str:
        return "".join(self._pick(TEXT_ATOMS) for _ in range(self._int(0, 4)))

    def _comment(self) -> str:
        return "<%#" + "".join(self._pick(COMMENT_PIECES) for _ in range(self._int(0, 5))) + self._pick(CLOSERS)

    def _output(self, names: tuple[str, ...]) -> str:
        return (self._pick(["<%=", "<%-"]) + self._pick(WHITESPACE) + self.expression(names) + self._pick(OUTPUT_TAILS)
                + self._pick(WHITESPACE) + self._pick(CLOSERS))

    def block(self, depth: int = 0, names: tuple[str, ...] = ()) -> str:
        """A sequence of template parts; ``names`` are the JavaScript locals in scope."""
        parts: list[str] = []
        for _ in range(self._int(0, 5 if depth == 0 else 3)):
            kind = self._pick(KINDS)
            if kind == "text":
                parts.append(self._text())
            elif kind == "output":
                parts.append(self._output(names))
            elif kind == "print":
                args = [self.expression(names) for _ in range(self._int(0, 3))]
                parts.append(self._script(f"print({', '.join(args)});"))
            elif kind == "comment":
                parts.append(self._comment())
            elif kind == "var":
                name = f"v{depth}"
                parts.append(self._script(f"var {name} = {self.expression(names)};"))
                if name not in names:
                    names = (*names, name)
            elif kind == "literal":
                parts.append(self._pick(LITERAL_TEXT))
            elif kind == "failure":
                parts.append(self._pick(FAILURES))
            elif depth < 2:
                parts.append(self._control(kind, depth, names))
        return "".join(parts)

    def _control(self, kind: str, depth: int, names: tuple[str, ...]) -> str:
        """An ``if`` (maybe with ``else``), a ``for`` loop or a local function and its call."""
        if kind == "if":
            out = self._script(f"if ({self.expression(names)}) {{") + self.block(depth + 1, names)
            if self._chance(0.5):
                out += self._script("} else {") + self.block(depth + 1, names)
            return out + self._script("}")
        if kind == "for":
            item = f"it{depth}"
            head = self._pick([f"for (const {item} of {self._pick(FOR_SOURCES)}) {{",
                               f"for (let {item} = 0; {item} < 3; {item}++) {{"])
            return self._script(head) + self.block(depth + 1, (*names, item)) + self._script("}")
        fname = f"part{depth}"
        call = self._pick([f"{fname}(1); {fname}('<b>');", f"[3, 4].forEach({fname});",
                           f"print({fname}(variables.name));"])
        return (self._script(f"function {fname}(p) {{") + self.block(depth + 1, (*names, "p"))
                + self._script("}") + self._script(call))

    def soup(self) -> str:
        return "".join(self._pick(SOUP_TOKENS) for _ in range(self._int(0, 10)))

    def template(self) -> str:
        """A template: a block four times in five, tag soup otherwise (as ``ejs_templates()``)."""
        return self.soup() if self._int(0, 4) == 4 else self.block()

    # --- variables -------------------------------------------------------------------------------

    def _chars(self, most: int) -> str:
        return "".join(self._pick(STRING_CHARS) for _ in range(self._int(0, most)))

    def _scalar(self) -> Any:
        kind = self._int(0, 4)
        if kind == 0:
            return self._int(-1000, 1000)
        if kind == 1:
            return self._pick(SCALAR_FLOATS)
        if kind == 2:
            return self._chance(0.5)
        if kind == 3:
            return None
        return self._chars(6)

    def variables(self) -> dict[str, Any]:
        """The data the templates read: fixed keys, values that stress conversion and escaping."""
        return {
            "name": self._chars(10),
            "n": self._int(-5, 100) if self._chance(0.5) else self._pick(N_FLOATS),
            "items": [self._scalar() for _ in range(self._int(0, 4))],
            "obj": {self._pick(OBJ_KEYS): self._scalar() for _ in range(self._int(0, 3))},
            "flag": self._chance(0.5),
            "nothing": None,
        }

    def case(self) -> tuple[str, dict[str, Any]]:
        return self.template(), self.variables()

    def fragment(self) -> str:
        """A piece to splice into a corpus text: a template or an edge piece."""
        return self.template()


#: What ``profile`` counts in each template: a name and the pattern of one occurrence.
CONSTRUCTS: dict[str, re.Pattern[str]] = {
    "escaped output <%=": re.compile(r"<%="),
    "raw output <%-": re.compile(r"<%-"),
    "script <% / <%_": re.compile(r"<%(?![=\-#%])"),
    "comment <%#": re.compile(r"<%#"),
    "literal <%% / %%>": re.compile(r"<%%|%%>"),
    "closer -%> / _%>": re.compile(r"[-_]%>"),
    "if / else": re.compile(r"\bif \(|\} else \{"),
    "for": re.compile(r"\bfor \("),
    "local function": re.compile(r"\bfunction part"),
    "print(": re.compile(r"\bprint\("),
    "await": re.compile(r"\bawait\b"),
    "failing tag": re.compile("|".join(re.escape(f) for f in FAILURES)),
    "CR or LF": re.compile(r"[\r\n]"),
}


def profile(templates: Iterable[str]) -> dict[str, Any]:
    """Sizes (characters: mean, median, p90, max) and constructs (mean count per template, and
    the share of templates with at least one) of ``templates``."""
    texts = list(templates)
    sizes = sorted(len(t) for t in texts)
    out: dict[str, Any] = {"templates": len(texts)}
    if not texts:
        return out
    out["chars"] = {"mean": statistics.fmean(sizes), "median": statistics.median(sizes),
                    "p90": sizes[int(0.9 * (len(sizes) - 1))], "max": sizes[-1]}
    constructs: dict[str, dict[str, float]] = {}
    for name, pattern in CONSTRUCTS.items():
        counts = [len(pattern.findall(t)) for t in texts]
        constructs[name] = {"per_template": statistics.fmean(counts),
                            "share": sum(1 for c in counts if c) / len(counts)}
    out["constructs"] = constructs
    return out
