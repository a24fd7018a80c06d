"""run_program: the boundary contract, exact transport, errors with positions, budgets, pool life."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from tavernbox.errors import TemplateError
from tavernbox.sandbox import CancelToken, Limits, SandboxError, WorkerPool, run_program
from sandbox_helpers import outcome, prog, render


def code_of(body: str, variables: object = None, **kw: object) -> str:
    return outcome(body, variables, **kw)[0]  # type: ignore[arg-type]


# --- the contract ------------------------------------------------------------------------------


def test_hello_world_and_usage() -> None:
    result = render("append('Hi '); append(escape(variables.name)); append('!')", {"name": "<Bob>"})
    assert result.text == "Hi &lt;Bob&gt;!"
    usage = result.usage
    assert usage.output_bytes == len(b"Hi &lt;Bob&gt;!")
    assert usage.passes == 1 and usage.job_steps >= 1
    assert 0 < usage.time_ms < 75
    assert usage.memory_bytes > 0


def test_sandbox_error_is_a_template_error() -> None:
    with pytest.raises(TemplateError) as info:
        render("throw new Error('boom')")
    assert isinstance(info.value, SandboxError)
    assert info.value.code == "TEMPLATE_EXECUTION_FAILED"
    assert info.value.js_name == "Error" and info.value.js_message == "boom"


def test_append_follows_plus_equals_and_escape_follows_string() -> None:
    body = (
        "const o = {valueOf(){ return 1 }, toString(){ return 't' }};"
        "append(o); append('|'); append(escape(o)); append('|');"
        "append(null); append(undefined); append(escape(null)); append(escape(undefined));"
        "append(0); append(false); append(10n); append(-0); append(1e21); append([1,[2,3]]); append({});"
    )
    assert render(body).text == "1|t|0false100" + "1e+21" + "1,2,3[object Object]"


def test_escape_replaces_exactly_five_characters() -> None:
    body = "append(escape(variables))"
    assert render(body, "&<>\"'`/=é&amp;").text == "&amp;&lt;&gt;&#34;&#39;`/=é&amp;amp;"


def test_append_of_a_symbol_is_a_type_error() -> None:
    with pytest.raises(SandboxError) as info:
        render("append(Symbol('s'))")
    assert info.value.code == "TEMPLATE_EXECUTION_FAILED"
    assert info.value.js_name == "TypeError"


def test_strings_and_numbers_cross_the_boundary_exactly() -> None:
    data = {"nul": "a\x00<b>", "lone": "x\ud800y", "astral": "😀", "big": 2**31, "bigger": 2**40, "neg": -(2**33)}
    body = (
        "append(variables.nul); append('|'); append(escape(variables.nul)); append('|');"
        "append(variables.lone); append('|'); append(variables.astral); append('|');"
        "append(variables.big); append('|'); append(variables.bigger); append('|'); append(variables.neg);"
        "append('|'); append('\\u0000\\udfff')"
    )
    text = render(body, data).text
    assert text == "a\x00<b>|a\x00&lt;b&gt;|x\ud800y|😀|2147483648|1099511627776|-8589934592|\x00\udfff"


def test_input_json_with_raw_non_ascii_and_lone_surrogates() -> None:
    program = prog("append(variables.a + variables.b)")
    raw = '{"a": "héllo ✓ 😀", "b": "\ud800"}'  # raw characters, not escapes
    assert run_program(program, raw).text == "héllo ✓ 😀\ud800"


def test_variables_are_deep_frozen_and_locals_has_no_prototype() -> None:
    body = (
        "'use strict';"
        "let r = [];"
        "try { variables.a.b.push(1); r.push('mutated') } catch (e) { r.push(e.name) }"
        "r.push(Object.isFrozen(variables.a.b), Object.isFrozen(__tb), Object.isFrozen(__tb.locals),"
        "  Object.getPrototypeOf(__tb.locals) === null, typeof __tb.locals.constructor);"
        "append(r.join(','))"
    )
    assert render(body, {"a": {"b": [1]}}).text == "TypeError,true,true,true,true,undefined"


def test_proto_key_in_input_is_an_own_property() -> None:
    assert render("append(({}).polluted); append(variables.__proto__.polluted)", {"__proto__": {"polluted": 1}}).text == "1"


def test_invalid_input_json() -> None:
    # The last four try to break out of the brackets the host splices the input into.
    for bad in ["{", "NaN", "[1,]", "  ", "1, 2", "1],[2", "1]], [[2", '1] ,"x"]']:
        with pytest.raises(SandboxError) as info:
            run_program(prog("append(1)"), bad)
        assert info.value.code == "INPUT_INVALID"


def test_program_not_a_function() -> None:
    with pytest.raises(SandboxError) as info:
        run_program("42", "null")
    assert info.value.code == "TEMPLATE_EXECUTION_FAILED"
    assert "function" in info.value.message


def test_sync_function_and_returned_thenable_are_awaited() -> None:
    assert run_program("(function (t) { t.append('sync') })", "null").text == "sync"
    program = "(function (t) { return {then(ok) { t.append('thenable'); ok() }} })"
    assert run_program(program, "null").text == "thenable"


# --- positions ---------------------------------------------------------------------------------


def test_syntax_error_position_inside_the_program() -> None:
    program = "(async function (__tb) {\n  let a = 1;\n  a b\n})"
    with pytest.raises(SandboxError) as info:
        run_program(program, "null")
    err = info.value
    assert err.code == "TEMPLATE_SYNTAX"
    assert (err.js_line, err.js_column) == (3, 5)
    assert err.js_name == "SyntaxError"


def test_syntax_error_on_the_first_line_has_an_unshifted_column() -> None:
    program = "(async function (__tb) { a b })"
    with pytest.raises(SandboxError) as info:
        run_program(program, "null")
    assert info.value.code == "TEMPLATE_SYNTAX"
    assert (info.value.js_line, info.value.js_column) == (1, program.index(" b }") + 2)


def test_runtime_error_position_and_runtime_syntax_error_is_execution_failed() -> None:
    with pytest.raises(SandboxError) as info:
        run_program("(async function (__tb) {\n  let a = 1;\n  null.x\n})", "null")
    assert info.value.code == "TEMPLATE_EXECUTION_FAILED"
    assert (info.value.js_line, info.value.js_column) == (3, 3)
    assert info.value.js_name == "TypeError"
    # A SyntaxError raised while running (JSON.parse) is not a compile error.
    with pytest.raises(SandboxError) as info:
        run_program("(async function (__tb) {\n  JSON.parse('{')\n})", "null")
    assert info.value.code == "TEMPLATE_EXECUTION_FAILED"
    assert info.value.js_name == "SyntaxError"
    # ... and so is one thrown while evaluating the script, after compilation succeeded.
    with pytest.raises(SandboxError) as info:
        run_program("(JSON.parse('{'), async function (__tb) {})", "null")
    assert info.value.code == "TEMPLATE_EXECUTION_FAILED"


def test_error_inside_harness_call_points_at_the_callers_line() -> None:
    with pytest.raises(SandboxError) as info:
        run_program("(async function (__tb) {\n\n  __tb.append(Symbol())\n})", "null")
    assert info.value.js_line == 3


def test_thrown_primitives_and_objects_are_reduced_to_strings() -> None:
    for body, message in [
        ("throw 'plain'", "plain"),
        ("throw 42", "42"),
        ("throw Symbol('s')", "Symbol(s)"),
        ("throw null", "null"),
        ("throw {}", "a non-Error object was thrown"),
        ("throw {message: 'shaped'}", "shaped"),
    ]:
        with pytest.raises(SandboxError) as info:
            render(body)
        assert info.value.code == "TEMPLATE_EXECUTION_FAILED", body
        assert info.value.js_message == message, body


# --- budgets: one trip and one just under ------------------------------------------------------


def test_template_size_budget() -> None:
    lim = Limits(template_chars=10)  # programs up to 80 characters
    small = "(async function (t) { t.append(1) })"
    assert run_program(small.ljust(80), "null", limits=lim).text == "1"
    with pytest.raises(SandboxError) as info:
        run_program(small.ljust(81), "null", limits=lim)
    assert info.value.code == "TEMPLATE_TOO_LARGE"


def test_input_budget_counts_utf8_bytes() -> None:
    lim = Limits(input_bytes=12)
    program = prog("append(variables)")
    assert run_program(program, '"' + "é" * 5 + '"', limits=lim).text == "é" * 5  # 12 bytes
    for too_big in ['"' + "é" * 5 + 'e"', '"' + "e" * 11 + '"']:
        with pytest.raises(SandboxError) as info:
            run_program(program, too_big, limits=lim)
        assert info.value.code == "TEMPLATE_INPUT_LIMIT"


def test_output_budget_counts_utf8_bytes_after_escaping() -> None:
    lim = Limits(output_bytes=8)
    assert render("append('x'.repeat(8))", limits=lim).text == "x" * 8
    assert code_of("append('x'.repeat(9))", limits=lim) == "TEMPLATE_OUTPUT_LIMIT"
    assert render("append('😀😀')", limits=lim).text == "😀😀"  # 4 UTF-16 units, 8 bytes
    assert code_of("append('😀😀a')", limits=lim) == "TEMPLATE_OUTPUT_LIMIT"
    assert render("append(escape('<<'))", limits=lim).text == "&lt;&lt;"
    assert code_of("append(escape('<<<'))", limits=lim) == "TEMPLATE_OUTPUT_LIMIT"
    assert render("append('é'.repeat(4))", limits=lim).text == "é" * 4
    assert code_of("append('é'.repeat(4) + 'a')", limits=lim) == "TEMPLATE_OUTPUT_LIMIT"


def test_output_budget_is_sticky_when_caught() -> None:
    lim = Limits(output_bytes=8)
    code = code_of("try { append('x'.repeat(100)) } catch (e) {} append('ok')", limits=lim)
    assert code == "TEMPLATE_OUTPUT_LIMIT"


def test_memory_budget() -> None:
    lim = Limits(memory_bytes=4 * 1024 * 1024)
    assert render("const s = 'x'.repeat(1 << 20); append(s.length)", limits=lim).text == str(1 << 20)
    assert code_of("const s = 'x'.repeat(5 << 20); append(s.length)", limits=lim) == "TEMPLATE_MEMORY_LIMIT"
    # the same 5 MiB string is fine under the default 16 MiB
    assert render("const s = 'x'.repeat(5 << 20); append(s.length)").text == str(5 << 20)


def test_stack_budget() -> None:
    body = "function f(n) { return n === 0 ? 0 : 1 + f(n - 1) } append(f(variables))"
    assert render(body, 60).text == "60"
    assert code_of(body, 100000) == "TEMPLATE_STACK_LIMIT"
    small, large = Limits(stack_bytes=32 * 1024), Limits(stack_bytes=1024 * 1024)
    assert code_of(body, 300, limits=small) == "TEMPLATE_STACK_LIMIT"
    assert render(body, 300, limits=large).text == "300"


def test_time_budget() -> None:
    body = "let s = 0; for (let i = 0; i < 300000; i++) s += i; append(s)"
    result = render(body, limits=Limits(time_ms=5000))
    assert result.text == str(sum(range(300000)))
    assert code_of(body, limits=Limits(time_ms=2)) == "TEMPLATE_TIME_LIMIT"


def test_an_interrupted_render_says_where_the_program_was() -> None:
    # the interrupt's backtrace comes back as positions only: the caller's frame is the line that called the loop
    program = prog("function spin() {\n  for (;;) {}\n}\nappend(1);\nspin()")
    call_line = program.split("\n").index("spin()") + 1
    with pytest.raises(SandboxError) as info:
        run_program(program, "null", limits=Limits(time_ms=50))
    assert info.value.code == "TEMPLATE_TIME_LIMIT" and info.value.js_stack is not None
    frames = [tuple(map(int, f.removeprefix("<input>:").split(":"))) for f in info.value.js_stack.split("\n")]
    assert call_line in [line for line, _ in frames]
    with pytest.raises(SandboxError) as thrown:  # a template's own text is not taken for the engine's
        run_program(prog("throw new Error('interrupted at <input>:1:1')"), "null")
    assert thrown.value.js_stack is None


def test_time_budget_is_cumulative_over_jobs() -> None:
    # Each job burns a few ms of CPU: one job is fine, many together exceed the 75 ms budget.
    # (A counted loop: Date.now() is the render's fixed clock and does not advance.)
    burn = "let x = 0; for (let i = 0; i < 400000; i++) x += i"
    assert render(f"{burn}; append('one')").text == "one"
    code, err, _ = outcome(f"for (let i = 0; i < 30; i++) {{ await null; {burn} }}")
    assert code == "TEMPLATE_TIME_LIMIT"
    assert 75 <= err.usage.time_ms < 2 * 75


def test_job_budget() -> None:
    body = "for (let i = 0; i < 20; i++) await null; append('done')"
    steps = render(body).usage.job_steps
    assert render(body, limits=Limits(job_steps=steps)).text == "done"
    assert code_of(body, limits=Limits(job_steps=steps - 1)) == "TEMPLATE_JOB_LIMIT"


def test_unsettled_promise() -> None:
    assert code_of("await new Promise(() => {})") == "TEMPLATE_UNSETTLED"
    assert render("await new Promise((ok) => ok()); append('settled')").text == "settled"


# --- cancellation, kill, crash, restart --------------------------------------------------------


@pytest.fixture
def solo_pool():
    pool = WorkerPool(size=1)
    assert run_program(prog("append('warm')"), "null", pool=pool).text == "warm"
    yield pool
    pool.close()


def test_cancel_before_start() -> None:
    token = CancelToken()
    token.cancel()
    assert token.cancelled
    with pytest.raises(SandboxError) as info:
        run_program(prog("append(1)"), "null", cancel=token)
    assert info.value.code == "TEMPLATE_CANCELLED"


def test_cancel_during_a_render_stops_at_the_next_job(solo_pool: WorkerPool) -> None:
    pid = solo_pool.pids()[0]
    token = CancelToken()
    lim = Limits(time_ms=20000, job_steps=1_000_000)
    threading.Timer(0.2, token.cancel).start()
    start = time.monotonic()
    with pytest.raises(SandboxError) as info:
        run_program(prog("for (;;) await null"), "null", limits=lim, cancel=token, pool=solo_pool)
    assert info.value.code == "TEMPLATE_CANCELLED"
    assert time.monotonic() - start < 2.0
    assert run_program(prog("append('next')"), "null", pool=solo_pool).text == "next"
    assert solo_pool.pids() == [pid]  # cancelled cooperatively: the worker was not killed


def test_stuck_worker_is_killed_at_the_hard_deadline_and_replaced(solo_pool: WorkerPool) -> None:
    # A worker that stops answering (here: stopped by a signal, standing in for a C loop that
    # never polls the interrupt or a host-side conversion hang) is killed at the deadline.
    pid = solo_pool.pids()[0]
    lim = Limits(time_ms=200, deadline_grace_ms=300, job_steps=1_000_000)
    threading.Timer(0.05, os.kill, (pid, signal.SIGSTOP)).start()
    start = time.monotonic()
    with pytest.raises(SandboxError) as info:
        run_program(prog("for (;;) await null"), "null", limits=lim, pool=solo_pool)
    elapsed = time.monotonic() - start
    assert info.value.code == "TEMPLATE_TIME_LIMIT"
    assert "killed" in info.value.message
    assert lim.deadline_s <= elapsed < lim.deadline_s + 1.0
    assert pid in solo_pool.replaced
    assert run_program(prog("append('after')"), "null", pool=solo_pool).text == "after"
    assert solo_pool.pids() != [pid]


def test_dead_worker_is_reported_and_replaced(solo_pool: WorkerPool) -> None:
    pid = solo_pool.pids()[0]
    lim = Limits(time_ms=20000, job_steps=1_000_000)
    threading.Timer(0.2, os.kill, (pid, signal.SIGKILL)).start()
    with pytest.raises(SandboxError) as info:
        run_program(prog("for (;;) await null"), "null", limits=lim, pool=solo_pool)
    assert info.value.code == "TEMPLATE_SANDBOX_CRASHED"
    assert pid in solo_pool.replaced
    assert run_program(prog("append('alive')"), "null", pool=solo_pool).text == "alive"


def test_concurrent_renders_use_several_workers() -> None:
    pool = WorkerPool(size=2)
    try:
        results: list[str] = []
        errors: list[BaseException] = []

        def one(i: int) -> None:
            try:
                results.append(run_program(prog(f"await null; append({i})"), "null", pool=pool).text)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert sorted(results, key=int) == [str(i) for i in range(8)]
        assert pool._count <= 2
    finally:
        pool.close()


def test_fresh_context_per_render(solo_pool: WorkerPool) -> None:
    run_program(prog("globalThis.stash = 'secret'; Promise.resolve().then(() => { globalThis.late = 1 })"), "null", pool=solo_pool)
    text = run_program(prog("append(typeof stash + ',' + typeof late)"), "null", pool=solo_pool).text
    assert text == "undefined,undefined"


def test_program_source_with_raw_nul_and_lone_surrogate() -> None:
    # The binding cannot take either character in eval source; the program crosses as JSON.
    program = "(async function (__tb) { __tb.append('a\x00b\ud800c') })"
    assert run_program(program, "null").text == "a\x00b\ud800c"


def test_prestart_boots_workers_before_the_first_render() -> None:
    pool = WorkerPool(size=2)
    try:
        pool.prestart()
        assert len(pool.pids()) == 2
        start = time.monotonic()
        assert run_program(prog("append('quick')"), "null", pool=pool).text == "quick"
        assert time.monotonic() - start < 1.0
    finally:
        pool.close()
    assert pool.pids() == []


def test_busy_threads_in_the_caller_do_not_eat_the_budget() -> None:
    """Research fact 2: the engine's clock is process CPU; renders run in their own process."""
    stop = threading.Event()

    def burn() -> None:
        while not stop.is_set():
            sum(range(10000))

    burners = [threading.Thread(target=burn) for _ in range(2)]
    for t in burners:
        t.start()
    try:
        body = "let s = 0; for (let i = 0; i < 100000; i++) s += i; append(s)"
        for _ in range(5):
            result = render(body)
            assert result.text == str(sum(range(100000)))
            assert result.usage.time_ms < 75
    finally:
        stop.set()
        for t in burners:
            t.join()


