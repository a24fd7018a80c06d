"""ST-Prompt-Template at generation (``ejs/st_prompt_template.py``) against the recordings of
``golden/st_oracle/ext_scenarios.py``: SillyTavern's request (tavernbox's), Tavern Helper's macro pass, then every
final message's templates in one VM must give what SillyTavern 1.18.0 sent with both extensions installed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from st_ext_support import assert_sends_as_recorded, ext_cases, ext_request, ext_variables, extensions_of, module_resolve

from tavernbox import assemble_request, expand_macros
from tavernbox.assets.worldbooks import card_book_to_world_book
from tavernbox.ejs.st_prompt_template import (
    GenerateSpec,
    InjectEntry,
    PromptTemplateContext,
    PromptTemplateLimits,
    TemplateText,
    WorldEntry,
    evaluate_prompt_templates,
    json_patch,
    split_decorators,
)
from tavernbox.ejs.st_extensions import (
    activated_entry,
    generate_entries,
    initial_variables,
    inject_entries,
    load_chat,
    parse_extensions,
    prepare_world,
    run_extensions,
    world_entries,
)
from tavernbox.errors import TemplateError
from tavernbox.macros.st_variables import StVariables

#: the recorded cases, each reproduced byte for byte
EQUAL = ("ext-order", "ext-order-th-off", "ext-order-pt-off", "ext-failing", "ext-chat-own", "ext-chat-own-raw",
         "ext-vars", "ext-api", "ext-decorators", "ext-initvars", "ext-getwi", "ext-inject", "ext-card-zhanguo",
         "ext-card-de-quoc", "ext-card-qingkong", "ext-card-lide")
#: the generate loader's recorded cases (``ext_generate_requests.jsonl``), each reproduced byte for byte
GENERATE_EQUAL = ("gen-before-after", "gen-index", "gen-regex", "gen-preprocess", "gen-preprocess-keyed", "gen-card-book",
                  "gen-activewi",
                  "gen-invert-off")


def _books(case: dict[str, Any], user: str, char: str) -> tuple[dict[str, list[WorldEntry]], str]:
    """The world books getwi reads (the card's imported book and the scenario's global book) and the card's
    linked world."""
    sc = case["scenario"]
    card = module_resolve(sc["card"])
    data = card.get("data") or card
    books: dict[str, list[WorldEntry]] = {}
    linked = (data.get("extensions") or {}).get("world") or ""

    def expand(text: str) -> str:
        return expand_macros(text, {"user": user, "char": char}).text

    if sc.get("import_embedded_book") and data.get("character_book"):
        entries = card_book_to_world_book(data["character_book"], name=linked).to_st_dict()["entries"]
        books[linked] = world_entries(linked, entries, expand)
    if sc.get("book"):
        name = f"oracle-{case['id']}"
        books[name] = world_entries(name, module_resolve(sc["book"])["entries"], expand)
    return books, linked if sc.get("import_embedded_book") else ""


def _extended(case: dict[str, Any]) -> list[dict[str, Any]]:
    """tavernbox's request, then the extensions as SillyTavern runs them over the final messages."""
    sc = case["scenario"]
    user = sc.get("user_name") or "User"
    char = (module_resolve(sc["card"]).get("data") or {}).get("name") or ""
    books, linked = _books(case, user, char)
    chat = tuple({"mes": m["content"], "is_user": m["role"] == "user", "is_system": m["role"] == "system",
                  "name": user if m["role"] == "user" else char} for m in sc["chat"])
    settings = parse_extensions((sc.get("extensions") or {}) | {
        "tavern_helper": extensions_of(case)[1],
        "prompt_template": _pt_settings(sc)})
    preset = module_resolve(sc["preset"])
    prompts = {p["name"]: expand_macros(p.get("content") or "", {"user": user, "char": char}).text
               for p in preset.get("prompts") or [] if p.get("name")}
    description = (module_resolve(sc["card"]).get("data") or {}).get("description") or ""
    context = PromptTemplateContext(user_name=user, char_name=char, chat=chat, char_book=linked,
                                    character_text=description, preset_prompts=prompts)
    load = load_chat([m["content"] for m in sc["chat"]], settings=settings, variables=ext_variables(case),
                     books=books, default_book=linked, context=context)
    request = ext_request(case)
    request["extensions"] = {"prompt_template": False, "tavern_helper": False}
    initial, _ = initial_variables([e for b in request.get("books", []) for e in b["book"]["entries"].values()],
                                   settings=settings)
    for m, text in zip(request["chat"]["messages"], load.contents, strict=True):
        m["content"] = text
    generate = _generate_spec(case, request, settings, expand=lambda text: expand_macros(
        text, {"user": user, "char": char}).text)
    card_book = (request["card"].get("data") or {}).get("character_book")
    lists = [list(b["book"]["entries"].values()) for b in request.get("books", [])]
    if card_book and card_book.get("entries"):
        lists.append(card_book["entries"])
    prepared = prepare_world(lists, settings=settings, variables=load.variables, context=context, getwi_books=books,
                             default_book=linked, generate=generate,
                             expand=lambda text: expand_macros(text, {"user": user, "char": char}).text)
    for book, entries in zip(request.get("books", []), prepared.books, strict=False):
        for world, uid, forced in prepared.activated:  # what a [GENERATE:BEFORE] entry's activewi named
            raw = book["book"]["entries"].get(str(uid))
            if world == f"oracle-{case['id']}" and raw is not None:
                entries = [e for e in entries if e["uid"] != uid] + [activated_entry(raw, forced)]
        book["book"] = {**book["book"], "entries": {str(e["uid"]): e for e in entries}}
    if card_book and card_book.get("entries"):
        request["card"] = {**request["card"], "data": {**request["card"]["data"], "character_book": {
            **card_book, "entries": prepared.books[-1]}}}
    variables = prepared.variables or load.variables
    messages = [dict(m) for m in assemble_request(request).messages]
    inject = [e for b in (request.get("books") or []) for e in inject_entries(
        list(module_resolve(sc["book"])["entries"].values()), world=b["book"].get("name") or "", settings=settings,
        expand=lambda text: expand_macros(text, {"user": user, "char": char}).text)]
    result = run_extensions(messages, settings=settings, variables=variables, books=books,
                            default_book=linked, context=context, initial=initial, inject_entries=inject,
                            generate=GenerateSpec(generate.entries, before=prepared.generate_before,
                                                  match_whole_words=generate.match_whole_words)
                            if generate is not None else None)
    if result.injected is not None:
        return [{"role": role, "content": content} for role, content in result.injected]
    for m, text in zip(messages, result.contents, strict=True):
        m["content"] = text
    return messages


