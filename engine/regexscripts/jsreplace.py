"""A regex script's find-and-replace run by JavaScript's own engine (QuickJS), stopped on time.

Scripts are JavaScript regular expressions written for ``String.prototype.replace`` with SillyTavern's
replacement function. Both run here as JavaScript, so flags (``g i m s u y``, unknown ones refused),
Unicode, lookbehind, named groups, empty matches and UTF-16 offsets are JavaScript's own:

* the ``findRegex`` text is read as SillyTavern reads it: one expression ``(\\/?)(.+)\\1([a-z]*)``
  (case-insensitive) whose opening slash, when there is one, must close the body too; flags outside
  ``gmixXsuUAJ`` or repeated make the whole text the pattern, with no flags; what JavaScript cannot
  compile (``x``, ``X``, ``U``, ``A``, ``J`` among them) gives no expression, and the script is skipped;
* each match's replacement is the script's ``replaceString`` with ``{{match}}`` turned into ``$0``,
  then every ``$<digits>`` and ``$<name>`` replaced by that capture (the whole match for ``$0``) with
  the trim strings removed from it, an absent or empty capture giving nothing. No other ``$`` pattern
  is read (``$&`` and ``$$`` stay as written): the replacement is a function's result.

SillyTavern then substitutes macros in each match's replacement. Macros are Python's, so a match
whose replacement could hold one (``{``, ``}``, ``<`` or ``\\``) comes back as its own piece for the
caller to expand; otherwise the replaced text comes back whole.

One QuickJS context per thread (a context is not thread-safe) with a memory cap; compiled
expressions are kept by their text (1,000 at most, the oldest dropped, as SillyTavern's cache does).
Nothing but ``RegExp`` and string methods runs: no user code is evaluated.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import quickjs

__all__ = ["JsReplaceError", "Pieces", "js_find_problem", "js_matches", "js_replace", "js_replace_uncached"]

#: bytes the per-thread context may allocate (compiled patterns, backtracking stacks, texts, results)
MEMORY_LIMIT = 256 * 1024 * 1024
#: how long compiling one pattern may take (QuickJS compiles in linear time: a safety net)
COMPILE_TIMEOUT = 1.0

_PROGRAM = r"""
(function () {
  "use strict";
  const compiled = new Map();
  const SLASHED = /(\/?)(.+)\1([a-z]*)/i;
  const FLAGS_SILLYTAVERN_TRIES = /^(?!.*?(.).*?\1)[gmixXsuUAJ]+$/;
  const MAY_HOLD_MACRO = /[{}<\\]/;

  function expressionOf(text) {
    const parts = text.match(SLASHED);
    if (parts === null) throw new SyntaxError("no pattern");
    const flags = parts[3];
    if (flags && !FLAGS_SILLYTAVERN_TRIES.test(flags)) return new RegExp(text);
    return new RegExp(parts[2], flags);
  }

  function lookup(text) {
    let found = compiled.get(text);
    if (found === undefined) {
      try {
        found = { rx: expressionOf(text), problem: null };
      } catch (e) {
        found = { rx: null, problem: String((e && e.message) || e) };
      }
      if (compiled.size >= 1000) compiled.delete(compiled.keys().next().value);
      compiled.set(text, found);
    }
    if (found.rx !== null) found.rx.lastIndex = 0;
    return found;
  }

  function findProblem(text) {
    return lookup(text).problem;
  }

  function matches(text, subject) {
    const found = lookup(text);
    return found.rx !== null && subject.search(found.rx) >= 0;
  }

  // the replacement of one match, SillyTavern's way: {{match}} is $0, then $n / $<name> are captures
  function fill(template, trims, args) {
    let capture = args[0];
    return template.replace(/\$(\d+)|\$<([^>]+)>/g, function (_, number, name) {
      if (number) {
        capture = args[Number(number)];
      } else {
        const groups = args[args.length - 1];
        capture = groups && typeof groups === "object" && groups[name];
      }
      if (!capture) return "";
      let kept = capture;
      for (let i = 0; i < trims.length; i++) kept = kept.replaceAll(trims[i], "");
      return kept;
    });
  }

  // null: the pattern does not compile; a string: the replaced text; else a list of pieces
  // [text, replacement, text, replacement, ..., text] whose replacements need their macros expanded
  function replace(text, subject, replacement, trimsJson) {
    const found = lookup(text);
    const trims = trimsJson ? JSON.parse(trimsJson) : [];
    if (found.rx === null) return null;
    const template = replacement.replace(/{{match}}/gi, "$0");
    const pieces = [];
    let pending = false;
    let from = 0;
    const out = subject.replace(found.rx, function () {
      const filled = fill(template, trims, arguments);
      const named = typeof arguments[arguments.length - 1] === "object";
      const offset = arguments[arguments.length - (named ? 3 : 2)];
      pieces.push(subject.slice(from, offset), String(filled));
      from = offset + arguments[0].length;
      if (!pending && MAY_HOLD_MACRO.test(filled)) pending = true;
      return filled;
    });
    if (!pending) return out;
    pieces.push(subject.slice(from));
    return pieces;
  }

  globalThis.findProblem = findProblem;
  globalThis.matches = matches;
  globalThis.replaceScript = replace;
})();
"""

_SURROGATE = re.compile("[\ud800-\udfff]")


class JsReplaceError(Exception):
    """The replacement threw in JavaScript, or ran out of memory or stack (``str`` says which)."""


class Pieces(list[str]):
    """``[text, replacement, text, ..., text]``: the replaced text whose replacements still need macros."""


class _Engine(threading.local):
    def __init__(self) -> None:
        self.context: quickjs.Context | None = None
        self.functions: dict[str, quickjs.Object] = {}
        self.limit = -1.0

    def function(self, name: str, timeout: float) -> quickjs.Object:
        if self.context is None:
            import quickjs

            context = quickjs.Context()
            context.set_memory_limit(MEMORY_LIMIT)
            context.eval(_PROGRAM)
            self.functions = {n: context.get(n) for n in ("findProblem", "matches", "replaceScript")}
            self.context = context
        if timeout != self.limit:
            self.context.set_time_limit(timeout)  # per call: the clock starts again with each call
            self.limit = timeout
        return self.functions[name]


_engine = _Engine()


def _js_text(text: str) -> str:
    # a lone surrogate cannot cross into the engine; U+FFFD is one UTF-16 unit as it is
    if not text.isascii() and _SURROGATE.search(text) is not None:
        return _SURROGATE.sub("\ufffd", text)
    return text


def _call(name: str, timeout: float, *args: object) -> object:
    function = _engine.function(name, max(timeout, 1e-6))
    import quickjs

    try:
        return function(*args)
    except quickjs.JSException as exc:
        message = str(exc).split("\n", 1)[0]
        if "interrupted" in message:
            raise TimeoutError(f"the regex took longer than {timeout:g} s") from None
        raise JsReplaceError(message) from None
    except MemoryError:
        raise JsReplaceError("out of memory") from None


def js_find_problem(find_regex: str) -> str | None:
    """JavaScript's reason the ``findRegex`` text gives no expression (as SillyTavern reads it), or ``None``."""
    found = _call("findProblem", COMPILE_TIMEOUT, _js_text(find_regex))
    return None if found is None else str(found)


