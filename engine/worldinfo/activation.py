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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from ..errors import Diagnostic, TemplateError
from ..collector import bulk_allocation
from .entries import Entry, Logic, WorldBook, js_key_order, normalize_books
from .matching import _NOT_FOUND as _FAR
from .matching import (_WORD_RUN, INDEX_DIRTY, INDEX_EMPTY_INVALID, INDEX_OTHER, INDEX_WORD, REGEX, KeyMatcher,
                       Needle, gram_of, is_word_gram, text_windows)
from .output import ActivatedEntry, Positions, build_positions
from .regexes import DEFAULT_TIMEOUT, JsRegex, fold_for_literal
from .scan import MAX_SCAN_DEPTH, ChatTail, Haystack, ScanBuffer, ScanState, chat_scan_messages, js_trim
from .settings import WorldInfoSettings, budget_tokens, count_words, resolve_token_counter
from .timed import TimedEffects
from .trace import Draw, StepRecord, Trace, TraceRecord, trace_dicts, trace_records

__all__ = ["Activation", "ScanContext", "activate_world_info", "sort_entries", "to_json"]

Expand = Callable[[str], str]

#: Re-evaluate only what can have changed in a recursion pass (tests switch it off to compare).
INCREMENTAL = True
#: Fill in the "no match" decision of entries the first pass never looked at (tests switch it off to compare).
FAST_PENDING = True
#: Carry forward the decision of an entry whose regex keys provably still answer as before (tests switch it off).
SETTLED_REGEX = True

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


#: (outcome, reason, detail, step, state, key, secondary, winner): a trace record in the making
_Decision = tuple[str, str, str, "int | None", "str | None", "str | None", "str | None", "int | str | None"]
_NOT_SCANNED: _Decision = ("skipped", "not_scanned", "the loop ended before the entry was looked at", None, None,
                           None, None, None)
_LOGIC_NAMES = {0: "AND ANY", 1: "NOT ALL", 2: "NOT ANY", 3: "AND ALL"}


_MISSING: Any = object()
_BOOK_UID = attrgetter("book", "uid")
_KEYS = attrgetter("key")
_RULE_FIELDS = attrgetter("delay_until_recursion", "exclude_recursion", "sticky", "cooldown", "delay", "disable",
                          "triggers", "character_filter", "decorators", "constant")
#: the rule fields of an entry that sets none of them
_USUAL_FLAGS = _RULE_FIELDS(Entry("", 0))
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
        self.ids = [f"{book}.{uid}" for book, uid in map(_BOOK_UID, entries)]  # Entry.id, in one C-driven pass
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
        self._index(settings, key_text, preparer)
        #: both maps of each kind, as :meth:`KeyMatcher.piece_hits` reads them for recursion text
        self.word_maps = (self.primary_words, self.secondary_words)
        #: per case variant, whether some bucket window of a map is not all word characters ("" is no window:
        #: its short keys are tested against every piece)
        self.primary_mixed = {cs: any(g and not is_word_gram(g) for g in m) for cs, m in self.primary_others.items()}
        self.secondary_mixed = {cs: any(g and not is_word_gram(g) for g in m)
                                for cs, m in self.secondary_others.items()}
        self.other_maps = ((self.primary_others, self.primary_mixed), (self.secondary_others, self.secondary_mixed))

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
        #: keyed entries without a rule that can decide them before their keys in any scan
        self.keyed_plain = [bool(keys) for keys in map(_KEYS, entries)]
        usual = _USUAL_FLAGS
        for i, row in enumerate(map(_RULE_FIELDS, entries)):
            if row == usual:
                continue
            delay_level, exclude, sticky, cooldown, delay, disable, triggers, character_filter, decorators, constant = row
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
        self.levels = sorted(levels)
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
        for buckets, found in ((self.primary_others, others[0]), (self.secondary_others, others[1])):
            for needle, owners in found.items():
                gram = needle.gram = gram_of(needle.text)
                needle.word_gram = is_word_gram(gram)
                buckets[needle.cs].setdefault(gram, []).append((needle, owners))


