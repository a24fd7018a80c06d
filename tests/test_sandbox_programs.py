"""Precompiled programs (worker.ProgramCache) change cost, never behaviour.

A worker compiles each template program it sees again once and evaluates it in every later fresh
context from its bytecode, under the template's budget, handing the outcome to the harness. These tests pin
that the first render (compile), the later ones (bytecode) and the plain source path answer
alike, that top-level code a program runs is still bounded by the budget, and that such code
cannot substitute what the host hands over.
"""

from __future__ import annotations

import json
from types import ModuleType

import pytest
from sandbox_helpers import WORKER_LIMITS, QuietChannel, load_worker, prog, worker_reply



@pytest.fixture(scope="module")
def worker_module() -> ModuleType:
    return load_worker("tavernbox_worker_programs_under_test")


# A program's top level normally only creates its function; these also run code there (what a
# template that breaks out of its function body gets), throw, or fail to compile.
PROGRAMS = [
    prog("append(escape(variables.name)); append([1, 2, 3].join('-'))"),
    prog("await null; append('€ \\u0000 \\ud800'); throw new TypeError('boom')"),
    prog("\n\nconst x = ;"),
    prog("function f() { return 1 }\nappend(f.toString())"),
    prog("append('a\x00b')"),  # a raw NUL in the program text: the source path
    prog("append('\ud800')"),  # a lone surrogate in the program text: the source path
    "globalThis.top = 1; (async function (__tb) { __tb.append(typeof top) })",
    "(function () {});\nthrow new RangeError('at the top')\n",
    "null",
    "(async function (__tb) { let e; try { (function f() { f() })() } catch (x) { e = x } throw e })",
    "(async function (__tb) { let e; try { 'x'.repeat(2 ** 28) } catch (x) { e = x } throw e })",
    "(function f() { f() })();\n(async function (__tb) {})",  # stack overflow at the top level
    "'x'.repeat(2 ** 28);\n(async function (__tb) {})",  # out of memory at the top level
]


def test_bytecode_programs_answer_like_source_compiled_ones(worker_module: ModuleType) -> None:
    worker = worker_module.Worker()
    assert worker.programs.lib is not None, "the pinned engine should evaluate cached programs"
    first = [worker_reply(worker, p, {"name": "<Bob>"}) for p in PROGRAMS]  # the harness compiles
    assert not worker.programs.entries
    second = [worker_reply(worker, p, {"name": "<Bob>"}) for p in PROGRAMS]  # compiled here, kept
    again = [worker_reply(worker, p, {"name": "<Bob>"}) for p in PROGRAMS]  # from bytecode
    cached = {json.loads(key) for key in worker.programs.entries}
    assert PROGRAMS[0] in cached and PROGRAMS[6] in cached and PROGRAMS[7] in cached
    assert PROGRAMS[2] not in cached and PROGRAMS[4] not in cached and PROGRAMS[5] not in cached
    worker.programs.lib = None  # the harness compiles every program's source, as before the cache
    source = [worker_reply(worker, p, {"name": "<Bob>"}) for p in PROGRAMS]
    assert first == second == again == source
    assert first[0]["result"]["text"] == "&lt;Bob&gt;1-2-3"
    assert first[1]["error"]["line"] == 3 and first[1]["error"]["code"] == "TEMPLATE_EXECUTION_FAILED"
    assert first[2]["error"]["code"] == "TEMPLATE_SYNTAX" and first[2]["error"]["line"] == 5
    assert first[3]["result"]["text"] == "function f() { return 1 }"
    assert first[6]["result"]["text"] == "number"
    assert first[7]["error"]["js_message"] == "at the top" and first[7]["error"]["line"] == 2
    assert first[9]["error"]["code"] == "TEMPLATE_STACK_LIMIT"
    assert first[10]["error"]["code"] == "TEMPLATE_MEMORY_LIMIT"
    assert first[11]["error"]["code"] == "TEMPLATE_STACK_LIMIT"
    assert first[12]["error"]["code"] == "TEMPLATE_MEMORY_LIMIT"


