"""SillyTavern world books (lorebooks): the standalone file and the card-book conversion.

Two shapes exist in the wild. The standalone world file is ``{"entries": {uid: entry}}`` with
SillyTavern's camelCase field names (``key``, ``keysecondary``, ``order``, ``disable`` ...). The book
embedded in a character card (``character_book``) is the card spec's list form with other names
(``keys``, ``secondary_keys``, ``insertion_order``, ``enabled``) and SillyTavern's own settings stashed
in ``extensions`` in snake_case. SillyTavern never scans the embedded book: on import it converts it to a
world file. :func:`card_book_to_world_book` performs that conversion field for field, so activation sees
exactly what SillyTavern would.

The models fill SillyTavern's defaults for absent fields (the values of its new-entry template) and keep
every unknown field, so :meth:`WorldBook.to_st_dict` gives the world-info engine a complete SillyTavern
entry and a saved book round-trips.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from pydantic import ConfigDict, Field, PrivateAttr, create_model
from pydantic.alias_generators import to_camel

from ..errors import Diagnostic, TemplateError
from ..world_info_fields import ENTRY_FIELDS, NO_DEFAULT, EntryField
from .base import AssetModel, type_name, validate_model
from .decoding import MAX_SAFE_INTEGER, unsafe_number
from .paths import join_path
from .frozen import as_plain

__all__ = [
    "CharacterBook",
    "CharacterBookEntry",
    "CharacterFilter",
    "WorldBook",
    "WorldInfoEntry",
    "card_book_to_world_book",
    "parse_world_book",
    "ST_ENTRY_DEFAULTS",
]

Number = int | float

#: SillyTavern 1.18's new-entry template (``newWorldInfoEntryDefinition``), by ST field name.
ST_ENTRY_DEFAULTS: dict[str, Any] = {f.st_name: copy.deepcopy(f.st_default) for f in ENTRY_FIELDS
                                     if f.st_default is not NO_DEFAULT}


class CharacterFilter(AssetModel):
    """Which characters an entry is limited to (names are avatar file names) or excluded from."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, alias_generator=to_camel)

    is_exclude: bool = False
    names: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)


class _WorldInfoEntryBase(AssetModel):
    """What :data:`WorldInfoEntry` adds to its fields: unknown fields kept, SillyTavern's names as aliases."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, alias_generator=to_camel)

    def to_st_dict(self) -> dict[str, Any]:
        """The entry as SillyTavern stores it: every template field present, unknown fields kept."""
        out = self.model_dump(by_alias=True)
        if getattr(self, "display_index", None) is None and "display_index" not in self.model_fields_set:
            out.pop("displayIndex", None)
        return out


#: the model's annotation for each kind of entry field (``world_info_fields.ENTRY_KINDS``)
_MODEL_TYPES: dict[str, Any] = {
    "uid": int | str, "strings": list[str], "text": str, "content": str, "bool": bool, "optbool": bool | None,
    "int": int, "optint": int | None, "num": Number, "delay": bool | Number, "filter": CharacterFilter,
}


def _model_field(f: EntryField) -> tuple[Any, Any]:
    """One row of the field table as a pydantic field: its annotation and default (SillyTavern's template's)."""
    annotation = _MODEL_TYPES[f.kind]
    if f.nullable or (f.st_default is None and f.kind == "int"):
        annotation = annotation | None
    if f.kind == "uid":
        return annotation, Field(alias=f.st_name)
    if f.kind == "filter":
        return annotation, Field(default_factory=CharacterFilter, alias=f.st_name)
    if isinstance(f.st_default, list):
        return annotation, Field(default_factory=list, alias=f.st_name)
    return annotation, Field(None if f.st_default is NO_DEFAULT else f.st_default, alias=f.st_name)


#: One world-info entry in SillyTavern's world-file shape (attribute names snake_case, aliases ST's):
#: a field per row of ``world_info_fields.ENTRY_FIELDS``, unknown fields kept.
WorldInfoEntry: type[_WorldInfoEntryBase] = create_model(  # type: ignore[call-overload]
    "WorldInfoEntry", __base__=_WorldInfoEntryBase, __module__=__name__,
    __doc__="One world-info entry in SillyTavern's world-file shape (attribute names snake_case, aliases ST's).",
    **{f.attr: _model_field(f) for f in ENTRY_FIELDS})


class WorldBook(AssetModel):
    """A standalone world book: ``entries`` keyed by uid (as strings, in file order)."""

    entries: dict[str, WorldInfoEntry] = Field(default_factory=dict)
    _name: str | None = PrivateAttr(default=None)
    _entry_counts: dict[str, int] | None = PrivateAttr(default=None)

    @property
    def entry_counts(self) -> dict[str, int]:
        """Entries, constant, disabled and keyed entries (also for a book loaded without its entries)."""
        if self._entry_counts is not None:
            return dict(self._entry_counts)
        entries = self.entry_list
        return {
            "entries": len(entries),
            "constant": sum(1 for e in entries if e.constant),
            "disabled": sum(1 for e in entries if e.disable),
            "with_keys": sum(1 for e in entries if e.key),
        }

    @property
    def name(self) -> str | None:
        """The book's name: given at load (the file stem), else a ``name`` field in the file."""
        if self._name is not None:
            return self._name
        extra = (self.model_extra or {}).get("name")
        return extra if isinstance(extra, str) else None

    def with_name(self, name: str | None) -> WorldBook:
        """Set the book's name (not part of SillyTavern's world file) and return the book."""
        self._name = name
        return self

    def to_st_dict(self) -> dict[str, Any]:
        """SillyTavern's world-file object ``{"entries": {uid: {...}}}`` with every entry field filled.

        Book-level unknown fields (``originalData`` and the like) are kept beside ``entries``; a name
        given at load is not part of a SillyTavern world file and is not added.
        """
        out: dict[str, Any] = {"entries": {uid: entry.to_st_dict() for uid, entry in self.entries.items()}}
        for key, value in (self.model_extra or {}).items():
            out[key] = value
        return out

    @property
    def entry_list(self) -> list[WorldInfoEntry]:
        """The entries in file order."""
        return list(self.entries.values())