#: content digest of a raw book argument -> its normalised books and their diagnostics
_NORMALIZED_CACHE: dict[bytes, tuple[list[WorldBook], tuple[Diagnostic, ...]]] = {}
_NORMALIZED_CACHE_SIZE = 4


def _normalized_books(books: Any) -> tuple[list[WorldBook], list[Diagnostic]]:
    """:func:`normalize_books`, cached by the content of a raw (dict or list) book argument.

    A host that keeps its books as the JSON dicts it loaded passes them again on every chat
    message; normalising 10,000 entries and re-indexing them was 80% of such a call. The digest
    is taken over ``marshal``'s encoding, which is fast and refuses anything but plain built-in
    values (so no object whose content a repr would hide can make two different books look
    alike: such an argument simply is not cached). The same book content then yields the very
    same :class:`WorldBook` objects, which :func:`_prepared_for` finds by identity.
    """
    if type(books) is not dict and type(books) is not list:
        return normalize_books(books)
    try:
        # version 2 writes no back-references, whose use depends on reference counts: equal
        # content then always gives equal bytes (a copy of the book hits the cache too)
        digest = hashlib.blake2b(marshal.dumps(books, 2), digest_size=20).digest()
    except (ValueError, RecursionError):  # a value marshal cannot encode: not cached
        return normalize_books(books)
    hit = _NORMALIZED_CACHE.get(digest)
    if hit is not None:
        return list(hit[0]), list(hit[1])
    normalized, diagnostics = normalize_books(books)
    if len(_NORMALIZED_CACHE) >= _NORMALIZED_CACHE_SIZE:
        _NORMALIZED_CACHE.pop(next(iter(_NORMALIZED_CACHE)))
    _NORMALIZED_CACHE[digest] = (list(normalized), tuple(diagnostics))
    return normalized, diagnostics


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
            return hit[1]
    with bulk_allocation():
        prepared = _Prepared(entries_factory(), settings, key_text)
    if cacheable:
        if len(_PREPARED_CACHE) >= _PREPARED_CACHE_SIZE:
            _PREPARED_CACHE.pop(next(iter(_PREPARED_CACHE)))
        _PREPARED_CACHE[key] = (tuple(books), prepared)
    return prepared


#: a decision not taken yet: the entry was not looked at because no key of it can match
_PENDING: _Decision = ("skipped", "pending", "", None, None, None, None, None)
#: what :meth:`_Run.consider` decides in the first pass for an entry none of whose primary keys match
_NO_MATCH_FIRST: _Decision = ("skipped", "no_match", "no primary key matched", 1, ScanState.NAMES[ScanState.INITIAL],
                              None, None, None)


def scan_reach(settings: WorldInfoSettings, entries: Sequence[Entry]) -> int | None:
    """The deepest any scan of ``entries`` looks: the global depth and every entry's own scan
    depth; ``None`` (the whole chat) when the minimum-activations rule may walk further back."""
    if settings.min_activations > 0:
        return None
    return max([settings.depth, *(e.scan_depth for e in entries if isinstance(e.scan_depth, int))])


