"""The activation loop: SillyTavern 1.18's ``checkWorldInfo``, deterministic and traced.

One call scans the chat once, the way SillyTavern does before a generation: entries in their
sorted order are tested (filters, timed effects, decorators, constant, keys and secondary logic),
the candidates of a pass go through inclusion groups, probability and the token budget, and the
loop repeats for recursion, delay levels and minimum activations (research digest 2.5-2.9).

What we add: randomness comes from ``seed`` (``random.Random``; every number drawn is recorded in
``Activation.draws``), timed effects take and return an explicit ``state``, every entry ends with
a trace record, and regex keys run with a time bound.
"""

from __future__ import annotations

import hashlib
import marshal
import random
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter, itemgetter
from typing import Any, NamedTuple

from ..errors import Diagnostic, TemplateError
from ..collector import bulk_allocation
from ..shortcuts import DEFAULT, Shortcuts
from .entries import Entry, Logic, WorldBook, js_key_order, normalize_books
from .matching import _NOT_FOUND as _FAR
from .matching import (GRAM, INDEX_DIRTY, INDEX_EMPTY_INVALID, INDEX_OTHER, INDEX_WORD, REGEX, KeyMatcher,
                       Needle, TextRuns, gram_of, is_word_gram, key_windows, text_runs, text_windows,
                       word_runs)
from .output import ActivatedEntry, Positions, build_positions, place_activated
from .regexes import DEFAULT_TIMEOUT, JsRegex, fold_for_literal
from .scan import MAX_SCAN_DEPTH, ChatTail, Haystack, ScanBuffer, ScanState, chat_scan_messages, js_trim
from .settings import WorldInfoSettings, budget_tokens, count_words, resolve_token_counter
from .timed import TimedEffects
from .trace import Draw, StepRecord, Trace, TraceRecord, trace_dicts, trace_records

__all__ = ["Activation", "ScanContext", "activate_world_info", "sort_entries", "to_json"]

Expand = Callable[[str], str]

GENERATION_TYPES = ("normal", "continue", "impersonate", "swipe", "regenerate", "quiet")


@dataclass(frozen=True, slots=True)
class ScanContext:
    """What besides the chat a scan can see: card and persona texts, injections, the character.

    ``character`` is the current character's avatar file name without extension (what character
    filters name); ``character_tags`` its tag ids (``None``: no tag data, tag filters are ignored).
    ``injections`` are extension prompts marked for scanning (e.g. the Author's Note).
    """

    persona_description: str = ""
    character_description: str = ""
    character_personality: str = ""
    character_depth_prompt: str = ""
    scenario: str = ""
    creator_notes: str = ""
    injections: tuple[str, ...] = ()
    character: str | None = None
    character_tags: tuple[str, ...] | None = None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | ScanContext | None, *, path: str = "$") -> ScanContext:
        """From a dict with these field names (unknown names raise ``INPUT_INVALID``)."""
        if data is None:
            return cls()
        if isinstance(data, ScanContext):
            return data
        if not isinstance(data, Mapping):
            raise TemplateError("the scan context should be an object", code="INPUT_INVALID", path=path)
        known = set(cls.__dataclass_fields__)
        values: dict[str, Any] = {}
        for name, value in data.items():
            if name not in known:
                raise TemplateError(f"unknown scan context field {name!r}", code="INPUT_INVALID", path=f"{path}.{name}")
            if name in ("injections", "character_tags"):
                if value is None:
                    continue
                if not isinstance(value, Sequence) or isinstance(value, str) or not all(isinstance(v, str) for v in value):
                    raise TemplateError(f"{name} should be a list of strings", code="INPUT_INVALID", path=f"{path}.{name}")
                values[name] = tuple(value)
            elif value is not None:
                if not isinstance(value, str):
                    raise TemplateError(f"{name} should be a string", code="INPUT_INVALID", path=f"{path}.{name}")
                values[name] = value
        return cls(**values)


@dataclass(frozen=True)
class Activation:
    """The result of one scan.

    ``by_position`` holds the activated entries placed for the prompt; ``activated`` the same
    entries in activation order; ``trace`` one record per entry plus the loop's passes; ``state``
    the timed-effects state to persist; ``draws`` every random number used.
    """

    by_position: Positions
    activated: tuple[ActivatedEntry, ...]
    trace: Trace
    state: dict[str, Any]
    draws: tuple[Draw, ...]
    diagnostics: tuple[Diagnostic, ...] = ()
    budget: int = 0
    seed: int = 0

    @property
    def before(self) -> str:
        return self.by_position.before_text

    @property
    def after(self) -> str:
        return self.by_position.after_text

    @property
    def uids(self) -> list[int | str]:
        return [a.uid for a in self.activated]

    def active(self, book: str, uid: int | str) -> ActivatedEntry | None:
        """The activated entry ``book``/``uid`` with its final content, or ``None`` if it did not fire.

        This is the question a template bridge asks for ``getwi``-style lookups: only entries
        active for this request may be read; ``trace.get(book, uid)`` says why others are not.
        """
        for item in self.activated:
            if item.book == book and item.uid == uid:
                return item
        return None


def sort_entries(books: Sequence[WorldBook], strategy: int) -> tuple[list[Entry], list[Diagnostic]]:
    """SillyTavern's ``sortedEntries``: chat, then persona, then character/global by strategy.

    Each source's entries are stable-sorted by ``order`` descending; ``strategy`` is 0 (evenly:
    character and global merged), 1 (character first) or 2 (global first). A book name used by more
    than one source is scanned once, under the first of global, chat, persona, character.
    """
    diagnostics: list[Diagnostic] = []
    seen: set[str] = set()
    by_source: dict[str, list[Entry]] = {"global": [], "chat": [], "persona": [], "character": []}
    for source in ("global", "chat", "persona", "character"):
        for book in books:
            if book.source != source:
                continue
            if book.name in seen:
                diagnostics.append(Diagnostic("INPUT_INVALID", f"book {book.name!r} is already scanned; "
                                              f"its {source} copy is skipped", severity="info"))
                continue
            seen.add(book.name)
            by_source[source].extend(book.entries)

    def by_order(entries: list[Entry]) -> list[Entry]:
        return sorted(entries, key=lambda e: -e.order)

    out = by_order(by_source["chat"]) + by_order(by_source["persona"])
    if strategy == 0:
        out += by_order(by_source["character"] + by_source["global"])
    elif strategy == 2:
        out += by_order(by_source["global"]) + by_order(by_source["character"])
    else:
        out += by_order(by_source["character"]) + by_order(by_source["global"])
    return out, diagnostics


class _Decision(NamedTuple):
    """The loop's last word on one entry: a trace record in the making (see :func:`trace_records`;
    a ``detail`` of ``None`` there is "fired by key" and the decision's key)."""

    outcome: str
    reason: str
    detail: str | None
    step: int | None = None
    state: str | None = None
    key: str | None = None
    secondary: str | None = None
    winner: int | str | None = None


#: a :class:`_Decision` from all eight fields, without the named tuple's Python-level ``__new__``
_new_decision: Callable[[type[_Decision], tuple[Any, ...]], _Decision] = tuple.__new__  # type: ignore[assignment]

_NOT_SCANNED = _Decision("skipped", "not_scanned", "the loop ended before the entry was looked at")
_LOGIC_NAMES = {0: "AND ANY", 1: "NOT ALL", 2: "NOT ANY", 3: "AND ALL"}


_MISSING: Any = object()
_BOOK_UID = attrgetter("book", "uid")
_KEYS = attrgetter("key")
_RULE_FIELDS = attrgetter("delay_until_recursion", "exclude_recursion", "sticky", "cooldown", "delay", "disable",
                          "triggers", "character_filter", "decorators", "constant", "prevent_recursion")
#: the rule fields of an entry that sets none of them
_USUAL_FLAGS = _RULE_FIELDS(Entry("", 0))
_ROLL_FIELDS = attrgetter("probability", "use_probability")
_GROUP = attrgetter("group")
_CONTENT = attrgetter("content")
_ORDER = attrgetter("order")
_POSITION = attrgetter("position")
#: no recursion piece's words (see :meth:`_Run.word_test`)
_NO_WORDS: frozenset[str] = frozenset()
#: a :class:`TextRuns`'s word runs and windows
_FIRST, _SECOND, _THIRD = itemgetter(0), itemgetter(1), itemgetter(2)
_HAY_FIELDS = attrgetter("scan_depth", "match_persona_description", "match_character_description",
                         "match_character_personality", "match_character_depth_prompt", "match_scenario",
                         "match_creator_notes")


