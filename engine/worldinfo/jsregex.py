"""Regex keys searched by JavaScript's own regex engine (QuickJS), stopped on time.

A world-book regex key is a JavaScript ``RegExp`` in SillyTavern. :mod:`.regexes` translates it to
the ``regex`` package to analyse it (validity, required literals), but that package does not honour
``timeout=`` for every pattern: ``/a?a?...a.../`` with 4,000 of each against 4,000 "a"s ran 19 s
with a 0.1 s limit, and longer ones did not finish. A bounded pre-check cannot prove every
pattern safe, so the searches themselves run here instead: QuickJS's regex engine polls the
interrupt handler while it backtracks, so a search stops within the limit whatever the pattern,
and it has JavaScript's exact semantics (the key's own pattern and flags, nothing translated).

One QuickJS context per thread (a context is not thread-safe), with a memory cap; compiled
``RegExp`` objects are kept in the context by ``flags/pattern``. This module is not the EJS
sandbox: it evaluates no user code, only ``RegExp.prototype.exec`` on a user pattern.
"""

from __future__ import annotations

import re
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import quickjs

__all__ = ["JsRegexError", "js_compile_error", "js_search", "js_search_at"]

#: bytes the per-thread context may allocate (compiled patterns, backtracking stacks, the texts)
MEMORY_LIMIT = 256 * 1024 * 1024

_SEARCH = r"""
(function () {
  const cache = new Map();
  function search(pattern, flags, text, from) {
    const key = flags + "/" + pattern;
    let rx = cache.get(key);
    if (rx === undefined) {
      if (cache.size >= 4096) cache.clear();
      // "g" makes exec start at lastIndex; a sticky regex already does
      rx = new RegExp(pattern, flags.includes("g") || flags.includes("y") ? flags : flags + "g");
      cache.set(key, rx);
    }
    rx.lastIndex = from;
    return rx.exec(text) !== null;
  }
  // the same question asked only at the given places (comma-separated UTF-16 indices): a sticky
  // copy of the regex tries each place exactly as the search above tries it on its way
  function searchAt(pattern, flags, text, starts) {
    const key = "@" + flags + "/" + pattern;
    let rx = cache.get(key);
    if (rx === undefined) {
      if (cache.size >= 4096) cache.clear();
      rx = new RegExp(pattern, flags.includes("y") ? flags : flags + "y");
      cache.set(key, rx);
    }
    const places = starts.split(",");
    for (let k = 0; k < places.length; k++) {
      rx.lastIndex = +places[k];
      if (rx.exec(text) !== null) return true;
    }
    return false;
  }
  function check(pattern, flags) {
    try {
      new RegExp(pattern, flags);
      return null;
    } catch (e) {
      return String(e && e.message);
    }
  }
  globalThis.search = search;
  globalThis.searchAt = searchAt;
  globalThis.check = check;
})();
"""

_SURROGATE = re.compile("[\ud800-\udfff]")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


class JsRegexError(Exception):
    """JavaScript's engine rejected the pattern or ran out of memory or stack (``reason`` says which)."""


class _Engine(threading.local):
    def __init__(self) -> None:
        self.context: quickjs.Context | None = None
        self.search: quickjs.Object | None = None
        self.search_at: quickjs.Object | None = None
        self.check: quickjs.Object | None = None
        self.limit = -1.0

    def ready(self, timeout: float) -> quickjs.Object:
        if self.search is None:
            import quickjs  # on the first regex key: most books have none

            context = quickjs.Context()
            context.set_memory_limit(MEMORY_LIMIT)
            self.context = context
            context.eval(_SEARCH)
            self.search, self.check = context.get("search"), context.get("check")
            self.search_at = context.get("searchAt")
        if timeout != self.limit:
            assert self.context is not None
            self.context.set_time_limit(timeout)  # per call: the clock starts again with each search
            self.limit = timeout
        return self.search


_engine = _Engine()

#: how long compiling one pattern may take (QuickJS compiles in linear time: a safety net)
COMPILE_TIMEOUT = 1.0


def js_compile_error(pattern: str, flags: str) -> str | None:
    """JavaScript's ``SyntaxError`` message for ``new RegExp(pattern, flags)``, or ``None`` when it compiles."""
    if not pattern.isascii() and _SURROGATE.search(pattern) is not None:
        pattern = _SURROGATE.sub("\ufffd", pattern)
    _engine.ready(COMPILE_TIMEOUT)
    assert _engine.check is not None
    import quickjs

    try:
        found = _engine.check(pattern, flags)
    except quickjs.JSException as exc:
        return str(exc).split("\n", 1)[0]
    except MemoryError:
        return "out of memory"
    return None if found is None else str(found)


def js_search(pattern: str, flags: str, text: str, pos: int, timeout: float) -> bool:
    """Whether ``new RegExp(pattern, flags)`` finds a match in ``text`` starting at or after ``pos``.

    ``pos`` is a Python (code point) index; a sticky pattern matches only exactly there.
    Raises ``TimeoutError`` past ``timeout`` seconds and :class:`JsRegexError` when JavaScript
    rejects the pattern or the search runs out of memory or stack.
    """
    text, (pos,) = _for_engine(text, (pos,))
    search = _engine.ready(timeout)
    return _call(search, timeout, pattern, flags, text, pos)


def js_search_at(pattern: str, flags: str, text: str, starts: list[int], timeout: float) -> bool:
    """Whether a match of ``new RegExp(pattern, flags)`` starts exactly at one of ``starts``.

    ``starts`` are Python (code point) indices in increasing order. When every match the plain
    :func:`js_search` could find from ``starts[0]`` starts at one of them (the caller knows: the
    pattern begins with a literal found only there), the answer is the same, while the engine
    tries those places only instead of every index to the end of the text. Raises as
    :func:`js_search`.
    """
    if not starts:
        return False
    text, places = _for_engine(text, starts)
    _engine.ready(timeout)
    assert _engine.search_at is not None
    return _call(_engine.search_at, timeout, pattern, flags, text, ",".join(map(str, places)))


def _for_engine(text: str, positions: tuple[int, ...] | list[int]) -> tuple[str, list[int] | tuple[int, ...]]:
    """``text`` as it can cross into the engine, and code point ``positions`` (increasing) as UTF-16 indices."""
    if text.isascii():
        return text, positions
    if _SURROGATE.search(text) is not None:
        # a lone surrogate cannot cross into the engine; U+FFFD is one UTF-16 unit as it is
        text = _SURROGATE.sub("\ufffd", text)
    out: list[int] = []
    astral, last = 0, 0
    for pos in positions:
        if pos:
            astral += len(_ASTRAL.findall(text, last, pos))  # JavaScript indexes UTF-16 code units
            last = pos
        out.append(pos + astral)
    return text, out


def _call(function: quickjs.Object, timeout: float, *args: object) -> bool:
    import quickjs

    try:
        return bool(function(*args))
    except quickjs.JSException as exc:
        message = str(exc).split("\n", 1)[0]
        if "interrupted" in message:
            raise TimeoutError(f"the search took longer than {timeout:g} s") from None
        raise JsRegexError(message) from None
    except MemoryError:
        raise JsRegexError("out of memory") from None
