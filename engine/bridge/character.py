"""The character source: ``getchar(name?)`` reads only the current character's description.

Upstream renders a character definition template for any character; here only the selected
character is readable, and only its description (seed 003): another name gives "".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import TemplateError
from .leases import Resolution, Revocable
from .revision import revision_of

__all__ = ["CharacterSource"]


class CharacterSource:
    """The current character (a card model or a chara_card_v2/v3 object)."""

    adapter_id = "tavern.characters"

    def __init__(self, card: Any) -> None:
        if isinstance(card, Mapping):
            from ..assets import parse_card

            card = parse_card(dict(card))
        if not hasattr(card, "description"):
            raise TemplateError("the card is neither a CharacterCard nor a character card object", code="INPUT_INVALID")
        self.name: str = card.name
        self.description: str = card.description
        self.id = f"character:{self.name}"
        self.lease = Revocable()

    def describe(self, name: str | int | float) -> Resolution:
        key = str(name)
        content = self.description if key in ("", self.name) else ""
        return Resolution(self.id, self.adapter_id, content, revision_of(content), None, self.lease.check_current)
