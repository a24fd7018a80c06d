"""The SillyTavern-exact request: a request file in, the ``messages`` SillyTavern would send out.

:func:`assemble_request` is the product's main job, and reads as the list of its stages, each a
function from one typed state to the next, in the order of SillyTavern's ``Generate`` ->
``prepareOpenAIMessages`` -> ``populateChatCompletion``:

1. :func:`~.loading.load`: the request parsed (:mod:`.request`), its assets read;
2. :func:`~.texts.card_texts`: the card, persona and group texts as SillyTavern reads them;
3. :func:`~.chat.prepare_chat`: the chat edited for the generation type, its history;
4. :func:`~.lore.gather_lore`: every world-info source, activated;
5. :func:`~.front.plan_budget`: the context's room and the history it can reach;

(1-5 are the :class:`~.front.Front` every back end shares: :func:`~.front.build_front`), then the
chat-completion back end, :func:`chat_completion`:

6. :func:`~.placement.place`: the preset's prompt manager places everything (``builtin-st``);
7. :func:`~.fitting.fit_budget`: what the context budget keeps;
8. :func:`~.sending.finish`: squashing, the messages as sent, post-processing, the target's body.

Text passes (:mod:`.passes`) run inside the stages at the points SillyTavern's extensions rewrite
texts. The DSH system projection is never applied here: it belongs to the strategies that ask for
it. Where SillyTavern's behaviour depends on state a file does not carry (the chat lorebook, a
persona's lorebook, the Author's Note), the request names it; the defaults are SillyTavern's shipped
ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import Diagnostic, TemplateError, bound_diagnostics
from ..worldinfo import to_json
from .fitting import fit_budget
from .front import Front, build_front
from .passes import TextPass
from .placement import place
from .replay import SentSteps, st_record
from .request import StRequest
from .sending import finish

__all__ = ["StAssembly", "assemble_request", "chat_completion"]


@dataclass(slots=True)
class StAssembly:
    """The assembled request: ``messages`` is exactly what is sent."""

    messages: list[dict[str, Any]]
    warnings: list[Diagnostic]
    result: Any
    world_info: Any = None
    request_fields: dict[str, Any] = field(default_factory=dict)
    #: the request body's prompt part for ``options.target``: ``{"messages"}`` (OpenAI-compatible),
    #: ``{"system", "messages"}`` (Claude) or ``{"contents", "system_instruction"}`` (Google)
    body: dict[str, Any] = field(default_factory=dict)
    #: what the context budget allowed and what it left out (``None``: not counted, everything fit)
    budget: Any = None
    #: ``(message id, text, character ranges)`` per sent message, from which :attr:`provenance` is built
    provenance_source: list[Any] = field(default_factory=list, repr=False)
    #: what the provenance describes: the messages, or (with post-processing) the messages before it
    provenance_of: str = "messages"
    #: which regex script changed which text (script, its set and asset, the text's kind, label and depth)
    regex_edits: list[dict[str, Any]] = field(default_factory=list)
    _provenance: list[dict[str, Any]] | None = field(default=None, repr=False, compare=False)
    #: puts the template outputs' own ranges into :attr:`provenance_source` when the provenance is first read
    provenance_refine: Any = field(default=None, repr=False, compare=False)
    #: SillyTavern's template extensions as they ran (:class:`~.templates.TemplateRun`), or ``None``
    templates: Any = None
    #: what was done to the assembler's logical messages before sending them: with its record, the replay
    sent_steps: SentSteps | None = None

    @property
    def variables_patch(self) -> dict[str, list[dict[str, Any]]]:
        """What the templates wrote: JSON Patch operations per scope (``global``, ``chat``, ``message``)."""
        return self.templates.variables_patch if self.templates is not None else {}

    @property
    def provenance(self) -> list[dict[str, Any]]:
        """Span provenance of each sent message: which prompt, card field, world-info entry (book and
        uid), macro or chat message produced each range (UTF-16 offsets, as JavaScript counts).

        Built on first access, the same list after: one dict per span is the largest part of a
        request with many macros (40,000 spans: ~10 MB), so ``to_dict`` twice must not build it twice.
        """
        if self._provenance is None:
            from ..assembler.compose import build_provenance

            if self.provenance_refine is not None:
                self.provenance_source, self.provenance_refine = self.provenance_refine(self.provenance_source), None
            self._provenance = build_provenance(self.provenance_source)
        return self._provenance

    def to_dict(self) -> dict[str, Any]:
        """The CLI's ``--json`` form: messages, warnings, nodes, provenance, trace and record."""
        # the assembler's fields read one by one: its ``to_dict`` would also build the provenance of
        # the logical messages, which this form does not include
        inner = self.result
        out: dict[str, Any] = {
            "messages": self.messages,
            "body": self.body,
            "request_fields": self.request_fields,
            "budget": self.budget.to_dict() if self.budget is not None else None,
            "warnings": [d.to_dict() for d in self.warnings],
            "logical_messages": inner.logical_messages,
            "nodes": inner.nodes,
            "provenance": self.provenance,
            "provenance_of": self.provenance_of,
            "regex": self.regex_edits,
            "trace": {"world_info": _wi_trace(self.world_info)},
            "record": inner.record if self.sent_steps is None else st_record(inner.record, self.sent_steps, self.body),
        }
        if self.templates is not None and (self.templates.reads or self.variables_patch):
            out["templates"] = {"variables_patch": self.variables_patch, "reads": self.templates.reads,
                                "evaluated": self.templates.evaluated}
        return out

