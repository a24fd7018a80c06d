"""World-book checks: keys, reachability, recursion, uids, groups, budget and depth.

Entries are read by the activation engine's own normaliser (``worldinfo.entries.normalize_entry``)
and regex keys by its own translator (``worldinfo.regexes.parse_js_regex``), so a key lint calls
invalid is one activation would refuse. Matching for the recursion graph is a deliberate
approximation of the scan (documented in ``docs/LINT.md``): a plain key is looked for in the other
entries' content, case-insensitively, as a whole word when whole-word matching is on; regex keys
are searched with a small per-search time budget.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..assets.paths import join_path
from ..errors import Diagnostic
from ..worldinfo.entries import Entry, Logic, Position, normalize_entry
from ..worldinfo.regexes import JsRegex, js_regex_search, parse_js_regex
from ..worldinfo.settings import WorldInfoSettings, budget_tokens, count_words, resolve_token_counter
from .model import Finding

__all__ = ["BookEntry", "MAX_DEPTH", "lint_book", "read_entries"]

#: SillyTavern never inserts extension prompts deeper than this
MAX_DEPTH = 10_000
#: the recursion graph is built for books up to this many entries (beyond, it is skipped)
_MAX_GRAPH_ENTRIES = 5_000
_REGEX_TIMEOUT = 0.01
_MAX_REGEX_SEARCHES = 20_000


@dataclass(frozen=True)
class BookEntry:
    """One entry: the engine's reading of it, its raw object and the JSON paths of its fields."""

    entry: Entry
    raw: Mapping[str, Any]
    path: str
    key_field: str = "key"
    secondary_field: str = "keysecondary"
    depth_path: str | None = None


def read_entries(raw_entries: Any, book: str, path: str) -> list[BookEntry]:
    """A standalone book's entries (an object keyed by uid, or a list) as :class:`BookEntry`."""
    pairs: list[tuple[Any, Any, str]] = []
    if isinstance(raw_entries, Mapping):
        pairs = [(k, v, join_path(path, str(k))) for k, v in raw_entries.items()]
    elif isinstance(raw_entries, Sequence) and not isinstance(raw_entries, (str, bytes)):
        pairs = [(i, v, join_path(path, i)) for i, v in enumerate(raw_entries)]
    out: list[BookEntry] = []
    sink: list[Diagnostic] = []  # coercions are the importer's business (tavernbox import)
    for fallback, value, p in pairs:
        entry = normalize_entry(value, book, fallback if isinstance(fallback, int) else str(fallback), p, sink)
        if entry is not None and isinstance(value, Mapping):
            out.append(BookEntry(entry, value, p, depth_path=join_path(p, "depth")))
    return out


Emit = Callable[[str, str, str, "str | None"], None]


def _usable(key: str) -> bool:
    """Whether a primary key can ever match some text (a blank key is skipped by SillyTavern)."""
    if key == "":
        return False
    if key.strip().startswith("/"):
        rx = parse_js_regex(key.strip())
        if rx is not None and rx.status != "ok":
            return False
    return True


def _always(key: str) -> bool:
    """A key that matches every text: whitespace only (SillyTavern trims it to the empty needle)."""
    return key != "" and key.strip() == ""


def lint_book(entries: list[BookEntry], *, file: str, book_path: str, book_name: str,
              settings: WorldInfoSettings, recursive: bool, token_budget: int | None) -> list[Finding]:
    """Every world-info finding of one book (entry content is linted as prompts elsewhere)."""
    out: list[Finding] = []

    def emit(code: str, message: str, path: str, suggestion: str | None = None) -> None:
        from .codes import LINT_CODES

        out.append(Finding(code, LINT_CODES[code].severity, file, message, path, suggestion=suggestion))

    _keys(entries, emit)
    _uids(entries, emit)
    live = [be for be in entries if not be.entry.disable]
    for be in live:
        e = be.entry
        if not e.constant and not e.vectorized and "@@activate" not in e.decorators and not any(map(_usable, e.key)):
            emit("WI_ENTRY_UNREACHABLE", f"entry {_label(e)} is not constant and has no usable primary key; it never "
                 "fires", join_path(be.path, be.key_field), "add a key, or make the entry constant")
        _logic(be, emit, settings)
        if e.delay_until_recursion and not recursive:
            emit("WI_RECURSION_ONLY", f"entry {_label(e)} waits for recursion (delay until recursion) but recursion "
                 "is off for this book; it never fires", join_path(be.path, "delayUntilRecursion"),
                 "turn recursion on, or clear delayUntilRecursion")
        if e.position == Position.AT_DEPTH and not 0 <= e.depth <= MAX_DEPTH:
            emit("WI_DEPTH_UNREACHABLE", f"entry {_label(e)} is inserted at depth {e.depth}, outside 0..{MAX_DEPTH}; "
                 "SillyTavern never inserts it", be.depth_path or be.path, "use a depth within the chat's length")
    _groups(live, emit, settings)
    _budget(live, emit, book_path, book_name, settings, token_budget)
    if recursive and len(live) <= _MAX_GRAPH_ENTRIES:
        _cycles(live, emit, settings)
    return out