class _Run:
    """One scan's mutable working state (the loop is long; splitting it keeps each rule readable)."""

    def __init__(self, prepared: _Prepared, messages: list[str], settings: WorldInfoSettings,
                 context: ScanContext, timed: TimedEffects, *, generation_type: str, expand: Expand | None,
                 token_counter: Callable[[str], int], additive_tokens: bool, rng: Callable[[], float],
                 forced: set[str], regex_timeout: float, diagnostics: list[Diagnostic],
                 chat_length: int | None = None) -> None:
        entries = self.entries = prepared.entries
        self.prepared = prepared
        self.messages = messages
        #: the whole chat's scanned messages (``messages`` may be only its newest ones: ``ChatTail``)
        self.chat_length = len(messages) if chat_length is None else chat_length
        self.settings = settings
        self.context = context
        self.timed = timed
        self.generation_type = generation_type
        self.expand = expand
        self.count_tokens = token_counter
        self.additive_tokens = additive_tokens
        #: the counter promises never to count more tokens than the text has UTF-8 bytes (see
        #: :data:`AT_MOST_UTF8_BYTES`): while the bytes stay under the budget, no count is needed
        self.bytes_bound = not additive_tokens and getattr(token_counter, AT_MOST_UTF8_BYTES, False) is True
        self.rng = rng
        self.forced = forced
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
        reach = scan_reach(settings, entries)
        self.matcher = KeyMatcher(self.buffer, case_sensitive=settings.case_sensitive,
                                  whole_words=settings.match_whole_words, regex_timeout=regex_timeout,
                                  diagnostics=diagnostics, needles=prepared.needles, reach=reach)
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
        #: entries no rule before the key test can decide in this scan (see :meth:`consider`)
        simple = self.simple = list(prepared.keyed_plain)
        for i in prepared.timed:
            if self.sticky[i] or self.cooldown[i] or self.delayed[i]:
                simple[i] = False
        for i in prepared.filtered:
            if self.static_skip[i] is not None:
                simple[i] = False
        if forced:
            for i, entry_id in enumerate(prepared.ids):
                if entry_id in forced:
                    simple[i] = False
        self.any_sticky = any(self.sticky[i] for i in prepared.timed)
        #: pass -> how many recursion pieces its haystacks held
        self.pass_pieces: dict[int, int] = {}
        #: this pass's haystack -> the same haystack as the last pass saw it (see :meth:`carry_forward`)
        self._before_cache: dict[Haystack, Haystack] = {}
        #: entries carried forward in the last pass (see the carry-waiting step of :meth:`run`)
        self.waiting: set[int] = set()
        self.hay_class = prepared.hay_class
        self._hay_cache: list[Haystack | None] = [None] * prepared.hay_classes
        self.activated: dict[str, int] = {}  # entry id -> index, in activation order
        self.activated_indices: set[int] = set()  # the same entries' indices
        self.activated_content: dict[int, str] = {}
        self.activated_step: dict[int, int] = {}
        self.failed_probability: set[int] = set()
        self.content: dict[int, str] = {}
        self.draws: list[Draw] = []
        self.steps: list[StepRecord] = []

    # -- small helpers ------------------------------------------------------------------------
    def decide(self, i: int, outcome: str, reason: str, detail: str, step: int, state: int, key: str | None = None,
               secondary: str | None = None, winner: int | str | None = None) -> None:
        self.decisions[i] = (outcome, reason, detail, step, ScanState.NAMES[state], key, secondary, winner)

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
        decide = self.decide
        primary_keys, secondary_keys = self.plans[i]
        hay = self._hay_cache[self.hay_class[i]]
        if hay is None:
            hay = self.haystack(i, state)
        matcher = self.matcher
        match = matcher.match
        primary = None
        plain_hay = not hay.extras and not hay.empty
        for key, needle in primary_keys:
            if needle is None:
                continue
            if needle.mapped and plain_hay:
                # KeyMatcher.match inlined for a mapped word key on chat plus recursion text (most
                # keys of a large book): the chat's word-run dict, then the words piece_hits recorded
                cs = needle.cs
                chat_words = matcher._chat_words.get(cs)
                if chat_words is not None:
                    if chat_words.get(needle.text, _FAR) < hay.depth:
                        primary = key
                        break
                    r = hay.recursion
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
        if primary is None:
            detail = "no primary key matched"
            if matcher._reported:  # some regex key was refused or invalid: say so when it is one of these
                refused = [n.rx for _, n in primary_keys if n is not None and n.rx is not None and n.rx.status == "refused"]
                if refused:
                    source = refused[0].source
                    shown = source if len(source) <= 60 else source[:57] + "..."
                    detail += f" (regex key {shown} refused: {refused[0].reason})"
            self.decisions[i] = ("skipped", "no_match", detail, step, ScanState.NAMES[state], None, None, None)
            return False
        if not (entry.selective and secondary_keys):
            self.decisions[i] = ("activated", "key", f"fired by key {primary!r}", step, ScanState.NAMES[state],
                                 primary, None, None)
            return True
        logic = entry.selective_logic
        any_match = False
        all_match = True
        for key, needle in secondary_keys:
            hit = needle is not None and match(needle, entry, hay)
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
        :meth:`consider` would decide exactly as last pass, only in this step. Returns whether it
        did that.
        """
        decision = self.decisions[i]
        if (decision[3] != step - 1 or decision[1] not in ("no_match", "secondary_logic") or not self.simple[i]
                or i in self.failed_probability or self.ids[i] in self.activated):
            return False
        hay = self.haystack(i, state)
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
        if decision[1] == "secondary_logic":
            for _, needle in secondary_keys:
                if needle is None or needle.kind != REGEX:
                    continue
                if needle.rx is None or needle.rx.status != "ok" or unchanged(needle.rx, before, hay) is None:
                    return False
        self.decisions[i] = (decision[0], decision[1], decision[2], step, ScanState.NAMES[state], decision[5],
                             decision[6], decision[7])
        return True

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

        Our semantics for an entry in several groups (``"a,b"``): once it loses one group it is no
        longer a member of the others, and an activated entry blocks every group it belongs to.
        """
        grouped: dict[str, list[int]] = {}
        for i in candidates:
            for name in self.entries[i].groups:
                grouped.setdefault(name, []).append(i)
        if not grouped:
            return candidates
        alive = set(candidates)
        names = js_key_order(grouped)
        sticky_groups: set[str] = set()
        for name in names:
            members = grouped[name]
            stickies = [i for i in members if self.timed.is_active("sticky", self.entries[i])]
            if not stickies:
                continue
            sticky_groups.add(name)
            for i in members:
                if i in alive and i not in stickies:
                    alive.discard(i)
                    self.decide(i, "skipped", "group", f"group {name!r} lost to uid {self.entries[stickies[0]].uid} "
                                "(sticky)", step, state, winner=self.entries[stickies[0]].uid)
        # SillyTavern then drops members on cooldown or delay, sticky or not (a sticky entry is
        # usually on cooldown too, since both effects start when it activates)
        for name in names:
            for i in grouped[name]:
                if i in alive and (self.timed.is_active("cooldown", self.entries[i])
                                   or self.timed.is_active("delay", self.entries[i])):
                    alive.discard(i)
                    self.decide(i, "skipped", "cooldown", f"in inclusion group {name!r} while on cooldown",
                                step, state)
        global_scoring = self.settings.use_group_scoring
        for name in names:
            members = [i for i in grouped[name] if i in alive]
            if name in sticky_groups or not members:
                continue
            if not global_scoring and not any(self.entries[i].use_group_scoring for i in members):
                continue
            scores = {i: self.score(self.entries[i], state) for i in members}
            best = max(scores.values())
            for i in members:
                scored = self.entries[i].use_group_scoring
                if scored is None:
                    scored = global_scoring
                if scored and scores[i] < best:
                    alive.discard(i)
                    self.decide(i, "skipped", "group_scoring", f"group {name!r}: score {scores[i]} is below "
                                f"the best {best}", step, state)
        activated_groups: dict[str, int | str] = {}
        for j in self.activated.values():
            for group in self.entries[j].groups:
                activated_groups.setdefault(group, self.entries[j].uid)
        for name in names:
            if name in sticky_groups:
                continue
            members = [i for i in grouped[name] if i in alive]
            if name in activated_groups:
                holder = activated_groups[name]
                for i in members:
                    alive.discard(i)
                    self.decide(i, "skipped", "group", f"group {name!r} lost to uid {holder} (activated in an "
                                "earlier pass)", step, state, winner=holder)
                continue
            if len(members) <= 1:
                continue
            overrides = [i for i in members if self.entries[i].group_override]
            if overrides:
                winner = sorted(overrides, key=lambda i: -self.entries[i].order)[0]
                how = "group override with the highest order"
            else:
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
                self.draws.append(Draw("group", value, name, total,
                                       self.entries[winner].id if winner is not None else "none"))
                if winner is None:
                    continue
                how = f"weighted roll {roll:.3f} of {total:g}"
            for i in members:
                if i != winner:
                    alive.discard(i)
                    self.decide(i, "skipped", "group", f"group {name!r} lost to uid {self.entries[winner].uid} "
                                f"({how})", step, state, winner=self.entries[winner].uid)
        return [i for i in candidates if i in alive]

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
            if self.messages:
                chat_words = matcher._chat_index(cs).words()
                for w in words.keys() & chat_words.keys():  # walks the smaller side in C
                    todo.update(words[w])
            for extra in extras:
                part = matcher._part(extra, cs)
                if part.words is None:
                    part.words = set(_WORD_RUN.findall(part.text))
                for w in words.keys() & part.words:
                    todo.update(words[w])
            if others:
                # only keys whose GRAM-character window occurs somewhere in the text can match
                text = matcher._chat_index(cs).concat + "".join(f"\n{t if cs else t.lower()}" for t in extras)
                runs: set[str] = set(matcher._chat_index(cs).words())
                for extra in extras:
                    runs.update(matcher._part(extra, cs).words or ())
                grams = text_windows(text, runs, prepared.primary_mixed[cs])
                matcher.chat_grams[cs] = (grams, prepared.primary_mixed[cs])
                for gram in others.keys() & grams:  # the smaller side walked in C
                    for needle, owners in others[gram]:
                        if matcher.chat_hit(needle) < _FAR or matcher.extras_hit(needle, extras):
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
        fast = FAST_PENDING
        for i, decision in enumerate(decisions):
            if decision is _PENDING:
                if simple[i] and fast:
                    decisions[i] = _NO_MATCH_FIRST
                else:
                    self.consider(i, ScanState.INITIAL, self.first_level, 1)

    # -- the loop -----------------------------------------------------------------------------
    def run(self) -> None:
        s = self.settings
        entries = self.entries
        budget = self.budget = budget_tokens(s)
        prepared = self.prepared
        levels = list(prepared.levels)
        level = levels.pop(0) if levels else 0
        self.first_level = level
        state = ScanState.INITIAL
        count = 0
        overflowed = False
        all_text = ""  # the recursion text so far, newest first, as SillyTavern counts it for the budget
        all_tokens = 0  # its word count, kept as a running sum when words are counted (additive)
        all_bytes = 0  # its UTF-8 length (a bound on its tokens when the counter promises one)
        bytes_bound = self.bytes_bound
        previous: tuple[int, float, int] | None = None
        last_candidates: list[int] = []
        seen_pieces = 0
        state_sensitive = prepared.state_sensitive
        while state != ScanState.NONE:
            if s.max_recursion_steps and count >= s.max_recursion_steps:
                break
            count += 1
            step = count
            self._hay_cache = [None] * prepared.hay_classes
            self._before_cache = {}
            waiting, self.waiting = self.waiting, set()
            context = (state, level, self.buffer.skew)
            if previous is None and INCREMENTAL:
                # the first pass looks only at entries that can be candidates: those activated
                # without keys, sticky or forced ones, regex owners, and owners of a primary key
                # found in the chat or the extra sources; the rest are decided lazily (no match)
                todo = self.first_pass_entries()
            elif (not INCREMENTAL or previous is None or ScanState.MIN_ACTIVATIONS in (state, previous[0])
                    or previous[2] != context[2]):
                todo = range(len(entries))
            else:
                # only what can have changed since the last pass: its unactivated candidates, entries
                # with regex keys, owners of keys found in the new recursion text, and (when the
                # state or delay level moved) the entries whose filters depend on them
                dirty = set(last_candidates)
                for piece in range(seen_pieces, len(self.buffer.recursion)):
                    dirty |= self.matcher.piece_hits(piece, prepared.word_maps, prepared.other_maps)
                if previous != context:
                    dirty.update(state_sensitive)
                if SETTLED_REGEX:
                    new_text = [self.buffer.recursion[j] for j in range(seen_pieces, len(self.buffer.recursion))]
                    raw_new = "\n".join(new_text)
                    new_texts = (raw_new, fold_for_literal(raw_new))
                    regex_only, regexes, carried = prepared.regex_only, prepared.regexes, self.waiting
                    decisions, failed, activated = self.decisions, self.failed_probability, self.activated
                    ids, state_name = self.ids, ScanState.NAMES[state]
                    for i in prepared.always_dirty:
                        if i in dirty or i not in regex_only:
                            dirty.add(i)
                            continue
                        if i in waiting:
                            # carry waiting: :meth:`carry_forward` again for an entry carried forward
                            # last pass, from the new text alone. Last pass established, for each of its
                            # regex keys, that no match lies in the text then and that a later one needs
                            # the key's required literal past its end; if the new recursion text (as
                            # written and case-folded) holds none of the literals, that still holds.
                            # Inline, as it runs for every regex entry in every pass.
                            decision = decisions[i]
                            if decision[3] == step - 1 and i not in failed and ids[i] not in activated:
                                for rx in regexes[i]:
                                    if rx.status != "ok" or rx.literal is None or \
                                            rx.literal in new_texts[rx.ignore_case]:
                                        break
                                else:
                                    decisions[i] = (decision[0], decision[1], decision[2], step, state_name,
                                                    decision[5], decision[6], decision[7])
                                    carried.add(i)
                                    continue
                        if self.carry_forward(i, state, step):
                            carried.add(i)
                        else:
                            dirty.add(i)
                else:
                    dirty |= prepared.always_dirty
                # an entry activated in an earlier pass is passed over at once (see below): leave it out
                dirty -= self.activated_indices
                todo = sorted(dirty)
            previous = context
            seen_pieces = len(self.buffer.recursion)
            self.pass_pieces[step] = seen_pieces if state == ScanState.RECURSION else 0
            todo_list: Iterable[int] = todo
            candidates: list[int] = []
            ids = self.ids
            activated_ids = self.activated
            failed = self.failed_probability
            for i in todo_list:
                if i in failed:
                    continue
                if ids[i] in activated_ids:
                    if activated_ids[ids[i]] != i and self.decisions[i][1] == "not_scanned":
                        self.decide(i, "skipped", "duplicate", f"{ids[i]} was already activated by another entry",
                                    step, state)
                    continue
                if self.consider(i, state, level, step):
                    candidates.append(i)
            last_candidates = list(candidates)
            if self.any_sticky:
                candidates.sort(key=lambda i: 0 if self.sticky[i] else 1)
            considered = list(candidates)
            # with a byte bound the exact count waits until the bytes could reach the budget
            base_tokens: int | None = all_tokens if self.additive_tokens else \
                None if bytes_bound else self.count_tokens(all_text)
            new_bytes = 0
            candidates = self.filter_groups(candidates, state, step)
            new_content = ""
            new_tokens = 0
            activated_now: list[str] = []
            # the per-candidate work below runs for every activated entry: names bound once per pass
            additive, sticky_of, content_of = self.additive_tokens, self.sticky, self.content
            activated_indices, activated_content, activated_step = (self.activated_indices, self.activated_content,
                                                                    self.activated_step)
            #: word counts kept with the books (fixed contents), else ``None``: contents are expanded per scan
            counts = prepared.word_counts if self.expand is None else None
            #: this pass's candidates -> their contents' word counts, reused for the recursion text below
            pass_counts: dict[int, int] = {}
            for i in candidates:
                entry = entries[i]
                sticky = sticky_of[i]
                if overflowed and not entry.ignore_budget:
                    self.decide(i, "skipped", "budget", f"the budget of {budget} tokens is used up", step, state)
                    continue
                if entry.use_probability and entry.probability < 100 and not sticky:
                    value = self.rng()
                    passed = value * 100 <= entry.probability
                    self.draws.append(Draw("probability", value, ids[i], entry.probability,
                                           "pass" if passed else "fail"))
                    if not passed:
                        self.failed_probability.add(i)
                        self.decide(i, "skipped", "probability", f"rolled {value * 100:.2f} against "
                                    f"{entry.probability:g}%", step, state)
                        continue
                content = entry.content if self.expand is None else self.run_expand(entry.content,
                                                                                     f"content of {ids[i]}")
                content_of[i] = content
                if additive:
                    if counts is None:
                        words = count_words(content)
                    else:
                        words = counts.get(i)
                        if words is None:
                            words = counts[i] = count_words(content)
                    pass_counts[i] = words
                    new_tokens += words
                    total = base_tokens + new_tokens  # type: ignore[operator]
                else:
                    new_content += content + "\n"
                    if bytes_bound:
                        new_bytes += _utf8_len(content) + 1
                    if bytes_bound and all_bytes + new_bytes < budget:
                        # tokens <= bytes < budget: the exact counts cannot reach the budget either,
                        # so the decision is the one counting would give, without the tokenizer
                        total = 0
                    else:
                        if base_tokens is None:
                            base_tokens = self.count_tokens(all_text)
                        new_tokens = self.count_tokens(new_content)
                        total = base_tokens + new_tokens
                if not entry.ignore_budget and total >= budget:
                    overflowed = True
                    self.decide(i, "skipped", "budget", f"{total} tokens would reach the "
                                f"budget of {budget}", step, state)
                    continue
                activated_ids[ids[i]] = i
                activated_indices.add(i)
                activated_content[i] = content
                activated_step[i] = step
                activated_now.append(ids[i])
            successful = [i for i in candidates if i not in self.failed_probability]
            for_recursion = [i for i in successful if not entries[i].prevent_recursion]
            self.steps.append(StepRecord(step, ScanState.NAMES[state], self.buffer.depth(), level,
                                         tuple(ids[i] for i in considered), tuple(activated_now)))
            next_state = ScanState.NONE
            if s.recursive and not overflowed and for_recursion:
                next_state = ScanState.RECURSION
            if s.recursive and not overflowed and state == ScanState.MIN_ACTIVATIONS and self.buffer.recursion:
                next_state = ScanState.RECURSION
            if next_state == ScanState.NONE and not overflowed and s.min_activations > 0 and len(self.activated) < s.min_activations:
                depth = self.buffer.depth()
                over = (s.min_activations_depth_max > 0 and s.min_activations_depth_max < depth) or (
                    depth > self.chat_length)
                if not over:
                    next_state = ScanState.MIN_ACTIVATIONS
                    self.buffer.advance()
            if next_state == ScanState.NONE and levels:
                next_state = ScanState.RECURSION
                level = levels.pop(0)
            state = next_state
            if state != ScanState.NONE:
                text = "\n".join(self.content.get(i, entries[i].content) for i in for_recursion)
                if text:
                    self.buffer.add_recursion(text)
                    if self.additive_tokens:
                        # words never span the "\n" joint: the new text's count is its contents' counts
                        all_tokens += sum(pass_counts[i] if i in pass_counts else
                                          self.words_of(i, content_of.get(i, entries[i].content))
                                          for i in for_recursion)
                    else:
                        all_text = text + "\n" + all_text
                        if bytes_bound:
                            all_bytes += _utf8_len(text) + 1


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
) -> Activation:
    """Scan ``chat`` for the entries of ``books`` the way SillyTavern 1.18 does, and place them.

    ``books``: one book (``{"entries": {...}}`` or a list of entries), a list of books (each may
    carry ``name`` and ``source``: global, character, chat, persona), or a mapping of name to book.
    ``chat``: messages oldest first, strings or ``{"role", "name", "content"}`` (or a long chat's
    :class:`~tavernbox.worldinfo.scan.ChatTail`, built only as deep as the scan reads). ``settings``:
    SillyTavern's names (see :class:`WorldInfoSettings`). ``state``: the timed-effects state from
    the previous scan (returned as ``Activation.state``). ``seed`` drives probability and group
    rolls unless ``rng`` (a ``random()``-like callable) is given. ``expand`` macro-expands keys and
    contents; ``token_counter`` replaces the settings' tokenizer for the budget.

    The cyclic garbage collector is paused for the call (see :func:`bulk_allocation`): a scan of a
    large book allocates its index and records in bursts that would otherwise trigger repeated
    collections walking every live object; nothing it builds forms a cycle.
    """
    with bulk_allocation():
        return _activate(books, chat, settings, state, seed, expand=expand, token_counter=token_counter,
                         context=context, generation_type=generation_type, dry_run=dry_run, forced=forced,
                         rng=rng, regex_timeout=regex_timeout)