def _generate_spec(case: dict[str, Any], request: dict[str, Any], settings: Any, expand: Any) -> GenerateSpec | None:
    """The ``[GENERATE:*]`` entries of the scenario's book (as recorded: an entry without ``vectorized`` is not
    taken) and of the card's imported book, as the extension's loader takes them, for the run before the scan."""
    sc = case["scenario"]
    entries = []
    if sc.get("book"):
        entries += generate_entries(list(module_resolve(sc["book"])["entries"].values()),
                                    world=f"oracle-{case['id']}", settings=settings, expand=expand)
    data = module_resolve(sc["card"]).get("data") or {}
    if sc.get("import_embedded_book") and data.get("character_book"):
        linked = (data.get("extensions") or {}).get("world") or ""
        book = card_book_to_world_book(data["character_book"], name=linked).to_st_dict()["entries"]
        entries += generate_entries(list(book.values()), world=linked, settings=settings, expand=expand)
    if not entries:
        return None
    wi = request["world_info"]
    return GenerateSpec(entries, phase="before", match_whole_words=wi["world_info_match_whole_words"])


def _pt_settings(sc: dict[str, Any]) -> Any:
    pt = (sc.get("extensions") or {}).get("prompt_template")
    if isinstance(pt, dict):
        return {"enabled": pt.get("enabled", True), **(pt.get("settings") or {})}
    return bool(pt)


def _case(cid: str) -> dict[str, Any]:
    case = ext_cases().get(cid)
    if case is None:
        pytest.fail(f"tests/golden/st_oracle/ext_requests.jsonl has no case {cid}")
    return case


