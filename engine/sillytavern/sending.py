"""Sending: the fitted messages as SillyTavern sends them.

The last stage of the chat-completion back end: system messages squashed (outside dry runs, as the
preset says), each message reduced to what is sent, the text passes over the final messages
(:mod:`.passes`), SillyTavern's prompt post-processing and the target's conversion
(:mod:`.postprocess`), and the provenance of each sent message (world-info ranges narrowed to their
entries).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import TemplateError
from ..strategies.sillytavern import squash_system_messages
from .fitting import Fitted
from .front import Front
from .passes import TextPass, run_passes, wants
from .postprocess import PromptNames, post_process, to_claude, to_google
from .replay import SentSteps, kept_messages, sendable
from .templates import apply_templates

__all__ = ["Sent", "TemplateSpans", "finish"]


@dataclass(slots=True)
class Sent:
    """What is sent: the messages, the body for the target, the request's fields, and the spans."""

    messages: list[dict[str, Any]]
    body: dict[str, Any]
    fields: dict[str, Any]
    #: ``(message id, text, character ranges)`` per sent message
    span_source: list[Any] = field(default_factory=list)
    provenance_of: str = "messages"
    #: what was done to the assembler's logical messages before sending them: with its record, the replay
    steps: SentSteps | None = None
    #: the template outputs' own ranges, put into ``span_source`` when the provenance is read (``None``: none)
    refine: Callable[[list[Any]], list[Any]] | None = None


def finish(fitted: Fitted) -> Sent:
    """Stage 8: squashed system messages (outside dry runs), the messages as sent, post-processing and
    the target's conversion."""
    placed = fitted.placed
    front = placed.front
    req, preset = front.req, front.loaded.preset
    result, block_of, logical = placed.result, placed.block_of, fitted.logical
    spans_of: dict[str, Any] = {m["id"]: sp for m, sp in zip(result.logical_messages, result.logical_spans)}
    for m in logical:
        if m["id"] not in spans_of:  # a message made here (the continued message sent last)
            spans_of[m["id"]] = [(0, len(str(m.get("content") or "")), {"kind": "chat_message",
                                                                         "block_id": block_of.get(m["id"])})]
    squash = req.options.squash_system_messages if req.options.squash_system_messages is not None else \
        bool(preset.get("squash_system_messages", False))
    kept = kept_messages(logical, result.logical_messages)
    separators: set[str] = set()
    if squash and not req.options.dry_run:
        separators = {m["id"] for m in logical if block_of.get(m["id"], "").endswith((":newChat", ":groupNudge"))}
        logical = squash_system_messages(logical, separators, spans_of)
    entries_by_key = _wi_entries_for_spans(front.lore.world_info or [])
    span_source: list[tuple[str, str, list[Any]]] = []
    final = []
    for m in logical:
        item = sendable(m)
        if item is not None:
            final.append(item)
            text = item["content"] if isinstance(item["content"], str) else ""
            span_source.append((m["id"], text, _with_entry_spans(text, spans_of.get(m["id"], []), entries_by_key)))
    provenance_of = "messages"
    passed = final
    if wants(front.loaded.passes, "final_message"):
        final = _passed_final(final, front.loaded.passes)
        provenance_of = "messages before the text passes"
    templated = apply_templates(final, front, [sp for _mid, _text, sp in span_source] if provenance_of == "messages"
                                else None)
    refine = None
    if templated != final:
        if len(templated) == len(final) and provenance_of == "messages":
            span_source = _templated_spans(span_source, final, templated, _pieces(front))
            marked = getattr(front.loaded.templates, "marked", None)
            refine = TemplateSpans(marked, final, templated) if marked is not None else None
        else:  # ``@INJECT`` added messages (or text passes ran first): the spans describe the messages before
            provenance_of = "messages before the template extensions"
        final = templated
    sent = _post_processed(final, front)
    sent.refine = refine
    # a replay rebuilds the sent messages from the record without running a pass or a template again: what
    # they made is kept in it as data
    evaluated = final if final != passed else None
    sent.steps = SentSteps(kept, squash and not req.options.dry_run, sorted(separators), req.options.post_processing,
                           {"char": sent.fields["char_name"], "user": sent.fields["user_name"],
                            "group": list(sent.fields["group_names"])},
                           req.options.target or "openai", _use_sysprompt(front),
                           str(sent.fields.get("assistant_prefill") or ""), evaluated)
    if provenance_of == "messages" and sent.provenance_of != "messages":
        provenance_of = sent.provenance_of
    sent.span_source, sent.provenance_of = span_source, provenance_of
    return sent


