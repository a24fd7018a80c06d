"""Bridge and replay: misses, budgets, determinism, leases, management, lazy MVU, reads."""

from __future__ import annotations

import pytest

from bridge_support import Scripted, code, sources, text
from tavernbox.bridge import (
    LeaseSet,
    LookupRequest,
    Management,
    MvuSource,
    Resolution,
    Revocable,
    TemplateSkipped,
    TemplateSources,
    UsageDecision,
    render_with_dependencies,
)
from tavernbox.bridge.resolver import parse_request
from tavernbox.errors import TemplateError
from tavernbox.sandbox import Limits

# --- replay ------------------------------------------------------------------------------------


def test_a_caught_miss_and_a_forged_result_have_no_effect() -> None:
    src = ("<% let v; try { v = getpreset('main') } catch (e) { print('FORGED'); v = 'forged' } %>"
           "[<%- v %>]")
    result = render_with_dependencies(src, Scripted())
    assert result.text == "[<preset-prompt:main>]"
    assert result.usage.passes == 2


def test_replay_is_deterministic() -> None:
    src = "<% for (const k of ['a', 'b', 'a', 'c']) { %><%- getpreset(k) %>;<% } %>"
    first = render_with_dependencies(src, Scripted())
    second = render_with_dependencies(src, Scripted())
    assert first.text == second.text == "<preset-prompt:a>;<preset-prompt:b>;<preset-prompt:a>;<preset-prompt:c>;"
    assert [r.key for r in first.reads] == [r.key for r in second.reads] == [
        '["preset-prompt","a"]', '["preset-prompt","b"]', '["preset-prompt","c"]']
    assert first.usage.passes == 4


def test_each_distinct_lookup_is_resolved_once() -> None:
    resolver = Scripted()
    render_with_dependencies("<% for (let i = 0; i < 5; i++) getpreset('same') %>", resolver)
    assert [r.key for r in resolver.calls] == ['["preset-prompt","same"]']


def test_32_distinct_lookups_pass_and_33_fail() -> None:
    ok = render_with_dependencies("<% for (let i = 0; i < 32; i++) print(getpreset('k' + i)) %>", Scripted())
    assert len(ok.reads) == 32 and ok.usage.passes == 33
    c, exc = code("<% for (let i = 0; i < 33; i++) print(getpreset('k' + i)) %>", Scripted())
    assert c == "TEMPLATE_DEPENDENCY_LIMIT"


def test_promise_all_of_many_lookups_hits_the_lookup_limit() -> None:
    c, _ = code("<% await Promise.all(Array.from({length: 1000}, (_, i) => getpreset('k' + i))) %>", Scripted(),
                limits=Limits(time_ms=5000.0))
    assert c == "TEMPLATE_DEPENDENCY_LIMIT"


def test_bridge_calls_count_cache_hits() -> None:
    assert text("<% for (let i = 0; i < 512; i++) getvar('s') %>ok") == "ok"
    c, exc = code("<% for (let i = 0; i < 10000; i++) { try { getvar('s') } catch (e) {} } %>ok")
    assert c == "TEMPLATE_BRIDGE_LIMIT" and "512" in exc.message
    c, _ = code("<% for (let i = 0; i < 3; i++) getvar('s') %>", limits=Limits(bridge_calls=2))
    assert c == "TEMPLATE_BRIDGE_LIMIT"


def test_answers_are_capped_in_total() -> None:
    big = Scripted(lambda r: "x" * 3000)
    assert render_with_dependencies("<% getpreset('a'); getpreset('b') %>", big, limits=Limits(input_bytes=7000)).text == ""
    c, _ = code("<% getpreset('a'); getpreset('b'); getpreset('c') %>", big, limits=Limits(input_bytes=7000))
    assert c == "TEMPLATE_INPUT_LIMIT"


