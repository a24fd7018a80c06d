"""Text passes: named steps run over every text SillyTavern will send, each text with its kind and facts.

SillyTavern's extensions rewrite the prompt's texts at fixed points of generation: the regex
extension rewrites each chat message where ``Generate`` builds ``coreChat`` (with the message's depth)
and each world-info entry's content where the activated entries are read; ST-Prompt-Template
evaluates its templates over the finished messages. Each such extension is one :class:`TextPass`
here, not an edit inside the stages: the stages call :func:`run_passes` at the points listed below,
and a pass says which kinds of text it reads.

======================  =====================================================  ==========================
kind                    where the stages hand it over                          facts
======================  =====================================================  ==========================
``chat_message``        the chat as generation sees it, after the generation   ``index``, ``role``,
                        type's edits (:mod:`.chat`); the history and the       ``depth``, ``is_user``,
                        world-info scan read the result, the chat macros the   ``is_system``, ``name``,
                        stored text                                            ``reasoning``
``world_info_entry``    each activated entry's content, before placement and   ``book``, ``uid``,
                        outlets (:mod:`.lore`)                                 ``position``, ``depth``
``preset_prompt``       each prompt of the preset, before placement            ``identifier``, ``role``
                        (:mod:`.texts`)
``card_field``          the card's fields as SillyTavern reads them            ``field``
                        (:mod:`.texts`)
``persona``             the persona description (:mod:`.texts`)                (none)
``author_note``         the Author's Note's content (:mod:`.texts`)            ``position``, ``depth``
``final_message``       each message about to be sent, after squashing and     ``index``, ``role``
                        before post-processing and the target's conversion
                        (:mod:`.postprocess`)
======================  =====================================================  ==========================

``depth`` is SillyTavern's: 0 is the newest message, and a ``continue`` generation shifts every
depth down by one (the continued message is at -1), as ``Generate`` counts it for the regex
extension. ``is_system`` is SillyTavern's narrator flag as the prompt sees it (hidden messages
never reach a pass). ``reasoning`` is ``None``: the chat reader does not keep a message's
reasoning yet.

Passes run in the order given. The passes a request asks for itself come first, in
:data:`PASS_ORDER` (``regex`` before ``templates``): the pass named ``N`` is built by
``build_pass(loaded) -> TextPass | None`` of the module ``tavernbox.sillytavern.pass_N`` when that
module exists (:func:`request_passes`; each pass lives in its own module, and adding one edits no
other), then the caller's ``passes``. With no pass, :func:`run_passes` is never called: the request
is byte-identical and costs what it did.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["PASS_ORDER", "TEXT_KINDS", "Text", "TextKind", "TextPass", "request_passes", "run_passes", "wants"]

TextKind = Literal["chat_message", "world_info_entry", "preset_prompt", "card_field", "persona", "author_note",
                   "final_message"]
TEXT_KINDS: tuple[TextKind, ...] = ("chat_message", "world_info_entry", "preset_prompt", "card_field", "persona",
                                    "author_note", "final_message")

#: the passes planned, in the order they run when a request has several (issue 25's regex scripts,
#: issue 26's ST-Prompt-Template)
PASS_ORDER = ("regex", "templates")


@dataclass(frozen=True, slots=True)
class Text:
    """One text a pass reads: what it is (``kind``), the text, and the facts of its kind."""

    kind: TextKind
    text: str
    facts: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TextPass:
    """A named pass: ``apply`` returns the new text of each :class:`Text` whose kind is in ``kinds``."""

    name: str
    kinds: frozenset[TextKind]
    apply: Callable[[Text], str]


def wants(passes: Sequence[TextPass], kind: TextKind) -> bool:
    """Whether any pass reads texts of ``kind`` (a stage with none to run skips the texts entirely)."""
    return any(kind in p.kinds for p in passes)


def run_passes(passes: Sequence[TextPass], kind: TextKind, text: str, facts: Mapping[str, Any] | None = None) -> str:
    """``text`` after every pass that reads ``kind``, in order: each pass reads the previous one's result."""
    facts = facts if facts is not None else {}
    for p in passes:
        if kind in p.kinds:
            text = p.apply(Text(kind, text, facts))
            if not isinstance(text, str):
                raise TypeError(f"the text pass {p.name!r} returned {type(text).__name__}, not a string")
    return text


_BUILDERS: list[tuple[str, Callable[[Any], TextPass | None]]] = []
_LOOKED_UP: list[bool] = []


def _builders() -> list[tuple[str, Callable[[Any], TextPass | None]]]:
    """``(name, build_pass)`` of each pass module present, in :data:`PASS_ORDER` (looked up once)."""
    if not _LOOKED_UP:
        for name in PASS_ORDER:
            module = f"{__package__}.pass_{name}"
            if importlib.util.find_spec(module) is not None:
                _BUILDERS.append((name, importlib.import_module(module).build_pass))
        _LOOKED_UP.append(True)
    return _BUILDERS


def request_passes(loaded: Any) -> tuple[TextPass, ...]:
    """The passes the request asks for (:data:`PASS_ORDER`), each built from the loaded request by its
    module's ``build_pass``; a module that finds nothing to do in this request returns ``None``."""
    built = (build(loaded) for _name, build in _builders())
    return tuple(p for p in built if p is not None)

