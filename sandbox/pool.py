"""The pool of sandbox worker processes: lazy start, hard deadlines, kill, restart, health.

Why processes: a render can hang its process with the GIL held or crash it (see worker.py), so
no render ever runs in the caller's process. The parent enforces the only deadline that cannot
be defeated from inside: wall-clock time on the pipe. A worker that misses it is killed
(SIGKILL) and replaced; one that dies is replaced. Workers are reused across renders (a fresh VM
context per render lives inside them), so the per-render cost is one pipe round trip.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .limits import Limits
from .result import CancelToken, SandboxError, Usage

__all__ = ["WorkerPool", "default_pool"]

WORKER_PATH = Path(__file__).with_name("worker.py")
#: A cold worker (interpreter start, binding import, intrinsic walk) must say ready within this.
STARTUP_TIMEOUT_S = 30.0
#: Extra wall time per MiB of payload: parsing and freezing the input are not template time.
INPUT_ALLOWANCE_S_PER_MIB = 1.0
WARM_LINE = b'{"op":"warm"}'
READ_CHUNK = 1 << 16

#: Asked between pending-job steps in bridge mode: ``lease_check(step)`` answers None (continue)
#: or ``(code, message)`` (abort the render with that code).
LeaseCheck = Callable[[int], "tuple[str, str] | None"]


class WorkerCrashed(Exception):
    """The worker's pipe closed before it answered."""


class CpuBudgetExceeded(TimeoutError):
    """The worker used more CPU on one render than its budget and the untimed work allow."""


#: Requests ``run_many`` keeps queued on each worker: the next one is on the pipe when a render ends.
BATCH_DEPTH = 2
#: The shortest wait between two looks at a running render's CPU time (see ``_Watch``).
CPU_WATCH_MIN_S = 0.001
#: CPU a worker may use beyond the template's budget before it is stopped: the untimed parts of a
#: render (reading the request, building the reply, a full collection of a 16 MiB heap).
CPU_GRACE_S = 0.05


