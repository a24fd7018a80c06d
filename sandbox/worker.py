"""One sandbox worker process: renders programs in fresh QuickJS contexts, JSON in and out.

Run by ``pool.py`` as ``python worker.py`` (by path, so that it imports nothing but the standard
library and the binding). Why a separate process: the binding converts hostile values on the
host side with the GIL held and no time limit, and some built-ins loop in C without polling the
interrupt, so a render can hang or crash its process; the parent kills and replaces us then.

Protocol on stdin/stdout (all ASCII except the UTF-8 result text):

* worker -> parent, once: ``{"op":"ready","pid":N,"harness":"bytecode"|"source"}\\n``; after every
  prewarmed context
  ``{"op":"warm"}\\n``
* parent -> worker: ``{"op":"render","id":N,"size":BYTES,"limits":{...}}\\n`` followed by BYTES
  of payload: the ASCII JSON array ``[program, [variables]]``, or in bridge mode (the template
  API) ``[program, [null], [answers, bridge_call_limit]]``: a pass then also ends when a lookup
  misses (the result is ``{"ok":null,"pending":"<request>"}``) or a bridge failure sticks;
  ``{"op":"cancel","id":N}\\n`` at any time (ignored unless render N is running).
* lease checks (bridge mode, only when the render header has ``"leases":true``, i.e. the host
  holds at least one lease): after every pending-job step the worker writes
  ``{"op":"lease","id":N,"step":K}\\n`` and waits for ``{"op":"lease","id":N,"ok":true}\\n`` or
  ``{"op":"lease","id":N,"ok":false,"code":C,"message":M}\\n``; a refusal ends the render with
  error code C and no result. The wait is not charged to the template's CPU budget (only time
  inside JS is); the parent's wall deadline keeps running.
* worker -> parent, per render: ``{"id":N,"usage":{...},"error":E,"result":R}\\n`` where R is the
  harness's own JSON (``{"ok":true,"text":...}``) or null, and E null or
  ``{"code","message","name","js_message","line","column"}``; a time trip by the interrupt
  carries ``"stack"`` instead: the interrupt's ``<input>:line:column`` frames, one a line.

Time: the binding's limit restarts on every entry into JS, so the budget is kept here: before
each entry ``set_time_limit(remaining)``, after it the ``process_time`` delta is charged. A
render whose charged time reached the budget is ``TEMPLATE_TIME_LIMIT`` whatever the exception
text says (a template can throw the string ``'InternalError: interrupted'``, not burn our clock).
"""

from __future__ import annotations

import ctypes
import json
from collections import OrderedDict
import os
import re
import select
import struct
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import _quickjs

HARNESS_PATH = Path(__file__).with_name("harness.js")
INTRINSICS_PATH = Path(__file__).with_name("intrinsics.js")
#: What the harness prefixes to a program (harness.js ENTER_PREFIX); precompiled programs get it too.
ENTER_PREFIX = "__tbEnter();"

#: Trusted work (the prelude) gets its own limit; it is not charged to the template's budget.
PRELUDE_TIME_LIMIT_S = 2.0
#: The engine's garbage-collection threshold while the prelude runs (it allocates ~0.3 MB, no garbage).
PRELUDE_GC_THRESHOLD = 64 * 1024 * 1024
#: The prewarmed context is built with the default limits; a request may change them.
DEFAULT_MEMORY = 16 * 1024 * 1024
DEFAULT_STACK = 256 * 1024

#: Sent after each prewarm, so the pool can prefer a worker whose next context is ready.
WARM_LINE = b'{"op":"warm"}\n'

ERROR_KINDS = {
    "output": "TEMPLATE_OUTPUT_LIMIT",
    "memory": "TEMPLATE_MEMORY_LIMIT",
    "stack": "TEMPLATE_STACK_LIMIT",
    "syntax": "TEMPLATE_SYNTAX",
    "throw": "TEMPLATE_EXECUTION_FAILED",
    # a thrown null: the template's, or the engine's memory failure (Worker.classify_null decides)
    "null": "TEMPLATE_EXECUTION_FAILED",
    # bridge mode (the template API): sticky failures of the lookup bridge
    "bridge": "TEMPLATE_BRIDGE_LIMIT",
    "invalid": "TEMPLATE_DEPENDENCY_INVALID",
    "unsupported": "TEMPLATE_UNSUPPORTED",
}


