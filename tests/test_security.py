"""The attack catalogue of research/sandbox-security.md section 5, one case per entry.

Every case runs through the production path (pooled worker, fresh context) and asserts:
its code (or exact output), the CPU the host charged (the 75 ms budget plus interrupt slack,
or the documented overshoot of an uninterruptible built-in), its wall time (bounded by the hard
deadline), that the worker pool is healthy afterwards, and, for the leakage entries, that
nothing reaches the next render. Entries that need the bridge (5.H lookups) or concern the EJS
compiler and the macro parser (5.I, most of 5.J) live with those components; the ones that
touch the sandbox boundary are here.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tavernbox.sandbox import Limits, SandboxError, WorkerPool, run_program
from sandbox_helpers import prog

TIME = "TEMPLATE_TIME_LIMIT"
MEMORY = "TEMPLATE_MEMORY_LIMIT"
STACK = "TEMPLATE_STACK_LIMIT"
OUTPUT = "TEMPLATE_OUTPUT_LIMIT"
JOBS = "TEMPLATE_JOB_LIMIT"
UNSETTLED = "TEMPLATE_UNSETTLED"
FAILED = "TEMPLATE_EXECUTION_FAILED"

#: CPU the host may charge past the budget: interrupt granularity plus the last C call (a
#: garbage collection of a heap full of small objects is one). The issue's bound is twice the
#: time budget.
SLACK_MS = 75.0
#: Wall time of any case that is not killed: generous for a loaded 2-core CI machine.
WALL_S = 3.0
#: CPU bound of cases that fail fast (a guard, an immediate allocation failure, a plain throw).
FAST_MS = 40.0


@dataclass(frozen=True)
class Case:
    id: str
    body: str
    codes: frozenset[str] = frozenset()
    text: str | None = None  # expected output when the render must succeed
    cpu_ms: float = 75.0 + SLACK_MS  # bound on charged CPU
    variables: object = None
    limits: Limits | None = None
    after: tuple[tuple[str, str], ...] = field(default=())  # (body, expected text) next renders


def fails(id: str, body: str, *codes: str, cpu_ms: float = 75.0 + SLACK_MS, **kw: object) -> Case:
    return Case(id, body, codes=frozenset(codes), cpu_ms=cpu_ms, **kw)  # type: ignore[arg-type]


def ok(id: str, body: str, text: str, **kw: object) -> Case:
    return Case(id, body, text=text, **kw)  # type: ignore[arg-type]


SPARSE = "const a = []; a.length = 2 ** 32 - 1;"

CATALOGUE: list[Case] = [
    # 5.A CPU exhaustion
    fails("A1", "while (true) {}", TIME),
    fails("A2", "for (;;) { try { for (;;) {} } catch (e) {} }", TIME),
    fails("A3", "const t = Date.now(); while (Date.now() - t < 1e9) {}", TIME),
    fails("A4", "append(/^(a+)+$/.test('a'.repeat(40) + 'b'))", TIME),
    fails("A5", "append(Array(2 ** 32 - 1).join(''))", MEMORY, cpu_ms=FAST_MS),
    fails("A6", SPARSE + "append(escape(a))", MEMORY, cpu_ms=FAST_MS),
    fails("A6b", SPARSE + "append(`${a}`)", MEMORY, cpu_ms=FAST_MS),
    fails("A7", "append(Array.prototype.includes.call({length: 2 ** 53 - 1}, 1))", MEMORY, cpu_ms=FAST_MS),
    *[
        fails(f"A8-{m}", f"append(Array(2 ** 32 - 1).{m}.length)", MEMORY, cpu_ms=FAST_MS)
        for m in ["reverse()", "sort()", "slice()", "concat([1])", "flat()", "splice(0)", "copyWithin(0, 1)",
                  "toLocaleString()", "indexOf(1)", "lastIndexOf(1)", "forEach(x => x)", "map(x => x)",
                  "filter(x => x)", "some(x => x)", "every(x => x)", "reduce((x, y) => x, 0)", "find(x => x)",
                  "toSorted()", "toReversed()", "with(0, 1)", "fill(0)", "flatMap(x => x)"]
    ],
    fails("A8-shift", "const b = Array(2 ** 32 - 1); b.shift(); append(b.length)", MEMORY, cpu_ms=FAST_MS),
    fails("A8-unshift", "const b = Array(2 ** 32 - 2); b.unshift(1); append(b.length)", MEMORY, cpu_ms=FAST_MS),
    fails("A8-concat-arg", "append([1].concat(Array(2 ** 32 - 2)).length)", MEMORY, cpu_ms=FAST_MS),
    fails("A9", "append(Array.prototype.sort.call({length: 2 ** 53 - 1}))", MEMORY, cpu_ms=FAST_MS),
    fails("A9b", "append(Array.prototype.join.call({length: 2 ** 53 - 1}))", MEMORY, cpu_ms=FAST_MS),
    fails("A10", "append(Array(1e8).join('').length)", MEMORY, cpu_ms=FAST_MS),
    fails("A11", SPARSE + "append(JSON.stringify(a).length)", MEMORY, cpu_ms=FAST_MS),
    fails("A11b", SPARSE + "append(JSON.stringify({a}).length)", MEMORY, cpu_ms=FAST_MS),
    # Beyond the catalogue: other ways to make C walk 2**32-1 indices stay within 2x the budget.
    fails("A-from", "append(Array.from({length: 2 ** 32 - 1}).length)", TIME, MEMORY),
    fails("A-spread", "append([...Array(2 ** 32 - 1)].length)", TIME, MEMORY),
    fails("A-set", "append(new Set(Array(2 ** 32 - 1)).size)", TIME, MEMORY),
    fails("A-toArray", "append(Array(2 ** 32 - 1).values().toArray().length)", TIME, MEMORY),
    fails("A-proxy-sort", "append(Array.prototype.sort.call(new Proxy([], {get(t, k) {"
          " return k === 'length' ? 2 ** 32 - 1 : undefined }})))", MEMORY, cpu_ms=FAST_MS),
    # Uninterruptible BigInt arithmetic: overshoot bounded by memory (documented in DEVIATIONS).
    fails("A12", "append((10n ** 1000000n).toString().length)", TIME, MEMORY, cpu_ms=1000),
    fails("A13", "let p = Promise.resolve(); for (let i = 0; i < 100; i++) p = p.then(() => { for (;;) {} },"
          " () => { for (;;) {} }); await p", TIME),
    fails("A14", "(function f() { try { f() } catch (e) { f() } })()", TIME, STACK),
    fails("A15", "append('ab'.repeat(1e6).split('').sort((x, y) => x < y ? -1 : 1).length)", TIME, MEMORY),
    # 5.B memory exhaustion
    fails("B1", "const a = []; for (;;) a.push({x: a.length})", MEMORY, TIME),
    fails("B1-fast", "const a = []; for (let i = 0;; i++) a.push(new Uint8Array(1e5))", MEMORY),
    fails("B2", "let s = 'x'; for (;;) s += s", MEMORY),
    fails("B3", "append('x'.repeat(2 ** 28))", MEMORY, cpu_ms=FAST_MS),
    fails("B4", "append(new Array(1e9).fill(0).length)", MEMORY, cpu_ms=FAST_MS),
    fails("B5", "append(new ArrayBuffer(2 ** 30).byteLength)", MEMORY, cpu_ms=FAST_MS),
    fails("B5b", "append(new Float64Array(3e6).length)", MEMORY, cpu_ms=FAST_MS),
    fails("B6", "append('a'.repeat(2 ** 20).replace(/a/g, 'bb').length)", MEMORY, TIME),
    fails("B7", "append([...'a'.repeat(2 ** 20).matchAll(/a/g)].length)", MEMORY, TIME),
    # Compiling an 8 MiB eval() source is one uninterruptible parser call (bounded by memory).
    fails("B8", "eval('var x=1;'.repeat(2 ** 20))", MEMORY, TIME, cpu_ms=600),
    Case("B9", "globalThis.keep = []; for (;;) keep.push('x'.repeat(1e4))", codes=frozenset({MEMORY, TIME}),
         after=(("append(typeof keep)", "undefined"),)),
    # Growing a Map rehashes it in C, and a full heap's last garbage collection is one C call:
    # both can overshoot the budget by tens of ms (documented in DEVIATIONS).
    fails("B10", "const m = new Map(); for (let i = 0;; i++) m.set(i, {i})", MEMORY, TIME, cpu_ms=300),
    fails("B11", "let p = []; for (let i = 0;; i++) p.push(new Promise(() => {}))", MEMORY, TIME),
    fails("B12", "try { for (const a = [];;) a.push(a.length) } catch (e) { for (const b = [];;) b.push(1) }",
          MEMORY, TIME),
    # 5.C output bombs
    fails("C1", "for (;;) append('xxxxxxxxxxxxxxxx')", OUTPUT),
    fails("C2", "append('x'.repeat(600 * 1024))", OUTPUT),
    fails("C3", "append(escape('<'.repeat(200 * 1024)))", OUTPUT),
    fails("C4", "append('\\u{1F600}'.repeat(140000))", OUTPUT),
    fails("C5", "for (let i = 0; i < 1e7; i++) append('a')", OUTPUT, TIME),
    ok("C6", "append(escape('a\\u0000<script>b'))", "a\x00&lt;script&gt;b"),
    ok("C7", "append('a\\ud800b')", "a\ud800b"),
    fails("C8", "append('x'.repeat(513 * 1024))", OUTPUT),
    fails("C9", "for (let i = 0; i < 10; i++) append('x'.repeat(1e5))", OUTPUT),
    # 5.D stack exhaustion
    fails("D1", "const f = () => f(); f()", STACK),
    fails("D2", "append(JSON.parse('['.repeat(1e5) + ']'.repeat(1e5)))", STACK),
    Case("D3", "", codes=frozenset({STACK, "TEMPLATE_SYNTAX"})),  # program built in the test
    fails("D4", "let a = [], p = a; for (let i = 0; i < 1e5; i++) { const n = []; p.push(n); p = n }"
          " append(a.flat(Infinity).length)", STACK, TIME),
    fails("D5", "let p = {}; for (let i = 0; i < 5e4; i++) p = new Proxy(p, {}); append(p.x)", STACK, TIME),
    Case("D6", "let p = []; for (let i = 0; i < 5e4; i++) p = new Proxy(p, {}); append(Array.isArray(p))",
         codes=frozenset({STACK, TIME, "OK"})),
    fails("D7", "let o = {}; for (let i = 0; i < 1e5; i++) o = {a: o}; append(JSON.stringify(o).length)",
          STACK, MEMORY, TIME),
    fails("D8", "const o = {get x() { return this.x }}; append(o.x)", STACK),
    fails("D10", "async function f() { await f() } await f()", STACK, JOBS),
    # 5.E promise and job floods
    fails("E1", "await new Promise(() => { const f = () => Promise.resolve().then(f); f() })", JOBS),
    fails("E2", "for (;;) await null", JOBS),
    fails("E3", "await new Promise(() => {})", UNSETTLED, cpu_ms=FAST_MS),
    fails("E4", "await {then(r) { for (;;) {} }}", TIME),
    fails("E5", "queueMicrotask(() => { throw {toString() { for (;;) {} }} })", FAILED, cpu_ms=FAST_MS),
    fails("E6", "new FinalizationRegistry(() => { throw {toString() { for (;;) {} }} }).register({}, 1)",
          FAILED, cpu_ms=FAST_MS),
    fails("E6b", "new WeakRef({})", FAILED, cpu_ms=FAST_MS),
    fails("E7", "Promise.resolve().then(() => { for (;;) {} }).catch(() => { for (;;) {} })", TIME),
    Case("E8", "for (let i = 0; i < 1e5; i++) Promise.reject(i); append('ok')", codes=frozenset({"OK", TIME})),
    Case("E9", "Promise.resolve().then(() => { globalThis.late = 1 }); append('a')", text="a",
         after=(("append(typeof late)", "undefined"),)),
    fails("E10", "(async () => { for (;;) await null })(); append('done')", JOBS),
    # 5.F prototype pollution, intrinsic tampering, leakage
    Case("F1", "Object.prototype.isAdmin = true; append(({}).isAdmin)", text="",
         after=(("append(({}).isAdmin)", ""),)),
    fails("F1-strict", "'use strict'; (() => { 'use strict'; Object.prototype.isAdmin = true })()", FAILED),
    Case("F2", "try { Array.prototype.join = () => 'PWNED' } catch (e) {} append([1, 2].join('-'))", text="1-2",
         after=(("append([1, 2].join('-'))", "1-2"),)),
    ok("F3", "try { String.prototype.replace = function () { return this } } catch (e) {} append(escape('<b>'))",
       "&lt;b&gt;"),
    ok("F4", "try { RegExp.prototype[Symbol.replace] = (s) => s } catch (e) {}"
       " try { RegExp.prototype.exec = () => null } catch (e) {} append(escape('<b>'))", "&lt;b&gt;"),
    fails("F5", "try { Error.prototype.toString = function () { for (;;) {} } } catch (e) {} for (;;) {}", TIME),
    fails("F6", "try { Object.prototype.toString = function () { for (;;) {} } } catch (e) {} throw {}", FAILED,
          cpu_ms=FAST_MS),
    Case("F7", "globalThis.stash = 'secret-of-user-A'; append(typeof stash)", text="string",
         after=(("append(typeof stash)", "undefined"),)),
    fails("F8", "Object.defineProperty(globalThis, 'JSON', {value: null})", FAILED, cpu_ms=FAST_MS),
    fails("F9", "'use strict'; (() => { 'use strict'; (async function () {}).constructor.prototype.x = 1 })()",
          FAILED, cpu_ms=FAST_MS),
    fails("F10", "(() => { 'use strict'; Object.getPrototypeOf([][Symbol.iterator]()).next = () => ({done: true}) })()",
          FAILED, cpu_ms=FAST_MS),
    ok("F10b", "try { Object.getPrototypeOf([][Symbol.iterator]()).next = () => ({done: true}) } catch (e) {}"
       " for (const x of [1, 2]) append(x)", "12"),
    Case("F11", "try { Promise.prototype.then = function () {} } catch (e) {} await null; append('ok')", text="ok"),
    fails("F12", "(() => { 'use strict'; Error.prepareStackTrace = () => { for (;;) {} } })()", FAILED, cpu_ms=FAST_MS),
    ok("F13", "append(({}).polluted)", "", variables={"__proto__": {"polluted": 1}}),
    ok("F15", "try { this.constructor.prototype.x = 1 } catch (e) {} append(({}).x)", ""),
    fails("F16", "Object.defineProperty(Object.prototype, 'then', {get() { return undefined }})", FAILED,
          cpu_ms=FAST_MS),
    # 5.G escapes and host reach
    ok("G1", "append(typeof require + typeof process + typeof std + typeof os + typeof fetch + typeof print)",
       "undefined" * 6),
    ok("G2", "append(Function('return this')() === globalThis); append((() => {}).constructor('return 1')())",
       "true1"),
    ok("G3", "append(eval('1+1')); append((0, eval)('this') === globalThis)", "2true"),
    fails("G4", "await import('os')", FAILED, cpu_ms=FAST_MS),
    fails("G4b", "await import('/etc/passwd')", FAILED, cpu_ms=FAST_MS),
    # CVE-2023-48183 shape (for-in over `this` in an arrow inside a derived constructor, plus
    # eval): the pinned engine must neither crash nor hang on it.
    ok("G5", "function Bar() {} class Apple extends Bar { constructor(a) { (() => { for (const i in this) {};"
       " eval(a) })(); super() } } await new Promise(Apple).catch((e) => append(e.name));"
       " try { new Apple('1') } catch (e) { append(e.name) }", "TypeErrorReferenceError"),
    fails("G6", "append(Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1e9))", FAILED, cpu_ms=FAST_MS),
    ok("G7", "append(typeof performance + typeof __date_clock)", "undefinedundefined"),
    ok("G9", "append(__tb.append.constructor === Function); try { __tb.append.caller } catch (e) { append(e.name) }",
       "trueTypeError"),
    # 5.H (the parts that are about data crossing the boundary; lookups land with the bridge)
    ok("H11", "append(Object.keys(variables).map(k => k.length).join())", "1,1,16,6",
       variables={"\x00": 1, "\ud800": 2, "../../etc/passwd": 3, "%2e%2e": 4}),
    ok("H13", "append(variables + 1)", str(2**31 + 1), variables=2**31),
    # 5.J encoding
    ok("J4", "append(variables)", "a\udc00b", variables="a\udc00b"),
    ok("J8", "append(escape('\\u202e\\uff1c'))", "\u202e\uff1c"),
    # 5.K escape bypass attempts
    ok("K1", "append(escape('<script>alert(1)</script>'))", "&lt;script&gt;alert(1)&lt;/script&gt;"),
    ok("K2", "append(escape('\"><img src=x onerror=alert(1)>'))", "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;"),
    ok("K3", "append(escape(\"' onmouseover='alert(1)\"))", "&#39; onmouseover=&#39;alert(1)"),
    ok("K4", "append(escape('&lt;b&gt;'))", "&amp;lt;b&amp;gt;"),
    ok("K5", "append(escape({n: 0, toString() { return this.n++ ? '<b>' : 'ok' }}))", "ok"),
    ok("K6", "append(escape({valueOf() { return '<b>' }, toString() { return '<i>' }}))", "&lt;i&gt;"),
    fails("K7", "append(Symbol('s'))", FAILED, cpu_ms=FAST_MS),
    ok("K8", "append(escape(null)); append(escape(undefined)); append(null); append(undefined)", ""),
    ok("K9", "try { String.prototype.replace = () => '<' } catch (e) {} try { RegExp.prototype.exec = () => null }"
       " catch (e) {} try { Object.prototype['<'] = '<' } catch (e) {} append(escape('<'))", "&lt;"),
    ok("K14", "append(escape('<\\u0000script>')); append(escape('\\uff1cscript\\uff1e'))",
       "&lt;\x00script&gt;\uff1cscript\uff1e"),
    fails("K15", "append(escape('<'.repeat(150 * 1024)))", OUTPUT),
]

# Errors a template can fake must not be reported as budgets (research fact 8).
SPOOFS: list[Case] = [
    fails("S1", "throw 'InternalError: interrupted'", FAILED, cpu_ms=FAST_MS),
    fails("S2", "throw new Error('interrupted')", FAILED, cpu_ms=FAST_MS),
    fails("S3", "throw 'stack overflow'", FAILED, cpu_ms=FAST_MS),
    fails("S4", "throw new RangeError('Maximum call stack size exceeded')", FAILED, cpu_ms=FAST_MS),
    fails("S5", "throw RangeError('Maximum call stack size exceeded')", FAILED, cpu_ms=FAST_MS),
    fails("S6", "class X extends RangeError {}; throw new X('Maximum call stack size exceeded')", FAILED, cpu_ms=FAST_MS),
    fails("S7", "throw Reflect.construct(TypeError, ['Maximum call stack size exceeded'], RangeError)", FAILED,
          cpu_ms=FAST_MS),
    fails("S8", "throw new InternalError('out of memory')", FAILED, cpu_ms=FAST_MS),
    fails("S9", "throw Object.create(RangeError.prototype, {message: {value: 'Maximum call stack size exceeded'}})",
          FAILED, cpu_ms=FAST_MS),
    fails("S10", "throw {toString() { for (;;) {} }}", FAILED, cpu_ms=FAST_MS),
    fails("S11", "const e = new Error('x'); Object.defineProperty(e, 'stack', {get() { for (;;) {} }}); throw e",
          FAILED, cpu_ms=FAST_MS),
    fails("S12", "const e = new Error('x'); Object.defineProperty(e, 'message', {get() { for (;;) {} }}); throw e",
          FAILED, cpu_ms=FAST_MS),
    fails("S13", "throw new Proxy({}, {getOwnPropertyDescriptor() { for (;;) {} }, getPrototypeOf() { for (;;) {} }})",
          TIME),
    fails("S14", "try { 'x'.repeat(2 ** 28) } catch (e) { e.message = 'out of memory' } throw new Error('plain')",
          FAILED, cpu_ms=FAST_MS),
]


@pytest.fixture(scope="module")
def pool() -> WorkerPool:
    p = WorkerPool(size=1)
    yield p
    p.close()


def check_healthy(pool: WorkerPool) -> None:
    """A benign render on the same pool returns exactly the expected text."""
    result = run_program(prog("append('Hi ' + escape(variables.who) + '!')"), '{"who": "<Bob>"}', pool=pool)
    assert result.text == "Hi &lt;Bob&gt;!"


def run_case(case: Case, pool: WorkerPool) -> None:
    program = prog(case.body)
    if case.id == "D3":
        program = "(async function (__tb) { __tb.append(" + "(" * 100000 + "1" + ")" * 100000 + ") })"
    start = time.monotonic()
    try:
        result = run_program(program, json.dumps(case.variables), limits=case.limits, pool=pool)
        code, usage, text = "OK", result.usage, result.text
    except SandboxError as exc:
        code, usage, text = exc.code, exc.usage, None
    wall = time.monotonic() - start
    if case.text is not None:
        assert code == "OK", f"{case.id}: {code}"
        assert text == case.text
    else:
        assert code in case.codes, f"{case.id}: got {code}"
    assert usage.time_ms <= case.cpu_ms, f"{case.id}: charged {usage.time_ms} ms"
    assert wall < WALL_S, f"{case.id}: {wall:.2f} s wall"
    for body, expected in case.after:
        assert run_program(prog(body), "null", pool=pool).text == expected
    check_healthy(pool)


@pytest.mark.parametrize("case", CATALOGUE, ids=[c.id for c in CATALOGUE])
def test_catalogue(case: Case, pool: WorkerPool) -> None:
    run_case(case, pool)


@pytest.mark.parametrize("case", SPOOFS, ids=[c.id for c in SPOOFS])
def test_spoofed_budget_errors(case: Case, pool: WorkerPool) -> None:
    run_case(case, pool)


def test_real_engine_errors_are_classified_as_budgets(pool: WorkerPool) -> None:
    """The counterpart of the spoofs: the genuine events keep their codes, even when caught and rethrown."""
    for body, code in [
        ("let e; try { (function f() { f() })() } catch (x) { e = x } throw e", STACK),
        ("let e; try { 'x'.repeat(2 ** 28) } catch (x) { e = x } throw e", MEMORY),
    ]:
        with pytest.raises(SandboxError) as info:
            run_program(prog(body), "null", pool=pool)
        assert info.value.code == code


def test_global_names_are_an_allow_list(pool: WorkerPool) -> None:
    """G10: exactly these globals exist (a new engine build that adds host reach fails here)."""
    text = run_program(prog("append(Object.getOwnPropertyNames(globalThis).sort().join())"), "null", pool=pool).text
    expected = sorted(
        "Object Function Error EvalError RangeError ReferenceError SyntaxError TypeError URIError InternalError "
        "AggregateError SuppressedError Iterator Array parseInt parseFloat isNaN isFinite decodeURI "
        "decodeURIComponent encodeURI encodeURIComponent escape unescape Infinity NaN undefined eval Number "
        "Boolean String Math Reflect Symbol DisposableStack globalThis BigInt Date RegExp JSON Proxy Map Set "
        "WeakMap WeakSet ArrayBuffer SharedArrayBuffer Uint8ClampedArray Int8Array Uint8Array Int16Array "
        "Uint16Array Int32Array Uint32Array BigInt64Array BigUint64Array Float16Array Float32Array Float64Array "
        "DataView Atomics Promise AsyncDisposableStack DOMException btoa atob __tbEnter".split()
    )
    assert text.split(",") == expected


def test_every_reachable_intrinsic_is_frozen(pool: WorkerPool) -> None:
    """F9/F10: walk everything reachable from the globals and the hidden intrinsics.

    Built-in methods whose only own properties are ``length`` and ``name`` are left extensible
    on purpose (see intrinsics.js and DEVIATIONS.md); everything else must be frozen, and every
    global binding non-writable and non-configurable.

    The walk runs twice. First without reading any global binding's value through its getter:
    the families frozen on first read (Math, Date, the typed arrays, ...) must not be reachable
    at all then, so everything the walk meets is already frozen. Then with every binding read:
    the families are frozen by the time their binding hands them out.
    """
    body = r"""
    const seeds = () => [globalThis, Object.getPrototypeOf(async function () {}), Object.getPrototypeOf(function* () {}),
      Object.getPrototypeOf(async function* () {}), Object.getPrototypeOf(Object.getPrototypeOf((function* () {})())),
      Object.getPrototypeOf(Object.getPrototypeOf((async function* () {})())),
      Object.getPrototypeOf([][Symbol.iterator]()), Object.getPrototypeOf(''[Symbol.iterator]()),
      Object.getPrototypeOf(''.matchAll(/a/g)), Object.getPrototypeOf([].values().map(x => x))];
    function walk(start, readGlobals) {
      const seen = new Set(), stack = [...start], bad = [];
      while (stack.length) {
        const o = stack.pop();
        if ((typeof o !== 'object' && typeof o !== 'function') || o === null || seen.has(o)) continue;
        seen.add(o);
        const keys = Reflect.ownKeys(o);
        const plain = typeof o === 'function' && keys.every(k => k === 'length' || k === 'name');
        if (o !== globalThis && !plain && !Object.isFrozen(o)) bad.push(String(o.name || o[Symbol.toStringTag] || keys.slice(0, 3).map(String).join('/')));
        for (const k of keys) {
          const d = Object.getOwnPropertyDescriptor(o, k);
          if ('value' in d) stack.push(d.value); else stack.push(d.get, d.set);
          if (o === globalThis && (d.configurable || d.writable)) bad.push('global ' + String(k));
          if (o === globalThis && readGlobals && !('value' in d)) stack.push(globalThis[k]);
        }
        stack.push(Object.getPrototypeOf(o));
      }
      return [seen.size, bad];
    }
    const [before, badBefore] = walk(seeds(), false);
    const lazy = Reflect.ownKeys(globalThis).filter(k => !('value' in Object.getOwnPropertyDescriptor(globalThis, k)));
    const [after, badAfter] = walk([...seeds(), Object.getPrototypeOf(new Map().entries()), Object.getPrototypeOf(new Set().values()), Int8Array], true);
    append(before > 300 ? 'walked' : 'too few: ' + before); append(badBefore.join());
    append(after > 500 ? ' walked' : ' too few: ' + after); append(badAfter.join());
    append(' ' + lazy.length + ' lazy');
    """
    assert run_program(prog(body), "null", pool=pool, limits=Limits(time_ms=5000)).text == "walked walked 24 lazy"


def test_a_lazily_frozen_family_is_frozen_even_when_its_first_read_fails(pool: WorkerPool) -> None:
    """The first read of a lazy binding freezes its family before returning it; a freeze cut short
    by the stack running out throws, hands nothing out, and is redone by the next read."""
    body = r"""
    let depth = 0, failed = 0;
    function dive() { depth++; try { return dive(); } catch (e) { try { return typeof Uint8Array; } catch (e2) { failed++; throw e2; } } }
    try { dive(); } catch (e) {}
    const proto = Object.getPrototypeOf(Uint8Array);
    append([Object.isFrozen(Uint8Array), Object.isFrozen(proto), Object.isFrozen(proto.prototype),
      Object.isFrozen(Math), Object.isFrozen(DOMException), new DOMException("m", "AbortError").code, failed > 0].join());
    """
    result = run_program(prog(body), "null", pool=pool, limits=Limits(time_ms=5000))
    assert result.text == "true,true,true,true,true,20,true"


def test_objects_the_engine_builds_lead_only_to_frozen_intrinsics(pool: WorkerPool) -> None:
    """What the engine itself creates for a template, before any lazy binding is read, must not lead
    into a family frozen on first read: atob/btoa throw DOMExceptions (so DOMException is frozen
    eagerly), and Map.groupBy, the Set methods and Uint8Array.fromBase64 are the families' own."""
    body = r"""
    const r = [];
    const check = (o) => { const p = Object.getPrototypeOf(o); r.push(Object.isFrozen(p) && Object.isFrozen(p.constructor)); };
    try { atob('*') } catch (e) { check(e); r.push(e.constructor === DOMException, e.name) }
    try { btoa('\u0100') } catch (e) { check(e) }
    try { null.x } catch (e) { check(e) }
    Promise.any([Promise.reject(1)]).catch((e) => { check(e); append(r.join()) });
    """
    result = run_program(prog(body), "null", pool=pool, limits=Limits(time_ms=5000))
    assert result.text == "true,true,InvalidCharacterError,true,true,true"
    # A typed array's buffer is an ArrayBuffer the engine made: reading a typed-array binding
    # freezes the ArrayBuffer family too (they are tied), before ArrayBuffer itself is ever read.
    body = r"""
    const U = Uint8Array;
    const a = new U(2).buffer, b = U.fromBase64('AAA=').buffer, c = new U(2).subarray(1).buffer;
    append([a, b, c].map((x) => Object.isFrozen(Object.getPrototypeOf(x)) && Object.isFrozen(x.constructor)).join());
    """
    assert run_program(prog(body), "null", pool=pool, limits=Limits(time_ms=5000)).text == "true,true,true"