class _SpawnTicket:
    """A worker process asked of the spawner thread; ``wait()`` hands it over once it exists."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.proc: subprocess.Popen[bytes] | None = None
        self.error: BaseException | None = None

    def wait(self) -> subprocess.Popen[bytes]:
        """The started process (waits for ``Popen`` only, never for the worker's boot), or its error."""
        self.done.wait()
        if self.error is not None:
            raise self.error
        assert self.proc is not None
        return self.proc


class _Spawner:
    """Starts worker processes from one long-lived thread.

    Workers ask Linux to kill them when their parent dies (``PR_SET_PDEATHSIG``, see
    worker.py), and Linux means the parent *thread*: a worker started from a short-lived
    caller thread would be killed when that thread ends. One thread per process that lives as
    long as the process starts them all.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: queue.SimpleQueue[_SpawnTicket] = queue.SimpleQueue()
        self._pid = 0

    def _run(self) -> None:
        while True:
            ticket = self._requests.get()
            try:
                ticket.proc = self._popen()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                ticket.error = exc
            ticket.done.set()

    @staticmethod
    def _popen() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            # -P: do not put sandbox/ first on sys.path (its module names must not shadow anything).
            [sys.executable, "-P", "-u", str(WORKER_PATH)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            bufsize=0,
            close_fds=True,
            start_new_session=True,
        )

    def start(self) -> _SpawnTicket:
        """Ask for a worker process without waiting for it (``spawn`` is this and the wait)."""
        with self._lock:
            if self._pid != os.getpid():  # first use, or a forked child: its own thread
                self._requests = queue.SimpleQueue()
                threading.Thread(target=self._run, name="tavernbox-sandbox-spawner", daemon=True).start()
                self._pid = os.getpid()
        ticket = _SpawnTicket()
        self._requests.put(ticket)
        return ticket

    def spawn(self) -> subprocess.Popen[bytes]:
        return self.start().wait()


_spawner = _Spawner()


class _Worker:
    """One worker process and its pipes. Used by one render at a time (the pool hands it out)."""

    def __init__(self, proc: subprocess.Popen[bytes] | None = None) -> None:
        self.proc = proc if proc is not None else _spawner.spawn()
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.in_fd = self.proc.stdin.fileno()
        os.set_blocking(self.in_fd, False)  # writes wait in select, under the render's deadline
        self.out_fd = self.proc.stdout.fileno()
        self.buffer = bytearray()
        self.ready = False
        self.write_lock = threading.Lock()
        self.dead = False
        self.warm = False
        self.renders = 0
        self.released_at = 0.0
        #: ``/proc/PID/schedstat`` kept open: the worker's CPU time for ``read_reply``'s watch.
        self.sched_fd: int | None = None
        try:
            self.sched_fd = os.open(f"/proc/{self.proc.pid}/schedstat", os.O_RDONLY)
        except OSError:
            self.sched_fd = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _next_line(self) -> bytes | None:
        """The next buffered line that is not a warm notice (those set ``warm``)."""
        while True:
            nl = self.buffer.find(b"\n")
            if nl < 0:
                return None
            line = bytes(self.buffer[:nl])
            del self.buffer[: nl + 1]
            if line == WARM_LINE:
                self.warm = True
                continue
            return line

    def poll_warm(self) -> bool:
        """Non-blocking: read any notices the idle worker sent; True if its context is ready.

        Also notices a worker that died while idle (killed by the OS, say), so that it is
        replaced instead of failing the next render.
        """
        if not self.dead and self.proc.poll() is not None:
            self.dead = True
        if self.dead:
            return False
        if not self.warm:
            try:
                # A notice may already sit in the buffer (it can arrive in the same read as the
                # reply before it, and then no select would ever report it): read those first.
                self._take_notices()
                if not self.warm and not self.dead:
                    ready, _, _ = select.select([self.out_fd], [], [], 0)
                    if ready:
                        chunk = os.read(self.out_fd, READ_CHUNK)
                        if not chunk:
                            self.dead = True
                            return False
                        self.buffer += chunk
                        self._take_notices()
            except OSError:
                self.dead = True
        return self.warm and not self.dead

    def _take_notices(self) -> None:
        """Consume the complete lines buffered while idle: notices, or a broken protocol."""
        line = self._next_line()
        if line is not None and not self.ready and _is_ready_line(line):
            # A worker started in the background (a replacement) says ready before its first
            # warm notice; that is the expected greeting, not a reply.
            self.ready = True
            line = self._next_line()
        if line is not None:
            self.dead = True  # an unsolicited reply: protocol broken

    def _read_line(self, deadline: float) -> bytes:
        """One line from the worker, or TimeoutError at ``deadline`` (monotonic seconds)."""
        while True:
            line = self._next_line()
            if line is not None:
                return line
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self.out_fd], [], [], remaining)
            if not ready:
                continue
            # 64 KiB: a 1 MiB request makes every read allocate (and map) a 1 MiB buffer, which
            # cost ~30 us per read here; longer replies simply take several reads.
            chunk = os.read(self.out_fd, READ_CHUNK)
            if not chunk:
                raise WorkerCrashed
            self.buffer += chunk

    def cpu_ns(self) -> int | None:
        """The worker's CPU time in nanoseconds (Linux ``/proc/PID/schedstat``, ~1.5 us), or None."""
        if self.sched_fd is None:
            return None
        try:
            data = os.pread(self.sched_fd, 64, 0)
            return int(data[: data.index(b" ")])
        except (OSError, ValueError):
            return None

    def read_reply(self, watch: _Watch) -> bytes:
        """The worker's next line, or TimeoutError at the watch's deadline, or CpuBudgetExceeded.

        Why the CPU watch: some built-ins loop in C without polling the engine's interrupt (a
        quadratic ``indexOf`` on megabyte strings), so the worker's own budget cannot stop them,
        and the wall deadline alone let such a render run for the whole grace (~1 s).
        """
        while True:
            try:
                return self._read_line(watch.next_check())
            except TimeoutError:
                if time.monotonic() >= watch.deadline:
                    raise
                if watch.cpu_exceeded(self):
                    raise CpuBudgetExceeded from None

    def ensure_ready(self) -> None:
        if self.ready:
            return
        line = self._read_line(time.monotonic() + STARTUP_TIMEOUT_S)
        if not _is_ready_line(line):
            raise WorkerCrashed
        self.ready = True

    def send(self, data: bytes, deadline: float | None = None) -> None:
        """Write ``data`` to the worker; TimeoutError if it stops reading before ``deadline``."""
        with self.write_lock:
            view = memoryview(data)
            try:  # the pipe usually has room: no select needed
                view = view[os.write(self.in_fd, view) :]
            except BlockingIOError:
                pass
            while view:
                timeout = None if deadline is None else deadline - time.monotonic()
                if timeout is not None and timeout <= 0:
                    raise TimeoutError
                _, writable, _ = select.select([], [self.in_fd], [], timeout)
                if not writable:
                    continue
                try:
                    view = view[os.write(self.in_fd, view) :]
                except BlockingIOError:
                    continue

    def cancel(self, render_id: int) -> None:
        """Ask the worker to stop ``render_id`` at its next boundary (best effort)."""
        try:
            self.send(json.dumps({"op": "cancel", "id": render_id}).encode() + b"\n", time.monotonic() + 1.0)
        except (OSError, TimeoutError):
            pass

    def _close_sched(self) -> None:
        fd, self.sched_fd = self.sched_fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def kill(self, wait: bool = False) -> None:
        """SIGKILL the worker and close its pipes.

        The caller does not wait for the process to be gone (the kernel tearing down a worker
        that held a full heap took 1.5-7 ms of the caller's time): a thread reaps it, unless
        ``wait`` (a worker that died by itself, whose exit status the error reports).
        """
        self.dead = True
        self._close_sched()
        try:
            self.proc.kill()
        except OSError:
            pass
        if wait:
            self.proc.wait()
        elif self.proc.poll() is None:
            threading.Thread(target=self.proc.wait, name="tavernbox-sandbox-reaper", daemon=True).start()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass

    def close(self) -> None:
        """Polite shutdown: EOF on stdin makes the worker exit; kill it if it does not."""
        self.dead = True
        self._close_sched()
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(timeout=1.0)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


class _Watch:
    """The deadlines of one running render: its wall deadline and its worker's CPU budget.

    From the moment the worker can start the render (``started``) the render has until
    ``deadline`` of wall time, and its worker may use ``cpu_limit`` seconds of CPU beyond what it
    had used then (``cpu_start``, from ``/proc/PID/schedstat``; None without ``/proc``: only the
    wall deadline applies). A worker runs one thread, so its CPU time grows no faster than the
    wall clock: the budget cannot be used up before ``now + (cpu_limit - used)``, and that is
    when it is checked next. A render that ends first costs no check at all, and one that
    loops in C is stopped within a millisecond of its budget (a fixed 5 ms poll overshot by up
    to that, and woke the caller every 5 ms on a loaded machine for nothing).
    """

    __slots__ = ("started", "deadline", "cpu_start", "cpu_limit", "_next")

    def __init__(self, worker: _Worker, limits: Limits, allowance: float) -> None:
        self.started = time.monotonic()
        self.deadline = self.started + limits.deadline_s + allowance
        self.cpu_start = worker.cpu_ns()
        self.cpu_limit = limits.time_ms / 1000.0 + CPU_GRACE_S + allowance
        self._next = self.started + self.cpu_limit

    def next_check(self) -> float:
        """When the render's deadlines next need looking at (monotonic seconds)."""
        if self.cpu_start is None:
            return self.deadline
        return min(self.deadline, self._next)

    def cpu_exceeded(self, worker: _Worker) -> bool:
        """Whether the worker used up its CPU budget; if not, when to look again is updated."""
        now = time.monotonic()
        if self.cpu_start is None or now < self._next:
            return False
        used = worker.cpu_ns()
        if used is None:
            return False
        left = self.cpu_limit - (used - self.cpu_start) / 1e9
        if left < 0:
            return True
        self._next = now + max(left, CPU_WATCH_MIN_S)
        return False

    def wall_ms(self) -> float:
        return (time.monotonic() - self.started) * 1000.0


class _Lane:
    """One worker of a ``run_many`` batch: the requests queued on it, and the running one's watch."""

    def __init__(self, worker: _Worker) -> None:
        self.worker = worker
        #: (render id, job index, input allowance) of each request written and not yet answered.
        self.queue: list[tuple[int, int, float]] = []
        self.watch: _Watch | None = None

    def start(self, limits: Limits, allowance: float) -> None:
        """The head request can run from now: its wall deadline and CPU watch start here."""
        self.watch = _Watch(self.worker, limits, allowance)

    def next_check(self) -> float:
        """When the running render's deadlines next need looking at (monotonic seconds)."""
        assert self.watch is not None
        return self.watch.next_check()


def _stopped_usage(wall_ms: float) -> Usage:
    """The usage a stopped render reports: only the wall time it had (the worker never answered)."""
    return Usage(time_ms=wall_ms, memory_bytes=0, output_bytes=0, passes=0, job_steps=0)


def _cpu_budget_error(limits: Limits, wall_ms: float) -> SandboxError:
    return SandboxError(
        f"the render used up its time budget of {limits.time_ms:g} ms in work the engine cannot "
        "interrupt (the sandbox worker was stopped)",
        code="TEMPLATE_TIME_LIMIT",
        usage=_stopped_usage(wall_ms),
    )


def _deadline_error(watch: _Watch) -> SandboxError:
    return SandboxError(
        f"the sandbox worker missed its hard deadline of {(watch.deadline - watch.started) * 1000.0:g} ms "
        "and was killed",
        code="TEMPLATE_TIME_LIMIT",
        usage=_stopped_usage(watch.wall_ms()),
    )


def _lane_crash_error(message: str) -> SandboxError:
    return SandboxError(message, code="TEMPLATE_SANDBOX_CRASHED", usage=_stopped_usage(0.0))


def _decode(line: bytes) -> dict[str, Any]:
    """A worker's line as the JSON object it must be (empty when it is not one: out of turn)."""
    try:
        message = json.loads(line)
    except ValueError:
        return {}
    return message if isinstance(message, dict) else {}


def _is_ready_line(line: bytes) -> bool:
    """Whether ``line`` is a worker's one-time ``{"op": "ready", ...}`` greeting."""
    return _decode(line).get("op") == "ready"


_WIRE_LIMITS: dict[Limits, str] = {}


def _header(render_id: int, size: int, limits: Limits, leases: bool, templates: bool = False) -> bytes:
    """The render request's header line (the limits' JSON is kept per ``Limits``: it never changes).

    ``templates``: the program may load the templates it compiles from the worker's bytecode cache
    (``worker.TemplateCache``)."""
    wire = _WIRE_LIMITS.get(limits)
    if wire is None:
        wire = json.dumps(limits.to_wire())
        if len(_WIRE_LIMITS) < 64:
            _WIRE_LIMITS[limits] = wire
    lease = ', "leases": true' if leases else ""
    if templates:
        lease += ', "templates": true'
    return ('{"op": "render", "id": %d, "size": %d, "limits": %s%s}\n' % (render_id, size, wire, lease)).encode()


class _Spare:
    """One worker process started ahead, beyond the pool's size, to take a killed worker's place.

    Why: a render stopped for its budget (or a worker that died) used to leave its slot to a
    replacement that booted while the next caller waited (~80 ms on an idle machine, far more on
    a loaded one: a hostile template's error, or the render after it, took twice as long as the
    budget explains). The spare has booted and built its first context long before it is
    needed; after it is taken the next spare starts in the background once a render has ended
    well. It never serves a render while it is the spare, and it is the only process beyond the
    pool's size.
    """

    def __init__(self) -> None:
        self._ticket: _SpawnTicket | None = None
        self._worker: _Worker | None = None

    def start(self) -> None:
        """Have a spare (started in the background: the caller waits for nothing)."""
        if self._ticket is None and self._worker is None:
            self._ticket = _spawner.start()

    def _process(self) -> _Worker | None:
        """The spare's worker once its process exists (None while ``Popen`` is still running)."""
        if self._worker is None and self._ticket is not None and self._ticket.done.is_set():
            ticket, self._ticket = self._ticket, None
            try:
                self._worker = _Worker(ticket.wait())
            except OSError:
                self._worker = None
        return self._worker

    def take(self) -> _Worker | None:
        """The spare worker, if it is alive (the slot is then empty until ``start``)."""
        if self._ticket is not None and not self._ticket.done.wait(STARTUP_TIMEOUT_S):
            self._ticket = None  # never answered (a pool copied into a forked child): no spare
            return None
        worker = self._process()
        self._worker = None
        if worker is not None and worker.proc.poll() is not None:
            worker.kill(wait=True)
            return None
        return worker

    @property
    def pid(self) -> int | None:
        worker = self._process()
        return worker.pid if worker is not None else None

    def close(self) -> None:
        """Stop the spare: killed, not asked to exit (it has served nothing, and one still booting
        would read the request to exit only after its boot)."""
        worker = self.take()
        if worker is not None:
            worker.kill()


class WorkerPool:
    """At most ``size`` workers, started on first use, handed out one render at a time.

    ``spare`` (the default): one more worker is kept booted beside them, started after the
    first render, and takes the place of a worker that is killed or dies (see ``_Spare``).
    ``spare=False`` is the plain pool: a killed worker's replacement boots while the next
    render waits.
    """

    def __init__(self, size: int | None = None, *, spare: bool = True) -> None:
        self.size = size if size is not None else max(1, min(4, os.cpu_count() or 2))
        self._idle: list[_Worker] = []
        self._count = 0
        self._cond = threading.Condition()
        self._next_id = 0
        self._closed = False
        self._spare: _Spare | None = _Spare() if spare else None
        #: Pids of workers killed or found dead (for tests and diagnostics).
        self.replaced: list[int] = []

    def _acquire(self) -> _Worker:
        """An idle worker, preferring one whose next context is already built.

        When every idle worker is still building its context and the pool may grow, a new
        worker is started in the background (the caller does not wait for its boot), so
        back-to-back renders end up alternating between workers.
        """
        with self._cond:
            while True:
                if self._closed:
                    raise RuntimeError("the sandbox worker pool is closed")
                if self._idle:
                    for i, worker in enumerate(self._idle):
                        if worker.poll_warm():
                            return self._idle.pop(i)
                    self._drop_dead_idle()
                    if self._idle:
                        chosen = self._likeliest_ready()
                        if self._count < self.size:
                            try:
                                self._idle.append(_Worker())
                                self._count += 1
                            except OSError:
                                pass
                        return chosen
                if self._count < self.size:
                    self._count += 1
                    break
                self._cond.wait()
        try:
            return _Worker()
        except BaseException:
            with self._cond:
                self._count -= 1
                self._cond.notify()
            raise

    def _likeliest_ready(self) -> _Worker:
        """Takes the idle worker likeliest to be warm by now: one that has booted, least recently released.

        A worker still booting (just started, or a replacement) comes last: its boot is far
        longer than building a context.
        """
        best = min(range(len(self._idle)), key=lambda i: (not self._idle[i].ready, self._idle[i].released_at))
        return self._idle.pop(best)

    def _drop_dead_idle(self) -> None:
        """Replace the idle workers found dead (killed by the OS, say) before anyone gets them."""
        for worker in [w for w in self._idle if w.dead]:
            self._idle.remove(worker)
            worker.kill()
            self._count -= 1
            self.replaced.append(worker.pid)
            replacement = self._replacement()
            if replacement is not None:
                self._idle.append(replacement)

    def _replacement(self) -> _Worker | None:
        """A worker to take a dead one's place (counted in the pool): the spare, or a new process.

        The next spare starts when a render next ends well (``_release``), not now: its boot
        (~80 ms of CPU) would compete with the render right after the kill on a busy machine.
        Without a spare the new process boots while the next render waits for it. Called with
        the lock held.
        """
        if self._closed:
            return None
        worker = self._spare.take() if self._spare is not None else None
        if worker is None:
            try:
                worker = _Worker()
            except OSError:
                return None
        worker.released_at = time.monotonic()
        self._count += 1
        return worker

    def _release(self, worker: _Worker) -> None:
        with self._cond:
            if worker.dead:
                self._count -= 1
                self.replaced.append(worker.pid)
                # Replaced at once: the spare if there is one, else a process that boots while
                # the caller handles the error.
                replacement = self._replacement()
                if replacement is not None:
                    self._idle.append(replacement)
            elif self._closed:
                self._count -= 1
                worker.close()
            else:
                worker.released_at = time.monotonic()
                self._idle.append(worker)
                if self._spare is not None:
                    # After the first render (never slowing the first boot), and after a kill once
                    # the render after it is done (never competing with it).
                    self._spare.start()
            self._cond.notify()

    def spare_pid(self) -> int | None:
        """The pid of the spare worker (None: no spare, or it is still being started)."""
        with self._cond:
            return self._spare.pid if self._spare is not None else None

    def _render_id(self) -> int:
        with self._cond:
            self._next_id += 1
            return self._next_id

    def run(
        self, payload: bytes, limits: Limits, cancel: CancelToken | None, lease_check: LeaseCheck | None = None,
        templates: bool = False,
    ) -> dict[str, Any]:
        """Send one render request and return the worker's decoded reply.

        With ``lease_check`` the worker asks ``{"op":"lease","id":N,"step":K}`` after every
        pending-job step and waits for ``{"op":"lease","id":N,"ok":true}`` (or ``false`` with the
        lease's code): the leases live here, in the host, and only the host can ask them. The
        check runs under the render's wall deadline (a slow check still gets the worker killed
        on time) but not its CPU budget, which the worker charges only while it is in JS.
        Without ``lease_check`` the header has no ``leases`` flag and no extra message is sent.

        Raises ``SandboxError`` for a killed (``TEMPLATE_TIME_LIMIT``), dead
        (``TEMPLATE_SANDBOX_CRASHED``) or cancelled-before-start render.
        """
        if cancel is not None and cancel.cancelled:
            raise SandboxError("the render was cancelled before it started", code="TEMPLATE_CANCELLED")
        render_id = self._render_id()
        worker = self._acquire()
        callback = None
        try:
            try:
                worker.ensure_ready()
            except (TimeoutError, WorkerCrashed, ValueError, OSError):
                worker.kill()
                raise SandboxError(
                    "the sandbox worker failed to start", code="TEMPLATE_SANDBOX_CRASHED"
                ) from None
            header = _header(render_id, len(payload), limits, lease_check is not None, templates)
            allowance = len(payload) / (1024 * 1024) * INPUT_ALLOWANCE_S_PER_MIB
            watch = _Watch(worker, limits, allowance)
            try:
                worker.send(header + payload, watch.deadline)
                if cancel is not None:
                    def callback() -> None:
                        worker.cancel(render_id)
                    cancel._subscribe(callback)
                message = _decode(worker.read_reply(watch))
                while lease_check is not None and message.get("op") == "lease":
                    self._answer_lease(worker, render_id, message, lease_check, watch.deadline)
                    message = _decode(worker.read_reply(watch))
                # Warm notices read so far were the previous context's; this render's comes next.
                worker.warm = False
            except CpuBudgetExceeded:
                worker.kill()
                raise _cpu_budget_error(limits, watch.wall_ms()) from None
            except TimeoutError:
                worker.kill()
                raise _deadline_error(watch) from None
            except (WorkerCrashed, OSError):
                worker.kill(wait=True)
                raise SandboxError(
                    f"the sandbox worker died (exit status {worker.proc.returncode})",
                    code="TEMPLATE_SANDBOX_CRASHED",
                ) from None
            except BaseException:
                # Interrupted while a render is in flight (KeyboardInterrupt, ...): the worker's
                # state is unknown, so it must not serve anyone else.
                worker.kill()
                raise
            if message.get("id") != render_id or "op" in message:
                worker.kill()
                raise SandboxError("the sandbox worker answered out of turn", code="TEMPLATE_SANDBOX_CRASHED")
            worker.renders += 1
            return message
        finally:
            if callback is not None and cancel is not None:
                cancel._unsubscribe(callback)
            self._release(worker)

    @staticmethod
    def _answer_lease(worker: _Worker, render_id: int, ask: dict[str, Any], lease_check: LeaseCheck,
                      deadline: float) -> None:
        """Run the host's lease checks for one pending-job step and tell the worker the verdict."""
        if ask.get("id") != render_id or not isinstance(ask.get("step"), int):
            raise WorkerCrashed  # a malformed question: the protocol is broken
        verdict = lease_check(ask["step"])
        answer: dict[str, Any] = {"op": "lease", "id": render_id, "ok": verdict is None}
        if verdict is not None:
            answer["code"], answer["message"] = verdict
        if time.monotonic() >= deadline:
            raise TimeoutError
        worker.send(json.dumps(answer, ensure_ascii=True).encode() + b"\n", deadline)

    def run_many(self, payloads: list[bytes], limits: Limits, cancel: CancelToken | None = None,
                 depth: int = BATCH_DEPTH) -> list[dict[str, Any] | SandboxError]:
        """Run many renders on up to ``size`` workers, ``depth`` requests queued on each; replies in order.

        Why: sent one render at a time from a thread per worker, a batch paid per render a thread
        hand-off, a pool acquire and release, and a wake-up of the caller between the reply and the
        next request, while the worker sat idle. Here one thread keeps every worker's input queued
        (the worker reads its next request as soon as it has answered and built its next fresh
        VM), so a batch costs less per render than single renders. Each render keeps its own
        limits, its own fresh context and its own deadline: the wall deadline and the CPU watch
        start when the worker can start the render (when it sent the previous reply, or when the
        request was written to an idle worker). A worker that misses a deadline or dies is
        replaced; the render it was running gets the error ``run`` would give, and the requests
        queued behind it are sent again to another worker. A slot holds the decoded reply or the
        ``SandboxError``.
        """
        results: list[dict[str, Any] | SandboxError | None] = [None] * len(payloads)
        pending = list(range(len(payloads)))
        pending.reverse()  # pop() from the end: first job first
        lanes: list[_Lane] = []
        cancel_sent = False
        try:
            width = max(1, min(self.size, len(payloads)))
            while pending or any(lane.queue for lane in lanes):
                if cancel is not None and cancel.cancelled and not cancel_sent:
                    cancel_sent = True
                    while pending:
                        results[pending.pop()] = SandboxError("the render was cancelled before it started",
                                                              code="TEMPLATE_CANCELLED")
                    for lane in lanes:
                        for render_id, _, _ in lane.queue:
                            lane.worker.cancel(render_id)
                while len(lanes) < width and pending:
                    lane = self._lane()
                    if lane is None:
                        break
                    lanes.append(lane)
                if not lanes and pending:
                    while pending:
                        results[pending.pop()] = SandboxError("the sandbox worker failed to start",
                                                              code="TEMPLATE_SANDBOX_CRASHED")
                    break
                for lane in lanes:
                    while pending and len(lane.queue) < depth and not lane.worker.dead:
                        index = pending.pop()
                        render_id = self._render_id()
                        payload = payloads[index]
                        allowance = len(payload) / (1024 * 1024) * INPUT_ALLOWANCE_S_PER_MIB
                        try:
                            lane.worker.send(_header(render_id, len(payload), limits, False) + payload,
                                             time.monotonic() + limits.deadline_s + allowance)
                        except (OSError, TimeoutError):
                            pending.append(index)
                            lane.worker.dead = True
                            break
                        if not lane.queue:
                            lane.start(limits, allowance)
                        lane.queue.append((render_id, index, allowance))
                busy = [lane for lane in lanes if lane.queue and not lane.worker.dead]
                for lane in [lane for lane in lanes if lane.worker.dead]:
                    self._fail_lane(lane, results, pending, _lane_crash_error(
                                    "the sandbox worker died"))
                    lanes.remove(lane)
                if not busy:
                    continue
                timeout = max(0.0, min(lane.next_check() for lane in busy) - time.monotonic())
                ready, _, _ = select.select([lane.worker.out_fd for lane in busy], [], [], timeout)
                for lane in busy:
                    if lane.worker.out_fd in ready:
                        try:
                            chunk = os.read(lane.worker.out_fd, READ_CHUNK)
                        except OSError:
                            chunk = b""
                        if not chunk:
                            self._fail_lane(lane, results, pending, _lane_crash_error(
                                            f"the sandbox worker died (exit status {lane.worker.proc.poll()})"))
                            lanes.remove(lane)
                            continue
                        lane.worker.buffer += chunk
                    if not self._take_replies(lane, limits, results, pending):
                        lanes.remove(lane)
        finally:
            for lane in lanes:
                if lane.queue:
                    lane.worker.kill()  # interrupted with renders in flight: its state is unknown
                self._release(lane.worker)
        return [r if r is not None else SandboxError("the render did not run", code="TEMPLATE_SANDBOX_CRASHED")
                for r in results]

    def _lane(self) -> _Lane | None:
        """A ready worker for ``run_many``, or None when none could be started."""
        worker = self._acquire()
        try:
            worker.ensure_ready()
        except (TimeoutError, WorkerCrashed, ValueError, OSError):
            worker.kill()
            self._release(worker)
            return None
        return _Lane(worker)

    def _take_replies(self, lane: _Lane, limits: Limits, results: list[Any], pending: list[int]) -> bool:
        """Consume ``lane``'s buffered replies and check its deadline; False when its worker was dropped."""
        worker = lane.worker
        while lane.queue:
            line = worker._next_line()
            if line is None:
                break
            render_id, index, _ = lane.queue[0]
            reply = _decode(line)
            if reply.get("id") != render_id or "op" in reply:
                self._fail_lane(lane, results, pending, _lane_crash_error(
                                "the sandbox worker answered out of turn"))
                return False
            lane.queue.pop(0)
            worker.renders += 1
            results[index] = reply
            if lane.queue:
                lane.start(limits, lane.queue[0][2])
        if not lane.queue:
            worker.warm = False
            return True
        watch = lane.watch
        assert watch is not None
        if time.monotonic() >= watch.deadline:
            error = _deadline_error(watch)
        elif watch.cpu_exceeded(worker):
            error = _cpu_budget_error(limits, watch.wall_ms())
        else:
            return True
        self._fail_lane(lane, results, pending, error)
        return False

    def _fail_lane(self, lane: _Lane, results: list[Any], pending: list[int], error: SandboxError) -> None:
        """Kill ``lane``'s worker: its running render fails with ``error``, the ones queued go back."""
        lane.worker.kill()
        if lane.queue:
            _, index, _ = lane.queue.pop(0)
            results[index] = error
        for _, index, _ in reversed(lane.queue):
            pending.append(index)
        lane.queue.clear()
        self._release(lane.worker)

    def prestart(self, count: int | None = None) -> None:
        """Start up to ``count`` workers (default: the pool size) now and wait until they are ready.

        Workers otherwise start on first use; a server or a benchmark calls this once so that
        no render pays the interpreter's boot (~0.1-0.3 s).
        """
        wanted = self.size if count is None else min(count, self.size)
        started: list[_Worker] = []
        with self._cond:
            while self._count < wanted:
                started.append(_Worker())
                self._count += 1
        for worker in started:
            try:
                worker.ensure_ready()
            except (TimeoutError, WorkerCrashed, ValueError, OSError):
                worker.kill()
        for worker in started:
            self._release(worker)
        with self._cond:
            if self._spare is not None and not self._closed:
                self._spare.start()

    def pids(self) -> list[int]:
        """Pids of the idle workers (for health checks)."""
        with self._cond:
            return [w.pid for w in self._idle]

    def close(self) -> None:
        """Stop every idle worker; renders in flight finish first and their workers stop after."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._count -= len(idle)
            spare, self._spare = self._spare, None
        for worker in idle:
            worker.close()
        if spare is not None:
            spare.close()


_default: WorkerPool | None = None
_default_pid = 0
_default_lock = threading.Lock()


def default_pool() -> WorkerPool:
    """The process-wide pool (a forked child gets its own, never its parent's pipes)."""
    global _default, _default_pid
    with _default_lock:
        if _default is None or _default_pid != os.getpid():
            _default = WorkerPool()
            _default_pid = os.getpid()
        return _default


@atexit.register
def _shutdown() -> None:
    if _default is not None and _default_pid == os.getpid():
        _default.close()