class _Prepared:
    """What a scan needs from its books that does not depend on the chat: built once, reused.

    The sorted entries, each entry's keys prepared as needles, and the key index (which entries
    own which word or substring key). Without an ``expand`` hook keys are fixed, so this is cached
    for the same book objects and matching settings: a chat session re-scans the same books every
    message, and their index should not be rebuilt each time.
    """

    def __init__(self, entries: list[Entry], settings: WorldInfoSettings,
                 key_text: Callable[[str], str] | None) -> None:
        self.entries = entries
        self._deepest: Any = _MISSING  # see :meth:`reach`
        self._rolling: frozenset[int] | None = None  # see :attr:`rolling`
        self._in_group: frozenset[int] | None = None  # see :attr:`in_group`
        self._contents: list[str] | None = None  # see :attr:`contents`
        self._placement: _Placement | None = None  # see :attr:`placement`
        self._word_keys: dict[bool, dict[str, str]] = {}  # see :meth:`word_keys`
        #: set when a scan finds these books in the cache (see :func:`_prepared_for`)
        self.rescanned = False
        self._word_plans: list[_WordPlan | None] | None = None  # see :attr:`word_plans`
        self._case_sensitive = settings.case_sensitive  # (an entry's own setting overrides it)
        self.ids = [f"{book}.{uid}" for book, uid in map(_BOOK_UID, entries)]  # Entry.id, in one C-driven pass
        self._unique_ids: bool | None = None  # see :attr:`unique_ids`
        self.needles: dict[tuple[str, bool, bool], Needle] = {}
        preparer = KeyMatcher(ScanBuffer([], base_depth=0), case_sensitive=settings.case_sensitive,
                              whole_words=settings.match_whole_words, needles=self.needles)
        self.plans: list[tuple[list[tuple[str, Needle | None]], list[tuple[str, Needle | None]]]] = []
        #: entries whose outcome can change in any pass (regex keys, keys that straddle pieces)
        self.always_dirty: set[int] = set()
        #: entries that can be candidates without a key match, or whose primary key always matches
        self.unconditional: list[int] = []
        #: word keys (ASCII word characters, whole-word mode) -> owning entries, per case variant
        self.primary_words: dict[bool, dict[str, list[int]]] = {True: {}, False: {}}
        self.secondary_words: dict[bool, dict[str, list[int]]] = {True: {}, False: {}}
        #: other plain keys, bucketed by :func:`gram_of`, with their owning entries
        self.primary_others: dict[bool, dict[str, list[tuple[Needle, list[int]]]]] = {True: {}, False: {}}
        self.secondary_others: dict[bool, dict[str, list[tuple[Needle, list[int]]]]] = {True: {}, False: {}}
        self._flags(entries)
        #: entry index -> words in its content, filled as entries activate (contents are fixed without expand)
        self.word_counts: dict[int, int] = {}
        #: per case variant, entry index -> the word runs and windows of its content (its case variant),
        #: filled as entries recurse (see :meth:`_Run.piece_runs`)
        self.content_runs: dict[bool, list[TextRuns | None]] = {}
        #: how many characters of contents :attr:`content_runs` holds the runs of (at most :data:`_KEPT_CONTENT_CHARS`)
        self.kept_chars = 0
        self._index(settings, key_text, preparer)
        #: both maps of each kind, as :meth:`KeyMatcher.piece_hits` reads them for recursion text
        self.word_maps = (self.primary_words, self.secondary_words)
        #: per case variant, whether some bucket window of a map is not all word characters ("" is no window:
        #: its short keys are tested against every piece)
        self.primary_mixed = {cs: any(g and not is_word_gram(g) for g in m) for cs, m in self.primary_others.items()}
        self.secondary_mixed = {cs: any(g and not is_word_gram(g) for g in m)
                                for cs, m in self.secondary_others.items()}
        self.other_maps = ((self.primary_others, self.primary_mixed), (self.secondary_others, self.secondary_mixed))

    @property
    def contents(self) -> list[str]:
        """Each entry's content, by index (read once, on first need: a scan of books scanned again
        then reads its admitted entries' contents from one list rather than from each entry)."""
        contents = self._contents
        if contents is None:
            contents = self._contents = list(map(_CONTENT, self.entries))
        return contents

    @property
    def placement(self) -> _Placement:
        """Each entry's position and the rank of its order among the book's (found once, on first need:
        a scan reads them when the books are scanned again, see :attr:`rescanned`)."""
        placement = self._placement
        if placement is None:
            placement = self._placement = _placement(self.entries)
        return placement

    @property
    def unique_ids(self) -> bool:
        """Whether no two entries share a ``book.uid`` (then an activated id is its own entry's; found
        once, on first need)."""
        unique = self._unique_ids
        if unique is None:
            unique = self._unique_ids = len(set(self.ids)) == len(self.ids)
        return unique

    @property
    def rolling(self) -> frozenset[int]:
        """Entries that roll their probability when admitted (found once, on first need)."""
        rolling = self._rolling
        if rolling is None:
            rolling = self._rolling = frozenset(
                i for i, (chance, use) in enumerate(map(_ROLL_FIELDS, self.entries)) if chance < 100 and use)
        return rolling

    def word_keys(self, cs: bool) -> dict[str, str]:
        """Every key of the word maps (:attr:`word_maps`) of one case variant, to itself: the very
        string the maps and the word plans hold (found once, on first need)."""
        keys = self._word_keys.get(cs)
        if keys is None:
            keys = self._word_keys[cs] = {}
            for word_map in self.word_maps:
                keys.update(zip(word_map[cs], word_map[cs]))
        return keys

    @property
    def in_group(self) -> frozenset[int]:
        """Entries in an inclusion group (found once, on first need)."""
        in_group = self._in_group
        if in_group is None:
            in_group = self._in_group = frozenset(i for i, group in enumerate(map(_GROUP, self.entries)) if group)
        return in_group

    @property
    def word_plans(self) -> list[_WordPlan | None]:
        """Per entry without a rule before its keys (``keyed_plain``), its keys as words
        (:class:`_WordPlan`) when each that counts is a mapped word key (:meth:`_Run.consider` then
        needs only the word-run maps), else ``None``."""
        plans = self._word_plans
        if plans is None:
            plans = self._word_plans = list(map(_word_plan, self.plans, self.entries, self.hay_class,
                                                self.keyed_plain, repeat(self._case_sensitive)))
        return plans

    def reach(self, settings: WorldInfoSettings) -> int | None:
        """:func:`scan_reach` for these entries (their own deepest scan depth found once)."""
        if settings.min_activations > 0:
            return None
        deepest = self._deepest
        if deepest is _MISSING:
            depths = [e.scan_depth for e in self.entries if e.scan_depth is not None]
            deepest = self._deepest = max((d for d in depths if isinstance(d, int)), default=None)
        return settings.depth if deepest is None else max(settings.depth, deepest)

    def _flags(self, entries: list[Entry]) -> None:
        """Which entries have rules that need attention, from one read of their rule fields.

        Most entries of a large book leave every rule field at its default: their row of fields
        equals :data:`_USUAL_FLAGS` (one tuple comparison, identity first) and nothing more is done.
        """
        #: entries whose decision depends on the scan state or delay level
        self.state_sensitive: list[int] = []
        #: entries with a timed effect configured
        self.timed: list[int] = []
        #: entries a static rule may skip (disabled, triggers, character filter)
        self.filtered: list[int] = []
        levels: set[float] = set()
        no_recursion: list[int] = []
        #: keyed entries without a rule that can decide them before their keys in any scan
        self.keyed_plain = [bool(keys) for keys in map(_KEYS, entries)]
        usual = _USUAL_FLAGS
        for i, row in enumerate(map(_RULE_FIELDS, entries)):
            if row == usual:
                continue
            (delay_level, exclude, sticky, cooldown, delay, disable, triggers, character_filter, decorators, constant,
             prevent_recursion) = row
            if delay_level or exclude:
                self.state_sensitive.append(i)
                self.keyed_plain[i] = False
            if delay_level:
                levels.add(delay_level)
            if sticky > 0 or cooldown > 0 or delay > 0:
                self.timed.append(i)
            if disable or triggers or character_filter.names or character_filter.tags:
                self.filtered.append(i)
            if decorators or constant:
                self.keyed_plain[i] = False
            if prevent_recursion:
                no_recursion.append(i)
        self.levels = sorted(levels)
        #: entries whose content does not join the recursion text
        self.no_recursion = frozenset(no_recursion)
        #: what decides an entry's haystack besides the pass, as a small number (entries sharing it
        #: share the haystack; most entries have class 0)
        classes: dict[tuple[Any, ...], int] = {}
        self.hay_class = [classes.setdefault(k, len(classes)) for k in map(_HAY_FIELDS, entries)]
        self.hay_classes = len(classes)

    def _index(self, settings: WorldInfoSettings, key_text: Callable[[str], str] | None,
               preparer: KeyMatcher) -> None:
        """Prepare every key once and record its owners: the one loop over all keys of all books.

        A cold activation (the CLI's only kind) pays this for every key, so the loop is kept flat:
        a key is prepared once per (text, case, whole-word) setting (without an expand hook a
        trimmed key is its own cache key, so a repeated key costs one lookup), each needle says
        where the index files it, and owner lists are appended to without a throwaway list per key.
        """
        others: tuple[dict[Needle, list[int]], dict[Needle, list[int]]] = ({}, {})
        words = (self.primary_words, self.secondary_words)
        prepare_key = preparer.prepare_key
        unconditional, always_dirty, plans = self.unconditional, self.always_dirty, self.plans
        global_cs, global_ww = settings.case_sensitive, settings.match_whole_words
        cached = self.needles.get
        by_raw: dict[tuple[str, bool, bool], Needle | None] = {}
        no_keys: list[tuple[str, Needle | None]] = []
        for i, entry in enumerate(self.entries):
            if entry.decorators or entry.constant:
                unconditional.append(i)
            cs = global_cs if entry.case_sensitive is None else entry.case_sensitive
            ww = global_ww if entry.match_whole_words is None else entry.match_whole_words
            primary_plan = secondary_plan = no_keys
            for slot in (0, 1):
                keys = entry.keysecondary if slot else entry.key
                if not keys:
                    continue
                out: list[tuple[str, Needle | None]] = []
                if slot:
                    secondary_plan = out
                else:
                    primary_plan = out
                word_map = words[slot][cs]
                other_map = others[slot]
                for key in keys:
                    needle: Needle | None
                    if key_text is None:
                        # a trimmed key is its own cache key; an untrimmed one can be no other key's
                        needle = cached((key, cs, ww)) if key else None
                        if needle is None and key:
                            needle = prepare_key(js_trim(key), cs, ww)
                    else:
                        raw_key = (key, cs, ww)
                        if raw_key in by_raw:
                            needle = by_raw[raw_key]
                        else:
                            substituted = key_text(key)
                            needle = prepare_key(js_trim(substituted), cs, ww) if substituted else None
                            by_raw[raw_key] = needle
                    out.append((key, needle))
                    if needle is None:
                        continue
                    where = needle.index
                    if where == INDEX_WORD:
                        owners = word_map.get(needle.text)
                        if owners is None:
                            word_map[needle.text] = [i]
                            needle.mapped = True
                        else:
                            owners.append(i)
                    elif where == INDEX_OTHER:
                        owners = other_map.get(needle)
                        if owners is None:
                            other_map[needle] = [i]
                        else:
                            owners.append(i)
                    elif where == INDEX_DIRTY:
                        always_dirty.add(i)
                    else:
                        if slot == 0:
                            unconditional.append(i)
                        if where == INDEX_EMPTY_INVALID:
                            always_dirty.add(i)
            plans.append((primary_plan, secondary_plan))
        #: always-dirty entries whose keys are all plain or valid regexes (see :meth:`_Run.carry_forward`)
        self.regex_only = {i for i in always_dirty
                           if all(n is None or n.index in (INDEX_WORD, INDEX_OTHER) or n.kind == REGEX
                                  for plan in plans[i] for _, n in plan)}
        #: the regexes of those entries (all keys, primary and secondary)
        self.regexes: dict[int, tuple[JsRegex, ...]] = {
            i: tuple(n.rx for plan in plans[i] for _, n in plan if n is not None and n.kind == REGEX and n.rx)
            for i in self.regex_only}
        #: each of those regexes once, with the entries owning it and the first ``GRAM`` characters of
        #: its literal when they are word characters (see :meth:`_Run.still_waiting`)
        owned: dict[int, tuple[JsRegex, set[int], str | None]] = {}
        for i, found in self.regexes.items():
            for rx in found:
                if id(rx) not in owned:
                    window = rx.literal[:GRAM] if rx.literal else None
                    owned[id(rx)] = (rx, set(), window if window is not None and is_word_gram(window) else None)
                owned[id(rx)][1].add(i)
        self.regex_owners = list(owned.values())
        self.waiting_checks = _waiting_checks(self.regex_owners)
        #: always-dirty entries that are not :attr:`regex_only`: looked at in every pass
        self.dirty_always = always_dirty - self.regex_only
        for buckets, found in ((self.primary_others, others[0]), (self.secondary_others, others[1])):
            for needle, owners in found.items():
                gram = needle.gram = gram_of(needle.text)
                needle.word_gram = is_word_gram(gram)
                needle.windows = key_windows(needle.text)
                buckets[needle.cs].setdefault(gram, []).append((needle, owners))


#: content digest of a raw book argument -> its normalised books and their diagnostics (each book
#: under two digests, see :func:`_normalized_books`)
_NORMALIZED_CACHE: dict[tuple[int, bytes], tuple[list[WorldBook], tuple[Diagnostic, ...]]] = {}
_NORMALIZED_CACHE_SIZE = 8


class _WaitingChecks(NamedTuple):
    """:attr:`_Prepared.regex_owners` as :meth:`_Run.still_waiting` reads them."""

    #: owners of regexes without a usable literal (never kept waiting)
    always: frozenset[int]
    #: (literal, ignore_case, owners) of regexes whose literal has no word window: always searched for
    unwindowed: list[tuple[str, bool, set[int]]]
    #: per case mode (ignore_case), window -> (literal, owners) of the regexes whose literal begins with it
    by_window: dict[bool, dict[str, list[tuple[str, set[int]]]]]


