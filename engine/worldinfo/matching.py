"""Key matching: plain keys (case, whole words), regex keys, and the indexes that make it linear.

SillyTavern tests each key of each entry against the entry's assembled buffer: a substring test,
or with whole-word matching ``(?:^|\\W)key(?:$|\\W)`` (ASCII ``\\W``; a key containing whitespace falls
back to the substring test), after lower-casing both sides unless case-sensitive. Regex keys run on
the raw buffer and ignore both settings.

Doing that literally costs (entries x keys x text). We get the same answers from indexes built
once per scan:

* a key made only of ASCII word characters matches whole-word exactly when it is one of the
  text's maximal ``[A-Za-z0-9_]+`` runs, so a dict from run to the newest message holding it
  answers in O(1);
* a substring key is found with one ``str.find`` over the concatenated chat; the first hit is
  the newest message containing it, so "matches within depth d" is ``first_hit < d`` for every d;
* other whole-word keys use a compiled boundary regex over the same concatenation.

Extra sources and recursion pieces are separate small parts with their own memo, so a recursion
step scans only the newly added text.
"""

from __future__ import annotations

import bisect
import re
from itertools import chain, repeat
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from typing import Any, NamedTuple
from dataclasses import dataclass, field

from ..errors import Diagnostic
from ..shortcuts import DEFAULT, Shortcuts
from .entries import Entry
from .regexes import (_FOLD_TO_ASCII, DEFAULT_TIMEOUT, JsRegex, fold_for_literal, js_regex_resume, js_regex_search, js_regex_search_at,
                      parse_js_regex)
from .scan import _JS_WS, JOINER, MATCHER, Haystack, ScanBuffer

__all__ = ["KeyMatcher", "TextRuns", "text_runs"]

_WORD_RUN = re.compile(r"[A-Za-z0-9_]+")
#: every ASCII character that is not a word character, to a space (see :func:`word_runs`)
_NON_WORD_TO_SPACE = str.maketrans({chr(c): " " for c in range(128) if not (chr(c).isalnum() or chr(c) == "_")})
#: the same, but for U+0001 (see :meth:`_ChatIndex.words`)
_NON_WORD_BUT_MATCHER_TO_SPACE = {c: r for c, r in _NON_WORD_TO_SPACE.items() if c != 1}


def word_runs(text: str) -> list[str]:
    """The maximal ``[A-Za-z0-9_]+`` runs of ``text`` in order (``_WORD_RUN.findall``).

    An ASCII text is split in C instead: every other character becomes a space, and ``split``
    then cuts at exactly those (twice as fast as the regex on recursion text and chats).
    """
    if text.isascii():
        return text.translate(_NON_WORD_TO_SPACE).split()
    return _WORD_RUN.findall(text)
_PURE_WORD = re.compile(r"[A-Za-z0-9_]+")
_HAS_JS_SPACE = re.compile(f"[{re.escape(_JS_WS)}]")
_NOT_FOUND = 1 << 30
_UNKNOWN: Any = object()
#: the characters :func:`fold_for_literal` maps before lower-casing (elsewhere it lower-cases)
_FOLDED_FIRST = tuple(map(chr, _FOLD_TO_ASCII))


def _folding_differs(text: str) -> bool:
    """Whether :func:`fold_for_literal` of ``text`` differs from lower-casing it (it holds a character folded first)."""
    return not text.isascii() and any(c in text for c in _FOLDED_FIRST)

SUB, WORD, BOUNDED = 0, 1, 2

#: how far back into already-checked text a required-literal check starts (at least the literal's
#: length minus one; a common value lets keys share one case-folded tail)
_FOLD_MARGIN = 64

#: A regex key that begins with its required literal is tried only where the literal occurs (at
#: most this many places), not at every index to the end of the text: the plain search
#: (``Shortcuts(wi_anchored_regex=False)``) tries the same places among all the others.
MAX_ANCHORS = 64
#: places of one literal kept per haystack (past it the plain search runs)
_KEPT_PLACES = 4 * MAX_ANCHORS


def _mode(needle: str, whole_words: bool) -> int:
    """How a plain key is tested: substring, word-run lookup, or bounded search."""
    if not whole_words:
        return SUB
    if needle.isascii() and (needle.isalnum() or needle.replace("_", "a").isalnum()):
        return WORD  # only ASCII word characters (the common case, without a regex call)
    if _HAS_JS_SPACE.search(needle):
        return SUB
    return BOUNDED


_bounded_cache: dict[str, re.Pattern[str]] = {}


def _bounded(needle: str) -> re.Pattern[str]:
    rx = _bounded_cache.get(needle)
    if rx is None:
        if len(_bounded_cache) > 4096:
            _bounded_cache.clear()
        rx = re.compile(r"(?<![A-Za-z0-9_])" + re.escape(needle) + r"(?![A-Za-z0-9_])")
        _bounded_cache[needle] = rx
    return rx


_ASCII_WORD = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def _bounded_find(text: str, needle: str) -> int:
    """Where ``_bounded(needle).search(text)`` matches first, or -1, by ``str.find`` and two checks.

    The regex starts with a lookbehind, which keeps ``re`` from skipping ahead to the literal: it
    tries every position of the text (milliseconds per key on a 15 KB chat). The first occurrence
    of the needle with no ASCII word character on either side is the same answer.
    """
    size = len(needle)
    if not size:
        m = _bounded(needle).search(text)
        return m.start() if m else -1
    end = len(text)
    word = _ASCII_WORD
    pos = text.find(needle)
    while pos >= 0:
        after = pos + size
        if (pos == 0 or text[pos - 1] not in word) and (after >= end or text[after] not in word):
            return pos
        pos = text.find(needle, pos + 1)
    return -1