@pytest.mark.parametrize("cid", EQUAL + GENERATE_EQUAL)
def test_the_request_path_sends_what_sillytavern_with_the_extensions_sent(cid: str) -> None:
    assert_sends_as_recorded(_case(cid))


@pytest.mark.parametrize("cid", EQUAL + GENERATE_EQUAL)
def test_the_stage_functions_alone_give_the_same_messages(cid: str) -> None:
    case = _case(cid)
    got = _extended(case)
    expected = case["messages"]
    assert [m["role"] for m in got] == [m["role"] for m in expected]
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert g["content"] == e["content"], f"message {i}"


@pytest.mark.parametrize("cid", [c for c in EQUAL if c.startswith("ext-card-")])
def test_the_corpus_cards_leave_no_template_and_no_variable_macro(cid: str) -> None:
    result = assemble_request(ext_request(_case(cid)))
    text = json.dumps(result.messages, ensure_ascii=False)
    assert "<%" not in text and "_variable::" not in text
    assert not [d for d in result.warnings if d.code == "MACRO_UNKNOWN"]


def test_writes_come_back_as_a_patch_per_scope_and_carry_across_templates() -> None:
    variables = StVariables.build(global_vars={"g": 1}, chat={"cv": "c", "list": ["a"]}, messages=[{"hp": 5}])
    texts = [TemplateText("<% setvar('n', 1); setvar('g2', 2, {scope: 'global'}); define('hi', x => 'hi ' + x) %>",
                          "first"),
             TemplateText("<% incvar('n'); insvar('list', 'b'); setLocalVar('cv', 'd') %><%- getvar('n') %> "
                          "<%- hi('Ash') %> <%- getvar('hp') %>", "second")]
    result = evaluate_prompt_templates(texts, variables=variables)
    assert result.texts == ["", "2 hi Ash 5"]
    assert result.variables_patch == {
        "global": [{"op": "add", "path": "/g2", "value": 2}],
        "chat": [{"op": "replace", "path": "/cv", "value": "d"}],
        "message": [{"op": "add", "path": "/n", "value": 2}, {"op": "add", "path": "/list", "value": ["a", "b"]}],
    }
    # the caller's objects are untouched
    assert variables.chat == {"cv": "c", "list": ["a"]} and variables.global_vars == {"g": 1}
    assert {"kind": "getvar", "scope": "cache", "key": "hp"} in result.reads


def test_getwi_evaluates_the_entry_with_world_info_set_and_reads_are_reported() -> None:
    books = {"B": [WorldEntry("B", 7, "secret lore", "S=<%- 6 * 7 %> <%- world_info.comment %>"),
                   WorldEntry("B", 8, "plain", "just text")]}
    texts = [TemplateText("<%- await getwi('B', 'secret') %>|<%- await getwi(7) %>|<%- await getwi(null, 'plain') %>"
                          "|[<%- await getwi('B', 'none') %>]", "m")]
    result = evaluate_prompt_templates(texts, books=books, default_book="B")
    assert result.texts == ["S=42 secret lore|S=42 secret lore|just text|[]"]
    assert {"kind": "getwi", "book": "B", "title": "none"} in result.reads


def test_an_ordinary_error_sends_that_text_as_it_was_with_a_warning_naming_it() -> None:
    texts = [TemplateText("a <%- 1 + 1 %>", "message 0 (system)"),
             TemplateText("b\n  <% null.x %>", "message 1 (system)"),
             TemplateText("c <% if ( %>", "message 2 (user)"),
             TemplateText("d <%- execute('/echo hi') %>", "message 3 (user)"),
             TemplateText("e <%- 3 %>", "message 4 (user)")]
    result = evaluate_prompt_templates(texts)
    assert result.texts == ["a 2", "b\n  <% null.x %>", "c <% if ( %>", "d <%- execute('/echo hi') %>", "e 3"]
    codes = [(w.code, w.data["template"], w.data.get("line")) for w in result.warnings]
    assert codes == [("TEMPLATE_EXECUTION_FAILED", "message 1 (system)", 2),
                     ("TEMPLATE_SYNTAX", "message 2 (user)", 1),
                     ("TEMPLATE_UNSUPPORTED", "message 3 (user)", 1)]


