"""Character cards: chara_card_v2/v3 JSON and PNG cards, with their embedded books.

SillyTavern exports v3 cards with the v1 fields duplicated at the top level and the real data under
``data``; we read ``data`` (as SillyTavern does) and keep the top-level copies as unknown fields so a
card round-trips. PNG cards carry the JSON base64-encoded in ``tEXt`` chunks named ``chara`` (v2) and
``ccv3`` (v3); when both are present the v3 chunk wins, as in SillyTavern. The same text in compressed
``zTXt`` or ``iTXt`` chunks is read too (under a decompression cap), which SillyTavern does not do. The embedded
``character_book`` is converted to a world book exactly as SillyTavern converts it on import; scripts,
regexes and extension data ride along untouched and are never run.
"""

from __future__ import annotations

import base64
import binascii
import struct
import zlib
from typing import Any

from pydantic import ConfigDict, Field, PrivateAttr

from ..errors import Diagnostic, TemplateError
from .base import AssetModel, type_name, validate_model
from .decoding import parse_json_text
from .paths import join_path
from .worldbooks import CharacterBook, WorldBook, convert_card_book, parse_card_book
from .frozen import as_plain

__all__ = ["CharacterCard", "CharacterCardData", "DepthPrompt", "parse_card", "read_png_card", "PNG_SIGNATURE"]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CARD_SPECS = {"chara_card_v2", "chara_card_v3"}
#: v1 fields that v2+ moved under ``data`` (ST's v1 name for creator notes is ``creatorcomment``).
_V1_FIELDS = ("name", "description", "personality", "scenario", "first_mes", "mes_example", "tags")


class DepthPrompt(AssetModel):
    """The character's note inserted at a chat depth (``extensions.depth_prompt``); ST's defaults."""

    model_config = ConfigDict(extra="allow", coerce_numbers_to_str=True)

    prompt: str = ""
    depth: int = 4
    role: str = "system"


class CharacterCardData(AssetModel):
    """The ``data`` object of a v2/v3 card; absent fields get the empty values SillyTavern uses."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, coerce_numbers_to_str=True)

    name: str
    description: str = ""
    personality: str = ""
    scenario: str = ""
    first_mes: str = ""
    mes_example: str = ""
    creator_notes: str = ""
    system_prompt: str = ""
    post_history_instructions: str = ""
    alternate_greetings: list[str] = Field(default_factory=list)
    group_only_greetings: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    creator: str = ""
    character_version: str = ""
    extensions: dict[str, Any] = Field(default_factory=dict)
    character_book: CharacterBook | None = None


class CharacterCard(AssetModel):
    """A character card. Accessors read ``data``; ``character_book`` is the converted world book."""

    spec: str | None = None
    #: "2.0"/"3.0" by the spec; some editors write a number, which SillyTavern does not check.
    spec_version: str | int | float | None = None
    data: CharacterCardData
    _book: WorldBook | None = PrivateAttr(default=None)

    @property
    def name(self) -> str:
        """The character's name."""
        return self.data.name

    @property
    def description(self) -> str:
        """The character description (``{{description}}``)."""
        return self.data.description

    @property
    def personality(self) -> str:
        """The personality summary (``{{personality}}``)."""
        return self.data.personality

    @property
    def scenario(self) -> str:
        """The scenario (``{{scenario}}``)."""
        return self.data.scenario

    @property
    def first_mes(self) -> str:
        """The first greeting."""
        return self.data.first_mes

    @property
    def mes_example(self) -> str:
        """Example dialogue (``<START>``-separated blocks)."""
        return self.data.mes_example

    @property
    def alternate_greetings(self) -> list[str]:
        """Swipeable alternatives to the first greeting."""
        return self.data.alternate_greetings

    @property
    def greetings(self) -> list[str]:
        """The first greeting followed by the alternates (empty first greeting left out)."""
        return ([self.data.first_mes] if self.data.first_mes else []) + list(self.data.alternate_greetings)

    @property
    def system_prompt(self) -> str:
        """The card's main-prompt override (empty: no override)."""
        return self.data.system_prompt

    @property
    def post_history_instructions(self) -> str:
        """The card's post-history (jailbreak) override (empty: no override)."""
        return self.data.post_history_instructions

    @property
    def creator_notes(self) -> str:
        """Notes for the user, not sent to the model unless a macro asks."""
        return self.data.creator_notes

    @property
    def character_version(self) -> str:
        """The author's version string."""
        return self.data.character_version

    @property
    def depth_prompt(self) -> DepthPrompt | None:
        """``extensions.depth_prompt`` (the character's note), or ``None`` when absent or empty."""
        raw = self.data.extensions.get("depth_prompt")
        if not isinstance(raw, dict):
            return None
        return DepthPrompt.model_validate(_normalise_depth_prompt(raw, "$", []))

    @property
    def character_book(self) -> WorldBook | None:
        """The embedded book converted as SillyTavern converts it on import, or ``None``."""
        if self._book is None and self.data.character_book is not None:
            self._book = convert_card_book(
                self.data.character_book,
                base_path="$.data.character_book",
                name=f"{self.name}'s Lorebook",
                diagnostics=[],
            )
        return self._book