def _test_text(text: str, needle: str, mode: int) -> bool:
    """One plain test on one string (SillyTavern's ``matchKeys`` after the case transform)."""
    if mode == SUB:
        return needle in text
    return _bounded_find(text, needle) >= 0


@dataclass
class _Part:
    """A standalone piece of the buffer (an extra source or a recursion piece), memoised."""

    text: str
    words: AbstractSet[str] | None = None
    memo: dict[tuple[str, int], bool] = field(default_factory=dict)
    #: ``GRAM``-character windows of the text, at least every window of its word runs (see
    #: :func:`text_windows`), kept once :meth:`KeyMatcher.piece_hits` or :meth:`KeyMatcher.piece_windows` made them
    windows: AbstractSet[str] | None = None
    #: of a recursion piece, when known without reading it (:attr:`KeyMatcher.known_runs`): its word
    #: runs that are keys of the word maps, and the owners of keys found in it (:class:`TextRuns`)
    keyed: AbstractSet[str] | None = None
    owners: AbstractSet[int] | None = None

    def has(self, needle: str, mode: int) -> bool:
        key = (needle, mode)
        hit = self.memo.get(key)
        if hit is None:
            if mode == WORD:
                if self.words is None:
                    self.words = set(word_runs(self.text))
                hit = needle in self.words
            else:
                hit = _test_text(self.text, needle, mode)
            self.memo[key] = hit
        return hit


class _ChatIndex:
    """The chat messages (newest first) in one case variant, indexed for first-hit lookups."""

    def __init__(self, messages: list[str]) -> None:
        self.concat = MATCHER + JOINER.join(messages)
        self.starts: list[int] = []
        pos = 1
        for m in messages:
            self.starts.append(pos)
            pos += len(m) + len(JOINER)
        self._messages = messages
        self._words: dict[str, int] | None = None
        self.memo: dict[tuple[str, int], int] = {}

    def words(self) -> dict[str, int]:
        """Each word run of the messages -> the index of the newest message holding it."""
        if self._words is None:
            messages = self._messages
            concat = self.concat
            if concat.isascii() and concat.count(MATCHER) == len(messages):
                # the messages' runs in one translation and a split per message (each message
                # follows a U+0001 that none holds)
                runs = list(map(str.split, concat.translate(_NON_WORD_BUT_MATCHER_TO_SPACE).split(MATCHER)[1:]))
            else:
                runs = list(map(word_runs, messages))
            # oldest first, so that a newer message's index replaces an older one's
            runs.reverse()
            indices = chain.from_iterable(map(repeat, range(len(messages) - 1, -1, -1), map(len, runs)))
            self._words = dict(zip(chain.from_iterable(runs), indices))
        return self._words

    def first_hit(self, needle: str, mode: int) -> int:
        """Index of the newest message that matches, or a large number when none does."""
        key = (needle, mode)
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        if not self._messages:
            hit = _NOT_FOUND
        elif mode == WORD:
            hit = self.words().get(needle, _NOT_FOUND)
        else:
            if mode == SUB:
                pos = self.concat.find(needle)
            else:
                pos = _bounded_find(self.concat, needle)
            hit = _NOT_FOUND if pos < 0 else bisect.bisect_right(self.starts, pos) - 1
        self.memo[key] = hit
        return hit


PLAIN, EMPTY, REGEX, REFUSED, SLOW = range(5)


class Needle:
    """A key prepared for one (case, whole-word) setting.

    Shared by every entry using the same key under the same settings (and across scans of the same
    books), so the chat lookup and the recursion-piece scan happen once per key, not once per
    entry and pass. Per-scan results live in the :class:`KeyMatcher`.
    """

    __slots__ = ("source", "text", "mode", "cs", "kind", "rx", "invalid", "index", "mapped", "gram", "word_gram",
                 "windows")

    def __init__(self, source: str, text: str, mode: int, cs: bool, kind: int, rx: JsRegex | None,
                 invalid: bool) -> None:
        self.source = source
        self.text = text
        self.mode = mode
        self.cs = cs
        self.kind = kind
        self.rx = rx
        self.invalid = invalid
        #: set when the key index files this word key in a word map (see :meth:`KeyMatcher.piece_hits`)
        self.mapped = False
        #: the bucket window of a key the index files by window (:func:`gram_of`), and whether it is
        #: all word characters; ``None`` for other keys
        self.gram: str | None = None
        self.word_gram = False
        #: of a key the index files by window, every ``GRAM``-character window inside its word runs
        #: (:func:`key_windows`): a text holding the key holds each of them inside a word run
        self.windows: frozenset[str] = frozenset()
        #: where the key index files it (one attribute to read per key of every book, see ``INDEX_*``)
        if kind == PLAIN and not invalid:
            self.index = INDEX_WORD if mode == WORD else INDEX_OTHER
        elif kind == EMPTY:
            self.index = INDEX_EMPTY_INVALID if invalid else INDEX_EMPTY
        else:
            self.index = INDEX_DIRTY


#: how the key index files a needle: word-run dict, gram buckets, always true, or re-tested every pass
INDEX_WORD, INDEX_OTHER, INDEX_EMPTY, INDEX_EMPTY_INVALID, INDEX_DIRTY = range(5)


