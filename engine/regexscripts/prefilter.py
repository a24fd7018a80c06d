"""Which texts a script's pattern cannot match, told without running it.

Most scripts look for a tag or a word (``<UpdateVariable>``, ``seeds:``) that most texts do not hold. When
every match of the pattern contains a run of ASCII word characters written plainly at its top level
(:func:`tavernbox.worldinfo.regexes.required_literal`, the analysis world-info regex keys use), a text
without that run cannot match, and JavaScript need not be asked: the text is left as it is, which is
what the replacement would have given. It matters beyond speed: a pattern whose lookbehind rescans the
text at every position (``(?<=<meow_FM>[\\s\\S]+?)seeds``) costs time quadratic in a text's length,
which a text without ``seeds`` never pays.

The ``findRegex`` text is split into pattern and flags as SillyTavern splits it (see :mod:`.jsreplace`);
a text holding a line terminator other than ``\\n`` is not analysed (Python's ``.`` and JavaScript's
differ on them), nor is one whose flags make the whole text the pattern in ways this reading could get
wrong: anything unclear gives ``None`` (no shortcut).
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

from ..worldinfo.regexes import fold_for_literal, required_literal

__all__ = ["Required", "may_match", "required_text"]

_SLASHED = re.compile(r"(/?)(.+)\1([a-z]*)", re.I | re.A)
_FLAGS_TRIED = re.compile(r"(?!.*?(.).*?\1)[gmixXsuUAJ]+")
_OTHER_TERMINATORS = ("\r", "\u2028", "\u2029")


class Required(NamedTuple):
    """A run every match contains, lower-cased (and compared folded) when the pattern ignores case."""

    literal: str
    ignore_case: bool


@functools.lru_cache(maxsize=4096)
def required_text(find_regex: str) -> Required | None:
    """What every match of the script's pattern contains, or ``None`` when nothing is known."""
    if any(c in find_regex for c in _OTHER_TERMINATORS):
        return None
    parts = _SLASHED.search(find_regex)
    if parts is None:
        return None
    body, flags = parts.group(2), parts.group(3)
    if flags and not _FLAGS_TRIED.fullmatch(flags):
        body, flags = find_regex, ""
    literal = required_literal(body)
    if not literal:
        return None
    ignore_case = "i" in flags
    return Required(literal.lower() if ignore_case else literal, ignore_case)


def may_match(find_regex: str, text: str) -> bool:
    """False only when the pattern certainly finds nothing in ``text``."""
    required = required_text(find_regex)
    if required is None:
        return True
    if required.ignore_case:
        return required.literal in _folded(text)
    return required.literal in text


#: a text folded once for all the case-insensitive scripts that look at it (a chat's texts recur every turn)
_folded = functools.lru_cache(maxsize=4096)(fold_for_literal)
