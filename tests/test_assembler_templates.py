"""The built-in ``pmp-dsh-tavern/prompt-template`` source: bridge resources rendered in the sandbox."""

from __future__ import annotations

import json
from typing import Any

import pytest
from _assembler_support import rule

from tavernbox import TemplateError
from tavernbox.assembler import Assembler, replay
from tavernbox.assembler.limits import dumps
from tavernbox.assembler.sources import builtin_registry
from tavernbox.errors import CODES

KIND = "pmp-dsh-tavern/prompt-template"
RULES = [rule("native-system"), rule(KIND, "tpl"), rule("history"), rule("input")]
MESSAGES = [{"id": "s", "role": "system", "content": "S"}, {"id": "u", "role": "user", "content": "hi"}]


def template(tid: str, content: str, **extra: Any) -> dict[str, Any]:
    return {"id": f"prompt-template:{tid}", "name": tid.title(), "content": content, "enabled": True,
            "session_ids": ["*"], **extra}


def run(templates: list[dict[str, Any]], *, rules: list[dict[str, Any]] | None = None, session: str | None = "chat-1",
        **assets: Any) -> Any:
    return Assembler(builtin_registry()).assemble({
        "preset": {"format": "dsh-tavern-request-assembly", "version": 1, "name": "t", "rules": rules or RULES},
        "messages": MESSAGES, "input_ids": ["u"], "session_id": session,
        "assets": {"prompt_templates": templates, **assets}})


def test_templates_render_in_the_sandbox_as_final_text_with_versions_and_provenance() -> None:
    r = run([template("a", "<% for (const x of [1,2]) { %><%- await Promise.resolve(x) %><% } %>:<%= getvar('name') %>",
                      variables={"name": "<&"}),
             template("other", "not this session", session_ids=["chat-2"]),
             template("b", "{{char}} stays <%= 'literal' %>")])
    assert r.messages[0]["content"] == "S\n\n12:&lt;&amp;\n\n{{char}} stays literal"  # fact 42; no macro pass
    codes = [d.code for d in r.diagnostics]
    assert codes.count("TAVERN_MEMORY_RESOURCE_VERSION") == 2 and codes.count("TAVERN_MEMORY_DEPENDENCY_VERSION") == 1
    assert set(codes) <= set(CODES)
    node = next(n for n in r.nodes if n["source_id"] == KIND and n["resource_id"] == "prompt-template:a")
    assert node["field"] == "content" and node["block_id"].startswith("template-") and node["name"] == "A"
    spans = [s for s in r.provenance[0]["spans"] if s.get("resource_id") == "prompt-template:b"]
    assert spans and spans[0]["source_id"] == KIND
    again = run([template("a", "<% for (const x of [1,2]) { %><%- await Promise.resolve(x) %><% } %>:"
                               "<%= getvar('name') %>", variables={"name": "<&"})])
    assert next(n for n in again.nodes if n["source_id"] == KIND)["block_id"] == node["block_id"]  # stable id


def test_no_session_means_no_output_and_one_notice() -> None:
    r = run([template("a", "A")], session=None)
    assert r.messages[0]["content"] == "S"
    assert [d.code for d in r.diagnostics].count("TEMPLATE_SESSION_REQUIRED") == 1


def test_the_source_is_never_added_implicitly() -> None:
    r = run([template("a", "A")], rules=[rule("native-system"), rule("history"), rule("input")])
    assert [m["content"] for m in r.messages] == ["S", "hi"]


def test_a_malformed_resource_fails_with_its_path() -> None:
    with pytest.raises(TemplateError) as err:
        run([template("a", "A"), {**template("b", "B"), "id": "nope"}])
    assert err.value.code == "TEMPLATE_RESOURCE_INVALID" and err.value.path == "$.assets.prompt_templates[1].id"
    with pytest.raises(TemplateError) as err:
        run([template("a", "A"), template("a", "again")])
    assert err.value.code == "TEMPLATE_RESOURCE_INVALID" and err.value.path == "$.assets.prompt_templates[1].id"


def test_a_failing_template_fails_the_whole_request() -> None:
    with pytest.raises(TemplateError) as err:
        run([template("a", "fine"), template("b", "<% throw new Error('boom') %>")])
    assert err.value.code == "TEMPLATE_EXECUTION_FAILED"
    with pytest.raises(TemplateError) as err:
        run([template("a", "<%= process.cwd() %>")])
    assert err.value.code.startswith("TEMPLATE_")


def test_mvu_variables_are_read_only_when_the_template_uses_them() -> None:
    mvu = {"name": "state", "stat_data": {"hp": 7}}
    r = run([template("a", "HP <%= getvar('stat_data.hp') %>", variable_resource_id="mvu:state"),
             template("b", "STATIC", variable_resource_id="mvu:state")], mvu=mvu)
    assert r.messages[0]["content"] == "S\n\nHP 7\n\nSTATIC"
    reads = [d.data for d in r.diagnostics if d.code == "TAVERN_MEMORY_DEPENDENCY_VERSION"]
    assert [(d["resource_id"], d["id"]) for d in reads] == [("prompt-template:a", "mvu:state")]  # fact 48


def test_getwi_getpreset_getchar_read_the_request_assets() -> None:
    book = {"name": "Book", "entries": {"4": {"uid": 4, "key": ["x"], "content": "LORE", "comment": "lore"},
                                        "5": {"uid": 5, "key": ["y"], "content": "HIDDEN", "comment": "hidden"}}}
    active = [{"id": "Book.4", "book": "Book", "uid": 4, "content": "LORE", "position": "before"}]
    st = {"prompts": [{"identifier": "guide", "name": "Guide", "content": "PROMPT", "role": "system"}]}
    card = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "C", "description": "CHAR"}}
    parts = "<%- [await getwi('Book', 4), await getpreset('Guide'), await getchar()].join('|') %>"
    r = run([template("a", parts)], rules=[rule("native-system"), rule(KIND, "tpl"), rule("history"), rule("input")],
            world_books=[book], world_info=active, st_preset=st, character=card)
    assert r.messages[0]["content"] == "S\n\nLORE|PROMPT|CHAR"  # fact 43 through the assembler
    with pytest.raises(TemplateError) as err:  # only entries activated this request are readable
        run([template("a", "<%- await getwi('Book', 5) %>")], world_books=[book], world_info=active)
    assert err.value.code == "TEMPLATE_DEPENDENCY_NOT_ACTIVE"


def test_replay_never_runs_the_sandbox_again(monkeypatch: pytest.MonkeyPatch) -> None:
    r = run([template("a", "<%= 6 * 7 %>")])
    import tavernbox.bridge

    def refuse(*a: Any, **k: Any) -> Any:
        raise AssertionError("a replay rendered a template")

    monkeypatch.setattr(tavernbox.bridge, "expand_prompt_template", refuse)
    again = replay(json.loads(json.dumps(r.record)))
    assert dumps(again.messages) == dumps(r.messages) and r.messages[0]["content"] == "S\n\n42"