class KeyMatcher:
    """Answers "does this key match this entry's buffer" with SillyTavern's rules, cached."""

    def __init__(self, buffer: ScanBuffer, *, case_sensitive: bool, whole_words: bool,
                 regex_timeout: float = DEFAULT_TIMEOUT,
                 diagnostics: list[Diagnostic] | None = None,
                 needles: dict[tuple[str, bool, bool], Needle] | None = None,
                 reach: int | None = None, shortcuts: Shortcuts = DEFAULT) -> None:
        self.buffer = buffer
        #: try a regex key that begins with its required literal only where the literal occurs
        #: (``shortcuts.wi_anchored_regex``, see :meth:`_anchors`)
        self._anchored = shortcuts.wi_anchored_regex
        #: search for a key filed by window only when the text holds every window of its word runs
        #: (``shortcuts.wi_key_windows``, see :func:`key_windows`)
        self.key_windows = shortcuts.wi_key_windows
        #: how many searches that filter spared (read by tests, to see the shortcut taken)
        self.spared_by_windows = 0
        #: do not search for a regex's required literal when the text's windows lack its first one
        #: (``shortcuts.wi_literal_windows``, see :meth:`_literal_absent`), and how many searches that spared
        self.literal_windows = shortcuts.wi_literal_windows
        self.literals_spared = 0
        #: recursion piece, case variant -> what :meth:`piece_hits` reads of the piece (:class:`TextRuns`),
        #: when its maker knows it without reading the piece (from its contents'); else ``None``
        self.known_runs: Callable[[int, bool], TextRuns | None] | None = None
        #: how many of the newest messages any scan of this request can look at (``None``: all the
        #: buffer holds); the chat index covers only those, so a long chat costs what is scanned
        self.reach = reach
        self.case_sensitive = case_sensitive
        self.whole_words = whole_words
        self.regex_timeout = regex_timeout
        self.diagnostics = diagnostics if diagnostics is not None else []
        self._chat: dict[bool, _ChatIndex] = {}
        self._parts: dict[tuple[str, bool], _Part] = {}
        self._rec_parts: dict[bool, list[_Part]] = {True: [], False: []}
        self._regex: dict[str, JsRegex | None] = {}
        self._regex_results: dict[tuple[str, Haystack], bool] = {}
        self._regex_progress: dict[tuple[str, int, tuple[str, ...]], tuple[int, int, bool]] = {}
        self._needles: dict[tuple[str, bool, bool], Needle] = needles if needles is not None else {}
        self._chat_hits: dict[Needle, int] = {}
        self._chat_words: dict[bool, dict[str, int]] = {}
        #: per case variant: the windows of the chat (and extra sources) the first pass computed, and
        #: whether they are every window (else only those inside word runs), see :meth:`chat_hit`
        self.chat_grams: dict[bool, tuple[set[str], bool]] = {}
        self._rec: dict[Needle, list[int]] = {}  # [pieces checked, first matching piece or -1]
        #: per case variant: mapped word key -> the first recursion piece holding it, filled by
        #: :meth:`piece_hits` for the first ``_pieces_indexed[cs]`` pieces
        self._piece_words: dict[bool, dict[str, int]] = {True: {}, False: {}}
        self._pieces_indexed: dict[bool, int] = {True: 0, False: 0}
        self._reported: set[tuple[str, str]] = set()
        self.regex_searches = 0
        #: (id of a scanned text, start) -> (that text, its case-folded tail), for required literals
        self._folded: dict[int, tuple[str, str]] = {}  # see :meth:`_fold`
        #: (literal, case-folded, depth, extras) -> the last text searched and every place the literal
        #: occurs in it (``None``: too many), see :meth:`_anchors`
        self._places: dict[tuple[str, bool, int, tuple[str, ...]], tuple[str, list[int] | None]] = {}
        #: (shorter haystack, haystack) -> the longer one's text and where the shorter one's ends in it
        self._old_ends: dict[tuple[Haystack, Haystack], tuple[str, int]] = {}
        #: regex progress key -> (search start, text length up to which the required literal is absent)
        self._literal_seen: dict[tuple[str, int, tuple[str, ...]], tuple[int, int]] = {}
        #: a regex literal -> its first window when that is all word characters, else ``None`` (:meth:`_literal_window`)
        self._literal_windows: dict[str, str | None] = {}
        #: whether case-folding the chat or an extra source differs from lower-casing it (:meth:`_chat_folds_apart`)
        self._folds_apart: bool | None = None
        #: (first piece, end piece, case-folded) -> the pieces' windows, see :meth:`may_hold`
        self._windows_between: dict[tuple[int, int, bool], set[str] | None] = {}

    # -- pieces -----------------------------------------------------------------------------
    def scanned_messages(self) -> list[str]:
        """The messages the chat index covers: the buffer's, up to :attr:`reach`."""
        messages = self.buffer.messages
        return messages if self.reach is None else messages[:self.reach]

    def _chat_index(self, cs: bool) -> _ChatIndex:
        index = self._chat.get(cs)
        if index is None:
            scanned = self.scanned_messages()
            messages = scanned if cs else [m.lower() for m in scanned]
            index = self._chat[cs] = _ChatIndex(messages)
        return index

    def _part(self, text: str, cs: bool) -> _Part:
        part = self._parts.get((text, cs))
        if part is None:
            part = self._parts[(text, cs)] = _Part(text if cs else text.lower())
        return part

    def recursion_part(self, index: int, cs: bool) -> _Part:
        """The ``index``-th recursion piece in one case variant (its word runs' windows, keyed runs and
        key owners filled in when :attr:`known_runs` knows them)."""
        parts = self._rec_parts[cs]
        known_runs = self.known_runs
        while len(parts) <= index:
            text = self.buffer.recursion[len(parts)]
            part = _Part(text if cs else text.lower())
            if known_runs is not None:
                known = known_runs(len(parts), cs)
                if known is not None:
                    part.windows, part.keyed, part.owners = known
            parts.append(part)
        return parts[index]

    def _report(self, rx: JsRegex, code: str, message: str, entry: Entry) -> None:
        if (rx.source, code) in self._reported:
            return
        self._reported.add((rx.source, code))
        self.diagnostics.append(
            Diagnostic(code, message, severity="info" if code == "WI_REGEX_INVALID" else "warning",
                       path=entry.path + ".key" if entry.path else None,
                       data={"book": entry.book, "uid": entry.uid, "key": rx.source})
        )

    def regex_for(self, needle: str) -> JsRegex | None:
        """The parsed regex of a key (``None`` for a plain key), cached."""
        if needle not in self._regex:
            self._regex[needle] = parse_js_regex(needle) if needle.startswith("/") else None
        return self._regex[needle]

    # -- preparing keys -----------------------------------------------------------------------
    def prepare(self, needle: str, entry: Entry) -> Needle:
        """The key ``needle`` (already substituted and trimmed) under ``entry``'s settings."""
        cs = self.case_sensitive if entry.case_sensitive is None else entry.case_sensitive
        ww = self.whole_words if entry.match_whole_words is None else entry.match_whole_words
        return self.prepare_key(needle, cs, ww)

    def prepare_key(self, needle: str, cs: bool, ww: bool) -> Needle:
        """The key ``needle`` (already substituted and trimmed) under resolved case and whole-word settings.

        Runs once per distinct key of a book when its index is built, so the common case (a plain
        key of ASCII word characters) takes no regex call.
        """
        cache_key = (needle, cs, ww)
        prepared = self._needles.get(cache_key)
        if prepared is not None:
            return prepared
        rx = self.regex_for(needle) if needle.startswith("/") else None
        if rx is not None and rx.status == "ok":
            prepared = Needle(needle, needle, SUB, cs, REGEX, rx, False)
        elif rx is not None and rx.status == "refused":
            prepared = Needle(needle, needle, SUB, cs, REFUSED, rx, False)
        else:
            text = needle if cs else needle.lower()
            mode = _mode(text, ww)
            if text == "":
                kind = EMPTY
            elif "\n" in text or "\x01" in text:
                kind = SLOW
                mode = BOUNDED if mode == WORD else mode
            else:
                kind = PLAIN
            prepared = Needle(needle, text, mode, cs, kind, rx, rx is not None)
        self._needles[cache_key] = prepared
        return prepared

    # -- the test ---------------------------------------------------------------------------
    def matches(self, needle: str, entry: Entry, hay: Haystack) -> bool:
        """SillyTavern's ``matchKeys(buffer, needle, entry)`` for the entry's haystack."""
        return self.match(self.prepare(needle, entry), entry, hay)

    def match(self, n: Needle, entry: Entry, hay: Haystack) -> bool:
        """Whether the prepared key ``n`` matches ``entry``'s haystack ``hay``."""
        kind = n.kind
        if kind == PLAIN:
            if n.invalid:
                self._report_invalid(n, entry)
            if hay.empty:
                return False
            if n.mapped:
                # a word key the index maps (most keys of a large book): the chat's word-run dict
                # answers at once, so no per-scan memo is kept for it
                words = self._chat_words.get(n.cs)
                if words is None:
                    words = self._chat_word_map(n.cs)
                hit = words.get(n.text, _NOT_FOUND)
            else:
                hit = self._chat_hits.get(n)
                if hit is None:
                    hit = self.chat_hit(n)
            if hit < hay.depth:
                return True
            for extra in hay.extras:
                if self._part(extra, n.cs).has(n.text, n.mode):
                    return True
            r = hay.recursion
            if r:
                if n.mapped and self._pieces_indexed[n.cs] >= r:
                    # piece_hits already found every mapped word key in these pieces
                    return self._piece_words[n.cs].get(n.text, _NOT_FOUND) < r
                memo = self._rec.get(n)
                if memo is None:
                    memo = self._rec[n] = [0, -1]
                if memo[1] >= 0:
                    return memo[1] < r
                text, mode = n.text, n.mode
                parts = self._rec_parts[n.cs]
                for j in range(memo[0], r):
                    part = parts[j] if j < len(parts) else self.recursion_part(j, n.cs)
                    if mode == WORD:  # a word key is one of the piece's word runs (no memo needed)
                        words = part.words
                        if words is None:
                            words = part.words = set(word_runs(part.text))
                        found = text in words
                    elif n.word_gram and part.windows is not None and n.gram not in part.windows:
                        # the key's window of word characters would lie inside one of the piece's
                        # word runs, and is none of their windows (piece_hits kept them)
                        found = False
                    elif self.key_windows and part.windows is not None and not n.windows <= part.windows:
                        self.spared_by_windows += 1  # the same, for a window of another of its word runs
                        found = False
                    else:
                        found = part.has(text, mode)
                    if found:
                        memo[0], memo[1] = j + 1, j
                        return True
                if r > memo[0]:
                    memo[0] = r
            return False
        if kind == EMPTY:
            if n.invalid:
                self._report_invalid(n, entry)
            return True  # an empty needle is found in any text, even the empty buffer
        if kind == REGEX:
            assert n.rx is not None
            if n.rx.status == "refused":
                return self._refuse(n.rx, entry)
            return self._regex_match(n.rx, entry, hay)
        if kind == REFUSED:
            assert n.rx is not None
            return self._refuse(n.rx, entry)
        if n.invalid:
            self._report_invalid(n, entry)
        if hay.empty:
            return False
        text = self.buffer.text(hay)
        return _test_text(text if n.cs else text.lower(), n.text, n.mode)

    def chat_hit(self, n: Needle) -> int:
        """The newest message a plain key matches (a large number when none does).

        Called once per key a scan tests (thousands in a large book), so a word key, the common
        case, reads the chat's word-run dict directly rather than through :meth:`_ChatIndex.first_hit`
        and its second memo.
        """
        hit = self._chat_hits.get(n)
        if hit is None:
            if n.mode == WORD:
                words = self._chat_words[n.cs] if n.cs in self._chat_words else self._chat_word_map(n.cs)
                hit = words.get(n.text, _NOT_FOUND)
            else:
                # a key filed by window cannot be in the chat if its window is not (a window of word
                # characters lies inside one word run, so the runs' windows suffice for it)
                gram = n.gram
                seen = self.chat_grams.get(n.cs) if gram is not None else None
                if seen is not None and gram not in seen[0] and (seen[1] or n.word_gram):
                    hit = _NOT_FOUND
                elif seen is not None and self.key_windows and not n.windows <= seen[0]:
                    self.spared_by_windows += 1
                    hit = _NOT_FOUND
                else:
                    hit = self._chat_index(n.cs).first_hit(n.text, n.mode)
            self._chat_hits[n] = hit
        return hit

    def _chat_word_map(self, cs: bool) -> dict[str, int]:
        """The chat's word runs (one case variant) -> index of the newest message holding each."""
        words = self._chat_words[cs] = self._chat_index(cs).words() if self.buffer.messages else {}
        return words

    def extras_hit(self, n: Needle, extras: tuple[str, ...]) -> bool:
        """Whether a plain key matches any of the extra pieces."""
        return any(self._part(extra, n.cs).has(n.text, n.mode) for extra in extras)

    def _report_invalid(self, n: Needle, entry: Entry) -> None:
        rx = n.rx
        assert rx is not None
        self._report(rx, "WI_REGEX_INVALID",
                     f"regex key {rx.source} is not a valid JavaScript regex ({rx.reason}); matched as plain text",
                     entry)

    def _refuse(self, rx: JsRegex, entry: Entry) -> bool:
        self._report(rx, "WI_REGEX_REFUSED", f"regex key {rx.source} refused: {rx.reason}; it does not match", entry)
        return False

    def _regex_match(self, rx: JsRegex, entry: Entry, hay: Haystack) -> bool:
        key = (rx.source, hay)
        hit = self._regex_results.get(key)
        if hit is not None:
            return hit
        text = self.buffer.text(hay)
        # texts of one (depth, extras) differ only by how much recursion text ends them, so each
        # is a prefix of the longer ones: what was learnt about a shorter one still holds
        progress_key = (rx.source, hay.depth, hay.extras)
        try:
            if rx.resumable and not hay.empty:
                # carry on from the last search of a shorter version instead of rescanning the chat
                progress = self._regex_progress.get(progress_key)
                pos = 0
                if progress is not None and len(text) >= progress[0]:
                    if progress[2]:
                        self._regex_results[key] = True
                        return True
                    pos = progress[1]
                where = self._literal_at(rx, text, pos, progress_key, hay)
                if where < 0:
                    # no match can start at or after ``pos``; the progress stays where it was, so
                    # a later, longer text is searched from the same place
                    self._regex_results[key] = False
                    return False
                self.regex_searches += 1
                anchors = self._anchors(rx, text, where, hay)
                if anchors is not None:
                    # a miss resumes at the first place again, as the plain QuickJS search's does
                    hit, resume = js_regex_search_at(rx, text, anchors, self.regex_timeout), where
                else:
                    hit, resume = js_regex_resume(rx, text, where if rx.literal_at_start else pos, self.regex_timeout)
                if progress is None or len(text) >= progress[0]:
                    self._regex_progress[progress_key] = (len(text), resume, hit)
            else:
                where = self._literal_at(rx, text, 0, progress_key, hay)
                if where < 0:
                    hit = False
                else:
                    self.regex_searches += 1
                    anchors = self._anchors(rx, text, where, hay)
                    if anchors is not None:
                        hit = js_regex_search_at(rx, text, anchors, self.regex_timeout)
                    else:
                        hit = js_regex_search(rx, text, self.regex_timeout, where if rx.literal_at_start else 0)
        except TimeoutError:
            if rx.status != "refused":  # else the search engine already said why (see regexes._js_search)
                object.__setattr__(rx, "status", "refused")
                object.__setattr__(rx, "reason", f"the search took longer than {self.regex_timeout:g} s")
            return self._refuse(rx, entry)
        self._regex_results[key] = hit
        return hit

    def regex_unchanged(self, rx: JsRegex, before: Haystack, hay: Haystack) -> bool | None:
        """The result of regex ``rx`` on ``hay`` when it must equal its result on ``before``, else ``None``.

        ``before`` is ``hay`` with fewer recursion pieces, already searched. A resumable regex that
        matched still matches. One that did not can only match now with a match that starts in the
        new pieces (nothing was pending at the old end: the last search or the required-literal
        check covered the old text), and that match contains the literal, which a joint cannot
        split: so if no new piece contains it, the answer stays "no". The caller then need not look
        at the entry again; what this learnt is recorded as if it had been searched.

        Nothing is pending at the old end either when no match of the regex can contain U+0001
        (:attr:`JsRegex.within_pieces`) and the old text's last piece does not hold the literal:
        the new text is ``"\\n\\x01"`` and pieces, so a match begun in the old text can run at
        most into that ``"\\n"``, and then lies after the old text's last U+0001 and holds the
        literal. That holds whatever the last search left (a literal found earlier in the old
        text whose match failed there, searched again by every pass, is the usual case).
        """
        previous = self._regex_results.get((rx.source, before))
        if previous is None or not rx.resumable or hay.empty or before.empty:
            return None
        if previous:
            self._regex_results[(rx.source, hay)] = True
            return True
        literal = rx.literal
        if literal is None:
            return None
        ends = self._old_ends.get((before, hay))
        if ends is None:
            text = self.buffer.text(hay)
            pieces = self.buffer.recursion[before.recursion:hay.recursion]
            ends = self._old_ends[(before, hay)] = (text, len(text) - sum(len(JOINER) + len(p) for p in pieces))
        text, old_end = ends
        progress_key = (rx.source, hay.depth, hay.extras)
        progress = self._regex_progress.get(progress_key)
        pos = progress[1] if progress is not None and old_end >= progress[0] else 0
        settled = (progress is not None and progress[0] == old_end and progress[1] == old_end and not progress[2]) \
            or self._literal_seen.get(progress_key) == (pos, old_end)
        if not settled:
            if not rx.within_pieces:
                return None
            folded = self._fold(text) if rx.ignore_case else text
            if folded.find(literal, max(0, text.rfind(MATCHER, 0, old_end)), old_end) >= 0:
                return None
        if self.may_hold(literal, rx.ignore_case, before.recursion, hay.recursion) and \
                (self._fold(text) if rx.ignore_case else text).find(literal, old_end) >= 0:
            return None
        if settled:  # (the literal may lie in the old text of a regex settled by its pieces alone)
            self._literal_seen[progress_key] = (pos, len(text))
        self._regex_results[(rx.source, hay)] = False
        return False

    def _fold(self, text: str) -> str:
        """``text`` case-folded as ``i`` literals are compared (:func:`fold_for_literal`), kept for the
        last texts searched: every ``i`` key of a pass reads the same haystack text.

        Folding keeps every character's position, and the folded text's ASCII characters do not
        depend on where it starts (only a final sigma does), so a literal's place in the whole
        folded text is its place in the folded tail of any start; and a text that extends one
        folded before (the same haystack one recursion piece later) is folded from that one's end.
        """
        cached = self._folded.get(id(text))
        if cached is not None and cached[0] is text:
            return cached[1]
        # from the longest text folded before that it extends (the same haystack a pass earlier)
        size, longest = len(text), None
        for old, old_folded in self._folded.values():
            if (longest is None or len(old) > len(longest[0])) and len(old) < size and text.startswith(old):
                longest = (old, old_folded)
        if longest is not None:
            folded = longest[1] + fold_for_literal(text[len(longest[0]):])
        else:
            folded = fold_for_literal(text)
        if len(self._folded) > 64:
            self._folded.clear()
        self._folded[id(text)] = (text, folded)
        return folded

    def _anchors(self, rx: JsRegex, text: str, where: int, hay: Haystack) -> list[int] | None:
        """Every place at or after ``where`` (the literal's first) where the regex's literal occurs, or
        ``None`` for the plain search: the shortcut is off, the regex does not begin with its literal
        or is sticky, or the literal occurs more than :data:`MAX_ANCHORS` times.

        The places found in a text are kept per haystack: the same haystack one pass later is that
        text plus recursion pieces, so only the new end is searched (a place in the old text lies
        wholly before it).
        """
        if not (self._anchored and rx.literal_at_start and rx.literal and not rx.sticky):
            return None
        literal = rx.literal
        folded = self._fold(text) if rx.ignore_case else text
        key = (literal, rx.ignore_case, hay.depth, hay.extras)
        known = self._places.get(key)
        places: list[int] | None
        if known is not None and len(known[0]) <= len(text) and text.startswith(known[0]):
            places = known[1]
            start = max(0, len(known[0]) - len(literal) + 1)
        else:
            places, start = [], 0
        if places is not None:
            at = folded.find(literal, start)
            while at >= 0:
                if len(places) == _KEPT_PLACES:
                    places = None
                    break
                places.append(at)
                at = folded.find(literal, at + 1)
        if len(self._places) > 4096:
            self._places.clear()
        self._places[key] = (text, places)
        if places is None:
            return None
        first = bisect.bisect_left(places, where)
        if len(places) - first > MAX_ANCHORS:
            return None
        return places[first:]

    def _literal_at(self, rx: JsRegex, text: str, pos: int, progress_key: tuple[str, int, tuple[str, ...]],
                    hay: Haystack) -> int:
        """Where the regex's required literal first occurs in ``text`` at or after ``pos``; -1 if nowhere.

        With -1 no match can start at or after ``pos``, and the search is not run at all (so it
        cannot time out either). When the pattern begins with its literal, no match starts before
        the returned place, so the search starts there. Without a literal this returns ``pos``.

        Only the text added since the last check is looked at (``_literal_seen`` remembers up to
        where the literal was absent), and the case-folded text is folded once and shared by every
        ``i`` key (:meth:`_fold`), so a recursion pass costs one fold of its text plus one ``find``
        of the unchecked part per regex key, not one search of the whole buffer per key.
        """
        literal = rx.literal
        if literal is None:
            return pos
        start = pos
        seen = self._literal_seen.get(progress_key)
        if seen is not None and seen[0] == pos and pos <= seen[1] <= len(text):
            # an occurrence in the longer text must end past the checked part
            start = max(pos, seen[1] - max(_FOLD_MARGIN, len(literal) - 1))
        if self._literal_absent(literal, rx.ignore_case, hay):
            where = -1
        else:
            where = (self._fold(text) if rx.ignore_case else text).find(literal, start)
        if where < 0:
            self._literal_seen[progress_key] = (pos, len(text))
        return where

    def _literal_absent(self, literal: str, ignore_case: bool, hay: Haystack) -> bool:
        """Whether a regex's required literal provably occurs nowhere in ``hay``'s text (as written,
        or case-folded under ``ignore_case``), without searching (``shortcuts.wi_literal_windows``).

        Its first ``GRAM`` characters, when they are word characters, lie inside one word run
        wherever it occurs: so it is absent when they are none of the windows the first pass kept
        for the chat and the extra sources (:attr:`chat_grams`, of all the messages a scan can read)
        nor of the haystack's recursion pieces (:meth:`windows_between`). The lower-cased text's
        windows serve for the case-folded one when the chat and the extra sources have none of the
        characters :func:`fold_for_literal` maps first (the pieces are checked the same way).
        """
        if not self.literal_windows or hay.empty:
            return False
        window = self._literal_window(literal)
        seen = self.chat_grams.get(not ignore_case)
        if window is None or seen is None or window in seen[0]:
            return False
        if self.reach is not None and hay.depth > self.reach:
            return False  # (the chat's windows are of the messages up to the reach)
        if ignore_case and self._chat_folds_apart():
            return False
        for index in range(hay.recursion):  # (piece by piece: each piece's own set, read only)
            windows = self.windows_between(index, index + 1, ignore_case)
            if windows is None or window in windows:
                return False
        self.literals_spared += 1
        return True

    def _chat_folds_apart(self) -> bool:
        """Whether case-folding the scanned chat or an extra source differs from lower-casing it."""
        folds = self._folds_apart
        if folds is None:
            buffer = self.buffer
            texts = [*self.scanned_messages(), *buffer.context.values(), buffer.injection_text or ""]
            folds = self._folds_apart = any(map(_folding_differs, texts))
        return folds

    # -- incremental passes ----------------------------------------------------------------------
    def may_hold(self, literal: str, ignore_case: bool, start: int, end: int) -> bool:
        """Whether recursion pieces ``start`` to ``end`` (as written, or case-folded with
        :func:`fold_for_literal` under ``ignore_case``) may contain the word-character ``literal``.

        ``False`` is certain: the literal's first ``GRAM`` characters are word characters, so where
        the literal occurs they lie inside one word run, and they are none of the windows of the
        pieces' word runs (:func:`text_windows`, kept per piece: :meth:`piece_hits` made most). The
        lower-cased pieces' windows serve for the case-folded text when folding a piece is
        lower-casing it (it has none of the characters :func:`fold_for_literal` maps first).
        """
        window = self._literal_window(literal)
        if window is None:
            return True
        windows = self._windows_between.get((start, end, ignore_case), _UNKNOWN)
        if windows is _UNKNOWN:
            windows = self.windows_between(start, end, ignore_case)
        return windows is None or window in windows

    def _literal_window(self, literal: str) -> str | None:
        """The first ``GRAM`` characters of a regex literal when they are word characters (kept per literal)."""
        window = self._literal_windows.get(literal, _UNKNOWN)
        if window is _UNKNOWN:
            window = self._literal_windows[literal] = literal[:GRAM] if is_word_gram(literal[:GRAM]) else None
        return window  # type: ignore[no-any-return]

    def windows_between(self, start: int, end: int, ignore_case: bool) -> set[str] | None:
        """The windows of pieces ``start`` to ``end`` for :meth:`may_hold` (``None``: under
        ``ignore_case``, a piece whose case-folded text is not its lower-cased text), kept."""
        key = (start, end, ignore_case)
        windows = self._windows_between.get(key, _UNKNOWN)
        if windows is _UNKNOWN:
            windows = self._windows_between[key] = self._piece_windows_between(start, end, ignore_case)
        return windows  # type: ignore[no-any-return]

    def _piece_windows_between(self, start: int, end: int, ignore_case: bool) -> set[str] | None:
        found: list[set[str]] = []
        for index in range(start, end):
            if ignore_case:
                raw = self.buffer.recursion[index]
                if _folding_differs(raw):
                    return None
            part = self.recursion_part(index, not ignore_case)
            if part.windows is None:
                if part.words is None:
                    part.words = set(word_runs(part.text))
                part.windows = text_windows(part.text, part.words, False)
            found.append(part.windows)
        # one piece (the usual case): its own set, which is only read
        return found[0] if len(found) == 1 else set().union(*found)

    def piece_hits(self, index: int, word_maps: tuple[dict[bool, dict[str, list[int]]], ...],
                   other_maps: tuple[tuple[dict[bool, dict[str, list[tuple[Needle, list[int]]]]], dict[bool, bool]], ...],
                   ) -> set[int]:
        """Owners (entry indices) of plain keys found in recursion piece ``index``.

        A word key is looked up among the piece's word runs (``word_maps``: word -> owners, per case
        variant). Other keys are bucketed by a window of ``GRAM`` characters (``other_maps[k][0][cs]``,
        see :func:`gram_of`; ``other_maps[k][1][cs]`` says whether some window is not all word
        characters), and only the buckets whose window occurs in the piece are searched: the work
        follows the new text, not the number of keys. A piece whose contents are known
        (:attr:`known_runs`) is not read at all: its owners and keyed runs are its contents'.
        """
        out: set[int] = set()
        for cs in (True, False):
            words = [m[cs] for m in word_maps if m[cs]]
            others = [(m[cs], mixed[cs]) for m, mixed in other_maps if m[cs]]
            if not words and not others:
                continue
            part = self.recursion_part(index, cs)
            first = self._piece_words[cs]
            if part.keyed is not None and part.owners is not None:
                # known from the piece's contents (see :attr:`known_runs`): a key found in the piece
                # is found in one of them, since no key of the maps holds the newline joining them
                out |= part.owners
                first.update(dict.fromkeys(part.keyed - first.keys(), index))
            else:
                self._read_piece(index, cs, part, words, others, out)
            if self._pieces_indexed[cs] == index:
                self._pieces_indexed[cs] = index + 1
        return out

    def _read_piece(self, index: int, cs: bool, part: _Part, words: list[dict[str, list[int]]],
                    others: list[tuple[dict[str, list[tuple[Needle, list[int]]]], bool]], out: set[int]) -> None:
        """:meth:`piece_hits` for one case variant of a piece whose contents are not known."""
        if part.words is None:
            part.words = set(word_runs(part.text))
        first = self._piece_words[cs]
        for word_map in words:
            # the dict view's ``&`` walks the smaller side (the piece's runs) in C, and the
            # owners and first pieces are recorded in C too
            found = word_map.keys() & part.words
            if found:
                out.update(*map(word_map.__getitem__, found))
                first.update(dict.fromkeys(found - first.keys(), index))
        if others:
            text = part.text
            grams = part.windows = text_windows(text, part.words, any(mixed for _, mixed in others))
            self.spared_by_windows += _search_buckets(text, grams, others, out, self.key_windows)