def _use_sysprompt(front: Front) -> bool:
    """Whether the target's conversion sends the system prompt apart (the request's option, else the preset's)."""
    req = front.req
    return req.options.use_sysprompt if req.options.use_sysprompt is not None else \
        bool(front.loaded.preset.get("use_sysprompt", False))


def _templated_spans(span_source: list[Any], before: list[dict[str, Any]], after: list[dict[str, Any]],
                     pieces: Sequence[Any] | None = None) -> list[Any]:
    """The spans of the messages the template extensions changed: one span naming the templates' output (which
    message's templates, and the kinds of text they were evaluated in); unchanged messages keep theirs. A message
    the generate loader built (``pieces``) gets a span per world-info entry it added, naming the entry."""
    out = []
    for i, ((mid, text, spans), old, new) in enumerate(zip(span_source, before, after, strict=True)):
        content = new.get("content")
        if not isinstance(content, str) or content == old.get("content"):
            out.append((mid, text, spans))
            continue
        kinds = sorted({str(info.get("kind")) for _a, _b, info in spans if info.get("kind")})
        info = {"kind": "template_output", "template": f"message {i} ({new.get('role')})", "from": kinds}
        parts = pieces[i] if pieces is not None and i < len(pieces) else None
        if parts and "".join(p.text for p in parts) == content:
            out.append((mid, content, _piece_spans(parts, old.get("content"), spans, info)))
            continue
        out.append((mid, content, [(0, len(content), info)] if content else []))
    return out


def _piece_spans(parts: Sequence[Any], old: Any, spans: list[Any], own: dict[str, Any]) -> list[Any]:
    """A generated message's spans: each entry's output names the entry; the message's own text keeps its spans
    when its templates left it as it was, else it is the templates' output."""
    out: list[Any] = []
    at = 0
    for part in parts:
        end = at + len(part.text)
        if part.label is not None:
            entry = part.entry or {}
            out.append((at, end, {"kind": "template_output", "template": part.label, "from": ["world_info"],
                                  "book": entry.get("world"), "uid": entry.get("uid"),
                                  "comment": entry.get("comment")}))
        elif part.text == old:
            out.extend((a + at, b + at, info) for a, b, info in spans)
        elif part.text:
            out.append((at, end, own))
        at = end
    return [s for s in out if s[1] > s[0]]


def _pieces(front: Front) -> Sequence[Any] | None:
    run = getattr(front.loaded, "templates", None)
    return getattr(run, "pieces", None)


@dataclass(frozen=True)
class TemplateSpans:
    """The ranges each template produced in the messages it changed, from the marked evaluation (run when the
    provenance is first read, never for a request whose provenance nobody reads).

    A message keeps its one ``template_output`` span, with the reason, when the marked evaluation failed or its
    text without the markers is not the text sent (a template measured or compared what ``getwi`` returned, drew
    random numbers...): provenance is never invented."""

    marked: Callable[[], Any]
    before: list[dict[str, Any]]
    after: list[dict[str, Any]]

    def __call__(self, source: list[Any]) -> list[Any]:
        try:
            result = self.marked()
        except TemplateError as exc:
            return self._unrefined(source, f"the marked evaluation failed where the evaluation did not ({exc.code})")
        texts = iter(zip(result.contents, result.spans or [], strict=False))
        out = []
        for (mid, text, spans), old, new in zip(source, self.before, self.after, strict=True):
            if not isinstance(new.get("content"), str):
                out.append((mid, text, spans))
                continue
            marked_text, marked_spans = next(texts, ("", None))
            if new.get("content") == old.get("content") or marked_spans is None:
                out.append((mid, text, spans))  # unchanged, or changed by Tavern Helper's macros only
            elif marked_spans is not None and marked_text == text:
                out.append((mid, text, marked_spans))
            else:
                out.append((mid, text, _with_reason(spans, _DIFFERENT)))
        return out

    def _unrefined(self, source: list[Any], reason: str) -> list[Any]:
        return [(mid, text, _with_reason(spans, reason)) for mid, text, spans in source]


