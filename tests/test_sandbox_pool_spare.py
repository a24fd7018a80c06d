"""The pool's spare worker: a process booted ahead that takes a killed worker's place (issue 29).

What must hold: after a worker is stopped for its budget (or dies), the render after it is
served by a worker that had already booted and built its context (the former spare), a new
spare is started in the background, the killed process is reaped without the caller waiting,
and the pool never runs more than its size plus the one spare. ``spare=False`` is the plain
pool. The CPU watch itself (``_Watch``) is checked against a worker whose CPU time the test sets.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tavernbox.sandbox import Limits, SandboxError, WorkerPool, run_program
from tavernbox.sandbox import pool as pool_module
from sandbox_helpers import prog

#: C-level work the engine never interrupts: only the pool's CPU watch stops it.
STUCK = prog("const s = 'a'.repeat(1 << 21); s.indexOf('a'.repeat(1 << 20) + 'b')")
#: A small budget: the watch stops the worker after ~70 ms of its CPU.
QUICK = Limits(time_ms=20.0, deadline_grace_ms=10_000.0)


def wait_for(condition, timeout: float = 20.0) -> bool:  # type: ignore[no-untyped-def]
    """True once ``condition()`` holds (polled; no claim about how long it took)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.01)
    return False


def spare_booted(pool: WorkerPool) -> bool:
    """Whether the pool's spare has greeted and built its first context (read without taking it)."""
    with pool._cond:
        spare = pool._spare
        worker = spare._process() if spare is not None else None
        return worker is not None and worker.poll_warm()


def worker_processes() -> list[int]:
    """Live (not zombie) sandbox worker processes that are children of this process."""
    found = []
    me = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        fields = stat.rsplit(") ", 1)[1].split()
        if fields[1] == me and fields[0] != "Z" and b"worker.py" in cmdline:
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return not stat.read().rsplit(") ", 1)[1].startswith("Z")
    except FileNotFoundError:
        return False


@pytest.fixture()
def solo() -> Iterator[WorkerPool]:
    pool = WorkerPool(size=1)
    pool.prestart()
    yield pool
    pool.close()


def stop(pool: WorkerPool) -> SandboxError:
    with pytest.raises(SandboxError) as info:
        run_program(STUCK, "null", limits=QUICK, pool=pool)
    assert info.value.code == "TEMPLATE_TIME_LIMIT" and "cannot interrupt" in info.value.message
    return info.value


@pytest.mark.skipif(not Path("/proc/self/schedstat").exists(), reason="the CPU watch reads /proc (Linux)")
def test_the_render_after_a_kill_is_served_by_the_booted_spare(solo: WorkerPool) -> None:
    assert wait_for(lambda: spare_booted(solo))
    worker_pid, spare_pid = solo.pids()[0], solo.spare_pid()
    assert spare_pid is not None and spare_pid != worker_pid
    stop(solo)
    assert solo.replaced == [worker_pid]
    # The stopped worker's place went to the spare, which is warm at once: no boot to wait for.
    assert solo.pids() == [spare_pid]
    with solo._cond:
        replacement = solo._idle[0]
    assert replacement.poll_warm()
    assert solo.spare_pid() is None  # no boot competes with the render right after the kill
    assert run_program(prog("append('next')"), "null", pool=solo).text == "next"
    assert solo.pids() == [spare_pid] and solo.replaced == [worker_pid]
    # ...and once that render ended, a new spare was started in the background for the next kill.
    assert wait_for(lambda: solo.spare_pid() not in (None, spare_pid, worker_pid))


@pytest.mark.skipif(not Path("/proc/self/schedstat").exists(), reason="the CPU watch reads /proc (Linux)")
def test_a_killed_worker_is_reaped_without_the_caller_waiting(solo: WorkerPool) -> None:
    pid = solo.pids()[0]
    stop(solo)
    assert wait_for(lambda: not Path(f"/proc/{pid}").exists())  # reaped: not even a zombie is left


@pytest.mark.skipif(not Path("/proc/self/schedstat").exists(), reason="the CPU watch reads /proc (Linux)")
def test_the_pool_never_runs_more_than_its_size_and_the_spare() -> None:
    others = set(worker_processes())  # other pools' workers (the default pool's, say)
    pool = WorkerPool(size=2)
    try:
        pool.prestart()

        def running() -> int:
            """This pool's workers not yet told to die (a killed one is reaped in the background)."""
            return len(set(worker_processes()) - others - set(pool.replaced))

        counts = [running()]
        for _ in range(3):  # kills in a row: each takes the spare and starts the next one
            stop(pool)
            counts.append(running())
            assert run_program(prog("append(1)"), "null", pool=pool).text == "1"
            counts.append(running())
        assert max(counts) <= pool.size + 1
        assert len(pool.replaced) == 3
        assert wait_for(lambda: running() == pool.size + 1)  # the spare is back
    finally:
        pool.close()
    assert wait_for(lambda: not set(worker_processes()) - others)  # closing stops the spare too