def test_lazy_bindings_behave_like_the_intrinsics(pool: WorkerPool) -> None:
    """Reading a lazy binding gives the engine's own intrinsic (the same object every time), and a
    template cannot replace or redefine it, in sloppy or strict code."""
    body = r"""
    const r = [Math === Math, Math.max(1, 3), new Map([[1, 2]]).get(1), new Set([1]).has(1), typeof Date.now(),
      new Uint8Array([1, 2]).length, new DataView(new ArrayBuffer(4)).byteLength, typeof Proxy, typeof Atomics];
    try { Math = 1 } catch (e) { r.push('sloppy threw') }
    r.push(typeof Math);
    try { (() => { 'use strict'; Math = 1 })() } catch (e) { r.push(e.name) }
    try { Object.defineProperty(globalThis, 'Date', { value: 1 }) } catch (e) { r.push(e.name) }
    try { Math.evil = 1 } catch (e) {} r.push(String(Math.evil));
    append(r.join());
    """
    result = run_program(prog(body), "null", pool=pool, limits=Limits(time_ms=5000))
    assert result.text == "true,3,2,true,number,2,4,function,object,object,TypeError,TypeError,undefined"


def test_hostile_values_never_reach_the_host(pool: WorkerPool) -> None:
    """Research fact 4: host-side conversions of user values would hang with the GIL held.

    The harness returns only its own JSON; these complete in bounded time with an ordinary
    result instead of needing the watchdog.
    """
    for body in [
        "return {toJSON() { for (;;) {} }}",
        "Object.defineProperty(globalThis, 'out', {get() { for (;;) {} }}); append('x')",
    ]:
        start = time.monotonic()
        result = run_program(prog(body), "null", pool=pool)
        assert time.monotonic() - start < WALL_S
        assert result.text in ("", "x")
    # Resolving the function's promise reads `then` of the returned value: inside the VM, under
    # the budget, so a looping trap costs the time budget and no more.
    start = time.monotonic()
    with pytest.raises(SandboxError) as info:
        run_program(prog("return new Proxy({}, {get() { for (;;) {} }})"), "null", pool=pool)
    assert info.value.code == TIME and time.monotonic() - start < WALL_S
    check_healthy(pool)


