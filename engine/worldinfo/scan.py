"""The scan buffer: what text an entry's keys are tested against, in SillyTavern's layout.

SillyTavern assembles, per entry, ``"\\x01" + "\\n\\x01".join(newest messages[:depth])``, then the
extra sources the entry opts into, then the scanned injections, then the recursion buffer (left
out during a minimum-activations pass). We keep those pieces apart (``parts``) instead of
building one string per entry: a plain key matches the assembled text exactly when it matches one
of the pieces (the joiner ``\\n\\x01`` is two non-word characters a trimmed key cannot straddle),
so per-piece results can be cached and a recursion step only scans what is new. Regex keys, which
can straddle pieces or anchor on ``$``, get the assembled string (:meth:`ScanBuffer.text`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Callable
from typing import Any, NamedTuple

from ..errors import TemplateError
from .entries import Entry

__all__ = ["EXTRA_SOURCES", "MAX_SCAN_DEPTH", "MATCHER", "JOINER", "ChatTail", "ScanBuffer", "ScanState",
           "chat_scan_messages", "js_trim"]

MAX_SCAN_DEPTH = 1000
MATCHER = "\x01"
JOINER = "\n" + MATCHER

#: JavaScript's ``String.prototype.trim`` set (differs from Python's ``str.strip``).
_JS_WS = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"

#: entry flag -> context field, in the order SillyTavern appends them to the buffer
EXTRA_SOURCES: tuple[tuple[str, str], ...] = (
    ("match_persona_description", "persona_description"),
    ("match_character_description", "character_description"),
    ("match_character_personality", "character_personality"),
    ("match_character_depth_prompt", "character_depth_prompt"),
    ("match_scenario", "scenario"),
    ("match_creator_notes", "creator_notes"),
)


def js_trim(text: str) -> str:
    """``String.prototype.trim``: strips JavaScript's whitespace set, not Python's."""
    return text.strip(_JS_WS)


class ScanState:
    """The loop's scan states (SillyTavern's ``scan_state``)."""

    NONE = 0
    INITIAL = 1
    RECURSION = 2
    MIN_ACTIVATIONS = 3

    NAMES = {0: "none", 1: "initial", 2: "recursion", 3: "min_activations"}


def chat_scan_messages(chat: Any, *, include_names: bool, generation_type: str = "normal",
                       path: str = "$") -> list[str]:
    """The chat as the scan sees it: newest first, system messages left out, each trimmed.

    All messages are returned (their count is the chat length timed effects use); the buffer
    keeps the newest 1000.

    A string is a message's whole scan text. A dict has ``content`` (or ``mes``), and ``name``,
    which is prefixed as ``"Name: "`` when names are included; ``role: "system"`` or
    ``is_system: true`` messages are not scanned. On a swipe the last message is the one being
    replaced, so it is dropped, as SillyTavern does before scanning.
    """
    if not isinstance(chat, Sequence) or isinstance(chat, (str, bytes)):
        raise TemplateError("the chat should be a list of messages", code="INPUT_INVALID", path=path)
    out: list[str] = []
    for i, message in enumerate(chat):
        if isinstance(message, str):
            out.append(message)
            continue
        if not isinstance(message, Mapping):
            raise TemplateError("a chat message should be a string or an object", code="INPUT_INVALID",
                                path=f"{path}[{i}]")
        if message.get("is_system") is True or message.get("role") == "system":
            continue
        content = message.get("content", message.get("mes", ""))
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise TemplateError("a message's content should be a string", code="INPUT_INVALID",
                                path=f"{path}[{i}].content")
        name = message.get("name")
        if include_names and isinstance(name, str) and name:
            content = f"{name}: {content}"
        out.append(content)
    if generation_type == "swipe" and out:
        out.pop()
    out.reverse()
    return [js_trim(m) for m in out]


class ChatTail(NamedTuple):
    """A long chat handed to the scan by its newest part, built only as deep as the scan reads.

    A scan reads at most the newest :data:`MAX_SCAN_DEPTH` messages (usually far fewer: the
    deepest scan depth in play), but the timed effects need the chat's length. A caller holding a
    chat of thousands of messages passes ``ChatTail(length, newest)``: ``newest(n)`` returns the
    newest ``n`` messages (oldest first, in :func:`chat_scan_messages`' forms) and ``length`` is
    how many messages the chat has, every one of them scanned (a narrator message passed as its
    speaker's, as SillyTavern scans it; a hidden one left out of both). The activation asks for
    what its deepest scan reaches (the buffer's :data:`MAX_SCAN_DEPTH` under minimum activations,
    which walk back until the chat's length), so the result is the one the whole chat gives.
    """

    length: int
    newest: Callable[[int], Sequence[Any]]


class Haystack(NamedTuple):
    """What one entry scans: the newest ``depth`` messages plus these extra pieces.

    A named tuple because it keys several per-pass caches that are consulted for every key test:
    its hash and equality then run in C.
    """

    depth: int
    extras: tuple[str, ...]
    recursion: int  # how many recursion-buffer pieces are included (0 during min activations)
    empty: bool = False


class ScanBuffer:
    """Chat messages (newest first), extra sources, injections and the growing recursion buffer."""

    def __init__(self, messages: Sequence[str], *, base_depth: int, context: Mapping[str, str] | None = None,
                 injections: Sequence[str] = ()) -> None:
        self.messages = list(messages[:MAX_SCAN_DEPTH])  # the buffer keeps the newest 1000 messages
        self.base_depth = base_depth
        self.skew = 0
        self.context = dict(context or {})
        self.injections = [i for i in injections if i]
        self.injection_text = JOINER.join(self.injections) if self.injections else None
        self.recursion: list[str] = []
        self._text_cache: dict[Haystack, str] = {}

    def depth(self) -> int:
        """The global scan depth, grown by the minimum-activations skew."""
        return self.base_depth + self.skew

    def advance(self) -> None:
        """One more message for the next minimum-activations pass."""
        self.skew += 1

    def add_recursion(self, text: str) -> None:
        """Append activated content for the next recursion step (empty text is not added)."""
        if text:
            self.recursion.append(text)

    def haystack(self, entry: Entry, state: int) -> Haystack:
        """Which pieces ``entry`` scans in ``state``."""
        depth = entry.scan_depth if entry.scan_depth is not None else self.depth()
        if depth <= 0:
            return Haystack(0, (), 0, empty=True)
        depth = min(depth, MAX_SCAN_DEPTH)
        extras: list[str] = []
        for flag, name in EXTRA_SOURCES:
            if getattr(entry, flag):
                value = self.context.get(name) or ""
                if value:
                    extras.append(value)
        if self.injection_text is not None:
            extras.append(self.injection_text)
        # the initial pass has no recursion text yet; a minimum-activations pass leaves it out
        rec = len(self.recursion) if state == ScanState.RECURSION else 0
        return Haystack(depth, tuple(extras), rec)

    def text(self, hay: Haystack) -> str:
        """The assembled string SillyTavern would scan for this haystack."""
        if hay.empty:
            return ""
        cached = self._text_cache.get(hay)
        if cached is not None:
            return cached
        out = MATCHER + JOINER.join(self.messages[: hay.depth])
        for extra in hay.extras:
            out += JOINER + extra
        if hay.recursion:
            out += JOINER + JOINER.join(self.recursion[: hay.recursion])
        if len(self._text_cache) > 64:
            self._text_cache.clear()
        self._text_cache[hay] = out
        return out
