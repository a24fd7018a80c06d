"""The cached-render fast path: ``CompiledMacros._expand_planned`` and ``evaluator.new_state``.

From its third render on, a compiled template with the built-in registry, no dynamic macros and
no trace goes straight to its top-level plan; these tests pin that it sets up the render exactly
as the general path does and gives the same results.
"""

from __future__ import annotations

from tavernbox.macros import MacroContext, MacroRegistry, compile_macros
from tavernbox.macros.evaluator import MAX_OUTPUT_CHARS, RenderInputs, RenderOutputs, RenderState, new_state, planned_inputs
from tavernbox.macros.variables import VariableStore
from tavernbox.shortcuts import DEFAULT
from macro_support import NO_PLANS

CTX = MacroContext.from_dict(
    {"user": "Ash", "char": "Mira", "seed": 4, "now": "2026-11-30T10:15:00Z", "variables": {"local": {"a": "1"}}}
)


def test_new_state_sets_every_field_as_the_dataclass_does() -> None:
    reg = MacroRegistry.default_shared()
    local, glob = VariableStore({"a": 1}), VariableStore({})
    cache: dict = {}
    memo: dict = {}
    fast = new_state(planned_inputs("src", "content", CTX, reg, "tavernbox-macros:4"), local, glob, [], cache, memo)
    slow = RenderState(
        local=local,
        glob=glob,
        inputs=RenderInputs(
            source="src",
            content="content",
            ctx=CTX,
            registry=reg,
            dynamic={},
            rng_seed="tavernbox-macros:4",
            shortcuts=DEFAULT,
            max_output=MAX_OUTPUT_CHARS,
        ),
        parse_cache=cache,
        levels=memo,
    )
    for name in (*RenderOutputs.__slots__, *RenderState.__slots__):
        assert getattr(fast, name) == getattr(slow, name), name
    assert fast.draws is not slow.draws and fast._body_cache is not slow._body_cache


def test_the_fast_path_is_taken_and_gives_the_general_paths_results() -> None:
    text = "<USER> {{setvar::x::{{roll::1d6}}}}{{getvar::x}} {{random::a::b::c}} {{unknown}} {{if .a}}yes{{/if}}"
    want = [compile_macros(text).expand(CTX, seed=s, shortcuts=NO_PLANS) for s in range(3)]
    template = compile_macros(text)
    for _ in range(3):
        template.expand(CTX)
    assert template._top is not None
    for s in range(3):
        got = template.expand(CTX, seed=s)
        assert (got.text, got.variables, got.diagnostics, got.draws) == (
            want[s].text,
            want[s].variables,
            want[s].diagnostics,
            want[s].draws,
        )
    # a registry of its own, dynamic macros or a trace take the general path (and still agree)
    other = MacroRegistry.default()
    assert template.expand(CTX, registry=other, seed=0).text == want[0].text
    assert "U" in template.expand(CTX, dynamic={"unknown": "U"}).text
    assert template.expand(CTX, trace=True, seed=0).text == want[0].text


def test_the_kept_inputs_follow_each_renders_context_and_seed() -> None:
    # the fast path keeps its last RenderInputs while the context and seed are the same
    # objects; a render with another context or seed gets its own (and its own text)
    other = MacroContext.from_dict({"user": "Bo", "char": "Mira", "seed": 4, "now": "2026-11-30T10:15:00Z"})
    text = "{{user}} {{random::a::b::c::d::e::f}} {{roll::1d1000}}"
    contexts = (CTX, other)
    want = {(i, s): compile_macros(text).expand(c, seed=s, shortcuts=NO_PLANS).text for i, c in enumerate(contexts) for s in (1, 2)}
    template = compile_macros(text)
    for _ in range(4):  # the fourth render is the first to take the fast path
        template.expand(CTX, seed=1)
    kept = template._inputs
    assert kept is not None and kept.ctx is CTX
    assert template.expand(CTX, seed=1).text == want[(0, 1)]
    assert template._inputs is kept
    for i, s in [(1, 1), (0, 2), (1, 2), (0, 1)]:
        assert template.expand(contexts[i], seed=s).text == want[(i, s)]
        assert template._inputs is not None
        assert template._inputs.ctx is contexts[i] and template._inputs.rng_seed == f"tavernbox-macros:{s}"