def _label(e: Entry) -> str:
    """``uid ('comment')``, or ``uid (key 'first key')`` for an entry without a comment."""
    if e.comment:
        return f"{e.uid} ({e.comment[:40]!r})"
    first = next((k for k in e.key if k.strip()), None)
    return f"{e.uid} (key {first[:40]!r})" if first else str(e.uid)


def _keys(entries: list[BookEntry], emit: Emit) -> None:
    for be in entries:
        for field, keys in ((be.key_field, be.entry.key), (be.secondary_field, be.entry.keysecondary)):
            for i, key in enumerate(keys):
                where = join_path(be.path, field, i)
                if key == "":
                    emit("WI_KEY_EMPTY", f"entry {_label(be.entry)}: an empty key never matches", where,
                         "remove the empty key")
                    continue
                if _always(key):
                    emit("WI_KEY_EMPTY", f"entry {_label(be.entry)}: a whitespace-only key is trimmed to the empty "
                         "needle, which matches every text", where, "remove it, or make the entry constant")
                    continue
                stripped = key.strip()
                if not stripped.startswith("/"):
                    continue
                rx = parse_js_regex(stripped)
                if rx is None:
                    continue
                if rx.status == "invalid":
                    emit("WI_REGEX_INVALID", f"entry {_label(be.entry)}: regex key {key!r} does not compile: "
                         f"{rx.reason}", where, "fix the pattern (JavaScript regex syntax)")
                elif rx.status == "refused":
                    emit("WI_REGEX_REFUSED", f"entry {_label(be.entry)}: regex key {key!r} is refused by the regex "
                         f"policy: {rx.reason}", where, "rewrite it without that construct")


def _uids(entries: list[BookEntry], emit: Emit) -> None:
    seen: dict[str, BookEntry] = {}
    for be in entries:
        raw_uid = be.raw.get("uid", be.raw.get("id"))
        if raw_uid is None or isinstance(raw_uid, bool) or not isinstance(raw_uid, (int, str, float)):
            continue
        uid = str(int(raw_uid)) if isinstance(raw_uid, float) and raw_uid.is_integer() else str(raw_uid)
        first = seen.get(uid)
        if first is not None:
            emit("WI_DUPLICATE_UID", f"uid {uid} is used by {first.path} and {be.path}; SillyTavern keeps one of them",
                 join_path(be.path, "uid" if "uid" in be.raw else "id"), "give every entry its own uid")
        else:
            seen[uid] = be


def _fold(key: str, entry: Entry, settings: WorldInfoSettings) -> str:
    cs = settings.case_sensitive if entry.case_sensitive is None else entry.case_sensitive
    return key.strip() if cs else key.strip().lower()


def _logic(be: BookEntry, emit: Emit, settings: WorldInfoSettings) -> None:
    e = be.entry
    if not e.selective or not e.keysecondary:
        return
    primary = [k for k in e.key if _usable(k)]
    if not primary:
        return
    secondary = list(e.keysecondary)
    folded_secondary = {_fold(k, e, settings) for k in secondary if k != ""}
    logic = e.selective_logic
    unsatisfiable = False
    why = ""
    if logic == Logic.NOT_ANY:
        # fires when no secondary key matches; a secondary equal to the primary (or blank) always does
        if any(_always(k) for k in secondary) or all(_fold(p, e, settings) in folded_secondary for p in primary):
            unsatisfiable, why = True, "NOT ANY: a secondary key matches whenever the primary key does"
    elif logic == Logic.NOT_ALL:
        # fires unless every secondary key matches; an empty secondary never matches, so it saves it
        if all(all(_always(k) or (k != "" and _fold(k, e, settings) == _fold(p, e, settings)) for k in secondary)
               for p in primary):
            unsatisfiable, why = True, "NOT ALL: every secondary key matches whenever the primary key does"
    elif logic in (Logic.AND_ANY, Logic.AND_ALL):
        dead = [k for k in secondary if not _usable(k)]
        if (logic == Logic.AND_ANY and len(dead) == len(secondary)) or (logic == Logic.AND_ALL and dead):
            name = "AND ANY" if logic == Logic.AND_ANY else "AND ALL"
            unsatisfiable, why = True, f"{name}: a secondary key that can never match is required"
    if unsatisfiable:
        emit("WI_LOGIC_UNSATISFIABLE", f"entry {_label(e)}: {why}; the entry never fires",
             join_path(be.path, be.secondary_field), "change the secondary keys or the logic")