def _search_buckets(text: str, grams: AbstractSet[str],
                    others: list[tuple[dict[str, list[tuple[Needle, list[int]]]], bool]], out: set[int],
                    key_windows: bool) -> int:
    """Add to ``out`` the owners of the bucketed keys (``others``) found in ``text`` (``grams``: its
    windows, :func:`text_windows`); only the buckets of its windows are searched, and with
    ``key_windows`` only keys whose word runs' windows it holds. Returns how many searches that spared."""
    spared = 0
    for other_map, _ in others:
        # the view's ``&`` walks the smaller side in C
        for gram in other_map.keys() & grams:
            for n, owners in other_map[gram]:
                sub = n.mode == SUB
                if sub and n.text in grams:
                    out.update(owners)  # a substring key that is one of the text's windows
                elif key_windows and not n.windows <= grams:
                    spared += 1  # a window of its word runs is not in the text
                elif _test_text(text, n.text, n.mode):
                    out.update(owners)
    return spared


class TextRuns(NamedTuple):
    """What :meth:`KeyMatcher.piece_hits` reads of a recursion piece, when known without reading
    it (see :attr:`KeyMatcher.known_runs`)."""

    #: the windows of its word runs (:func:`text_windows`, not mixed)
    windows: AbstractSet[str]
    #: its word runs that are keys of the word maps :meth:`KeyMatcher.piece_hits` is given
    keyed: AbstractSet[str]
    #: owners of the keys of those maps and of the bucketed maps found in it
    owners: AbstractSet[int]


