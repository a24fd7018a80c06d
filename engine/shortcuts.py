"""Which performance shortcuts a call may take, passed by name: :class:`Shortcuts`.

Every shortcut gives exactly what a plain path gives (ARCHITECTURE's table of shortcuts names the
test that proves each). A call takes them all by default; :data:`PLAIN` switches them all off and
runs the reference path, and a test comparing one shortcut with its plain path switches off that
one (``Shortcuts(plans=False)``). The value travels with the call, so two threads may run with
different shortcuts at once (no module global to patch).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT", "PLAIN", "Shortcuts"]


@dataclass(frozen=True, slots=True)
class Shortcuts:
    """The shortcuts a call may take; each field off runs the plain path it must equal."""

    #: macros: a level evaluated again runs from its plan of literals and pre-bound calls, kept
    #: outputs included (``macros/plan.py``); off: ``RenderState.evaluate`` item by item
    plans: bool = True
    #: macros: arguments and bodies are evaluated from their parent's parse, and a compiled
    #: template keeps its sub-parses and pairings between renders; off: every argument and body
    #: is re-parsed from its text, as SillyTavern does, in every render
    reuse_parse: bool = True
    #: macros: a text is parsed region by region (a simple macro read off one regex match, a
    #: malformed region recovered on its own, ``macros/parser.py``); off: the whole-document
    #: lexer and parser
    regions: bool = True


#: every shortcut (what a call takes when it names none)
DEFAULT = Shortcuts()
#: no shortcut: the reference path
PLAIN = Shortcuts(plans=False, reuse_parse=False, regions=False)
