"""Which template produced each range of a message ST-Prompt-Template's templates changed (``--json``).

The provenance comes from a second, marked evaluation run only when the provenance is read; its text without the
markers must be the text sent, otherwise the message keeps one span and says why.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tavernbox import assemble_request
from tavernbox.ejs import st_extensions
from tavernbox.ejs.st_prompt_template import TemplateText, WorldEntry, evaluate_prompt_templates

PRESET = {"prompts": [{"identifier": "main", "name": "Main Prompt", "role": "system", "system_prompt": True,
                       "content": "Rules.\n<%- await getwi('Lore', 'city') %>\nEnd <%= 6 * 7 %>."},
                      {"identifier": "chatHistory", "name": "Chat History", "system_prompt": True, "marker": True}],
          "prompt_order": [{"character_id": 100001, "order": [{"identifier": "main", "enabled": True},
                                                              {"identifier": "chatHistory", "enabled": True}]}]}
BOOK = {"name": "Lore", "entries": {
    "0": {"uid": 0, "comment": "city", "content": "The city <%= 'Ur' %> is old.", "key": ["zzzz"], "disable": False},
    "1": {"uid": 1, "comment": "plain", "content": "Plain lore.", "key": ["zzzz"], "disable": False}}}


def _request(main: str | None = None) -> dict[str, Any]:
    preset = json.loads(json.dumps(PRESET))
    if main is not None:
        preset["prompts"][0]["content"] = main
    return {"preset": preset, "books": [BOOK], "chat": {"messages": [{"role": "user", "content": "Hello."}]},
            "user": {"name": "Ash"}}


def _template_spans(sent: Any, index: int = 0) -> list[dict[str, Any]]:
    return [s for s in sent.provenance[index]["spans"] if s.get("kind") == "template_output"]


def test_marked_evaluation_names_the_message_template_and_each_entry_getwi_read() -> None:
    texts = [TemplateText("A<%= 1 + 1 %>B<%- await getwi('B', 'e1') %>C<%- await getwi('B', 'e2') %>D", "m")]
    books = {"B": [WorldEntry("B", 1, "e1", "x<%= 'y' %>z"), WorldEntry("B", 2, "e2", "plain")]}
    plain = evaluate_prompt_templates(texts, books=books, default_book="B")
    marked = evaluate_prompt_templates(texts, books=books, default_book="B", marks=True)
    assert marked.texts == plain.texts == ["A2BxyzCplainD"]
    assert marked.spans is not None and plain.spans is None
    got = [(a, b, i["template"], i["token"], i.get("line"), i.get("column"), i.get("uid")) for a, b, i in marked.spans[0]]
    assert got == [(0, 1, "m", "text", 1, 1, None), (1, 2, "m", "escaped", 1, 2, None), (2, 3, "m", "text", 1, 14, None),
                   (3, 4, "world info B/e1", "text", 1, 1, 1), (4, 5, "world info B/e1", "escaped", 1, 2, 1),
                   (5, 6, "world info B/e1", "text", 1, 12, 1),
                   # the caller's text piece again after what getwi returned
                   (6, 7, "m", "text", 1, 44, None), (7, 12, "world info B/e2", "entry", None, None, 2),
                   (12, 13, "m", "text", 1, 74, None)]


def test_assembled_provenance_attributes_the_entry_getwi_printed() -> None:
    sent = assemble_request(_request())
    content = sent.messages[0]["content"]
    assert content == "Rules.\nThe city Ur is old.\nEnd 42."
    spans = _template_spans(sent)
    entry = [s for s in spans if s.get("book") == "Lore"]
    assert {(content[s["start"]:s["end"]], s["uid"], s["comment"]) for s in entry} == {
        ("The city ", 0, "city"), ("Ur", 0, "city"), (" is old.", 0, "city")}
    own = [s for s in spans if s["template"] == "message 0 (system)"]
    assert ("42", "escaped", 3) in {(content[s["start"]:s["end"]], s["token"], s["line"]) for s in own}
    assert all("reason" not in s for s in spans)
    # every character of the message is covered once, in order
    assert [(s["start"], s["end"]) for s in spans] == sorted((s["start"], s["end"]) for s in spans)
    assert spans[0]["start"] == 0 and spans[-1]["end"] == len(content)


def test_the_marked_evaluation_runs_only_when_the_provenance_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bool] = []
    real = st_extensions.run_extensions

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(bool(kwargs.get("marks")))
        return real(*args, **kwargs)

    monkeypatch.setattr(st_extensions, "run_extensions", counting)
    sent = assemble_request(_request())
    assert calls == [False]
    sent.to_dict()
    sent.to_dict()
    assert calls == [False, True]


def test_a_template_that_measures_what_getwi_returned_keeps_one_span_with_the_reason() -> None:
    sent = assemble_request(_request("Size <%= (await getwi('Lore', 'city')).length %>."))
    assert sent.messages[0]["content"] == "Size 19."
    spans = _template_spans(sent)
    assert len(spans) == 1 and spans[0]["template"] == "message 0 (system)"
    assert "getwi" in spans[0]["reason"]


def test_a_corpus_card_names_its_entries_in_the_provenance(shared: Any) -> None:
    import yaml

    card = json.loads(shared("corpora", "cards", "zhanguo.v3.json").read_text(encoding="utf-8"))
    entries = card["data"]["character_book"]["entries"]
    stat = yaml.safe_load(next(e["content"] for e in entries if e.get("comment") == "[initvar]变量初始化勿开"))
    sent = assemble_request({
        "preset": str(shared("corpora", "presets", "st-default-openai.json")), "card": card,
        "chat": {"messages": [{"role": "assistant", "content": card["data"]["first_mes"]},
                              {"role": "user", "content": "Hello."},
                              {"role": "assistant", "content": "...", "variables": {"stat_data": stat}}]},
        "user": {"name": "Ash"}, "budget": {"max_context": 128000}})
    spans = [s for p in sent.provenance for s in p["spans"] if s.get("kind") == "template_output"]
    read = {r["title"] for r in sent.to_dict()["templates"]["reads"] if r["kind"] == "getwi"}
    named = {s["comment"] for s in spans if s.get("book") == "战国"}
    assert named and named <= read
    assert not [s for s in spans if s.get("reason")]
