"""Answers about long texts remembered per text *object*, so a prompt seen again costs nothing.

The assembler asks the same questions of every rendered text each request: its content hash, its
JSON size, whether it holds the renderer's reserved characters. Short texts are remembered by
value elsewhere (a dict keyed by the text); a long one (a card description, a preset's big
prompt, hundreds of KiB) would cost a full hash of the text for each lookup, as much as the answer
itself. But the render caches hand back the *same* string object for an unchanged prompt request
after request, so a table keyed by the object's identity (holding the object, so the identity
cannot be reused while it is kept) answers in constant time; a text built anew misses and is
answered the ordinary way. Bounded by entries and by the characters held, emptied when full.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

__all__ = ["TextMemo"]


class TextMemo(Generic[T]):
    """``compute(text)`` remembered by the identity of ``text`` (see the module docstring)."""

    def __init__(self, compute: Callable[[str], T], *, max_entries: int = 2048,
                 max_chars: int = 32 * 1024 * 1024) -> None:
        self.compute = compute
        self.max_entries, self.max_chars = max_entries, max_chars
        self._items: dict[int, tuple[str, T]] = {}
        self._chars = 0
        self._lock = threading.Lock()

    def __call__(self, text: str) -> T:
        found = self._items.get(id(text))
        if found is not None and found[0] is text:
            return found[1]
        value = self.compute(text)
        with self._lock:
            if len(self._items) >= self.max_entries or self._chars + len(text) > self.max_chars:
                self._items.clear()
                self._chars = 0
            if len(text) <= self.max_chars // 4:
                old = self._items.get(id(text))
                if old is not None:
                    self._chars -= len(old[0])
                self._items[id(text)] = (text, value)
                self._chars += len(text)
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._chars = 0
