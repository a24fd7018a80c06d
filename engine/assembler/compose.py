"""Composition: a request's resolved entries -> the exact message array, with provenance.

Everything after resolution happens here, in one function (:func:`compose`): placement
(:mod:`.claims`, :mod:`.placement`), depth items last (:mod:`.depth`), the native layout and tool
transactions (:mod:`.tools`), the logical byte limit (:mod:`.limits`), system contributions
projected into complete snapshots (:mod:`.projection`) and the provenance of every character.
A live assembly (:class:`~.assemble.Assembler`) and a replay (:func:`~.record.replay`) both call it,
so a replay rebuilds the messages exactly as the assembly did; it holds the request and result
types they share.
"""

from __future__ import annotations

import bisect
import json
import re
from itertools import islice
from operator import is_, itemgetter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..collector import bulk_allocation
from ..errors import Diagnostic, TemplateError
from .depth import insert_deferred
from .limits import DEFAULT_PROFILE_BYTES, MAX_PROFILE_BYTES, PROJECTION_MAX_BYTES, check_limit, check_profile_bytes
from .limits import logical_extra_bytes as _logical_bytes
from .node import Node
from .placement import Planner
from .projection import CAPABILITIES, Logical, project_system
from .registry import ResolvedEntry
from .render import FrozenInfo, RenderOutput
from .rules import Preset, parse_preset
from .snapshots import retain, validate_records
from .tools import check_topology

__all__ = ["AssemblyRequest", "AssemblyResult", "build_provenance", "canonical_message", "compose"]

MESSAGE_ROLES = ("system", "user", "assistant", "tool", "developer")
_KEY_ORDER = ("id", "role", "content", "name", "tool_calls", "tool_call_id")


def bad_request(message: str, path: str) -> TemplateError:
    return TemplateError(f"{message} at {path}", code="ASSEMBLY_REQUEST_INVALID", path=path)


def json_copy(value: Any, path: str) -> Any:
    """A detached JSON copy of ``value``; anything that is not JSON data is a request error."""
    if type(value) is str or value is None:
        return value  # immutable, and a JSON round trip gives back the same value
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise bad_request(f"not JSON data ({exc})", path) from None
    except RecursionError:
        raise bad_request("nested too deeply", path) from None