class CharacterBookEntry(AssetModel):
    """One entry of a card's embedded book, in the card spec's names."""

    keys: list[str] = Field(default_factory=list)
    content: str = ""
    extensions: dict[str, Any] = Field(default_factory=dict)
    #: Required by the spec; when absent SillyTavern's conversion (``disable: !entry.enabled``) disables the entry.
    enabled: bool | None = None
    insertion_order: Number | None = None
    case_sensitive: bool | None = None
    name: str | None = None
    priority: Number | None = None
    id: int | str | None = None
    comment: str | None = None
    selective: bool | None = None
    secondary_keys: list[str] | None = None
    constant: bool | None = None
    position: str | int | None = None
    use_regex: bool | None = None


class CharacterBook(AssetModel):
    """A card's embedded book in the card spec's list form."""

    name: str | None = None
    description: str | None = None
    scan_depth: int | None = None
    token_budget: int | None = None
    recursive_scanning: bool | None = None
    extensions: dict[str, Any] = Field(default_factory=dict)
    entries: list[CharacterBookEntry] = Field(default_factory=list)


def _ext(ext: dict[str, Any], name: str, default: Any) -> Any:
    """``extensions?.name ?? default``: JavaScript's nullish fallback (``null`` also falls back)."""
    value = ext.get(name)
    return default if value is None else value