class RenderFailed(Exception):
    """A render ended with a sandbox error code (raised and caught inside this module)."""

    def __init__(self, code: str, message: str, detail: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.detail = detail or {}


class Channel:
    """Framed reads from stdin (our own buffer, so ``select`` on the fd stays truthful)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = bytearray()
        self.eof = False

    def _fill(self) -> bool:
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            self.eof = True
            return False
        self.buffer += chunk
        return True

    def read_line(self) -> bytes | None:
        while True:
            nl = self.buffer.find(b"\n")
            if nl >= 0:
                line = bytes(self.buffer[:nl])
                del self.buffer[: nl + 1]
                return line
            if not self._fill():
                return None

    def read_exact(self, size: int) -> bytes | None:
        while len(self.buffer) < size:
            if not self._fill():
                return None
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data

    def ask_lease(self, out_fd: int, render_id: int, step: int) -> dict[str, Any]:
        """Ask the host whether the leases still hold after pending-job ``step``; its answer.

        Blocks until the answer arrives (the parent's deadline kills us if it never does). A
        cancel for this render that arrives meanwhile is kept: ``"cancelled": True`` in the
        answer. Anything else on the pipe means the protocol is broken.
        """
        write_all(out_fd, json.dumps({"op": "lease", "id": render_id, "step": step}, separators=(",", ":")).encode()
                  + b"\n")
        cancelled = False
        while True:
            line = self.read_line()
            if line is None:
                raise EOFError("the host closed the pipe during a lease check")
            msg = json.loads(line)
            if msg.get("op") == "cancel":
                cancelled = cancelled or msg.get("id") == render_id
                continue
            if msg.get("op") != "lease" or msg.get("id") != render_id:
                raise ValueError("an unexpected message during a lease check")
            return {**msg, "cancelled": cancelled}

    def cancel_requested(self, render_id: int) -> bool:
        """Non-blocking: has the parent asked to cancel ``render_id``?

        The parent may already have queued the next requests behind this render (a batch sends
        each worker more than one), so the buffer is read by its framing: a render header is
        followed by its payload, which is skipped whole (a payload's text can look like a
        message, and must never be read as one), and only the cancels at the front of the
        buffer are consumed; everything else stays for the main loop.
        """
        while True:
            at = 0
            while True:
                nl = self.buffer.find(b"\n", at)
                if nl < 0:
                    break
                try:
                    msg = json.loads(bytes(self.buffer[at:nl]))
                except ValueError:
                    msg = None
                if not isinstance(msg, dict):
                    break
                if msg.get("op") == "cancel":
                    if at == 0:
                        del self.buffer[: nl + 1]
                        nl = -1
                    if msg.get("id") == render_id:
                        return True
                    at = nl + 1
                    continue
                if msg.get("op") != "render":
                    break
                at = nl + 1 + int(msg.get("size", 0))
                if at > len(self.buffer):
                    break
            ready, _, _ = select.select([self.fd], [], [], 0)
            if not ready or not self._fill():
                return False

class _JSValue(ctypes.Structure):
    """QuickJS-ng's JSValue on 64-bit hosts: a union and a tag, passed and returned by value."""

    _fields_ = [("u", ctypes.c_uint64), ("tag", ctypes.c_int64)]


#: ``int (*)(JSRuntime *, void *)``: nonzero interrupts the running JS.
_INTERRUPT_HANDLER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


class PrecompiledHarness:
    """harness.js compiled once per worker, loaded into every fresh context as bytecode.

    Why: compiling the 40 KB harness was the largest cost of a fresh context (~2.5-3 ms of the
    ~4.5 ms a context took; the render itself is ~1.5 ms), and a context is built for every
    render. Loading the same function's bytecode costs a fraction of that. The binding does not
    expose QuickJS's bytecode API, so this calls the engine's exported C functions (``JS_Eval``
    with ``COMPILE_ONLY``, ``JS_WriteObject``, ``JS_ReadObject``, ``JS_EvalFunction``) on the
    binding's own library through ctypes, finding a ``Context``'s ``JSContext*`` in the
    binding's object layout (``PyObject_HEAD``, ``JSRuntime*``, ``JSContext*``).

    Safety: QuickJS does not verify bytecode, so only bytecode this process compiled from our own
    harness source is ever read; nothing a template or a caller supplies becomes bytecode. Every
    assumption is checked before use (the engine version the layout was verified with, a 64-bit
    release build of CPython, the runtime pointer the context itself names, a self-test of the
    installed harness); if any check fails, contexts are built from source exactly as before.
    """

    #: The engine version whose layout and ABI this was verified against (quickjs-ng 0.17.0.2 wheel).
    ENGINE_VERSION = b"0.17.0"
    COMPILE_ONLY = 1 << 5
    #: Bytecode, without the source text (only Function.prototype.toString reads it; positions stay).
    WRITE_BYTECODE = 1 | (1 << 4)
    READ_BYTECODE = 1
    TAG_EXCEPTION = 6
    FETCH = "(function () { const f = globalThis.__tbHarness; delete globalThis.__tbHarness; return f; })()"

    def __init__(self, source: str) -> None:
        self.bytecode: bytes | None = None
        try:
            self.bytecode = self._compile(source)
        except Exception:  # noqa: BLE001 - any surprise: build contexts from source
            self.bytecode = None

    def _bind(self) -> Any:
        if ctypes.sizeof(ctypes.c_void_p) != 8 or hasattr(sys, "gettotalrefcount"):
            return None  # 32-bit (NaN-boxed JSValue) or a debug CPython (a different PyObject_HEAD)
        lib = ctypes.CDLL(_quickjs.__file__)
        lib.JS_GetVersion.restype = ctypes.c_char_p
        lib.JS_GetVersion.argtypes = []
        if lib.JS_GetVersion() != self.ENGINE_VERSION:
            return None
        vp = ctypes.c_void_p
        lib.JS_GetRuntime.restype = vp
        lib.JS_GetRuntime.argtypes = [vp]
        lib.JS_Eval.restype = _JSValue
        lib.JS_Eval.argtypes = [vp, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_int]
        lib.JS_WriteObject.restype = vp
        lib.JS_WriteObject.argtypes = [vp, ctypes.POINTER(ctypes.c_size_t), _JSValue, ctypes.c_int]
        lib.JS_ReadObject.restype = _JSValue
        lib.JS_ReadObject.argtypes = [vp, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
        lib.JS_EvalFunction.restype = _JSValue
        lib.JS_EvalFunction.argtypes = [vp, _JSValue]
        lib.JS_FreeValue.restype = None
        lib.JS_FreeValue.argtypes = [vp, _JSValue]
        lib.js_free.restype = None
        lib.js_free.argtypes = [vp, vp]
        lib.JS_GetGlobalObject.restype = _JSValue
        lib.JS_GetGlobalObject.argtypes = [vp]
        lib.JS_SetPropertyStr.restype = ctypes.c_int
        lib.JS_SetPropertyStr.argtypes = [vp, _JSValue, ctypes.c_char_p, _JSValue]
        # Programs (ProgramCache): evaluated here under the template's budget.
        lib.JS_GetPropertyStr.restype = _JSValue
        lib.JS_GetPropertyStr.argtypes = [vp, _JSValue, ctypes.c_char_p]
        lib.JS_GetException.restype = _JSValue
        lib.JS_GetException.argtypes = [vp]
        lib.JS_Call.restype = _JSValue
        lib.JS_Call.argtypes = [vp, _JSValue, _JSValue, ctypes.c_int, ctypes.POINTER(_JSValue)]
        lib.JS_SetInterruptHandler.restype = None
        lib.JS_SetInterruptHandler.argtypes = [vp, _INTERRUPT_HANDLER, vp]
        lib.JS_UpdateStackTop.restype = None
        lib.JS_UpdateStackTop.argtypes = [vp]
        lib.JS_SetGCThreshold.restype = None
        lib.JS_SetGCThreshold.argtypes = [vp, ctypes.c_size_t]
        lib.JS_GetGCThreshold.restype = ctypes.c_size_t
        lib.JS_GetGCThreshold.argtypes = [vp]
        return lib

    def _pointer(self, ctx: Any) -> int:
        """The context's ``JSContext*``, after checking that it names the runtime beside it."""
        head = id(ctx) + ctypes.sizeof(ctypes.c_ssize_t) + ctypes.sizeof(ctypes.c_void_p)
        runtime = ctypes.c_void_p.from_address(head).value
        context = ctypes.c_void_p.from_address(head + ctypes.sizeof(ctypes.c_void_p)).value
        if not runtime or not context or self.lib.JS_GetRuntime(context) != runtime:
            raise RuntimeError("unexpected binding layout")
        return context

    def _compile(self, source: str) -> bytes | None:
        self.lib = self._bind()
        if self.lib is None:
            return None
        ctx = _quickjs.Context()
        cx = self._pointer(ctx)
        text = source.encode("utf-8")
        # "<input>" is the file name the binding's own eval uses: stack positions stay identical.
        compiled = self.lib.JS_Eval(cx, text, len(text), b"<input>", self.COMPILE_ONLY)
        if compiled.tag == self.TAG_EXCEPTION:
            return None
        size = ctypes.c_size_t()
        buffer = self.lib.JS_WriteObject(cx, ctypes.byref(size), compiled, self.WRITE_BYTECODE)
        self.lib.JS_FreeValue(cx, compiled)
        if not buffer:
            return None
        data = ctypes.string_at(buffer, size.value)
        self.lib.js_free(cx, buffer)
        del ctx
        return data

    def runtime(self, ctx: Any) -> int | None:
        """The context's ``JSRuntime*`` (checked like ``_pointer``), or None without the fast path."""
        if self.bytecode is None:
            return None
        return self.lib.JS_GetRuntime(self._pointer(ctx))

    def load(self, ctx: Any) -> Any:
        """The harness's installer function in ``ctx``, or None (then evaluate the source)."""
        if self.bytecode is None:
            return None
        cx = self._pointer(ctx)
        function = self.lib.JS_ReadObject(cx, self.bytecode, len(self.bytecode), self.READ_BYTECODE)
        if function.tag == self.TAG_EXCEPTION:
            return None
        installer = self.lib.JS_EvalFunction(cx, function)  # takes ownership of `function`
        if installer.tag == self.TAG_EXCEPTION:
            return None
        global_object = self.lib.JS_GetGlobalObject(cx)
        stored = self.lib.JS_SetPropertyStr(cx, global_object, b"__tbHarness", installer)  # takes `installer`
        self.lib.JS_FreeValue(cx, global_object)
        if stored < 0:
            return None
        return ctx.eval(self.FETCH)


class ProgramCache:
    """Template programs compiled once per worker, evaluated in each fresh context from bytecode.

    Why: compiling a typical program (~5 KB of JavaScript) was the largest single step of a
    cached render inside the VM (~0.3 ms of ~0.9 ms); reading its bytecode back costs ~0.03 ms.
    Every render still gets a fresh context: only the compiler's output is reused, never a value.

    How: the first time a program is seen the harness compiles it as before; the second time it
    is compiled in the render's own context (charged to the budget, as the harness's ``eval``
    was) and its bytecode kept, by the program's JSON text, in a bounded LRU. On a hit the
    bytecode is read into the fresh context. Either way the host then
    evaluates the program's top level here (which can run template code if the program breaks
    out of its function) with its own interrupt handler enforcing the remaining budget, and hands
    the outcome (the program's function, or what it threw) to the harness through the frozen
    global ``__tbEnter(kind, value)``; the harness's ``start`` then runs exactly as before.
    Nothing a template or a caller supplies is read as bytecode: only bytes this process's
    compiler wrote. Anything unexpected (a compile error, a NUL or lone surrogate in the program,
    a failed read) falls back to the harness compiling the source itself, so errors and their
    positions are the harness's as before.
    """

    EVAL_TYPE_INDIRECT = 3  # the harness's (0, eval)(source): global scope, "<input>" positions
    TAG_OBJECT = -1
    TAG_INT = 0
    TAG_UNDEFINED = 3
    WRITE_PROGRAM = 1  # bytecode with its source and positions (templates may print their functions)
    MAX_ENTRIES = 256
    MAX_BYTES = 32 * 1024 * 1024
    MAX_SEEN = 4096

    def __init__(self, harness: PrecompiledHarness) -> None:
        self.harness = harness
        self.lib = harness.lib if harness.bytecode is not None else None
        self.entries: OrderedDict[str, bytes] = OrderedDict()
        #: Hashes of programs seen once (not compiled here yet).
        self.seen: OrderedDict[int, None] = OrderedDict()
        self.bytes = 0
        self.deadline = 0.0
        self.handler = _INTERRUPT_HANDLER(self._interrupt)

    def _interrupt(self, _rt: Any, _opaque: Any) -> int:
        return 1 if time.process_time() >= self.deadline else 0

    def _remember(self, key: str, code: bytes) -> None:
        if len(code) > self.MAX_BYTES // 4:
            return
        self.entries[key] = code
        self.bytes += len(code)
        while len(self.entries) > self.MAX_ENTRIES or self.bytes > self.MAX_BYTES:
            _, old = self.entries.popitem(last=False)
            self.bytes -= len(old)

    def evaluate(self, ctx: Any, key: str, deadline: float) -> bool:
        """Evaluate the program ``key`` (its JSON text) in ``ctx`` and hand the outcome over.

        True: the harness holds the outcome (``start(limit, true)`` runs it); an interrupt shows
        as time used, the caller checks the clock. False: nothing ran; the harness must compile
        the source itself. Raises ``RenderFailed`` when the hand-over itself fails.
        """
        lib = self.lib
        if lib is None:
            return False
        cx = self.harness._pointer(ctx)
        rt = lib.JS_GetRuntime(cx)
        code = self.entries.get(key)
        if code is not None:
            self.entries.move_to_end(key)
            compiled = lib.JS_ReadObject(cx, code, len(code), PrecompiledHarness.READ_BYTECODE)
            if compiled.tag == PrecompiledHarness.TAG_EXCEPTION:
                self._drop_exception(cx)
                return False
        else:
            # A program seen for the first time takes the harness's own path (as cheap as a
            # compile here, and nothing to write): one-off templates, such as a cold render's,
            # pay nothing for the cache. The second time it is compiled here and kept.
            seen = hash(key)
            if seen not in self.seen:
                self.seen[seen] = None
                if len(self.seen) > self.MAX_SEEN:
                    self.seen.popitem(last=False)
                return False
            try:
                program = json.loads(key)
                text = (ENTER_PREFIX + program).encode("utf-8")
            except (ValueError, UnicodeEncodeError):
                return False
            if b"\0" in text:
                return False
            # Compiling runs no template code (QuickJS's parser does not poll the interrupt
            # handler either way); the caller charges its time to the budget.
            compiled = lib.JS_Eval(cx, text, len(text), b"<input>",
                                   self.EVAL_TYPE_INDIRECT | PrecompiledHarness.COMPILE_ONLY)
            if compiled.tag == PrecompiledHarness.TAG_EXCEPTION:
                self._drop_exception(cx)  # a syntax error: the harness reports it with positions
                return False
            size = ctypes.c_size_t()
            buffer = lib.JS_WriteObject(cx, ctypes.byref(size), compiled, self.WRITE_PROGRAM)
            if buffer:
                self._remember(key, ctypes.string_at(buffer, size.value))
                lib.js_free(cx, buffer)
            else:
                self._drop_exception(cx)
        self.deadline = deadline
        lib.JS_UpdateStackTop(rt)
        lib.JS_SetInterruptHandler(rt, self.handler, None)
        try:
            result = lib.JS_EvalFunction(cx, compiled)  # takes `compiled`
        finally:
            lib.JS_SetInterruptHandler(rt, _INTERRUPT_HANDLER(), None)
        kind = 1
        if result.tag == PrecompiledHarness.TAG_EXCEPTION:
            kind = 2
            result = lib.JS_GetException(cx)  # never converted here: the harness reduces it
        try:
            self._hand_over(cx, kind, result)
        finally:
            lib.JS_FreeValue(cx, result)
        return True

    def _hand_over(self, cx: int, kind: int, value: Any) -> None:
        lib = self.lib
        global_object = lib.JS_GetGlobalObject(cx)
        # A non-writable, non-configurable data property: no template code can sit behind it.
        receiver = lib.JS_GetPropertyStr(cx, global_object, b"__tbEnter")
        lib.JS_FreeValue(cx, global_object)
        try:
            if receiver.tag != self.TAG_OBJECT:
                raise RenderFailed("TEMPLATE_SANDBOX_CRASHED", "the sandbox failed internally (hand-over)")
            args = (_JSValue * 2)(_JSValue(kind, self.TAG_INT), value)
            answer = lib.JS_Call(cx, receiver, _JSValue(0, self.TAG_UNDEFINED), 2, args)
            if answer.tag == PrecompiledHarness.TAG_EXCEPTION:
                self._drop_exception(cx)
                raise RenderFailed("TEMPLATE_MEMORY_LIMIT", "the VM ran out of its memory budget")
            lib.JS_FreeValue(cx, answer)
        finally:
            lib.JS_FreeValue(cx, receiver)

    def _drop_exception(self, cx: int) -> None:
        """Clear the context's pending exception without converting it (no user code runs)."""
        self.lib.JS_FreeValue(cx, self.lib.JS_GetException(cx))


#: ``void (*)(JSContext *, JSValueConst promise, JSValueConst reason, bool is_handled, void *)``
_REJECTION_TRACKER = ctypes.CFUNCTYPE(None, ctypes.c_void_p, _JSValue, _JSValue, ctypes.c_bool, ctypes.c_void_p)


class TemplateCache:
    """Templates a program compiles at run time, compiled once per worker and loaded from bytecode.

    Why: ST-Prompt-Template's runtime (``engine/ejs/st_prompt_template_runtime.js``) runs every
    template of a request in one fresh VM and compiles each with ``(0, eval)(text)``; parsing a
    13 KB template costs ~0.2 ms in every request, ten times calling it. A chat sends the same
    card's templates with every message, so the parse is paid again and again for the same text.

    How: the binding refuses calls into Python while a time limit is set, so a render whose
    header asks for this (``"templates": true``) gets the engine's promise-rejection tracker
    instead, which the engine calls synchronously from ``Promise.reject``. The program's first
    rejected object (before any template runs) is its private request object; only a rejection
    of that very object is a request: ``{src, line}`` stands for ``(0, eval)("\\n".repeat(line -
    1) + src)``. The engine's own UTF-8 form of ``src`` is what its ``eval`` parses, so compiling
    those bytes here gives exactly the plain path's code (positions, stacks, ``toString``). The
    first time a text is seen nothing is done in the render (``kind`` stays 0: the program
    evaluates it itself, the plain path); after the reply is written, while the worker is idle,
    it is compiled in a scratch context of the worker's own (no code runs: compile only) and its
    bytecode kept (``compile_pending``), so the render pays for neither the compile nor the
    writing (~0.4 ms for a 13 KB template). A later render reads the bytecode into its context
    and evaluates its top level here, inside the program's call (the render's interrupt handler,
    stack and memory limits apply, and its CPU time is charged), and the outcome goes on the
    request object: ``kind`` 1 (``value``: what it evaluated to) or 2 (``value``: what it threw).
    A text that does not compile (a syntax error) is remembered as refused and always left to the
    program, so errors and their positions are the plain path's.

    Safety: QuickJS does not verify bytecode, so only bytecode this process's compiler wrote is
    ever read, and only for the text it was compiled from: the cache is a dict keyed by the
    text's bytes and line themselves (no digest a crafted text could collide with), bounded in
    entries and bytes (LRU). Bytecode holds no value of the render it was compiled in (globals
    are looked up by name when code runs), so nothing of one request reaches another. Templates
    cannot reach the request object, and a rejection of anything else is ignored.
    """

    MAX_ENTRIES = 512
    MAX_BYTES = 64 * 1024 * 1024
    #: a text this long is evaluated by the program itself (not worth a slot of the cache)
    MAX_TEXT_BYTES = 1024 * 1024
    #: texts waiting to be compiled after the reply (a render with more leaves the rest to later ones)
    MAX_PENDING = 256
    #: the scratch context's memory and stack (compiling runs no code; a text needs several times its size)
    SCRATCH_MEMORY = 256 * 1024 * 1024
    SCRATCH_STACK = 1024 * 1024
    TAG_OBJECT = -1
    TAG_INT = 0
    TAG_STRING = -7
    TAG_FLOAT64 = 8

    def __init__(self, harness: PrecompiledHarness) -> None:
        self.harness = harness
        #: None: the plain path (the program compiles every template itself)
        self.lib = self._bind(harness.lib) if harness.bytecode is not None else None
        self.entries: OrderedDict[tuple[bytes, int], bytes] = OrderedDict()
        #: texts that did not compile here, by length, line and hash (the program reports their error
        #: itself; a hash collision only leaves a text to the program, the plain path)
        self.refused: OrderedDict[tuple[int, int, int], None] = OrderedDict()
        #: each cached key by its length, line and ends (``_stored``)
        self.probes: dict[tuple[int, int, bytes, bytes], tuple[bytes, int]] = {}
        #: texts seen in a render, to compile after its reply, and their bytes
        self.pending: OrderedDict[tuple[bytes, int], None] = OrderedDict()
        self.pending_bytes = 0
        self.bytes = 0
        self.tracker = _REJECTION_TRACKER(self._track)
        self.cx = 0
        #: the render's request object (a reference of ours, freed by ``uninstall``), once registered
        self.request: _JSValue | None = None
        #: loads from bytecode and compiles, for tests and benchmarks
        self.hits = 0
        self.compiles = 0

    @staticmethod
    def _bind(lib: Any) -> Any:
        vp = ctypes.c_void_p
        lib.JS_SetHostPromiseRejectionTracker.restype = None
        lib.JS_SetHostPromiseRejectionTracker.argtypes = [vp, _REJECTION_TRACKER, vp]
        lib.JS_DupValue.restype = _JSValue
        lib.JS_DupValue.argtypes = [vp, _JSValue]
        lib.JS_ToCStringLen2.restype = vp
        lib.JS_ToCStringLen2.argtypes = [vp, ctypes.POINTER(ctypes.c_size_t), _JSValue, ctypes.c_bool]
        lib.JS_FreeCString.restype = None
        lib.JS_FreeCString.argtypes = [vp, vp]
        return lib

    def install(self, ctx: Any) -> bool:
        """Serve ``ctx``'s template requests for one render; False without the fast path."""
        if self.lib is None:
            return False
        self.cx = self.harness._pointer(ctx)
        self.request = None
        self.lib.JS_SetHostPromiseRejectionTracker(self.lib.JS_GetRuntime(self.cx), self.tracker, None)
        return True

    def uninstall(self) -> None:
        """Stop serving the render's context (before it is freed)."""
        if self.lib is None or not self.cx:
            return
        if self.request is not None:
            self.lib.JS_FreeValue(self.cx, self.request)
            self.request = None
        self.lib.JS_SetHostPromiseRejectionTracker(self.lib.JS_GetRuntime(self.cx), _REJECTION_TRACKER(), None)
        self.cx = 0

    def _track(self, cx: int, _promise: _JSValue, reason: _JSValue, handled: bool, _opaque: Any) -> None:
        """The engine's rejection tracker: a request of the program, or nothing to do."""
        if handled or reason.tag != self.TAG_OBJECT or cx != self.cx:
            return
        try:
            if self.request is None:  # the program's first rejection: its request object
                self.request = self.lib.JS_DupValue(cx, reason)
                return
            if reason.u != self.request.u:
                return
            key = self._key(cx, reason)
            compiled = self._compiled(cx, key) if key is not None else None
        except Exception:  # noqa: BLE001 - nothing ran: the program evaluates the text itself
            return
        if compiled is not None:
            self._evaluate(cx, compiled, reason)

    def _key(self, cx: int, request: _JSValue) -> tuple[bytes, int] | None:
        """The request's ``(text bytes, line)``, read without running any code (its own data properties)."""
        lib = self.lib
        line = lib.JS_GetPropertyStr(cx, request, b"line")
        src = lib.JS_GetPropertyStr(cx, request, b"src")
        try:
            number = self._line_number(line)
            if number is None or src.tag != self.TAG_STRING:
                return None
            size = ctypes.c_size_t()
            pointer = lib.JS_ToCStringLen2(cx, ctypes.byref(size), src, False)  # what eval parses
            if not pointer:
                self._drop_exception(cx)
                return None
            try:
                if size.value > self.MAX_TEXT_BYTES:
                    return None
                return ctypes.string_at(pointer, size.value), number
            finally:
                lib.JS_FreeCString(cx, pointer)
        finally:
            lib.JS_FreeValue(cx, line)
            lib.JS_FreeValue(cx, src)

    def _line_number(self, value: _JSValue) -> int | None:
        """A line number from 1 to 10,000,000 (an int, or a float64 holding one, as JSON gives it), else None."""
        if value.tag == self.TAG_INT:
            number: float = ctypes.c_int32(value.u & 0xFFFFFFFF).value
        elif value.tag == self.TAG_FLOAT64:
            number = struct.unpack("<d", struct.pack("<Q", value.u))[0]
        else:
            return None
        if not 1 <= number <= 10_000_000 or number != int(number):
            return None
        return int(number)

    def _compiled(self, cx: int, key: tuple[bytes, int]) -> Any:
        """The text's function bytecode read into ``cx``, or None (then it may wait for ``compile_pending``)."""
        stored = self._stored(key)
        if stored is None:
            if (len(self.pending) < self.MAX_PENDING and self.pending_bytes + len(key[0]) <= self.MAX_BYTES
                    and key not in self.pending and self._refusal(key) not in self.refused):
                self.pending[key] = None
                self.pending_bytes += len(key[0])
            return None
        code = self.entries[stored]
        self.entries.move_to_end(stored)
        compiled = self.lib.JS_ReadObject(cx, code, len(code), PrecompiledHarness.READ_BYTECODE)
        if compiled.tag == PrecompiledHarness.TAG_EXCEPTION:  # out of the render's memory: the program's eval
            self._drop_exception(cx)
            return None
        self.hits += 1
        return compiled

    def compile_pending(self, slice_s: float = 0.01) -> None:
        """Compile the texts renders asked for and keep their bytecode (between renders: no render pays).

        In a scratch context of the worker's own: compiling runs no code, and the scratch context
        holds nothing but the compiler's work, dropped when done. At most ``slice_s`` of CPU per
        call (a request that arrives meanwhile waits for it): the rest waits for the next reply.
        Any failure drops what is pending (those texts stay on the plain path)."""
        if self.lib is None or not self.pending:
            return
        try:
            self._compile_some(time.process_time() + slice_s)
        except Exception:  # noqa: BLE001 - the cache is an optimisation: never the worker's end
            self.pending.clear()
            self.pending_bytes = 0

    def _compile_some(self, until: float) -> None:
        lib = self.lib
        ctx = _quickjs.Context()
        ctx.set_memory_limit(self.SCRATCH_MEMORY)
        ctx.set_max_stack_size(self.SCRATCH_STACK)
        cx = self.harness._pointer(ctx)
        while self.pending and time.process_time() < until:
            key, _ = self.pending.popitem(last=False)
            self.pending_bytes -= len(key[0])
            if self._stored(key) is not None:
                continue
            source, line = key
            text = b"\n" * (line - 1) + source
            compiled = lib.JS_Eval(cx, text, len(text), b"<input>",
                                   ProgramCache.EVAL_TYPE_INDIRECT | PrecompiledHarness.COMPILE_ONLY)
            if compiled.tag == PrecompiledHarness.TAG_EXCEPTION:
                self._drop_exception(cx)  # a syntax error: the program's own eval reports it
                self.refused[self._refusal(key)] = None
                if len(self.refused) > self.MAX_ENTRIES:
                    self.refused.popitem(last=False)
                continue
            size = ctypes.c_size_t()
            buffer = lib.JS_WriteObject(cx, ctypes.byref(size), compiled, ProgramCache.WRITE_PROGRAM)
            lib.JS_FreeValue(cx, compiled)
            if not buffer:
                self._drop_exception(cx)
                continue
            self._remember(key, ctypes.string_at(buffer, size.value))
            lib.js_free(cx, buffer)
            self.compiles += 1
        del ctx

    @staticmethod
    def _refusal(key: tuple[bytes, int]) -> tuple[int, int, int]:
        return len(key[0]), key[1], hash(key[0])

    @staticmethod
    def _probe(key: tuple[bytes, int]) -> tuple[int, int, bytes, bytes]:
        source, line = key
        return len(source), line, source[:64], source[-64:]

    def _stored(self, key: tuple[bytes, int]) -> tuple[bytes, int] | None:
        """The cached key equal to ``key``, or None.

        A shortcut beside ``key in self.entries``: hashing a fresh 30 KB bytes object costs ~10 us
        on every load, so entries are found by length, line and both ends, then compared whole
        (the stored key's hash is cached by Python). Two texts with the same probe share its slot:
        the later one kept wins, the other is only compiled again, never confused with it."""
        stored = self.probes.get(self._probe(key))
        if stored is None or stored[0] != key[0] or stored not in self.entries:
            return None
        return stored

    def _remember(self, key: tuple[bytes, int], code: bytes) -> None:
        if len(code) + len(key[0]) > self.MAX_BYTES // 4:
            return
        self.entries[key] = code
        self.probes[self._probe(key)] = key
        self.bytes += len(code) + len(key[0])
        while len(self.entries) > self.MAX_ENTRIES or self.bytes > self.MAX_BYTES:
            old_key, old = self.entries.popitem(last=False)
            self.bytes -= len(old) + len(old_key[0])
            if self.probes.get(self._probe(old_key)) is old_key:
                del self.probes[self._probe(old_key)]

    def _evaluate(self, cx: int, compiled: Any, request: _JSValue) -> None:
        """Run the text's top level (takes ``compiled``) and put the outcome on the request object."""
        lib = self.lib
        result = lib.JS_EvalFunction(cx, compiled)  # takes `compiled`
        kind = 1
        if result.tag == PrecompiledHarness.TAG_EXCEPTION:
            kind = 2
            result = lib.JS_GetException(cx)  # an interrupt stays uncatchable: the object says so
        # own writable data properties of the program's null-prototype object: no code runs
        if lib.JS_SetPropertyStr(cx, request, b"value", result) < 0:  # takes `result`
            self._drop_exception(cx)
            kind = 3  # the outcome is lost (out of memory): the program fails the template
        if lib.JS_SetPropertyStr(cx, request, b"kind", _JSValue(kind, self.TAG_INT)) < 0:
            self._drop_exception(cx)

    def _drop_exception(self, cx: int) -> None:
        self.lib.JS_FreeValue(cx, self.lib.JS_GetException(cx))


#: The discovery context's global bindings (after the harness locked them): [key, symbol?, data?].
GLOBAL_KEYS = """JSON.stringify(Reflect.ownKeys(globalThis).filter((k) => k !== '__tbEnter').map((k) => {
  const d = Object.getOwnPropertyDescriptor(globalThis, k);
  return typeof k === 'symbol' ? [k.description.slice(7), true, 'value' in d] : [k, false, 'value' in d];
}))"""


def replay_source(plan: tuple[str, ...], global_keys: list[list[Any]]) -> str:
    """The intrinsic plan (see intrinsics.js) as straight-line JS functions.

    Why: replaying the encoded plan in a loop spent most of its time decoding it (~0.12 ms per
    context, as much as the freezing itself); straight-line property reads compiled once per
    worker cost a fraction of that. The function freezes the eager part, locks the global
    bindings the discovery context had (with two shared descriptors instead of one read and one
    new descriptor per global), and returns ``[locked, family0, family1, ...]``: how many
    bindings it locked (the harness locks any other global itself, and adds the lazy bindings
    it turns into accessors) and, per lazily frozen family, a function that freezes the family
    given the values of the lazy bindings (an array in the plan's order of their names). Every
    key comes from the engine's own intrinsics, walked before any untrusted code existed, and is
    written as a JSON string literal.
    """
    kinds, joined, parents, groups, lazy_joined, _lazy_groups = plan
    keys = joined.split("\x01")
    lazy = lazy_joined.split("\x01") if lazy_joined else []
    eager = ["(function (seeds, freeze, gopd, gpo, G, defineProperty) {", "'use strict';"]
    families: dict[int, list[str]] = {}
    for i, kind in enumerate(kinds):
        key = json.dumps(keys[i])
        if kind == "r":
            expr = f"seeds[{int(keys[i])}]"
        elif kind == "L":
            expr = f"R[{lazy.index(keys[i])}]"
        else:
            o = f"o{ord(parents[i]) - 1}"
            if kind == "p":
                expr = f"gpo({o})"
            elif kind == "v":
                expr = f"{o}[{key}]"
            elif kind == "V":
                expr = f"{o}[Symbol[{key}]]"
            elif kind in "gs":
                expr = f"gopd({o}, {key}).{'get' if kind == 'g' else 'set'}"
            else:
                expr = f"gopd({o}, Symbol[{key}]).{'get' if kind == 'G' else 'set'}"
        if groups[i] == ".":
            eager.append(f"const o{i} = {expr};")
            eager.append(f"if (o{i} !== G) freeze(o{i});")
        else:
            families.setdefault(ord(groups[i]) - 65, []).append(f"  const o{i} = {expr}; freeze(o{i});")
    eager.append("const data = { writable: false, configurable: false };")
    eager.append("const accessor = { configurable: false };")
    locked = 0
    for name, symbol, data in global_keys:
        if not symbol and name in lazy:
            continue
        key = f"Symbol[{json.dumps(name)}]" if symbol else json.dumps(name)
        eager.append(f"defineProperty(G, {key}, {'data' if data else 'accessor'});")
        locked += 1
    made = [str(locked)]
    for f in range(max(families, default=-1) + 1):
        made.append("function (R) {\n" + "\n".join(families.get(f, [])) + "\n}")
    eager.append("return [" + ",\n".join(made) + "];")
    eager.append("})")
    return "\n".join(eager)


def with_replay(harness_source: str, replay: str) -> str:
    """A script whose completion value is the harness's installer with ``replay`` bound."""
    installer = harness_source.rstrip().rstrip(";")
    return ("((installer, replay) => function (kinds, keys, parents, groups, lazy, lazyGroups) {"
            " return installer(kinds, keys, parents, groups, lazy, lazyGroups, replay); })"
            "(" + installer + ",\n" + replay + ")")


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class Worker:
    """Renders requests one at a time, each in a fresh context, keeping one context prewarmed."""

    def __init__(self) -> None:
        self.harness_source = HARNESS_PATH.read_text(encoding="utf-8")
        # The intrinsic walk runs once, in a scratch context; later contexts replay its plan.
        ctx = _quickjs.Context()
        ctx.set_time_limit(PRELUDE_TIME_LIMIT_S * 5)
        dispatch = ctx.eval(self.harness_source)("", "", "", "", "", "")
        discover = ctx.eval(INTRINSICS_PATH.read_text(encoding="utf-8"))
        self.plan: tuple[str, ...] = tuple(json.loads(discover(dispatch("seeds"), dispatch("lazy"), dispatch("tied"))))
        global_keys = json.loads(ctx.eval(GLOBAL_KEYS))
        del discover, dispatch, ctx
        self.precompiled = PrecompiledHarness(with_replay(self.harness_source, replay_source(self.plan, global_keys)))
        self.programs = ProgramCache(self.precompiled)
        self.templates = TemplateCache(self.precompiled)
        #: a finished render's non-ASCII text is measured here, from the status it sent (False: the
        #: harness measures it in a second poll, the plain path; see ``RenderRun._final_status``)
        self.count_output_here = True
        #: The engine's threshold after the prelude (0: leave the engine's own schedule alone).
        self.gc_threshold = 0
        if self.precompiled.bytecode is not None:
            try:  # self-test: the loaded harness must install and answer like the compiled one
                if not self.fresh_context()[1]("poll").startswith('{"ok":null'):
                    raise RuntimeError("the precompiled harness does not answer")
            except Exception:  # noqa: BLE001 - fall back to compiling the source per context
                self.precompiled.bytecode = None
        if self.precompiled.bytecode is not None:
            try:
                heap = int(self.fresh_context()[0].memory()["malloc_size"])
                self.gc_threshold = heap + heap // 2
            except Exception:  # noqa: BLE001 - keep the engine's schedule
                self.gc_threshold = 0
        #: ``Usage.memory_bytes``: the allocator's total, read without walking the heap when it can be.
        self.heap = HeapMeter(self.precompiled.bytecode is not None)
        self.spare: tuple[Any, Any] | None = None
        #: The last render's context, dropped once its reply is on the pipe.
        self.retired: tuple[Any, Any] | None = None

    def fresh_context(self) -> tuple[Any, Any]:
        """A new context with the prelude installed: (context, dispatch).

        The engine collects garbage whenever its heap passes a threshold (256 KiB at first); the
        prelude alone crosses it, so every context paid a full collection of the prelude's own
        live objects (~0.15 ms) while nothing was garbage yet. With the bytecode fast path the
        threshold is lifted while the prelude runs and then set to what that collection would
        have left (1.5 times the heap), so the template sees the engine's usual schedule.
        """
        ctx = _quickjs.Context()
        runtime = self.precompiled.runtime(ctx) if self.gc_threshold else None
        if runtime:
            self.precompiled.lib.JS_SetGCThreshold(runtime, self.gc_threshold)
        ctx.set_memory_limit(DEFAULT_MEMORY)
        ctx.set_max_stack_size(DEFAULT_STACK)
        ctx.set_time_limit(PRELUDE_TIME_LIMIT_S)
        installer = self.precompiled.load(ctx)
        if installer is None:
            if self.precompiled.bytecode is not None:  # a failed load may leave an exception behind
                ctx = _quickjs.Context()
                runtime = None
                ctx.set_memory_limit(DEFAULT_MEMORY)
                ctx.set_max_stack_size(DEFAULT_STACK)
                ctx.set_time_limit(PRELUDE_TIME_LIMIT_S)
            installer = ctx.eval(self.harness_source)
        dispatch = installer(*self.plan)
        if runtime:
            self.precompiled.lib.JS_SetGCThreshold(runtime, self.gc_threshold)
        return ctx, dispatch

    def classify_null(self, ctx: Any, channel: Channel, render_id: int, limits: dict[str, Any], payload: str,
                      used: float, budget: float, error: dict[str, Any], templates: bool = False) -> dict[str, Any]:
        """Whose ``null`` ended the render: the template's ``throw null`` or the engine's memory failure.

        Why: when the engine cannot even allocate its out-of-memory error it throws ``null``, the
        same value a template's ``throw null`` or ``Promise.reject(null)`` gives, and by the time the
        harness sees it the memory is free again. Two checks, neither trusting the template:
        the engine's GC threshold at or above the memory limit (its last collection found a heap
        near the limit) means memory; otherwise, when the render used less than a third of its
        budget, it runs once more, in a fresh context with four times the memory and its own time
        plus 10 ms (within what is left of the budget). A template's own ``null`` is thrown
        again; a memory failure ends differently (it succeeds, fails otherwise, or runs out of
        time). The second run's result is never used, only how it ends. A render that used a
        third of its budget or more before its null is reported as memory, as before issue 13:
        probing it could pass the CPU the pool allows a render.
        """
        memory_error = {"code": "TEMPLATE_MEMORY_LIMIT", "message": "the VM ran out of its memory budget",
                        "name": "", "js_message": "out of memory", "line": None, "column": None}
        limit = int(limits["memory_bytes"])
        runtime = self.precompiled.runtime(ctx)
        if runtime is None or used >= budget / 3.0:
            return memory_error
        if self.precompiled.lib.JS_GetGCThreshold(runtime) >= limit:
            return memory_error
        probe_time = min(budget - used, used + 0.01)
        bigger = dict(limits, memory_bytes=min(limit * 4, 1024 * 1024 * 1024), time_ms=probe_time * 1000.0)
        try:
            again = self.probe(channel, render_id, bigger, payload, templates)
        except Exception:  # noqa: BLE001 - cannot tell: the conservative answer
            return memory_error
        if again.null_thrown:
            return error
        return memory_error

    def prewarm(self) -> None:
        if self.spare is None:
            self.spare = self.fresh_context()

    def take_context(self) -> tuple[Any, Any]:
        spare, self.spare = self.spare, None
        return spare if spare is not None else self.fresh_context()

    def render(self, channel: Channel, render_id: int, limits: dict[str, Any], payload: str,
               leases_fd: int | None = None, templates: bool = False) -> bytes:
        """Run one render in a fresh context; its reply line (see the protocol above).

        ``leases_fd`` (the reply fd) when the host wants lease checks per job step; ``templates``
        when the program may load the templates it compiles from this worker's ``TemplateCache``.
        """
        run = RenderRun(self, channel, render_id, limits, payload, leases_fd, templates)
        outcome = run.execute()
        self.templates.uninstall()
        if outcome.null_thrown:
            assert outcome.error is not None
            outcome = outcome._replace(error=self.classify_null(run.ctx, channel, render_id, limits, payload,
                                                                run.used, run.budget, outcome.error, templates))
        usage = run.usage(self.heap(run.ctx))
        # The context is never reused, on success or after any error. Freeing it (a full GC of
        # its runtime, ~0.4 ms) waits until the reply is written: it is not the caller's time.
        self.retired = run.retire()
        return outcome.reply(render_id, usage)

    def probe(self, channel: Channel, render_id: int, limits: dict[str, Any], payload: str,
              templates: bool = False) -> RenderOutcome:
        """Run a render again only to see how it ends (see ``classify_null``): no reply, no usage."""
        run = RenderRun(self, channel, render_id, limits, payload, None, templates)
        outcome = run.execute()
        self.templates.uninstall()
        self.retired = run.retire()
        return outcome


class HarnessStatus(NamedTuple):
    """The harness's answer to ``poll``, read as data (a JSON object it built with ``JSON.stringify``)."""

    raw: str
    """The JSON text itself: a finished or pending render's reply carries it as ``result`` unchanged."""
    ok: bool | None
    """True: finished (``text``); False: failed (``error``); None: a lookup is pending or it never settled."""
    pending: str | None
    """The request key of the lookup the host must resolve (bridge mode), else None."""
    error: dict[str, Any] | None
    """The harness's failure record (``kind``, ``name``, ``message``, ``line``, ``column``)."""
    bytes: int | None
    """The output's UTF-8 size as the harness counted it; None when it reported ``units`` instead."""
    units: int | None
    """A lazy poll's text length in UTF-16 units (its UTF-8 size when the text is ASCII), else None."""


#: The JSON decoder's C scanner: ``json.loads`` without its Python layers (~2 us against ~6 us for
#: a short status, on every render); ``read_status`` checks that it read the whole text.
_SCAN_JSON = json.JSONDecoder().scan_once


def read_status(raw: str) -> HarnessStatus:
    """``raw`` (the harness's ``poll`` answer) as a ``HarnessStatus``; ValueError if it is not one."""
    try:
        data, end = _SCAN_JSON(raw, 0)
    except StopIteration:
        raise ValueError("the harness answered something else than JSON") from None
    if end != len(raw):
        raise ValueError("the harness answered more than one JSON value")
    if not isinstance(data, dict) or data.get("ok") not in (True, False, None):
        raise ValueError("the harness answered something else than a status")
    pending = data.get("pending")
    error = data.get("error")
    size, units = data.get("bytes"), data.get("units")
    return HarnessStatus(raw, data["ok"], str(pending) if pending is not None else None,
                         error if isinstance(error, dict) else None,
                         int(size) if size is not None else None, int(units) if units is not None else None)


def text_size(status: HarnessStatus) -> HarnessStatus | None:
    """A finished lazy status with its text's UTF-8 size counted here, as the harness counts it.

    A shortcut beside the plain path it equals (the harness's exact ``poll``): measuring a
    non-ASCII text in the VM is three regex passes over it and a second ``JSON.stringify``
    (~0.13 ms for 2 KB of Chinese), against one encode here. The harness counts 1 to 3 bytes per
    UTF-16 unit, 4 per surrogate pair and 3 per lone surrogate; the JSON decoder gives a pair as
    one character and a lone surrogate as itself, which ``surrogatepass`` encodes in 4 and 3
    bytes. The reply's ``result`` stays the lazy poll's JSON (``units`` for ``bytes``: no reader
    of the result looks at either). None when the text cannot be read back (the plain path).
    """
    try:
        text = _SCAN_JSON(status.raw, 0)[0]["text"]
        size = len(text.encode("utf-8", "surrogatepass"))
    except (StopIteration, KeyError, TypeError, UnicodeError):
        return None
    return status._replace(bytes=size, units=None)


class RenderOutcome(NamedTuple):
    """How one render ended: the harness's result JSON or an error record (never both).

    (A named tuple, not a dataclass: the tests load this file by path, outside ``sys.modules``.)
    """

    result: str | None = None
    """The harness's JSON (``{"ok":true,"text":...}`` or a pending lookup), the reply's ``result``."""
    error: dict[str, Any] | None = None
    """``{"code", "message", ...}``: the reply's ``error``."""
    null_thrown: bool = False
    """The render ended by a thrown ``null``: the template's, or the engine's memory failure."""

    def reply(self, render_id: int, usage: dict[str, Any]) -> bytes:
        head = reply_head(render_id, usage, self.error)
        body = self.result if self.result is not None else "null"
        return (head[:-1] + ',"result":' + body + "}\n").encode("utf-8")


class RenderRun:
    """One render in a fresh context: its budget, what it used, and one method per stage.

    The stages, in order (``execute``): prepare the input, evaluate the program (from cached
    bytecode when the worker has it), start it, drain its pending jobs (one pass), poll the
    harness for the outcome. Every entry into JS goes through ``enter``, which gives the engine
    what is left of the budget and charges the CPU time it took.
    """

    def __init__(self, worker: Worker, channel: Channel, render_id: int, limits: dict[str, Any], payload: str,
                 leases_fd: int | None, templates: bool = False) -> None:
        self.worker = worker
        self.templates = templates
        self.channel = channel
        self.render_id = render_id
        self.limits = limits
        self.payload = payload
        self.leases_fd = leases_fd
        self.budget = float(limits["time_ms"]) / 1000.0
        self.used = 0.0
        self.steps = 0
        self.passes = 0
        self.output_bytes = 0
        #: per-template time, when the host asked for it (``limits["template_time_ms"]``)
        self.clock = TemplateClock.of(limits)
        self.ctx, self.dispatch = worker.take_context()

    def execute(self) -> RenderOutcome:
        """Every stage; any failure becomes the outcome's error record."""
        try:
            return self._stages()
        except RenderFailed as failed:
            error = {"code": failed.code, "message": failed.message, **failed.detail}
            if failed.code == "TEMPLATE_TIME_LIMIT":
                # A sticky bridge failure that happened before the clock ran out decides the
                # render (a template that catches it in a loop burns the budget afterwards).
                error = bridge_failure(self.ctx, self.dispatch) or error
            return RenderOutcome(error=error)
        except RecursionError:
            return RenderOutcome(error={"code": "TEMPLATE_STACK_LIMIT", "message": "the host ran out of stack"})
        except Exception as exc:  # noqa: BLE001 - the binding failed; the context is dropped
            return RenderOutcome(error={"code": "TEMPLATE_SANDBOX_CRASHED",
                                        "message": f"the sandbox failed internally ({type(exc).__name__})"})

    def _stages(self) -> RenderOutcome:
        ctx = self.ctx
        ctx.set_memory_limit(int(self.limits["memory_bytes"]))
        ctx.set_max_stack_size(int(self.limits["stack_bytes"]))
        if self.channel.cancel_requested(self.render_id):
            raise RenderFailed("TEMPLATE_CANCELLED", "the render was cancelled before it started")
        self._install_template_loader()
        handed = self._load_program()
        bridge = bool(self.enter(self.dispatch, "start", int(self.limits["output_bytes"]), handed))
        self.passes = 1
        if self.clock is not None:
            self.clock.read(self)
        self._drain(bridge)
        status = self._final_status()
        if self.used >= self.budget:
            raise RenderFailed("TEMPLATE_TIME_LIMIT", time_message(self.budget))
        return self._outcome(status)

    def enter(self, call: Any, *args: Any) -> Any:
        """``call(*args)`` in JS with what is left of the budget; its CPU time is charged.

        With per-template time (``self.clock``) the engine gets the lesser of what is left of the
        render's budget and of the current template's, and the time is charged to both.
        """
        remaining = self.budget - self.used
        if remaining <= 0:
            raise RenderFailed("TEMPLATE_TIME_LIMIT", time_message(self.budget))
        if self.clock is not None:
            remaining = self.clock.slice(remaining)
        self.ctx.set_time_limit(remaining)
        t0 = time.process_time()
        try:
            value = call(*args)
        except _quickjs.JSException as exc:
            spent = time.process_time() - t0
            self.used += spent
            if self.clock is not None:
                raise self.clock.failure(exc, spent, self.used, self.budget) from None
            raise engine_error(exc, self.used, self.budget) from None
        spent = time.process_time() - t0
        self.used += spent
        if self.clock is not None:
            self.clock.charge(spent)
        return value

    def _install_template_loader(self) -> None:
        """The ``__tbTemplate`` loader (``TemplateCache``) when the header asked for it."""
        if self.templates:
            self.worker.templates.install(self.ctx)

    def _load_program(self) -> bool:
        """Prepare the input and evaluate the program; True when the harness was handed its outcome.

        Parsing and freezing the input run no template code and are bounded by the input size
        and the memory limit; they get the prelude's own limit, not the template's budget (the
        parent's deadline grows with the payload for the same reason). A program whose bytecode
        is cached is evaluated from it: the harness never reads its source then, so the VM is
        not made to parse and keep its JSON text (~5 KB for a typical template); the input's
        shape check sees the same text after it.
        """
        ctx, payload = self.ctx, self.payload
        ctx.set_time_limit(PRELUDE_TIME_LIMIT_S)
        key = program_key(payload)
        stripped = key is not None and key in self.worker.programs.entries
        prepare(ctx, self.dispatch, '[""' + payload[len(key) + 1 :] if stripped and key is not None else payload)
        if key is None:
            return False
        t0 = time.process_time()
        try:
            handed = self.worker.programs.evaluate(ctx, key, t0 + self.budget - self.used)
        finally:
            self.used += time.process_time() - t0
        if self.used >= self.budget:
            raise RenderFailed("TEMPLATE_TIME_LIMIT", time_message(self.budget))
        if not handed and stripped:
            # The cached bytecode could not be read (nothing ran): the harness compiles the
            # source after all, so it gets the whole payload, as without the cache.
            ctx.set_time_limit(PRELUDE_TIME_LIMIT_S)
            prepare(ctx, self.dispatch, payload)
        return handed

    def _drain(self, bridge: bool) -> None:
        """One pass: run pending jobs until the queue is empty.

        In bridge mode the pass also ends as soon as a lookup misses (the host resolves it and
        replays the template in a fresh context: nothing the template does after the miss can
        matter) or a bridge failure sticks.
        """
        job_limit = int(self.limits["job_steps"])
        pass_steps = 0
        while True:
            if self.channel.cancel_requested(self.render_id):
                raise RenderFailed("TEMPLATE_CANCELLED", "the render was cancelled")
            if bridge and self.enter(self.dispatch, "settled"):
                return
            if not self.enter(self.ctx.execute_pending_job):
                return
            if self.clock is not None:
                self.clock.read(self)
            self.steps += 1
            pass_steps += 1
            if pass_steps > job_limit:
                raise RenderFailed("TEMPLATE_JOB_LIMIT", f"the render ran more than {job_limit} pending-job steps in one pass")
            if bridge and self.leases_fd is not None:
                self._check_leases()

    def _check_leases(self) -> None:
        """After each await: the host re-checks its leases before the next step runs."""
        assert self.leases_fd is not None
        verdict = self.channel.ask_lease(self.leases_fd, self.render_id, self.steps)
        if verdict.get("cancelled"):
            raise RenderFailed("TEMPLATE_CANCELLED", "the render was cancelled")
        if verdict.get("ok") is not True:
            raise RenderFailed(str(verdict.get("code") or "SOURCE_POLICY_CHANGED"),
                               str(verdict.get("message") or "a lease is no longer current"))

    def _final_status(self) -> HarnessStatus:
        """The harness's final poll, its output counted exactly.

        The lazy poll of a finished render reports the text's UTF-16 length (``units``) instead
        of measuring its UTF-8 size with a regex walk; when the whole answer is ASCII and holds
        no ``\\u`` escape, so is the text, and the two are equal (``str.isascii`` tells in C).
        Otherwise an ordinary poll measures it (the harness reuses the joined text).
        """
        status = read_status(self.enter(self.dispatch, "poll", True))
        if status.ok is True and status.units is not None and not (status.raw.isascii() and "\\u" not in status.raw):
            counted = text_size(status) if self.worker.count_output_here else None
            status = counted if counted is not None else read_status(self.enter(self.dispatch, "poll"))
        return status

    def _outcome(self, status: HarnessStatus) -> RenderOutcome:
        """The outcome a final status stands for."""
        if status.ok is None and status.pending is not None:
            return RenderOutcome(result=status.raw)  # a lookup to resolve: the host replays with the answer
        if status.ok is True:
            # No byte count: the lazy poll's ASCII text, whose UTF-8 size is its length (_final_status).
            self.output_bytes = status.bytes if status.bytes is not None else status.units or 0
            return RenderOutcome(result=status.raw)
        if status.ok is False and status.error is not None:
            self.output_bytes = status.bytes or 0
            kind = status.error.get("kind")
            error = harness_error(ERROR_KINDS.get(kind, "TEMPLATE_EXECUTION_FAILED"), status.error)
            return RenderOutcome(error=error, null_thrown=kind == "null")
        raise RenderFailed("TEMPLATE_UNSETTLED",
                           "the template's promise never settled (no pending jobs and nothing to resolve)")

    def usage(self, memory: int) -> dict[str, Any]:
        return {"time_ms": round(self.used * 1000.0, 3), "memory_bytes": memory, "output_bytes": self.output_bytes,
                "passes": self.passes, "job_steps": self.steps}

    def retire(self) -> tuple[Any, Any]:
        """The used context and its dispatcher, handed to the worker to free after the reply."""
        retired = (self.ctx, self.dispatch)
        del self.ctx, self.dispatch
        return retired


class TemplateClock:
    """Per-template CPU time inside one render: each template its own slice of the render's budget.

    Why: a render that runs many templates (ST-Prompt-Template's request, issue 26) has one budget
    for all of them, and one slow template could take the whole of it. The program tells the
    harness which template it is about to run (``__tb.mark(n)``, a small integer; -1: none) and
    then awaits, so the template starts in a pending-job step of its own; between steps the
    worker reads the mark (``host.mark``, harness code) and charges each step's CPU time to the
    template marked when it began. The engine's limit for a step is the lesser of what is left of
    the render's budget and of that template's ``limit``. A step's time is never split: whatever
    runs in it is the marked template's (a detached promise job another template left behind, or
    templates run side by side through ``Promise.all``, are charged to the one marked last).

    Safety: the mark moves time between templates' accounts, never out of the render's budget,
    which every step is still charged and bounded by; a program that marks falsely (or a
    template that reached the hook) can at worst get each template's limit anew and misname the
    template that used the time. See docs/ARCHITECTURE.md, "Per-template time".
    """

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.mark = -1
        self.used: dict[int, float] = {}

    @classmethod
    def of(cls, limits: dict[str, Any]) -> TemplateClock | None:
        limit = float(limits.get("template_time_ms") or 0.0) / 1000.0
        return cls(limit) if limit > 0 else None

    def read(self, run: RenderRun) -> None:
        """The template the program marked last (harness code: a number, no template code runs)."""
        mark = run.enter(run.dispatch, "mark")
        # (a number the VM holds as a double, such as one parsed from JSON, arrives as a float)
        if isinstance(mark, float) and mark.is_integer():
            mark = int(mark)
        self.mark = mark if isinstance(mark, int) and not isinstance(mark, bool) and mark >= -1 else -1

    def slice(self, remaining: float) -> float:
        """The engine's limit for the next step, given what is left of the render's budget."""
        if self.mark < 0:
            return remaining
        left = self.limit - self.used.get(self.mark, 0.0)
        if left <= 0:
            raise RenderFailed("TEMPLATE_TIME_LIMIT", self.message(), {"template": self.mark})
        return min(remaining, left)

    def charge(self, spent: float) -> None:
        if self.mark < 0:
            return
        used = self.used.get(self.mark, 0.0) + spent
        self.used[self.mark] = used
        if used >= self.limit:
            raise RenderFailed("TEMPLATE_TIME_LIMIT", self.message(), {"template": self.mark})

    def failure(self, exc: Exception, spent: float, used: float, budget: float) -> RenderFailed:
        """What an exception that escaped a step means, its template named when one was marked."""
        if self.mark < 0:
            return engine_error(exc, used, budget)
        total = self.used.get(self.mark, 0.0) + spent
        self.used[self.mark] = total
        failed = engine_error(exc, used if total < self.limit else budget, budget)
        if total >= self.limit and used < budget:
            failed.message = self.message()
        failed.detail["template"] = self.mark
        return failed

    def message(self) -> str:
        return f"a template used up its time limit of {self.limit * 1000.0:g} ms"


def reply_head(render_id: int, usage: dict[str, Any], error: dict[str, Any] | None) -> str:
    """``json.dumps({"id", "usage", "error"})``, written by hand when there is no error.

    Why: a successful render's head holds only ints and one finite float, and formatting them
    directly is ~1 us against the encoder's ~7 us on every reply. The text is the same as the
    encoder's (``repr`` is how it writes ints and finite floats); an error goes through it.
    """
    if error is None:
        return ('{"id": %d, "usage": {"time_ms": %r, "memory_bytes": %d, "output_bytes": %d, "passes": %d, '
                '"job_steps": %d}, "error": null}') % (
            render_id, usage["time_ms"], usage["memory_bytes"], usage["output_bytes"], usage["passes"],
            usage["job_steps"])
    return json.dumps({"id": render_id, "usage": usage, "error": error}, ensure_ascii=True)


def prepare(ctx: Any, dispatch: Any, payload: str) -> None:
    """Parse ``payload`` in ``ctx`` and have the harness check and freeze it (trusted, no template code)."""
    try:
        payload_value = ctx.parse_json(payload)
        refusal = dispatch("prepare", payload_value)
    except _quickjs.JSException as exc:
        raise input_error(str(exc)) from None
    del payload_value
    if refusal:
        raise RenderFailed("INPUT_INVALID", refusal)


def program_key(payload: str) -> str | None:
    """The program's JSON string literal at the head of ``payload`` (``[program, [\\n...``), or None.

    ``run_program`` writes the literal with ``json.dumps``, which never emits a raw newline, and
    follows it with ``,[`` and a newline: the text before the first newline is exactly the literal.
    """
    end = payload.find("\n")
    if end < 4 or not payload.startswith('["') or payload[end - 3 : end] != '",[':
        return None
    return payload[1 : end - 2]


#: Sticky bridge failures (harness kinds) that take precedence over a later time-out.
BRIDGE_KINDS = ("bridge", "invalid", "unsupported")


def bridge_failure(ctx: Any, dispatch: Any) -> dict[str, Any] | None:
    """The harness's recorded bridge failure after an interrupt, or None (trusted code, own limit)."""
    try:
        ctx.set_time_limit(PRELUDE_TIME_LIMIT_S)
        status = read_status(dispatch("poll"))
    except Exception:  # noqa: BLE001 - the context is unusable: keep the time-limit error
        return None
    failure = status.error
    if status.ok is not False or failure is None:
        return None
    kind = failure.get("kind")
    if kind not in BRIDGE_KINDS:
        return None
    return harness_error(ERROR_KINDS[kind], failure)


class HeapMeter:
    """The bytes a context's runtime has allocated (what its memory limit is checked against).

    Why: the binding's ``memory()`` walks the whole heap (every atom, shape and object) and
    builds a dict of ~30 figures, ~30-45 us per render on the request path, for the one figure
    ``Usage.memory_bytes`` reports. The allocator's running total sits in the runtime's
    ``JSMallocState`` (``malloc_count``, ``malloc_size``, ``malloc_limit``, right after the five
    allocator function pointers at the head of ``JSRuntime``); reading it costs ~1 us.

    Safety: only read, never written, and only after a self-test on live contexts (with
    different limits and heaps) found all three words equal to what ``memory()`` reports, on
    the 64-bit engine version ``PrecompiledHarness`` checked. Otherwise every read falls back
    to ``memory()["malloc_size"]``: the same figure, the slow way.
    """

    #: Word offsets in ``JSRuntime`` of malloc_count, malloc_size, malloc_limit.
    COUNT, SIZE, LIMIT = 5 * 8, 6 * 8, 7 * 8

    def __init__(self, enabled: bool) -> None:
        self.fast = False
        if enabled:
            try:
                self.fast = self._self_test()
            except Exception:  # noqa: BLE001 - any surprise: the slow, walking path
                self.fast = False

    @staticmethod
    def _runtime(ctx: Any) -> int:
        """The ``JSRuntime*`` in the binding's Context layout (``PyObject_HEAD``, runtime, context)."""
        head = id(ctx) + ctypes.sizeof(ctypes.c_ssize_t) + ctypes.sizeof(ctypes.c_void_p)
        return ctypes.c_void_p.from_address(head).value or 0

    def _words(self, ctx: Any) -> tuple[int, int, int]:
        rt = self._runtime(ctx)
        word = ctypes.c_size_t.from_address
        return word(rt + self.COUNT).value, word(rt + self.SIZE).value, word(rt + self.LIMIT).value

    def _self_test(self) -> bool:
        trials = ((3 * 1024 * 1024 + 4096, "1"),
                  (5 * 1024 * 1024 + 8192, "var a = []; for (let i = 0; i < 500; i++) a.push({i});"))
        for limit, script in trials:
            ctx = _quickjs.Context()
            ctx.set_memory_limit(limit)
            ctx.eval(script)
            m = ctx.memory()
            if self._words(ctx) != (m["malloc_count"], m["malloc_size"], m["malloc_limit"]) or m["malloc_limit"] != limit:
                return False
        return True

    def __call__(self, ctx: Any) -> int:
        try:
            if self.fast:
                return int(self._words(ctx)[1])
            return int(ctx.memory()["malloc_size"])
        except Exception:  # noqa: BLE001 - a poisoned context reports nothing useful
            return 0


def time_message(budget: float) -> str:
    return f"the render used up its time budget of {budget * 1000.0:g} ms"


def input_error(text: str) -> RenderFailed:
    """Parsing or freezing the input failed. No template code has run, so the text is the engine's."""
    if "out of memory" in text or text.strip() in ("null", "[uninitialized]"):
        return RenderFailed("TEMPLATE_MEMORY_LIMIT", "the input does not fit in the VM's memory budget")
    if "interrupted" in text:
        return RenderFailed("TEMPLATE_INPUT_LIMIT", "the input is too large to prepare in time")
    if "stack" in text:
        return RenderFailed("TEMPLATE_INPUT_LIMIT", "the input JSON is nested too deeply")
    return RenderFailed("INPUT_INVALID", "the input is not valid JSON: " + text.splitlines()[0][:200])


#: a backtrace frame of the engine's interrupt error (a line's last position); only the positions are passed on.
#: Diagnostics only: a template can rename its functions (the names are printed), so it can add frames and make
#: the host name another template of the render; the code is decided by the CPU time charged, never by this text.
INTERRUPT_FRAME = re.compile(r"<input>:(\d+):(\d+)\)?$", re.MULTILINE)
#: how much of the interrupt's text is searched for frames (QuickJS prints at most 64 frames)
MAX_STACK_CHARS = 16 * 1024


def engine_error(exc: Exception, used: float, budget: float) -> RenderFailed:
    """An exception that escaped the harness (only the engine's uncatchable ones can)."""
    if used >= budget:
        # The interrupt's backtrace (the engine's text, program positions only) says where the
        # program was; the host maps it to the template that looped.
        frames = INTERRUPT_FRAME.findall(str(exc)[:MAX_STACK_CHARS])
        detail = {"stack": "\n".join(f"<input>:{line}:{column}" for line, column in frames)} if frames else None
        return RenderFailed("TEMPLATE_TIME_LIMIT", time_message(budget), detail)
    # Not our clock, so not an interrupt. User code cannot get a value here (every entry into
    # it is wrapped by the harness); what remains is the engine failing to allocate, which
    # surfaces as `null`, an out-of-memory InternalError or an uninitialized exception slot.
    return RenderFailed("TEMPLATE_MEMORY_LIMIT", "the VM ran out of its memory budget")


def harness_error(code: str, failure: dict[str, Any]) -> dict[str, Any]:
    name = str(failure.get("name") or "")
    js_message = str(failure.get("message") or "")
    line = int(failure.get("line") or 0) or None
    column = int(failure.get("column") or 0) or None
    if code == "TEMPLATE_OUTPUT_LIMIT":
        message = "the output passed its byte limit"
    elif code == "TEMPLATE_MEMORY_LIMIT":
        message = "the VM ran out of its memory budget"
    elif code == "TEMPLATE_STACK_LIMIT":
        message = "the VM ran out of stack"
    elif code in ("TEMPLATE_BRIDGE_LIMIT", "TEMPLATE_DEPENDENCY_INVALID", "TEMPLATE_UNSUPPORTED"):
        message = js_message
    elif code == "TEMPLATE_SYNTAX":
        message = f"{name}: {js_message}" if name else js_message
    else:
        message = f"{name}: {js_message}" if name else f"uncaught {js_message}"
    return {"code": code, "message": message, "name": name, "js_message": js_message,
            "line": line, "column": column}


def after_reply(worker: Worker, out_fd: int) -> None:
    """Between requests: build the next context, say so, and only then free the used one.

    Why this order: a request that reaches this worker before it is done waits for whatever is
    left of this work. Building comes first because the next render needs it; the teardown
    (~15% of the work: a full collection of the used runtime) can wait until the pool already
    knows the worker is ready, so a request that arrives meanwhile waits for the free at most,
    never for the free and the build. Isolation is unchanged: the two runtimes share nothing,
    and the used one is never touched again. Last, the templates the render met for the first
    time are compiled for the next ones (``TemplateCache.compile_pending``).
    """
    worker.prewarm()
    write_all(out_fd, WARM_LINE)
    worker.retired = None
    worker.templates.compile_pending()


def die_with_parent() -> None:
    """Ask Linux to SIGKILL us when the parent dies (best effort elsewhere).

    A worker stuck in a C loop never reads the EOF that normally tells it the parent is gone; it
    would spin forever as an orphan.
    """
    parent = os.getppid()
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def main() -> None:
    # Nothing but protocol frames may reach stdout.
    out_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, ValueError, OSError):
        pass
    die_with_parent()
    channel = Channel(0)
    worker = Worker()
    # "harness" says how fresh contexts get the prelude ("bytecode" or "source"), so a silent
    # fallback to the slow path shows up in health checks and tests.
    harness = "bytecode" if worker.precompiled.bytecode is not None else "source"
    write_all(out_fd, (json.dumps({"op": "ready", "pid": os.getpid(), "harness": harness}) + "\n").encode())
    worker.prewarm()
    write_all(out_fd, WARM_LINE)
    while True:
        line = channel.read_line()
        if line is None:
            return
        try:
            msg = json.loads(line)
        except ValueError:
            return
        if msg.get("op") != "render":
            continue  # a stale cancel for a render that already finished
        data = channel.read_exact(int(msg["size"]))
        if data is None:
            return
        leases_fd = out_fd if msg.get("leases") is True else None
        reply = worker.render(channel, int(msg["id"]), msg["limits"], data.decode("ascii"), leases_fd,
                              msg.get("templates") is True)
        write_all(out_fd, reply)
        after_reply(worker, out_fd)


if __name__ == "__main__":
    main()