def test_date_macros_follow_each_renders_clock() -> None:
    # the formatted date is kept for the clock last seen (by identity): a different clock, even
    # one for the same instant in another zone, is formatted anew
    from datetime import datetime, timedelta, timezone

    template = compile_macros("{{weekday}} {{date}} {{isotime}}")
    utc = datetime(2026, 11, 30, 23, 30, tzinfo=timezone.utc)
    plus2 = utc.astimezone(timezone(timedelta(hours=2)))
    assert utc == plus2
    for _ in range(3):
        assert template.expand(MacroContext(now=utc)).text == "Monday November 30, 2026 23:30"
        assert template.expand(MacroContext(now=plus2)).text == "Tuesday December 1, 2026 01:30"
    assert template.expand(MacroContext()).text != ""  # no clock: the current time, every render


def test_bound_draw_records_equal_fresh_ones_across_seeds() -> None:
    text = "{{random::a::b::c}} {{roll::1d20}} {{roll::1d20+3}} {{roll::3d4}}"
    want = [compile_macros(text).expand(CTX, seed=s, shortcuts=NO_PLANS) for s in range(40)]
    template = compile_macros(text)
    for _ in range(3):
        template.expand(CTX)
    got = [template.expand(CTX, seed=s) for s in range(40)]
    assert [(g.text, g.draws) for g in got] == [(w.text, w.draws) for w in want]


def test_inlined_context_and_card_reads_equal_the_evaluator() -> None:
    # plain card text is read straight from the card; text the names-only substitution would
    # touch (\r, {{user}}, <BOT>), other types and missing fields take the full read
    text = "[{{user}}|{{char}}|{{description}}|{{personality}}|{{scenario}}|{{charPrompt}}|{{creatorNotes}}|{{model}}]"
    contexts = [
        MacroContext.from_dict({"user": "Ash", "char": "Mira", "character": {"description": "plain", "personality": "a\r\nb"}}),
        MacroContext.from_dict({"character": {"description": "hi {{user}} and <BOT>", "scenario": 42, "system_prompt": None}}),
        MacroContext(user=7, char=None, character={"description": 1.5, "personality": ["x"], "creator_notes": "{not a macro"}),  # type: ignore[arg-type]
    ]
    for ctx in contexts:
        want = compile_macros(text).expand(ctx, shortcuts=NO_PLANS)
        template = compile_macros(text)
        for _ in range(4):
            got = template.expand(ctx)
            assert (got.text, got.diagnostics) == (want.text, want.diagnostics)
    names = template._top[2].run.__globals__
    assert any(k.startswith("cf") for k in names)  # the card reads really were inlined


def _both_ways(text: str, ctx: MacroContext) -> tuple[list, object]:
    def outcome(template: object, **kw: object) -> object:
        from tavernbox.errors import TemplateError

        try:
            r = template.expand(ctx, **kw)  # type: ignore[attr-defined]
        except TemplateError as exc:
            return ("error", exc.code, exc.message, exc.span)
        return (r.text, r.diagnostics)

    want = outcome(compile_macros(text), shortcuts=NO_PLANS)
    template = compile_macros(text)
    return [outcome(template) for _ in range(4)], want


def test_output_limits_from_inlined_parts_match_the_evaluator() -> None:
    # the inlined parts keep their accounting in locals; every limit still trips at the same
    # item with the same error: one value over the limit, two values crossing it, a branch's
    # value, and the render's total counted over nested levels (32 MiB)
    big = "x" * (MAX_OUTPUT_CHARS - 100)
    half = "y" * (MAX_OUTPUT_CHARS // 2 + 10)
    seven = "z" * (7 * 1024 * 1024)
    ctx = MacroContext(user="Ash", local_variables={"big": big, "half": half, "seven": seven, "on": "1"})
    over = MacroContext(user="x" * (MAX_OUTPUT_CHARS + 1))
    cases = [
        ("a {{user}} b", over),
        ("{{getvar::half}}{{getvar::half}}{{user}}", ctx),
        ("{{if {{getvar::on}}}}{{getvar::half}}-{{getvar::half}}{{/if}}", ctx),
        ("{{getvar::big}}" + "w" * 200 + "{{user}}", ctx),
        ("{{if 1}}" * 4 + "{{getvar::seven}}" + "{{/if}}" * 4, ctx),
        # arguments count towards the total though setvar shows nothing: the fifth argument
        # level starts with 28 MiB counted, so its read passes 32 MiB
        ("{{setvar::a::{{getvar::seven}}}}" * 5, ctx),
        ("{{setvar::a::{{getvar::seven}}}}" * 4 + "{{getvar::seven}}", ctx),
    ]
    for text, context in cases:
        got, want = _both_ways(text, context)
        assert want[0] == "error", text[:40]  # type: ignore[index]
        assert all(g == want for g in got), text[:40]
