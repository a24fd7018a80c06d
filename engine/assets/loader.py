"""``load_asset``: one entry point from a file (or its bytes) to a validated asset model.

The stages run in one direction: bytes -> text (:mod:`.decoding`) -> JSON/JSON5/YAML value -> kind
(:mod:`.detect`) -> model (one module per kind). Every repair along the way becomes a
:class:`~tavernbox.errors.Diagnostic` on the result; every rejection is a ``TemplateError`` whose code
starts with ``ASSET_`` and whose ``path`` (or line:column) says where.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import BoundedDiagnostics, Diagnostic, TemplateError, bound_diagnostics
from ..strict_json import NonFiniteNumber
from .cards import PNG_SIGNATURE, CharacterCard, parse_card, read_png_card
from .decoding import decode_bytes, parse_json5_text, parse_json_text, parse_yaml_text
from .detect import KINDS, clear_kind, detect_kind, explain_unknown
from .mvu import MvuVariables, parse_mvu
from .presets import GLOBAL_CHARACTER_ID, Preset, parse_preset
from .worldbooks import WorldBook, parse_world_book

__all__ = ["LoadedAsset", "load_asset", "parse_structured"]

AssetModelType = CharacterCard | WorldBook | Preset | MvuVariables

_JSON_SUFFIXES = {".json"}
_YAML_SUFFIXES = {".yaml", ".yml"}


@dataclass(frozen=True)
class LoadedAsset:
    """A loaded asset: its kind, the validated model, and what was noticed or repaired."""

    kind: str
    model: Any
    diagnostics: tuple[Diagnostic, ...] = ()
    name: str | None = None
    #: ``utf-8``, ``utf-8-sig``, ``cp1252`` or ``png``.
    encoding: str = "utf-8"
    #: ``json``, ``json5``, ``yaml`` or ``png:<chunk>``.
    syntax: str = "json"
    counts: dict[str, int] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """A JSON-ready summary: kind, name, counts and diagnostics (what ``tavernbox import`` prints)."""
        return {
            "kind": self.kind,
            "name": self.name,
            "encoding": self.encoding,
            "syntax": self.syntax,
            "counts": dict(self.counts),
            # identical findings shown a few times each, with how many more were like them
            "diagnostics": [d.to_dict() for d in bound_diagnostics(self.diagnostics)],
        }


def _counts(kind: str, model: Any) -> dict[str, int]:
    if kind == "card":
        card: CharacterCard = model
        book = card.character_book
        return {
            "greetings": len(card.greetings),
            "alternate_greetings": len(card.alternate_greetings),
            "book_entries": len(book.entries) if book is not None else 0,
            "tags": len(card.data.tags),
            "extensions": len(card.data.extensions),
        }
    if kind == "world_book":
        wb: WorldBook = model
        return wb.entry_counts
    if kind == "preset":
        preset: Preset = model
        prompts = preset.resolved_prompts()
        order = preset.order_for(GLOBAL_CHARACTER_ID)
        return {
            "prompts": len(prompts),
            "markers": sum(1 for p in prompts if p.marker),
            "in_chat": sum(1 for p in prompts if p.in_chat),
            "prompt_orders": len(preset.prompt_order),
            "enabled_in_global_order": sum(1 for o in order if o.enabled),
        }
    mvu: MvuVariables = model
    return {
        "variables": sum(1 for k in mvu.stat_data if not str(k).startswith("$")),
        "leaves": mvu.leaf_count(),
        "described": len(mvu.descriptions()),
    }


def parse_structured(text: str, *, suffix: str = "", prefer_yaml: bool = False) -> tuple[Any, str, list[Diagnostic]]:
    """Parse text as JSON, then JSON5, then YAML; return ``(value, syntax, diagnostics)``.

    A ``.json`` file must be strict JSON (unless ``prefer_yaml``, for MVU). Other text that starts like
    JSON but is not is retried as JSON5 and YAML (MVU's order) with a diagnostic; when all fail the
    *JSON* error position is reported, because JSON is what its author meant to write. Other text that is not YAML raises
    ``ASSET_KIND_UNKNOWN`` (for ``.txt``/``.md`` files: plain text) or ``ASSET_JSON`` (for ``.json``/``.yaml``).
    """
    head = text.lstrip()[:1]
    if head in ("{", "["):
        try:
            value, diags = parse_json_text(text)
            return value, "json", diags
        except TemplateError as json_error:
            if (suffix in _JSON_SUFFIXES and not prefer_yaml) or json_error.line is None \
                    or isinstance(json_error, NonFiniteNumber):
                # a .json file, a limit (depth, digits) or a NaN that another syntax would not lift
                raise
            where = f"{json_error.line}:{json_error.column}"
            try:
                value = parse_json5_text(text)
                return value, "json5", [
                    Diagnostic("ASSET_JSON", f"not strict JSON ({json_error.message} at {where}); read as JSON5",
                               severity="info", path="$")
                ]
            except TemplateError:  # JSON5 read it, and the rules refused it (a NaN, a lone surrogate)
                raise
            except Exception:  # json5 raises ValueError subclasses; any failure means "not JSON5"
                pass
            try:
                value = parse_yaml_text(text)
            except TemplateError:
                raise json_error from None
            if not isinstance(value, (dict, list)):
                raise json_error from None
            return value, "yaml", [
                Diagnostic(
                    "ASSET_JSON",
                    f"not valid JSON ({json_error.message} at {where}); read as YAML, as MVU does, which may "
                    "not be what the author meant",
                    severity="warning",
                    path="$",
                    data={"line": json_error.line, "column": json_error.column},
                )
            ]
    if suffix in _JSON_SUFFIXES and not prefer_yaml:
        value, diags = parse_json_text(text)  # raises ASSET_JSON with line:col
        return value, "json", diags
    try:
        return parse_yaml_text(text), "yaml", []
    except TemplateError as exc:
        if suffix in _YAML_SUFFIXES or prefer_yaml:
            raise
        raise TemplateError(
            f"not a structured asset: the text is neither JSON nor YAML ({exc.message} at "
            f"{exc.line}:{exc.column})",
            code="ASSET_KIND_UNKNOWN",
            line=exc.line,
            column=exc.column,
            path="$",
        ) from None


def _check_forced_kind(kind: str, value: Any) -> None:
    """Refuse a forced ``kind`` that the data unmistakably is not (``ASSET_KIND_MISMATCH``, path ``$``)."""
    found = clear_kind(value)
    if found is not None and found[0] != kind:
        detected, evidence = found
        raise TemplateError(
            f"kind {kind!r} was asked for, but the data is a {detected} ({evidence}); "
            f"load it as kind {detected!r}, or without a kind to detect it",
            code="ASSET_KIND_MISMATCH",
            path="$",
        )


#: the signatures of files people mistake for cards (an image saved without the card, an archive)
_NOT_ASSETS = ((b"\xff\xd8\xff", "a JPEG image"), (b"GIF8", "a GIF image"), (b"%PDF", "a PDF document"),
               (b"PK\x03\x04", "a ZIP archive"), (b"\x1f\x8b", "a gzip file"), (b"BM", "a BMP image"))


def _refuse_binary(data: bytes, kind: str | None) -> None:
    """``ASSET_KIND_UNKNOWN`` (``ASSET_INVALID`` when a kind was asked for) naming what a binary file is, rather than
    the encoding error that decoding it as text would give."""
    what = next((label for magic, label in _NOT_ASSETS if data.startswith(magic)), None)
    if what is None and data[8:12] == b"WEBP" and data.startswith(b"RIFF"):
        what = "a WebP image"
    if what is None and b"\x00" in data[:4096] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
        what = "binary data"
    if what is None:
        return
    wanted = "a PNG or JSON card (a card is a PNG with its card data, or JSON)" if kind in (None, "card") \
        else f"a JSON or YAML {kind.replace('_', ' ')}"
    raise TemplateError(f"the file is {what}, not {wanted}",
                        code="ASSET_INVALID" if kind is not None else "ASSET_KIND_UNKNOWN", path="$")


def load_asset(
    source: str | Path | bytes, *, kind: str | None = None, name: str | None = None, summary_only: bool = False
) -> LoadedAsset:
    """Load a card, world book, preset or MVU variables file and validate it.

    ``source`` is a file path (``str`` or ``Path``) or the file's bytes. ``kind`` forces the kind
    (``"card"``, ``"world_book"``, ``"preset"``, ``"mvu"``) instead of detecting it, for data whose kind
    detection cannot tell; data that is unmistakably another kind (:func:`~.detect.clear_kind`) is
    refused with ``ASSET_KIND_MISMATCH`` rather than read as, say, a card with no description.
    ``name`` overrides the name taken from the file stem. Raises ``TemplateError`` (code ``ASSET_*``,
    ``path`` a JSON path or ``line``/``column``) when the file cannot be used; repairs are listed in
    ``.diagnostics``. ``summary_only`` validates everything the same way but keeps only what the summary
    needs: a world book's model then has no entries (``tavernbox import`` on books of 100,000 entries).
    """
    if kind is not None and kind not in KINDS:
        raise TemplateError(f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}", code="INPUT_INVALID")
    file_name: str | None = None
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
    else:
        path = Path(source)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise TemplateError(f"cannot read {path}: {exc.strerror or exc}", code="INPUT_INVALID") from None
        file_name = path.name
        if name is None:
            name = path.stem
    suffix = Path(file_name).suffix.lower() if file_name else ""
    # a mistake repeated in every entry of a large book is kept a hundred times and counted after that
    diagnostics = BoundedDiagnostics()
    if data.startswith(PNG_SIGNATURE):
        value, chunk, diags = read_png_card(data)
        diagnostics.extend(diags)
        encoding, syntax = "png", f"png:{chunk}"
        if kind is None:
            kind = "card"
        else:
            _check_forced_kind(kind, value)
    else:
        _refuse_binary(data, kind)
        decoded = decode_bytes(data)
        diagnostics.extend(decoded.diagnostics)
        encoding = decoded.encoding
        value, syntax, diags = parse_structured(decoded.text, suffix=suffix, prefer_yaml=kind == "mvu")
        diagnostics.extend(diags)
        if kind is None:
            kind = detect_kind(value, name=file_name or name)
            if kind is None:
                raise TemplateError(
                    f"unknown kind: {explain_unknown(value, syntax=syntax.upper())}", code="ASSET_KIND_UNKNOWN", path="$"
                )
        else:
            _check_forced_kind(kind, value)
    model: Any
    if kind == "card":
        model = parse_card(value, diagnostics=diagnostics)
        display = model.name
    elif kind == "world_book":
        model = parse_world_book(value, name=name, diagnostics=diagnostics, keep_entries=not summary_only)
        display = model.name
    elif kind == "preset":
        model = parse_preset(value, name=name, diagnostics=diagnostics)
        display = name
    else:
        model = parse_mvu(value, name=name, source_format=syntax, diagnostics=diagnostics)
        display = name
    return LoadedAsset(
        kind=kind,
        model=model,
        diagnostics=tuple(diagnostics.finished()),
        name=display,
        encoding=encoding,
        syntax=syntax,
        counts=_counts(kind, model),
    )
