"""The assembly record and :func:`replay`.

A record holds what the assembly *read* after resolution: the normalised preset, the native
messages and input ids, the options, every source's validated output with its rule and
descriptor, and every render (input hash, output text, random draws, diagnostics). It does not
hold the messages themselves, only their hash: :func:`replay` re-runs placement, depth, validation,
limits and projection on the recorded outputs and renders (never calling a source or renderer
again) and checks that the messages it rebuilds hash to the recorded value, so a replay is a real
reproduction, byte for byte, not a copy.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..errors import Diagnostic, TemplateError
from ..spans import Span
from .blocks import validate_output
from .compose import AssemblyRequest, AssemblyResult, canonical_message, compose
from .identity import content_hash, messages_hash
from .registry import ResolvedEntry, SourceDescriptor
from .render import RenderOutput
from .rules import Rule, parse_preset

__all__ = ["RECORD_FORMAT", "assembled_messages", "build_record", "diagnostic_dict", "replay"]

RECORD_FORMAT = "tavernbox-assembly-record"
RECORD_VERSION = 1


def _rule_dict(rule: Rule) -> dict[str, Any]:
    return {**rule.to_dict(), "input_mode": rule.input_mode, "synthetic": rule.synthetic}


def build_record(
    req: AssemblyRequest,
    entries: list[ResolvedEntry],
    native: list[dict[str, Any]],
    input_ids: tuple[str, ...],
    diagnostics: list[Diagnostic],
    renders: list[dict[str, Any]],
    notices: list[Diagnostic],
    result: AssemblyResult | list[dict[str, Any]],
    snapshots: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The JSON-ready record of one assembly (see the module docstring); ``result`` is the
    assembly's result or its messages."""
    messages = result.messages if isinstance(result, AssemblyResult) else result
    return {
        "format": RECORD_FORMAT,
        "version": RECORD_VERSION,
        "request": {
            "preset": req.preset.to_dict(),
            "native_messages": native,
            "input_ids": list(input_ids),
            "preview": req.preview,
            "system_prompt_update": req.system_prompt_update,
            "max_profile_bytes": req.max_profile_bytes,
            "max_projection_bytes": req.max_projection_bytes,
            "seed": req.seed,
            "snapshots": snapshots or [],
        },
        "entries": [
            {
                "rule": _rule_dict(e.rule),
                "rule_index": e.rule_index,
                "descriptor": e.descriptor.to_dict(),
                "renderer_trim": bool(getattr(e.descriptor.renderer, "trim", False)),
                "output": e.output.raw,
            }
            for e in entries
        ],
        "diagnostics": [diagnostic_dict(d) for d in diagnostics],
        "renders": renders,
        "notices": [diagnostic_dict(d) for d in notices],
        "messages_hash": messages_hash(messages),
    }


