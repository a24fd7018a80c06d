"""Byte limits and the pinned serialisation they are measured in.

Both limits are charged in UTF-8 bytes of one fixed JSON form, so a count is the same on every
run and machine: compact separators, non-ASCII kept, keys in the order the message dict holds them
(messages are canonicalised on entry to ``id, role, content, name, tool_calls, tool_call_id``),
and lone surrogates escaped as ``\\udXXX`` the way JavaScript's well-formed ``JSON.stringify`` does
(Python would otherwise refuse to encode them).

- ``max_profile_bytes`` bounds the *logical* extra content: the serialised array of non-native
  messages before projection. Default 512 KiB, at most 2 MiB; ``ASSEMBLY_PROFILE_LIMIT`` above.
- ``PROJECTION_MAX_BYTES`` (2 MiB, can only be lowered) bounds the *physical* overhead of the
  complete system snapshots; ``ASSEMBLY_PROJECTION_LIMIT`` above.

Content over a limit is rejected, never truncated or deduplicated: a silently shortened prompt is
worse than a clear error.
"""

from __future__ import annotations

import json
import re
from json.encoder import c_make_encoder, encode_basestring
from typing import Any

from ..errors import TemplateError
from .text_memo import TextMemo

__all__ = [
    "DEFAULT_PROFILE_BYTES",
    "MAX_PROFILE_BYTES",
    "PROJECTION_MAX_BYTES",
    "SOURCE_MAX_BLOCKS",
    "SOURCE_MAX_BYTES",
    "check_limit",
    "check_profile_bytes",
    "dumps",
    "json_size",
    "logical_extra_bytes",
    "message_json",
    "messages_json",
    "string_json_size",
]

DEFAULT_PROFILE_BYTES = 512 * 1024
MAX_PROFILE_BYTES = 2 * 1024 * 1024
PROJECTION_MAX_BYTES = 2 * 1024 * 1024
#: per source output: ``ASSEMBLY_SOURCE_OUTPUT_LIMIT``
SOURCE_MAX_BLOCKS = 10_000
SOURCE_MAX_BYTES = 8 * 1024 * 1024

_SURROGATE = re.compile("[\ud800-\udfff]")


def _make_encoder() -> Any:
    """The C encoder for the pinned form, built once (``json.dumps`` builds one per call, which
    costs more than encoding a short message); ``None`` on interpreters without the C accelerator."""
    if c_make_encoder is None:  # pragma: no cover - CPython always has it
        return None
    default = json.JSONEncoder().default  # the standard TypeError for non-JSON values
    # no circular-reference markers: a cycle ends in RecursionError, and _text then lets
    # json.dumps report it the usual way
    return c_make_encoder(None, default, encode_basestring, None, ":", ",", False, False, False)


_ENCODE = _make_encoder()


