"""World-info activation: SillyTavern 1.18's lorebook scan, deterministic, bounded and traced.

``activate_world_info(books, chat, settings, state=None, seed=0)`` returns an :class:`Activation`
with the entries per prompt position, a trace of every entry's fate, the timed-effects state to
persist, and the random draws it used. ``to_json`` gives the CLI's ``--json`` object.
"""

from __future__ import annotations

from .activation import Activation, ScanContext, activate_world_info, sort_entries, to_json
from .entries import CharacterFilter, Entry, Position, WorldBook, normalize_book, normalize_books
from .output import ActivatedEntry, DepthGroup, Positions
from .scan import ChatTail
from .settings import WorldInfoSettings
from .trace import REASONS, Draw, StepRecord, Trace, TraceRecord

__all__ = [
    "REASONS",
    "ActivatedEntry",
    "Activation",
    "CharacterFilter",
    "ChatTail",
    "DepthGroup",
    "Draw",
    "Entry",
    "Position",
    "Positions",
    "ScanContext",
    "StepRecord",
    "Trace",
    "TraceRecord",
    "WorldBook",
    "WorldInfoSettings",
    "activate_world_info",
    "normalize_book",
    "normalize_books",
    "sort_entries",
    "to_json",
]