def _waiting_checks(regex_owners: list[tuple[JsRegex, set[int], str | None]]) -> _WaitingChecks:
    always: set[int] = set()
    unwindowed: list[tuple[str, bool, set[int]]] = []
    by_window: dict[bool, dict[str, list[tuple[str, set[int]]]]] = {}
    for rx, owners, window in regex_owners:
        literal = rx.literal
        if rx.status != "ok" or literal is None:
            always |= owners
        elif window is None:
            unwindowed.append((literal, rx.ignore_case, owners))
        else:
            by_window.setdefault(rx.ignore_case, {}).setdefault(window, []).append((literal, owners))
    return _WaitingChecks(frozenset(always), unwindowed, by_window)


class _Placement(NamedTuple):
    """Per entry, what :func:`place_activated` reads (see :attr:`_Prepared.placement`)."""

    #: the rank of the entry's order among the book's distinct orders, highest first (sorting by it is
    #: sorting by the order negated); ``None`` when an order is not a plain number (NaN, another type):
    #: the orders are then read from the entries
    ranks: list[int] | None
    positions: list[int]


def _placement(entries: list[Entry]) -> _Placement:
    orders = list(map(_ORDER, entries))
    ranks = None
    if all(type(order) in (int, float) and order == order for order in orders):  # (NaN differs from itself)
        rank = {order: r for r, order in enumerate(sorted(set(orders), reverse=True))}
        ranks = list(map(rank.__getitem__, orders))
    return _Placement(ranks, list(map(_POSITION, entries)))


class _WordPlan(NamedTuple):
    """An entry's keys as :meth:`_Run.candidates_by_words` reads them: words of one case variant."""

    #: ``2 * hay class + case variant``: which word test of a pass answers for the entry's keys
    #: (every key of an entry has its case setting; entries sharing a haystack share the test)
    slot: int
    #: the primary keys' words, in order (read for every entry a pass looks at: kept apart from the
    #: keys, of which only the one that matched is read)
    words: tuple[str, ...]
    #: the primary keys as written
    keys: tuple[str, ...]
    #: each secondary key as (key, word), ``None`` when the secondary keys do not count (none, or the
    #: entry is not selective); a word of ``None`` is a key that never matches
    secondary: tuple[tuple[str, str | None], ...] | None
    #: the entry's secondary logic (read when ``secondary`` is not ``None``)
    logic: int


def _word_plan(plan: tuple[list[tuple[str, Needle | None]], list[tuple[str, Needle | None]]],
               entry: Entry, hay_class: int, keyed_plain: bool, case_sensitive: bool) -> _WordPlan | None:
    """An entry's :class:`_WordPlan` if it has no rule that can decide it before its keys
    (``keyed_plain``) and every key of it that counts is a mapped word key (or no key at all,
    ``None`` needle); else ``None``. ``case_sensitive`` is the books' setting: every key of the
    entry was prepared under it or the entry's own (:meth:`_Prepared._index`).

    Made for every entry of a book by its first scan, so the entry's fields are read only as needed.
    """
    if not keyed_plain:
        return None
    primary, secondary = plan
    words, keys = [], []
    cs = None
    for key, needle in primary:
        if needle is None:
            continue
        if not needle.mapped:
            return None
        words.append(needle.text)
        keys.append(key)
        cs = needle.cs
    second: tuple[tuple[str, str | None], ...] | None = None
    logic = Logic.AND_ANY
    if secondary and entry.selective:
        found: list[tuple[str, str | None]] = []
        for key, needle in secondary:
            if needle is None:
                found.append((key, None))
            elif needle.mapped and not needle.invalid:
                found.append((key, needle.text))
                cs = needle.cs
            else:
                return None
        second, logic = tuple(found), entry.selective_logic
    if cs is None:  # (no key to read it from)
        cs = case_sensitive if entry.case_sensitive is None else entry.case_sensitive
    return _new_word_plan(_WordPlan, (2 * hay_class + cs, tuple(words), tuple(keys), second, logic))


#: a :class:`_WordPlan` from all five fields, without the named tuple's Python-level ``__new__``
_new_word_plan: Callable[[type[_WordPlan], tuple[Any, ...]], _WordPlan] = tuple.__new__  # type: ignore[assignment]


def _normalized_books(books: Any, shortcuts: Shortcuts = DEFAULT) -> tuple[list[WorldBook], list[Diagnostic]]:
    """:func:`normalize_books`, cached by the content of a raw (dict or list) book argument.

    A host that keeps its books as the JSON dicts it loaded passes them again on every chat
    message; normalising 10,000 entries and re-indexing them was 80% of such a call. The digest
    is taken over ``marshal``'s encoding, which is fast and refuses anything but plain built-in
    values (so no object whose content a repr would hide can make two different books look
    alike: such an argument simply is not cached). The same book content then yields the very
    same :class:`WorldBook` objects, which :func:`_prepared_for` finds by identity.

    Two encodings are used. Version 2 writes no back-references, whose use depends on reference
    counts: equal content always gives equal bytes (a copy of the book hits the cache too); it is
    looked up by its blake2b digest. The current version marks shared objects instead of repeating
    them, which makes it about three times faster on a parsed book (its keys are shared strings),
    but the same content held with other sharing can give other bytes; it is looked up by the
    bytes themselves (no digest to compute: the dict hashes them once and compares them byte for
    byte on a hit, a third of blake2b's time on a large book). Either encoding decodes to its
    content, so equal bytes always mean equal content; the quick one is looked up first (a fresh
    ``json.loads`` of the same text gives the same bytes), and on a miss the plain one decides.
    With ``shortcuts.wi_quick_digest`` off only the plain one is taken. The switch chooses which
    key is looked up, never what it maps to (both map a content to its own normalisation), so the
    cache's key needs nothing else: a book cached by one call is the right answer for the other.
    """
    if type(books) is not dict and type(books) is not list:
        return normalize_books(books)
    quick: tuple[int, bytes] | None = None
    try:
        if shortcuts.wi_quick_digest:
            quick = _digest(books, marshal.version)
            hit = _NORMALIZED_CACHE.get(quick)
            if hit is not None:
                return list(hit[0]), list(hit[1])
        plain = _digest(books, 2)
    except (ValueError, RecursionError):  # a value marshal cannot encode: not cached
        return normalize_books(books)
    hit = _NORMALIZED_CACHE.get(plain)
    if hit is None:
        normalized, diagnostics = normalize_books(books)
        hit = (list(normalized), tuple(diagnostics))
        _remember(plain, hit)
    if quick is not None:
        _remember(quick, hit)
    return list(hit[0]), list(hit[1])


def _digest(books: dict[str, Any] | list[Any], version: int) -> tuple[int, bytes]:
    """The cache key of a raw book under one ``marshal`` version: the current version's encoding
    itself, version 2's by its blake2b digest (the version is part of the key: two never meet)."""
    encoded = marshal.dumps(books, version)
    if version != 2:
        return version, encoded
    return version, hashlib.blake2b(encoded, digest_size=20, person=b"v%d" % version).digest()


def _remember(digest: tuple[int, bytes], books: tuple[list[WorldBook], tuple[Diagnostic, ...]]) -> None:
    if digest not in _NORMALIZED_CACHE and len(_NORMALIZED_CACHE) >= _NORMALIZED_CACHE_SIZE:
        _evict_oldest(_NORMALIZED_CACHE)
    _NORMALIZED_CACHE[digest] = books


def _evict_oldest(cache: dict[Any, Any]) -> None:
    """Drop ``cache``'s oldest item; another thread evicting at the same time may have dropped it
    (or be changing the dict) already, which is as good."""
    try:
        cache.pop(next(iter(cache)), None)
    except (StopIteration, RuntimeError):
        pass


_PREPARED_CACHE: dict[tuple[Any, ...], tuple[tuple[WorldBook, ...], _Prepared]] = {}
_PREPARED_CACHE_SIZE = 4


def _prepared_for(books: list[WorldBook], settings: WorldInfoSettings, entries_factory: Callable[[], list[Entry]],
                  key_text: Callable[[str], str] | None, cacheable: bool) -> _Prepared:
    """The prepared books, from the cache when the same book objects were scanned before."""
    key = (tuple(id(b) for b in books), settings.character_strategy, settings.case_sensitive,
           settings.match_whole_words)
    if cacheable:
        hit = _PREPARED_CACHE.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], books)):
            hit[1].rescanned = True
            return hit[1]
    with bulk_allocation():
        prepared = _Prepared(entries_factory(), settings, key_text)
    if cacheable:
        if len(_PREPARED_CACHE) >= _PREPARED_CACHE_SIZE:
            _evict_oldest(_PREPARED_CACHE)
        _PREPARED_CACHE[key] = (tuple(books), prepared)
    return prepared


#: how many characters of entry contents a prepared book keeps the runs of (:meth:`_Run.piece_runs`): about 31
#: bytes per character of prose (its windows), kept while the book is cached, so at most ~8 MB a book; past it,
#: recursion pieces are read again
_KEPT_CONTENT_CHARS = 1 << 18

#: a decision not taken yet: the entry was not looked at because no key of it can match
_PENDING = _Decision("skipped", "pending", "")
#: what :meth:`_Run.consider` decides in the first pass for an entry none of whose primary keys match
_NO_MATCH_FIRST = _Decision("skipped", "no_match", "no primary key matched", 1, ScanState.NAMES[ScanState.INITIAL])


def scan_reach(settings: WorldInfoSettings, entries: Sequence[Entry]) -> int | None:
    """The deepest any scan of ``entries`` looks: the global depth and every entry's own scan
    depth; ``None`` (the whole chat) when the minimum-activations rule may walk further back."""
    if settings.min_activations > 0:
        return None
    return max([settings.depth, *(e.scan_depth for e in entries if isinstance(e.scan_depth, int))])