def _convert_entry(entry: CharacterBookEntry, index: int, uid: int | str) -> dict[str, Any]:
    """One card-book entry as SillyTavern's ``convertCharacterBook`` writes it (by ST field name)."""
    ext = entry.extensions or {}
    if ext.get("position") is not None:
        position = ext["position"]
    else:
        position = 0 if entry.position == "before_char" else 1
    out: dict[str, Any] = dict(ST_ENTRY_DEFAULTS)
    out.update(
        {
            "uid": uid,
            "key": list(entry.keys),
            "keysecondary": list(entry.secondary_keys or []),
            "comment": entry.comment or "",
            "content": entry.content,
            "constant": bool(entry.constant),
            "selective": bool(entry.selective),
            "order": 100 if entry.insertion_order is None else entry.insertion_order,
            "position": position,
            "excludeRecursion": _ext(ext, "exclude_recursion", False),
            "preventRecursion": _ext(ext, "prevent_recursion", False),
            "delayUntilRecursion": _ext(ext, "delay_until_recursion", False),
            "disable": not entry.enabled,
            "addMemo": bool(entry.comment),
            "displayIndex": _ext(ext, "display_index", index),
            "probability": _ext(ext, "probability", 100),
            "useProbability": _ext(ext, "useProbability", True),
            "depth": _ext(ext, "depth", 4),
            "selectiveLogic": _ext(ext, "selectiveLogic", 0),
            "outletName": _ext(ext, "outlet_name", ""),
            "group": _ext(ext, "group", ""),
            "groupOverride": _ext(ext, "group_override", False),
            "groupWeight": _ext(ext, "group_weight", 100),
            "scanDepth": _ext(ext, "scan_depth", None),
            "caseSensitive": _ext(ext, "case_sensitive", None),
            "matchWholeWords": _ext(ext, "match_whole_words", None),
            "useGroupScoring": _ext(ext, "use_group_scoring", None),
            "automationId": _ext(ext, "automation_id", ""),
            "role": _ext(ext, "role", 0),
            "vectorized": _ext(ext, "vectorized", False),
            "sticky": _ext(ext, "sticky", None),
            "cooldown": _ext(ext, "cooldown", None),
            "delay": _ext(ext, "delay", None),
            "matchPersonaDescription": _ext(ext, "match_persona_description", False),
            "matchCharacterDescription": _ext(ext, "match_character_description", False),
            "matchCharacterPersonality": _ext(ext, "match_character_personality", False),
            "matchCharacterDepthPrompt": _ext(ext, "match_character_depth_prompt", False),
            "matchScenario": _ext(ext, "match_scenario", False),
            "matchCreatorNotes": _ext(ext, "match_creator_notes", False),
            "extensions": ext,
            "triggers": ext.get("triggers") or [],
            "ignoreBudget": _ext(ext, "ignore_budget", False),
        }
    )
    return out


#: Converted (ST) field -> where it came from in a card-book entry (top-level spec fields).
_FROM_SPEC = {
    "uid": "id",
    "key": "keys",
    "keysecondary": "secondary_keys",
    "comment": "comment",
    "content": "content",
    "constant": "constant",
    "selective": "selective",
    "order": "insertion_order",
    "disable": "enabled",
}
#: Converted fields read from ``extensions`` under another name (the rest use their snake_case name).
_FROM_EXT = {"displayIndex": "display_index", "useProbability": "useProbability", "selectiveLogic": "selectiveLogic"}


def _source_path(entry_path: str, st_path: str, entry: CharacterBookEntry) -> str:
    """Map a path inside a converted entry (``$.depth``) back to the card book (``...extensions.depth``)."""
    m = re.match(r"^\$\.([A-Za-z]+)(.*)$", st_path)
    if not m:
        return entry_path
    field, rest = m.group(1), m.group(2)
    if field in _FROM_SPEC:
        return entry_path + "." + _FROM_SPEC[field] + rest
    if field == "position" and (entry.extensions or {}).get("position") is None:
        return entry_path + ".position" + rest
    ext_name = _FROM_EXT.get(field) or re.sub(r"([A-Z])", lambda c: "_" + c.group(1).lower(), field)
    return entry_path + ".extensions." + ext_name + rest


def _card_book_uids(entries: list[CharacterBookEntry]) -> list[int | str]:
    """Each entry's uid: its ``id``, or the smallest unused number when it has none.

    SillyTavern keys the converted entry by ``entry.id``; entries without an id get fresh numbers that
    avoid every id already used, so no entry overwrites another.
    """
    used = {str(e.id) for e in entries if e.id is not None}
    uids: list[int | str] = []
    next_id = 0
    for e in entries:
        if e.id is not None:
            uids.append(e.id)
            continue
        while str(next_id) in used:
            next_id += 1
        used.add(str(next_id))
        uids.append(next_id)
        next_id += 1
    return uids


