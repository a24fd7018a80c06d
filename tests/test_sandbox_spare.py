"""The warm spare VM: each worker builds the next render's fresh context after replying.

What must hold (see docs/ARCHITECTURE.md, "Warm spare VM"): a spare serves exactly one render,
it is built like a context made on demand (frozen intrinsics, the request's own limits, fresh
per-render state), its building is never charged to a template's time budget, and after any
failure (an error, a budget trip, a kill) the next render still gets a never-used context.
"""

from __future__ import annotations

import importlib.util
import json
import os
import select
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import tavernbox.sandbox
from tavernbox.sandbox import Limits, SandboxError, WorkerPool, run_program
from sandbox_helpers import prog

#: Leaves a mark in every place a render could reach that outlives one statement: a global, a
#: global symbol, an own property on the global object through defineProperty, and a promise
#: job still queued when the render's own promise settles.
MARK = (
    "globalThis.leak = 'L'; Symbol.for('tb-leak'); "
    "Object.defineProperty(globalThis, 'leak2', {value: 1, configurable: true}); "
    "Promise.resolve().then(() => { globalThis.late = 1 });"
)
#: What a fresh context shows for each of those marks.
PROBE = "append([typeof leak, typeof leak2, typeof late, Object.isFrozen(Object.prototype)].join())"
FRESH = "undefined,undefined,undefined,true"