class _Run:
    """One scan's mutable working state.

    :meth:`run` is SillyTavern's loop, a method per job of a pass: which entries to look at
    (:meth:`entries_to_check`), which of them are candidates (:meth:`candidates`, each through
    :meth:`consider`), inclusion groups (:meth:`filter_groups`), admitting each survivor against
    its probability and the token budget (:meth:`admit`, counting through :class:`_BudgetMeter`),
    and the next scan state (:meth:`next_state`). Each entry's last decision is a :class:`_Decision`.
    """

    def __init__(self, prepared: _Prepared, messages: list[str], options: ActivationOptions, timed: TimedEffects,
                 diagnostics: list[Diagnostic], chat_length: int | None = None) -> None:
        entries = self.entries = prepared.entries
        self.prepared = prepared
        self.messages = messages
        #: the whole chat's scanned messages (``messages`` may be only its newest ones: ``ChatTail``)
        self.chat_length = len(messages) if chat_length is None else chat_length
        settings = self.settings = options.settings
        context = self.context = options.context
        self.timed = timed
        self.generation_type = options.generation_type
        self.expand = options.expand
        self.meter = _BudgetMeter(budget_tokens(settings), resolve_token_counter(settings, options.token_counter),
                                  additive=options.token_counter is None and settings.tokenizer == "words",
                                  words_of=self.words_of,
                                  known_words=prepared.word_counts if options.expand is None else None)
        self.rng = options.rng or random.Random(options.seed).random
        forced = self.forced = options.forced
        regex_timeout = options.regex_timeout
        self.diagnostics = diagnostics
        extras = {
            "persona_description": context.persona_description,
            "character_description": context.character_description,
            "character_personality": context.character_personality,
            "character_depth_prompt": context.character_depth_prompt,
            "scenario": context.scenario,
            "creator_notes": context.creator_notes,
        }
        self.buffer = ScanBuffer(messages, base_depth=settings.depth, context=extras,
                                 injections=context.injections)
        # the deepest any scan looks: the global depth and every entry's own scan depth, unless the
        # minimum-activations rule may walk further back
        reach = prepared.reach(settings)
        self.shortcuts = options.shortcuts
        self.matcher = KeyMatcher(self.buffer, case_sensitive=settings.case_sensitive,
                                  whole_words=settings.match_whole_words, regex_timeout=regex_timeout,
                                  diagnostics=diagnostics, needles=prepared.needles, reach=reach,
                                  shortcuts=options.shortcuts)
        n = len(entries)
        self.decisions: list[_Decision] = [_NOT_SCANNED] * n
        self.ids = prepared.ids
        self.plans = prepared.plans
        self.sticky = [False] * n
        self.cooldown = [False] * n
        self.delayed = [False] * n
        for i in prepared.timed:
            self.sticky[i] = timed.is_active("sticky", entries[i])
            self.cooldown[i] = timed.is_active("cooldown", entries[i])
            self.delayed[i] = timed.is_active("delay", entries[i])
        self.static_skip: list[tuple[str, str] | None] = [None] * n
        for i in prepared.filtered:
            self.static_skip[i] = self._static_skip(entries[i])
        #: entries no rule before the key test can decide in this scan (see :meth:`consider`): the
        #: book's ``keyed_plain`` ones but those held by a rule in this scan (``held``)
        simple = self.simple = list(prepared.keyed_plain)
        held = self.held = {i for i in prepared.timed if self.sticky[i] or self.cooldown[i] or self.delayed[i]}
        held.update(i for i in prepared.filtered if self.static_skip[i] is not None)
        if forced:
            held.update(i for i, entry_id in enumerate(prepared.ids) if entry_id in forced)
        for i in held:
            simple[i] = False
        self.any_sticky = any(self.sticky[i] for i in prepared.timed)
        #: no two entries share a ``book.uid``, so an entry's id is activated exactly when the entry is and
        #: activated entries are found by index (asked of books scanned again: a single scan looks its few
        #: entries up by id rather than hash every id of the books once)
        self.unique_ids = prepared.rescanned and prepared.unique_ids
        #: pass -> how many recursion pieces its haystacks held
        self.pass_pieces: dict[int, int] = {}
        #: this pass's haystack -> the same haystack as the last pass saw it (see :meth:`carry_forward`)
        self._before_cache: dict[Haystack, Haystack] = {}
        #: entries carried forward in the last pass (see :meth:`settle_regex_entries`); their decisions
        #: are written with that pass's step only when they stop waiting (:meth:`release`)
        self.waiting: set[int] = set()
        #: the step and state name of the pass that last carried ``waiting`` forward
        self.waiting_at: tuple[int, str] = (0, "")
        self.hay_class = prepared.hay_class
        #: (case variant, depth) -> the chat's words within that depth, when the chat index holds more
        #: messages (see :meth:`word_test`)
        self._chat_within: dict[tuple[bool, int], set[str]] = {}
        self._hay_cache: list[Haystack | None] = [None] * prepared.hay_classes
        self.activated: dict[str, int] = {}  # entry id -> index, in activation order
        self.activated_indices: set[int] = set()  # the same entries' indices
        self.activated_content: dict[int, str] = {}
        self.activated_step: dict[int, int] = {}
        self.failed_probability: set[int] = set()
        self.content: dict[int, str] = {}
        self.draws: list[Draw] = []
        #: per recursion piece, the entries whose contents it joins (``None`` when contents are expanded)
        self.piece_sources: list[list[int] | None] = []
        # a book scanned once (a CLI run) reads its pieces; from its second scan on (a chat session),
        # what each content holds is kept with the book and a piece is read from its contents'
        if prepared.rescanned:
            self.matcher.known_runs = self.piece_runs
        self.steps: list[StepRecord] = []

    # -- small helpers ------------------------------------------------------------------------
    def decide(self, i: int, outcome: str, reason: str, detail: str, step: int, state: int, key: str | None = None,
               secondary: str | None = None, winner: int | str | None = None) -> None:
        self.decisions[i] = _new_decision(_Decision, (outcome, reason, detail, step, ScanState.NAMES[state], key,
                                                      secondary, winner))

    def run_expand(self, text: str, what: str) -> str:
        if self.expand is None or not text:
            return text
        try:
            return self.expand(text)
        except TemplateError as exc:
            self.diagnostics.append(Diagnostic(exc.code, f"{what}: {exc.message}", severity="warning"))
            return text

    # -- the candidate test ------------------------------------------------------------------
    def _static_skip(self, entry: Entry) -> tuple[str, str] | None:
        """Reasons that hold for the whole scan: disabled, trigger, character filter."""
        if entry.disable:
            return ("disabled", "the entry is disabled")
        if entry.triggers and self.generation_type not in entry.triggers:
            return ("trigger", f"generation type {self.generation_type!r} is not in its triggers "
                    f"{list(entry.triggers)}")
        if self.filtered_by_character(entry):
            return ("filter", "its character filter excludes the current character")
        return None

    def filtered_by_character(self, entry: Entry) -> bool:
        f = entry.character_filter
        character = self.context.character
        if f.names:
            included = character is not None and character in f.names
            if (included if f.is_exclude else not included):
                return True
        if f.tags and character and self.context.character_tags is not None:
            has_tag = any(t in f.tags for t in self.context.character_tags)
            if (has_tag if f.is_exclude else not has_tag):
                return True
        return False

    def haystack(self, i: int, state: int) -> Haystack:
        """Entry ``i``'s haystack, shared by entries with the same depth and sources within a pass."""
        key = self.hay_class[i]
        hay = self._hay_cache[key]
        if hay is None:
            hay = self._hay_cache[key] = self.buffer.haystack(self.entries[i], state)
        return hay

    def consider(self, i: int, state: int, level: float, step: int) -> bool:
        """Whether entry ``i`` is a candidate in this pass; records why or why not.

        Most entries of a large book are plain keyed entries that no rule before the key test
        can stop (``self.simple``): they go straight to the keys.
        """
        entry = self.entries[i]
        if not self.simple[i]:
            verdict = self._before_keys(i, entry, state, level, step)
            if verdict is not None:
                return verdict
        primary_keys, secondary_keys = self.plans[i]
        hay = self._hay_cache[self.hay_class[i]]
        if hay is None:
            hay = self.haystack(i, state)
        matcher = self.matcher
        match = matcher.match
        primary = None
        if not hay.extras and not hay.empty:
            # KeyMatcher.match inlined for a mapped word key on chat plus recursion text (most keys
            # of a large book): the chat's word-run dict, then the words piece_hits recorded
            chat_words_by_case, depth, r = matcher._chat_words, hay.depth, hay.recursion
            for key, needle in primary_keys:
                if needle is None:
                    continue
                if needle.mapped:
                    cs = needle.cs
                    chat_words = chat_words_by_case.get(cs)
                    if chat_words is not None:
                        if chat_words.get(needle.text, _FAR) < depth:
                            primary = key
                            break
                        if not r:
                            continue
                        if matcher._pieces_indexed[cs] >= r:
                            if matcher._piece_words[cs].get(needle.text, _FAR) < r:
                                primary = key
                                break
                            continue
                if match(needle, entry, hay):
                    primary = key
                    break
        else:
            for key, needle in primary_keys:
                if needle is not None and match(needle, entry, hay):
                    primary = key
                    break
        if primary is None:
            detail = "no primary key matched"
            if matcher._reported:  # some regex key was refused or invalid: say so when it is one of these
                refused = [n.rx for _, n in primary_keys if n is not None and n.rx is not None and n.rx.status == "refused"]
                if refused:
                    source = refused[0].source
                    shown = source if len(source) <= 60 else source[:57] + "..."
                    detail += f" (regex key {shown} refused: {refused[0].reason})"
            self.decisions[i] = _new_decision(_Decision, ("skipped", "no_match", detail, step, ScanState.NAMES[state],
                                                          None, None, None))
            return False
        if not (secondary_keys and entry.selective):
            # (the detail, "fired by key ...", is written when the trace is read)
            self.decisions[i] = _new_decision(_Decision, ("activated", "key", None, step, ScanState.NAMES[state],
                                                          primary, None, None))
            return True
        hits = ((key, needle is not None and match(needle, entry, hay)) for key, needle in secondary_keys)
        return self.secondary_logic(i, entry.selective_logic, primary, hits, step, state)

    def secondary_logic(self, i: int, logic: int, primary: str, hits: Iterable[tuple[str, bool]], step: int,
                        state: int) -> bool:
        """Entry ``i``'s decision once its ``primary`` key matched: its secondary keys' ``hits`` (key,
        whether it matched; read in order, and only as far as the logic needs) under ``logic``."""
        decide = self.decide
        any_match = False
        all_match = True
        for key, hit in hits:
            any_match = any_match or hit
            all_match = all_match and hit
            if logic == Logic.AND_ANY and hit:
                decide(i, "activated", "key", f"fired by key {primary!r} and secondary key {key!r} (AND ANY)",
                       step, state, key=primary, secondary=key)
                return True
            if logic == Logic.NOT_ALL and not hit:
                decide(i, "activated", "key", f"fired by key {primary!r}; secondary key {key!r} is absent "
                       "(NOT ALL)", step, state, key=primary, secondary=key)
                return True
        if logic == Logic.NOT_ANY and not any_match:
            decide(i, "activated", "key", f"fired by key {primary!r}; no secondary key matched (NOT ANY)",
                   step, state, key=primary)
            return True
        if logic == Logic.AND_ALL and all_match:
            decide(i, "activated", "key", f"fired by key {primary!r} and every secondary key (AND ALL)",
                   step, state, key=primary)
            return True
        decide(i, "skipped", "secondary_logic", f"key {primary!r} matched but the secondary logic "
               f"{_LOGIC_NAMES.get(logic, logic)} failed", step, state, key=primary)
        return False

    def carry_forward(self, i: int, state: int, step: int) -> bool:
        """Give entry ``i`` (dirty only for its regex keys) the decision it had last pass, if nothing changed.

        Its plain keys were not found in the new recursion text (else it would be dirty already),
        no rule before the keys applies to it (``simple``), and every regex key it tested last
        pass provably answers the same (:meth:`KeyMatcher.regex_unchanged`): then
        :meth:`consider` would decide exactly as last pass, only in this step. Returns whether that
        holds (the entry then waits, and :meth:`release` writes the step into its decision).
        """
        decision = self.decisions[i]
        if (decision.step != step - 1 or decision.reason not in ("no_match", "secondary_logic") or not self.simple[i]
                or i in self.failed_probability or self.ids[i] in self.activated):
            return False
        hay = self._hay_cache[self.hay_class[i]] or self.haystack(i, state)
        before = self._before_cache.get(hay)
        if before is None:
            before = self._before_cache[hay] = (hay._replace(recursion=self.pass_pieces.get(step - 1, 0))
                                                if not hay.empty else hay)
        unchanged = self.matcher.regex_unchanged
        primary_keys, secondary_keys = self.plans[i]
        for _, needle in primary_keys:
            if needle is None or needle.kind != REGEX:
                continue  # a plain key was not found in the new text: it answers as before
            if needle.rx is None or needle.rx.status != "ok":
                return False
            answer = unchanged(needle.rx, before, hay)
            if answer is None:
                return False
            if answer:
                break  # the same first matching primary key; the later ones do not count
        if decision.reason == "secondary_logic":
            for _, needle in secondary_keys:
                if needle is None or needle.kind != REGEX:
                    continue
                if needle.rx is None or needle.rx.status != "ok" or unchanged(needle.rx, before, hay) is None:
                    return False
        return True  # it waits: :meth:`release` writes this step into its decision

    def words_of(self, i: int, content: str) -> int:
        """The word count of entry ``i``'s content (kept with the books when contents are not expanded)."""
        if self.expand is not None:
            return count_words(content)
        counts = self.prepared.word_counts
        count = counts.get(i)
        if count is None:
            count = counts[i] = count_words(content)
        return count

    def _before_keys(self, i: int, entry: Entry, state: int, level: float, step: int) -> bool | None:
        """The rules tested before the keys; ``None`` when none of them decides the entry."""
        decide = self.decide
        static = self.static_skip[i]
        if static is not None:
            decide(i, "skipped", static[0], static[1], step, state)
            return False
        sticky = self.sticky[i]
        if self.delayed[i]:
            decide(i, "skipped", "delay", f"delayed until the chat has {entry.delay} messages", step, state)
            return False
        if self.cooldown[i] and not sticky:
            decide(i, "skipped", "cooldown", "on cooldown", step, state)
            return False
        if entry.delay_until_recursion and not sticky:
            if state != ScanState.RECURSION:
                decide(i, "skipped", "delay_until_recursion", "waits for a recursion step", step, state)
                return False
            if entry.delay_until_recursion > level:
                decide(i, "skipped", "delay_until_recursion",
                       f"waits for delay level {entry.delay_until_recursion:g} (now {level:g})", step, state)
                return False
        if state == ScanState.RECURSION and entry.exclude_recursion and not sticky and self.settings.recursive:
            decide(i, "skipped", "exclude_recursion", "excluded from recursion steps", step, state)
            return False
        if entry.decorators:
            if "@@activate" in entry.decorators:
                decide(i, "activated", "decorator", "@@activate", step, state)
                return True
            if "@@dont_activate" in entry.decorators:
                decide(i, "skipped", "decorator", "@@dont_activate", step, state)
                return False
        if self.forced and self.ids[i] in self.forced:
            decide(i, "activated", "forced", "activated from outside the scan", step, state)
            return True
        if entry.constant:
            decide(i, "activated", "constant", "constant entry", step, state)
            return True
        if sticky:
            decide(i, "activated", "sticky", "a sticky effect keeps it active", step, state)
            return True
        if not entry.key:
            decide(i, "skipped", "no_keys", "no primary keys", step, state)
            return False
        return None

    # -- inclusion groups -------------------------------------------------------------------
    def score(self, entry: Entry, state: int) -> int:
        """SillyTavern's group score: primary keys matched, plus secondaries under AND ANY / full AND ALL."""
        hay = self.buffer.haystack(entry, state)
        primary = sum(1 for k in entry.key if self.matcher.matches(k, entry, hay))
        secondary = sum(1 for k in entry.keysecondary if self.matcher.matches(k, entry, hay))
        if not entry.key:
            return 0
        if entry.keysecondary:
            if entry.selective_logic == Logic.AND_ANY:
                return primary + secondary
            if entry.selective_logic == Logic.AND_ALL:
                return primary + secondary if secondary == len(entry.keysecondary) else primary
        return primary

    def filter_groups(self, candidates: list[int], state: int, step: int) -> list[int]:
        """Inclusion groups on this pass's candidates; returns the survivors in order.

        SillyTavern's steps, each over the groups in JavaScript key order: a sticky member wins its
        group, members on cooldown or delay drop out, group scoring keeps the best scores, and a
        group keeps one member (an earlier pass's activated member, else an override, else a
        weighted roll). Our semantics for an entry in several groups (``"a,b"``): once it loses one
        group it is no longer a member of the others, and an activated entry blocks every group it
        belongs to.
        """
        grouped: dict[str, list[int]] = {}
        entries, in_group = self.entries, self.prepared.in_group
        if in_group.isdisjoint(candidates):  # (most entries are in no group)
            return candidates
        for i in candidates:
            if i in in_group:
                for name in entries[i].groups:
                    grouped.setdefault(name, []).append(i)
        if not grouped:
            return candidates
        groups = _Groups(grouped, js_key_order(grouped), set(candidates), step, state)
        self._sticky_groups(groups)
        self._groups_cooling_down(groups)
        self._group_scoring(groups)
        self._group_winners(groups)
        return [i for i in candidates if i in groups.alive]

    def _lose(self, groups: _Groups, i: int, reason: str, detail: str, winner: int | str | None = None) -> None:
        groups.alive.discard(i)
        self.decide(i, "skipped", reason, detail, groups.step, groups.state, winner=winner)

    def _sticky_groups(self, groups: _Groups) -> None:
        """A group with a sticky member keeps its sticky members only."""
        for name in groups.names:
            members = groups.members[name]
            stickies = [i for i in members if self.timed.is_active("sticky", self.entries[i])]
            if not stickies:
                continue
            groups.sticky.add(name)
            holder = self.entries[stickies[0]].uid
            for i in members:
                if i in groups.alive and i not in stickies:
                    self._lose(groups, i, "group", f"group {name!r} lost to uid {holder} (sticky)", holder)

    def _groups_cooling_down(self, groups: _Groups) -> None:
        """Members on cooldown or delay drop out, sticky or not (a sticky entry is usually on cooldown
        too, since both effects start when it activates), as SillyTavern does next."""
        for name in groups.names:
            for i in groups.members[name]:
                if i in groups.alive and (self.timed.is_active("cooldown", self.entries[i])
                                          or self.timed.is_active("delay", self.entries[i])):
                    self._lose(groups, i, "cooldown", f"in inclusion group {name!r} while on cooldown")

    def _group_scoring(self, groups: _Groups) -> None:
        """Where group scoring applies (globally or per entry), members below the group's best score drop out."""
        global_scoring = self.settings.use_group_scoring
        for name in groups.names:
            members = [i for i in groups.members[name] if i in groups.alive]
            if name in groups.sticky or not members:
                continue
            if not global_scoring and not any(self.entries[i].use_group_scoring for i in members):
                continue
            scores = {i: self.score(self.entries[i], groups.state) for i in members}
            best = max(scores.values())
            for i in members:
                scored = self.entries[i].use_group_scoring
                if scored is None:
                    scored = global_scoring
                if scored and scores[i] < best:
                    self._lose(groups, i, "group_scoring", f"group {name!r}: score {scores[i]} is below the best {best}")

    def _group_winners(self, groups: _Groups) -> None:
        """Each group not decided by a sticky member keeps one member: none when an earlier pass
        activated one of its entries, else the override with the highest order, else a weighted roll."""
        activated_groups: dict[str, int | str] = {}
        for j in self.activated.values():
            for group in self.entries[j].groups:
                activated_groups.setdefault(group, self.entries[j].uid)
        for name in groups.names:
            if name in groups.sticky:
                continue
            members = [i for i in groups.members[name] if i in groups.alive]
            if name in activated_groups:
                holder = activated_groups[name]
                for i in members:
                    self._lose(groups, i, "group", f"group {name!r} lost to uid {holder} (activated in an earlier pass)",
                               holder)
                continue
            if len(members) <= 1:
                continue
            overrides = [i for i in members if self.entries[i].group_override]
            if overrides:
                winner: int | None = sorted(overrides, key=lambda i: -self.entries[i].order)[0]
                how = "group override with the highest order"
            else:
                winner, how = self._weighted_roll(name, members)
                if winner is None:
                    continue
            uid = self.entries[winner].uid
            for i in members:
                if i != winner:
                    self._lose(groups, i, "group", f"group {name!r} lost to uid {uid} ({how})", uid)

    def _weighted_roll(self, name: str, members: list[int]) -> tuple[int | None, str]:
        """SillyTavern's weighted pick among a group's members (one draw, recorded); ``None`` when the
        roll passes every weight (all weights zero or negative)."""
        weights = [self.entries[i].group_weight for i in members]
        total = sum(weights)
        value = self.rng()
        roll = value * total
        winner = None
        running = 0.0
        for i, w in zip(members, weights):
            running += w
            if roll <= running:
                winner = i
                break
        self.draws.append(Draw("group", value, name, total, self.entries[winner].id if winner is not None else "none"))
        return winner, f"weighted roll {roll:.3f} of {total:g}"

    def first_pass_entries(self) -> list[int]:
        """Entries that can be candidates in the first pass; the others get a pending decision."""
        prepared = self.prepared
        todo = set(prepared.unconditional) | prepared.always_dirty
        todo.update(i for i in prepared.timed if self.sticky[i])
        if self.forced:
            todo.update(i for i, entry_id in enumerate(self.ids) if entry_id in self.forced)
        extras = tuple(t for t in (*self.buffer.context.values(), self.buffer.injection_text) if t)
        matcher = self.matcher
        for cs in (True, False):
            words, others = prepared.primary_words[cs], prepared.primary_others[cs]
            if not words and not others:
                continue
            chat_words = matcher._chat_index(cs).words()
            # each ``&`` walks the smaller side in C, and the owners are added in C too
            found = words.keys() & chat_words.keys()
            for extra in extras:
                part = matcher._part(extra, cs)
                if part.words is None:
                    part.words = set(word_runs(part.text))
                found |= words.keys() & part.words
            if found:
                todo.update(*map(words.__getitem__, found))
            if others:
                # only keys whose GRAM-character window occurs somewhere in the text can match
                text = matcher._chat_index(cs).concat + "".join(f"\n{t if cs else t.lower()}" for t in extras)
                runs: AbstractSet[str] = chat_words.keys()
                if extras:
                    runs = set(runs).union(*(matcher._part(extra, cs).words or () for extra in extras))
                grams = text_windows(text, runs, prepared.primary_mixed[cs])
                matcher.chat_grams[cs] = (grams, prepared.primary_mixed[cs])
                whole = matcher.key_windows
                for gram in others.keys() & grams:  # the smaller side walked in C
                    for needle, owners in others[gram]:
                        if whole and not needle.windows <= grams:
                            matcher.spared_by_windows += 1  # a window of its word runs is in no word run of the text
                            continue
                        if matcher.chat_hit(needle) < _FAR or (extras and matcher.extras_hit(needle, extras)):
                            todo.update(owners)
        decisions = self.decisions
        decisions[:] = [_PENDING] * len(decisions)  # in place: the list is shared with the trace
        return sorted(todo)

    def resolve_pending(self) -> None:
        """Decide the entries the first pass skipped: what looking at them then would have said.

        A pending entry owns no primary key found anywhere in the chat or the extra sources (else
        the first pass would have looked at it), so unless a rule before the key test stops it,
        :meth:`consider` would say "no match": that decision is filled in directly, and only the
        others go through :meth:`consider`. A book of 10,000 entries has thousands of these.
        """
        self._hay_cache = [None] * self.prepared.hay_classes
        decisions, simple = self.decisions, self.simple
        fast = self.shortcuts.wi_fast_pending
        for i, decision in enumerate(decisions):
            if decision is _PENDING:
                if simple[i] and fast:
                    decisions[i] = _NO_MATCH_FIRST
                else:
                    self.consider(i, ScanState.INITIAL, self.first_level, 1)

    # -- the loop -----------------------------------------------------------------------------
    @property
    def budget(self) -> int:
        return self.meter.budget

    def run(self) -> None:
        """SillyTavern's scan loop: a pass per step (which entries, their candidacy, admission, the
        next state) until no state is left or the step limit is reached."""
        limit = self.settings.max_recursion_steps
        levels = list(self.prepared.levels)
        cursor = _Cursor(level=levels.pop(0) if levels else 0, levels=levels)
        self.first_level = cursor.level
        while cursor.state != ScanState.NONE:
            if limit and cursor.step >= limit:
                break
            cursor.step += 1
            self._hay_cache = [None] * self.prepared.hay_classes
            self._before_cache = {}
            todo = self.entries_to_check(cursor)
            cursor.seen_pieces = len(self.buffer.recursion)
            self.pass_pieces[cursor.step] = cursor.seen_pieces if cursor.state == ScanState.RECURSION else 0
            candidates = (self.candidates_by_words(todo, cursor) if self.shortcuts.wi_word_candidates
                          else self.candidates(todo, cursor))
            cursor.last_candidates = list(candidates)
            if self.any_sticky:
                candidates.sort(key=lambda i: 0 if self.sticky[i] else 1)
            considered = list(candidates)
            self.meter.start_pass()
            candidates = self.filter_groups(candidates, cursor.state, cursor.step)
            ids = self.ids
            admitted = self.admit_in_bulk(candidates, cursor) if self.shortcuts.wi_bulk_admit else None
            activated_now = admitted if admitted is not None else [ids[i] for i in candidates if self.admit(i, cursor)]
            failed, no_recursion = self.failed_probability, self.prepared.no_recursion
            for_recursion = ([i for i in candidates if i not in failed and i not in no_recursion]
                             if failed or no_recursion else list(candidates))
            self.steps.append(StepRecord(cursor.step, ScanState.NAMES[cursor.state], self.buffer.depth(), cursor.level,
                                         tuple(map(ids.__getitem__, considered)), tuple(activated_now)))
            self.next_state(cursor, for_recursion)
            if cursor.state != ScanState.NONE:
                self.add_recursion(for_recursion)
        self.release(self.waiting)
        self.waiting = set()

    def entries_to_check(self, cursor: _Cursor) -> Iterable[int]:
        """The entries this pass looks at; every other one keeps its decision.

        The first pass looks only at entries that can be candidates: those activated without
        keys, sticky or forced ones, regex owners, and owners of a primary key found in the chat
        or the extra sources; the rest are decided lazily (no match). A later pass looks at what
        can have changed (:meth:`changed_entries`), or at everything when the minimum-activations
        rule moved the chat's window (or ``shortcuts.wi_incremental`` is off).
        """
        context = (cursor.state, cursor.level, self.buffer.skew)
        waiting, self.waiting = self.waiting, set()
        previous, cursor.previous = cursor.previous, context
        incremental = self.shortcuts.wi_incremental
        if previous is None and incremental:
            return self.first_pass_entries()
        if (not incremental or previous is None or ScanState.MIN_ACTIVATIONS in (cursor.state, previous[0])
                or previous[2] != context[2]):
            self.release(waiting)
            return range(len(self.entries))
        return self.changed_entries(cursor, previous != context, waiting)

    def changed_entries(self, cursor: _Cursor, moved: bool, waiting: set[int]) -> list[int]:
        """What can have changed since the last pass: its candidates that did not activate, owners of
        keys found in the new recursion text, entries with regex keys (unless their decision provably
        stands: :meth:`settle_regex_entries`), and, when the state or delay level ``moved``, the
        entries whose rules depend on them."""
        prepared = self.prepared
        dirty = set(cursor.last_candidates)
        for piece in range(cursor.seen_pieces, len(self.buffer.recursion)):
            dirty |= self.matcher.piece_hits(piece, prepared.word_maps, prepared.other_maps)
        if moved:
            dirty.update(prepared.state_sensitive)
        if self.shortcuts.wi_settled_regex:
            self.settle_regex_entries(dirty, waiting, cursor)
        else:
            dirty |= prepared.always_dirty
        # an entry activated in an earlier pass is passed over at once (see :meth:`candidates`): leave it out
        dirty -= self.activated_indices
        return sorted(dirty)

    def settle_regex_entries(self, dirty: set[int], waiting: set[int], cursor: _Cursor) -> None:
        """Add to ``dirty`` the entries with regex keys whose decision may change in this pass; the
        others carry their last decision forward (:meth:`still_waiting` for those carried forward
        last pass, else :meth:`carry_forward`) and are remembered in ``self.waiting``.

        An entry activated in an earlier pass is left to :meth:`changed_entries`, which leaves it
        out (:meth:`carry_forward` would refuse it without looking)."""
        prepared = self.prepared
        kept = self.still_waiting(waiting - dirty, cursor)
        self.release(waiting - kept)  # their decisions as the last pass carried them
        carried = self.waiting
        carried |= kept
        for i in prepared.regex_only - dirty - kept - self.activated_indices:
            if self.carry_forward(i, cursor.state, cursor.step):
                carried.add(i)
            else:
                dirty.add(i)
        dirty |= prepared.dirty_always
        self.waiting_at = (cursor.step, ScanState.NAMES[cursor.state])

    def still_waiting(self, waiting: set[int], cursor: _Cursor) -> set[int]:
        """Of the ``waiting`` entries (carried forward last pass), those that keep their decision in
        this step from the new recursion text alone: :meth:`carry_forward` again, cheaply.

        Last pass established, for each of an entry's regex keys, that no match lies in the text
        then and that a later one needs the key's required literal past its end; if the new
        recursion text (as written and case-folded) holds none of the literals, that still holds.
        Each distinct regex is looked at once (its owners drop out when the new text holds its
        literal), most by a set lookup (:meth:`KeyMatcher.may_hold`) rather than a search, and a
        kept entry's decision is not rewritten in every pass: it keeps waiting, and
        :meth:`release` writes the step of the last pass that carried it when it stops.
        """
        if not waiting:
            return set()
        recursion = self.buffer.recursion
        start, end = cursor.seen_pieces, len(recursion)
        raw_new = "\n".join(recursion[start:end])  # (one piece, the usual case: that piece itself)
        new_texts = (raw_new, fold_for_literal(raw_new))
        checks = self.prepared.waiting_checks
        dropped: set[int] = set(checks.always)
        for literal, ignore_case, owners in checks.unwindowed:
            if literal in new_texts[ignore_case]:
                dropped |= owners
        for ignore_case, by_window in checks.by_window.items():
            # as KeyMatcher.may_hold decides: a literal whose window the new pieces lack is not in them
            seen = self.matcher.windows_between(start, end, ignore_case)
            new_text = new_texts[ignore_case]
            for window in by_window.keys() if seen is None else by_window.keys() & seen:
                for literal, owners in by_window[window]:
                    if literal in new_text:
                        dropped |= owners
        # a waiting entry was carried by the last pass (its step is the last one's) and was no
        # candidate since (so it cannot have failed its probability); a copy of it may have activated
        kept = waiting - dropped - self.failed_probability
        if self.unique_ids:
            return kept - self.activated_indices
        activated, ids = self.activated, self.ids
        return {i for i in kept if ids[i] not in activated}

    def release(self, entries: Iterable[int]) -> None:
        """Entries that stop waiting get the step and state of the pass that last carried them."""
        step, state_name = self.waiting_at
        decisions = self.decisions
        for i in entries:
            d = decisions[i]
            if d.step != step:
                decisions[i] = _new_decision(_Decision, (d[0], d[1], d[2], step, state_name, d[5], d[6], d[7]))

    def candidates(self, todo: Iterable[int], cursor: _Cursor) -> list[int]:
        """The entries of ``todo`` that are candidates in this pass (:meth:`consider`), in order.

        An entry that failed its probability roll stays out; one activated in an earlier pass is
        passed over, and a copy of it (the same ``book.uid`` in another source) is a duplicate.
        """
        out: list[int] = []
        ids, activated, failed, decisions = self.ids, self.activated, self.failed_probability, self.decisions
        consider, state, level, step = self.consider, cursor.state, cursor.level, cursor.step
        for i in todo:
            if i in failed:
                continue
            if ids[i] in activated:
                if activated[ids[i]] != i and decisions[i].reason == "not_scanned":
                    self.decide(i, "skipped", "duplicate", f"{ids[i]} was already activated by another entry",
                                step, state)
                continue
            if consider(i, state, level, step):
                out.append(i)
        return out

    def candidates_by_words(self, todo: Iterable[int], cursor: _Cursor) -> list[int]:
        """:meth:`candidates`, with an entry of only mapped word keys (``_Prepared.word_plans``) and no
        rule before them (``simple``) decided here from the word-run maps, as :meth:`consider` would.

        A key of such an entry matches when its word is in one of the two containers of the pass's
        :meth:`word_test` for the entry's haystack and case variant (a set lookup each, no depth to
        compare); where that test cannot be made, the entry goes through :meth:`consider`.
        """
        out: list[int] = []
        ids, activated, failed, decisions = self.ids, self.activated, self.failed_probability, self.decisions
        consider, state, level, step = self.consider, cursor.state, cursor.level, cursor.step
        held, word_plans = self.held, self.prepared.word_plans
        done = self.activated_indices if self.unique_ids else None
        tests: list[Any] = [_MISSING] * (2 * self.prepared.hay_classes)
        name = ScanState.NAMES[state]
        no_match = _new_decision(_Decision, ("skipped", "no_match", "no primary key matched", step, name,
                                             None, None, None))
        for i in todo:
            if i in failed:
                continue
            if done is not None:
                if i in done:
                    continue
            elif ids[i] in activated:
                if activated[ids[i]] != i and decisions[i].reason == "not_scanned":
                    self.decide(i, "skipped", "duplicate", f"{ids[i]} was already activated by another entry",
                                step, state)
                continue
            plan = word_plans[i]  # (``None`` unless the book's entry is keyed_plain: then simple unless held)
            test = None
            if plan is not None and i not in held:
                test = tests[plan.slot]
                if test is _MISSING:
                    test = tests[plan.slot] = self.word_test(i, plan.slot & 1 == 1, state)
            if test is None:
                if consider(i, state, level, step):
                    out.append(i)
                continue
            seen, pieces = test
            at = 0
            for word in plan.words:  # type: ignore[union-attr]
                if word in seen or word in pieces:
                    break
                at += 1
            else:
                decisions[i] = no_match
                continue
            key = plan.keys[at]  # type: ignore[union-attr]
            secondary = plan.secondary  # type: ignore[union-attr]
            if secondary is None:
                decisions[i] = _new_decision(_Decision, ("activated", "key", None, step, name, key, None, None))
                out.append(i)
            elif self.secondary_logic(i, plan.logic, key,  # type: ignore[union-attr]
                                      [(k, w is not None and (w in seen or w in pieces)) for k, w in secondary],
                                      step, state):
                out.append(i)
        return out

    def word_test(self, i: int, cs: bool, state: int) -> tuple[Container[str], Container[str]] | None:
        """For the mapped word keys (case variant ``cs``) of entries sharing entry ``i``'s haystack in
        this pass: two containers such that a key matches exactly when its word is in either (the
        chat's words within the haystack's depth, the recursion pieces' words within its pieces);
        ``None`` when the haystack has extra sources or is empty, or a piece is not indexed yet."""
        hay = self._hay_cache[self.hay_class[i]]
        if hay is None:
            hay = self.haystack(i, state)
        if hay.extras or hay.empty:
            return None
        matcher = self.matcher
        chat_words = matcher._chat_words.get(cs)
        if chat_words is None:
            chat_words = matcher._chat_word_map(cs)
        r, indexed = hay.recursion, matcher._pieces_indexed[cs]
        if r > indexed:
            return None  # :meth:`consider` searches the pieces piece_hits has not indexed
        # a word's value is the newest message (or first piece) holding it: the chat index covers at
        # most the buffer's messages up to the reach, the piece map the indexed pieces
        chat_size = len(matcher.scanned_messages())
        depth = hay.depth
        if depth >= chat_size:
            seen: Container[str] = chat_words
        else:  # (the same in every pass of this depth: kept)
            within = self._chat_within.get((cs, depth))
            if within is None:
                within = self._chat_within[(cs, depth)] = self._words_within(chat_words, depth)
            seen = within
        pieces: Container[str] = _NO_WORDS
        if r:
            piece_words = matcher._piece_words[cs]
            pieces = piece_words if r == indexed else self._words_within(piece_words, r)
        return seen, pieces

    @staticmethod
    def _words_within(first: dict[str, int], limit: int) -> set[str]:
        """The words of a word -> first index map whose index is below ``limit``."""
        return {word for word, at in first.items() if at < limit}

    def written(self, indices: list[int]) -> list[str]:
        """The contents of entries ``indices`` as written: from the books' list when they are scanned
        again (:attr:`_Prepared.contents`), else from the entries (a single scan reads only these)."""
        prepared = self.prepared
        if prepared.rescanned:
            return list(map(prepared.contents.__getitem__, indices))
        entries = self.entries
        return [entries[i].content for i in indices]

    def admit_in_bulk(self, candidates: list[int], cursor: _Cursor) -> list[str] | None:
        """All of ``candidates`` admitted at once, as :meth:`admit` one by one would; ``None`` when it may not.

        That holds when no rule of :meth:`admit` can refuse one: no probability to roll, contents
        not expanded, words counted as running sums (``_BudgetMeter.additive``), the budget not
        yet reached and the pass's total with every content still below it (counts only grow, so
        each earlier total is below it too). Nothing is changed when ``None`` is returned.
        """
        meter = self.meter
        if not meter.additive or self.expand is not None or meter.overflowed or not candidates:
            return None
        rolling = self.prepared.rolling
        if rolling and not rolling.isdisjoint(candidates):
            return None
        contents = self.written(candidates)
        words = list(map(meter.known_words.get, candidates))
        if None in words:
            words = [self.words_of(i, content) if count is None else count
                     for i, count, content in zip(candidates, words, contents)]
        added = sum(words)
        if meter.base_tokens + meter.new_tokens + added >= meter.budget:  # type: ignore[operator]
            return None
        meter.new_tokens += added
        meter.pass_words.update(zip(candidates, words))
        self.content.update(zip(candidates, contents))
        self.activated_content.update(zip(candidates, contents))
        self.activated_step.update(dict.fromkeys(candidates, cursor.step))
        admitted = list(map(self.ids.__getitem__, candidates))
        self.activated.update(zip(admitted, candidates))
        self.activated_indices.update(candidates)
        return admitted

    def admit(self, i: int, cursor: _Cursor) -> bool:
        """Candidate ``i`` against its probability and the token budget: activated, or skipped with why."""
        entry = self.entries[i]
        meter = self.meter
        step, state = cursor.step, cursor.state
        if meter.overflowed and not entry.ignore_budget:
            self.decide(i, "skipped", "budget", f"the budget of {meter.budget} tokens is used up", step, state)
            return False
        if entry.use_probability and entry.probability < 100 and not self.sticky[i]:
            value = self.rng()
            passed = value * 100 <= entry.probability
            self.draws.append(Draw("probability", value, self.ids[i], entry.probability, "pass" if passed else "fail"))
            if not passed:
                self.failed_probability.add(i)
                self.decide(i, "skipped", "probability", f"rolled {value * 100:.2f} against "
                            f"{entry.probability:g}%", step, state)
                return False
        content = entry.content if self.expand is None else self.run_expand(entry.content, f"content of {self.ids[i]}")
        self.content[i] = content
        total = meter.total_with(i, content)
        if not entry.ignore_budget and total >= meter.budget:
            meter.overflowed = True
            self.decide(i, "skipped", "budget", f"{total} tokens would reach the budget of {meter.budget}", step, state)
            return False
        self.activated[self.ids[i]] = i
        self.activated_indices.add(i)
        self.activated_content[i] = content
        self.activated_step[i] = step
        return True

    def next_state(self, cursor: _Cursor, for_recursion: list[int]) -> None:
        """SillyTavern's choice of the next scan state after a pass (``NONE`` ends the loop).

        Recursion when this pass activated entries that may recurse (or a minimum-activations pass
        left recursion text), unless the budget overflowed; else a minimum-activations pass one
        message deeper, while the chat and ``min_activations_depth_max`` allow; else the next
        delay level.
        """
        s = self.settings
        overflowed = self.meter.overflowed
        following = ScanState.NONE
        if s.recursive and not overflowed and for_recursion:
            following = ScanState.RECURSION
        if s.recursive and not overflowed and cursor.state == ScanState.MIN_ACTIVATIONS and self.buffer.recursion:
            following = ScanState.RECURSION
        if following == ScanState.NONE and not overflowed and 0 < s.min_activations and \
                len(self.activated) < s.min_activations:
            depth = self.buffer.depth()
            over = (0 < s.min_activations_depth_max < depth) or depth > self.chat_length
            if not over:
                following = ScanState.MIN_ACTIVATIONS
                self.buffer.advance()
        if following == ScanState.NONE and cursor.levels:
            following = ScanState.RECURSION
            cursor.level = cursor.levels.pop(0)
        cursor.state = following

    def add_recursion(self, for_recursion: list[int]) -> None:
        """This pass's recursing entries' contents become the next pieces of recursion text."""
        contents = list(map(self.content.get, for_recursion))
        if None in contents:  # (a candidate the budget refused before its content was read)
            contents = [self.entries[i].content if content is None else content
                        for i, content in zip(for_recursion, contents)]
        text = "\n".join(contents)
        if text:
            self.buffer.add_recursion(text)
            self.meter.add_recursion(text, for_recursion, contents)
            self.piece_sources.append(for_recursion if self.expand is None else None)

    def piece_runs(self, index: int, cs: bool) -> TextRuns | None:
        """What :meth:`KeyMatcher.piece_hits` reads of recursion piece ``index`` in one case variant
        (:attr:`KeyMatcher.known_runs`), as the union of its contents' (each found
        once per book: without ``expand`` a content is the entry's own, and ``"\\n"`` joins them);
        ``None`` when contents are expanded."""
        sources = self.piece_sources[index] if index < len(self.piece_sources) else None
        if sources is None:
            return None
        prepared = self.prepared
        memo = prepared.content_runs.get(cs)
        if memo is None:
            memo = prepared.content_runs[cs] = [None] * len(self.entries)
        known = list(map(memo.__getitem__, sources))
        if None in known:
            keys = prepared.word_keys(cs)
            words = [m[cs] for m in prepared.word_maps if m[cs]]
            others = [(m[cs], mixed[cs]) for m, mixed in prepared.other_maps if m[cs]]
            entries = self.entries
            for at, i in enumerate(sources):
                if known[at] is None:
                    text = entries[i].content
                    if prepared.kept_chars + len(text) > _KEPT_CONTENT_CHARS:
                        return None  # (the book keeps no more: the piece is read)
                    prepared.kept_chars += len(text)
                    known[at] = memo[i] = text_runs(text if cs else text.lower(), keys, words, others)
        windows: set[str] = set().union(*map(_FIRST, known))
        windows.add("")
        return TextRuns(windows, set().union(*map(_SECOND, known)), set().union(*map(_THIRD, known)))


