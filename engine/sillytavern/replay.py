"""The record of a SillyTavern-exact request, and its replay to the same bytes.

``assemble_request`` runs the compact assembler (whose own record, :func:`tavernbox.assembler.replay`, rebuilds
its *logical* messages) and then edits what it made as SillyTavern does before sending: the continued message
moves, the continue nudge reads it, example dialogues are left out, the budget drops the oldest history, system
messages are squashed, post-processing merges roles, and the target converts the body. A record of the assembler
alone would replay the logical messages, not the request that was sent.

The SillyTavern record therefore wraps the assembler's record with those steps as data (:class:`SentSteps`):
which logical messages were kept and in which order (by id; a message this stage made or edited carries its
fields), the squash and its separators, the post-processing and the target with their names. :func:`replay`
rebuilds the logical messages from the assembler's record (never calling a source or renderer), runs the same
steps again, and checks the body against the recorded hash, so a replay is a reproduction, byte for byte.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import TemplateError

__all__ = ["RECORD_FORMAT", "SentSteps", "ReplayedRequest", "kept_messages", "replay", "sendable", "st_record"]

RECORD_FORMAT = "tavernbox-sillytavern-record"
RECORD_VERSION = 1


@dataclass(slots=True)
class SentSteps:
    """What ``assemble_request`` did to the assembler's logical messages before sending them."""

    #: the logical messages kept, in order: ``{"id"}`` for one the assembler made, its whole dict otherwise
    kept: list[dict[str, Any]]
    squash: bool = False
    #: the ids squashing keeps apart (the new-chat and group-nudge separators)
    separators: list[str] = field(default_factory=list)
    post_processing: str = ""
    names: dict[str, Any] = field(default_factory=dict)
    target: str = "openai"
    use_sysprompt: bool = False
    prefill: str = ""
    #: the messages as the text passes over the final messages and the template extensions left them, when they
    #: changed anything (``None``: the sent messages are the kept ones): a replay runs neither again
    evaluated: list[dict[str, Any]] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"kept": self.kept, "squash": self.squash, "separators": self.separators,
               "post_processing": self.post_processing, "names": self.names, "target": self.target,
               "use_sysprompt": self.use_sysprompt, "prefill": self.prefill}
        if self.evaluated is not None:
            out["evaluated"] = self.evaluated
        return out