def test_churn_keeps_the_worker_bounded(pool: WorkerPool) -> None:
    """Many renders mixing out-of-memory, interrupts and pending jobs in one worker still work."""
    bodies = ["const a = []; for (let i = 0;; i++) a.push(new Uint8Array(1e5))", "await new Promise(() => {})",
              "for (;;) await null", "append('fine')"]
    lim = Limits(time_ms=20)
    for i in range(40):
        try:
            run_program(prog(bodies[i % len(bodies)]), "null", limits=lim, pool=pool)
        except SandboxError:
            pass
    check_healthy(pool)


def test_i12_text_chunks_survive_byte_for_byte(pool: WorkerPool) -> None:
    """I12/J6: text the compiler emits as JSON-escaped literals reaches the output unchanged."""
    chunk = "`${x}` \\ */ </script> \u2028 \u2029 \x00 \ud800 😀 \r\n '\""
    program = "(async function (__tb) { __tb.append(" + json.dumps(chunk) + ") })"
    assert run_program(program, "null", pool=pool).text == chunk


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmRSS from /proc (Linux only)")
def test_churn_leaves_worker_memory_flat() -> None:
    """Research section 6 churn test: hundreds of renders with out-of-memory errors, interrupts,
    pending jobs and cycles in one worker; its resident memory must not keep growing."""
    solo = WorkerPool(size=1)
    try:
        bodies = ["const a = []; for (;;) a.push(new Uint8Array(1e5))", "for (;;) {}",
                  "await new Promise(() => {})", "const o = {}; o.self = o; append('cycle')",
                  "for (;;) await null"]
        lim = Limits(time_ms=5)

        def batch(n: int) -> None:
            for i in range(n):
                try:
                    run_program(prog(bodies[i % len(bodies)]), "null", limits=lim, pool=solo)
                except SandboxError:
                    pass

        batch(30)
        pid = solo.pids()[0]
        before = rss_kib(pid)
        batch(150)
        assert solo.pids() == [pid]
        assert rss_kib(pid) - before < 24 * 1024
    finally:
        solo.close()


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