def _text(value: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)``, faster."""
    if _ENCODE is not None:
        try:
            return "".join(_ENCODE(value, 0))
        except RecursionError:
            pass
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def dumps(value: Any) -> str:
    """The pinned JSON text of ``value`` (see the module docstring)."""
    text = _text(value)
    if not text.isascii() and _SURROGATE.search(text):
        text = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


def json_size(value: Any) -> int:
    """UTF-8 byte length of the pinned JSON text of ``value``."""
    text = _text(value)
    try:
        return len(text.encode("utf-8"))  # no lone surrogate: the pinned text is this text
    except UnicodeEncodeError:
        return len(dumps(value).encode("utf-8"))


_MESSAGE_JSON: dict[tuple[tuple[str, Any], ...], tuple[str, int]] = {}
_MESSAGE_JSON_MAX = 8192
#: a message longer than this is serialised every time; the table holds at most
#: ``_MESSAGE_JSON_BUDGET`` characters of texts (a long system snapshot is still remembered)
_MESSAGE_JSON_MAX_CHARS = 1 << 20
_MESSAGE_JSON_BUDGET = 16 << 20
_message_json_chars = 0


def message_json(message: Any) -> tuple[str, int]:
    """``(dumps(message), json_size(message))`` of one message.

    The same message is measured and hashed several times per request (its node hash, the
    logical and projection byte charges, the record's messages hash) and again by every later
    request of the chat, so the pinned text of a message whose values are all strings or null
    is remembered by content (a bounded table, emptied when full). Any other value (tool calls,
    content parts, numbers, which a key built from its items could confuse: ``1 == True``) is
    serialised each time.
    """
    global _message_json_chars
    if type(message) is not dict:
        text = dumps(message)
        return text, len(text.encode("utf-8"))
    try:
        key: tuple[tuple[str, Any], ...] | None = tuple(message.items())
        found = _MESSAGE_JSON.get(key)  # type: ignore[arg-type]
    except TypeError:  # an unhashable value (tool calls, content parts): never remembered
        key = found = None
    if found is not None:
        # only all-string/null keys are stored, and a string or null equals nothing else,
        # so a hit is a message with exactly these values (no ``1 == True`` confusion)
        return found
    text = dumps(message)
    found = (text, len(text.encode("utf-8")))
    if key is not None and len(text) <= _MESSAGE_JSON_MAX_CHARS:
        for v in message.values():
            if type(v) is not str and v is not None:
                return found
        if len(_MESSAGE_JSON) >= _MESSAGE_JSON_MAX or _message_json_chars > _MESSAGE_JSON_BUDGET:
            _MESSAGE_JSON.clear()
            _message_json_chars = 0
        _MESSAGE_JSON[key] = found
        _message_json_chars += 2 * len(text)  # the text and (about) the key's strings
    return found


_STRING_SIZES: dict[str, int] = {}
_LONG_STRING_SIZES: TextMemo[int] = TextMemo(json_size)


def string_json_size(text: str) -> int:
    """``json_size(text)`` of one string, remembered (bounded like :func:`message_json`): a
    prompt's text is measured again by every request that projects it."""
    if len(text) > 4096:  # by object, not by value (see :mod:`.text_memo`)
        return _LONG_STRING_SIZES(text)
    size = _STRING_SIZES.get(text)
    if size is None:
        size = json_size(text)
        if len(text) <= 4096:  # at most 8192 x 4096 characters of keys held
            if len(_STRING_SIZES) >= _MESSAGE_JSON_MAX:
                _STRING_SIZES.clear()
            _STRING_SIZES[text] = size
    return size


def messages_json(messages: list[Any]) -> tuple[str, int]:
    """``(dumps(messages), json_size(messages))`` built from the remembered texts of the items.

    Compact JSON of an array is its items' texts joined by commas inside brackets, and the
    surrogate escaping is per character, so this is exactly the pinned text of the whole list."""
    parts = [message_json(m) for m in messages]
    return "[" + ",".join(t for t, _ in parts) + "]", 2 + sum(n for _, n in parts) + max(0, len(parts) - 1)


def check_limit(value: Any, *, name: str, maximum: int) -> int:
    """Validate a byte limit: a non-negative integer (never a bool, float or string), at most ``maximum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TemplateError(f"{name} must be a non-negative integer, got {value!r}", code="ASSEMBLY_LIMIT_INVALID")
    if value > maximum:
        raise TemplateError(f"{name} is at most {maximum} bytes, got {value}", code="ASSEMBLY_LIMIT_INVALID")
    return value


def logical_extra_bytes(messages: list[dict[str, Any]], native: list[bool]) -> int:
    """Bytes of the serialised array of the non-native messages (sources' contributions)."""
    return messages_json([m for m, n in zip(messages, native, strict=True) if not n])[1]


def check_profile_bytes(charge: int, limit: int) -> None:
    """Reject a logical charge above ``limit`` (equality is accepted)."""
    if charge > limit:
        raise TemplateError(
            f"assembled content exceeds {limit} bytes ({charge} bytes of source content)",
            code="ASSEMBLY_PROFILE_LIMIT",
        )
