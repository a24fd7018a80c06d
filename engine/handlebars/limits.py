"""The budget of one Handlebars render: template size, nesting, output size and CPU time.

Handlebars runs in the caller's process (no sandbox: the language has no loops of its own
beyond ``#each`` over the data it is given, and no code), so, as the macro engine does, it keeps a
budget of its own and is refused rather than cut when it passes one: a render gives
SillyTavern's text or an error with a stable code, never a text that depends on the machine.

- ``max_template_chars``: longer templates are refused before they are read
  (``HANDLEBARS_TOO_LARGE``);
- ``max_nesting``: blocks and sub-expressions nested deeper (``HANDLEBARS_NESTING_LIMIT``; the
  renderer recurses once a level, so this bounds its stack);
- ``max_output_chars``: the text so far passing it stops the render (``HANDLEBARS_OUTPUT_LIMIT``;
  nested ``#each`` over data multiply, so a short template can ask for a huge text);
- ``cpu_seconds``: CPU time of the calling thread for parse and render
  (``HANDLEBARS_TIME_LIMIT``), read every 256 tokens or statements; the clock starts at the first
  read, so a render may run up to 256 steps past the budget's start uncounted.
"""

from __future__ import annotations

import time
from contextvars import ContextVar
from dataclasses import dataclass

from ..errors import TemplateError
from ..spans import Span

__all__ = ["HandlebarsLimits", "cpu_budget", "checkpoint"]

_now = time.thread_time


@dataclass(frozen=True, slots=True)
class HandlebarsLimits:
    """What one render may use. The defaults are far above any story string SillyTavern ships
    (the largest is under 2 KiB and nests three blocks deep)."""

    max_template_chars: int = 1 << 20
    max_nesting: int = 64
    max_output_chars: int = 8 << 20
    cpu_seconds: float = 1.0

    def __post_init__(self) -> None:
        for name in ("max_template_chars", "max_nesting", "max_output_chars"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if not self.cpu_seconds > 0:
            raise ValueError(f"cpu_seconds must be positive (got {self.cpu_seconds!r})")


#: ``[deadline in thread CPU seconds (None until the first checkpoint), budget]`` of the render
#: running on this thread, or None. The clock starts at the first checkpoint (after 256 tokens or
#: statements), so a short story string never reads it: reading the thread's CPU clock costs far
#: more than rendering one on some machines (~1.7 ms measured on a loaded virtual machine).
_DEADLINE: ContextVar[list[float | None] | None] = ContextVar("tavernbox_handlebars_deadline", default=None)


class cpu_budget:
    """``with cpu_budget(seconds):`` runs a parse and render under one CPU deadline."""

    __slots__ = ("_seconds", "_token")

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._token = None

    def __enter__(self) -> None:
        self._token = _DEADLINE.set([None, self._seconds])  # type: ignore[assignment]

    def __exit__(self, *exc_info: object) -> None:
        if self._token is not None:
            _DEADLINE.reset(self._token)
            self._token = None


def checkpoint(offset: int, source: str) -> None:
    """Raise ``HANDLEBARS_TIME_LIMIT`` at ``offset`` once the current deadline has passed."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return
    at = deadline[0]
    if at is None:
        deadline[0] = _now() + deadline[1]  # type: ignore[operator]
        return
    if _now() > at:
        raise TemplateError(
            f"the story string used more than {deadline[1]:g} s of CPU time and was stopped here "
            "(raise the limit, or render less data)",
            code="HANDLEBARS_TIME_LIMIT",
            span=Span(offset, offset),
            source=source,
        )
