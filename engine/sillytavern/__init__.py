"""SillyTavern's generation: a request in, exactly the request SillyTavern 1.18 sends out.

One module per stage, in the order of SillyTavern's ``Generate`` -> ``prepareOpenAIMessages`` ->
``populateChatCompletion`` (``docs/ARCHITECTURE.md``, "The SillyTavern path"):

* the front every back end shares (:func:`build_front` -> :class:`Front`): :mod:`.request` (the
  request schema), :mod:`.loading` (the assets), :mod:`.texts` (card, persona, Author's Note, group),
  :mod:`.chat` (the chat prepared for the generation type), :mod:`.lore` (world info),
  :mod:`.front` (the context's room and the reachable history);
* the chat-completion back end (:func:`chat_completion`): :mod:`.placement`, :mod:`.fitting`
  (over :mod:`.budget`), :mod:`.sending` (over :mod:`.postprocess`).

Text passes (:mod:`.passes`: :class:`TextPass` over each :class:`Text`) are the extension point for
the stages that rewrite texts (regex scripts, templates); :func:`assemble_request` takes them in order.
"""

from __future__ import annotations

from .assemble import StAssembly, assemble_request, chat_completion
from .front import Front, build_front
from .passes import PASS_ORDER, TEXT_KINDS, Text, TextKind, TextPass
from .request import StRequest, parse_request

__all__ = ["PASS_ORDER", "TEXT_KINDS", "Front", "StAssembly", "StRequest", "Text", "TextKind", "TextPass",
           "assemble_request", "build_front", "chat_completion", "parse_request"]
