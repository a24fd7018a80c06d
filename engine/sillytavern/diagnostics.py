"""What a request's warnings say about the user's material: the asset, prompt or entry each concerns.

Two kinds of finding reach ``assemble_request``'s warnings from below it, and both would otherwise name nothing
the user wrote:

- an asset's own diagnostics from reading it (``ASSET_ENCODING`` for a file read as Windows-1252, entries read as
  disabled for lacking ``enabled``, values normalised...): :func:`asset_warnings` re-issues the warnings of each
  asset the request used, its message starting with where the request names it (``$.books[0]``) and its file, its
  JSON path kept (the path inside the asset);
- a macro's diagnostic from rendering a prompt (``MACRO_UNKNOWN``: left as written): :func:`named_render_warning`
  names the preset prompt, card field or world-info entry (book, uid, comment) whose text held the macro, from the
  block the assembler tagged it with.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import Diagnostic

__all__ = ["asset_warnings", "named_render_warning", "said_before"]

#: card fields as the preset's markers name them
_CARD_FIELDS = {"charDescription": "description", "charPersonality": "personality", "scenario": "scenario",
                "mes_example": "example messages",
                "first_mes": "first message"}


def asset_warnings(view: Any, where: str, source: Any) -> list[Diagnostic]:
    """The warnings (and errors kept as warnings) of an asset read for the request, naming it.

    ``view`` is the read asset (its ``diagnostics``), ``where`` the request's JSON path to it and ``source`` what the
    request gave there (a path or an object).
    """
    label = f"{where} ({Path(source).name})" if isinstance(source, (str, Path)) else where
    out = []
    for d in getattr(view, "diagnostics", ()):
        if d.severity not in ("warning", "error"):
            continue
        data = {**d.data, "asset": where}
        if isinstance(source, (str, Path)):
            data["file"] = str(source)
        out.append(replace(d, message=f"{label}: {d.message}", data=data))
    return out


def said_before(d: Diagnostic, warnings: Sequence[Diagnostic]) -> bool:
    """Whether ``d`` (an asset finding a source made again when it read the asset) is already among ``warnings``
    as :func:`asset_warnings` said it, naming the asset."""
    return d.code.startswith("ASSET_") and any(
        w.code == d.code and w.data.get("asset") and w.message.endswith(": " + d.message) for w in warnings)


def _entry_of(text: str, entries: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    if not text:
        return None
    return next((e for e in entries if isinstance(e.get("content"), str) and text in e["content"]), None)


def named_render_warning(d: Diagnostic, preset: Mapping[str, Any], preset_name: str,
                         entries: Sequence[Mapping[str, Any]], char: str) -> Diagnostic:
    """A render's diagnostic with the prompt, card field (of the card ``char``) or world-info entry it was raised in."""
    block = str(d.data.get("block_id") or "")
    field = str(d.data.get("field") or "")
    if not block.startswith("preset:"):
        return d
    entry = _entry_of(str(d.data.get("text") or ""), entries) if "worldInfo" in block or ":inject:" in block \
        or field == "worldInfoDepth" else None
    if entry is not None:
        comment = f" ({entry['comment']})" if entry.get("comment") else ""
        origin = f"world-info entry {entry.get('uid')}{comment} of the book {entry.get('book')!r}"
        data = {"book": entry.get("book"), "uid": entry.get("uid")}
    elif field == "personaDescription":
        origin, data = "the persona description ($.user.persona)", {"prompt": field}
    elif field in _CARD_FIELDS:
        origin = f"the {_CARD_FIELDS[field]} of {char!r}"
        data = {"card_field": field}
    else:
        names = {p.get("identifier"): p.get("name") for p in preset.get("prompts") or () if isinstance(p, Mapping)}
        name = f" ({names[field]})" if names.get(field) else ""
        origin = f"the preset {preset_name!r}, prompt {field!r}{name}"
        data = {"prompt": field}
    return replace(d, message=f"{origin}: {d.message}", data={**d.data, **data})
