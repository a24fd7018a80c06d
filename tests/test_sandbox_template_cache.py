"""Templates loaded from the worker's bytecode (``worker.TemplateCache``, ``Shortcuts.pt_bytecode``) change cost,
never behaviour; the host-side count of a finished text (``worker.text_size``) equals the harness's.

A request's templates run in one fresh VM through ST-Prompt-Template's runtime, which compiles each with
``(0, eval)``; with the cache the worker compiles each text once and later requests load its bytecode. These tests
pin that the first request (compiled by the worker), a later one (from bytecode) and the plain path give the same
texts, warnings (with their line:column), patches and budget errors, that a template can neither reach the loader
nor carry anything to the next request, and that the cache stays within its bounds.
"""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

import pytest
from sandbox_helpers import QuietChannel, load_worker, prog, worker_reply

from tavernbox.ejs import st_prompt_template as spt
from tavernbox.ejs.st_prompt_template import (
    PromptTemplateLimits,
    TemplateText,
    WorldEntry,
    evaluate_prompt_templates,
)
from tavernbox.errors import TemplateError
from tavernbox.macros.st_variables import StVariables
from tavernbox.shortcuts import Shortcuts

PLAIN = Shortcuts(pt_bytecode=False)

#: messages: ordinary output, a runtime throw (its line:column), a syntax error, a define read later, code that
#: breaks out of the compiled function and runs at its top level, a printed function, a lone surrogate and a
#: NUL in code, getwi of entries that throw, fail to compile or break out
TEXTS = [
    "<% setvar('hp', getvar('hp') + 1) %>hp=<%= getvar('hp') %>",
    "a\n  <% null.boom %>",
    "<% const x = ; %>",
    "<% define('shared', 41) %>",
    "<%= shared + 1 %>",
    "<% " + "} } finally {} } }); globalThis.escaped = (globalThis.escaped || 0) + 1; (async function (__tb) { { try { {"
    + " %>",
    "<%= typeof escaped %>/<%- (function f() { return 1 }).toString() %>",
    "<% const s = '\ud800'; %><%= s.length %>\x00",
    "<%- await getwi('B', 'thrower') %>",
    "<%- await getwi('B', 'broken') %>",
    "<%- await getwi('B', 'outside') %>|<%- await getwi('B', 'outside') %>",
    "<%= Object.getOwnPropertyNames(globalThis).filter((k) => k.startsWith('__tb')).join(',') %>",
    "<% Promise.reject({ src: 'throw 1', line: 1 }); %><%= getvar('hp') %>",
]
BOOKS = {"B": [WorldEntry("B", 1, "thrower", "x\n\n<% throw new RangeError('deep') %>"),
               WorldEntry("B", 2, "broken", "<% if ( %>"),
               WorldEntry("B", 3, "outside", "<% } } finally {} } }); globalThis.n = (globalThis.n || 0) + 1;"
                                             " (async function (__tb) { { try { { __tb.append(String(n)) %>")]}


def _texts() -> list[TemplateText]:
    return [TemplateText(t, f"message {i}") for i, t in enumerate(TEXTS)]


def _evaluate(shortcuts: Shortcuts) -> Any:
    variables = StVariables.build(messages=[{"hp": 1}])
    return evaluate_prompt_templates(_texts(), variables=variables, books=BOOKS, default_book="B", shortcuts=shortcuts)


def _answer(result: Any) -> tuple[Any, ...]:
    return (result.texts, [(w.code, w.message, w.data) for w in result.warnings], result.variables_patch,
            result.reads, result.evaluated)