def test_default_input_budget_at_its_edge() -> None:
    size = Limits().input_bytes
    program = prog("append(variables.length)")
    assert run_program(program, '"' + "a" * (size - 2) + '"').text == str(size - 2)
    with pytest.raises(SandboxError) as info:
        run_program(program, '"' + "a" * (size - 1) + '"')
    assert info.value.code == "TEMPLATE_INPUT_LIMIT"


def test_input_preparation_is_not_charged_to_the_template() -> None:
    """Parsing and deep-freezing ~400 KB of input takes longer than a small template may run."""
    data = {"msgs": [{"name": f"u{i}", "text": f"hello {i}", "tags": ["a", "b"]} for i in range(5000)]}
    result = render("append(variables.msgs.length + ',' + Object.isFrozen(variables.msgs[4999].tags))", data)
    assert result.text == "5000,true"
    assert result.usage.time_ms < 20


def test_worker_that_died_while_idle_is_replaced_silently(solo_pool: WorkerPool) -> None:
    pid = solo_pool.pids()[0]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        # a zombie until the pool reaps it: poll() in the pool sees it as exited
        with open(f"/proc/{pid}/stat") as stat:
            if stat.read().split(") ")[1].startswith("Z"):
                break
        time.sleep(0.01)
    assert run_program(prog("append('fresh')"), "null", pool=solo_pool).text == "fresh"
    assert pid in solo_pool.replaced


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_worker_dies_with_its_parent(tmp_path) -> None:
    """A worker stuck in a render must not outlive a parent that was killed."""
    script = tmp_path / "parent.py"
    script.write_text(
        "import sys, threading\n"
        "from tavernbox.sandbox import Limits, WorkerPool, run_program\n"
        "pool = WorkerPool(size=1)\n"
        "pool.prestart()\n"
        "print(pool.pids()[0], flush=True)\n"
        "lim = Limits(time_ms=60000, job_steps=1000000, deadline_grace_ms=60000)\n"
        "run_program('(async function (t) { for (;;) {} })', 'null', limits=lim, pool=pool)\n"
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        worker_pid = int(parent.stdout.readline())
        time.sleep(0.3)  # the worker is now spinning in the render
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _alive(worker_pid):
            time.sleep(0.05)
        assert not _alive(worker_pid)
    finally:
        if parent.poll() is None:
            parent.kill()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return not stat.read().split(") ")[1].startswith("Z")
    except FileNotFoundError:
        return False


def test_worker_started_from_a_finished_thread_stays_alive() -> None:
    """PR_SET_PDEATHSIG follows the parent *thread*: workers must be spawned from one that lasts."""
    pool = WorkerPool(size=1)
    try:
        t = threading.Thread(target=lambda: run_program(prog("append(1)"), "null", pool=pool))
        t.start()
        t.join()
        pid = pool.pids()[0]
        time.sleep(0.2)
        assert run_program(prog("append(2)"), "null", pool=pool).text == "2"
        assert pool.pids() == [pid] and pool.replaced == []
    finally:
        pool.close()


def test_error_constructor_wrappers_carry_the_engines_statics() -> None:
    """Every wrapped error constructor has the engine's own static properties, in the engine's order,
    with the engine's values (accessor statics as their current value: DEVIATIONS), and subclassing,
    ``instanceof`` and calls without ``new`` behave as with the engine's constructor."""
    import _quickjs

    names = ["Error", "EvalError", "RangeError", "ReferenceError", "SyntaxError", "TypeError", "URIError",
             "InternalError", "AggregateError", "SuppressedError", "DOMException"]
    probe = ("JSON.stringify(%s.map((n) => [n, Reflect.ownKeys(globalThis[n]).map((k) => {"
             " const v = globalThis[n][k]; const d = Object.getOwnPropertyDescriptor(globalThis[n], k);"
             " return [String(k), d.enumerable, typeof v, typeof v === 'object' || typeof v === 'function' ? null : v]; })]))"
             % json.dumps(names))
    engine = json.loads(_quickjs.Context().eval(probe))
    ours = json.loads(render("append(" + probe + ")").text)
    assert ours == engine
    checks = ("class E extends TypeError {}; const e = new E('m');"
              " append([e instanceof TypeError, e instanceof Error, TypeError('x') instanceof TypeError,"
              " new RangeError('r').constructor === RangeError, TypeError.length, e.name].join())")
    assert render(checks).text == "true,true,true,true,1,TypeError"