@dataclass(slots=True)
class _Groups:
    """One pass's inclusion groups while :meth:`_Run.filter_groups` decides them."""

    #: group name -> its members among the pass's candidates, in candidate order
    members: dict[str, list[int]]
    #: the group names in JavaScript key order (the order SillyTavern walks them in)
    names: list[str]
    #: candidates no group step has removed yet
    alive: set[int]
    step: int
    state: int
    #: groups a sticky member decided
    sticky: set[str] = field(default_factory=set)


@dataclass(slots=True)
class _Cursor:
    """Where the loop is: the pass's state, delay level and step, and what the last pass left."""

    state: int = ScanState.INITIAL
    level: float = 0
    #: the delay levels still to come, lowest first
    levels: list[float] = field(default_factory=list)
    step: int = 0
    #: (state, level, buffer skew) of the last pass; ``None`` before the first
    previous: tuple[int, float, int] | None = None
    #: the last pass's candidates (before groups and the budget)
    last_candidates: list[int] = field(default_factory=list)
    #: recursion pieces the last pass's haystacks held
    seen_pieces: int = 0


class _BudgetMeter:
    """The scan's token budget, and the three ways of counting against it that give the same decisions.

    SillyTavern counts, for each candidate of a pass, the recursion text so far (newest first)
    plus this pass's admitted contents so far, each followed by ``"\\n"``, and stops at the budget.

    - *words* (the ``"words"`` tokenizer and no caller's counter): a word never spans a ``"\\n"``
      joint, so counts add up: running sums replace recounting the texts;
    - *bytes first* (a counter with :data:`AT_MOST_UTF8_BYTES`): while the texts' UTF-8 bytes stay
      under the budget, the count cannot reach it either, so nothing is counted;
    - *exact*: the counter on the recursion text and on this pass's contents.
    """

    def __init__(self, budget: int, count_tokens: Callable[[str], int], *, additive: bool,
                 words_of: Callable[[int, str], int], known_words: dict[int, int] | None = None) -> None:
        self.budget = budget
        self.count_tokens = count_tokens
        self.additive = additive
        #: the counter promises never to count more tokens than the text has UTF-8 bytes
        self.bytes_bound = not additive and getattr(count_tokens, AT_MOST_UTF8_BYTES, False) is True
        self.words_of = words_of
        #: entry index -> its content's word count, where ``words_of`` keeps them (read first)
        self.known_words = known_words if known_words is not None else {}
        #: once the budget is reached, only entries that ignore it are admitted, in every later pass
        self.overflowed = False
        self.all_text = ""  # the recursion text so far, newest first, as SillyTavern counts it
        self.all_tokens = 0  # its word count, kept as a running sum (words)
        self.all_bytes = 0  # its UTF-8 length (bytes first)
        # this pass's share (:meth:`start_pass` sets it at the start of each pass)
        self.base_tokens: int | None = None
        self.new_content = ""
        self.new_tokens = 0
        self.new_bytes = 0
        #: this pass's admitted entries -> their contents' word counts (words), reused for the recursion text
        self.pass_words: dict[int, int] = {}

    def start_pass(self) -> None:
        """A new pass: no content admitted yet."""
        # with a byte bound the exact count waits until the bytes could reach the budget
        self.base_tokens = self.all_tokens if self.additive else \
            None if self.bytes_bound else self.count_tokens(self.all_text)
        self.new_content = ""
        self.new_tokens = 0
        self.new_bytes = 0
        self.pass_words = {}

    def total_with(self, i: int, content: str) -> int:
        """The count with entry ``i``'s ``content`` added to this pass's (0 when the bytes prove it below
        the budget); the content counts from now on, whether the entry is then admitted or not."""
        if self.additive:
            words = self.known_words.get(i)
            if words is None:
                words = self.words_of(i, content)
            self.pass_words[i] = words
            self.new_tokens += words
            return self.base_tokens + self.new_tokens  # type: ignore[operator]
        self.new_content += content + "\n"
        if self.bytes_bound:
            self.new_bytes += _utf8_len(content) + 1
            if self.all_bytes + self.new_bytes < self.budget:
                # tokens <= bytes < budget: the exact counts cannot reach the budget either
                return 0
        if self.base_tokens is None:
            self.base_tokens = self.count_tokens(self.all_text)
        self.new_tokens = self.count_tokens(self.new_content)
        return self.base_tokens + self.new_tokens

    def add_recursion(self, text: str, indices: list[int], contents: list[str]) -> None:
        """``text`` (the ``contents`` of entries ``indices`` joined) joins the recursion text."""
        if self.additive:
            # words never span the "\n" joint: the new text's count is its contents' counts
            counts = list(map(self.pass_words.get, indices))
            if None in counts:
                counts = [self.words_of(i, content) if count is None else count
                          for i, count, content in zip(indices, counts, contents)]
            self.all_tokens += sum(counts)
        else:
            self.all_text = text + "\n" + self.all_text
            if self.bytes_bound:
                self.all_bytes += _utf8_len(text) + 1


