"""Blocks: what a source returns, validated once at the source boundary.

A source's output is ``{"blocks": [...], "macros"?: {name: block_id}, "diagnostics"?: [...]}``.
It is round-tripped through the pinned JSON form (so nothing a source hands back can be mutated
later or carry code), checked against the per-source limits, and turned into frozen
:class:`Block` records. Any failure rejects the whole request: a partial prompt is never sent.

Field names are snake_case; the upstream camelCase spellings (``referenceOnly``, ``messageIds``,
``literalMacros``...) are accepted too, so sources written against the upstream protocol port
without edits.
"""

from __future__ import annotations

import json
from json.encoder import c_make_encoder, encode_basestring
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..errors import Diagnostic, TemplateError
from .limits import SOURCE_MAX_BLOCKS, SOURCE_MAX_BYTES
from .rules import MAX_DEPTH, SOURCE_ID

__all__ = ["Block", "SourceOutput", "validate_output"]

BLOCK_TYPES = ("text", "native", "reference")
BLOCK_ROLES = ("system", "user", "assistant")

_ALIASES = {
    "referenceOnly": "reference_only",
    "targetSourceId": "target_source_id",
    "literalMacros": "literal_macros",
    "messageIds": "message_ids",
    "sourceId": "source_id",
    "blockIds": "block_ids",
    "honorEnabled": "honor_enabled",
    "useOwnerRule": "use_owner_rule",
    "resourceId": "resource_id",
    "blockId": "block_id",
    "positionId": "position_id",
}


@dataclass(frozen=True, slots=True)
class Block:
    """One validated block. Fields that do not apply to a type keep their defaults."""

    type: str
    id: str
    text: str = ""
    name: str | None = None
    role: str | None = None
    depth: int | None = None
    order: int = 100
    stability: str | None = None
    resource_id: str | None = None
    field: str | None = None
    group: str | None = None
    reference_only: bool = False
    claims: tuple[tuple[str, str], ...] = ()
    target_source_id: str | None = None
    literal_macros: tuple[tuple[str, str], ...] = ()
    message_ids: tuple[str, ...] = ()
    source_id: str | None = None
    block_ids: tuple[str, ...] | None = None
    honor_enabled: bool = True
    use_owner_rule: bool = False
    lock: bool = True
    #: the message ``name`` field of a text block's message (SillyTavern's ``example_user``...)
    speaker: str | None = None


@dataclass(frozen=True, slots=True)
class SourceOutput:
    """A source's validated output plus its JSON form (kept verbatim in the replay record)."""

    blocks: tuple[Block, ...]
    macros: MappingProxyType[str, str]
    diagnostics: tuple[Diagnostic, ...]
    #: the output's compact JSON text, as validated
    raw_text: str = field(repr=False, default="{}")

    @property
    def raw(self) -> dict[str, Any]:
        """The output's JSON form, a fresh copy on every read (parsed when the record asks for
        it: most assemblies never read their record)."""
        return json.loads(self.raw_text)  # type: ignore[no-any-return]

    def block(self, block_id: str) -> Block | None:
        """The block with this id, if the output has it."""
        for b in self.blocks:
            if b.id == block_id:
                return b
        return None


