"""The CPU budget of one macro render: parse and evaluation stop with ``MACRO_TIME_LIMIT``.

Every stage of the engine is linear in its input, but the constant is Python's: a 2 MiB text
of distinct malformed macros (``{{a1:}}{{a2:}}...``, each recovered as SillyTavern's parser
does) costs ~50 us a macro, ~9 s in all, and a text of 130,000 scoped ``{{if}}`` pairs ~3 s. The
EJS sandbox stops a template at its CPU budget (``TEMPLATE_TIME_LIMIT``); macro rendering runs
in the caller's process, so it keeps a budget of its own, in the same terms: CPU time of the
calling thread (``time.thread_time``), so other threads of a server do not count against it.

The budget is a deadline kept per thread. :func:`cpu_budget` opens one for a stage (a parse,
a render); a stage inside another (a render's sub-parses, a nested render) keeps the earlier
deadline. The stages' loops call :func:`check` every 2,048 characters or 256 macros (a clock
read costs ~0.4 us), so a text past the budget stops within a few milliseconds of it. Nothing of the
render is kept when it stops: the error carries the offset it had reached.

A render that passes its budget is refused rather than cut, so output never depends on the
machine's speed: a render either gives SillyTavern's text or an error. The default (1 s) is
over 20 times what the costliest text of the corpora takes to render, cold (~45 ms).
"""

from __future__ import annotations

import time
from contextvars import ContextVar, Token

from ..errors import Span, TemplateError

__all__ = ["MAX_CPU_SECONDS", "CHECK_CHARS", "CHECK_EVERY", "check", "cpu_budget", "enter_budget", "leave_budget"]

#: CPU seconds one render (parse and evaluation) may use by default.
MAX_CPU_SECONDS = 1.0
#: Loop steps between two clock reads in the loops that step through nested work (evaluation).
CHECK_EVERY = 256
#: Characters of the text between two clock reads in the loops that move forward through it (the
#: lexers and parsers): one comparison a step instead of a counter
CHECK_CHARS = 2048

_now = time.thread_time

#: ``[thread_time past which the current stage stops (None until the first check), the budget
#: in seconds]``, or ``None``: no budget. A context variable: per thread, and per task where a
#: host runs renders in tasks (a render itself never awaits), and ~40 ns to read.
_DEADLINE: ContextVar[list | None] = ContextVar("tavernbox_macro_deadline", default=None)
_get = _DEADLINE.get


class cpu_budget:
    """``with cpu_budget(seconds):`` runs the block under a budget of ``seconds`` of this
    thread's CPU (``None``: none of its own). An enclosing budget still applies: the earlier of
    the two deadlines holds.

    For a text shorter than :data:`CHECK_CHARS` (``size``) entering reads no clock: the clock
    starts at the stage's first :func:`check`, after :data:`CHECK_EVERY` macros at most (a few
    milliseconds). A cached render of a short prompt costs ~10 us, and reading the thread's CPU
    clock ~0.4 us of it; most never reach a check. A longer text starts the clock at once (its
    first regex matches may scan far before a loop checks). A class rather than a
    generator-based context manager for the same reason (``contextlib``'s cost ~4.7 us).
    """

    __slots__ = ("_seconds", "_size", "_token")

    def __init__(self, seconds: float | None, size: int = CHECK_CHARS) -> None:
        self._seconds = seconds
        self._size = size
        self._token: Token[list | None] | None = None

    def __enter__(self) -> None:
        self._token = enter_budget(self._seconds, self._size)

    def __exit__(self, *exc_info: object) -> None:
        token = self._token
        if token is not None:
            self._token = None
            _DEADLINE.reset(token)


def enter_budget(seconds: float | None, size: int) -> Token[list | None] | None:
    """:class:`cpu_budget`'s entry as a call, for the per-render paths (then ``leave_budget``).

    ``ValueError`` unless ``seconds`` is positive (a NaN deadline is never passed, and a
    negative one would stop a long text at once but a short one only at its first check).
    """
    if seconds is None:
        return None
    if not seconds > 0:
        raise ValueError(f"the CPU time limit must be positive seconds, or None (got {seconds!r})")
    outer = _get()
    if outer is None:
        return _DEADLINE.set([_now() + seconds if size >= CHECK_CHARS else None, seconds])
    # a stage inside another: its own budget counts only if it ends first (it started later)
    if outer[0] is None:
        if seconds >= outer[1]:
            return None
        outer[0] = _now() + outer[1]  # the outer clock starts now too (it may only under-count)
    at = _now() + seconds
    return _DEADLINE.set([at, seconds]) if at < outer[0] else None


def leave_budget(token: Token[list | None] | None) -> None:
    """Close what :func:`enter_budget` opened."""
    if token is not None:
        _DEADLINE.reset(token)


def check(offset: int, source: str | None = None) -> None:
    """Raise ``MACRO_TIME_LIMIT`` at ``offset`` when the current budget is spent (the first
    check of a stage starts its clock)."""
    deadline = _get()
    if deadline is None:
        return
    at = deadline[0]
    if at is None:
        deadline[0] = _now() + deadline[1]
        return
    if _now() > at:
        raise TemplateError(
            f"rendering the macros used more than {deadline[1]:g} s of CPU time and was stopped here; "
            "the text is too large or too costly to render (split it, or raise the time limit)",
            code="MACRO_TIME_LIMIT",
            span=Span(offset, offset),
            source=source,
        )
