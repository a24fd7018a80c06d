"""The Tavern renderer parses each distinct text once and builds one macro context per request."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from _assembler_support import BASIC, assemble, chat, require_macro_engine, rule, texts

import tavernbox.macros
from tavernbox import TemplateError
from tavernbox.assembler import render as render_module
from tavernbox.assembler.render import COMPILED_TEMPLATES, _CompiledCache

NATIVES = [rule("native-system"), rule("history"), rule("input")]


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text the macro engine is asked to compile, with an empty cache to start."""
    require_macro_engine()
    seen: list[str] = []
    real = tavernbox.macros.compile_macros

    @functools.wraps(real)
    def counting(text: str) -> Any:
        seen.append(text)
        return real(text)

    monkeypatch.setattr(render_module, "compile_macros", counting)  # the function the renderer calls
    COMPILED_TEMPLATES.clear()
    yield seen
    COMPILED_TEMPLATES.clear()


def test_a_text_is_compiled_once_across_blocks_and_requests(compiles: list[str]) -> None:
    rules = [*NATIVES, rule("custom", "a", text="Hi {{char}}"), rule("custom", "b", text="Hi {{char}}"),
             rule("custom", "c", text="Bye {{user}}")]
    card = {"character": {"data": {"name": "Seraphina"}}, "persona": {"name": "Ann"}}
    first = assemble(rules, assets=card)
    second = assemble(rules, assets=card)
    assert texts(first)[-3:] == ["Hi Seraphina", "Hi Seraphina", "Bye Ann"]
    assert texts(second) == texts(first)
    assert sorted(compiles) == ["Bye {{user}}", "Hi {{char}}"]


def test_local_variables_still_flow_from_block_to_block_with_cached_templates(compiles: list[str]) -> None:
    rules = [*NATIVES, rule("custom", "a", text="{{addvar::n::1}}A{{getvar::n}}"),
             rule("custom", "b", text="{{addvar::n::1}}A{{getvar::n}}"), rule("custom", "c", text="C{{getvar::n}}")]
    r = assemble(rules)
    assert texts(r)[-3:] == ["A1", "A2", "C2"]
    assert len(compiles) == 2  # the repeated text was parsed once, evaluated twice with different variables
    again = assemble(rules)  # request-local: the next request starts from nothing again
    assert texts(again)[-3:] == ["A1", "A2", "C2"]


def test_one_macro_context_per_request_unless_variables_change(monkeypatch: pytest.MonkeyPatch) -> None:
    require_macro_engine()
    COMPILED_TEMPLATES.clear()  # static templates rendered before would not be evaluated again
    contexts: list[Any] = []
    real = tavernbox.macros.CompiledMacros.expand

    def spy(self: Any, context: Any = None, **kw: Any) -> Any:
        contexts.append(context)
        return real(self, context, **kw)

    monkeypatch.setattr(tavernbox.macros.CompiledMacros, "expand", spy)
    rules = [*NATIVES, rule("custom", "a", text="{{char}}1"), rule("custom", "b", text="{{char}}2"),
             rule("custom", "c", text="{{setvar::x::1}}{{char}}3"), rule("custom", "d", text="{{char}}4"),
             rule("custom", "e", text="{{getvar::x}}5")]
    r = assemble(rules, chat(*BASIC))
    assert texts(r)[-5:] == ["Assistant1", "Assistant2", "Assistant3", "Assistant4", "15"]
    assert contexts[0] is contexts[1] is contexts[2]  # nothing changed yet: the same object
    assert contexts[3] is not contexts[2] and contexts[3] is contexts[4]  # one copy after the setvar
    assert dict(contexts[3].local_variables) == {"x": "1"}


def test_cache_is_bounded_by_entries_and_characters() -> None:
    made: list[str] = []

    def compile_fn(text: str) -> str:
        made.append(text)
        return text.upper()

    cache = _CompiledCache(max_entries=3, max_chars=10, max_text=6)
    assert cache.get(compile_fn, "ab") == "AB"
    assert cache.get(compile_fn, "ab") == "AB" and made == ["ab"]
    for t in ("cd", "ef", "gh"):
        cache.get(compile_fn, t)
    assert len(cache) == 3  # "ab" (least recently used) went first
    cache.get(compile_fn, "ab")
    assert made.count("ab") == 2
    cache.get(compile_fn, "123456")  # 6 more characters: over the 10-character budget, the oldest go
    assert cache._chars <= 10
    cache.get(compile_fn, "1234567")  # longer than max_text: compiled, never kept
    cache.get(compile_fn, "1234567")
    assert made.count("1234567") == 2