def load_worker_module() -> ModuleType:
    """worker.py loaded by path, as the pool runs it (it imports nothing from the package)."""
    path = Path(tavernbox.sandbox.__file__).with_name("worker.py")
    spec = importlib.util.spec_from_file_location("tavernbox_spare_test_worker", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Quiet:
    """A channel that never carries a cancel (the in-process worker's stand-in for stdin)."""

    def cancel_requested(self, render_id: int) -> bool:
        return False


def payload_of(body: str, variables: Any = None) -> str:
    """The worker's payload for ``body``, exactly as ``run_program`` frames it."""
    return "[" + json.dumps(prog(body)) + ",[\n" + json.dumps(variables) + "\n]]"


def reply_of(raw: bytes) -> dict[str, Any]:
    return json.loads(raw)


@pytest.fixture(scope="module")
def worker_module() -> ModuleType:
    return load_worker_module()


@pytest.fixture()
def worker(worker_module: ModuleType) -> Any:
    return worker_module.Worker()


@pytest.fixture()
def solo() -> Iterator[WorkerPool]:
    pool = WorkerPool(size=1)
    pool.prestart()
    yield pool
    pool.close()


def wait_warm(pool: WorkerPool, timeout: float = 10.0) -> bool:
    """True once the pool's only idle worker reports its spare ready (polled, no timing claim)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with pool._cond:
            idle = list(pool._idle)
        if idle and idle[0].poll_warm():
            return True
        time.sleep(0.005)
    return False


# --- in the worker: one spare, used once ---------------------------------------------------------


def test_a_spare_serves_exactly_one_render(worker: Any) -> None:
    worker.prewarm()
    spare = worker.spare
    assert spare is not None
    worker.prewarm()  # already holding one: no second context, the same spare stays
    assert worker.spare is spare
    reply = reply_of(worker.render(Quiet(), 1, Limits().to_wire(), payload_of(MARK + "append('a')")))
    assert reply["error"] is None and reply["result"]["text"] == "a"
    assert worker.spare is None  # taken: never handed out again
    assert worker.retired is not None and worker.retired[0] is spare[0]  # the used one is only retired
    worker.retired = None
    worker.prewarm()
    assert worker.spare is not None and worker.spare[0] is not spare[0]
    reply = reply_of(worker.render(Quiet(), 2, Limits().to_wire(), payload_of(PROBE)))
    assert reply["result"]["text"] == FRESH


def test_after_a_reply_the_spare_is_built_and_announced_before_the_used_context_is_freed(worker: Any) -> None:
    """A request that arrives while the worker tidies up waits for the teardown at most, never for
    the build: the warm notice goes out as soon as the spare exists, with the used context (a
    separate runtime, never touched again) still alive, and the teardown follows it."""
    module = load_worker_module()
    events: list[str] = []
    worker.retired = None
    worker.spare = None
    worker.render(Quiet(), 1, Limits().to_wire(), payload_of("append('x')"))
    assert worker.retired is not None
    read_fd, write_fd = os.pipe()

    class Used:
        """Stands for the used context; records, when it is dropped, whether the notice was out."""

        def __init__(self, held: Any) -> None:
            self.held = held

        def __del__(self) -> None:
            ready, _, _ = select.select([read_fd], [], [], 0)
            events.append("freed after the notice" if ready else "freed before the notice")

    used = worker.retired = Used(worker.retired)  # type: ignore[assignment]
    build = worker.prewarm

    def prewarm() -> None:
        events.append("build" + (" (used one alive)" if worker.retired is not None else ""))
        build()

    worker.prewarm = prewarm
    try:
        del used
        module.after_reply(worker, write_fd)
        notice = os.read(read_fd, 100)
    finally:
        del worker.prewarm
        os.close(read_fd)
        os.close(write_fd)
    assert events == ["build (used one alive)", "freed after the notice"]
    assert notice == module.WARM_LINE and worker.spare is not None


def test_spare_has_frozen_intrinsics_and_locked_globals_before_any_request(worker: Any) -> None:
    worker.prewarm()
    ctx, _dispatch = worker.spare
    checks = ctx.eval(
        "[Object.prototype, Array.prototype, Function.prototype, Promise.prototype, JSON, Math,"
        " Reflect, String.prototype, Object.getPrototypeOf(async function () {})]"
        ".every((o) => Object.isFrozen(o)) && !Object.getOwnPropertyDescriptor(globalThis, 'Object').writable"
    )
    assert checks is True


def spare_or_on_demand(worker: Any, use_spare: bool, body: str, limits: Limits, variables: Any = None) -> dict[str, Any]:
    worker.retired = None
    worker.spare = None
    if use_spare:
        worker.prewarm()
        assert worker.spare is not None
    reply = reply_of(worker.render(Quiet(), 7, limits.to_wire(), payload_of(body, variables)))
    assert worker.spare is None
    return reply


@pytest.mark.parametrize(
    ("body", "limits", "code"),
    [
        ("append('x'.repeat(10))", Limits(), None),
        ("const a = []; for (;;) a.push('x'.repeat(1000));", Limits(memory_bytes=2 * 1024 * 1024), "TEMPLATE_MEMORY_LIMIT"),
        ("function f(n) { return f(n + 1) + 1; } append(f(0));", Limits(stack_bytes=64 * 1024), "TEMPLATE_STACK_LIMIT"),
        ("for (;;) {}", Limits(time_ms=30), "TEMPLATE_TIME_LIMIT"),
        ("append('x'.repeat(100))", Limits(output_bytes=50), "TEMPLATE_OUTPUT_LIMIT"),
        ("for (;;) await null", Limits(job_steps=20), "TEMPLATE_JOB_LIMIT"),
        ("throw new TypeError('boom')", Limits(), "TEMPLATE_EXECUTION_FAILED"),
        ("Object.defineProperty(variables, 'a', {value: 2}); append(variables.a)", Limits(), "TEMPLATE_EXECUTION_FAILED"),
    ],
)
def test_a_spare_enforces_the_requests_limits_like_a_context_built_on_demand(
    worker: Any, body: str, limits: Limits, code: str | None
) -> None:
    outcomes = []
    for use_spare in (True, False):
        reply = spare_or_on_demand(worker, use_spare, body, limits, {"a": 1})
        error = reply["error"]
        outcomes.append((error and error["code"], error and error["message"], reply["result"]))
    assert outcomes[0][0] == code
    assert outcomes[0] == outcomes[1]


def test_a_spare_does_not_keep_the_default_limits_when_the_request_raises_them(worker: Any) -> None:
    # Built with the defaults (16 MiB); a request that allows more must get more.
    body = "const a = []; for (let i = 0; i < 24; i++) a.push(new Uint8Array(1024 * 1024)); append(a.length)"
    reply = spare_or_on_demand(worker, True, body, Limits(memory_bytes=64 * 1024 * 1024))
    assert reply["error"] is None and reply["result"]["text"] == "24"
    reply = spare_or_on_demand(worker, True, body, Limits())
    assert reply["error"]["code"] == "TEMPLATE_MEMORY_LIMIT"


def test_building_the_spare_is_not_charged_to_the_next_render(worker: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Building the spare here burns far more CPU than the render's whole budget; the render must
    # still see its full budget (the clock starts at the request, not at the spare).
    build = worker.fresh_context

    def slow_build() -> Any:
        end = time.process_time() + 0.3
        while time.process_time() < end:
            pass
        return build()

    monkeypatch.setattr(worker, "fresh_context", slow_build)
    worker.prewarm()
    reply = reply_of(worker.render(Quiet(), 3, Limits(time_ms=50).to_wire(), payload_of("await null; append('ok')")))
    assert reply["error"] is None and reply["result"]["text"] == "ok"
    assert reply["usage"]["time_ms"] < 50
    # Without a spare the context is built on demand, also before the clock starts.
    reply = reply_of(worker.render(Quiet(), 4, Limits(time_ms=50).to_wire(), payload_of("append('ok')")))
    assert reply["error"] is None and reply["usage"]["time_ms"] < 50


def test_a_spare_that_waited_idle_still_gets_a_whole_budget(worker: Any) -> None:
    worker.prewarm()
    end = time.process_time() + 0.2  # longer than the budget, spent after the spare was built
    while time.process_time() < end:
        pass
    reply = reply_of(worker.render(Quiet(), 5, Limits(time_ms=100).to_wire(), payload_of("append('ok')")))
    assert reply["error"] is None and reply["result"]["text"] == "ok"


# --- through the pool: state never crosses renders, whatever happened ----------------------------


@pytest.mark.parametrize(
    ("tail", "limits", "code"),
    [
        ("append('done')", Limits(), None),
        ("throw new Error('after marking')", Limits(), "TEMPLATE_EXECUTION_FAILED"),
        ("for (;;) {}", Limits(time_ms=30), "TEMPLATE_TIME_LIMIT"),
        ("for (;;) await null", Limits(job_steps=10), "TEMPLATE_JOB_LIMIT"),
        ("const a = []; for (;;) a.push('x'.repeat(4096));", Limits(memory_bytes=4 * 1024 * 1024), "TEMPLATE_MEMORY_LIMIT"),
        ("append('x'.repeat(4096))", Limits(output_bytes=100), "TEMPLATE_OUTPUT_LIMIT"),
    ],
)
def test_state_set_by_one_render_is_invisible_to_the_next(solo: WorkerPool, tail: str, limits: Limits, code: str | None) -> None:
    pid = solo.pids()[0]
    try:
        result = run_program(prog(MARK + tail), "null", limits=limits, pool=solo)
        assert code is None and result.text == "done"
    except SandboxError as exc:
        assert exc.code == code
    assert solo.pids() == [pid]  # the same worker process: only its context was replaced
    assert wait_warm(solo)  # it announced a new spare after the reply, error or not
    assert run_program(prog(PROBE), "null", pool=solo).text == FRESH
    assert solo.pids() == [pid]


def test_back_to_back_renders_never_share_a_context(solo: WorkerPool) -> None:
    # No waiting in between: whether the spare is ready or the worker builds one on demand,
    # every render sees a clean global object.
    for i in range(20):
        text = run_program(
            prog("append(typeof leak + typeof late); globalThis.leak = 1; Promise.resolve().then(() => { globalThis.late = 1 })"),
            "null",
            pool=solo,
        ).text
        assert text == "undefinedundefined", i


def test_every_reply_is_followed_by_a_warm_notice(solo: WorkerPool) -> None:
    for body, limits in (("append(1)", Limits()), ("for (;;) {}", Limits(time_ms=20)), ("throw 1", Limits())):
        try:
            run_program(prog(body), "null", limits=limits, pool=solo)
        except SandboxError:
            pass
        with solo._cond:
            worker = solo._idle[0]
        assert worker.warm is False  # the notice read before the render was the previous spare's
        assert wait_warm(solo)


def test_a_warm_notice_read_together_with_the_reply_counts(solo: WorkerPool) -> None:
    run_program(prog("append(1)"), "null", pool=solo)
    with solo._cond:
        worker = solo._idle[0]
    # Stand-in for the notice arriving in the same read as the reply: it is in the buffer and
    # the pipe is empty, so only the buffer can tell. (On a busy machine the reply's own read may
    # already have taken the notice along: then it is in the buffer already.)
    if b'{"op":"warm"}' not in worker.buffer:
        readable, _, _ = select.select([worker.out_fd], [], [], 10.0)
        assert readable
        worker.buffer += os.read(worker.out_fd, 1 << 16)
    assert b'{"op":"warm"}' in worker.buffer
    assert worker.poll_warm()


def test_a_killed_worker_is_replaced_by_one_with_its_own_spare(solo: WorkerPool) -> None:
    run_program(prog(MARK + "append(1)"), "null", pool=solo)
    lim = Limits(time_ms=200, deadline_grace_ms=300, job_steps=1_000_000)
    pid = solo.pids()[0]
    # A stopped worker misses its hard deadline and is killed mid-render.
    os.kill(pid, signal.SIGSTOP)
    with pytest.raises(SandboxError) as info:
        run_program(prog(MARK + "for (;;) await null"), "null", limits=lim, pool=solo)
    assert info.value.code == "TEMPLATE_TIME_LIMIT"
    assert pid in solo.replaced
    assert solo.pids() and solo.pids()[0] != pid
    # The replacement greets ("ready") and then announces its first spare, both before any
    # request: the greeting read while it idles is not taken for a stray reply.
    assert wait_warm(solo)
    assert run_program(prog(PROBE), "null", pool=solo).text == FRESH
    assert solo.replaced == [pid]  # the replacement served; it was not discarded for a cold one
    # ...and a worker killed while idle, holding a spare, is replaced the same way.
    idle_pid = solo.pids()[0]
    os.kill(idle_pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # a zombie until the pool reaps it
        with open(f"/proc/{idle_pid}/stat") as stat:
            if stat.read().split(") ")[1].startswith("Z"):
                break
        time.sleep(0.01)
    assert run_program(prog(PROBE), "null", pool=solo).text == FRESH
    assert solo.replaced == [pid, idle_pid]


# --- the final output count (the worker counts ASCII replies; the harness counts the rest) -------


@pytest.mark.parametrize(
    ("piece", "size"),
    [
        ("plain ascii <&>", 15),
        ("caf\u00e9", 5),
        ("\U0001f600", 4),
        ("\ud800", 3),  # a lone surrogate: what U+FFFD costs when written out
        ("a\\u0041", 7),  # a backslash-u in the text itself: escaped as \\u in the reply
        ("tab\there\x01", 9),  # a control character: a \\u0001 escape in the reply
    ],
)
def test_output_bytes_of_a_finished_render_are_exact(piece: str, size: int) -> None:
    body = "append(variables.p); append(variables.p)"
    result = run_program(prog(body), json.dumps({"p": piece}), limits=Limits(output_bytes=1000))
    assert result.text == piece * 2
    assert result.usage.output_bytes == 2 * size


def test_the_output_limit_still_trips_exactly_at_its_edge() -> None:
    body = "append(variables.p)"
    for limit, code in ((8, None), (7, "TEMPLATE_OUTPUT_LIMIT")):
        try:
            result = run_program(prog(body), json.dumps({"p": "\u00e9\u00e9\u00e9\u00e9"}), limits=Limits(output_bytes=limit))
            assert code is None and result.usage.output_bytes == 8
        except SandboxError as exc:
            assert exc.code == code


def test_lazy_count_is_only_for_finished_renders(worker: Any) -> None:
    worker.prewarm()
    ctx, dispatch = worker.spare
    # An untouched harness (no render ran) answers a lazy poll exactly like an ordinary one.
    assert dispatch("poll", True) == dispatch("poll")