def _activate(books: Any, chat: Any, settings: Mapping[str, Any] | WorldInfoSettings | None,
              state: Mapping[str, Any] | None, seed: int, *, expand: Expand | None,
              token_counter: Callable[[str], int] | None, context: Mapping[str, Any] | ScanContext | None,
              generation_type: str, dry_run: bool, forced: Iterable[tuple[str, int | str]],
              rng: Callable[[], float] | None, regex_timeout: float) -> Activation:
    """The body of :func:`activate_world_info`."""
    if generation_type not in GENERATION_TYPES:
        raise TemplateError(f"unknown generation type {generation_type!r}; expected one of "
                            f"{', '.join(GENERATION_TYPES)}", code="INPUT_INVALID")
    conf = WorldInfoSettings.from_mapping(settings)
    scan_context = ScanContext.from_mapping(context)
    world_books, diagnostics = _normalized_books(books)

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
    entries = prepared.entries
    if isinstance(chat, ChatTail):
        # only the newest messages any scan reads are built (a swipe drops the newest one first)
        reach = scan_reach(conf, entries)
        # the buffer keeps the newest MAX_SCAN_DEPTH messages whatever the depth (minimum activations
        # too: they stop at the chat's length, which is passed on)
        want = min(chat.length, (MAX_SCAN_DEPTH if reach is None else max(1, min(reach, MAX_SCAN_DEPTH))) + 1)
        newest = chat.newest(want)
        all_messages = chat_scan_messages(newest, include_names=conf.include_names, generation_type=generation_type)
        chat_length = chat.length - len(newest) + len(all_messages)
    else:
        all_messages = chat_scan_messages(chat, include_names=conf.include_names, generation_type=generation_type)
        chat_length = len(all_messages)
    # only entries with a timed field can be held by an effect or own a record
    timed = TimedEffects(state, [entries[i] for i in prepared.timed], chat_length, dry_run=dry_run)
    counter = resolve_token_counter(conf, token_counter)
    additive = token_counter is None and conf.tokenizer == "words"
    generator = random.Random(seed)
    run = _Run(prepared, all_messages, conf, scan_context, timed, generation_type=generation_type, expand=expand,
               token_counter=counter, additive_tokens=additive, rng=rng or generator.random,
               forced={_js_key(b, u) for b, u in forced}, regex_timeout=regex_timeout, diagnostics=diagnostics,
               chat_length=chat_length)
    run.run()
    contents, steps = run.activated_content, run.activated_step
    activated = [ActivatedEntry(entries[i], contents[i], steps[i]) for i in run.activated.values()]
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

    return Activation(
        by_position=build_positions(activated),
        activated=tuple(activated),
        trace=Trace(records, tuple(run.steps), dicts=dicts),
        state=timed.to_state(),
        draws=tuple(run.draws),
        diagnostics=tuple(diagnostics),
        budget=run.budget,
        seed=seed,
    )


def to_json(activation: Activation) -> dict[str, Any]:
    """The CLI's ``--json`` object for one activation."""
    out = activation.by_position.to_json()
    out["activated"] = [{"book": a.book, "uid": a.uid} for a in activation.activated]
    out["trace"] = activation.trace.to_list()
    out["state"] = activation.state
    return out