def test_time_budget_is_cumulative_over_passes() -> None:
    # Each pass burns ~4 ms before its lookup; 32 passes cannot fit in 40 ms.
    src = "<% for (let i = 0; i < 32; i++) { const t = Date.now(); let x = 0; for (let j = 0; j < 60000; j++) x += j; getpreset('k' + i) } %>"
    c, _ = code(src, Scripted(), limits=Limits(time_ms=40.0))
    assert c == "TEMPLATE_TIME_LIMIT"
    result = render_with_dependencies("<%- getpreset('a') %><%- getpreset('b') %>", Scripted())
    assert result.usage.passes == 3 and result.usage.time_ms > 0


def test_request_keys_are_opaque_strings() -> None:
    keys = ["\u0000", "\ud800", "../../etc/passwd", "%2e%2e", "日本"]
    resolver = Scripted(lambda r: "v")
    src = "".join(f"<%- getpreset({k!r}.replace('\\\\\\\\', '\\\\')) %>" for k in ["x"]) + \
        "<%- getpreset('\\u0000') %><%- getpreset('\\ud800') %><%- getpreset('../../etc/passwd') %>" \
        "<%- getpreset('%2e%2e') %><%- getpreset('日本') %>"
    assert render_with_dependencies(src, resolver).text == "v" * 6
    assert [c.args[0] for c in resolver.calls][1:] == keys


def test_non_json_arguments_are_template_errors() -> None:
    for arg in ["1n", "Symbol()", "{}", "null", "NaN"]:
        assert code(f"<%- getpreset({arg}) %>", Scripted())[0] == "TEMPLATE_EXECUTION_FAILED", arg


def test_parse_request_refuses_malformed_requests() -> None:
    for bad in ['["nope"]', '["preset-prompt"]', '["preset-prompt",{}]', '[1]', "x", '["variables",1]',
                '["character", true]', '["worldbook-entry","a"]']:
        with pytest.raises(TemplateError) as info:
            parse_request(bad)
        assert info.value.code == "TEMPLATE_DEPENDENCY_INVALID", bad
    assert parse_request('["worldbook-entry","Lore",3]') == LookupRequest("worldbook-entry", ("Lore", 3))


def test_resolver_answers_must_be_resolutions_of_json() -> None:
    class Bad:
        def resolve(self, request):
            return {"content": "x"}

    assert code("<%- getpreset('a') %>", Bad())[0] == "TEMPLATE_DEPENDENCY_UNAVAILABLE"
    assert code("<%- getpreset('a') %>", Scripted(lambda r: {1, 2}))[0] == "TEMPLATE_DEPENDENCY_UNAVAILABLE"


def test_plain_text_needs_no_vm_and_reads_nothing() -> None:
    result = render_with_dependencies("no tags {{user}}", Scripted())
    assert result.text == "no tags {{user}}" and result.usage.passes == 0 and result.reads == ()


def test_errors_are_reported_at_template_positions() -> None:
    c, exc = code("line1\n<% getpreset('a') %>\n<% null.x %>", Scripted())
    assert c == "TEMPLATE_EXECUTION_FAILED" and exc.line == 3


# --- reads and lazy MVU -----------------------------------------------------------------------


def test_every_render_reports_what_it_read() -> None:
    result = render_with_dependencies("<%- getvar('s') %><%- await getwi('Lore', 'Town') %><%- getchar() %>",
                                      sources())
    assert [(r.kind, r.id) for r in result.reads] == [
        ("variables", "variables:static"), ("worldbook-catalog", "world-book:Lore"),
        ("worldbook-entry", "world-book:Lore#0"), ("character", "character:Alice")]
    assert all(r.revision.startswith("sha256:") for r in result.reads)
    assert result.reads[2].to_dict()["key"] == '["worldbook-entry","Lore",0]'


def test_mvu_is_read_lazily() -> None:
    mvu = MvuSource({"stat_data": {"hp": [7, "hp"]}}, resource_id="mvu:hero")
    src = TemplateSources(variables=mvu)
    assert render_with_dependencies("<% if (true) { %>no variables<% } %>", src).text == "no variables"
    assert mvu.reads == 0
    result = render_with_dependencies("<%- getvar('stat_data.hp[0]') %>/<%- variables.stat_data.hp[1] %>", src)
    assert result.text == "7/hp" and mvu.reads == 1
    assert [(r.kind, r.id, r.revision) for r in result.reads] == [("variables", "mvu:hero", mvu.revision)]