def _json_default(value: Any) -> Any:
    if isinstance(value, Mapping):  # MappingProxyType, the context's FrozenMap views
        return dict(value)
    if isinstance(value, (tuple, frozenset)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON data")


# built once: json.dumps builds an encoder per call; no circular-reference markers (a cycle ends
# in RecursionError, and _json_text then lets json.dumps report it as before)
_ENCODE = c_make_encoder(None, _json_default, encode_basestring, None, ":", ",", False, False, False) if c_make_encoder else None


def _json_text(obj: Any) -> str:
    """The compact JSON text of a source's output (frozen containers accepted)."""
    if _ENCODE is not None:
        try:
            return "".join(_ENCODE(obj, 0))
        except RecursionError:
            pass
    return json.dumps(obj, default=_json_default, allow_nan=False, ensure_ascii=False, separators=(",", ":"))


class _ValidatedCache:
    """Validated outputs by source, declared dependencies and JSON text (bounded, LRU).

    A source usually returns the same output request after request (a preset's prompts, a card's
    fields), and checking hundreds of blocks field by field cost more than serialising them. The
    JSON text decides equality, so a hit is exactly an output that was validated before; the
    record still gets its own fresh copy of the JSON form.
    """

    def __init__(self, max_entries: int = 256, max_chars: int = 32 * 1024 * 1024) -> None:
        self.max_entries, self.max_chars = max_entries, max_chars
        self._items: OrderedDict[tuple[str, tuple[str, ...], str], SourceOutput] = OrderedDict()
        self._chars = 0
        #: the same outputs by source, dependencies and :func:`_shape`: an output built again from
        #: the same parts (a preset's prompts, a card's fields, hundreds of KiB) is recognised
        #: without serialising it; its record text is the one validated then
        self._shapes: OrderedDict[Any, SourceOutput] = OrderedDict()
        self._shape_chars = 0
        self._lock = threading.Lock()

    def by_shape(self, key: Any) -> SourceOutput | None:
        with self._lock:
            hit = self._shapes.get(key)
            if hit is not None:
                self._shapes.move_to_end(key)
            return hit

    def put_shape(self, key: Any, value: SourceOutput) -> None:
        size = len(value.raw_text)
        if size > self.max_chars // 4:
            return
        with self._lock:
            if key in self._shapes:
                return
            self._shapes[key] = value
            self._shape_chars += size
            while len(self._shapes) > self.max_entries or self._shape_chars > self.max_chars:
                _, old = self._shapes.popitem(last=False)
                self._shape_chars -= len(old.raw_text)

    def get(self, key: tuple[str, tuple[str, ...], str]) -> SourceOutput | None:
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
            return hit

    def put(self, key: tuple[str, tuple[str, ...], str], value: SourceOutput) -> None:
        if len(key[2]) > self.max_chars // 4:
            return
        with self._lock:
            if key in self._items:
                return
            self._items[key] = value
            self._chars += len(key[2])
            while len(self._items) > self.max_entries or self._chars > self.max_chars:
                (_, _, old), _ = self._items.popitem(last=False)
                self._chars -= len(old)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._chars = 0
            self._shapes.clear()
            self._shape_chars = 0


#: outputs validated before (see :class:`_ValidatedCache`)
VALIDATED_OUTPUTS = _ValidatedCache()


def _shape(value: Any) -> Any:
    """A key that two outputs share only when their JSON texts are equal, built without writing
    the text: strings stand for themselves (their hash is kept on the string, and an unchanged
    source hands back the same strings), numbers and booleans are tagged by type (``1``, ``1.0``
    and ``True`` are equal in Python, not in JSON; floats by ``repr``, so ``-0.0`` is not
    ``0.0``), containers as their JSON form reads them. Raises ``TypeError`` for anything
    else (the JSON path then reports it)."""
    kind = type(value)
    if kind is str or value is None:
        return value
    if kind is dict or isinstance(value, Mapping):
        return ("d", tuple([(k if type(k) is str else ("k", repr(k)), _shape(v)) for k, v in value.items()]))
    if kind is list or kind is tuple or isinstance(value, (list, tuple, frozenset)):
        return ("l", tuple([_shape(v) for v in value]))
    if kind is bool:
        return ("b", value)
    if kind is int:
        return ("i", value)
    if kind is float:
        return ("f", repr(value))
    raise TypeError(f"{kind.__name__} is not JSON data")




def _invalid(source_id: str, message: str, path: str) -> TemplateError:
    return TemplateError(
        f"invalid output from source {source_id!r}: {message} at {path}",
        code="ASSEMBLY_SOURCE_OUTPUT_INVALID",
        path=path,
    )


def _block(raw: Any, i: int, source_id: str) -> Block:
    path = f"$.blocks[{i}]"
    if not isinstance(raw, dict):
        raise _invalid(source_id, "a block must be an object", path)
    if not _ALIASES.keys().isdisjoint(raw):
        raw = {_ALIASES.get(k, k): v for k, v in raw.items()}
    btype, bid = raw.get("type", "text"), raw.get("id")
    if btype not in BLOCK_TYPES:
        raise _invalid(source_id, f"block type must be one of {', '.join(BLOCK_TYPES)}", f"{path}.type")
    if not isinstance(bid, str) or not bid:
        raise _invalid(source_id, "block id must be a non-empty string", f"{path}.id")
    depth = raw.get("depth")
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or not 0 <= depth <= MAX_DEPTH):
        raise _invalid(source_id, f"block depth must be an integer 0..{MAX_DEPTH}", f"{path}.depth")
    order = raw.get("order", 100)
    if order is None:
        order = 100
    if isinstance(order, bool) or not isinstance(order, (int, float)):
        raise _invalid(source_id, "block order must be a number", f"{path}.order")
    role = raw.get("role")
    if role is not None and role not in BLOCK_ROLES:
        raise _invalid(source_id, "block role must be system, user or assistant", f"{path}.role")
    common: dict[str, Any] = {"type": btype, "id": bid, "depth": depth, "order": order, "role": role}
    name = raw.get("name")
    common["name"] = name if isinstance(name, str) else None
    if btype == "text":
        text = raw.get("text")
        if not isinstance(text, str):
            raise _invalid(source_id, "a text block needs a string text", f"{path}.text")
        src = raw.get("source") or {}
        if not isinstance(src, dict):
            raise _invalid(source_id, "block source must be an object", f"{path}.source")
        src = {_ALIASES.get(k, k): v for k, v in src.items()}
        claims = []
        for j, c in enumerate(raw.get("claims") or []):
            c = {_ALIASES.get(k, k): v for k, v in c.items()} if isinstance(c, dict) else None
            if not c or not isinstance(c.get("source_id"), str) or not isinstance(c.get("block_id"), str):
                raise _invalid(source_id, "a claim is {source_id, block_id}", f"{path}.claims[{j}]")
            claims.append((c["source_id"], c["block_id"]))
        lits = raw.get("literal_macros") or {}
        if not isinstance(lits, dict) or not all(isinstance(v, str) for v in lits.values()):
            raise _invalid(source_id, "literal_macros maps names to strings", f"{path}.literal_macros")
        target = raw.get("target_source_id")
        if target is not None and (not isinstance(target, str) or not SOURCE_ID.fullmatch(target)):
            raise _invalid(source_id, "target_source_id must be a source id", f"{path}.target_source_id")
        return Block(
            text=text,
            stability=raw.get("stability") if isinstance(raw.get("stability"), str) else None,
            resource_id=str(src["resource_id"]) if src.get("resource_id") is not None else None,
            field=str(src["field"]) if src.get("field") is not None else None,
            group=raw.get("group") if isinstance(raw.get("group"), str) else None,
            reference_only=raw.get("reference_only") is True,
            claims=tuple(claims),
            target_source_id=target,
            literal_macros=tuple(sorted(lits.items())),
            speaker=raw.get("speaker") if isinstance(raw.get("speaker"), str) and raw.get("speaker") else None,
            **common,
        )
    if btype == "native":
        ids = raw.get("message_ids")
        if not isinstance(ids, list) or not all(isinstance(x, str) for x in ids):
            raise _invalid(source_id, "a native block needs message_ids: [string]", f"{path}.message_ids")
        return Block(message_ids=tuple(ids), **common)
    target = raw.get("source_id")
    if not isinstance(target, str) or not SOURCE_ID.fullmatch(target):
        raise _invalid(source_id, "a reference block needs a valid source_id", f"{path}.source_id")
    ids = raw.get("block_ids")
    if ids is not None and (not isinstance(ids, list) or not all(isinstance(x, str) for x in ids)):
        raise _invalid(source_id, "block_ids must be [string]", f"{path}.block_ids")
    group = raw.get("group")
    return Block(
        source_id=target,
        block_ids=tuple(ids) if ids is not None else None,
        group=group if isinstance(group, str) else None,
        honor_enabled=raw.get("honor_enabled") is not False,
        use_owner_rule=raw.get("use_owner_rule") is True,
        lock=raw.get("lock") is not False,
        **common,
    )