def _groups(entries: list[BookEntry], emit: Emit, settings: WorldInfoSettings) -> None:
    by_group: dict[str, dict[str, BookEntry]] = {}
    for be in entries:
        for group in be.entry.groups:
            keys = by_group.setdefault(group, {})
            for k in be.entry.key:
                if not _usable(k) or _always(k):
                    continue
                folded = _fold(k, be.entry, settings)
                first = keys.get(folded)
                if first is None:
                    keys[folded] = be
                elif first is not be:
                    emit("WI_GROUP_DUPLICATE_KEY", f"entries {_label(first.entry)} and {_label(be.entry)} of group "
                         f"{group!r} share the key {k!r}; only one of them fires at a time (by group weight)",
                         join_path(be.path, be.key_field), "intended for a random pick? otherwise use distinct keys")


def _budget(entries: list[BookEntry], emit: Emit, book_path: str, book_name: str, settings: WorldInfoSettings,
            token_budget: int | None) -> None:
    count = resolve_token_counter(settings, None) if settings.tokenizer else count_words
    budget = token_budget if token_budget and token_budget > 0 else budget_tokens(settings)
    used = 0
    for be in sorted((b for b in entries if b.entry.constant and not b.entry.ignore_budget),
                     key=lambda b: -float(b.entry.order)):
        used += count(be.entry.content)
        if used > budget:
            emit("WI_BUDGET_OVERFLOW", f"book {book_name!r}: its constant entries alone need more than the budget of "
                 f"{budget} tokens ({settings.tokenizer}); entry {_label(be.entry)} and those after it are cut",
                 be.path, "raise the budget, shorten constant entries, or mark some ignoreBudget")
            return


def _cycles(entries: list[BookEntry], emit: Emit, settings: WorldInfoSettings) -> None:
    """Strongly connected components (size >= 2) of "A's content holds B's key"."""
    n = len(entries)
    contents = [be.entry.content.lower() for be in entries]
    starts: list[int] = []
    pos = 0
    for c in contents:
        starts.append(pos)
        pos += len(c) + 1
    haystack = "\x00".join(contents)
    edges: list[set[int]] = [set() for _ in range(n)]
    regex_budget = _MAX_REGEX_SEARCHES
    for b, be in enumerate(entries):
        e = be.entry
        if e.exclude_recursion or e.constant or e.disable:
            continue
        whole = settings.match_whole_words if e.match_whole_words is None else e.match_whole_words
        for key in e.key:
            stripped = key.strip()
            if not stripped:
                continue
            rx = parse_js_regex(stripped) if stripped.startswith("/") else None
            if rx is not None:
                if rx.status != "ok":
                    continue
                for a in range(n):
                    if regex_budget <= 0:
                        break
                    regex_budget -= 1
                    if a != b and not entries[a].entry.prevent_recursion and _search(rx, entries[a].entry.content):
                        edges[a].add(b)
                continue
            needle = stripped.lower()
            word = whole and needle.replace("_", "a").isalnum()
            at = haystack.find(needle)
            while at >= 0:
                a = bisect.bisect_right(starts, at) - 1
                end = at + len(needle)
                if not word or ((at == 0 or not haystack[at - 1].isalnum()) and
                                (end >= len(haystack) or not haystack[end].isalnum())):
                    if a != b and not entries[a].entry.prevent_recursion:
                        edges[a].add(b)
                    # one edge per source entry is enough: jump to the next entry's content
                    next_start = starts[a + 1] if a + 1 < n else len(haystack)
                    at = haystack.find(needle, next_start)
                else:
                    at = haystack.find(needle, at + 1)
    for component in _components(edges):
        if len(component) < 2:
            continue
        members = sorted(component)
        first = entries[members[0]]
        names = ", ".join(_label(entries[i].entry) for i in members[:5]) + (" ..." if len(members) > 5 else "")
        emit("WI_RECURSION_CYCLE", f"{len(members)} entries activate each other by recursion: {names}",
             first.path, "set preventRecursion or excludeRecursion on one of them if this is not intended")


def _search(rx: JsRegex, text: str) -> bool:
    try:
        return js_regex_search(rx, text, _REGEX_TIMEOUT)
    except Exception:  # noqa: BLE001 - a timeout or a refused pattern: treat as no match
        return False


def _components(edges: list[set[int]]) -> list[list[int]]:
    """Tarjan's strongly connected components, iterative (books can hold thousands of entries)."""
    n = len(edges)
    index = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    stack: list[int] = []
    out: list[list[int]] = []
    counter = 0
    for root in range(n):
        if index[root] != -1:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if index[w] == -1:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack[w] = True
                    work.append((w, iter(edges[w])))
                    advanced = True
                    break
                if on_stack[w]:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    component.append(w)
                    if w == v:
                        break
                out.append(component)
    return out
