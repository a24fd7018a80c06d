"""Claims: settle, before any placement, which position each referenced field appears at.

A field included by a reference, a source macro or an explicit claim appears exactly once, at
the referencing position, whether the referencing rule comes before or after the referenced one
in the list. Claims are therefore settled over all roots first; emission then skips a block that
someone else claimed. The first claimer wins. A reference chain that comes back to itself is
``ASSEMBLY_REFERENCE_CYCLE``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Protocol

from ..errors import TemplateError

if TYPE_CHECKING:
    from .blocks import Block
    from .registry import ResolvedEntry

__all__ = ["ClaimPlan", "settle_claims"]


class ClaimPlan(Protocol):
    """What settling claims reads of a plan (the placement planner, which calls :func:`settle_claims`).

    Written here as an interface so claims sit below placement instead of importing it back.
    """

    @property
    def macro_table(self) -> Mapping[str, tuple[ResolvedEntry, Block]]: ...

    def key(self, entry: ResolvedEntry, block: Block) -> str: ...

    def roots(self) -> Iterator[tuple[ResolvedEntry, Block]]: ...

    def find_block(self, source_id: str, block_id: str) -> tuple[ResolvedEntry, Block] | None: ...

    def macro_uses(self, block: Block) -> list[tuple[int, int, str]]: ...

    def usable(self, entry: ResolvedEntry, block: Block) -> bool: ...

    def targets(self, entry: ResolvedEntry, ref: Block) -> list[tuple[ResolvedEntry, Block]]: ...


def settle_claims(plan: ClaimPlan) -> dict[str, str]:
    """Return ``{claimed block key: claimer block key}`` for the request."""
    claimed: dict[str, str] = {}

    def follow(entry: ResolvedEntry, ref: Block, ref_key: str, path: frozenset[str]) -> None:
        for t_entry, t_block in plan.targets(entry, ref):
            t_key = plan.key(t_entry, t_block)
            if t_key == ref_key or t_key in path:
                raise TemplateError(
                    f"cyclic source block reference through {t_key!r}", code="ASSEMBLY_REFERENCE_CYCLE"
                )
            claimed.setdefault(t_key, ref_key)
            if t_block.type == "reference":
                follow(t_entry, t_block, t_key, path | {t_key})

    for entry, block in plan.roots():
        owner = plan.key(entry, block)
        for source_id, block_id in block.claims:
            target = plan.find_block(source_id, block_id)
            if target is not None:
                claimed.setdefault(plan.key(*target), owner)
        if block.type == "text":
            for _s, _e, name in plan.macro_uses(block):
                t_entry, t_block = plan.macro_table[name]
                if plan.usable(t_entry, t_block):
                    claimed.setdefault(plan.key(t_entry, t_block), owner)
        elif block.type == "reference":
            follow(entry, block, owner, frozenset({owner}))
    return claimed