def convert_card_book(
    book: CharacterBook, *, base_path: str, name: str | None, diagnostics: list[Diagnostic]
) -> WorldBook:
    """Convert a validated card book; duplicate ids are reported (the later entry wins, as in ST)."""
    entries: dict[str, WorldInfoEntry] = {}
    for index, (entry, uid) in enumerate(zip(book.entries, _card_book_uids(book.entries), strict=True)):
        key = str(uid)
        if key in entries:
            diagnostics.append(
                Diagnostic(
                    "ASSET_DUPLICATE_ID",
                    f"entry id {uid!r} is used twice; the later entry replaces the earlier one, as in SillyTavern",
                    severity="warning",
                    path=join_path(base_path, "entries", index, "id"),
                )
            )
        converted = _convert_entry(entry, index, uid)
        entry_path = join_path(base_path, "entries", index)
        try:
            entries[key] = validate_model(WorldInfoEntry, converted, "$")
        except TemplateError as exc:
            raise TemplateError(exc.message, code=exc.code, path=_source_path(entry_path, exc.path or "$", entry)) from None
    return WorldBook(entries=entries).with_name(book.name if book.name else name)


def card_book_to_world_book(book: CharacterBook | dict[str, Any], *, name: str | None = None) -> WorldBook:
    """Convert a card's embedded book to a world book exactly as SillyTavern does on card import.

    Field mapping: ``keys``->``key``, ``secondary_keys``->``keysecondary``, ``insertion_order``->``order``,
    ``enabled``->``!disable``, ``id``->``uid``, ``position`` ``"before_char"``->0 else 1 unless
    ``extensions.position`` is set, ``selective`` defaults to false; everything else comes from the
    ``extensions`` snake_case copies, with ``null`` treated as absent. Raises ``TemplateError`` with a
    JSON path (relative to the book, ``$``) for a malformed book.
    """
    diagnostics: list[Diagnostic] = []
    if not isinstance(book, CharacterBook):
        if not isinstance(book, dict):
            raise TemplateError(f"a character book must be an object, not {type_name(book)}", code="ASSET_INVALID", path="$")
        book = parse_card_book(book, base_path="$", diagnostics=diagnostics)
    return convert_card_book(book, base_path="$", name=name, diagnostics=diagnostics)


def parse_card_book(raw: dict[str, Any], *, base_path: str, diagnostics: list[Diagnostic]) -> CharacterBook:
    """Validate a card book, reporting entries whose ``keys`` are absent (SillyTavern would break on them)."""
    entries = raw.get("entries")
    if entries is None:
        diagnostics.append(
            Diagnostic("ASSET_FIELD_MISSING", "the book has no entries", severity="warning", path=join_path(base_path, "entries"))
        )
    elif isinstance(entries, list):
        for i, entry in enumerate(entries):
            if isinstance(entry, dict) and "keys" not in entry:
                diagnostics.append(
                    Diagnostic(
                        "ASSET_FIELD_MISSING",
                        "the entry has no 'keys'; it is read as having none",
                        severity="warning",
                        path=join_path(base_path, "entries", i, "keys"),
                    )
                )
            if isinstance(entry, dict):
                d = unsafe_number(entry.get("insertion_order"), join_path(base_path, "entries", i, "insertion_order"), "insertion_order")
                if d is not None:
                    diagnostics.append(d)
            if isinstance(entry, dict) and entry.get("enabled") is None:
                diagnostics.append(
                    Diagnostic(
                        "ASSET_FIELD_MISSING",
                        "the entry has no 'enabled'; SillyTavern's import disables such an entry",
                        severity="warning",
                        path=join_path(base_path, "entries", i, "enabled"),
                    )
                )
    return validate_model(CharacterBook, raw, base_path)