def kept_messages(logical: Sequence[Mapping[str, Any]], made: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``logical`` as :attr:`SentSteps.kept`: an id for each message equal to the assembler's, else the message."""
    by_id = {m.get("id"): m for m in made}
    return [{"id": m["id"]} if by_id.get(m.get("id")) == m else dict(m) for m in logical]


def sendable(message: Mapping[str, Any]) -> dict[str, Any] | None:
    """A logical message as the request sends it (its role, content, name and tools), or ``None`` when empty."""
    item: dict[str, Any] = {"role": message["role"], "content": message["content"]}
    if message.get("name"):
        item["name"] = message["name"]
    if message.get("tool_calls"):
        item["tool_calls"] = message["tool_calls"]
    if message["role"] == "tool" and message.get("tool_call_id"):
        item["tool_call_id"] = message["tool_call_id"]
    return item if item["content"] or item.get("tool_calls") else None


def _body_hash(body: Mapping[str, Any]) -> str:
    from ..assembler.identity import content_hash

    return content_hash(body)


def st_record(assembly: Mapping[str, Any], steps: SentSteps, body: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON-ready record of one SillyTavern-exact request (see the module docstring)."""
    return {"format": RECORD_FORMAT, "version": RECORD_VERSION, "assembly": assembly, "sent": steps.to_dict(),
            "body_hash": _body_hash(body)}


@dataclass(slots=True)
class ReplayedRequest:
    """A replayed SillyTavern request: the messages and body as they were sent."""

    messages: list[dict[str, Any]]
    body: dict[str, Any]
    record: dict[str, Any]
    logical_messages: list[dict[str, Any]]

    @property
    def sent(self) -> Any:
        """What ``assemble --messages`` prints: the messages, or the converted body of another target."""
        return self.messages if set(self.body) == {"messages"} else self.body

    def to_dict(self) -> dict[str, Any]:
        return {"messages": self.messages, "body": self.body, "logical_messages": self.logical_messages,
                "record": self.record}


def _bad(message: str) -> TemplateError:
    return TemplateError(f"invalid request record: {message}", code="ASSEMBLY_REPLAY_INVALID")


def _steps(data: Any) -> SentSteps:
    if not isinstance(data, Mapping) or not isinstance(data.get("kept"), list):
        raise _bad("'sent' must be an object with the list 'kept'")
    try:
        return SentSteps(kept=[dict(m) for m in data["kept"]], squash=bool(data.get("squash")),
                         separators=[str(s) for s in data.get("separators") or []],
                         post_processing=str(data.get("post_processing") or ""), names=dict(data.get("names") or {}),
                         target=str(data.get("target") or "openai"), use_sysprompt=bool(data.get("use_sysprompt")),
                         prefill=str(data.get("prefill") or ""), evaluated=_evaluated(data.get("evaluated")))
    except (TypeError, ValueError) as exc:
        raise _bad(f"'sent': {exc}") from None


def _evaluated(data: Any) -> list[dict[str, Any]] | None:
    if data is None:
        return None
    if not isinstance(data, list) or not all(isinstance(m, Mapping) and "role" in m for m in data):
        raise _bad("'sent.evaluated' must be a list of messages")
    return [dict(m) for m in data]


def send(logical: list[dict[str, Any]], steps: SentSteps) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The steps after the logical messages were chosen: squash, the sent messages, post-processing, the target."""
    from ..strategies.sillytavern import squash_system_messages
    from .postprocess import PromptNames, post_process, to_claude, to_google

    if steps.squash:
        logical = squash_system_messages(logical, set(steps.separators))
    final = [item for item in map(sendable, logical) if item is not None]
    if steps.evaluated is not None:
        final = [dict(m) for m in steps.evaluated]
    names = PromptNames(char=str(steps.names.get("char", "")), user=str(steps.names.get("user", "")),
                        group=tuple(steps.names.get("group") or ()))
    if steps.post_processing not in ("", "none"):
        final = post_process(final, steps.post_processing, names)
    if steps.target == "claude":
        body = to_claude(final, names, use_sysprompt=steps.use_sysprompt, prefill=steps.prefill)
    elif steps.target == "google":
        body = to_google(final, names, use_sysprompt=steps.use_sysprompt)
    else:
        body = {"messages": final}
    return final, body


def replay(record: Mapping[str, Any]) -> Any:
    """Rebuild a recorded request without calling any source: a SillyTavern record gives a :class:`ReplayedRequest`,
    an assembler record (a rule-file strategy's) :func:`tavernbox.assembler.replay`'s result.

    Raises ``ASSEMBLY_REPLAY_INVALID`` for a malformed record or a body that does not hash to the recorded value.
    """
    from ..assembler import replay as replay_assembly

    if not isinstance(record, Mapping) or record.get("format") != RECORD_FORMAT:
        return replay_assembly(record)
    if record.get("version") != RECORD_VERSION:
        raise _bad(f"expected format {RECORD_FORMAT!r} version {RECORD_VERSION}")
    inner = replay_assembly(record.get("assembly"))
    steps = _steps(record.get("sent"))
    made = {m["id"]: m for m in inner.logical_messages}
    logical = []
    for i, kept in enumerate(steps.kept):
        if set(kept) == {"id"}:
            if kept["id"] not in made:
                raise _bad(f"$.sent.kept[{i}] names the message {kept['id']!r}, which the assembly did not make")
            logical.append(dict(made[kept["id"]]))
        elif "role" in kept and "content" in kept:
            logical.append(kept)
        else:
            raise _bad(f"$.sent.kept[{i}] is neither an id nor a message")
    final, body = send(logical, steps)
    if _body_hash(body) != record.get("body_hash"):
        raise _bad("the replayed request does not match the recorded hash")
    import json

    return ReplayedRequest(final, body, json.loads(json.dumps(record)), [dict(m) for m in inner.logical_messages])