HOSTILE = {
    "loop": ("<% while (true) {} %>", "TEMPLATE_TIME_LIMIT"),
    "string": ("<% let s = 'x'.repeat(1 << 20); while (true) s = s + s + '.'; %>", "TEMPLATE_MEMORY_LIMIT"),
    "hundred-mb": ("<% const big = 'x'.repeat(100 * 1024 * 1024) %>", "TEMPLATE_MEMORY_LIMIT"),
    "recursion": ("<% function f(n) { return f(n + 1) + 1 } f(0) %>", "TEMPLATE_STACK_LIMIT"),
    "getwi-cycle": ("<%- await getwi('B', 'cycle') %>", "TEMPLATE_STACK_LIMIT"),
    "output": ("<% for (;;) print('xxxxxxxxxxxxxxxx') %>", "TEMPLATE_OUTPUT_LIMIT"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_entry_fails_the_request_with_its_code_and_the_next_request_is_unaffected(name: str) -> None:
    source, code = HOSTILE[name]
    books = {"B": [WorldEntry("B", 1, "hostile", source), WorldEntry("B", 2, "cycle", "<%- await getwi('B', 'cycle') %>")]}
    limits = PromptTemplateLimits(time_ms=300.0, template_output_chars=1 << 20)
    texts = [TemplateText("fine", "m0"), TemplateText("X <%- await getwi('B', 'hostile') %>", "message 1 (system)")]
    with pytest.raises(TemplateError) as caught:
        evaluate_prompt_templates(texts, books=books, default_book="B", limits=limits)
    assert caught.value.code == code
    assert "hostile" in caught.value.message or "cycle" in caught.value.message
    after = evaluate_prompt_templates([TemplateText("<%- typeof s %> <%- 1 + 1 %>", "next")], books=books)
    assert after.texts == ["undefined 2"]


#: where a looping template can sit: (the texts, the books, the @INJECT entries, the label the error must give)
LOOPS = {
    "message": ([TemplateText("fine <%- 1 %>", "message 0 (system)"), TemplateText("a\nb <% while (true) {} %>",
                                                                                   "message 1 (user)")], {}, (),
                "message 1 (user)"),
    "getwi-entry": ([TemplateText("X <%- await getwi('B', 'loops') %>", "message 0 (system)")],
                    {"B": [WorldEntry("B", 1, "fine", "<%- 1 %>"), WorldEntry("B", 2, "loops", "x\n <% for (;;) {} %>")]},
                    (), "world info B/loops"),
    "world-info-entry": ([TemplateText("fine <%- 1 %>", "message 0 (system)")], {},
                         (InjectEntry("B", 7, "@INJECT pos=1,role=system", "y <% let n = 0; while (n >= 0) n++ %>"),),
                         "world info B/@INJECT pos=1,role=system"),
}


@pytest.mark.parametrize("place", sorted(LOOPS))
def test_a_looping_template_is_stopped_by_the_vm_and_named(place: str) -> None:
    # the VM's own interrupt stops the loop at the request's budget, so the error names the template that was
    # running (the pool's deadline, which kills the worker, could not); the wall time is benchmarks/' job
    texts, books, inject, label = LOOPS[place]
    limits = PromptTemplateLimits(time_ms=150.0)
    with pytest.raises(TemplateError) as caught:
        evaluate_prompt_templates(texts, books=books, default_book="B", limits=limits, inject=inject)
    assert caught.value.code == "TEMPLATE_TIME_LIMIT"
    # named by the template the runtime marked as running; a position only where the engine recorded one in it
    # (the @INJECT entry's loop follows a comparison, recorded or not depending on where the interrupt lands; the
    # others loop before anything is recorded): never a position outside the loop
    assert caught.value.message.startswith(f"the render used up its time budget of 150 ms in {label}")
    if place == "world-info-entry":
        assert (caught.value.line, caught.value.column) in ((None, None), (1, 29))
    else:
        assert caught.value.line is None
    after = evaluate_prompt_templates([TemplateText("<%- typeof n %> <%- 1 + 1 %>", "next")], books=books)
    assert after.texts == ["undefined 2"]


def test_texts_without_templates_cost_no_vm() -> None:
    result = evaluate_prompt_templates([TemplateText("plain {{user}}", "m")])
    assert result.texts == ["plain {{user}}"] and result.usage is None


def test_json_patch_and_decorators() -> None:
    assert json_patch({"a": 1, "b": {"c": 2}}, {"b": {"c": 3}, "d/e": 4}) == [
        {"op": "remove", "path": "/a"}, {"op": "replace", "path": "/b/c", "value": 3},
        {"op": "add", "path": "/d~1e", "value": 4}]
    assert split_decorators("@@if x > 1\n@@private\nbody\n@@activate") == (["@@if x > 1", "@@private"],
                                                                           "body\n@@activate")
    assert split_decorators("@@unknown\n@@activate\nbody") == (["@@activate"], "body")
    assert split_decorators("@@@activate\nbody") == ([], "@@@activate\nbody")
    assert split_decorators("plain") == ([], "plain")


def test_one_vm_for_every_template_of_a_request() -> None:
    # the second template sees what the first defined only if both ran in the same context
    texts = [TemplateText("<% define('shared', 41) %>", "a"), TemplateText("<%- shared + 1 %>", "b")]
    assert evaluate_prompt_templates(texts).texts == ["", "42"]
    # and nothing crosses requests
    assert evaluate_prompt_templates([TemplateText("<%- typeof shared %>", "c")]).texts == ["undefined"]


def test_the_request_settings_are_checked_with_their_path() -> None:
    settings = parse_extensions({"prompt_template": {"enabled": True, "filter_message_enabled": False},
                                 "tavern_helper": {"enabled": False}})
    assert settings.templates_on and not settings.tavern_helper
    assert not parse_extensions({"prompt_template": False}).templates_on
    for bad, where in (({"prompt_template": {"nope": 1}}, "$.extensions.prompt_template.nope"),
                       ({"prompt_template": {"enabled": "yes"}}, "$.extensions.prompt_template.enabled"),
                       ({"tavern_helper": 1}, "$.extensions.tavern_helper"), ({"regex": {}}, "$.extensions.regex")):
        with pytest.raises(TemplateError) as caught:
            parse_extensions(bad)
        assert caught.value.code == "REQUEST_INVALID" and caught.value.path == where


def test_the_books_kept_between_requests_give_what_building_them_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    from tavernbox.ejs import st_prompt_template

    books = {"B": [WorldEntry("B", 1, "bad", "<% if ( %>"), WorldEntry("B", 2, "ok", "v=<%- getvar('x') %>"),
                   WorldEntry("B", 3, "loop", "<% null.y %>")]}
    texts = [TemplateText("<%- await getwi('B', 'ok') %> <%- await getwi('B', 'loop') %>", "m0"),
             TemplateText("<%- await getwi('B', 'bad') %>", "m1")]
    variables = StVariables.build(chat={"x": 7})

    def run() -> tuple[Any, ...]:
        r = evaluate_prompt_templates(texts, variables=variables, books=books, default_book="B")
        return r.texts, [(w.code, w.message, w.data) for w in r.warnings]

    monkeypatch.setattr(st_prompt_template, "USE_BOOKS_CACHE", False)
    plain = run()
    monkeypatch.setattr(st_prompt_template, "USE_BOOKS_CACHE", True)
    assert run() == plain and run() == plain  # built, then kept
    assert plain[0] == [texts[0].text, texts[1].text]  # each fails: sent as it was, naming the entry at fault
    assert [w[2]["template"] for w in plain[1]] == ["world info B/loop", "world info B/bad"]


def test_the_recorded_failures_are_warnings_naming_their_message_and_line() -> None:
    sent = assemble_request(ext_request(_case("ext-failing")))
    found = [(w.code, w.data.get("template"), w.data.get("line")) for w in sent.warnings]
    assert found == [("TEMPLATE_EXECUTION_FAILED", "message 2 (system)", 1), ("TEMPLATE_SYNTAX", "message 4 (system)", 1)]