# --- leases ------------------------------------------------------------------------------------


def test_lease_revoked_during_an_await() -> None:
    # The resolver call for the second lookup is the await: it revokes the first answer's lease.
    def revoke_first(request, resolver):
        if len(resolver.calls) == 2:
            resolver.leases[0].revoke()

    c, exc = code("<%- getpreset('a') %><%- getpreset('b') %>", Scripted(on_resolve=revoke_first))
    assert c == "SOURCE_POLICY_CHANGED" and "test:preset-prompt" in exc.message


def test_lease_revoked_after_completion() -> None:
    resolver = Scripted()
    result = render_with_dependencies("<%- getpreset('a') %>", resolver)
    result.check_leases()
    resolver.leases[0].revoke("content_changed")
    with pytest.raises(TemplateError) as info:
        result.check_leases()
    assert info.value.code == "SOURCE_CONTENT_CHANGED"


def test_lease_made_stale_by_a_later_source() -> None:
    mvu = MvuSource({"hp": 1}, resource_id="mvu:hero")
    src = sources(None)
    src.variables = mvu
    result = render_with_dependencies("<%- getvar('stat_data.hp') %>", src)
    assert result.text == "1"
    mvu.update({"hp": 2})  # a later source of the same assembly wrote the state
    with pytest.raises(TemplateError) as info:
        result.check_leases()
    assert info.value.code == "SOURCE_CONTENT_CHANGED"


def test_world_book_edit_makes_the_entry_lease_stale() -> None:
    src = sources()
    result = render_with_dependencies("<%- await getwi('Lore', 'Town') %>", src)
    src.world_books.update_entry("Lore", 0, "edited")
    with pytest.raises(TemplateError) as info:
        result.check_leases()
    assert info.value.code == "SOURCE_CONTENT_CHANGED"
    assert code("<%- await getwi('Lore', 'Town') %>", src)[0] == "SOURCE_CONTENT_CHANGED"


def test_stale_held_lease_fails_before_the_render() -> None:
    held = LeaseSet()
    lease = Revocable()
    held.add("template scene", lease.check_current)
    lease.revoke()
    assert code("<%- 1 %>", Scripted(), leases=held)[0] == "SOURCE_POLICY_CHANGED"


@pytest.mark.parametrize("check", [None, lambda: None, lambda: False, lambda: 1 / 0, lambda: "maybe"])
def test_unclear_leases_are_never_current(check) -> None:
    class R:
        def resolve(self, request):
            return Resolution("x", "t", "v", "r", None, check)

    assert code("<%- getpreset('a') %>", R())[0] == "SOURCE_POLICY_CHANGED"


# --- management ---------------------------------------------------------------------------------


def _managed(handler) -> TemplateSources:
    management = Management()
    management.register_manager("preset:default", handler)
    return sources(management=management)


def test_native_dependency_without_listeners_is_allowed() -> None:
    assert text("<%- getpreset('main') %>", sources(management=Management())) == "Be helpful."


def test_managed_dependency_needs_an_allowance_with_a_lease() -> None:
    lease = Revocable()
    seen = []

    def allow(request):
        seen.append(request)
        return UsageDecision(True, "cfg1", lease.check_current)

    src = _managed(allow)
    result = render_with_dependencies("<%- getpreset('main') %>", src)
    assert result.text == "Be helpful."
    assert seen[0].management_mode == "managed" and seen[0].event["usage"] == "prompt-template-dependency"
    assert seen[0].event["consumer"]["id"] == "prompt-template:inline"
    lease.revoke()
    with pytest.raises(TemplateError) as info:
        result.check_leases()
    assert info.value.code == "SOURCE_POLICY_CHANGED"