def _wi_trace(activation: Any) -> Any:
    if activation is None:
        return None
    return to_json(activation).get("trace")


def assemble_request(request: Mapping[str, Any] | StRequest, *, base_dir: str | Path | None = None,
                     passes: Sequence[TextPass] = ()) -> StAssembly:
    """Assemble what SillyTavern sends for ``request`` (a request-file object, see :mod:`.request`).

    ``passes`` are text passes (:mod:`.passes`) run over every text SillyTavern will send, in order.
    """
    text = request.get("text_completion") if isinstance(request, Mapping) else request.text_completion
    if text is not None:
        # the messages of a chat-completion request would not be what SillyTavern sends this request
        raise TemplateError("this request is for a text-completion API (it has text_completion): its prompt is "
                            "assembled by tavernbox.sillytavern.text_completion.assemble_text_completion (the CLI's "
                            "tavernbox assemble prints it; the service's POST /v1/completions forwards it)",
                            code="REQUEST_INVALID", path="$.text_completion")
    try:
        return chat_completion(build_front(request, base_dir=base_dir, passes=passes))
    except TemplateError as exc:
        if exc.code != "ASSEMBLY_EMPTY":
            raise
        # SillyTavern would send ``"messages": []``, which chat-completion APIs refuse: say why it is empty
        raise TemplateError(
            "nothing to send: the preset's enabled prompts, the card and the world info give no text, and no chat "
            "history is sent (SillyTavern would send an empty messages array, which chat-completion APIs refuse); "
            "enable a prompt with content or a chatHistory marker in the preset's prompt_order, or use a card with "
            "a description", code="ASSEMBLY_EMPTY") from None


def chat_completion(front: Front) -> StAssembly:
    """The chat-completion back end: the front placed, fitted to the budget and finished."""
    placed = place(front)
    fitted = fit_budget(placed)
    sent = finish(fitted)
    regex = next((p for p in front.loaded.passes if p.name == "regex" and p.report is not None), None)
    return StAssembly(sent.messages, bound_diagnostics(front.loaded.warnings), placed.result, front.lore.activation,
                      sent.fields,
                      sent.body, fitted.report, provenance_source=sent.span_source, provenance_of=sent.provenance_of,
                      regex_edits=regex.report() if regex is not None and regex.report is not None else [],
                      templates=front.loaded.templates, sent_steps=sent.steps, provenance_refine=sent.refine)