def test_templates_from_bytecode_answer_like_the_plain_path() -> None:
    plain = _answer(_evaluate(PLAIN))
    # the pool's workers each compile on first sight, then load: enough requests reach every worker twice
    cached = [_answer(_evaluate(Shortcuts())) for _ in range(6)]
    assert all(answer == plain for answer in cached)
    texts, warnings = plain[0], {w[2]["template"]: w for w in plain[1]}
    assert texts[0] == "hp=2" and texts[4] == "42"
    assert warnings["message 1"][0] == "TEMPLATE_EXECUTION_FAILED" and "at 2:6:" in warnings["message 1"][1]
    assert warnings["message 2"][0] == "TEMPLATE_SYNTAX"
    assert texts[6].startswith("number/function f()")
    assert texts[7] == "1\x00"
    assert warnings["world info B/thrower"][2]["line"] == 3
    assert texts[10] == "1|1"  # an entry's top level runs once per request, when first read
    assert texts[11] == "__tbEnter"  # the harness's own: nothing of the template cache is a global
    assert texts[12] == "2"  # a rejected look-alike of a request is ignored


def test_a_template_s_top_level_loop_trips_the_budget_in_both_paths() -> None:
    looping = [TemplateText("<% } } finally {} } }); for (;;) {} (async function (__tb) { { try { { %>",
                            "message 0 (system)")]
    limits = PromptTemplateLimits(time_ms=100)
    errors = []
    for shortcuts in (PLAIN, Shortcuts(), Shortcuts(), Shortcuts(), Shortcuts()):
        with pytest.raises(TemplateError) as caught:
            evaluate_prompt_templates(looping, limits=limits, shortcuts=shortcuts)
        errors.append((caught.value.code, caught.value.message))
    assert set(errors) == {("TEMPLATE_TIME_LIMIT",
                            "the render used up its time budget of 100 ms in message 0 (system)")}
    fine = evaluate_prompt_templates([TemplateText("<%= 1 + 1 %>", "m")], limits=limits)
    assert fine.texts == ["2"]


# --- the worker itself, in this process ----------------------------------------------------------------------------


@pytest.fixture()
def worker_module() -> ModuleType:
    return load_worker("tavernbox_worker_template_cache")


LIMITS = {"time_ms": 2000, "job_steps": 100000, "output_bytes": 1 << 20, "memory_bytes": 64 << 20,
          "stack_bytes": 1 << 20}


def _payload(texts: list[str]) -> str:
    layout = spt._Layout()
    templates, _, _ = spt._place_templates([TemplateText(t, f"t{i}") for i, t in enumerate(texts)], layout)
    data = {"books": {}, "limits": {"template_output": 1 << 20, "getwi_depth": 8, "reads": 100},
            "vars": {"global": {}, "chat": {}, "message": {}, "initial": {}},
            "context": spt._context_input(spt.PromptTemplateContext()), "chat": [], "default_book": "",
            "character_text": "", "preset_prompts": {}, "templates": templates, "inject": []}
    return "[" + json.dumps(spt._runtime()) + ",[\n" + json.dumps(data) + "\n]]"


def _render(worker: Any, texts: list[str], templates: bool = True) -> dict[str, Any]:
    raw = worker.render(QuietChannel(), 1, LIMITS, _payload(texts), None, templates)
    worker.retired = None
    worker.templates.compile_pending()  # what the worker does after the reply
    reply = json.loads(raw)
    assert reply["error"] is None, reply
    return json.loads(reply["result"]["text"])


def test_a_text_is_compiled_once_then_loaded(worker_module: ModuleType) -> None:
    worker = worker_module.Worker()
    cache = worker.templates
    assert cache.lib is not None, "the pinned engine should load templates from bytecode"
    texts = ["<%= 1 + 1 %>", "<% const x = ; %>", "<%= 'b' %>"]
    first = _render(worker, texts)  # evaluated by the program, compiled by the worker after the reply
    assert (cache.compiles, cache.hits, len(cache.entries), len(cache.refused)) == (2, 0, 2, 1)
    assert not cache.pending
    second = _render(worker, texts)
    assert (cache.compiles, cache.hits) == (2, 2)
    third = _render(worker, texts)
    assert (cache.compiles, cache.hits) == (2, 4)
    plain = _render(worker, texts, templates=False)
    assert (cache.compiles, cache.hits) == (2, 4)  # the plain path never asks
    assert first == second == third == plain
    assert [r.get("text") for r in first["results"]] == ["2", None, "b"]
    # the same text on another line is another text (its positions differ)
    _render(worker, ["<% %>", "<%= 1 + 1 %>"])
    assert cache.compiles == 4
    cache.MAX_PENDING = 1  # a render that meets more new texts leaves the rest to later ones
    _render(worker, ["<%= 5 %>", "<%= 6 %>"])
    assert cache.compiles == 5


