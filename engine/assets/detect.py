"""Which kind of asset a parsed file is: card, world book, preset or MVU variables.

Detection looks at structure, not file names, because users rename files freely; the one exception is
MVU initvars, which are plain mappings indistinguishable from any other YAML unless they use MVU's
``[value, "description"]`` pairs, ``$meta`` or ``stat_data``, so a name containing ``initvar`` counts as
evidence there. When nothing matches, :func:`explain_unknown` says what the file looked like, so the
``ASSET_KIND_UNKNOWN`` message helps instead of shrugging.

A caller may force a kind (``load_asset(kind=...)``), which is how an initvar without ``initvar`` in
its name or a card missing its greeting is loaded. Forcing must not turn a world book into an empty
card, though: :func:`clear_kind` names the kind a file *unmistakably* is (a card spec, world-info
entries with keys and content, prompt-manager prompts, ``stat_data``), and only that evidence
overrides the caller (``ASSET_KIND_MISMATCH``). Weaker signs (an ``entries`` object of objects, which
an MVU tree may well hold) leave the forced kind alone.
"""

from __future__ import annotations

from typing import Any, Literal

from .mvu import is_value_with_description

__all__ = ["AssetKind", "KINDS", "clear_kind", "detect_kind", "explain_unknown"]

AssetKind = Literal["card", "world_book", "preset", "mvu"]
KINDS: tuple[str, ...] = ("card", "world_book", "preset", "mvu")

_CARD_SPECS = {"chara_card_v2", "chara_card_v3"}
_PRESET_KEYS = {
    "prompts",
    "prompt_order",
    "main_prompt",
    "nsfw_prompt",
    "jailbreak_prompt",
}
_SAMPLER_KEYS = {"temperature", "openai_max_context", "openai_max_tokens", "chat_completion_source"}


def _pair_ratio(value: Any, budget: list[int], acc: list[int]) -> None:
    """Count ValueWithDescription leaves (acc[0]) and all leaves (acc[1]) in a bounded walk."""
    budget[0] -= 1
    if budget[0] < 0:
        return
    if is_value_with_description(value):
        acc[0] += 1
        acc[1] += 1
    elif isinstance(value, dict):
        for v in value.values():
            _pair_ratio(v, budget, acc)
    elif isinstance(value, list):
        for v in value:
            _pair_ratio(v, budget, acc)
    else:
        acc[1] += 1


def _looks_like_old_initvar(data: dict[str, Any]) -> bool:
    """Old-style initvars make most leaves ``[value, "description"]`` pairs.

    Any YAML list of two strings is also such a pair, so one stray pair proves nothing: require that at
    least a quarter of the leaves are pairs (real initvars: 48-100%; rule and stage files: under 6%).
    """
    acc = [0, 0]
    _pair_ratio(data, [10_000], acc)
    return acc[0] >= 1 and acc[0] * 4 >= acc[1]


def detect_kind(data: Any, *, name: str | None = None) -> AssetKind | None:
    """The asset kind of parsed JSON/YAML ``data`` (``name`` is the file name, a hint for MVU only)."""
    if not isinstance(data, dict):
        return None
    spec = data.get("spec")
    if isinstance(spec, str) and spec in _CARD_SPECS:
        return "card"
    inner = data.get("data")
    if isinstance(inner, dict) and "name" in inner and ("first_mes" in inner or "description" in inner):
        return "card"
    if "name" in data and "first_mes" in data and ("description" in data or "personality" in data):
        return "card"
    entries = data.get("entries")
    if isinstance(entries, dict) and all(isinstance(v, dict) for v in entries.values()):
        return "world_book"
    if isinstance(entries, list) and all(isinstance(v, dict) for v in entries) and (
        not entries or any("keys" in v or "content" in v for v in entries)
    ):
        return "world_book"
    if isinstance(data.get("prompts"), list) or isinstance(data.get("prompt_order"), list):
        return "preset"
    if any(isinstance(data.get(k), str) for k in ("main_prompt", "nsfw_prompt", "jailbreak_prompt")) and (
        _SAMPLER_KEYS & data.keys()
    ):
        return "preset"
    if "$schema" in data or ("properties" in data and data.get("type") == "object"):
        return None  # a JSON Schema: MVU cards ship one, but it holds no variables
    if isinstance(data.get("stat_data"), dict) or isinstance(data.get("$meta"), dict):
        return "mvu"
    if name is not None and "initvar" in name.lower() and data:
        return "mvu"
    if data and _looks_like_old_initvar(data):
        return "mvu"
    return None


def clear_kind(data: Any) -> tuple[AssetKind, str] | None:
    """The kind ``data`` unmistakably is and the evidence, or ``None`` when it might be read as another.

    The file name is no evidence here (a caller that forces a kind knows better than the name).
    """
    kind = detect_kind(data)
    if kind is None:
        return None
    if kind == "card":
        spec = data.get("spec")
        if isinstance(spec, str) and spec in _CARD_SPECS:
            return kind, f"its 'spec' is {spec!r}"
        inner = data.get("data")
        for fields, where in ((inner, "'data'"), (data, "the top level")):
            if isinstance(fields, dict) and "name" in fields and "first_mes" in fields:
                return kind, f"{where} holds a character's 'name' and 'first_mes'"
        return None
    if kind == "world_book":
        entries = data["entries"]
        values = entries.values() if isinstance(entries, dict) else entries
        if any("content" in v and ("key" in v or "keys" in v) for v in values):
            return kind, "its 'entries' are world-info entries with keys and content"
        return None
    if kind == "preset":
        prompts = data.get("prompts")
        if isinstance(data.get("prompt_order"), list) or (
            isinstance(prompts, list) and any(isinstance(p, dict) and "identifier" in p for p in prompts)
        ):
            return kind, "it holds prompt-manager 'prompts'/'prompt_order'"
        if _SAMPLER_KEYS & data.keys() and any(isinstance(data.get(k), str) for k in _PRESET_KEYS):
            return kind, "it holds a preset's prompt and sampler fields"
        return None
    if isinstance(data.get("stat_data"), dict):
        return kind, "it holds 'stat_data'"
    if isinstance(data.get("$meta"), dict):
        return kind, "it holds an MVU '$meta'"
    return kind, "a quarter or more of its values are MVU [value, 'description'] pairs"


def explain_unknown(data: Any, *, syntax: str) -> str:
    """A sentence saying what an unrecognised file looked like, and how to load it anyway."""
    if isinstance(data, str):
        return f"plain text ({len(data)} characters), not a structured asset"
    if data is None:
        return "an empty document"
    if isinstance(data, list):
        return f"a {syntax} array of {len(data)} items, not an object"
    if not isinstance(data, dict):
        return f"a lone {syntax} {type(data).__name__}, not an object"
    keys = ", ".join(repr(k) for k in list(data)[:5])
    if "$schema" in data or ("properties" in data and data.get("type") == "object"):
        return f"a JSON Schema (keys {keys}), not an asset"
    return (
        f"a {syntax} object with keys {keys}{' ...' if len(data) > 5 else ''} that matches no card, world book, "
        "preset or MVU variables; pass kind='mvu' (--kind mvu) if it is an initvar"
    )
