"""Content revisions: a stable hash of JSON data, so a read can name exactly what it saw."""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["revision_of"]


def revision_of(value: Any) -> str:
    """``sha256:<first 16 hex digits>`` of ``value``'s canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
