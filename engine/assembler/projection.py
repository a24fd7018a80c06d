"""System projection: adjacent system contributions become one complete instruction snapshot.

Every system message the logical assembly produces is an *ordered contribution*; a system
message in the final array must be the *complete* effective instruction. Walking the logical
messages, contributions accumulate for the whole request (never reset), a native system message
replaces only the native base in its original slot (an obsolete native instruction is never
concatenated with its update), and every run of adjacent system messages becomes one carrier
holding all contributions so far, joined by a blank line. Non-system messages are copied
unchanged and end a run.

A carrier that is not the first message is a *system update*; it needs the model capability
``system_prompt_update="in-history"`` (else ``ASSEMBLY_SYSTEM_UPDATES_UNSUPPORTED``; in preview
the capability is ``unverified`` and ``SYSTEM_UPDATE_CAPABILITY_UNVERIFIED`` is reported). Such
systems are never moved to the front or turned into user text.

The physical overhead (every carrier's serialised bytes minus the native base it carries, every
non-native message's bytes; unchanged native messages cost 0) must stay within 2 MiB, or the
caller's lower limit: ``ASSEMBLY_PROJECTION_LIMIT``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import is_
from typing import Any

from ..errors import Diagnostic, TemplateError
from .identity import derived_id
from .limits import PROJECTION_MAX_BYTES, check_limit, json_size, message_json, string_json_size

__all__ = ["CAPABILITIES", "Logical", "Projection", "project_system"]

CAPABILITIES = ("leading-only", "in-history")

Spans = list[tuple[int, int, dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class Logical:
    """One logical message: the message, whether it is native, its provenance ranges."""

    message: dict[str, Any]
    native: bool
    spans: Spans = field(default_factory=list)


@dataclass(slots=True)
class Projection:
    """The projected request.

    ``index_map[i]`` is the output position that carries logical message ``i``.
    """

    messages: list[dict[str, Any]]
    spans: list[Spans]
    index_map: list[int]
    records: list[dict[str, Any]]
    extra_bytes: int
    capability: str
    max_bytes: int
    diagnostics: list[Diagnostic]

    def metadata(self) -> dict[str, Any]:
        """The ``system_projection`` result field."""
        return {
            "version": 1,
            "semantics": "complete-snapshots",
            "capability": self.capability,
            "max_bytes": self.max_bytes,
            "messages": self.records,
        }


def _system_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return "".join(str(p.get("text", "")) for p in content)
    raise TemplateError(
        f"system message {message.get('id')!r}: system snapshot projection requires text-only system messages",
        code="ASSEMBLY_SYSTEM_NOT_TEXT",
    )


class SharedSpans(list):  # type: ignore[type-arg]
    """A snapshot's ranges whose first ``prefix[1]`` are those of output message ``prefix[0]``
    (an earlier snapshot repeated whole): provenance copies that message's span dicts instead of
    describing the same ranges again."""

    __slots__ = ("prefix",)

    prefix: tuple[int, int]


@dataclass(slots=True)
class _Part:
    id: str
    text: str
    native: bool
    spans: Spans
    #: UTF-8 bytes of ``text`` inside a JSON string (escaped, without the quotes); -1 until asked
    json_bytes: int = -1

    def content_bytes(self) -> int:
        if self.json_bytes < 0:
            self.json_bytes = string_json_size(self.text) - 2
        return self.json_bytes


#: ``"\n\n"`` (the snapshot separator) as it is written inside a JSON string
_SEPARATOR_JSON_BYTES = json_size("\n\n") - 2


_CARRIER_IDS: dict[tuple[tuple[str, ...], str], str] = {}
_CARRIER_IDS_MAX = 1024
_CARRIER_IDS_BUDGET = 16 << 20  # characters of snapshot text held
_carrier_chars = 0


def _carrier_id(run_ids: tuple[str, ...], text: str) -> str:
    """``derived_id("system-projection", list(run_ids), text)``, remembered: the snapshot of an
    unchanged prompt set is the same text with the same run every request, and hashing its JSON
    form (hundreds of KiB for a large preset) cost more than looking it up."""
    global _carrier_chars
    key = (run_ids, text)
    found = _CARRIER_IDS.get(key)
    if found is None:
        found = derived_id("system-projection", list(run_ids), text)
        if len(_CARRIER_IDS) >= _CARRIER_IDS_MAX or _carrier_chars > _CARRIER_IDS_BUDGET:
            _CARRIER_IDS.clear()
            _carrier_chars = 0
        _CARRIER_IDS[key] = found
        _carrier_chars += len(text)
    return found


def project_system(
    logical: list[Logical],
    *,
    max_bytes: int = PROJECTION_MAX_BYTES,
    system_prompt_update: str = "leading-only",
    preview: bool = False,
) -> Projection:
    """Project ``logical`` into complete system snapshots (see the module docstring)."""
    limit = min(check_limit(max_bytes, name="projection max_bytes", maximum=1 << 62), PROJECTION_MAX_BYTES)
    if system_prompt_update not in CAPABILITIES:
        raise TemplateError(
            f"system_prompt_update must be one of {', '.join(CAPABILITIES)}", code="ASSEMBLY_REQUEST_INVALID"
        )
    parts: list[_Part] = []
    pending: list[int] = []
    out: list[dict[str, Any]] = []
    out_spans: list[Spans] = []
    index_map = [0] * len(logical)
    records: list[dict[str, Any]] = []
    charge = 0

    #: the previous carrier: its live parts, text, spans and output index (a later snapshot
    #: usually repeats all of them and appends its new contributions)
    last_live: list[_Part] = []
    last_text = ""
    last_spans: Spans = []
    last_index = -1
    last_bytes = 0  # the previous carrier's content bytes

    def flush() -> None:
        nonlocal charge, last_live, last_text, last_spans, last_index, last_bytes
        live = [p for p in parts if p.text]
        shared = len(last_live)
        if shared and (len(live) < shared or not all(map(is_, last_live, live))):
            shared = 0
        if shared:
            # the earlier snapshot is this one's prefix: same text, same ranges at the same offsets
            text = "\n\n".join([last_text, *[p.text for p in live[shared:]]])
            spans: Spans = SharedSpans(last_spans)
            spans.prefix = (last_index, len(last_spans))
            offset = len(last_text)
        else:
            text = "\n\n".join(p.text for p in live)
            spans = []
            offset = 0
        last_message = logical[pending[-1]].message
        if last_message.get("content") == text:
            carrier = last_message
        else:
            carrier = {**last_message, "id": _carrier_id(tuple([logical[i].message["id"] for i in pending]), text)}
            carrier["content"] = text
        for n, p in enumerate(live[shared:], shared):
            if n:
                offset += 2
            if offset:
                spans += [(offset + s, offset + e, info) for s, e, info in p.spans]
            else:
                spans += p.spans
            offset += len(p.text)
        # JSON escaping is per character, so the snapshot's size is the sum of its parts' sizes
        # (each measured once) and the separators: no snapshot text is serialised again
        # (a repeated snapshot: the earlier one's size, then one separator per new part)
        separators = len(live) - shared if shared else max(0, len(live) - 1)
        content_bytes = (last_bytes if shared else 0) + sum([p.content_bytes() for p in live[shared:]])
        content_bytes += _SEPARATOR_JSON_BYTES * separators
        last_live, last_text, last_spans, last_index, last_bytes = live, text, spans, len(out), content_bytes
        base = next((logical[i].message for i in reversed(pending) if logical[i].native), None)
        charge += message_json({**carrier, "content": ""})[1] + content_bytes - (message_json(base)[1] if base is not None else 0)
        index = len(out)
        for i in pending:
            index_map[i] = index
        run_ids = [logical[i].message["id"] for i in pending]
        part_ids = {p.id for p in parts}
        records.append(
            {
                "index": index,
                "input_ids": run_ids,
                "message_id": carrier["id"],
                "contributor_ids": [p.id for p in parts],
                "replaced_native_ids": [i for i, n in zip(run_ids, pending, strict=True) if logical[n].native and i not in part_ids],
            }
        )
        out.append(carrier)
        out_spans.append(spans)
        pending.clear()

    for i, item in enumerate(logical):
        m = item.message
        if m.get("role") == "system":
            part = _Part(m["id"], _system_text(m), item.native, item.spans)  # its ranges are only read
            slot = next((n for n, p in enumerate(parts) if p.native), None) if item.native else None
            if slot is None:
                parts.append(part)
            else:
                parts[slot] = part
            pending.append(i)
            continue
        if pending:
            flush()
        index_map[i] = len(out)
        out.append(m)
        out_spans.append(list(item.spans))
        if not item.native:
            charge += message_json(m)[1]
    if pending:
        flush()
    if charge > limit:
        raise TemplateError(
            f"system snapshot projection exceeds {limit} additional bytes ({charge})", code="ASSEMBLY_PROJECTION_LIMIT"
        )
    diagnostics: list[Diagnostic] = []
    capability = "unverified" if preview else system_prompt_update
    late = [r for r in records if r["index"] > 0]
    if late:
        if preview:
            diagnostics.append(
                Diagnostic(
                    "SYSTEM_UPDATE_CAPABILITY_UNVERIFIED",
                    f"{len(late)} non-leading system message(s): sending needs system_prompt_update='in-history'",
                    data={"indexes": [r["index"] for r in late]},
                )
            )
        elif system_prompt_update != "in-history":
            raise TemplateError(
                f"the request has a system message at position {late[0]['index']} but the model only accepts a "
                "leading system message (system_prompt_update='leading-only'); pass --system-update in-history "
                "(system_prompt_update='in-history') if the model takes them, or use the builtin-st strategy with "
                "options.post_processing (--post-processing semi|strict|single) to send what SillyTavern sends",
                code="ASSEMBLY_SYSTEM_UPDATES_UNSUPPORTED",
            )
    return Projection(out, out_spans, index_map, records, charge, capability, limit, diagnostics)