def canonical_message(raw: Any, path: str = "$") -> dict[str, Any]:
    """A native chat message in the pinned shape (fixed key order, known keys only).

    ``{"id", "role", "content", "name"?, "tool_calls"?: [{"id", "name", "arguments"}], "tool_call_id"?}``.
    The fixed key order is what makes byte counts and hashes reproducible.
    """
    if not isinstance(raw, Mapping):
        raise bad_request("a message must be an object", path)
    mid, role = raw.get("id"), raw.get("role")
    if not isinstance(mid, str) or not mid:
        raise bad_request("message id must be a non-empty string", f"{path}.id")
    if role not in MESSAGE_ROLES:
        raise bad_request(f"message role must be one of {', '.join(MESSAGE_ROLES)}", f"{path}.role")
    content = raw.get("content")
    if content is not None and not isinstance(content, (str, list)):
        raise bad_request("message content must be a string, a list of parts or null", f"{path}.content")
    if isinstance(content, list):
        for j, part in enumerate(content):
            if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
                raise bad_request("a content part is an object with a string type", f"{path}.content[{j}]")
    out: dict[str, Any] = {"id": mid, "role": role, "content": json_copy(content, f"{path}.content")}
    if raw.get("name") is not None:
        if not isinstance(raw["name"], str):
            raise bad_request("message name must be a string", f"{path}.name")
        out["name"] = raw["name"]
    calls = raw.get("tool_calls")
    if calls is not None:
        if role != "assistant" or not isinstance(calls, list):
            raise bad_request("tool_calls is a list on an assistant message", f"{path}.tool_calls")
        norm = []
        for j, c in enumerate(calls):
            if not isinstance(c, Mapping) or not isinstance(c.get("id"), str) or not c["id"]:
                raise bad_request("a tool call needs a string id", f"{path}.tool_calls[{j}]")
            norm.append({k: json_copy(c[k], f"{path}.tool_calls[{j}].{k}") for k in ("id", "name", "arguments") if k in c})
        out["tool_calls"] = norm
    if role == "tool":
        if not isinstance(raw.get("tool_call_id"), str):
            raise bad_request("a tool message needs a string tool_call_id", f"{path}.tool_call_id")
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
            raise bad_request("a request must be an object", "$")
        preset = data.get("preset")
        preset = preset if isinstance(preset, Preset) else parse_preset(preset)
        raw_messages = data.get("messages", [])
        if not isinstance(raw_messages, Sequence) or isinstance(raw_messages, str):
            raise bad_request("messages must be a list", "$.messages")
        messages = tuple(canonical_message(m, f"$.messages[{i}]") for i, m in enumerate(raw_messages))
        input_ids = data.get("input_ids", ())
        if not isinstance(input_ids, Sequence) or isinstance(input_ids, str) or not all(isinstance(x, str) for x in input_ids):
            raise bad_request("input_ids must be a list of message ids", "$.input_ids")
        assets = data.get("assets") or {}
        if not isinstance(assets, Mapping):
            raise bad_request("assets must be an object", "$.assets")
        known = {f for f in cls.__dataclass_fields__} - {"preset", "messages", "input_ids", "assets"}
        extra = {k: data[k] for k in known if k in data}
        return cls(preset, messages, tuple(input_ids), assets, **extra)

    def validated(self) -> AssemblyRequest:
        """Check ids and options once, at the boundary."""
        seen: set[str] = set()
        for i, m in enumerate(self.messages):
            if m["id"] in seen:
                raise bad_request(f"duplicate message id {m['id']!r}", f"$.messages[{i}].id")
            seen.add(m["id"])
        for j, x in enumerate(self.input_ids):
            if x not in seen:
                raise bad_request(f"input id {x!r} is not a message of this request", f"$.input_ids[{j}]")
        if not isinstance(self.preview, bool):
            raise bad_request("preview must be a boolean", "$.preview")
        for name in ("turn", "step"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise bad_request(f"{name} must be an integer or null", f"$.{name}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise bad_request("seed must be an integer", "$.seed")
        if self.session_id is not None and not isinstance(self.session_id, str):
            raise bad_request("session_id must be a string or null", "$.session_id")
        if self.system_prompt_update not in CAPABILITIES:
            raise bad_request(f"system_prompt_update must be one of {', '.join(CAPABILITIES)}", "$.system_prompt_update")
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
    #: the array before system projection (contributions still separate), for inspection
    logical_messages: list[dict[str, Any]] = field(default_factory=list)
    #: retained snapshot records to hand to the next request (see :mod:`.snapshots`)
    snapshots: list[dict[str, Any]] = field(default_factory=list)
    #: ``(message id, content, character ranges)`` per message, from which :attr:`provenance` is built
    span_source: list[tuple[str, str, list[tuple[int, int, dict[str, Any]]]]] = field(
        default_factory=list, repr=False, compare=False
    )
    _provenance: list[dict[str, Any]] | None = field(default=None, repr=False, compare=False)
    #: the character ranges of each of :attr:`logical_messages` (before projection), for callers
    #: that send the logical array themselves (SillyTavern's request) and need its provenance
    logical_spans: list[Any] = field(default_factory=list, repr=False, compare=False)
    _record: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    #: the chat-local and global variables as the renders left them (``{"local": ..., "global": ...}``; ``global``
    #: is ``None`` when no render changed the given ones): SillyTavern's ``{{setvar}}`` family's writes
    variables: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    #: builds :attr:`record` on first read (set by the assembler; see :attr:`record`)
    record_builder: Callable[[], dict[str, Any]] | None = field(default=None, repr=False, compare=False)

    @property
    def record(self) -> dict[str, Any]:
        """The replay record (:mod:`.record`): built on first read from what the assembly kept
        (its messages as they were assembled, the sources' outputs as JSON text), so a host that
        only sends the messages does not hash them and copy every output; the same dict after."""
        if self._record is None:
            builder, self.record_builder = self.record_builder, None
            self._record = builder() if builder is not None else {}
        return self._record

    @record.setter
    def record(self, value: dict[str, Any]) -> None:
        self._record, self.record_builder = value, None

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
#: bytes one kept span dict costs (a dict of 4-9 keys, its two offsets): what ``_WHOLE_HELD_MAX`` counts
_SPAN_DICT_BYTES = 320
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
    held = len(text) + _SPAN_DICT_BYTES * len(built)  # characters of text, and the copied dicts
    if held > _WHOLE_HELD_MAX // 4:
        # one message of tens of thousands of spans (a hostile prompt of repeated macros): a copy
        # would double the provenance's memory for a build that is linear anyway
        return
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
    provenance: list[dict[str, Any]] = []
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
        logical_messages=logical_messages,
        snapshots=retention.records,
        span_source=span_source,
        logical_spans=[n.spans[k] for n, k in flat],
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
