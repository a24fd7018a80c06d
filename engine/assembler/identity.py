"""Deterministic identities and content hashes.

Every id the assembler produces is derived from identity and content, never from a clock or a
random generator, so the same inputs give a byte-identical result and an unchanged contribution
keeps its id across requests (which is what lets a later request find an earlier anchor). The
hashed form is the pinned JSON serialisation of :mod:`.limits`, so hashes are reproducible.
"""

from __future__ import annotations

import hashlib
from typing import Any

from .limits import dumps, messages_json
from .text_memo import TextMemo

__all__ = ["content_hash", "derived_id", "messages_hash", "text_hash", "text_identity"]


def _canonical(value: Any) -> str:
    """The text hashed for ``value``: length-prefixed for strings and string tuples (cheap and
    unambiguous), the pinned JSON form for anything else."""
    if isinstance(value, str):
        return f"s{len(value)}:{value}"
    if isinstance(value, (tuple, list)):
        parts = ["t"]
        for v in value:  # one pass: most hashed tuples are all strings
            if not isinstance(v, str):
                break
            parts.append(f"{len(v)}:{v}")
        else:
            return "".join(parts)
    return "j" + dumps(value)


def content_hash(value: Any) -> str:
    """``sha256:<hex>`` of ``value`` (see :func:`_canonical`)."""
    return "sha256:" + hashlib.sha256(_canonical(value).encode("utf-8", "surrogatepass")).hexdigest()


def messages_hash(messages: list[dict[str, Any]]) -> str:
    """``content_hash(messages)`` of a list of message dicts, from each message's remembered text."""
    if not messages:
        return content_hash(messages)
    return "sha256:" + hashlib.sha256(("j" + messages_json(messages)[0]).encode("utf-8", "surrogatepass")).hexdigest()


def text_hash(text: str, role: str) -> str:
    """The content hash of one text contribution: its role and text."""
    return content_hash((role, text))


def derived_id(*parts: Any) -> str:
    """A UUID-shaped id (version nibble 5, RFC 4122 variant) derived from ``parts``."""
    digest = bytearray(hashlib.sha256(_canonical(parts).encode("utf-8", "surrogatepass")).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50
    digest[8] = (digest[8] & 0x3F) | 0x80
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


_TEXT_IDS: dict[tuple[str, str, str], tuple[str, str]] = {}
#: per long text object: ``(key, role) -> (hash, id)``
_LONG_TEXT_IDS: TextMemo[dict[tuple[str, str], tuple[str, str]]] = TextMemo(lambda _text: {})
_TEXT_IDS_MAX = 16384
_TEXT_IDS_MAX_TEXT = 4096  # longer texts are hashed every time (at most 64 MiB of keys held)


def text_identity(key: str, role: str, text: str) -> tuple[str, str]:
    """``(text_hash(text, role), derived_id("text", key, that hash))`` of one text contribution.

    Both are pure functions of their inputs and an unchanged prompt asks for the same pair every
    request, so they are remembered (a bounded table, emptied when full)."""
    if len(text) > _TEXT_IDS_MAX_TEXT:
        # a long text is not keyed by value (each lookup would hash it all) but by its object:
        # an unchanged long prompt comes back from the render caches as the same string
        pairs = _LONG_TEXT_IDS(text)
        found = pairs.get((key, role))
        if found is None:
            digest = text_hash(text, role)
            found = pairs[(key, role)] = (digest, derived_id("text", key, digest))
        return found
    found = _TEXT_IDS.get((key, role, text))
    if found is None:
        digest = text_hash(text, role)
        found = (digest, derived_id("text", key, digest))
        if len(_TEXT_IDS) >= _TEXT_IDS_MAX:
            _TEXT_IDS.clear()
        _TEXT_IDS[(key, role, text)] = found
    return found