def text_runs(text: str, keys: dict[str, str], words: list[dict[str, list[int]]],
              others: list[tuple[dict[str, list[tuple[Needle, list[int]]]], bool]]) -> TextRuns:
    """:class:`TextRuns` of ``text`` (``keys``: every key of the word maps ``words``, to the string the
    maps hold; ``others``: the bucketed maps), as frozen sets, its windows without ``""``, found as
    :meth:`KeyMatcher.piece_hits` reads a piece of one case variant (without the key-window filter:
    ``text`` is one content, small). Its keyed runs are the maps' own strings, so that the maps made
    of them are read by identity (the word plans hold the same strings).

    The word runs of texts joined by a newline are the runs of each, and a key without a newline
    found in them is found in one of them: so a piece's are the union of its contents' (and ``""``).
    """
    runs = frozenset(word_runs(text))
    windows = text_windows(text, runs, False)
    keyed = frozenset(map(keys.__getitem__, keys.keys() & runs))
    owners: set[int] = set()
    if keyed:
        for word_map in words:
            found = word_map.keys() & keyed
            if found:
                owners.update(*map(word_map.__getitem__, found))
    if others:
        _search_buckets(text, text_windows(text, runs, True) if any(m for _, m in others) else windows, others,
                        owners, False)
    windows.discard("")
    return TextRuns(frozenset(windows), keyed, frozenset(owners))