def validate_output(output: Any, source_id: str, dependencies: tuple[str, ...]) -> SourceOutput:
    """Check one source's output against protocol 1 and freeze it.

    Every cross-source id a block names must be the source itself or one of its declared
    ``dependencies`` (``ASSEMBLY_DEPENDENCY_UNDECLARED``): a source can only reach what it said it
    needs, which is what makes the job order and the record's provenance trustworthy.
    """
    try:
        shape: Any = (source_id, tuple(dependencies), _shape(output))
    except (TypeError, RecursionError):
        shape = None  # not plain JSON data, or deep: the text decides (and reports what is wrong)
    if shape is not None:
        known = VALIDATED_OUTPUTS.by_shape(shape)
        if known is not None:
            return known
    try:
        text = _json_text(output)
    except (TypeError, ValueError) as exc:
        raise _invalid(source_id, f"not JSON data ({exc})", "$") from None
    except RecursionError:
        raise _invalid(source_id, "output nested too deeply", "$") from None
    key = (source_id, tuple(dependencies), text)
    seen_before = VALIDATED_OUTPUTS.get(key)
    if seen_before is not None:
        # the same JSON text was validated before: its blocks stand, and the text is the record's
        found = SourceOutput(seen_before.blocks, seen_before.macros, seen_before.diagnostics, text)
        if shape is not None:
            VALIDATED_OUTPUTS.put_shape(shape, found)
        return found
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as exc:  # NaN and the like: the text is not JSON after all
        raise _invalid(source_id, f"not JSON data ({exc})", "$") from None
    except RecursionError:
        raise _invalid(source_id, "output nested too deeply", "$") from None
    size = len(text.encode("utf-8", "surrogatepass"))
    if not isinstance(data, dict) or not isinstance(data.get("blocks"), list):
        raise _invalid(source_id, "expected an object {blocks: [...], macros?, diagnostics?}", "$")
    if len(data["blocks"]) > SOURCE_MAX_BLOCKS:
        raise TemplateError(
            f"source {source_id!r} returned {len(data['blocks'])} blocks (at most {SOURCE_MAX_BLOCKS})",
            code="ASSEMBLY_SOURCE_OUTPUT_LIMIT",
        )
    if size > SOURCE_MAX_BYTES:
        raise TemplateError(
            f"source {source_id!r} returned {size} bytes (at most {SOURCE_MAX_BYTES})",
            code="ASSEMBLY_SOURCE_OUTPUT_LIMIT",
        )
    allowed = {source_id, *dependencies}
    blocks: list[Block] = []
    seen: set[str] = set()
    for i, raw in enumerate(data["blocks"]):
        block = _block(raw, i, source_id)
        if block.id in seen:
            raise _invalid(source_id, f"duplicate block id {block.id!r}", f"$.blocks[{i}].id")
        seen.add(block.id)
        named = [block.source_id, block.target_source_id, *(c[0] for c in block.claims)]
        for other in named:
            if other is not None and other not in allowed:
                raise TemplateError(
                    f"undeclared source dependency from {source_id!r} to {other!r} (block {block.id!r})",
                    code="ASSEMBLY_DEPENDENCY_UNDECLARED",
                    path=f"$.blocks[{i}]",
                )
        blocks.append(block)
    macros = data.get("macros") or {}
    if not isinstance(macros, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in macros.items()):
        raise _invalid(source_id, "macros maps names to block ids", "$.macros")
    diags: list[Diagnostic] = []
    for j, d in enumerate(data.get("diagnostics") or []):
        if not isinstance(d, dict) or not isinstance(d.get("code"), str):
            raise _invalid(source_id, "a diagnostic needs a string code", f"$.diagnostics[{j}]")
        severity = d.get("severity", "warning")
        diags.append(
            Diagnostic(
                d["code"],
                str(d.get("message", "")),
                severity=severity if severity in ("error", "warning", "info") else "warning",
                data={"source_id": source_id, **(d.get("data") if isinstance(d.get("data"), dict) else {})},
            )
        )
    validated = SourceOutput(tuple(blocks), MappingProxyType(dict(macros)), tuple(diags), text)
    VALIDATED_OUTPUTS.put(key, validated)
    if shape is not None:
        VALIDATED_OUTPUTS.put_shape(shape, validated)
    return validated