OOM_PATTERNS = {
    "repeat": "append('a'.repeat(@N).length)",
    "replace": "append('a'.repeat(@N).replace(/a/g, 'bb').length)",
    "matchAll": "append([...'a'.repeat(@N).matchAll(/a/g)].length)",
    "split": "append('ab'.repeat(@N).split('').length)",
    "push": "const a = []; for (let i = 0; i < @N; i++) a.push({i}); append(a.length)",
    "map": "const m = new Map(); for (let i = 0; i < @N; i++) m.set(i, [i]); append(m.size)",
    "eval": "eval('var x=1;'.repeat(@N)); append(1)",
    "json": "append(JSON.stringify(Array.from({length: @N}, (_, i) => ({i}))).length)",
}


@pytest.mark.parametrize("memory_mib", [1, 4, 16])
@pytest.mark.parametrize("pattern", sorted(OOM_PATTERNS))
def test_out_of_memory_matrix_never_crashes(pattern: str, memory_mib: int, pool: WorkerPool) -> None:
    """Research section 6 release gate for engine upgrades: out-of-memory paths at several sizes
    and limits end in a result or a budget code, never a dead worker or a hang."""
    lim = Limits(memory_bytes=memory_mib * 1024 * 1024, time_ms=30)
    for exponent in (14, 18, 22):
        body = OOM_PATTERNS[pattern].replace("@N", str(2**exponent))
        start = time.monotonic()
        detail = ""
        try:
            run_program(prog(body), "null", limits=lim, pool=pool)
            code = "OK"
        except SandboxError as exc:
            code, detail = exc.code, exc.message
        allowed = {"OK", MEMORY, TIME}
        if pattern == "eval":
            # The parser sometimes reports running out of memory as a bogus SyntaxError
            # ("invalid assignment left-hand side"): an engine quirk, not a crash.
            allowed.add(FAILED)
        if pattern == "split" and detail == "uncaught null":
            # A heap of small strings can leave the engine no room for its out-of-memory error, so it
            # throws null; classify_null's probe (four times the memory) can fill that heap too, and then
            # takes the null for the template's own (DEVIATIONS, "Sandbox"). A misnamed failure, not a
            # crash or a hang: the rest of this test still holds.
            allowed.add(FAILED)
        assert code in allowed, (pattern, exponent, code, detail)
        assert time.monotonic() - start < WALL_S, (pattern, exponent, time.monotonic() - start)
    check_healthy(pool)