def is_word_gram(gram: str) -> bool:
    """Whether a bucket window is ``GRAM`` ASCII word characters (so it lies inside one word run)."""
    return len(gram) == GRAM and gram.isascii() and gram.replace("_", "a").isalnum()


def text_windows(text: str, words: Iterable[str], mixed: bool) -> set[str]:
    """The ``GRAM``-character windows of ``text`` that a key's bucket window could be, plus ``""``.

    A window made of word characters lies inside one maximal word run of the text, so unless some
    bucket window is ``mixed`` (has other characters), the windows of the distinct word runs
    suffice: far fewer than one per character, since words repeat.
    """
    if mixed:
        # line by line (each piece running GRAM - 1 characters into the next), each piece's
        # windows memoised: a chat that gained a message costs the new lines, not the whole text
        grams = set()
        start, last = 0, len(text) - GRAM
        while start <= last:
            newline = text.find("\n", start + 1)
            end = len(text) if newline < 0 else newline
            grams.update(_piece_windows(text[start:end + GRAM - 1]))
            start = end
    else:
        # a run of exactly GRAM characters is its own only window (the usual case: done in one pass)
        grams = {w for w in words if len(w) == GRAM}
        for w in words:
            size = len(w)
            if size > GRAM:
                grams.update([w[i:i + GRAM] for i in range(size - GRAM + 1)])
    grams.add("")
    return grams


