"""SillyTavern's generation: a request in, exactly the request SillyTavern 1.18 sends out.

One module per stage, in the order of SillyTavern's ``Generate`` -> ``prepareOpenAIMessages`` ->
``populateChatCompletion`` (see ``docs/ARCHITECTURE.md``, "The SillyTavern path"):
:mod:`.request` (the request schema), :mod:`.assemble` (the stages in order).
"""

from __future__ import annotations

from .assemble import StAssembly, assemble_request
from .request import StRequest, parse_request

__all__ = ["StAssembly", "StRequest", "assemble_request", "parse_request"]
