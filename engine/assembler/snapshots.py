"""Retained snapshots: rules with lifetime ``snapshot`` keep earlier copies where they first appeared.

A ``request`` rule is rebuilt on every request; a ``snapshot`` rule is *retained*: the first time a
node (identity ``<rule id>:<block id>``) appears, a copy of its messages is recorded together with
its anchor (the message it followed). Later requests reuse that copy at the same anchor instead of
placing the node again, and append a new copy (at the node's new position) only when the content
changes. So a memory that moves from "inn" to "dock" reads ``[inn]``, then ``[inn, dock]``, then
``[inn, dock]`` again with no third copy: the earlier text stays where the conversation saw it, which
keeps the prompt prefix stable (provider caches) and the history honest. Snapshot text is never
rewritten.

Per request (:func:`retain`):

1. Prior records survive only while their rule is still an active snapshot rule: enabled (or the
   implicit rule of an unlisted dependency), resolved, lifetime ``snapshot``. Disabling the rule,
   switching it to ``request``, or losing its source drops every old copy from this and later
   requests (the old records stay in old assembly records and the store's history).
2. Snapshot nodes are taken out of the walk. A node whose hash differs from the *last* record of
   its identity (or that has none) becomes a new record anchored after the last message emitted so
   far (``after_id``; ``None`` = the start) and after the last native message emitted so far
   (``native_after_id``).
3. An identity with records but no node this request (its content vanished) gets one "empty"
   record (once): a system notice saying its earlier snapshots are no longer current, anchored
   after the request's last native message.
4. Every record is inserted after its anchor, in record order. An anchor no longer present falls
   back to the native anchor (``SNAPSHOT_ANCHORED_TO_NATIVE_HISTORY``); when history compaction
   removed that one too, the record is omitted (``SNAPSHOT_ANCHOR_NO_LONGER_ACTIVE``).

Unlike upstream (random UUIDs for copies), a copy's message id is derived from its identity, its
hash and its generation, so records, results and replays are deterministic and never collide.
Records are plain JSON objects because they are persisted between requests (:mod:`tavernbox.store`)
and come back from strangers' storage: :func:`validate_records` checks them at the boundary.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import Diagnostic, TemplateError
from .identity import derived_id
from .node import Node

__all__ = ["EMPTY_HASH", "RECORD_KEYS", "Retention", "empty_notice", "retain", "validate_records"]

#: the hash of an "empty" record (content vanished)
EMPTY_HASH = "empty"
#: the keys of one snapshot record, in their pinned order
RECORD_KEYS = (
    "id", "rule_id", "source_id", "plugin_id", "block_id", "name", "depth", "hash", "messages", "spans", "after_id",
    "native_after_id",
)
_MESSAGE_ROLES = ("system", "user", "assistant")

Item = tuple["Node", int]


def empty_notice(name: str) -> str:
    """The text of an "empty" record: the earlier copies of entry ``name`` are no longer current."""
    return f"Current context is empty for entry {name}. Its earlier snapshots are no longer current."


def _bad(message: str, path: str) -> TemplateError:
    return TemplateError(f"{message} at {path}", code="SNAPSHOT_RECORD_INVALID", path=path)


def _string(raw: Mapping[str, Any], key: str, path: str, *, nullable: bool = False) -> str | None:
    value = raw.get(key)
    if value is None and nullable:
        return None
    if not isinstance(value, str) or (not nullable and not value):
        raise _bad(f"{key} must be a {'string or null' if nullable else 'non-empty string'}", f"{path}.{key}")
    return value


def _spans(raw: Any, messages: list[dict[str, Any]], path: str) -> list[list[list[Any]]]:
    if raw is None:
        return [[] for _ in messages]
    if not isinstance(raw, list) or len(raw) != len(messages):
        raise _bad("spans must be a list with one entry per message", path)
    out = []
    for i, (ranges, message) in enumerate(zip(raw, messages, strict=True)):
        if not isinstance(ranges, list):
            raise _bad("a message's spans must be a list", f"{path}[{i}]")
        size = len(message["content"])
        norm = []
        for j, r in enumerate(ranges):
            ok = (
                isinstance(r, list) and len(r) == 3 and all(isinstance(x, int) and not isinstance(x, bool) for x in r[:2])
                and 0 <= r[0] <= r[1] <= size and isinstance(r[2], dict)
            )
            if not ok:
                raise _bad("a span is [start, end, info] within the message content", f"{path}[{i}][{j}]")
            norm.append([r[0], r[1], dict(r[2])])
        out.append(norm)
    return out


class _Validated(list):  # type: ignore[type-arg]
    """Records already checked by :func:`validate_records` (so a second call costs nothing)."""


def validate_records(raw: Any, path: str = "$.snapshots") -> list[dict[str, Any]]:
    """Check snapshot records from a previous result (or a store) and return normalised copies.

    Raises ``SNAPSHOT_RECORD_INVALID`` naming the JSON path of the first bad value: records are
    persisted data and may have been edited or damaged outside tavernbox.
    """
    if isinstance(raw, _Validated):
        return raw
    if raw is None:
        return _Validated()
    if not isinstance(raw, Sequence) or isinstance(raw, (str, bytes)):
        raise _bad("snapshot records must be a list", path)
    out = []
    for i, rec in enumerate(raw):
        p = f"{path}[{i}]"
        if not isinstance(rec, Mapping):
            raise _bad("a snapshot record must be an object", p)
        depth = rec.get("depth")
        if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 0):
            raise _bad("depth must be a non-negative integer or null", f"{p}.depth")
        msgs = rec.get("messages")
        if not isinstance(msgs, list) or not msgs:
            raise _bad("messages must be a non-empty list", f"{p}.messages")
        messages = []
        for j, m in enumerate(msgs):
            mp = f"{p}.messages[{j}]"
            if not isinstance(m, Mapping):
                raise _bad("a message must be an object", mp)
            mid = _string(m, "id", mp)
            if m.get("role") not in _MESSAGE_ROLES:
                raise _bad(f"role must be one of {', '.join(_MESSAGE_ROLES)}", f"{mp}.role")
            if not isinstance(m.get("content"), str):
                raise _bad("content must be a string", f"{mp}.content")
            messages.append({"id": mid, "role": m["role"], "content": m["content"]})
        out.append(
            {
                "id": _string(rec, "id", p),
                "rule_id": _string(rec, "rule_id", p),
                "source_id": _string(rec, "source_id", p),
                "plugin_id": _string(rec, "plugin_id", p, nullable=True) or "",
                "block_id": _string(rec, "block_id", p, nullable=True) or "",
                "name": _string(rec, "name", p, nullable=True) or "",
                "depth": depth,
                "hash": _string(rec, "hash", p),
                "messages": messages,
                "spans": _spans(rec.get("spans"), messages, f"{p}.spans"),
                "after_id": _string(rec, "after_id", p, nullable=True),
                "native_after_id": _string(rec, "native_after_id", p, nullable=True),
            }
        )
    return _Validated(out)


class Retention:
    """The outcome of :func:`retain`: the new flat list, the records to persist, diagnostics."""

    __slots__ = ("diagnostics", "flat", "records")

    def __init__(self, flat: list[Item], records: list[dict[str, Any]], diagnostics: list[Diagnostic]) -> None:
        self.flat = flat
        self.records = records
        self.diagnostics = diagnostics


def _json_spans(spans: list[list[tuple[int, int, dict[str, Any]]]]) -> list[list[list[Any]]]:
    return [[[s, e, {k: v for k, v in info.items() if v is not None}] for s, e, info in ranges] for ranges in spans]


def _new_record(node: Node, generation: int, after_id: str | None, native_after_id: str | None) -> dict[str, Any]:
    messages = [
        {
            "id": derived_id("snapshot", node.key, node.hash, generation, k),
            "role": m["role"],
            "content": m["content"],
        }
        for k, m in enumerate(node.messages)
    ]
    return {
        "id": node.key,
        "rule_id": node.rule_id,
        "source_id": node.source_id,
        "plugin_id": node.plugin_id,
        "block_id": node.block_id,
        "name": node.name,
        "depth": node.depth,
        "hash": node.hash,
        "messages": messages,
        "spans": _json_spans(node.spans),
        "after_id": after_id,
        "native_after_id": native_after_id,
    }


def _empty_record(last: dict[str, Any], generation: int, after_id: str | None) -> dict[str, Any]:
    text = empty_notice(last["name"] or last["id"])
    info = {
        "kind": "snapshot_empty",
        "rule_id": last["rule_id"],
        "source_id": last["source_id"],
        "block_id": last["block_id"],
    }
    return {
        **last,
        "hash": EMPTY_HASH,
        "messages": [{"id": derived_id("snapshot-empty", last["id"], generation), "role": "system", "content": text}],
        "spans": [[[0, len(text), info]]],
        "after_id": after_id,
    }


def _retained_node(record: dict[str, Any]) -> Node:
    messages = [dict(m) for m in record["messages"]]
    return Node(
        key=f"{record['id']}:retained:{messages[0]['id']}",
        rule_id=record["rule_id"],
        source_id=record["source_id"],
        plugin_id=record["plugin_id"],
        block_id=record["block_id"],
        name=record["name"],
        role=messages[0]["role"],
        native=False,
        messages=messages,
        spans=[[(s, e, dict(info)) for s, e, info in ranges] for ranges in record["spans"]],
        hash=record["hash"],
        depth=record["depth"],
        order=0,
        lifetime="snapshot",
        stability="snapshot",
        locked=True,
        lock_reason="retained-snapshot",
    )


def retain(
    flat: list[Item],
    prior: Iterable[dict[str, Any]],
    active_rule_ids: set[str],
    last_native_id: str | None,
) -> Retention:
    """Apply retention to ``flat`` (the placed ``(node, message index)`` list after depth insertion).

    ``prior`` are validated records of the previous request, ``active_rule_ids`` the rules that are
    snapshot rules in this request, ``last_native_id`` the id of the request's last native message
    (the anchor of "empty" records). See the module docstring for the steps.
    """
    if not active_rule_ids:  # no snapshot rule in this request: nothing retained, the layout unchanged
        return Retention(list(flat), [], [])
    records = [r for r in prior if r["rule_id"] in active_rule_ids]
    last_by_id: dict[str, dict[str, Any]] = {}
    generations: dict[str, int] = {}
    for r in records:
        last_by_id[r["id"]] = r
        generations[r["id"]] = generations.get(r["id"], 0) + 1
    handled: set[str] = set()
    kept: list[Item] = []
    last_id: str | None = None
    last_native: str | None = None
    for node, k in flat:
        if not node.native and node.lifetime == "snapshot" and node.rule_id in active_rule_ids:
            if node.key in handled:
                continue
            handled.add(node.key)
            last = last_by_id.get(node.key)
            if last is None or last["hash"] != node.hash:
                rec = _new_record(node, generations.get(node.key, 0), last_id, last_native)
                records.append(rec)
                last_by_id[node.key] = rec
                generations[node.key] = generations.get(node.key, 0) + 1
            continue
        kept.append((node, k))
        last_id = node.messages[k]["id"]
        if node.native:
            last_native = last_id
    for rid in list(dict.fromkeys(r["id"] for r in records)):
        last = last_by_id[rid]
        if rid in handled or last["hash"] == EMPTY_HASH:
            continue
        rec = _empty_record(last, generations[rid], last_native_id)
        records.append(rec)
        last_by_id[rid] = rec
        generations[rid] += 1

    present = {node.messages[k]["id"] for node, k in kept}
    buckets: dict[str | None, list[Node]] = {}
    diagnostics: list[Diagnostic] = []
    for rec in records:
        anchor = rec["after_id"]
        if anchor is not None and anchor not in present:
            anchor = rec["native_after_id"]
            data = {"id": rec["id"], "after_id": rec["after_id"], "native_after_id": anchor}
            if anchor is not None and anchor not in present:
                diagnostics.append(
                    Diagnostic(
                        "SNAPSHOT_ANCHOR_NO_LONGER_ACTIVE",
                        f"retained snapshot of {rec['id']!r} is left out: its anchor is no longer in the request",
                        data=data,
                    )
                )
                continue
            diagnostics.append(
                Diagnostic(
                    "SNAPSHOT_ANCHORED_TO_NATIVE_HISTORY",
                    f"retained snapshot of {rec['id']!r} lost its anchor and follows native history instead",
                    data=data,
                )
            )
        buckets.setdefault(anchor, []).append(_retained_node(rec))

    def placed(nodes: list[Node]) -> list[Item]:
        return [(n, j) for n in nodes for j in range(len(n.messages))]

    out: list[Item] = placed(buckets.get(None, []))
    for node, k in kept:
        out.append((node, k))
        more = buckets.get(node.messages[k]["id"])
        if more:
            out.extend(placed(more))
    return Retention(out, records, diagnostics)