def test_the_cache_is_bounded_in_entries_and_bytes(worker_module: ModuleType) -> None:
    worker = worker_module.Worker()
    cache = worker.templates
    cache.MAX_ENTRIES = 3
    _render(worker, [f"<%= {i} %>" for i in range(5)])
    assert len(cache.entries) == 3 and cache.bytes == sum(len(c) + len(k[0]) for k, c in cache.entries.items())
    cache.MAX_BYTES = 4 * max(len(c) + len(k[0]) for k, c in cache.entries.items())
    cache.MAX_ENTRIES = 100
    _render(worker, ["<%= 'x'.repeat(3) %>" + " " * 2000 * i for i in range(1, 4)])
    assert cache.bytes <= cache.MAX_BYTES
    assert all(len(c) + len(k[0]) <= cache.MAX_BYTES // 4 for k, c in cache.entries.items())


def test_the_loader_is_not_served_without_the_header(worker_module: ModuleType) -> None:
    worker = worker_module.Worker()
    probe = prog("await null; Promise.reject({}); Promise.reject({ src: '1', line: 1 }); append('ok')")
    assert worker_reply(worker, probe)["result"]["text"] == "ok"
    assert (worker.templates.compiles, worker.templates.hits) == (0, 0)


@pytest.mark.parametrize("text", ["plain ascii", "caf\u00e9 \u4e2d\u6587", "astral \U0001f600", "lone \\ud800 x",
                                  "pair \\ud83d\\ude00 and lone \\udc00", ""])
def test_the_host_counts_a_finished_text_as_the_harness_does(worker_module: ModuleType, text: str) -> None:
    worker = worker_module.Worker()
    body = prog(f"append('{text}')")
    here = worker_reply(worker, body)
    worker.count_output_here = False
    harness = worker_reply(worker, body)
    assert here["usage"] == harness["usage"] and here["error"] == harness["error"] is None
    assert here["result"]["text"] == harness["result"]["text"]


def test_texts_alike_at_both_ends_are_never_confused(worker_module: ModuleType) -> None:
    worker = worker_module.Worker()
    cache = worker.templates
    pad = "x" * 200
    one, two = f"<%= '{pad}' + 'A' + '{pad}' %>", f"<%= '{pad}' + 'B' + '{pad}' %>"
    for _ in range(3):  # each evicts the other's probe slot: compiled again, never loaded for the other
        assert _render(worker, [one])["results"][0]["text"] == pad + "A" + pad
        assert _render(worker, [two])["results"][0]["text"] == pad + "B" + pad
    assert cache.compiles >= 2 and len(cache.probes) == 1


def test_compiling_after_the_reply_takes_a_slice_of_cpu_at_a_time(worker_module: ModuleType) -> None:
    worker = worker_module.Worker()
    cache = worker.templates
    texts = [f"<%= {i} %>" for i in range(4)]
    raw = worker.render(QuietChannel(), 1, LIMITS, _payload(texts), None, True)
    worker.retired = None
    assert json.loads(raw)["error"] is None and len(cache.pending) == 4
    cache.compile_pending(slice_s=-1.0)  # no time left: everything waits for a later reply
    assert len(cache.pending) == 4 and cache.compiles == 0
    cache.compile_pending()
    assert not cache.pending and cache.compiles == 4
    assert [r["text"] for r in _render(worker, texts)["results"]] == ["0", "1", "2", "3"] and cache.hits == 4
