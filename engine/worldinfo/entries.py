"""World-book entries with SillyTavern's defaults: plain dicts in, frozen records out.

Activation takes books as the dicts SillyTavern stores (``{"entries": {uid: {...}}}``, or a list of
entries) so that it does not depend on the asset importers. This module is the one place that
knows the field names, the defaults a new entry gets (research digest section 2.1), the
``@@decorator`` lines at the top of ``content`` and the order SillyTavern walks a book in. Bad
values become a diagnostic with the JSON path and the default, never an exception: a book is
user data, and one broken field should not hide the rest of it.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from ..collector import bulk_allocation
from ..errors import Diagnostic, TemplateError
from ..world_info_fields import ENTRY_FIELDS

__all__ = [
    "BOOK_SOURCES",
    "CharacterFilter",
    "Entry",
    "Position",
    "WorldBook",
    "js_key_order",
    "normalize_book",
    "normalize_books",
    "parse_decorators",
]

#: Where a book comes from; the order of the first two sources is the scan order (section 2.2).
BOOK_SOURCES = ("chat", "persona", "character", "global")

KNOWN_DECORATORS = ("@@activate", "@@dont_activate")


class Position:
    """Entry positions (SillyTavern's numbers)."""

    BEFORE = 0
    AFTER = 1
    AN_TOP = 2
    AN_BOTTOM = 3
    AT_DEPTH = 4
    EM_TOP = 5
    EM_BOTTOM = 6
    OUTLET = 7


class Logic:
    """Secondary-key logics (SillyTavern's numbers)."""

    AND_ANY = 0
    NOT_ALL = 1
    NOT_ANY = 2
    AND_ALL = 3


@dataclass(frozen=True, slots=True)
class CharacterFilter:
    """Which characters an entry applies to: avatar file names (without extension) and tag ids."""

    is_exclude: bool = False
    names: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()


_NO_FILTER = CharacterFilter()


@dataclass(frozen=True)
class Entry:
    """One world-info entry, every field resolved to its SillyTavern default when absent.

    ``content`` is the text after the decorator lines; ``decorators`` are the recognised ones.
    ``None`` in the override fields means "use the global setting".

    Not slotted on purpose: the defaults are class attributes, so :func:`normalize_entry` builds an
    entry by handing over one dict of the fields a book actually sets (a book of 10,000 entries
    sets five or six of the 46 fields each; the generated ``__init__`` of a frozen class would
    spend a guarded ``object.__setattr__`` on every field of every entry, half the load time).
    """

    book: str
    uid: int | str
    key: tuple[str, ...] = ()
    keysecondary: tuple[str, ...] = ()
    selective: bool = True
    selective_logic: int = Logic.AND_ANY
    constant: bool = False
    disable: bool = False
    content: str = ""
    decorators: tuple[str, ...] = ()
    comment: str = ""
    order: float = 100
    position: int = Position.BEFORE
    depth: int = 4
    role: int = 0
    outlet_name: str = ""
    probability: float = 100
    use_probability: bool = True
    group: str = ""
    group_override: bool = False
    group_weight: float = 100
    use_group_scoring: bool | None = None
    scan_depth: int | None = None
    case_sensitive: bool | None = None
    match_whole_words: bool | None = None
    exclude_recursion: bool = False
    prevent_recursion: bool = False
    delay_until_recursion: float = 0
    ignore_budget: bool = False
    sticky: int = 0
    cooldown: int = 0
    delay: int = 0
    match_persona_description: bool = False
    match_character_description: bool = False
    match_character_personality: bool = False
    match_character_depth_prompt: bool = False
    match_scenario: bool = False
    match_creator_notes: bool = False
    triggers: tuple[str, ...] = ()
    character_filter: CharacterFilter = _NO_FILTER  # frozen, so one shared default is safe
    automation_id: str = ""
    vectorized: bool = False
    hash: str = ""
    path: str = ""

    @property
    def id(self) -> str:
        """SillyTavern's activation key: ``book.uid``."""
        return f"{self.book}.{self.uid}"

    @property
    def groups(self) -> tuple[str, ...]:
        """The inclusion groups: ``group`` split on commas (``/,\\s*/``), empty names dropped."""
        if not self.group:
            return ()
        import re

        return tuple(g for g in re.split(r",\s*", self.group) if g)


@dataclass(frozen=True, slots=True)
class WorldBook:
    """A named book and where it comes from (``global``, ``character``, ``chat`` or ``persona``)."""

    name: str
    entries: tuple[Entry, ...]
    source: str = "global"


# ---------------------------------------------------------------------------------------------
# decorators


def parse_decorators(content: str) -> tuple[tuple[str, ...], str]:
    """Split ``@@`` decorator lines off the top of ``content``.

    Leading lines that start with ``@@`` are decorators; ``@@@`` lines are fallbacks, read only
    after an unknown decorator. The first other line starts the real content. When every line is
    a decorator the content stays as written (a SillyTavern quirk we keep: research 2.11 #3).
    Only a line equal to a known decorator counts, so ``@@activate `` with a trailing space is
    recognised as known but does not activate (as in SillyTavern).
    """
    if not content.startswith("@@"):
        return (), content
    lines = content.split("\n")
    decorators: list[str] = []
    fallback = False
    new_content = content
    for i, line in enumerate(lines):
        if line.startswith("@@"):
            if line.startswith("@@@") and not fallback:
                continue
            probe = line[1:] if line.startswith("@@@") else line
            if any(probe.startswith(d) for d in KNOWN_DECORATORS):
                decorators.append(probe)
                fallback = False
            else:
                fallback = True
        else:
            new_content = "\n".join(lines[i:])
            break
    return tuple(decorators), new_content


# ---------------------------------------------------------------------------------------------
# coercion with diagnostics


class _Reader:
    def __init__(self, raw: Mapping[str, Any], path: str, diagnostics: list[Diagnostic]) -> None:
        self.raw = raw
        self.path = path
        self.diagnostics = diagnostics

    def bad(self, name: str, expected: str, default: Any) -> None:
        value = self.raw.get(name)
        self.diagnostics.append(
            Diagnostic(
                "ASSET_INVALID",
                f"{name} should be {expected}, got {type(value).__name__} {_short(value)}; using {default!r}",
                path=f"{self.path}.{name}",
            )
        )

    def boolean(self, name: str, default: bool) -> bool:
        value = self.raw.get(name)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return bool(value)  # JavaScript truthiness, as SillyTavern tests the field
        if isinstance(value, str):
            return value != ""
        self.bad(name, "a boolean", default)
        return default

    def optional_bool(self, name: str) -> bool | None:
        value = self.raw.get(name)
        if value is None:
            return None
        return self.boolean(name, False)

    def number(self, name: str, default: float) -> float:
        value = self.raw.get(name)
        if value is None:
            return default
        if isinstance(value, bool):
            return float(value)
        if isinstance(value, (int, float)):
            if math.isfinite(value):
                return value
            self.bad(name, "a finite number", default)
            return default
        if isinstance(value, str):
            try:
                parsed = float(value.strip()) if value.strip() else 0.0
            except ValueError:
                self.bad(name, "a number", default)
                return default
            if math.isfinite(parsed):
                return int(parsed) if parsed.is_integer() else parsed
        self.bad(name, "a number", default)
        return default

    def integer(self, name: str, default: int) -> int:
        value = self.number(name, default)
        return int(value) if float(value).is_integer() else int(math.floor(value))

    def optional_int(self, name: str) -> int | None:
        if self.raw.get(name) is None:
            return None
        return self.integer(name, 0)

    def text(self, name: str, default: str = "") -> str:
        value = self.raw.get(name)
        if value is None:
            return default
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return _js_number_text(value)
        self.bad(name, "a string", default)
        return default

    def strings(self, name: str) -> tuple[str, ...]:
        value = self.raw.get(name)
        if value is None:
            return ()
        if isinstance(value, str):
            # SillyTavern's editor keeps keys as a list; a bare string is one key
            self.diagnostics.append(
                Diagnostic("ASSET_INVALID", f"{name} should be a list of strings; reading it as one key",
                           path=f"{self.path}.{name}", severity="info")
            )
            return (value,)
        if not isinstance(value, list):
            self.bad(name, "a list of strings", [])
            return ()
        out: list[str] = []
        for i, item in enumerate(value):
            if isinstance(item, str):
                out.append(item)
            elif isinstance(item, (int, float)) and not isinstance(item, bool):
                out.append(_js_number_text(item))
            else:
                self.diagnostics.append(
                    Diagnostic("ASSET_INVALID", f"{name}[{i}] is not a string; ignored", path=f"{self.path}.{name}[{i}]")
                )
        return tuple(out)


def _js_number_text(value: float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return str(value)


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def _entry_hash(raw: Mapping[str, Any]) -> str:
    """A content hash of the entry as stored: timed-effect records are tied to it."""
    data = json.dumps(raw, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()[:16]


def _delay_level(reader: _Reader) -> float:
    value = reader.raw.get("delayUntilRecursion")
    if value is None or value is False:
        return 0
    if value is True:
        return 1
    return reader.number("delayUntilRecursion", 0)


#: SillyTavern field name -> (Entry attribute, kind) for the fields read as they are written (the uid,
#: the content and the character filter are read on their own); absent fields keep the Entry defaults
_SPECS: dict[str, tuple[str, str]] = {f.st_name: (f.attr, f.kind) for f in ENTRY_FIELDS
                                      if f.activation and f.kind not in ("uid", "content", "filter")}
_DEFAULTS = {f.name: f.default for f in Entry.__dataclass_fields__.values()}  # type: ignore[attr-defined]


def _read_field(r: _Reader, name: str, attr: str, kind: str, value: Any) -> Any:
    """One present field: the value itself when it already has the right type, else coerced."""
    vt = type(value)
    if kind == "bool":
        return value if vt is bool else r.boolean(name, _DEFAULTS[attr])
    if kind == "optbool":
        return value if vt is bool else r.optional_bool(name)
    if kind == "int":
        return value if vt is int else r.integer(name, _DEFAULTS[attr])
    if kind == "optint":
        return value if vt is int else r.optional_int(name)
    if kind == "num":
        return value if vt is int or (vt is float and math.isfinite(value)) else r.number(name, _DEFAULTS[attr])
    if kind == "text":
        return value if vt is str else r.text(name)
    if kind == "strings":
        if vt is list and all(type(k) is str for k in value):
            return tuple(value)
        return r.strings(name)
    return _delay_level(r)


#: kinds whose already-right values are exactly one Python type (taken as they are)
_EXACT = {"bool": bool, "optbool": bool, "int": int, "optint": int, "text": str}
#: SillyTavern field name -> (Entry attribute, kind, the exact type taken as is, or None)
_FAST_SPECS = {name: (attr, kind, _EXACT.get(kind)) for name, (attr, kind) in _SPECS.items()}
_new_object = object.__new__
_set_attribute = object.__setattr__
_ONLY_STR = {str}


class _ShapePlan:
    """How to read entries whose field names, order and value types are one given shape.

    A book's entries mostly share one shape (an export writes every field of every entry the same
    way), so the per-field decisions are taken once per shape and each entry is then read by
    index: the fields already of the right type are copied in one C-driven step, and only lists,
    floats, the content and the character filter get a look of their own. Anything irregular
    (a value that needs coercion or a diagnostic) sends the entry down the general path.
    """

    __slots__ = ("attrs", "getter", "lists", "floats", "delay_bools", "content", "character_filter")

    def __init__(self, names: tuple[str, ...], types: tuple[type, ...]) -> None:
        direct: list[tuple[int, str]] = []
        self.lists: list[tuple[int, str]] = []
        self.floats: list[tuple[int, str]] = []
        self.delay_bools: list[tuple[int, str]] = []
        self.content: int | None = None
        self.character_filter: int | None = None
        for index, (name, value_type) in enumerate(zip(names, types)):
            if value_type is type(None) or name == "uid":
                continue  # an absent value keeps the default; the uid is read on its own
            if name == "content":
                if value_type is not str:
                    raise _Irregular
                self.content = index
                continue
            if name == "characterFilter":
                if value_type is not dict:
                    raise _Irregular
                self.character_filter = index
                continue
            spec = _FAST_SPECS.get(name)
            if spec is None:
                continue  # a field activation does not read
            attr, kind, exact = spec
            if value_type is exact or (kind == "num" and value_type is int) or (kind == "delay" and value_type is int):
                direct.append((index, attr))
            elif kind == "strings" and value_type is list:
                self.lists.append((index, attr))
            elif kind == "num" and value_type is float:
                self.floats.append((index, attr))
            elif kind == "delay" and value_type is bool:
                self.delay_bools.append((index, attr))
            else:
                raise _Irregular
        self.attrs = tuple(attr for _, attr in direct)
        indices = [index for index, _ in direct]
        self.getter: Callable[[list[Any]], tuple[Any, ...]] | None
        if len(indices) > 1:
            self.getter = itemgetter(*indices)
        elif indices:
            only = indices[0]
            self.getter = lambda values: (values[only],)
        else:
            self.getter = None


class _Irregular(Exception):
    """An entry (or shape) the shape path does not handle; the general path reads it."""


_SHAPES: dict[tuple[tuple[str, ...], tuple[type, ...]], _ShapePlan | None] = {}
_FILTER_FIELDS = frozenset(("isExclude", "names", "tags"))


def _normalize_by_shape(raw: dict[str, Any], book: str, uid: int | str, path: str) -> Entry | None:
    """:func:`normalize_entry` for a regular entry through its shape's plan; ``None`` when irregular."""
    names = tuple(raw)
    values_list = list(raw.values())
    shape = (names, tuple(map(type, values_list)))
    plan = _SHAPES.get(shape, _MISSING_PLAN)
    if plan is _MISSING_PLAN:
        if len(_SHAPES) > 512:
            _SHAPES.clear()
        try:
            plan = _ShapePlan(*shape)
        except _Irregular:
            plan = None
        _SHAPES[shape] = plan
    if plan is None:
        return None
    values: dict[str, Any] = {"book": book, "uid": uid, "path": path}
    if plan.getter is not None:
        values.update(zip(plan.attrs, plan.getter(values_list)))
    for index, attr in plan.lists:
        items = values_list[index]
        if items and {*map(type, items)} != _ONLY_STR:
            return None
        values[attr] = tuple(items)
    for index, attr in plan.floats:
        number = values_list[index]
        if not math.isfinite(number):
            return None
        values[attr] = number
    for index, attr in plan.delay_bools:
        values[attr] = 1 if values_list[index] else 0
    if plan.content is not None:
        content = values_list[plan.content]
        if content.startswith("@@"):
            values["decorators"], values["content"] = parse_decorators(content)
        else:
            values["content"] = content
    if plan.character_filter is not None:
        cf = values_list[plan.character_filter]
        if not _FILTER_FIELDS.issuperset(cf):
            return None
        exclude, names_, tags = cf.get("isExclude"), cf.get("names"), cf.get("tags")
        if (exclude is not None and type(exclude) is not bool) or \
                any(v is not None and (type(v) is not list or (v and {*map(type, v)} != _ONLY_STR))
                    for v in (names_, tags)):
            return None
        if exclude or names_ or tags:
            values["character_filter"] = CharacterFilter(bool(exclude), tuple(names_ or ()), tuple(tags or ()))
        else:
            values["character_filter"] = _NO_FILTER  # equal to what the general path builds
    if values.get("sticky", 0) > 0 or values.get("cooldown", 0) > 0:
        values["hash"] = _entry_hash(raw)
    entry = _new_object(Entry)
    _set_attribute(entry, "__dict__", values)
    return entry


_MISSING_PLAN: Any = object()
#: below this many fields the general reading is quicker than working out the shape (measured:
#: a 5-field entry reads 20% slower by shape, a 40-field export entry 45% faster)
_SHAPE_MIN_FIELDS = 10


def normalize_entry(raw: Any, book: str, fallback_uid: int | str, path: str,
                    diagnostics: list[Diagnostic]) -> Entry | None:
    """One entry dict with SillyTavern's field names as an :class:`Entry` (``None`` if not a dict).

    Only the fields present are read (values of the right type are taken as they are, others go
    through the coercions above); absent fields keep SillyTavern's defaults, which are the class
    attributes of :class:`Entry`, so the entry is built from the dict of present fields alone.
    This runs once per entry of every book a process loads: a regular entry goes through its
    shape's plan (:class:`_ShapePlan`), the rest through :func:`_normalize_entry_general`.
    """
    if type(raw) is dict and len(raw) > _SHAPE_MIN_FIELDS:
        uid_raw = raw.get("uid", fallback_uid)
        uid_type = type(uid_raw)
        if uid_type is int or uid_type is str:
            entry = _normalize_by_shape(raw, book, uid_raw, path)
            if entry is not None:
                return entry
    return _normalize_entry_general(raw, book, fallback_uid, path, diagnostics)


def _normalize_entry_general(raw: Any, book: str, fallback_uid: int | str, path: str,
                             diagnostics: list[Diagnostic]) -> Entry | None:
    """:func:`normalize_entry` for any value, with a diagnostic for every coercion."""
    if not isinstance(raw, Mapping):
        diagnostics.append(Diagnostic("ASSET_INVALID", "an entry should be an object; ignored", path=path))
        return None
    r: _Reader | None = None
    uid_raw = raw.get("uid", fallback_uid)
    uid_type = type(uid_raw)
    if uid_type is int or uid_type is str:
        uid: int | str = uid_raw
    elif isinstance(uid_raw, bool) or not isinstance(uid_raw, (int, float, str)):
        r = _Reader(raw, path, diagnostics)
        r.bad("uid", "an integer", fallback_uid)
        uid = fallback_uid
    elif isinstance(uid_raw, float) and uid_raw.is_integer():
        uid = int(uid_raw)
    else:
        uid = uid_raw
    values: dict[str, Any] = {"book": book, "uid": uid, "path": path}
    specs = _FAST_SPECS
    for name, value in raw.items():
        spec = specs.get(name)
        if spec is None or value is None:
            continue
        attr, kind, exact = spec
        vt = type(value)
        if vt is exact:
            values[attr] = value
        elif kind == "strings" and vt is list and (not value or {*map(type, value)} == _ONLY_STR):
            values[attr] = tuple(value)
        elif kind == "num" and (vt is int or (vt is float and math.isfinite(value))):
            values[attr] = value
        else:
            if r is None:
                r = _Reader(raw, path, diagnostics)
            values[attr] = _read_field(r, name, attr, kind, value)
    content = raw.get("content")
    if content is not None:
        if type(content) is not str:
            if r is None:
                r = _Reader(raw, path, diagnostics)
            content = r.text("content")
        if content.startswith("@@"):
            values["decorators"], values["content"] = parse_decorators(content)
        else:
            values["content"] = content
    cf_raw = raw.get("characterFilter")
    if cf_raw is not None:
        if isinstance(cf_raw, Mapping):
            cf_reader = _Reader(cf_raw, f"{path}.characterFilter", diagnostics)
            values["character_filter"] = CharacterFilter(
                cf_reader.boolean("isExclude", False), cf_reader.strings("names"), cf_reader.strings("tags")
            )
        else:
            if r is None:
                r = _Reader(raw, path, diagnostics)
            r.bad("characterFilter", "an object", {})
    if values.get("sticky", 0) > 0 or values.get("cooldown", 0) > 0:
        values["hash"] = _entry_hash(raw)  # timed-effect records are tied to it
    entry = _new_object(Entry)
    _set_attribute(entry, "__dict__", values)
    return entry


def js_key_order(keys: Iterable[str]) -> list[str]:
    """Keys in JavaScript's own-property order: array indices ascending, then insertion order.

    SillyTavern walks a book's ``entries`` object with ``Object.keys``, so ties in ``order`` are
    broken by this order, not by the file's textual order.
    """
    return [k for k, _ in _ordered_with_uids(keys)]


def _ordered_with_uids(keys: Iterable[str]) -> list[tuple[str, int | str]]:
    """:func:`js_key_order` paired with each key's fallback uid (the integer for an array index)."""
    index_keys: list[tuple[str, int | str]] = []
    other: list[tuple[str, int | str]] = []
    for k in keys:
        if _is_array_index(k):
            index_keys.append((k, int(k)))
        else:
            other.append((k, k))
    index_keys.sort(key=_second)  # stable, like sorting the strings by their integer value
    return index_keys + other


def _second(pair: tuple[str, int | str]) -> int | str:
    return pair[1]


def _is_array_index(key: str) -> bool:
    return key.isdigit() and key.isascii() and (key == "0" or not key.startswith("0")) and int(key) < 2**32 - 1


def normalize_book(book: Any, name: str = "book", source: str = "global", *,
                   path: str = "$") -> tuple[WorldBook, list[Diagnostic]]:
    """A book (``{"entries": {...}}``, ``{"entries": [...]}`` or a bare list) as a :class:`WorldBook`.

    List entries are keyed by their ``uid`` (or index) and walked in JavaScript key order, as
    SillyTavern stores them once imported. Raises ``TemplateError(INPUT_INVALID)`` only when the
    value has no entries at all to read.
    """
    diagnostics: list[Diagnostic] = []
    if isinstance(book, WorldBook):
        return book, diagnostics
    if isinstance(book, Mapping):
        if isinstance(book.get("name"), str) and book.get("name"):
            name = book["name"]
        if isinstance(book.get("source"), str):
            source = book["source"]
        raw_entries = book.get("entries")
        entries_path = f"{path}.entries"
    else:
        raw_entries = book
        entries_path = path
    if source not in BOOK_SOURCES:
        diagnostics.append(Diagnostic("INPUT_INVALID", f"unknown book source {source!r}; using 'global'",
                                      path=f"{path}.source"))
        source = "global"
    keyed: dict[str, tuple[Any, int | str]] = {}
    if isinstance(raw_entries, Mapping):
        for k, fallback in _ordered_with_uids(str(k) for k in raw_entries):
            if k not in keyed:
                keyed[k] = (raw_entries[k] if k in raw_entries else raw_entries[int(k)], fallback)  # type: ignore[index]
        items = [(k, v, fallback, f"{entries_path}.{k}") for k, (v, fallback) in keyed.items()]
    elif isinstance(raw_entries, Sequence) and not isinstance(raw_entries, (str, bytes)):
        # as SillyTavern would store the list: an object keyed by uid, so a repeated uid keeps its
        # first position and the later entry's value
        by_key: dict[str, tuple[Any, str]] = {}
        for i, v in enumerate(raw_entries):
            uid = v.get("uid", v.get("id", i)) if isinstance(v, Mapping) else i
            if str(uid) in by_key:
                diagnostics.append(Diagnostic("ASSET_INVALID", f"uid {uid} repeats; the later entry replaces the "
                                              "earlier one", path=f"{entries_path}[{i}].uid"))
            by_key[str(uid)] = (v, f"{entries_path}[{i}]")
        items = [(k, by_key[k][0], fallback, by_key[k][1]) for k, fallback in _ordered_with_uids(by_key)]
    else:
        raise TemplateError("a world book needs an 'entries' object or list", code="INPUT_INVALID", path=path)
    entries: list[Entry] = []
    with bulk_allocation():
        for k, v, fallback, p in items:
            entry = normalize_entry(v, name, fallback, p, diagnostics)
            if entry is not None:
                entries.append(entry)
    return WorldBook(name, tuple(entries), source), diagnostics


def normalize_books(books: Any, *, path: str = "$") -> tuple[list[WorldBook], list[Diagnostic]]:
    """Every accepted shape of the ``books`` argument as a list of :class:`WorldBook`.

    Accepted: one book dict, a list of book dicts (each may carry ``name`` and ``source``), a
    mapping of book name to book, :class:`WorldBook` values, or a bare list of entries.
    """
    diagnostics: list[Diagnostic] = []
    out: list[WorldBook] = []
    if isinstance(books, WorldBook):
        return [books], diagnostics
    if isinstance(books, Mapping) and "entries" in books:
        book, d = normalize_book(books, "book", path=path)
        return [book], d
    if isinstance(books, Mapping):
        for i, (name, value) in enumerate(books.items()):
            book, d = normalize_book(value, str(name), path=f"{path}[{json.dumps(str(name))}]")
            out.append(book)
            diagnostics.extend(d)
        return out, diagnostics
    if isinstance(books, Sequence) and not isinstance(books, (str, bytes)):
        if books and all(isinstance(b, Mapping) and "entries" not in b for b in books):
            book, d = normalize_book(list(books), "book", path=f"{path}.entries")
            return [book], d
        for i, value in enumerate(books):
            default_name = "book" if len(books) == 1 else f"book{i}"
            book, d = normalize_book(value, default_name, path=f"{path}[{i}]")
            out.append(book)
            diagnostics.extend(d)
        return out, diagnostics
    raise TemplateError("books should be a world book, a list of books or a mapping of name to book",
                        code="INPUT_INVALID", path=path)
