"""The assembler: one request in, the exact message array out, with provenance and a record.

Stages, each in its own module: the registry resolves sources into blocks (:mod:`.registry`),
placement turns blocks into ordered nodes (:mod:`.claims`, :mod:`.placement`), depth items go in
last (:mod:`.depth`), the native layout and tool transactions are validated (:mod:`.tools`), the
logical byte limit is charged (:mod:`.limits`), system contributions are projected into complete
snapshots (:mod:`.projection`), and everything needed to reproduce the messages without calling
a source again is recorded (:mod:`.record`).

Preview and actual requests go through the same function; a preview leaves out the unsent input
and reports the system-update capability as unverified.
"""

from __future__ import annotations

import bisect
import json
import re
from itertools import islice
from operator import is_, itemgetter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..collector import bulk_allocation
from ..errors import Diagnostic, TemplateError
from .depth import insert_deferred
from .identity import content_hash
from .limits import DEFAULT_PROFILE_BYTES, MAX_PROFILE_BYTES, PROJECTION_MAX_BYTES, check_limit, check_profile_bytes
from .limits import logical_extra_bytes as _logical_bytes
from .placement import Node, Planner
from .projection import CAPABILITIES, Logical, project_system
from .registry import (
    CancellationToken,
    FrozenMap,
    ResolvedEntry,
    SourceRegistry,
    build_jobs,
    freeze_assets,
    resolve_jobs,
    resolve_jobs_async,
)
from .render import FrozenInfo, RenderOutput, RenderState
from .rules import Preset, parse_preset
from .snapshots import retain, validate_records
from .tools import check_topology

if TYPE_CHECKING:
    from ..store import SnapshotStore

__all__ = ["Assembler", "AssemblyRequest", "AssemblyResult", "canonical_message"]

MESSAGE_ROLES = ("system", "user", "assistant", "tool", "developer")
_KEY_ORDER = ("id", "role", "content", "name", "tool_calls", "tool_call_id")


def _bad_request(message: str, path: str) -> TemplateError:
    return TemplateError(f"{message} at {path}", code="ASSEMBLY_REQUEST_INVALID", path=path)


def _json_copy(value: Any, path: str) -> Any:
    """A detached JSON copy of ``value``; anything that is not JSON data is a request error."""
    if type(value) is str or value is None:
        return value  # immutable, and a JSON round trip gives back the same value
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise _bad_request(f"not JSON data ({exc})", path) from None
    except RecursionError:
        raise _bad_request("nested too deeply", path) from None


def canonical_message(raw: Any, path: str = "$") -> dict[str, Any]:
    """A native chat message in the pinned shape (fixed key order, known keys only).

    ``{"id", "role", "content", "name"?, "tool_calls"?: [{"id", "name", "arguments"}], "tool_call_id"?}``.
    The fixed key order is what makes byte counts and hashes reproducible.
    """
    if not isinstance(raw, Mapping):
        raise _bad_request("a message must be an object", path)
    mid, role = raw.get("id"), raw.get("role")
    if not isinstance(mid, str) or not mid:
        raise _bad_request("message id must be a non-empty string", f"{path}.id")
    if role not in MESSAGE_ROLES:
        raise _bad_request(f"message role must be one of {', '.join(MESSAGE_ROLES)}", f"{path}.role")
    content = raw.get("content")
    if content is not None and not isinstance(content, (str, list)):
        raise _bad_request("message content must be a string, a list of parts or null", f"{path}.content")
    if isinstance(content, list):
        for j, part in enumerate(content):
            if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
                raise _bad_request("a content part is an object with a string type", f"{path}.content[{j}]")
    out: dict[str, Any] = {"id": mid, "role": role, "content": _json_copy(content, f"{path}.content")}
    if raw.get("name") is not None:
        if not isinstance(raw["name"], str):
            raise _bad_request("message name must be a string", f"{path}.name")
        out["name"] = raw["name"]
    calls = raw.get("tool_calls")
    if calls is not None:
        if role != "assistant" or not isinstance(calls, list):
            raise _bad_request("tool_calls is a list on an assistant message", f"{path}.tool_calls")
        norm = []
        for j, c in enumerate(calls):
            if not isinstance(c, Mapping) or not isinstance(c.get("id"), str) or not c["id"]:
                raise _bad_request("a tool call needs a string id", f"{path}.tool_calls[{j}]")
            norm.append({k: _json_copy(c[k], f"{path}.tool_calls[{j}].{k}") for k in ("id", "name", "arguments") if k in c})
        out["tool_calls"] = norm
    if role == "tool":
        if not isinstance(raw.get("tool_call_id"), str):
            raise _bad_request("a tool message needs a string tool_call_id", f"{path}.tool_call_id")
        out["tool_call_id"] = raw["tool_call_id"]
    return out


