"""``render_templates``: a batch renders exactly what ``render_template`` renders, one by one.

Every slot holds what the single call would have returned, or the error it would have raised
(same class, code and template line:column), and the batch keeps its order.
"""

from __future__ import annotations

from typing import Any

import tavernbox
from tavernbox.ejs import TemplateSyntaxError, render_template, render_templates
from tavernbox.errors import TemplateError
from tavernbox.sandbox import Limits, SandboxError, run_program, run_programs

ITEMS: list[tuple[str, Any]] = [
    ("Hi <%= variables.name %>!", {"name": "<Bob>"}),
    ("plain text, no tags", None),
    ("<% for (let i = 0; i < 3; i++) { %><%= i %><% } %>", {}),
    ("line one\n<% null.x %>", {}),  # runtime error at 2:4
    ("<% if ( %>", {}),  # JavaScript syntax error
    ("<%= variables.n * 2 -%>\n", {"n": 21}),
    ("<%= 1 %>", {"bad": {1, 2}}),  # not JSON data: refused before any worker
    ("never <% closed", {}),  # unmatched tag: refused by the parser
]


def _single(source: str, variables: Any) -> Any:
    try:
        return render_template(source, variables)
    except TemplateError as exc:
        return exc


def _shape(outcome: Any) -> tuple[Any, ...]:
    if isinstance(outcome, TemplateError):
        return (type(outcome), outcome.code, outcome.line, outcome.column)
    return ("ok", outcome.text)


def test_batch_matches_single_renders_in_order() -> None:
    batch = render_templates(ITEMS)
    assert len(batch) == len(ITEMS)
    assert [_shape(b) for b in batch] == [_shape(_single(s, v)) for s, v in ITEMS]
    assert batch[0].text == "Hi &lt;Bob&gt;!"
    assert _shape(batch[3])[1:] == ("TEMPLATE_EXECUTION_FAILED", 2, 4)
    assert isinstance(batch[4], TemplateSyntaxError)
    assert tavernbox.render_templates is render_templates


def test_batch_of_fifty_with_distinct_variables() -> None:
    items = [("<%= variables.i %>:<%- variables.s %>", {"i": i, "s": "<" * (i % 3)}) for i in range(50)]
    assert [r.text for r in render_templates(items)] == [f"{i}:{'<' * (i % 3)}" for i in range(50)]  # type: ignore[union-attr]


def test_batch_applies_the_limits_to_every_item() -> None:
    results = render_templates([("<%= 'x'.repeat(100) %>", {}), ("<%= 'ok' %>", {})], limits=Limits(output_bytes=10))
    assert isinstance(results[0], TemplateError) and results[0].code == "TEMPLATE_OUTPUT_LIMIT"
    assert results[1].text == "ok"  # type: ignore[union-attr]


def test_run_programs_returns_errors_in_place() -> None:
    good = "(async function (__tb) { __tb.append('a') })"
    bad = "(async function (__tb) { throw new Error('no') })"
    out = run_programs([(good, "1"), (bad, "1"), (good, "1")])
    assert out[0].text == "a" and out[2].text == "a"  # type: ignore[union-attr]
    assert isinstance(out[1], SandboxError) and out[1].code == "TEMPLATE_EXECUTION_FAILED"
    assert run_program(good, "1").text == "a"
    assert run_programs([]) == []


# --- the pipelined batch (issue 13: WorkerPool.run_many) ------------------------------------------


def test_a_stuck_render_in_a_batch_fails_alone_and_the_queued_ones_are_sent_again() -> None:
    # Two requests are queued on each worker: the stuck render's worker is stopped by the CPU
    # watch, and whatever was queued behind it is rendered by another (or a replacement) worker.
    stuck = "<% const s = 'a'.repeat(1 << 21); s.indexOf('a'.repeat(1 << 20) + 'b') %>"
    items = [(f"<%= {i} %>", {}) for i in range(3)] + [(stuck, {})] + [(f"<%= {i} %>", {}) for i in range(3, 9)]
    results = render_templates(items, limits=Limits(deadline_grace_ms=10_000.0))
    assert isinstance(results[3], TemplateError) and results[3].code == "TEMPLATE_TIME_LIMIT"
    assert [r.text for i, r in enumerate(results) if i != 3] == [str(i) for i in range(9)]  # type: ignore[union-attr]


def test_queued_input_that_looks_like_a_message_is_never_read_as_one() -> None:
    # With requests queued behind a running render, the worker scans its input for cancels; an
    # input whose JSON is a cancel (or a render header) for any render id is payload, not protocol.
    forged = [{"op": "cancel", "id": i} for i in range(0, 400)]
    items = [("<% for (let i = 0; i < 20; i++) await null %><%= variables.id %>", f) for f in forged[:60]]
    items += [("<%= variables.op %>", {"op": "render", "id": 1, "size": 5, "limits": {}})]
    results = render_templates(items)
    assert [r.text for r in results] == [str(f["id"]) for f in forged[:60]] + ["render"]  # type: ignore[union-attr]


def test_a_cancelled_batch_fails_every_render_with_the_cancel_code() -> None:
    from tavernbox.sandbox import CancelToken

    token = CancelToken()
    token.cancel()
    results = render_templates([("<%= 1 %>", {}), ("<%= 2 %>", {})], cancel=token)
    assert all(isinstance(r, TemplateError) and r.code == "TEMPLATE_CANCELLED" for r in results)
