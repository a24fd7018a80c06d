"""The placed node: one block rendered to messages, with its provenance.

Placement (:mod:`.placement`) makes nodes; the native arrangement (:mod:`.native`), depth insertion
(:mod:`.depth`) and snapshot retention (:mod:`.snapshots`) reorder or rebuild them. The type lives
on its own so those stages depend on it, not on the planner that makes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any

__all__ = ["Node", "SpanInfo"]

SpanInfo = dict[str, Any]


@dataclass(slots=True)
class Node:
    """One placed contribution: a block rendered to zero or more messages, with its provenance."""

    key: str
    rule_id: str
    source_id: str
    plugin_id: str
    block_id: str
    name: str
    role: str
    native: bool
    messages: list[dict[str, Any]]
    spans: list[list[tuple[int, int, SpanInfo]]]
    hash: str
    depth: int | None
    order: float
    lifetime: str
    stability: str
    resource_id: str | None = None
    field: str | None = None
    locked: bool = False
    lock_reason: str | None = None
    children: list[dict[str, Any]] = dc_field(default_factory=list)
    adjusted_for_tools: bool = False
