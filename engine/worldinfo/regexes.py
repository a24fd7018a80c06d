"""JavaScript regex keys (``/pattern/flags``) translated to the ``regex`` package, matched with a time bound.

World-book regex keys are written by strangers for a JavaScript engine. We translate the pattern
token by token into the ``regex`` package's syntax so that the JavaScript meaning is kept (ASCII
``\\w``/``\\d``/``\\b``, JavaScript's ``\\s`` set, ``.`` excluding the four line terminators, ``$``
only at the very end without ``m``, backreferences to unset groups matching empty, identity
escapes), and run every search with ``timeout=`` so a catastrophic pattern costs a bounded amount of
time instead of hanging the scan.

Three outcomes, mirroring SillyTavern where it has an opinion:

* not regex syntax at all (no ``/.../flags`` shape, or an unescaped ``/`` inside): a plain key;
* regex syntax that JavaScript would reject: SillyTavern falls back to matching the key as plain
  text, so do we, with a ``WI_REGEX_INVALID`` diagnostic;
* a pattern we cannot translate faithfully, or one whose search timed out: refused
  (``WI_REGEX_REFUSED``), and the key does not match.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import regex

from .jsregex import JsRegexError, js_compile_error, js_search, js_search_at

__all__ = ["JsRegex", "RegexStatus", "fold_for_literal", "js_regex_resume", "js_regex_search", "parse_js_regex",
           "required_literal", "stays_within_pieces", "translate_js_regex"]

#: How long one search may take before the key is refused (seconds).
DEFAULT_TIMEOUT = 0.1
#: A regex key's pattern longer than this is refused unread: translating and analysing it is
#: linear but not free (a 60 KB pattern cost a second), and no real key comes near it.
MAX_PATTERN_CHARS = 16 * 1024

_SHAPE = re.compile(r"/([\s\S]+?)/([gimsuy]*)", re.DOTALL)
_UNESCAPED_SLASH = re.compile(r"(?:^|[^\\])/")

#: JavaScript's ``\s``: ASCII whitespace, the Unicode space separators, line terminators and BOM.
JS_SPACE = "\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_WORD = "A-Za-z0-9_"
_DIGIT = "0-9"
_LINE_TERMINATORS = "\\n\\r\\u2028\\u2029"

RegexStatus = Literal["ok", "invalid", "refused"]


class _Invalid(Exception):
    """JavaScript would reject the pattern (SyntaxError)."""


class _Unsupported(Exception):
    """JavaScript accepts the pattern but we cannot translate it faithfully."""


@dataclass(frozen=True, slots=True)
class JsRegex:
    """A parsed ``/pattern/flags`` key. ``compiled`` (the ``regex`` package's translation) is made
    on first use by a search that runs on that package (see :data:`SEARCH_ENGINE`)."""

    source: str
    pattern: str
    flags: str
    status: RegexStatus
    compiled: regex.Pattern[str] | None = None
    sticky: bool = False
    reason: str = ""
    #: whether the pattern never looks past the text it consumes (no lookahead, ``$`` or ``\b``),
    #: so a search of a longer text can resume where a search of its prefix left off
    resumable: bool = False
    #: ASCII word characters every match contains, in this order (lower-cased under ``i``; see
    #: :func:`required_literal`): a text without them cannot match, so no search is needed
    literal: str | None = None
    ignore_case: bool = False
    #: the pattern begins with :attr:`literal`, so every match starts where the literal occurs
    literal_at_start: bool = False
    #: no match can contain U+0001, the character that begins every message and recursion piece of
    #: a scanned text (see :func:`stays_within_pieces`), so no match spans two pieces (at most one
    #: ends with the newline before the next piece's U+0001)
    within_pieces: bool = False


@functools.lru_cache(maxsize=4096)
def parse_js_regex(key: str) -> JsRegex | None:
    """The key as a regex, or ``None`` when it is not written as one (then it is a plain key).

    The shape test copies SillyTavern's: ``/pattern/flags`` with flags from ``gimsuy`` and no
    unescaped ``/`` inside the pattern; the first ``\\/`` is then unescaped. Parsed keys are cached
    (compiling is the slow part), so a key refused after a timeout stays refused.
    """
    m = _SHAPE.fullmatch(key)
    if m is None:
        return None
    pattern, flags = m.group(1), m.group(2)
    if _UNESCAPED_SLASH.search(pattern):
        return None
    pattern = pattern.replace("\\/", "/", 1)
    if len(set(flags)) != len(flags):
        return JsRegex(key, pattern, flags, "invalid", reason="duplicate flag")
    if len(pattern) > MAX_PATTERN_CHARS:
        return JsRegex(key, pattern, flags, "refused",
                       reason=f"the pattern has {len(pattern)} characters; the limit is {MAX_PATTERN_CHARS}")
    try:
        translated = translate_js_regex(pattern, flags)
    except _Invalid as exc:
        return JsRegex(key, pattern, flags, "invalid", reason=str(exc))
    except _Unsupported as exc:
        return JsRegex(key, pattern, flags, "refused", reason=str(exc))
    compiled: regex.Pattern[str] | None = None
    if SEARCH_ENGINE == "quickjs":
        # JavaScript itself says whether the pattern compiles (QuickJS compiles in linear time;
        # the ``regex`` package took seconds for a 60 KB key, without a way to stop it)
        problem = js_compile_error(pattern, flags)
        if problem is not None:
            return JsRegex(key, pattern, flags, "invalid", reason=problem)
    else:
        try:
            compiled = _compile(translated, flags)
        except (_rx().error, OverflowError, RecursionError, ValueError) as exc:
            return JsRegex(key, pattern, flags, "invalid", reason=str(exc))
    resumable = "y" not in flags and not any(t in translated for t in ("(?=", "(?!", "\\Z"))
    found = _required_run(pattern)
    literal, at_start = (None, False) if found is None else found
    ignore_case = "i" in flags
    if literal is not None and ignore_case:
        literal = literal.lower()
    return JsRegex(key, pattern, flags, "ok", compiled, sticky="y" in flags, resumable=resumable, literal=literal,
                   ignore_case=ignore_case, literal_at_start=at_start, within_pieces=stays_within_pieces(pattern))


#: escapes after which a pattern may match U+0001: ``\D``, ``\W``, ``\S`` (complements), ``\c``
#: (``\cA`` is U+0001), ``\p``/``\P`` (properties), digits (``\1`` is U+0001 when no group 1 exists)
_MAY_MATCH_SOH = frozenset("DWScpP0123456789")


def _is_hex(digits: str) -> bool:
    return bool(digits) and all(c in "0123456789abcdefABCDEF" for c in digits)


def stays_within_pieces(pattern: str) -> bool:
    """Whether no match of the JavaScript ``pattern`` (whatever its flags) can contain U+0001.

    A scanned text puts U+0001 at the start of every message and recursion piece
    (``scan.MATCHER``), so a match of such a pattern lies within one piece and the newline that
    ends it: text added after a joint can complete no match begun before it but one that ends at
    that newline. Conservative: a pattern is refused for any
    construct that could consume U+0001 (``.``, a negated class, ``\\D`` ``\\W`` ``\\S``, a numeric or
    control escape, a property, a hex or Unicode escape of U+0001 or in braces, a class range that
    starts with an escape or at U+0000/U+0001, U+0001 itself); everything else matches only the
    characters it names, word, digit and space characters (none of which is U+0001, in any case).
    """
    i, size = 0, len(pattern)
    in_class = False
    last_atom_escape = False  # inside a class: the atom before a "-" (a range's start) was an escape
    while i < size:
        c = pattern[i]
        if c == "\x01" or (c == "\\" and i + 1 >= size):
            return False
        if c == "\\":
            e = pattern[i + 1]
            tail = pattern[i + 2:i + 6]
            if e in _MAY_MATCH_SOH or e == "\x01" or (e == "x" and tail[:2] == "01") or \
                    (e == "u" and (tail == "0001" or tail[:1] == "{")):
                return False
            # the whole escape (``\\xHH``, ``\\uHHHH``), so that a range it starts is seen as one
            i += 2 + (2 if e == "x" and _is_hex(tail[:2]) else 4 if e == "u" and _is_hex(tail) else 0)
            last_atom_escape = True
            continue
        if in_class:
            if c == "]":
                in_class = False
            elif c == "-" and i + 1 < size and pattern[i + 1] != "]" and (last_atom_escape or pattern[i - 1] <= "\x01"):
                return False
            last_atom_escape = False
        elif c == ".":
            return False
        elif c == "[":
            if pattern.startswith("[^", i):
                return False
            in_class = True
            last_atom_escape = False
        i += 1
    return True


_QUANTIFIER = re.compile(r"\{\d+(?:,\d*)?\}")
#: what may follow a backslash as part of one escape (``\x41``, ``\u{1F600}``, ``\k<name>``, ``\p{L}``)
_ESCAPE_TAIL = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_{}<>,=")


def _is_word_char(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c == "_")


def required_literal(pattern: str) -> str | None:
    """The longest run of ASCII word characters that every match of the JavaScript ``pattern`` contains.

    Conservative by construction: only characters written plainly at the top level (outside any
    group, class or escape) and not made optional or counted by a quantifier, in a pattern with no
    top-level ``|``. Such characters are matched one after another by every match, so a text
    that does not contain the run (case-folded with :func:`fold_for_literal` under ``i``) cannot
    match, and the search can be skipped. ``None`` when there is no such run.
    """
    found = _required_run(pattern)
    return None if found is None else found[0]


def _required_run(pattern: str) -> tuple[str, bool] | None:
    """:func:`required_literal` and whether the pattern begins with it."""
    runs: list[tuple[int, str]] = []
    run_start = 0
    current: list[str] = []
    depth = 0
    in_class = False
    i, n = 0, len(pattern)

    def flush() -> None:
        if current:
            runs.append((run_start, "".join(current)))
            current.clear()

    while i < n:
        c = pattern[i]
        if c == "\\":
            flush()
            i += 2
            while i < n and pattern[i] in _ESCAPE_TAIL:  # the rest of a longer escape, conservatively
                i += 1
            continue
        if in_class:
            in_class = c != "]"
            i += 1
            continue
        if c == "[":
            flush()
            in_class = True
            i += 1
            if i < n and pattern[i] == "^":
                i += 1
            if i < n and pattern[i] == "]":  # JavaScript's empty class "[]" (or "[^]") ends here
                in_class = False
                i += 1
            continue
        if c == "(":
            flush()
            depth += 1
        elif c == ")":
            flush()
            depth -= 1
        elif c == "|":
            if depth == 0:
                return None
        elif c == "{":
            flush()
            m = _QUANTIFIER.match(pattern, i)
            if m:
                i = m.end()
                continue
        elif depth == 0 and _is_word_char(c):
            nxt = pattern[i + 1] if i + 1 < n else ""
            if nxt in ("?", "*", "{"):  # optional or counted: not required as written
                flush()
            else:
                if not current:
                    run_start = i
                current.append(c)
                if nxt == "+":
                    flush()
        else:
            flush()
        i += 1
    flush()
    if not runs or depth != 0:
        return None
    start, literal = max(runs, key=lambda run: len(run[1]))
    return literal, start == 0


#: characters the ``regex`` package matches to an ASCII letter case-insensitively although their
#: lower case is not that letter (found by testing every code point): dotted and dotless I, long
#: s, Kelvin sign
_FOLD_TO_ASCII = {0x130: "i", 0x131: "i", 0x17F: "s", 0x212A: "k"}


def fold_for_literal(text: str) -> str:
    """``text`` as :attr:`JsRegex.literal` is compared under the ``i`` flag (one character each).

    The characters mapped first are none of them ASCII, so an ASCII text is only lower-cased.
    """
    if text.isascii():
        return text.lower()
    return text.translate(_FOLD_TO_ASCII).lower()


def _rx() -> Any:
    """The ``regex`` package, imported when a book first has a regex key (most have none, and
    importing it is a tenth of a command's start-up)."""
    import regex

    return regex


def _compile(translated: str, flags: str) -> regex.Pattern[str]:
    rx = _rx()
    return rx.compile(translated, rx.VERSION0 | (rx.IGNORECASE if "i" in flags else 0))  # type: ignore[no-any-return]


def _compiled(rx: JsRegex) -> regex.Pattern[str]:
    """The ``regex`` package's compiled translation, made on first use when QuickJS parsed the key."""
    if rx.compiled is None:
        object.__setattr__(rx, "compiled", _compile(translate_js_regex(rx.pattern, rx.flags), rx.flags))
    assert rx.compiled is not None
    return rx.compiled


#: Which engine runs the searches: ``"quickjs"`` (JavaScript's own, stopped on time whatever the
#: pattern: :mod:`.jsregex`) or ``"regex"`` (the translation; its ``timeout=`` is not honoured by
#: every pattern). Tests switch it to compare the two.
SEARCH_ENGINE = "quickjs"


def _js_search(rx: JsRegex, text: str, pos: int, timeout: float) -> bool:
    """A search by QuickJS; a pattern JavaScript's engine cannot run is refused like a slow one."""
    try:
        return js_search(rx.pattern, rx.flags, text, pos, timeout)
    except JsRegexError as exc:
        object.__setattr__(rx, "status", "refused")
        object.__setattr__(rx, "reason", f"JavaScript's regex engine failed: {exc}")
        raise TimeoutError(str(exc)) from None


def js_regex_resume(rx: JsRegex, text: str, pos: int, timeout: float = DEFAULT_TIMEOUT) -> tuple[bool, int]:
    """Search ``text`` from ``pos`` for a resumable regex: ``(matched, where to resume next time)``.

    With a partial search, a match that runs into the end of ``text`` is reported as partial; no
    match can start before it once the text grows, so the next search starts there (or at the
    end when nothing was even partially matched). Raises ``TimeoutError`` when slow.

    JavaScript has no partial matching, so with QuickJS a miss resumes at ``pos`` again (the
    next, longer text is searched from the same place: correct, only not incremental).
    """
    assert rx.status == "ok" and rx.resumable
    if SEARCH_ENGINE == "quickjs":
        return _js_search(rx, text, pos, timeout), pos
    m = _compiled(rx).search(text, pos, partial=True, timeout=timeout)
    if m is None:
        return False, len(text)
    if m.partial:
        return False, m.start()
    return True, m.start()


def js_regex_search_at(rx: JsRegex, text: str, starts: list[int], timeout: float = DEFAULT_TIMEOUT) -> bool:
    """Whether a match starts at one of ``starts`` (increasing code point indices). Raises ``TimeoutError`` when slow.

    The caller's promise: every match that starts at or after ``starts[0]`` starts at one of them
    (the pattern begins with its required literal, and these are all the places it occurs). Then
    this answers what :func:`js_regex_search` from ``starts[0]`` answers, trying those places only.
    """
    assert rx.status == "ok" and not rx.sticky
    if SEARCH_ENGINE != "quickjs" or not starts:
        return bool(starts) and js_regex_search(rx, text, timeout, starts[0])
    try:
        return js_search_at(rx.pattern, rx.flags, text, starts, timeout)
    except JsRegexError as exc:
        object.__setattr__(rx, "status", "refused")
        object.__setattr__(rx, "reason", f"JavaScript's regex engine failed: {exc}")
        raise TimeoutError(str(exc)) from None


def js_regex_search(rx: JsRegex, text: str, timeout: float = DEFAULT_TIMEOUT, pos: int = 0) -> bool:
    """``RegExp.prototype.test`` on a fresh object (lastIndex 0). Raises ``TimeoutError`` when slow.

    ``pos`` > 0 only when no match can start before it (lookbehinds still see the text before it);
    a sticky regex only ever matches at 0.
    """
    assert rx.status == "ok"
    if SEARCH_ENGINE == "quickjs":
        return (pos == 0 or not rx.sticky) and _js_search(rx, text, pos, timeout)
    if rx.sticky:
        return pos == 0 and _compiled(rx).match(text, timeout=timeout) is not None
    return _compiled(rx).search(text, pos, timeout=timeout) is not None


# --------------------------------------------------------------------------------------------
# translation


def _lit(ch: str) -> str:
    """One literal character in pattern syntax."""
    return _rx().escape(ch, special_only=False) if not ch.isalnum() else ch  # type: ignore[no-any-return]


def _class_lit(ch: str) -> str:
    """One literal character inside a character class."""
    return "\\" + ch if ch in "\\]^-[" else (f"\\x{{{ord(ch):x}}}" if not ch.isprintable() else ch)


@dataclass
class _ClassAtom:
    char: str | None = None  # a single character
    positive: str | None = None  # class contents (e.g. "0-9")
    negative: str | None = None  # complement class contents (e.g. "0-9" for \D)


class _Translator:
    def __init__(self, pattern: str, flags: str) -> None:
        self.p = pattern
        self.i = 0
        self.unicode = "u" in flags
        self.dotall = "s" in flags
        self.multiline = "m" in flags
        self.out: list[str] = []
        self.names: dict[str, str] = {}
        self.total_groups, all_names = _count_groups(pattern)
        self.has_named = bool(all_names)
        for n, name in enumerate(all_names):
            if name in self.names:
                raise _Invalid(f"duplicate group name {name!r}")
            self.names[name] = f"n{n}"
        self.can_quantify = False  # whether the previous token may take a quantifier

    # -- helpers ------------------------------------------------------------------------------
    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.p[j] if j < len(self.p) else ""

    def emit(self, s: str, quantifiable: bool = True) -> None:
        self.out.append(s)
        self.can_quantify = quantifiable

    # -- main ---------------------------------------------------------------------------------
    def run(self) -> str:
        depth = 0
        while self.i < len(self.p):
            c = self.p[self.i]
            if c == "\\":
                self.escape()
            elif c == "[":
                self.char_class()
            elif c == "(":
                self.i += 1
                depth += 1
                self.group_open()
            elif c == ")":
                if depth == 0:
                    raise _Invalid("unmatched ')'")
                depth -= 1
                self.i += 1
                self.emit(")")
            elif c in "*+?":
                self.i += 1
                self.quantifier(c)
            elif c == "{":
                m = re.compile(r"\{(\d+)(?:(,)(\d*))?\}").match(self.p, self.i)
                if m:
                    lo, comma, hi = m.group(1), m.group(2), m.group(3)
                    if hi and int(hi) < int(lo):
                        raise _Invalid("numbers out of order in {} quantifier")
                    self.i = m.end()
                    self.quantifier(f"{{{int(lo)}{',' if comma else ''}{int(hi) if hi else ''}}}")
                elif self.unicode:
                    raise _Invalid("lone '{'")
                else:
                    self.i += 1
                    self.emit("\\{")
            elif c in "}]":
                if self.unicode:
                    raise _Invalid(f"lone {c!r}")
                self.i += 1
                self.emit("\\" + c)
            elif c == "|":
                self.i += 1
                self.emit("|", False)
            elif c == ".":
                self.i += 1
                self.emit("[\\s\\S]" if self.dotall else f"[^{_LINE_TERMINATORS}]")
            elif c == "^":
                self.i += 1
                self.emit(f"(?<![^{_LINE_TERMINATORS}])" if self.multiline else "\\A", False)
            elif c == "$":
                self.i += 1
                self.emit(f"(?![^{_LINE_TERMINATORS}])" if self.multiline else "\\Z", False)
            else:
                self.i += 1
                self.emit(_lit(c))
        if depth:
            raise _Invalid("unterminated group")
        return "".join(self.out)

    def quantifier(self, q: str) -> None:
        if not self.can_quantify:
            raise _Invalid("nothing to repeat")
        if self.peek() == "?":
            self.i += 1
            q += "?"
        # a following quantifier is "nothing to repeat" in JavaScript (Python would read it as
        # possessive), so the next token may not be a quantifier
        self.emit(q, False)

    def group_open(self) -> None:
        if self.peek() != "?":
            self.emit("(", False)
            return
        nxt = self.peek(1)
        if nxt == ":":
            self.i += 2
            self.emit("(?:", False)
        elif nxt in "=!":
            self.i += 2
            self.emit("(?" + nxt, False)
        elif nxt == "<" and self.peek(2) in "=!":
            self.i += 3
            self.emit("(?<" + self.p[self.i - 1], False)
        elif nxt == "<":
            end = self.p.find(">", self.i + 2)
            if end < 0:
                raise _Invalid("unterminated group name")
            name = self.p[self.i + 2 : end]
            if name not in self.names:
                raise _Invalid(f"invalid group name {name!r}")
            self.i = end + 1
            self.emit(f"(?P<{self.names[name]}>", False)
        elif nxt.isalpha() or nxt == "-":
            raise _Unsupported("inline modifier groups (?ims-ims:...)")
        else:
            raise _Invalid("invalid group")

    def escape(self) -> None:
        p = self.p
        if self.i + 1 >= len(p):
            raise _Invalid("\\ at end of pattern")
        c = p[self.i + 1]
        self.i += 2
        if c == "d":
            self.emit(f"[{_DIGIT}]")
        elif c == "D":
            self.emit(f"[^{_DIGIT}]")
        elif c == "w":
            self.emit(f"[{_WORD}]")
        elif c == "W":
            self.emit(f"[^{_WORD}]")
        elif c == "s":
            self.emit(f"[{JS_SPACE}]")
        elif c == "S":
            self.emit(f"[^{JS_SPACE}]")
        elif c == "b":
            self.emit(f"(?:(?<=[{_WORD}])(?![{_WORD}])|(?<![{_WORD}])(?=[{_WORD}]))", False)
        elif c == "B":
            self.emit(f"(?:(?<=[{_WORD}])(?=[{_WORD}])|(?<![{_WORD}])(?![{_WORD}]))", False)
        elif c.isdigit() and c != "0":
            self.backref_or_octal(c)
        elif c == "k":
            if self.unicode or self.has_named:
                m = re.compile(r"<([^>]*)>").match(p, self.i)
                if not m or m.group(1) not in self.names:
                    raise _Invalid("invalid named reference")
                self.i = m.end()
                name = self.names[m.group(1)]
                self.emit(f"(?({name})(?P={name}))")
            else:
                self.emit("k")
        elif c in "pP" and self.unicode:
            m = re.compile(r"\{([A-Za-z_=]+)\}").match(p, self.i)
            if not m:
                raise _Invalid("invalid property name")
            self.i = m.end()
            self.emit(f"\\{c}{{{m.group(1)}}}")
        else:
            self.emit(_lit(self.char_escape(c)))

    def backref_or_octal(self, first: str) -> None:
        j = self.i
        while j < len(self.p) and self.p[j].isdigit():
            j += 1
        number = first + self.p[self.i : j]
        if int(number) <= self.total_groups:
            self.i = j
            self.emit(f"(?({int(number)})\\g<{int(number)}>)")
            return
        if self.unicode:
            raise _Invalid("invalid escape")
        if first in "89":
            self.emit(first)
            return
        self.emit(_lit(self.legacy_octal(first)))

    def legacy_octal(self, first: str) -> str:
        digits = first
        while len(digits) < 3 and self.peek() in "01234567" and self.peek() != "":
            if int(digits + self.peek(), 8) > 0o377:
                break
            digits += self.peek()
            self.i += 1
        return chr(int(digits, 8))

    def char_escape(self, c: str) -> str:
        """A character escape (after the backslash) that stands for one character."""
        simple = {"f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
        if c in simple:
            return simple[c]
        if c == "0":
            if self.peek().isdigit():
                if self.unicode:
                    raise _Invalid("invalid decimal escape")
                return self.legacy_octal("0")
            return "\0"
        if c == "c":
            letter = self.peek()
            if letter.isascii() and letter.isalpha():
                self.i += 1
                return chr(ord(letter) % 32)
            if self.unicode:
                raise _Invalid("invalid unicode escape")
            self.i -= 1  # "\c" stands for a backslash and the "c" is read next
            return "\\"
        if c == "x":
            m = re.compile(r"[0-9A-Fa-f]{2}").match(self.p, self.i)
            if m:
                self.i = m.end()
                return chr(int(m.group(), 16))
            if self.unicode:
                raise _Invalid("invalid escape")
            return "x"
        if c == "u":
            m = re.compile(r"[0-9A-Fa-f]{4}").match(self.p, self.i)
            if m:
                self.i = m.end()
                code = int(m.group(), 16)
                if self.unicode and 0xD800 <= code <= 0xDBFF:
                    m2 = re.compile(r"\\u(d[c-f][0-9a-f]{2})", re.I).match(self.p, self.i)
                    if m2:
                        self.i = m2.end()
                        low = int(m2.group(1), 16)
                        return chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00))
                return chr(code)
            if self.unicode:
                m = re.compile(r"\{([0-9A-Fa-f]+)\}").match(self.p, self.i)
                if m and int(m.group(1), 16) <= 0x10FFFF:
                    self.i = m.end()
                    return chr(int(m.group(1), 16))
                raise _Invalid("invalid unicode escape")
            return "u"
        if self.unicode and c not in "^$\\.*+?()[]{}|/-":
            raise _Invalid("invalid escape")
        return c

    # -- character classes --------------------------------------------------------------------
    def char_class(self) -> None:
        self.i += 1
        negated = self.peek() == "^"
        if negated:
            self.i += 1
        atoms: list[_ClassAtom] = []
        items: list[str] = []
        complements: list[str] = []
        while True:
            if self.i >= len(self.p):
                raise _Invalid("unterminated character class")
            if self.peek() == "]":
                self.i += 1
                break
            atom = self.class_atom()
            if atom.char is not None and self.peek() == "-" and self.peek(1) not in ("]", ""):
                save = self.i
                self.i += 1
                hi = self.class_atom()
                if hi.char is None:
                    if self.unicode:
                        raise _Invalid("invalid character class range")
                    atoms.extend([atom, _ClassAtom(char="-"), hi])
                    continue
                if ord(hi.char) < ord(atom.char):
                    raise _Invalid("range out of order in character class")
                items.append(f"{_class_lit(atom.char)}-{_class_lit(hi.char)}")
                del save
                continue
            if atom.char is None and self.peek() == "-" and self.peek(1) not in ("]", "") and self.unicode:
                raise _Invalid("invalid character class range")
            atoms.append(atom)
        for a in atoms:
            if a.char is not None:
                items.append(_class_lit(a.char))
            elif a.positive is not None:
                items.append(a.positive)
            elif a.negative is not None:
                complements.append(a.negative)
        alternatives = ([f"[{''.join(items)}]"] if items else []) + [f"[^{c}]" for c in complements]
        if not alternatives:
            self.emit("[\\s\\S]" if negated else "(?!)")
            return
        union = alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")"
        if negated:
            if not complements:
                self.emit(f"[^{''.join(items)}]")
            else:
                self.emit(f"(?:(?!{union})[\\s\\S])")
        else:
            self.emit(union)

    def class_atom(self) -> _ClassAtom:
        c = self.p[self.i]
        if c != "\\":
            self.i += 1
            return _ClassAtom(char=c)
        if self.i + 1 >= len(self.p):
            raise _Invalid("\\ at end of pattern")
        e = self.p[self.i + 1]
        self.i += 2
        table = {"d": (_DIGIT, None), "D": (None, _DIGIT), "w": (_WORD, None), "W": (None, _WORD),
                 "s": (JS_SPACE, None), "S": (None, JS_SPACE)}
        if e in table:
            pos, neg = table[e]
            return _ClassAtom(positive=pos, negative=neg)
        if e == "b":
            return _ClassAtom(char="\b")
        if e == "-" and self.unicode:
            return _ClassAtom(char="-")
        if e.isdigit() and e != "0":
            if self.unicode:
                raise _Invalid("invalid class escape")
            if e in "89":
                return _ClassAtom(char=e)
            return _ClassAtom(char=self.legacy_octal(e))
        if e in "pP" and self.unicode:
            m = re.compile(r"\{([A-Za-z_=]+)\}").match(self.p, self.i)
            if not m:
                raise _Invalid("invalid property name")
            self.i = m.end()
            if e == "p":
                return _ClassAtom(positive=f"\\p{{{m.group(1)}}}")
            return _ClassAtom(negative=f"\\p{{{m.group(1)}}}")
        if e == "c" and not self.unicode:
            nxt = self.peek()
            if nxt.isdigit() or nxt == "_":
                self.i += 1
                return _ClassAtom(char=chr(ord(nxt) % 32))
        return _ClassAtom(char=self.char_escape(e))


def _count_groups(pattern: str) -> tuple[int, list[str]]:
    """Capturing groups and group names in a JavaScript pattern (for backreference decisions)."""
    count = 0
    names: list[str] = []
    i = 0
    in_class = False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
        elif c == "[":
            in_class = True
        elif c == "(":
            if pattern.startswith("(?<", i) and pattern[i + 3 : i + 4] not in ("=", "!"):
                end = pattern.find(">", i)
                if end > 0:
                    names.append(pattern[i + 3 : end])
                count += 1
            elif not pattern.startswith("(?", i):
                count += 1
        i += 1
    return count, names


def translate_js_regex(pattern: str, flags: str = "") -> str:
    """The ``regex``-package pattern with the JavaScript meaning of ``pattern`` under ``flags``.

    Raises ``_Invalid`` for syntax JavaScript rejects and ``_Unsupported`` for syntax we refuse.
    """
    return _Translator(pattern, flags).run()
