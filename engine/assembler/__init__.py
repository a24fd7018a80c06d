"""The compact assembler: registered sources -> the exact chat-completion message array.

``Assembler(registry).assemble(request) -> AssemblyResult``; ``replay(record)`` rebuilds the
messages of a recorded assembly without calling any source. See :mod:`.assemble` for the stages.
"""

from __future__ import annotations

from .assemble import Assembler
from .compose import AssemblyRequest, AssemblyResult, canonical_message
from .projection import Logical, project_system
from .record import replay
from .registry import CancellationToken, SourceDescriptor, SourceRegistry
from .rules import Preset, Rule, dump_preset, load_preset, parse_preset

__all__ = [
    "Assembler",
    "AssemblyRequest",
    "AssemblyResult",
    "CancellationToken",
    "Logical",
    "Preset",
    "Rule",
    "SourceDescriptor",
    "SourceRegistry",
    "canonical_message",
    "dump_preset",
    "load_preset",
    "parse_preset",
    "project_system",
    "replay",
]