def parse_card(raw: Any, *, base_path: str = "$", diagnostics: list[Diagnostic] | None = None) -> CharacterCard:
    """Validate a card object (v1, v2 or v3) and convert its book; errors carry a JSON path."""
    raw = as_plain(raw)  # a cached asset's frozen views (or a dict around them) read as plain data
    diags = diagnostics if diagnostics is not None else []
    if not isinstance(raw, dict):
        raise TemplateError(f"a card must be an object, not {type_name(raw)}", code="ASSET_INVALID", path=base_path)
    spec = raw.get("spec")
    if spec is None and "data" not in raw:
        # v1: the fields sit at the top level; SillyTavern upgrades such cards to v2 on import.
        data = {k: raw[k] for k in _V1_FIELDS if k in raw}
        if "creatorcomment" in raw:
            data["creator_notes"] = raw["creatorcomment"]
        raw = {**raw, "data": data}
        data_path = base_path
        diags.append(
            Diagnostic("ASSET_CONVERTED", "a v1 card (no spec); its top-level fields are read as v2 data", severity="info", path=base_path)
        )
    else:
        data_path = join_path(base_path, "data")
        if spec is not None and not (isinstance(spec, str) and spec in CARD_SPECS):
            diags.append(
                Diagnostic(
                    "ASSET_SPEC_UNKNOWN",
                    f"unknown card spec {spec!r}; read as chara_card_v2",
                    severity="warning",
                    path=join_path(base_path, "spec"),
                )
            )
        if not isinstance(raw.get("data"), dict):
            raise TemplateError(
                f"'data' must be an object, not {type_name(raw.get('data'))}",
                code="ASSET_INVALID" if "data" in raw else "ASSET_FIELD_MISSING",
                path=data_path,
            )
    data = raw["data"]
    if "name" not in data:
        raise TemplateError("the card has no name", code="ASSET_FIELD_MISSING", path=join_path(data_path, "name"))
    book_raw = data.get("character_book")
    book: CharacterBook | None = None
    book_path = join_path(data_path, "character_book")
    if book_raw is not None:
        if not isinstance(book_raw, dict):
            raise TemplateError(
                f"character_book must be an object, not {type_name(book_raw)}", code="ASSET_INVALID", path=book_path
            )
        book = parse_card_book(book_raw, base_path=book_path, diagnostics=diags)
    fields = {k: v for k, v in data.items() if k != "character_book"}
    if "character_book" in data:
        fields["character_book"] = book
    card_data = validate_model(CharacterCardData, fields, data_path)
    card = validate_model(CharacterCard, {**raw, "data": card_data}, base_path)
    if book is not None:
        card._book = convert_card_book(book, base_path=book_path, name=f"{card.name}'s Lorebook", diagnostics=diags)
    depth_prompt = card.data.extensions.get("depth_prompt")
    if depth_prompt is not None:
        if not isinstance(depth_prompt, dict):
            raise TemplateError(
                f"depth_prompt must be an object, not {type_name(depth_prompt)}",
                code="ASSET_INVALID",
                path=join_path(data_path, "extensions", "depth_prompt"),
            )
        dp_path = join_path(data_path, "extensions", "depth_prompt")
        validate_model(DepthPrompt, _normalise_depth_prompt(depth_prompt, dp_path, diags), dp_path)
    return card


def _normalise_depth_prompt(raw: dict[str, Any], path: str, diags: list[Diagnostic]) -> dict[str, Any]:
    """Read ``depth`` as SillyTavern's UI does: a numeric string is its number, anything else the default 4.

    Cards exported by some editors write ``"depth": ""``; rejecting the whole card for an unused note
    would be worse than the default.
    """
    depth = raw.get("depth")
    if depth is None or isinstance(depth, int) and not isinstance(depth, bool):
        return raw
    if isinstance(depth, str) and depth.strip().lstrip("-").isdigit():
        value = int(depth)
    elif isinstance(depth, float) and depth.is_integer():
        value = int(depth)
    else:
        value = 4
    diags.append(
        Diagnostic(
            "ASSET_VALUE_NORMALISED",
            f"depth_prompt.depth {depth!r} is not a whole number; read as {value}",
            severity="info" if value != 4 or depth == "" else "warning",
            path=join_path(path, "depth"),
            data={"original": depth},
        )
    )
    return {**raw, "depth": value}


#: Largest card text a compressed PNG chunk may expand to. Real cards are a few MB of base64; the cap
#: keeps a decompression bomb (a 1 GiB zTXt in a few KB) to bounded time and memory.
MAX_PNG_TEXT = 32 * 1024 * 1024


def _inflate(data: bytes, kw: str, where: str) -> bytes:
    """zlib-inflate a chunk's text, refusing more than :data:`MAX_PNG_TEXT` bytes without producing them."""
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(data, MAX_PNG_TEXT + 1)
    except zlib.error as exc:
        raise TemplateError(f"the {kw!r} chunk does not decompress: {exc}", code="ASSET_PNG", path=where) from None
    if len(out) > MAX_PNG_TEXT:
        raise TemplateError(
            f"the {kw!r} chunk decompresses to more than {MAX_PNG_TEXT // (1024 * 1024)} MiB; refused",
            code="ASSET_PNG",
            path=where,
        )
    return out


