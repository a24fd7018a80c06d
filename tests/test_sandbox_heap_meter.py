"""``Usage.memory_bytes`` is the VM allocator's total, read without walking the heap.

The worker reads QuickJS's ``malloc_size`` straight from the runtime (after a self-test) instead
of calling the binding's heap-walking ``memory()`` on every render; these tests pin that the
figure is the same one ``memory()`` reports and that it follows what the template allocated.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import _quickjs

from sandbox_helpers import QuietChannel, WORKER_LIMITS, load_worker, prog

worker_module = load_worker("tavernbox_worker_heap_meter")


@cache
def worker() -> Any:
    """One worker for the module's tests, made at first use (it reads the harness)."""
    return worker_module.Worker()


def usage_of(body: str) -> dict[str, Any]:
    payload = "[" + json.dumps(prog(body)) + ",[\n" + json.dumps(None) + "\n]]"
    reply = json.loads(worker().render(QuietChannel(), 1, WORKER_LIMITS, payload))
    worker().retired = None
    worker().prewarm()
    assert reply["error"] is None, reply
    return reply["usage"]


def test_the_meter_reads_without_walking_on_this_engine() -> None:
    assert worker().heap.fast is True


def test_the_meter_agrees_with_the_binding_figure() -> None:
    ctx = _quickjs.Context()
    ctx.set_memory_limit(7 * 1024 * 1024)
    ctx.eval("var kept = []; for (let i = 0; i < 3000; i++) kept.push('item ' + i);")
    assert worker().heap(ctx) == ctx.memory()["malloc_size"]
    slow = worker_module.HeapMeter(False)
    assert slow.fast is False
    assert slow(ctx) == ctx.memory()["malloc_size"]


def test_memory_bytes_follows_what_the_template_keeps() -> None:
    small = usage_of("append('x');")["memory_bytes"]
    big = usage_of("globalThis.kept = 'y'.repeat(2 * 1024 * 1024); append('x');")["memory_bytes"]
    assert small > 0
    assert big - small >= 2 * 1024 * 1024