def parse_world_book(
    raw: Any,
    *,
    name: str | None = None,
    base_path: str = "$",
    diagnostics: list[Diagnostic] | None = None,
    keep_entries: bool = True,
) -> WorldBook:
    """Read a world book in either shape: ST's ``entries`` object, or the card-book ``entries`` list.

    ``keep_entries=False`` validates every entry exactly as usual but keeps none of them, only their
    counts (:attr:`WorldBook.entry_counts`): ``tavernbox import`` of a 100,000-entry book then holds
    no entry models, whose memory would be about 2 KB apiece.
    """
    raw = as_plain(raw)  # a cached asset's frozen views (or a dict around them) read as plain data
    diags = diagnostics if diagnostics is not None else []
    if not isinstance(raw, dict):
        raise TemplateError(f"a world book must be an object, not {type_name(raw)}", code="ASSET_INVALID", path=base_path)
    entries = raw.get("entries")
    if isinstance(entries, list):
        diags.append(
            Diagnostic(
                "ASSET_CONVERTED",
                "a book in the card-spec list form; converted to a SillyTavern world book as on card import",
                severity="info",
                path=join_path(base_path, "entries"),
            )
        )
        book = parse_card_book(raw, base_path=base_path, diagnostics=diags)
        return convert_card_book(book, base_path=base_path, name=name, diagnostics=diags)
    if not isinstance(entries, dict):
        raise TemplateError(
            f"'entries' must be an object keyed by uid, not {type_name(entries)}",
            code="ASSET_INVALID" if entries is not None else "ASSET_FIELD_MISSING",
            path=join_path(base_path, "entries"),
        )
    fixed: dict[str, WorldInfoEntry] = {}
    counts = {"entries": 0, "constant": 0, "disabled": 0, "with_keys": 0}
    seen_uids: dict[str, str] = {}
    entries_path = join_path(base_path, "entries")
    for key, entry in entries.items():
        # The path is built once per entry and only extended when a diagnostic needs it: a book of
        # 100,000 entries must cost time linear in its size with a small constant.
        path = join_path(entries_path, key)
        if not isinstance(entry, dict):
            raise TemplateError(f"an entry must be an object, not {type_name(entry)}", code="ASSET_INVALID", path=path)
        if "uid" not in entry:
            entry = {**entry, "uid": int(key) if key.isdigit() else key}
            diags.append(
                Diagnostic("ASSET_FIELD_MISSING", "the entry has no uid; its key is used", severity="info", path=path + ".uid")
            )
        elif str(entry["uid"]) != key:
            diags.append(
                Diagnostic(
                    "ASSET_UID_MISMATCH",
                    f"the entry is stored under {key!r} but its uid is {entry['uid']!r}",
                    severity="warning",
                    path=join_path(path, "uid"),
                )
            )
        uid_key = str(entry["uid"])
        if uid_key in seen_uids:
            diags.append(
                Diagnostic(
                    "ASSET_DUPLICATE_ID",
                    f"uid {entry['uid']!r} is also the uid of the entry stored under {seen_uids[uid_key]!r}; "
                    "SillyTavern's timed effects and external activations, keyed on the uid, will confuse them",
                    severity="warning",
                    path=join_path(path, "uid"),
                )
            )
        else:
            seen_uids[uid_key] = key
        entry = _nulls_to_defaults(entry, path, diags)
        for field in _NUMERIC_FIELDS:
            value = entry.get(field)
            if type(value) is int and not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
                d = unsafe_number(value, path + "." + field, field)
                if d is not None:
                    diags.append(d)
        model = validate_model(WorldInfoEntry, entry, path)
        if keep_entries:
            fixed[key] = model
        else:
            counts["entries"] += 1
            counts["constant"] += model.constant
            counts["disabled"] += model.disable
            counts["with_keys"] += bool(model.key)
    # Entries are validated one by one above (same JSON paths as validating the whole book, a lower peak);
    # the book's own fields are validated without them and the validated entries attached.
    book = validate_model(WorldBook, {**raw, "entries": {}}, base_path)
    book.entries = fixed
    if not keep_entries:
        book._entry_counts = counts
    return book.with_name(name if name is not None else book.name)


#: Fields where a ``null`` is read as SillyTavern's default (its activation code uses ``??`` on them).
_NULLABLE_DEFAULTED = {f.st_name for f in ENTRY_FIELDS if f.st_default not in (None, NO_DEFAULT) and not f.nullable}


#: Numeric entry fields SillyTavern does arithmetic on (checked for integers past 2^53-1).
_NUMERIC_FIELDS = tuple(f.st_name for f in ENTRY_FIELDS if f.arithmetic)


def _nulls_to_defaults(entry: dict[str, Any], path: str, diags: list[Diagnostic]) -> dict[str, Any]:
    nulls = [k for k, v in entry.items() if v is None and k in _NULLABLE_DEFAULTED]
    if not nulls:
        return entry
    out = dict(entry)
    for k in sorted(nulls):
        # ``order`` is only ever used in arithmetic (``b.order - a.order``), where JavaScript reads null as 0.
        default = 0 if k == "order" else ST_ENTRY_DEFAULTS[k]
        out[k] = default.copy() if isinstance(default, (list, dict)) else default
        diags.append(
            Diagnostic(
                "ASSET_VALUE_NORMALISED",
                f"{k} is null; SillyTavern's default {default!r} is used",
                severity="info",
                path=join_path(path, k),
            )
        )
    return out