_DIFFERENT = ("the marked evaluation gave another text (a template measured or compared what getwi returned, or "
              "drew random numbers): the ranges of each template are not known")


def _with_reason(spans: list[Any], reason: str) -> list[Any]:
    return [(a, b, {**info, "reason": reason}) if info.get("kind") == "template_output" else (a, b, info)
            for a, b, info in spans]


def _passed_final(final: list[dict[str, Any]], passes: Sequence[TextPass]) -> list[dict[str, Any]]:
    """The messages about to be sent through the text passes (text contents only)."""
    return [{**m, "content": run_passes(passes, "final_message", m["content"], {"index": i, "role": m["role"]})}
            if isinstance(m["content"], str) else m for i, m in enumerate(final)]


def _post_processed(final: list[dict[str, Any]], front: Front) -> Sent:
    """SillyTavern's prompt post-processing, then the target's body (OpenAI-compatible, Claude, Google)."""
    req, preset, texts = front.req, front.loaded.preset, front.texts
    kind = req.options.post_processing
    names = PromptNames(char=texts.char, user=texts.user, group=tuple(req.group.members) if req.group else ())
    if kind not in ("", "none"):
        final = post_process(final, kind, names)
    fields: dict[str, Any] = {"custom_prompt_post_processing": "" if kind == "none" else kind, "char_name": texts.char,
                              "user_name": texts.user, "group_names": list(names.group)}
    use_sysprompt = _use_sysprompt(front)
    if req.options.target == "claude":
        prefill = str(preset.get("assistant_prefill") or "")
        body: dict[str, Any] = to_claude(final, names, use_sysprompt=use_sysprompt, prefill=prefill)
        fields["assistant_prefill"] = prefill
    elif req.options.target == "google":
        body = to_google(final, names, use_sysprompt=use_sysprompt)
    else:
        body = {"messages": final}
    if req.generation.type == "impersonate" and req.options.target == "claude":
        fields["assistant_impersonation"] = str(preset.get("assistant_impersonation") or "")
    provenance_of = "messages" if kind in ("", "none") else "messages before post-processing"
    return Sent(final, body, fields, provenance_of=provenance_of)


def _wi_entries_for_spans(entries: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [e for e in entries if isinstance(e.get("content"), str) and e["content"].strip()]

_WI_BLOCKS = ("preset:worldInfoBefore", "preset:worldInfoAfter", "preset:inject:", "preset:authorsNote",
              "preset:dialogueExamples")

def _with_entry_spans(text: str, spans: list[Any], entries: list[Mapping[str, Any]]) -> list[Any]:
    """World-info spans narrowed to the entry each range came from: book, uid and comment.

    A world-info marker's range holds the activated entries' texts joined; each entry's text found
    in it (in placement order) gets a range of its own naming the entry, so a reader sees which
    lorebook entry put which words in the request. Text not found as written (an entry whose macros
    expanded) keeps the marker's range.
    """
    if not entries or not any(str(info.get("block_id") or "").startswith(_WI_BLOCKS) for _a, _b, info in spans):
        return spans
    out: list[Any] = []
    for start, end, info in spans:
        if not str(info.get("block_id") or "").startswith(_WI_BLOCKS):
            out.append((start, end, info))
            continue
        cursor = start
        for entry in entries:
            at = text.find(entry["content"], cursor, end)
            if at < 0:
                continue
            if at > cursor:
                out.append((cursor, at, info))
            stop = at + len(entry["content"])
            out.append((at, stop, {**info, "kind": "world_info", "book": entry.get("book"), "uid": entry.get("uid"),
                                   "comment": entry.get("comment") or None}))
            cursor = stop
        if cursor < end:
            out.append((cursor, end, info))
    return out
