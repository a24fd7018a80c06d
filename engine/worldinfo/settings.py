"""Global world-info settings under SillyTavern's names, plus the budget's context size and tokenizer.

Defaults are SillyTavern's shipped user defaults (``default/content/settings.json``), not its code
defaults: a user who never opened the settings panel has recursion and whole-word matching on.
``max_context`` (tokens the budget percentage applies to) defaults to 4096, and ``tokenizer`` to
``"words"`` (whitespace-separated words): we ship no model tokenizer, words are deterministic and
are what the conformance data was produced with. ``"estimate"`` is SillyTavern's character-count
guess (``ceil(len / 3.35)``) for callers who want a closer figure without a tokenizer.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import Diagnostic, TemplateError
from ..unknown_keys import unknown_key_warnings
from ..world_info_fields import SETTING_FIELDS

__all__ = ["STRATEGIES", "WorldInfoSettings", "budget_tokens", "resolve_token_counter", "count_words"]

#: ``world_info_character_strategy`` values
STRATEGIES = {0: "evenly", 1: "character_first", 2: "global_first"}

TokenCounter = Callable[[str], int]


_WORDS = re.compile("[^\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]+")


def count_words(text: str) -> int:
    """Tokens as whitespace-separated words (the conformance data's rule).

    Whitespace is JavaScript's ``\\s`` (it includes the BOM and excludes ``\\x1c``-``\\x1f`` and
    ``\\x85``, which Python's ``str.split`` treats as spaces).
    """
    return len(_WORDS.findall(text))


def estimate_tokens(text: str) -> int:
    """SillyTavern's tokenizer-less guess: one token per 3.35 characters, rounded up."""
    return math.ceil(len(text) / 3.35)


TOKENIZERS: dict[str, TokenCounter] = {"words": count_words, "estimate": estimate_tokens}


@dataclass(frozen=True, slots=True)
class WorldInfoSettings:
    """The global settings that shape a scan (SillyTavern's names, snake-cased without the prefix)."""

    depth: int = 2
    budget: float = 25
    budget_cap: int = 0
    include_names: bool = True
    recursive: bool = True
    case_sensitive: bool = False
    match_whole_words: bool = True
    character_strategy: int = 1
    min_activations: int = 0
    min_activations_depth_max: int = 0
    max_recursion_steps: int = 0
    use_group_scoring: bool = False
    max_context: int = 4096
    tokenizer: str = "words"

    #: SillyTavern name -> (attribute, type), from the field table
    _FIELDS = {f.st_name: (f.attr, f.kind) for f in SETTING_FIELDS if f.scan}

    @classmethod
    def unknown_keys(cls, data: Any, *, path: str = "$") -> list[Diagnostic]:
        """``INPUT_UNKNOWN_KEY`` warnings for setting names :meth:`from_mapping` does not read.

        They are still ignored (a settings object may carry more), but a misspelt or unprefixed name
        (``depth`` for ``world_info_depth``) is named with the JSON path and the setting it likely meant.
        """
        return unknown_key_warnings(data, cls._FIELDS, path=path, what="world-info setting")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None, *, path: str = "$") -> WorldInfoSettings:
        """Read SillyTavern-named settings; unknown names are ignored (see :meth:`unknown_keys` for warnings).

        Raises ``TemplateError(INPUT_INVALID)`` with the JSON path for a value of the wrong type.
        """
        if data is None:
            return cls()
        if isinstance(data, WorldInfoSettings):
            return data
        if not isinstance(data, Mapping):
            raise TemplateError("settings should be an object", code="INPUT_INVALID", path=path)
        values: dict[str, Any] = {}
        for name, (attr, kind) in cls._FIELDS.items():
            if name not in data or data[name] is None:
                continue
            value = data[name]
            where = f"{path}.{name}"
            if kind is bool:
                if isinstance(value, bool):
                    values[attr] = value
                elif isinstance(value, (int, float)):
                    values[attr] = bool(value)
                else:
                    raise TemplateError(f"{name} should be true or false", code="INPUT_INVALID", path=where)
            elif kind is str:
                if not isinstance(value, str) or value not in TOKENIZERS:
                    raise TemplateError(f"{name} should be one of {sorted(TOKENIZERS)}", code="INPUT_INVALID",
                                        path=where)
                values[attr] = value
            else:
                if isinstance(value, str):
                    try:
                        value = float(value)
                    except ValueError:
                        raise TemplateError(f"{name} should be a number", code="INPUT_INVALID", path=where) from None
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                    raise TemplateError(f"{name} should be a number", code="INPUT_INVALID", path=where)
                if abs(value) > 1e12:
                    raise TemplateError(f"{name} is out of range", code="INPUT_INVALID", path=where)
                values[attr] = int(value) if kind is int else value
        if values.get("character_strategy", 1) not in STRATEGIES:
            raise TemplateError("world_info_character_strategy should be 0 (evenly), 1 (character first) or "
                                "2 (global first)", code="INPUT_INVALID", path=f"{path}.world_info_character_strategy")
        return cls(**values)


def budget_tokens(settings: WorldInfoSettings) -> int:
    """``round(budget% x max_context) || 1``, then capped: the scan's token budget.

    JavaScript's ``Math.round`` rounds halves up, unlike Python's ``round``.
    """
    budget = math.floor(settings.budget * settings.max_context / 100 + 0.5) or 1
    if settings.budget_cap > 0 and budget > settings.budget_cap:
        budget = settings.budget_cap
    return budget


def resolve_token_counter(settings: WorldInfoSettings, token_counter: TokenCounter | None) -> TokenCounter:
    """The caller's counter if given, else the named tokenizer."""
    return token_counter if token_counter is not None else TOKENIZERS[settings.tokenizer]