def js_matches(find_regex: str, subject: str, timeout: float) -> bool:
    """Whether the script's expression matches somewhere in ``subject`` (false when it does not compile)."""
    return bool(_call("matches", timeout, _js_text(find_regex), _js_text(subject)))


#: finished replacements kept by their inputs (most recent first out): a chat's old messages are the same
#: text at every turn, and the same output object lets later stages answer from their own caches
_RESULTS: OrderedDict[tuple[str, str, str, tuple[str, ...]], str | None] = OrderedDict()
_RESULTS_LOCK = threading.Lock()
RESULT_CACHE_ENTRIES = 8192
#: texts longer than this are not kept
RESULT_CACHE_TEXT = 64 * 1024
#: the characters (texts and results) all kept entries may hold together; the oldest go first
RESULT_CACHE_CHARS = 16 * 1024 * 1024
_held = [0]


def _cost(key: tuple[str, str, str, tuple[str, ...]], out: str | None) -> int:
    return len(key[1]) + len(out or "") + len(key[0]) + len(key[2])


def js_replace(find_regex: str, subject: str, replacement: str, trims: list[str], timeout: float) -> str | Pieces | None:
    """``subject`` with the script's matches replaced (see the module's docstring).

    Returns ``None`` when the pattern does not compile, a :class:`Pieces` list when a replacement
    may hold macros, else the replaced text. ``trims`` are the trim strings with their macros
    already expanded. Raises ``TimeoutError`` past ``timeout`` seconds and :class:`JsReplaceError`.

    A result without macros to expand depends on nothing but the four inputs, so it is kept
    (:data:`RESULT_CACHE_ENTRIES` of them, texts up to :data:`RESULT_CACHE_TEXT` characters, at most
    :data:`RESULT_CACHE_CHARS` characters in all) and a
    repeated call returns it without running JavaScript; :func:`js_replace_uncached` is the plain path.
    """
    if len(subject) > RESULT_CACHE_TEXT:
        return js_replace_uncached(find_regex, subject, replacement, trims, timeout)
    key = (find_regex, subject, replacement, tuple(trims))
    with _RESULTS_LOCK:
        if key in _RESULTS:
            _RESULTS.move_to_end(key)
            return _RESULTS[key]
    out = js_replace_uncached(find_regex, subject, replacement, trims, timeout)
    if not isinstance(out, Pieces):
        with _RESULTS_LOCK:
            if key not in _RESULTS:
                _RESULTS[key] = out
                _held[0] += _cost(key, out)
            while _RESULTS and (len(_RESULTS) > RESULT_CACHE_ENTRIES or _held[0] > RESULT_CACHE_CHARS):
                old_key, old_out = _RESULTS.popitem(last=False)
                _held[0] -= _cost(old_key, old_out)
    return out


def js_replace_uncached(find_regex: str, subject: str, replacement: str, trims: list[str],
                        timeout: float) -> str | Pieces | None:
    """:func:`js_replace` computed in JavaScript every time."""
    out = _call("replaceScript", timeout, _js_text(find_regex), _js_text(subject), _js_text(replacement),
                json.dumps([_js_text(t) for t in trims], ensure_ascii=False) if trims else "")
    if out is None or isinstance(out, str):
        return out
    return Pieces(json.loads(out.json()))  # type: ignore[attr-defined]