def _chunk_text(ctype: bytes, rest: bytes, kw: str, where: str) -> str:
    """The text of a ``tEXt``/``zTXt``/``iTXt`` chunk after its keyword (Latin-1, or UTF-8 for iTXt).

    SillyTavern writes and reads only ``tEXt``; cards re-saved by image tools may carry the same text
    compressed (``zTXt``) or as international text (``iTXt``), so those are read too (a deviation).
    """
    if ctype == b"tEXt":
        return rest.decode("latin-1")
    if ctype == b"zTXt":
        if rest[:1] != b"\x00":
            raise TemplateError(f"the {kw!r} zTXt chunk uses an unknown compression method", code="ASSET_PNG", path=where)
        return _inflate(rest[1:], kw, where).decode("latin-1")
    if len(rest) < 2:
        raise TemplateError(f"the {kw!r} iTXt chunk is truncated", code="ASSET_PNG", path=where)
    compressed, method = rest[0], rest[1]
    _language, sep1, tail = rest[2:].partition(b"\x00")
    _translated, sep2, text = tail.partition(b"\x00")
    if not (sep1 and sep2) or compressed not in (0, 1) or (compressed and method != 0):
        raise TemplateError(f"the {kw!r} iTXt chunk is malformed", code="ASSET_PNG", path=where)
    raw = _inflate(text, kw, where) if compressed else text
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TemplateError(f"the {kw!r} iTXt chunk is not UTF-8 (byte {exc.start})", code="ASSET_ENCODING",
                            path=where) from None


def read_png_card(data: bytes) -> tuple[Any, str, list[Diagnostic]]:
    """The card JSON of a PNG card: ``(value, chunk keyword, diagnostics)``; v3 (``ccv3``) preferred.

    Chunks are walked by their length fields only (no image decoding); a CRC mismatch is reported but
    tolerated because many card editors write wrong CRCs and SillyTavern does not check them.
    """
    if not data.startswith(PNG_SIGNATURE):
        raise TemplateError("not a PNG file (bad signature)", code="ASSET_PNG", path="$")
    diags: list[Diagnostic] = []
    texts: dict[str, str | TemplateError] = {}
    pos = len(PNG_SIGNATURE)
    while pos + 8 <= len(data):
        length, ctype = struct.unpack(">I4s", data[pos : pos + 8])
        body_end = pos + 8 + length
        if body_end + 4 > len(data):
            raise TemplateError(
                f"truncated PNG: chunk {ctype.decode('latin-1')!r} at byte {pos} runs past the end",
                code="ASSET_PNG",
                path="$",
            )
        body = data[pos + 8 : body_end]
        (crc,) = struct.unpack(">I", data[body_end : body_end + 4])
        if ctype in (b"tEXt", b"zTXt", b"iTXt"):
            keyword, sep, rest = body.partition(b"\x00")
            kw = keyword.decode("latin-1").lower()
            if sep and kw in ("chara", "ccv3"):
                where = f"$png.{kw}"
                if zlib.crc32(ctype + body) != crc:
                    diags.append(
                        Diagnostic("ASSET_PNG", f"the {kw!r} chunk has a wrong CRC; read anyway", severity="warning", path=where)
                    )
                try:
                    texts[kw] = _chunk_text(ctype, rest, kw, where)
                except TemplateError as exc:  # kept: the other chunk may still be readable
                    texts[kw] = exc
        if ctype == b"IEND":
            break
        pos = body_end + 4
    if not texts:
        raise TemplateError("the PNG has no 'chara' or 'ccv3' text chunk (tEXt, zTXt or iTXt)", code="ASSET_PNG",
                            path="$")
    last_error: TemplateError | None = None
    for kw in ("ccv3", "chara"):
        if kw not in texts:
            continue
        chunk = texts[kw]
        if isinstance(chunk, TemplateError):
            last_error = chunk
            continue
        try:
            decoded = base64.b64decode(chunk.strip(), validate=True)
        except (binascii.Error, ValueError):
            last_error = TemplateError(f"the {kw!r} chunk is not valid base64", code="ASSET_PNG", path=f"$png.{kw}")
            continue
        try:
            text = decoded.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            last_error = TemplateError(
                f"the {kw!r} chunk is not UTF-8 JSON (byte {exc.start})", code="ASSET_ENCODING", path=f"$png.{kw}"
            )
            continue
        try:
            value, more = parse_json_text(text)
        except TemplateError as exc:
            last_error = TemplateError(f"the {kw!r} chunk: {exc.message}", code="ASSET_JSON", path=f"$png.{kw}",
                                       line=exc.line, column=exc.column)
            continue
        if last_error is not None:
            diags.append(
                Diagnostic(last_error.code, f"{last_error.message}; the 'chara' chunk was used", severity="warning", path=last_error.path)
            )
        return value, kw, diags + more
    assert last_error is not None
    raise last_error