@pytest.mark.parametrize("top", ["for (;;) {}", "while (true) { try { for (;;) {} } catch (e) {} }"])
def test_top_level_code_is_charged_and_stopped_by_the_budget(worker_module: ModuleType, top: str) -> None:
    worker = worker_module.Worker()
    program = "(function () {});\n" + top + "\n;(async function (__tb) { __tb.append('never') })"
    for _ in range(3):  # the harness compiles, compiled here, from bytecode
        reply = worker_reply(worker, program, keep_time=True)
        assert reply["error"]["code"] == "TEMPLATE_TIME_LIMIT"
        assert 75 <= reply["usage"]["time_ms"] < 1000
    assert worker_reply(worker, prog("append('fine')"))["result"]["text"] == "fine"


def test_top_level_code_cannot_substitute_the_handed_over_program(worker_module: ModuleType) -> None:
    worker = worker_module.Worker()
    forged = "async function (__tb) { __tb.append('forged') }"
    programs = [
        # before the host hands the real function over
        f"__tbEnter(1, {forged}); (async function (__tb) {{ __tb.append('real') }})",
        "__tbEnter(2, 'fake failure'); (async function (__tb) { __tb.append('real') })",
        # after: the harness has taken the hand-over and ignores any later call
        f"(async function (__tb) {{ __tbEnter(1, {forged}); __tbEnter(2, 'x'); await null; __tb.append('real') }})",
    ]
    for _ in range(3):
        assert [worker_reply(worker, p)["result"]["text"] for p in programs] == ["real"] * 3
    thrown = worker_reply(worker, f"__tbEnter(1, {forged}); throw new TypeError('top')")
    assert thrown["error"]["js_message"] == "top" and thrown["result"] is None


def test_the_cache_is_bounded(worker_module: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_module.ProgramCache, "MAX_ENTRIES", 3)
    worker = worker_module.Worker()
    for i in range(6):
        for _ in range(2):
            assert worker_reply(worker, prog(f"append('{i}')"))["result"]["text"] == str(i)
    assert len(worker.programs.entries) == 3
    assert worker.programs.bytes == sum(len(code) for code in worker.programs.entries.values())


# Every object reachable from the globals and the hidden intrinsics, as [path, frozen, extensible],
# plus each global binding's writable/configurable flags: first without reading the lazily frozen
# bindings (their getters), then with every binding read.
_SIGNATURE = r"""JSON.stringify((() => {
  const out = [];
  function walk(seeds, readGlobals) {
    const seen = new Map(), queue = seeds.map((s, i) => [s, 'seed' + i]);
    for (let q = 0; q < queue.length; q++) {
      const [o, path] = queue[q];
      if ((typeof o !== 'object' && typeof o !== 'function') || o === null || seen.has(o)) continue;
      seen.set(o, path);
      out.push([path, Object.isFrozen(o), Object.isExtensible(o)]);
      for (const k of Reflect.ownKeys(o)) {
        const d = Object.getOwnPropertyDescriptor(o, k);
        const name = path + '.' + String(k);
        if ('value' in d) queue.push([d.value, name]); else queue.push([d.get, name + '<get>'], [d.set, name + '<set>']);
        if (o === globalThis && readGlobals && !('value' in d)) queue.push([globalThis[k], name + '<read>']);
      }
      queue.push([Object.getPrototypeOf(o), path + '.<proto>']);
    }
  }
  const seeds = [globalThis, Object.getPrototypeOf(async function () {}), Object.getPrototypeOf(function* () {}),
    Object.getPrototypeOf([][Symbol.iterator]())];
  walk(seeds, false);
  out.push(['second walk', true, true]);
  walk(seeds, true);
  for (const k of Reflect.ownKeys(globalThis)) {
    const d = Object.getOwnPropertyDescriptor(globalThis, k);
    out.push(['global ' + String(k), d.writable === true, d.configurable]);
  }
  return out;
})())"""


