"""What a render returns or raises, and how a caller cancels one.

These are the only types that cross from the sandbox to its callers; they hold plain Python
values (the worker never hands a VM object to anyone).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import TemplateError

__all__ = ["CancelToken", "SandboxError", "SandboxResult", "Usage"]


@dataclass(frozen=True, slots=True)
class Usage:
    """What one render consumed, as measured by the host (not reported by the template).

    ``time_ms`` is CPU time charged to the budget (compile plus run, every VM entry);
    ``memory_bytes`` the bytes the VM's allocator held when the render ended
    (QuickJS's ``malloc_size``, the figure its memory limit is checked against); ``output_bytes`` the UTF-8 size of
    the output appended so far; ``passes`` the number of job-queue drains; ``job_steps`` the
    pending-job steps of all passes.
    """

    time_ms: float
    memory_bytes: int
    output_bytes: int
    passes: int
    job_steps: int


EMPTY_USAGE = Usage(time_ms=0.0, memory_bytes=0, output_bytes=0, passes=0, job_steps=0)


@dataclass(frozen=True, slots=True)
class SandboxResult:
    """A successful render: the exact output text (NULs and lone surrogates preserved).

    In bridge mode a pass can also end with ``pending`` set: the canonical JSON text of the
    first lookup the answers table could not serve (``["kind", arg, ...]``). ``text`` is then
    empty and meaningless: the pass is void and the host replays the template with the answer.
    """

    text: str
    usage: Usage
    pending: str | None = None
    #: 1-based (line, column) in the program of the call that missed, when the engine reported it.
    pending_at: tuple[int, int] | None = None


class SandboxError(TemplateError):
    """A render that failed inside the sandbox or tripped one of its budgets.

    ``code`` is one of the ``TEMPLATE_*`` codes. For ``TEMPLATE_SYNTAX`` and
    ``TEMPLATE_EXECUTION_FAILED``, ``js_line``/``js_column`` are 1-based positions inside the
    program when the engine reported them, and ``js_name``/``js_message`` the JavaScript error's
    name and message, already reduced to plain strings inside the VM. ``line``/``column`` stay
    unset: mapping program positions back to the template is the compiler's job. ``js_stack`` is
    the engine's backtrace when the VM's interrupt stopped the render (``TEMPLATE_TIME_LIMIT``):
    its ``<input>:line:column`` frames, innermost first, say where the program was running (they
    may include the harness's own lines, which share the ``<input>`` name). ``js_template`` is
    the template the program had marked (``__tb.mark``) when a budget tripped, with
    ``Limits.template_time_ms`` set.
    """

    default_code = "TEMPLATE_EXECUTION_FAILED"

    def __init__(
        self,
        message: str,
        *,
        code: str,
        js_line: int | None = None,
        js_column: int | None = None,
        js_name: str | None = None,
        js_message: str | None = None,
        usage: Usage | None = None,
        js_stack: str | None = None,
        js_template: int | None = None,
    ) -> None:
        super().__init__(message, code=code)
        self.js_line = js_line
        self.js_column = js_column
        self.js_name = js_name
        self.js_message = js_message
        self.js_stack = js_stack
        self.js_template = js_template
        self.usage = usage if usage is not None else EMPTY_USAGE


class CancelToken:
    """A flag a caller sets from any thread to stop a render at its next boundary.

    The render in flight sees it between pending-job steps (the worker polls its pipe); a render
    not yet started fails at once. Either way the error code is ``TEMPLATE_CANCELLED``.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []

    @property
    def cancelled(self) -> bool:
        """True once ``cancel()`` was called."""
        return self._event.is_set()

    def cancel(self) -> None:
        """Request cancellation; idempotent and safe from any thread."""
        with self._lock:
            if self._event.is_set():
                return
            self._event.set()
            callbacks = list(self._callbacks)
        for callback in callbacks:
            callback()

    def _subscribe(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` on cancellation (at once if already cancelled)."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return
        callback()

    def _unsubscribe(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)