def test_a_spare_that_died_is_not_handed_out(solo: WorkerPool) -> None:
    assert wait_for(lambda: solo.spare_pid() is not None)
    dead_spare = solo.spare_pid()
    assert dead_spare is not None
    os.kill(dead_spare, signal.SIGKILL)
    assert wait_for(lambda: not alive(dead_spare))
    pid = solo.pids()[0]
    os.kill(pid, signal.SIGKILL)  # the worker dies too: its place needs a replacement
    assert wait_for(lambda: not alive(pid))
    assert run_program(prog("append('fresh')"), "null", pool=solo).text == "fresh"
    assert pid in solo.replaced
    assert dead_spare not in solo.pids()


def test_the_plain_pool_has_no_spare() -> None:
    others = set(worker_processes())
    pool = WorkerPool(size=1, spare=False)
    try:
        pool.prestart()
        assert run_program(prog("append(1)"), "null", pool=pool).text == "1"
        assert pool.spare_pid() is None
        pid = pool.pids()[0]
        os.kill(pid, signal.SIGKILL)
        assert wait_for(lambda: not alive(pid))
        assert run_program(prog("append(2)"), "null", pool=pool).text == "2"
        assert pool.replaced == [pid] and pool.spare_pid() is None
        assert len(set(worker_processes()) - others - {pid}) == 1
    finally:
        pool.close()


# --- the CPU watch -------------------------------------------------------------------------------


class FakeWorker:
    """Stands for a worker whose CPU time (ns since an arbitrary origin) the test sets."""

    def __init__(self) -> None:
        self.cpu = 10_000_000
        self.reads = 0

    def cpu_ns(self) -> int:
        self.reads += 1
        return self.cpu


def test_the_watch_first_looks_when_the_budget_could_first_be_used_up(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(pool_module.time, "monotonic", lambda: now[0])
    worker = FakeWorker()
    limits = Limits(time_ms=75.0)
    watch = pool_module._Watch(worker, limits, 0.0)  # type: ignore[arg-type]
    limit = 0.075 + pool_module.CPU_GRACE_S
    # A worker's CPU time grows no faster than the wall clock: nothing to read before then.
    assert watch.next_check() == pytest.approx(100.0 + limit)
    now[0] = 100.05
    worker.cpu += 40_000_000
    reads = worker.reads
    assert not watch.cpu_exceeded(worker)  # type: ignore[arg-type]
    assert worker.reads == reads  # too early: no read at all
    # At the first look it has used 60 ms (a loaded machine): the rest cannot go before 65 ms.
    now[0] = 100.0 + limit
    worker.cpu += 20_000_000
    assert not watch.cpu_exceeded(worker)  # type: ignore[arg-type]
    assert watch.next_check() == pytest.approx(now[0] + limit - 0.060)
    # Once it has used more than the budget it is over.
    now[0] += 0.2
    worker.cpu += int((limit - 0.060) * 1e9) + 1_000
    assert watch.cpu_exceeded(worker)  # type: ignore[arg-type]


def test_the_watch_never_waits_less_than_its_minimum_nor_past_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]
    monkeypatch.setattr(pool_module.time, "monotonic", lambda: now[0])
    worker = FakeWorker()
    watch = pool_module._Watch(worker, Limits(time_ms=75.0, deadline_grace_ms=100.0), 0.0)  # type: ignore[arg-type]
    now[0] = watch.cpu_limit
    worker.cpu += int(watch.cpu_limit * 1e9) - 1  # a nanosecond short of the budget
    assert not watch.cpu_exceeded(worker)  # type: ignore[arg-type]
    assert watch.next_check() == pytest.approx(now[0] + pool_module.CPU_WATCH_MIN_S)
    # A worker that got little CPU so far (a loaded machine): its next look would be after the
    # wall deadline, which comes first.
    other = FakeWorker()
    late = pool_module._Watch(other, Limits(time_ms=75.0, deadline_grace_ms=100.0), 0.0)  # type: ignore[arg-type]
    now[0] = late.started + late.cpu_limit
    other.cpu += 10_000_000
    assert not late.cpu_exceeded(other)  # type: ignore[arg-type]
    assert late.next_check() == late.deadline


def test_without_a_cpu_clock_only_the_wall_deadline_applies() -> None:
    class NoProc(FakeWorker):
        def cpu_ns(self) -> None:  # type: ignore[override]
            return None

    worker = NoProc()
    watch = pool_module._Watch(worker, Limits(), 0.0)  # type: ignore[arg-type]
    assert watch.next_check() == watch.deadline
    assert not watch.cpu_exceeded(worker)  # type: ignore[arg-type]