def test_the_straight_line_replay_locks_exactly_what_the_encoded_plan_locks(worker_module: ModuleType) -> None:
    worker = worker_module.Worker()
    assert worker.precompiled.bytecode is not None
    fast_ctx, _ = worker.fresh_context()  # bytecode harness with the generated replay
    worker.precompiled.bytecode = None
    slow_ctx, _ = worker.fresh_context()  # harness source, replaying the encoded plan in a loop
    fast, slow = json.loads(fast_ctx.eval(_SIGNATURE)), json.loads(slow_ctx.eval(_SIGNATURE))
    assert len(fast) > 800 and fast == slow
    assert ["second walk", True, True] in fast
    assert not any(writable or configurable for path, writable, configurable in fast if path.startswith("global "))
    # the generated function names every global the discovery context had (the harness's own
    # loop only runs for globals it did not lock)
    # (the lazily frozen bindings are the harness's to define: the replay skips them)
    replay = worker_module.replay_source(worker.plan, [["Array", False, True], ["Math", False, True]])
    assert replay.count("defineProperty(G,") == 1 and "return [1," in replay


def test_guarded_methods_keep_their_length_name_and_enumerability(worker_module: ModuleType) -> None:
    """The length guards are built per arity (no descriptor writes): what a template sees is unchanged."""
    import _quickjs

    probe = """JSON.stringify(Reflect.ownKeys(Array.prototype).filter((k) => typeof k === 'string'
      && typeof Array.prototype[k] === 'function').map((k) => [k, Array.prototype[k].length,
      Array.prototype[k].name, Object.getOwnPropertyDescriptor(Array.prototype, k).enumerable,
      Object.getOwnPropertyDescriptor(Error.prototype, 'constructor').enumerable]))"""
    worker = worker_module.Worker()
    guarded, _ = worker.fresh_context()
    plain = _quickjs.Context()
    assert json.loads(guarded.eval(probe)) == json.loads(plain.eval(probe))
    assert guarded.eval("[].join !== Object.getPrototypeOf(Int8Array).prototype.join && [1, 2].join('-')") == "1-2"
    assert guarded.eval("try { Array(2 ** 32 - 1).join('') } catch (e) { e instanceof RangeError }") is True


def test_garbage_is_still_collected_during_a_render(worker_module: ModuleType) -> None:
    """The prelude runs with collection deferred; the template must get the engine's schedule back.

    A render that makes ~40 MB of cyclic garbage (which reference counting alone never frees)
    fits in a 4 MiB VM only if the collector runs while it renders.
    """
    worker = worker_module.Worker()
    assert worker.gc_threshold > 0, "the pinned engine should take the fast path"
    body = ("let n = 0; for (let i = 0; i < 200000; i++) { const a = {i}; const b = {a, pad: [1, 2, 3]}; a.b = b; n++ }"
            " append(n)")
    payload = "[" + json.dumps(prog(body)) + ",[\nnull\n]]"
    limits = {**WORKER_LIMITS, "memory_bytes": 4 << 20, "time_ms": 5000}
    reply = json.loads(worker.render(QuietChannel(), 1, limits, payload))
    assert reply["error"] is None and reply["result"]["text"] == "200000"


def test_the_discovery_refuses_a_lazy_binding_the_eager_part_reaches(worker_module: ModuleType) -> None:
    """A binding frozen on first read must lead to objects nothing else leads to: if the eager walk
    reaches its value (here through a seed), the plan is refused and the worker cannot start."""
    import _quickjs

    ctx = _quickjs.Context()
    discover = ctx.eval(worker_module.INTRINSICS_PATH.read_text(encoding="utf-8"))
    plan = json.loads(discover(ctx.eval("[globalThis]"), ctx.eval("['Math']")))
    assert plan[4] == "Math" and "L" in plan[0]
    with pytest.raises(_quickjs.JSException, match="reachable from the eager intrinsics"):
        discover(ctx.eval("[globalThis, Math]"), ctx.eval("['Math']"))