#: the attribute a token counter sets (to ``True``) to promise that it never counts more tokens than
#: its text has UTF-8 bytes (byte-level BPE such as tiktoken's, where every token is at least one
#: byte; word counts; SillyTavern's characters/3.35 estimate). The budget check then counts only
#: once the activated text's bytes could reach the budget, and gives the same decisions.
AT_MOST_UTF8_BYTES = "at_most_utf8_bytes"


def _utf8_len(text: str) -> int:
    """The UTF-8 length of ``text`` (a lone surrogate as the 3 bytes it would take)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _expand_or_keep(expand: Expand | None, text: str, diagnostics: list[Diagnostic]) -> str:
    if expand is None or not text:
        return text
    try:
        return expand(text)
    except TemplateError as exc:
        diagnostics.append(Diagnostic(exc.code, f"key: {exc.message}", severity="warning"))
        return text


def _duplicate_names(books: list[WorldBook]) -> bool:
    return len({b.name for b in books}) != len(books)


def _js_key(book: str, uid: int | str) -> str:
    return f"{book}.{uid}"


@dataclass(frozen=True, slots=True)
class ActivationOptions:
    """What one activation is asked besides its books and chat: the arguments of
    :func:`activate_world_info`, read and checked once, then handed down as one value."""

    settings: WorldInfoSettings = WorldInfoSettings()
    #: the timed-effects state from the previous scan
    state: Mapping[str, Any] | None = None
    seed: int = 0
    expand: Expand | None = None
    token_counter: Callable[[str], int] | None = None
    context: ScanContext = ScanContext()
    generation_type: str = "normal"
    dry_run: bool = False
    #: ids (``book.uid``) of the entries activated from outside the scan
    forced: frozenset[str] = frozenset()
    rng: Callable[[], float] | None = None
    regex_timeout: float = DEFAULT_TIMEOUT
    #: the performance shortcuts the scan may take (all by default; ``PLAIN``: the reference path)
    shortcuts: Shortcuts = DEFAULT

    @classmethod
    def read(cls, settings: Mapping[str, Any] | WorldInfoSettings | None = None,
             state: Mapping[str, Any] | None = None, seed: int = 0, *, expand: Expand | None = None,
             token_counter: Callable[[str], int] | None = None,
             context: Mapping[str, Any] | ScanContext | None = None, generation_type: str = "normal",
             dry_run: bool = False, forced: Iterable[tuple[str, int | str]] = (),
             rng: Callable[[], float] | None = None, regex_timeout: float = DEFAULT_TIMEOUT,
             shortcuts: Shortcuts = DEFAULT) -> ActivationOptions:
        """The options from :func:`activate_world_info`'s arguments (``INPUT_INVALID`` for a bad one)."""
        if generation_type not in GENERATION_TYPES:
            raise TemplateError(f"unknown generation type {generation_type!r}; expected one of "
                                f"{', '.join(GENERATION_TYPES)}", code="INPUT_INVALID")
        if not isinstance(shortcuts, Shortcuts):
            raise TemplateError(f"shortcuts should be a Shortcuts value, not {type(shortcuts).__name__}",
                                code="INPUT_INVALID")
        return cls(WorldInfoSettings.from_mapping(settings), state, seed, expand, token_counter,
                   ScanContext.from_mapping(context), generation_type, dry_run,
                   frozenset(_js_key(b, u) for b, u in forced), rng, regex_timeout, shortcuts)