def test_a_compile_error_is_raised_each_time_and_never_cached() -> None:
    cache = _CompiledCache()

    def failing(text: str) -> Any:
        raise TemplateError("too long", code="MACRO_INPUT_LIMIT")

    for _ in range(2):
        with pytest.raises(TemplateError) as err:
            cache.get(failing, "x")
        assert err.value.code == "MACRO_INPUT_LIMIT"
    assert len(cache) == 0


def _expand_spy(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    expanded: list[str] = []
    real = tavernbox.macros.CompiledMacros.expand

    def spy(self: Any, context: Any = None, **kw: Any) -> Any:
        expanded.append(self.text)
        return real(self, context, **kw)

    monkeypatch.setattr(tavernbox.macros.CompiledMacros, "expand", spy)
    return expanded


@pytest.mark.parametrize(("text", "static"), [
    ("Be {{char}} with {{user}}. {{description}}", True),
    ("plain {text} with braces", True),
    ("{{char::x}}", False),
    ("{{random::a::b}}", False),
    ("{{getvar::x}}", False),
    ("{{lastMessage}}", False),
    ("{{char", False),
])
def test_only_bare_static_macros_make_a_template_static(text: str, static: bool) -> None:
    require_macro_engine()
    from tavernbox.assembler.render import _reads_static_only

    assert _reads_static_only(tavernbox.macros.compile_macros(text)) is static


def test_a_static_template_renders_once_per_static_context(monkeypatch: pytest.MonkeyPatch) -> None:
    require_macro_engine()
    COMPILED_TEMPLATES.clear()
    expanded = _expand_spy(monkeypatch)
    rules = [*NATIVES, rule("custom", "a", text="Hi {{char}}, I am {{user}}"), rule("custom", "b", text="{{lastMessage}}!")]
    card = {"character": {"data": {"name": "Seraphina"}}, "persona": {"name": "Ann"}}
    first = assemble(rules, chat("s:system:S", "u1:user:one"), assets=card)
    second = assemble(rules, chat("s:system:S", "u1:user:one", "a1:assistant:A", "u2:user:two"), assets=card)
    assert texts(first)[-2:] == ["Hi Seraphina, I am Ann", "one!"]
    assert texts(second)[-2:] == ["Hi Seraphina, I am Ann", "two!"]  # the chat-reading one follows the chat
    assert expanded.count("Hi {{char}}, I am {{user}}") == 1 and expanded.count("{{lastMessage}}!") == 2
    third = assemble(rules, assets={"character": {"data": {"name": "Kaira"}}, "persona": {"name": "Ann"}})
    assert texts(third)[-2] == "Hi Kaira, I am Ann"  # another card: another static context
    assert expanded.count("Hi {{char}}, I am {{user}}") == 2
    COMPILED_TEMPLATES.clear()


def test_text_identity_is_the_pair_of_hash_and_id_and_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    import tavernbox.assembler.identity as identity

    digest = identity.text_hash("Hello", "system")
    assert identity.text_identity("r:b", "system", "Hello") == (digest, identity.derived_id("text", "r:b", digest))
    assert identity.text_identity("r:b", "user", "Hello")[0] != digest
    monkeypatch.setattr(identity, "_TEXT_IDS_MAX", 3)
    identity._TEXT_IDS.clear()
    for i in range(10):
        identity.text_identity("k", "system", str(i))
    assert len(identity._TEXT_IDS) <= 3


def test_remembered_renders_count_toward_the_cache_budget() -> None:
    cache = _CompiledCache(max_entries=10, max_chars=100)
    for t in ("a", "b"):
        cache.get(str.upper, t)
    cache.charge(str.upper, "a", 60)
    assert len(cache) == 2 and cache._chars == 62
    cache.charge(str.upper, "b", 50)  # over 100 characters: the least recently used entry ("a") goes
    assert len(cache) == 1 and cache._chars == 51
    cache.charge(str.upper, "gone", 500)  # an entry no longer cached charges nothing
    assert cache._chars == 51


def test_long_texts_are_hashed_but_not_remembered() -> None:
    import tavernbox.assembler.identity as identity

    identity._TEXT_IDS.clear()
    long = "x" * (identity._TEXT_IDS_MAX_TEXT + 1)
    digest = identity.text_hash(long, "system")
    assert identity.text_identity("k", "system", long) == (digest, identity.derived_id("text", "k", digest))
    assert not identity._TEXT_IDS