def assembled_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as they are now, for a record built later: each dict copied (their strings
    are immutable), a message holding other containers (tool calls, content parts) deeply."""
    import copy

    out = []
    for m in messages:
        flat = type(m) is dict and all(v is None or type(v) is str for v in m.values())
        out.append(dict(m) if flat else copy.deepcopy(m))
    return out


def diagnostic_dict(d: Diagnostic) -> dict[str, Any]:
    """A diagnostic as the record (and a render entry) writes it; :func:`_diag` reads it back."""
    out: dict[str, Any] = {"code": d.code, "message": d.message, "severity": d.severity}
    if d.span is not None:
        out["start"], out["end"] = d.span.start, d.span.end
    if d.path is not None:
        out["path"] = d.path
    if d.data:
        out["data"] = json.loads(json.dumps(d.data, default=str))
    return out


def _diag(d: Mapping[str, Any]) -> Diagnostic:
    span = Span(d["start"], d["end"]) if "start" in d and "end" in d else None
    return Diagnostic(d["code"], d.get("message", ""), span, d.get("severity", "warning"), d.get("path"), d.get("data") or {})


class _Recorded:
    """A stand-in renderer for replay: only its name and trim flag are used."""

    def __init__(self, name: str | None, trim: bool) -> None:
        self.name = name
        self.trim = trim

    def render(self, text: str, state: Any) -> RenderOutput:  # pragma: no cover - never called
        raise TemplateError("a replay never renders", code="ASSEMBLY_REPLAY_INVALID")


def replay(record: Mapping[str, Any]) -> AssemblyResult:
    """Rebuild the messages of a recorded assembly without calling any source.

    Raises ``ASSEMBLY_REPLAY_INVALID`` for a malformed record, a render the record does not hold,
    or messages that do not hash to the recorded value.
    """
    def bad(message: str) -> TemplateError:
        return TemplateError(f"invalid assembly record: {message}", code="ASSEMBLY_REPLAY_INVALID")

    if not isinstance(record, Mapping) or record.get("format") != RECORD_FORMAT or record.get("version") != RECORD_VERSION:
        raise bad(f"expected format {RECORD_FORMAT!r} version {RECORD_VERSION}")
    try:
        req = record["request"]
        preset = parse_preset(req["preset"])
        native = [canonical_message(m, f"$.request.native_messages[{i}]") for i, m in enumerate(req["native_messages"])]
        entries = []
        for e in record["entries"]:
            r = e["rule"]
            rule = Rule(
                r["id"], r["kind"], r["enabled"], r["role"], r["lifetime"], r["depth"], r["text"], r["name"],
                r.get("delivery"), r.get("input_mode", "source"), r.get("synthetic", False),
            )
            d = e["descriptor"]
            desc = SourceDescriptor(
                id=d["id"],
                plugin_id=d["plugin_id"],
                name=d["name"],
                version=d["version"],
                stability=d["stability"],
                dependencies=tuple(d["dependencies"]),
                multiple=d["multiple"],
                roles=tuple(d["roles"]),
                lifetimes=tuple(d["lifetimes"]),
                depth=d["depth"],
                renderer=_Recorded(d.get("renderer"), bool(e.get("renderer_trim"))),
            )
            output = validate_output(e["output"], desc.id, desc.dependencies)
            entries.append(ResolvedEntry(rule, desc, output, e.get("rule_index")))
        renders: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
        for r in record["renders"]:
            renders.setdefault((r["key"], r["input_hash"]), []).append(r)
        early = [_diag(d) for d in record.get("diagnostics", [])]
        notices = [_diag(d) for d in record.get("notices", [])]
    except TemplateError as exc:
        if exc.code == "ASSEMBLY_REPLAY_INVALID":
            raise
        raise bad(f"{exc.code}: {exc.message}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise bad(f"{type(exc).__name__}: {exc}") from None

    used: list[Mapping[str, Any]] = []

    def render_call(key: str, text: str, renderer: Any) -> RenderOutput:
        queue = renders.get((key, content_hash(text)))
        if not queue:
            raise bad(f"no recorded render for block {key!r} with this input")
        r = queue.pop(0)
        used.append(r)
        segments = tuple((int(a), int(b), dict(info)) for a, b, info in r.get("segments") or [])
        return RenderOutput(
            r["text"], list(r.get("draws") or []), [_diag(d) for d in r.get("diagnostics") or []], segments=segments
        )

    result, _ = compose(
        preset,
        entries,
        native,
        tuple(req["input_ids"]),
        preview=req["preview"],
        system_prompt_update=req["system_prompt_update"],
        max_profile_bytes=req["max_profile_bytes"],
        max_projection_bytes=req["max_projection_bytes"],
        early_diagnostics=early,
        render_call=render_call,
        render_notices=lambda: notices,
        snapshots=req.get("snapshots") or [],
    )
    if messages_hash(result.messages) != record.get("messages_hash"):
        raise bad("the replayed messages do not match the recorded hash")
    result.draws = [{"key": r["key"], "draws": r["draws"]} for r in used if r.get("draws")]
    result.record = json.loads(json.dumps(record))
    return result