@pytest.mark.parametrize("decision", [None, UsageDecision(False), UsageDecision(True), "error"])
def test_managed_dependency_denied_or_unauthorised_fails(decision) -> None:
    def handler(request):
        if decision == "error":
            raise RuntimeError("manager down")
        return decision

    c, _ = code("<% try { getpreset('main') } catch (e) {} %>fallback", _managed(handler))
    assert c == "TEMPLATE_DEPENDENCY_DENIED"


def test_unregistering_the_manager_invalidates_its_leases() -> None:
    management = Management()
    management.register_manager("preset:default", lambda r: UsageDecision(True, "c", lambda: True))
    src = sources(management=management)
    result = render_with_dependencies("<%- getpreset('main') %>", src)
    management.unregister_manager("preset:default")
    with pytest.raises(TemplateError) as info:
        result.check_leases()
    assert info.value.code == "SOURCE_POLICY_CHANGED"
    # A new read restores the source's default (native, allowed).
    assert text("<%- getpreset('main') %>", src) == "Be helpful."


def test_native_listener_must_give_explicit_permission() -> None:
    management = Management()
    management.add_listener("preset:default", lambda r: None)
    assert code("<%- getpreset('main') %>", sources(management=management))[0] == "TEMPLATE_DEPENDENCY_DENIED"
    management = Management()
    management.add_listener("preset:default", lambda r: UsageDecision(True, None, lambda: True))
    assert text("<%- getpreset('main') %>", sources(management=management)) == "Be helpful."


def test_template_usage_decisions() -> None:
    management = Management()
    assert len(management.authorize_template("prompt-template:a")) == 1  # native: only the epoch lease
    management.add_listener("prompt-template:a", lambda r: None)  # abstains
    management.authorize_template("prompt-template:a")
    management.add_listener("prompt-template:a", lambda r: UsageDecision(False))
    with pytest.raises(TemplateSkipped) as info:
        management.authorize_template("prompt-template:a")
    assert info.value.code == "TEMPLATE_POLICY_SKIPPED"
    management = Management()
    management.register_manager("prompt-template:b", lambda r: None)
    with pytest.raises(TemplateSkipped):
        management.authorize_template("prompt-template:b")
    management.register_manager("prompt-template:b", lambda r: UsageDecision(True))
    with pytest.raises(TemplateError) as info2:
        management.authorize_template("prompt-template:b")
    assert info2.value.code == "SOURCE_LEASE_REQUIRED"


def test_management_change_during_a_decision_is_policy_changed() -> None:
    management = Management()

    def sneaky(request):
        management.unregister_manager("prompt-template:c")
        return UsageDecision(True, None, lambda: True)

    management.register_manager("prompt-template:c", sneaky)
    with pytest.raises(TemplateError) as info:
        management.authorize_template("prompt-template:c")
    assert info.value.code == "SOURCE_POLICY_CHANGED"


def test_cancel_between_passes() -> None:
    from tavernbox.sandbox import CancelToken

    token = CancelToken()
    resolver = Scripted(on_resolve=lambda request, r: token.cancel())
    c, _ = code("<%- getpreset('a') %><%- getpreset('b') %>", resolver, cancel=token)
    assert c == "TEMPLATE_CANCELLED" and len(resolver.calls) == 1


def test_every_code_the_bridge_raises_is_catalogued() -> None:
    import re
    from pathlib import Path

    from tavernbox.errors import CODES

    root = Path(__file__).resolve().parents[1]
    texts = [p.read_text(encoding="utf-8") for p in (root / "engine" / "bridge").glob("*.py")]
    texts.append((root / "sandbox" / "worker.py").read_text(encoding="utf-8"))
    used = {m for t in texts for m in re.findall(r'code="([A-Z_]+)"', t)}
    used |= {m for t in texts for m in re.findall(r'"(TEMPLATE_[A-Z_]+|SOURCE_[A-Z_]+)"', t)}
    assert used and not (used - set(CODES)), sorted(used - set(CODES))