GRAM = 6

_PIECE_WINDOWS: dict[str, frozenset[str]] = {}


def _piece_windows(piece: str) -> frozenset[str]:
    """Every ``GRAM``-character window of ``piece`` (memoised; at most 8192 pieces kept)."""
    found = _PIECE_WINDOWS.get(piece)
    if found is None:
        found = frozenset([piece[i:i + GRAM] for i in range(len(piece) - GRAM + 1)])
        if len(_PIECE_WINDOWS) >= 8192:
            _PIECE_WINDOWS.clear()
        _PIECE_WINDOWS[piece] = found
    return found


def key_windows(text: str) -> frozenset[str]:
    """Every ``GRAM``-character window inside a word run of the key ``text``.

    Wherever the key occurs in a text (as a substring or bounded by non-word characters), each of
    its word runs lies inside one of the text's word runs, so each of these windows is one of the
    windows :func:`text_windows` gives for that text: a text lacking one cannot hold the key.
    """
    return frozenset([run[i:i + GRAM] for run in word_runs(text) for i in range(len(run) - GRAM + 1)])


def gram_of(text: str) -> str:
    """The bucket of a non-word key for :meth:`KeyMatcher.piece_hits`.

    A ``GRAM``-character window of the key, placed at its longest word run (the most telling
    part of "red dragon" is "dragon", not "red d"); keys shorter than that share the ``""`` bucket.
    """
    if len(text) < GRAM:
        return ""
    runs = list(_WORD_RUN.finditer(text))
    start = max(runs, key=lambda m: m.end() - m.start()).start() if runs else 0
    start = min(start, len(text) - GRAM)
    return text[start:start + GRAM]


KeyTest = Callable[[str, Entry, Haystack], bool]
