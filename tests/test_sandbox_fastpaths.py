"""The sandbox's fast paths change cost, never behaviour.

* Fresh contexts load harness.js as bytecode compiled once per worker (worker.PrecompiledHarness):
  a context built that way must answer exactly like one that compiled the source, and any failed
  check must fall back to the source.
* The output budget measures UTF-8 lazily (under a 3-bytes-per-unit bound): the limit must still
  trip at exactly the same byte, with multi-byte text too.
"""

from __future__ import annotations

import json
from types import ModuleType

import pytest
from sandbox_helpers import load_worker, prog, render, worker_reply

from tavernbox.sandbox import Limits, SandboxError



@pytest.fixture(scope="module")
def worker_module() -> ModuleType:
    return load_worker("tavernbox_worker_under_test")


PROGRAMS = [
    prog("append(escape(variables.name)); append([1, 2, 3].join('-'))"),
    prog("await null; append('€ \\u0000 \\ud800'); throw new TypeError('boom')"),
    prog("\n\nconst x = ;"),
    prog("try { Array.prototype.join = () => 'PWNED' } catch (e) {} append([1, 2].join('+'))"),
    prog("append(Array(2 ** 32 - 1).join(''))"),
]


def test_bytecode_contexts_answer_like_compiled_ones(worker_module: ModuleType) -> None:
    worker = worker_module.Worker()
    assert worker.precompiled.bytecode is not None, "the pinned engine should load the harness as bytecode"
    fast = [worker_reply(worker, p, {"name": "<Bob>"}) for p in PROGRAMS]
    worker.precompiled.bytecode = None  # the source path, as before the fast path existed
    slow = [worker_reply(worker, p, {"name": "<Bob>"}) for p in PROGRAMS]
    assert fast == slow
    assert fast[0]["result"]["text"] == "&lt;Bob&gt;1-2-3"
    assert fast[1]["error"]["line"] == 3 and fast[1]["error"]["code"] == "TEMPLATE_EXECUTION_FAILED"
    assert fast[2]["error"]["code"] == "TEMPLATE_SYNTAX"


def test_an_unknown_engine_version_falls_back_to_source(worker_module: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_module.PrecompiledHarness, "ENGINE_VERSION", b"0.0.0-not-verified")
    worker = worker_module.Worker()
    assert worker.precompiled.bytecode is None
    assert worker_reply(worker, PROGRAMS[0], {"name": "a&b"})["result"]["text"] == "a&amp;b1-2-3"


def test_a_failed_load_falls_back_to_source(worker_module: ModuleType) -> None:
    worker = worker_module.Worker()
    worker.precompiled.bytecode = b"\x00not bytecode"  # JS_ReadObject refuses it: a fresh context from source
    assert worker_reply(worker, PROGRAMS[0], {"name": "x"})["result"]["text"] == "x1-2-3"


@pytest.mark.parametrize("count", [10, 11])
def test_output_limit_trips_at_the_exact_byte_with_multibyte_text(count: int) -> None:
    # 30 bytes allowed; each '€' is 3 UTF-8 bytes but 1 UTF-16 unit. The lazy bound (3 per unit)
    # is exact here, so this pins the boundary itself.
    body = f"for (let i = 0; i < {count}; i++) append('€')"
    if count * 3 <= 30:
        assert render(body, limits=Limits(output_bytes=30)).text == "€" * count
    else:
        with pytest.raises(SandboxError) as info:
            render(body, limits=Limits(output_bytes=30))
        assert info.value.code == "TEMPLATE_OUTPUT_LIMIT"


@pytest.mark.parametrize(("ascii_count", "ok"), [(20, True), (21, False)])
def test_output_limit_is_exact_when_the_bound_overestimates(ascii_count: int, ok: bool) -> None:
    # ASCII costs 1 byte but the bound assumes 3: the render must still fit up to the real limit.
    body = f"append('é'.repeat(5)); for (let i = 0; i < {ascii_count}; i++) append('a')"
    lim = Limits(output_bytes=30)
    if ok:
        result = render(body, limits=lim)
        assert result.usage.output_bytes == 10 + ascii_count == len(result.text.encode("utf-8"))
    else:
        with pytest.raises(SandboxError) as info:
            render(body, limits=lim)
        assert info.value.code == "TEMPLATE_OUTPUT_LIMIT"
        assert info.value.usage is not None and info.value.usage.output_bytes == 30


def test_pool_workers_load_the_harness_as_bytecode() -> None:
    """The worker process as the pool starts it (``python -P worker.py``) takes the fast path."""
    from tavernbox.sandbox.pool import _spawner

    proc = _spawner.spawn()
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
    finally:
        proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()
    assert ready["op"] == "ready"
    assert ready["harness"] == "bytecode"