def activate_world_info(
    books: Any,
    chat: Any,
    settings: Mapping[str, Any] | WorldInfoSettings | None = None,
    state: Mapping[str, Any] | None = None,
    seed: int = 0,
    *,
    expand: Expand | None = None,
    token_counter: Callable[[str], int] | None = None,
    context: Mapping[str, Any] | ScanContext | None = None,
    generation_type: str = "normal",
    dry_run: bool = False,
    forced: Iterable[tuple[str, int | str]] = (),
    rng: Callable[[], float] | None = None,
    regex_timeout: float = DEFAULT_TIMEOUT,
    shortcuts: Shortcuts = DEFAULT,
) -> Activation:
    """Scan ``chat`` for the entries of ``books`` the way SillyTavern 1.18 does, and place them.

    ``books``: one book (``{"entries": {...}}`` or a list of entries), a list of books (each may
    carry ``name`` and ``source``: global, character, chat, persona), or a mapping of name to book.
    ``chat``: messages oldest first, strings or ``{"role", "name", "content"}`` (or a long chat's
    :class:`~tavernbox.worldinfo.scan.ChatTail`, built only as deep as the scan reads). ``settings``:
    SillyTavern's names (see :class:`WorldInfoSettings`). ``state``: the timed-effects state from
    the previous scan (returned as ``Activation.state``). ``seed`` drives probability and group
    rolls unless ``rng`` (a ``random()``-like callable) is given. ``expand`` macro-expands keys and
    contents; ``token_counter`` replaces the settings' tokenizer for the budget. ``shortcuts``
    names the performance shortcuts the scan may take (:class:`~tavernbox.shortcuts.Shortcuts`,
    its ``wi_*`` fields; all by default, each giving exactly what its plain path gives):
    :data:`~tavernbox.shortcuts.PLAIN` runs the reference path.

    The cyclic garbage collector is paused for the call (see :func:`bulk_allocation`): a scan of a
    large book allocates its index and records in bursts that would otherwise trigger repeated
    collections walking every live object; nothing it builds forms a cycle.
    """
    options = ActivationOptions.read(settings, state, seed, expand=expand, token_counter=token_counter,
                                     context=context, generation_type=generation_type, dry_run=dry_run,
                                     forced=forced, rng=rng, regex_timeout=regex_timeout, shortcuts=shortcuts)
    with bulk_allocation():
        return _activate(books, chat, options)