@dataclass(frozen=True, slots=True)
class AssemblyRequest:
    """Everything one assembly reads. Build it directly or with :meth:`from_dict`.

    ``messages`` are the native messages (system instructions, history, the current input, tool
    calls and results); ``input_ids`` the ids of this step's input. ``system_prompt_update`` is the
    model capability: ``leading-only`` (default) or ``in-history``.
    """

    preset: Preset
    messages: tuple[dict[str, Any], ...] = ()
    input_ids: tuple[str, ...] = ()
    assets: Mapping[str, Any] = field(default_factory=dict)
    session_id: str | None = None
    turn: int | None = None
    step: int | None = None
    preview: bool = False
    system_prompt_update: str = "leading-only"
    max_profile_bytes: int = DEFAULT_PROFILE_BYTES
    max_projection_bytes: int = PROJECTION_MAX_BYTES
    seed: int = 0
    #: retained snapshot records of the previous request (``result.snapshots``); ``None`` = none,
    #: or, with an :class:`Assembler` store and a ``session_id``, the store's current records
    snapshots: Sequence[Mapping[str, Any]] | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AssemblyRequest:
        """Read a request from JSON-like data (``preset`` may be a dict or a :class:`Preset`)."""
        if not isinstance(data, Mapping):
            raise _bad_request("a request must be an object", "$")
        preset = data.get("preset")
        preset = preset if isinstance(preset, Preset) else parse_preset(preset)
        raw_messages = data.get("messages", [])
        if not isinstance(raw_messages, Sequence) or isinstance(raw_messages, str):
            raise _bad_request("messages must be a list", "$.messages")
        messages = tuple(canonical_message(m, f"$.messages[{i}]") for i, m in enumerate(raw_messages))
        input_ids = data.get("input_ids", ())
        if not isinstance(input_ids, Sequence) or isinstance(input_ids, str) or not all(isinstance(x, str) for x in input_ids):
            raise _bad_request("input_ids must be a list of message ids", "$.input_ids")
        assets = data.get("assets") or {}
        if not isinstance(assets, Mapping):
            raise _bad_request("assets must be an object", "$.assets")
        known = {f for f in cls.__dataclass_fields__} - {"preset", "messages", "input_ids", "assets"}
        extra = {k: data[k] for k in known if k in data}
        return cls(preset, messages, tuple(input_ids), assets, **extra)

    def validated(self) -> AssemblyRequest:
        """Check ids and options once, at the boundary."""
        seen: set[str] = set()
        for i, m in enumerate(self.messages):
            if m["id"] in seen:
                raise _bad_request(f"duplicate message id {m['id']!r}", f"$.messages[{i}].id")
            seen.add(m["id"])
        for j, x in enumerate(self.input_ids):
            if x not in seen:
                raise _bad_request(f"input id {x!r} is not a message of this request", f"$.input_ids[{j}]")
        if not isinstance(self.preview, bool):
            raise _bad_request("preview must be a boolean", "$.preview")
        for name in ("turn", "step"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise _bad_request(f"{name} must be an integer or null", f"$.{name}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise _bad_request("seed must be an integer", "$.seed")
        if self.session_id is not None and not isinstance(self.session_id, str):
            raise _bad_request("session_id must be a string or null", "$.session_id")
        if self.system_prompt_update not in CAPABILITIES:
            raise _bad_request(f"system_prompt_update must be one of {', '.join(CAPABILITIES)}", "$.system_prompt_update")
        check_limit(self.max_profile_bytes, name="max_profile_bytes", maximum=MAX_PROFILE_BYTES)
        check_limit(self.max_projection_bytes, name="max_projection_bytes", maximum=1 << 62)
        from .native import check_native_preset

        check_native_preset(self.preset)
        return self


@dataclass(slots=True)
class AssemblyResult:
    """The assembled request. ``messages`` is exactly what is sent."""

    messages: list[dict[str, Any]]
    nodes: list[dict[str, Any]]
    system_projection: dict[str, Any]
    logical_extra_bytes: int
    extra_bytes: int
    diagnostics: list[Diagnostic]
    sources: list[dict[str, Any]]
    draws: list[dict[str, Any]]
    record: dict[str, Any]
    #: the array before system projection (contributions still separate), for inspection
    logical_messages: list[dict[str, Any]] = field(default_factory=list)
    #: retained snapshot records to hand to the next request (see :mod:`.snapshots`)
    snapshots: list[dict[str, Any]] = field(default_factory=list)
    #: ``(message id, content, character ranges)`` per message, from which :attr:`provenance` is built
    span_source: list[tuple[str, str, list[tuple[int, int, dict[str, Any]]]]] = field(
        default_factory=list, repr=False, compare=False
    )
    _provenance: list[dict[str, Any]] | None = field(default=None, repr=False, compare=False)

    @property
    def provenance(self) -> list[dict[str, Any]]:
        """Span provenance of every message: ``{"index", "message_id", "spans": [{"start", "end",
        rule/source/block/resource/field or macro/variable fields}]}``, offsets in UTF-16 units.

        Built from :attr:`span_source` on first access (a host that only sends the messages does
        not pay for one dict per span); the same list every time after. The cyclic collector is
        paused meanwhile, as during the assembly: the thousands of acyclic span dicts would
        otherwise set off collections walking every live object.
        """
        if self._provenance is None:
            with bulk_allocation():
                self._provenance = build_provenance(self.span_source)
        return self._provenance

    def to_dict(self) -> dict[str, Any]:
        """The JSON form printed by ``tavernbox assemble --json``."""
        return {
            "messages": self.messages,
            "nodes": self.nodes,
            "diagnostics": [d.to_dict() for d in self.diagnostics],
            "system_projection": self.system_projection,
            "logical_extra_bytes": self.logical_extra_bytes,
            "extra_bytes": self.extra_bytes,
            "sources": self.sources,
            "draws": self.draws,
            "provenance": self.provenance,
            "record": self.record,
            "logical_messages": self.logical_messages,
            "snapshots": self.snapshots,
        }


_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


#: ``id(info) -> (info, JSON template)`` for shared read-only span infos (see :func:`build_provenance`)
_DESCRIBED: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}
_DESCRIBED_MAX = 16384


#: ``text -> (ranges, infos, span dicts)`` for long messages whose infos are all shared and
#: read-only (see :func:`build_provenance`); bounded by entries and by characters and spans held
_WHOLE: dict[str, tuple[list[tuple[int, int, dict[str, Any]]], tuple[dict[str, Any], ...], tuple[dict[str, Any], ...]]] = {}
_WHOLE_MIN = 32
_WHOLE_MAX = 256
_WHOLE_HELD_MAX = 16 << 20
_whole_held = 0
_third = itemgetter(2)
_RECORD_ORDER = itemgetter("start", "id")


def _remember_whole(text: str, spans: Sequence[tuple[int, int, dict[str, Any]]], built: list[dict[str, Any]]) -> None:
    """Keep a long message's span dicts for the next build, when every info is a shared
    :class:`FrozenInfo` without a ``reads`` list (a list in a copied dict would be shared)."""
    global _whole_held
    infos = tuple(map(_third, spans))
    distinct = {id(info): info for info in infos}.values()
    if not all(type(info) is FrozenInfo and "reads" not in info for info in distinct):
        return
    held = len(text) + 8 * len(built)  # characters of text, and (about) the dicts' share
    if len(_WHOLE) >= _WHOLE_MAX or _whole_held + held > _WHOLE_HELD_MAX:
        _WHOLE.clear()
        _whole_held = 0
    # private copies: the built dicts and the ranges' list belong to the caller
    _WHOLE[text] = (list(spans), infos, tuple(map(dict, built)))
    _whole_held += held


def build_provenance(
    span_source: Sequence[tuple[str, str, Sequence[tuple[int, int, dict[str, Any]]]]],
) -> list[dict[str, Any]]:
    """The JSON form of span provenance: one entry per message, spans with UTF-16 offsets."""
    provenance = []
    # one info dict is shared by every span of a contribution (and every snapshot repeating it, and
    # the same cached prompt request after request): its JSON template (null fields dropped) is
    # computed once and kept in ``_DESCRIBED``, checked by identity (each entry holds its info
    # alive, so an id cannot be reused). A template with a ``reads`` list is made per build, so a
    # caller changing one result's list never reaches another's.
    described: dict[int, dict[str, Any]] = {}
    keep: list[dict[str, Any]] = []

    def fields(info: dict[str, Any]) -> dict[str, Any]:
        seen = _DESCRIBED.get(id(info))
        if seen is not None and seen[0] is info:
            described[id(info)] = seen[1]
            return seen[1]
        keep.append(info)
        # ``start``/``end`` come first (placeholders here): ``dict(template, start=..., end=...)``
        # then copies the template and replaces two values, ~4x faster than ``{**info}`` per span
        found = described[id(info)] = {"start": 0, "end": 0, **{k: v for k, v in info.items() if v is not None}}
        if "reads" in found:
            found["reads"] = [dict(r) for r in found["reads"]]
        elif isinstance(info, FrozenInfo):  # shared and immutable: safe to describe once for all
            if len(_DESCRIBED) >= _DESCRIBED_MAX:
                _DESCRIBED.clear()
            _DESCRIBED[id(info)] = (info, found)
        return found

    known = described.get
    for i, (message_id, text, spans) in enumerate(span_source):
        prefix = getattr(spans, "prefix", None)
        if prefix is not None and 0 <= prefix[0] < i:
            # a snapshot repeating an earlier one whole (same text and ranges up to there, so the
            # same UTF-16 offsets): copies of that message's dicts, then the new ranges
            start = prefix[1]
            out_spans = list(map(dict, islice(provenance[prefix[0]]["spans"], start)))
        else:
            start = 0
            out_spans = []
        if start:
            spans = spans[start:]
        if text.isascii() or not _ASTRAL.search(text):  # offsets are already UTF-16 offsets
            if len(spans) == 1:  # most messages: one contribution's text (no comprehension to call)
                s, e, info = spans[0]
                out_spans.append(dict(known(id(info)) or fields(info), start=s, end=e))
            elif len(spans) < _WHOLE_MIN:
                out_spans += [dict(known(id(info)) or fields(info), start=s, end=e) for s, e, info in spans]
            else:
                # a long message (a system snapshot) usually has the same text, ranges and shared
                # infos request after request: copies of the dicts built last time, checked by the
                # ranges and by the identity of every info (the entry holds them alive)
                seen = _WHOLE.get(text)
                if seen is not None and seen[0] == spans and all(map(is_, seen[1], map(_third, spans))):
                    out_spans += map(dict, seen[2])
                else:
                    built = [dict(known(id(info)) or fields(info), start=s, end=e) for s, e, info in spans]
                    out_spans += built
                    _remember_whole(text, spans, built)
        else:
            utf16 = _utf16_converter(text)
            out_spans += [dict(known(id(info)) or fields(info), start=utf16(s), end=utf16(e)) for s, e, info in spans]
        provenance.append({"index": i, "message_id": message_id, "spans": out_spans})
    return provenance


def _utf16_converter(text: str) -> Callable[[int], int]:
    """Character offset -> UTF-16 offset for ``text``, in O(log n) per call (one scan per message)."""
    astral = [m.start() for m in _ASTRAL.finditer(text)]
    if not astral:
        return lambda offset: offset
    return lambda offset: offset + bisect.bisect_left(astral, offset)


def _macro_context(request: AssemblyRequest, native: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The macro-engine context for Tavern text, from the request's assets (chara_card_v2 names)."""
    assets = request.assets
    card = assets.get("character") or {}
    card = card.get("data", card) if isinstance(card, Mapping) else {}
    persona = assets.get("persona") or {}
    persona = persona if isinstance(persona, Mapping) else {"description": str(persona)}
    ctx: dict[str, Any] = {
        "user": assets.get("user") or persona.get("name") or "User",
        "char": card.get("nickname") or card.get("name") or "Assistant",
        "persona": persona.get("description", ""),
        "character": {k: v for k, v in card.items() if k != "extensions"},
        "chat": [
            {"role": m["role"], "name": m.get("name", ""), "content": m["content"]}
            for m in native
            if m["role"] in ("user", "assistant", "system") and isinstance(m["content"], str)
        ],
        "seed": request.seed,
    }
    extra = assets.get("macro_context")
    if isinstance(extra, Mapping):
        ctx.update(_json_copy(extra, "$.assets.macro_context"))
    return ctx


def compose(
    preset: Preset,
    entries: list[ResolvedEntry],
    native: list[dict[str, Any]],
    input_ids: tuple[str, ...],
    *,
    preview: bool,
    system_prompt_update: str,
    max_profile_bytes: int,
    max_projection_bytes: int,
    early_diagnostics: list[Diagnostic],
    render_call: Callable[[str, str, Any], RenderOutput],
    render_notices: Callable[[], list[Diagnostic]],
    snapshots: Sequence[Mapping[str, Any]] | None = None,
) -> tuple[AssemblyResult, list[Diagnostic]]:
    """Everything after resolution: placement, depth, validation, limits, projection, provenance.

    Shared by :meth:`Assembler.assemble` and :func:`replay`, so a replay runs the same code on the
    recorded source outputs and recorded renders. Returns the result without its record.
    """
    planner = Planner(preset, entries, native, render_call)
    rows = planner.place()
    flat: list[tuple[Node, int]] = [(n, k) for n in rows for k in range(len(n.messages))]
    insert_deferred(flat, planner.deferred, in_history=preset.placement == "st")
    retention = retain(
        flat,
        validate_records(snapshots),
        {e.rule.id for e in entries if e.rule.lifetime == "snapshot" and (e.rule.enabled or e.rule.synthetic)},
        native[-1]["id"] if native else None,
    )
    flat = retention.flat
    logical_messages = [n.messages[k] for n, k in flat]
    native_flags = [n.native for n, _ in flat]
    _check_natives(flat, native, planner.required)
    check_topology(logical_messages)
    logical_bytes = _logical_bytes(logical_messages, native_flags)
    check_profile_bytes(logical_bytes, max_profile_bytes)
    projection = project_system(
        [Logical(n.messages[k], n.native, n.spans[k]) for n, k in flat],
        max_bytes=max_projection_bytes,
        system_prompt_update=system_prompt_update,
        preview=preview,
    )
    messages = projection.messages
    diagnostics = [*early_diagnostics]
    for e in entries:
        diagnostics.extend(e.output.diagnostics)
    diagnostics.extend(render_notices())
    diagnostics.extend(planner.diagnostics)
    diagnostics.extend(retention.diagnostics)
    diagnostics.extend(projection.diagnostics)
    if not messages:
        raise TemplateError("the assembled request has no messages", code="ASSEMBLY_EMPTY")
    if all(m["role"] == "system" for m in messages):
        diagnostics.append(
            Diagnostic(
                "ASSEMBLY_SYSTEM_ONLY",
                "the request holds only system messages; some providers send no chat messages at all then",
            )
        )
    diagnostics.extend(_greeting_after_input(flat, input_ids))
    nodes = _node_records(flat, projection.index_map, messages)
    # (message id, content text, character ranges) per message, taken now: the message dicts
    # belong to the caller once returned, and provenance must describe what was assembled
    span_source = [
        (m["id"], m["content"] if isinstance(m.get("content"), str) else "", spans)
        for m, spans in zip(messages, projection.spans, strict=True)
    ]
    result = AssemblyResult(
        messages=messages,
        nodes=nodes,
        system_projection=projection.metadata(),
        logical_extra_bytes=logical_bytes,
        extra_bytes=projection.extra_bytes,
        diagnostics=diagnostics,
        sources=[e.descriptor.to_dict() for e in entries],
        draws=[],
        record={},
        logical_messages=logical_messages,
        snapshots=retention.records,
        span_source=span_source,
    )
    return result, diagnostics


def _greeting_after_input(flat: list[tuple[Node, int]], input_ids: tuple[str, ...]) -> list[Diagnostic]:
    """``GREETING_AFTER_INPUT`` when an assistant greeting lands after the first input message.

    A greeting is meant to precede the conversation; an explicit depth may still put it later,
    which most providers accept but some reject (an assistant turn after the user's input).
    """
    inputs = set(input_ids)
    first_input = next((i for i, (n, k) in enumerate(flat) if n.native and n.messages[k]["id"] in inputs), None)
    if first_input is None:
        return []
    for node, _k in flat[first_input + 1:]:  # only what follows the input
        if node.source_id == "character" and node.block_id == "greeting" and node.role == "assistant":
            return [Diagnostic("GREETING_AFTER_INPUT", "the character greeting is placed after the current input",
                               data={"node": node.key})]
    return []


def _check_natives(flat: list[tuple[Node, int]], native: list[dict[str, Any]], required: list[str]) -> None:
    """Each emitted native message exactly once; native system boundaries kept."""
    placed = [n.messages[k]["id"] for n, k in flat if n.native]
    counts: dict[str, int] = {}
    for mid in placed:
        counts[mid] = counts.get(mid, 0) + 1
    for mid in dict.fromkeys(required):
        if counts.get(mid, 0) != 1:
            raise TemplateError(
                f"native message {mid!r} appears {counts.get(mid, 0)} times: each enabled native message must appear "
                "exactly once",
                code="ASSEMBLY_NATIVE_MISSING",
            )
    included = set(placed)
    roles = {m["id"]: m["role"] for m in native}

    def before_sets(order: list[str]) -> dict[str, frozenset[str]]:
        seen: set[str] = set()
        out: dict[str, frozenset[str]] = {}
        for mid in order:
            if mid not in included:
                continue
            if roles[mid] == "system":
                out[mid] = frozenset(seen)
            else:
                seen.add(mid)
        return out

    original = before_sets([m["id"] for m in native])
    final = before_sets(placed)
    for mid, before in final.items():
        if original.get(mid) != before:
            raise TemplateError(
                f"the layout moves native messages across the native system update {mid!r}",
                code="ASSEMBLY_NATIVE_SYSTEM_ORDER",
            )


def _node_records(flat: list[tuple[Node, int]], index_map: list[int], messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per contiguous run of a node; later runs of a split node get ``:split:<offset>``."""
    seen: set[int] = set()
    out: list[dict[str, Any]] = []
    # one pass: a record is written for a run's first message (most runs are one message of a
    # text block); the runs of several messages are completed afterwards
    longer: list[tuple[dict[str, Any], list[int]]] = []
    idxs: list[int] | None = None
    previous = None
    for i, (node, offset) in enumerate(flat):
        if node is previous:
            if idxs is None:
                idxs = [i - 1]
                longer.append((out[-1], idxs))
            idxs.append(i)
            continue
        previous, idxs = node, None
        nid = id(node)
        first = nid not in seen
        seen.add(nid)
        start = index_map[i]
        out.append(
            {
                "id": node.key if first else f"{node.key}:split:{offset}",
                "rule_id": node.rule_id,
                "source_id": node.source_id,
                "plugin_id": node.plugin_id,
                "block_id": node.block_id,
                "name": node.name,
                "role": node.role,
                "native": node.native,
                "hash": node.hash,
                "depth": node.depth,
                "order": node.order,
                "lifetime": node.lifetime,
                "stability": node.stability,
                "resource_id": node.resource_id,
                "field": node.field,
                "locked": node.locked,
                "lock_reason": node.lock_reason,
                "adjusted_for_tools": node.adjusted_for_tools,
                "children": node.children,
                "input_message_ids": [node.messages[offset]["id"]],
                "request_message_ids": [messages[start]["id"]],
                "start": start,
                "count": 1,
            }
        )
    for record, run in longer:
        out_idx = [index_map[i] for i in run]
        start = min(out_idx)
        record["start"], record["count"] = start, max(out_idx) - start + 1
        record["request_message_ids"] = list(dict.fromkeys(messages[j]["id"] for j in out_idx))
        record["input_message_ids"] = [flat[i][0].messages[flat[i][1]]["id"] for i in run]
    out.sort(key=_RECORD_ORDER)
    return out


class Assembler:
    """Assemble requests from the sources of one registry.

    ``Assembler(registry).assemble(request)``: ``request`` is an :class:`AssemblyRequest` or its
    dict form. Registrations are captured once per request.
    """

    def __init__(self, registry: SourceRegistry | None = None, store: SnapshotStore | None = None) -> None:
        self.registry = registry if registry is not None else SourceRegistry.with_builtins()
        #: where retained snapshot records persist between requests of one ``session_id``: read
        #: when a request brings no ``snapshots`` of its own, written after every non-preview
        #: assembly (a conflicting concurrent write fails with ``SNAPSHOT_STORE_CONFLICT``)
        self.store = store

    def _prepare(
        self, request: AssemblyRequest | Mapping[str, Any]
    ) -> tuple[AssemblyRequest, list[Any], list[dict[str, Any]], list[Diagnostic], tuple[str, ...]]:
        req = request if isinstance(request, AssemblyRequest) else AssemblyRequest.from_dict(request)
        req = req.validated()
        native = list(req.messages)
        input_ids = req.input_ids
        if req.preview:  # a preview never includes the unsent input
            unsent = set(input_ids)
            native = [m for m in native if m["id"] not in unsent]
            input_ids = ()
        jobs, diags = build_jobs(req.preset, self.registry.capture())
        return req, jobs, native, diags, input_ids

    def _context(self, req: AssemblyRequest, native: list[dict[str, Any]], input_ids: tuple[str, ...], token: CancellationToken) -> Any:
        """The frozen request context handed to every resolver.

        The assets are detached from the caller through JSON (which also checks they are JSON
        data) and shared between requests while unchanged (:func:`freeze_assets`); everything is
        frozen lazily, so a source pays only for what it reads.
        """
        try:
            assets = freeze_assets(req.assets)
        except (TypeError, ValueError) as exc:
            raise _bad_request(f"assets must be JSON data ({exc})", "$.assets") from None
        except RecursionError:
            raise _bad_request("assets are nested too deeply", "$.assets") from None
        return FrozenMap({
            "session_id": req.session_id,
            "turn": None if req.preview else req.turn,
            "step": None if req.preview else req.step,
            "preview": req.preview,
            "preset": req.preset.to_dict(),
            "assets": assets,
            "native_messages": native,
            "input_ids": list(input_ids),
            "token": token,
        })

    def assemble(self, request: AssemblyRequest | Mapping[str, Any], token: CancellationToken | None = None) -> AssemblyResult:
        """Assemble one request synchronously (asynchronous sources need :meth:`assemble_async`).

        The cyclic garbage collector is paused meanwhile (``bulk_allocation``): an assembly builds
        thousands of small acyclic dicts and tuples, and each allocation burst would otherwise walk
        every live object again (a tenth of the time with a large preset cached)."""
        token = token or CancellationToken()
        with bulk_allocation():
            req, jobs, native, diags, input_ids = self._prepare(request)
            entries = resolve_jobs(jobs, self._context(req, native, input_ids, token), token, req.preset)
            return self._finish(req, entries, native, input_ids, diags, token)

    async def assemble_async(
        self, request: AssemblyRequest | Mapping[str, Any], token: CancellationToken | None = None
    ) -> AssemblyResult:
        """Assemble one request, awaiting asynchronous resolvers in job order."""
        token = token or CancellationToken()
        req, jobs, native, diags, input_ids = self._prepare(request)
        entries = await resolve_jobs_async(jobs, self._context(req, native, input_ids, token), token, req.preset)
        return self._finish(req, entries, native, input_ids, diags, token)

    def _finish(
        self,
        req: AssemblyRequest,
        entries: list[ResolvedEntry],
        native: list[dict[str, Any]],
        input_ids: tuple[str, ...],
        diags: list[Diagnostic],
        token: CancellationToken,
    ) -> AssemblyResult:
        from .record import build_record

        loaded_revision: int | None = None
        prior = req.snapshots
        if prior is None and self.store is not None and req.session_id is not None:
            stored = self.store.load(req.session_id)
            prior, loaded_revision = list(stored.records), stored.revision
        prior_records = validate_records(prior)
        state = RenderState(macro_context=_macro_context(req, native))
        renders: list[dict[str, Any]] = []

        def render_call(key: str, text: str, renderer: Any) -> RenderOutput:
            token.raise_if_cancelled()
            out = renderer.render(text, state)
            entry = {
                "key": key,
                "input_hash": out.input_hash or content_hash(text),
                "text": out.text,
                "draws": out.draws,
                "diagnostics": [_diag_dict(d) for d in out.diagnostics] if out.diagnostics else [],
            }
            if out.segments:
                entry["segments"] = out.segments  # (start, end, info) triples: JSON arrays when written
            renders.append(entry)
            return out

        result, _ = compose(
            req.preset,
            entries,
            native,
            input_ids,
            preview=req.preview,
            system_prompt_update=req.system_prompt_update,
            max_profile_bytes=req.max_profile_bytes,
            max_projection_bytes=req.max_projection_bytes,
            early_diagnostics=diags,
            render_call=render_call,
            render_notices=lambda: list(state.notices),
            snapshots=prior_records,
        )
        result.draws = [{"key": r["key"], "draws": r["draws"]} for r in renders if r["draws"]]
        result.record = build_record(
            req, entries, native, input_ids, diags, renders, list(state.notices), result, snapshots=prior_records
        )
        if self.store is not None and req.session_id is not None and not req.preview:
            self.store.save(req.session_id, result.snapshots, expected_revision=loaded_revision)
        return result


def _diag_dict(d: Diagnostic) -> dict[str, Any]:
    out: dict[str, Any] = {"code": d.code, "message": d.message, "severity": d.severity}
    if d.span is not None:
        out["start"], out["end"] = d.span.start, d.span.end
    if d.path is not None:
        out["path"] = d.path
    if d.data:
        out["data"] = json.loads(json.dumps(d.data, default=str))
    return out