def _activate(books: Any, chat: Any, options: ActivationOptions) -> Activation:
    """The body of :func:`activate_world_info`: books and chat read, the loop run, its result placed."""
    world_books, diagnostics = _normalized_books(books, options.shortcuts)
    prepared = _prepared_books(world_books, options, diagnostics)
    entries = prepared.entries
    messages, chat_length = _scanned_messages(chat, prepared, options)
    # only entries with a timed field can be held by an effect or own a record
    timed = TimedEffects(options.state, [entries[i] for i in prepared.timed], chat_length, dry_run=options.dry_run)
    run = _Run(prepared, messages, options, timed, diagnostics, chat_length)
    run.run()
    contents, steps = run.activated_content, run.activated_step
    order = list(run.activated.values())
    activated = ActivatedEntry.many(list(map(entries.__getitem__, order)), list(map(contents.__getitem__, order)),
                                    list(map(steps.__getitem__, order)))
    # only entries with a timed field start an effect: the others need not be looked at
    if prepared.timed:
        with_timed = set(prepared.timed)
        timed.record([entries[i] for i in run.activated.values() if i in with_timed])

    def records() -> tuple[TraceRecord, ...]:
        run.resolve_pending()
        return trace_records(entries, run.decisions)

    def dicts() -> list[dict[str, Any]]:
        run.resolve_pending()
        return trace_dicts(entries, run.decisions)

    # a book scanned again keeps its entries' orders and positions (a single scan reads its activated entries')
    ranks, positions = prepared.placement if prepared.rescanned else (None, ())
    if ranks is None:
        by_position = build_positions(activated)
    else:
        by_position = place_activated(activated, list(map(ranks.__getitem__, order)),
                                      list(map(positions.__getitem__, order)))
    return Activation(
        by_position=by_position,
        activated=tuple(activated),
        trace=Trace(records, tuple(run.steps), dicts=dicts),
        state=timed.to_state(),
        draws=tuple(run.draws),
        diagnostics=tuple(diagnostics),
        budget=run.budget,
        seed=options.seed,
    )


def _prepared_books(world_books: list[WorldBook], options: ActivationOptions,
                    diagnostics: list[Diagnostic]) -> _Prepared:
    """The books' sorted entries and key index (cached without an ``expand`` hook: keys are then fixed)."""
    conf, expand = options.settings, options.expand

    def sorted_entries() -> list[Entry]:
        return sort_entries(world_books, conf.character_strategy)[0]

    expanded_keys: dict[str, str] = {}

    def key_text(key: str) -> str:
        out = expanded_keys.get(key)
        if out is None:
            out = expanded_keys[key] = _expand_or_keep(expand, key, diagnostics)
        return out

    # without an expand hook keys are used as written (key_text None)
    prepared = _prepared_for(world_books, conf, sorted_entries, key_text if expand is not None else None,
                             cacheable=expand is None)
    if _duplicate_names(world_books):
        diagnostics.extend(sort_entries(world_books, conf.character_strategy)[1])
    return prepared


def _scanned_messages(chat: Any, prepared: _Prepared, options: ActivationOptions) -> tuple[list[str], int]:
    """The chat's messages as the scan reads them, and how many the whole chat has."""
    conf = options.settings
    if isinstance(chat, ChatTail):
        # only the newest messages any scan reads are built (a swipe drops the newest one first)
        reach = prepared.reach(conf)
        # the buffer keeps the newest MAX_SCAN_DEPTH messages whatever the depth (minimum activations
        # too: they stop at the chat's length, which is passed on)
        want = min(chat.length, (MAX_SCAN_DEPTH if reach is None else max(1, min(reach, MAX_SCAN_DEPTH))) + 1)
        newest = chat.newest(want)
        messages = chat_scan_messages(newest, include_names=conf.include_names,
                                      generation_type=options.generation_type)
        return messages, chat.length - len(newest) + len(messages)
    messages = chat_scan_messages(chat, include_names=conf.include_names, generation_type=options.generation_type)
    return messages, len(messages)


def to_json(activation: Activation) -> dict[str, Any]:
    """The CLI's ``--json`` object for one activation."""
    out = activation.by_position.to_json()
    out["activated"] = [{"book": a.book, "uid": a.uid} for a in activation.activated]
    out["trace"] = activation.trace.to_list()
    out["state"] = activation.state
    return out

