"""ST-Prompt-Template's generate loader and ``@@preprocessing`` in the request path (the recordings of
``golden/st_oracle/ext_generate_requests.jsonl`` are checked byte for byte in ``test_st_ext_templates.py``): what the
recordings do not show, settings, budgets, the provenance and the given objects."""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest

from tavernbox import assemble_request
from tavernbox.ejs.st_extensions import generate_entries, parse_extensions, prepare_world, run_extensions
from tavernbox.ejs.st_prompt_template import GenerateSpec, PromptTemplateLimits
from tavernbox.errors import TemplateError
from tavernbox.macros.st_variables import StVariables

PRESET = {"prompts": [{"identifier": "main", "name": "Main Prompt", "role": "system", "system_prompt": True,
                       "content": "Main."},
                      {"identifier": "worldInfoBefore", "name": "World Info (before)", "system_prompt": True,
                       "marker": True},
                      {"identifier": "chatHistory", "name": "Chat History", "system_prompt": True, "marker": True}],
          "prompt_order": [{"character_id": 100001, "order": [{"identifier": "main", "enabled": True},
                                                              {"identifier": "worldInfoBefore", "enabled": True},
                                                              {"identifier": "chatHistory", "enabled": True}]}]}


def _entry(uid: int, comment: str, content: str, keys: tuple[str, ...] = (), **kw: Any) -> dict[str, Any]:
    """A world-file entry as SillyTavern's editor saves it (``vectorized`` false), disabled unless told."""
    out = {"uid": uid, "key": list(keys), "keysecondary": [], "comment": comment, "content": content,
           "constant": False, "selective": True, "selectiveLogic": 0, "order": 100, "position": 0, "disable": True,
           "probability": 100, "useProbability": True, "depth": 4, "group": "", "vectorized": False}
    out.update(kw)
    return out


def _request(*entries: dict[str, Any], settings: dict[str, Any] | None = None) -> dict[str, Any]:
    book = {"name": "lore", "entries": {str(e["uid"]): e for e in entries}}
    return {"preset": PRESET, "books": [{"book": book, "source": "global"}], "user": {"name": "Ash"},
            "chat": {"messages": [{"role": "assistant", "content": "The lamp is lit."},
                                  {"role": "user", "content": "Any ships tonight?"}]},
            "extensions": {"prompt_template": {"enabled": True, **(settings or {})}}}


GENERATED = (_entry(0, "[GENERATE:BEFORE]", "Lead <%- 1 + 1 %>. ", constant=True),
             _entry(1, "[GENERATE:AFTER]", " Tail for ships.", keys=("ships",)),
             _entry(2, "[GENERATE:AFTER] other", " Never: no such word.", keys=("zebra",)),
             _entry(3, "plain", "Plain lore.", keys=("lamp",), disable=False))


def test_the_entries_are_placed_at_the_start_and_the_end_of_the_prompt() -> None:
    sent = assemble_request(_request(*GENERATED)).messages
    assert sent[0]["content"] == "Lead 2. Main."
    assert sent[1]["content"] == "Plain lore."
    assert sent[-1]["content"] == "Any ships tonight? Tail for ships."
    assert "Never" not in str(sent)


def test_with_the_generate_loader_off_they_add_nothing_and_are_still_not_scanned() -> None:
    sent = assemble_request(_request(*GENERATED, settings={"generate_loader_enabled": False})).messages
    assert [m["content"] for m in sent] == ["Main.", "Plain lore.", "[Start a new Chat]", "The lamp is lit.",
                                          "Any ships tonight?"]


def test_an_entry_without_the_vectorized_field_is_not_taken() -> None:
    # SillyTavern loads a world file as it is: the loader asks for entries whose ``vectorized`` is false
    entry = _entry(0, "[GENERATE:AFTER]", " Tail.", constant=True)
    del entry["vectorized"]
    assert assemble_request(_request(entry)).messages[-1]["content"] == "Any ships tonight?"
    taken = _entry(0, "[GENERATE:AFTER]", " Tail.", constant=True)
    assert assemble_request(_request(taken)).messages[-1]["content"] == "Any ships tonight? Tail."


def test_the_provenance_names_the_entry_behind_each_piece() -> None:
    out = assemble_request(_request(*GENERATED)).to_dict()
    first = out["provenance"][0]["spans"][0]
    assert (first["kind"], first["book"], first["uid"], first["comment"]) == ("template_output", "lore", 0,
                                                                              "[GENERATE:BEFORE]")
    assert (first["start"], first["end"]) == (0, len("Lead 2. "))
    last = out["provenance"][-1]["spans"]
    assert [s.get("comment") for s in last][-1] == "[GENERATE:AFTER]"
    assert last[-1]["end"] - last[-1]["start"] == len(" Tail for ships.")


def test_a_failing_entry_adds_nothing_with_a_warning_naming_it() -> None:
    failing = _entry(5, "[GENERATE:AFTER] broken", " <% throw new Error('no') %>", constant=True)
    result = assemble_request(_request(*GENERATED, failing))
    assert result.messages[-1]["content"] == "Any ships tonight? Tail for ships."
    warning = next(d for d in result.warnings if d.code == "TEMPLATE_EXECUTION_FAILED")
    assert "[GENERATE:AFTER] broken" in warning.message and "adds nothing" in warning.message


def test_preprocessing_feeds_the_scan_and_leaves_the_given_book_alone() -> None:
    entries = (_entry(0, "writer", "@@preprocessing\n<% setvar('p', 1) %>Says <%- 'beacon' + 'word' %>.",
                      constant=True, disable=False),
               _entry(1, "waiter", "Woken (p=<%- getvar('p') %>).", keys=("beaconword",), disable=False, order=200))
    req = _request(*entries)
    given = copy.deepcopy(req)
    sent = assemble_request(req).messages
    assert sent[1]["content"] == "Says beaconword.\nWoken (p=1)."
    assert req == given


@pytest.mark.parametrize("entry", [
    _entry(0, "[GENERATE:AFTER] hog", "<% let s = 'x'; for (;;) s += s %>", constant=True),
    _entry(0, "[GENERATE:BEFORE] hog", "<% let s = 'x'; for (;;) s += s %>", constant=True),
    _entry(0, "hog", "@@preprocessing\n<% let s = 'x'; for (;;) s += s %>", constant=True, disable=False),
], ids=["after", "before", "preprocessing"])
def test_a_hostile_entry_trips_the_budget_and_the_next_request_is_unaffected(entry: dict[str, Any]) -> None:
    with pytest.raises(TemplateError) as caught:
        assemble_request(_request(entry))
    assert caught.value.code == "TEMPLATE_MEMORY_LIMIT" and "hog" in caught.value.message
    assert assemble_request(_request(*GENERATED)).messages[0]["content"] == "Lead 2. Main."


def test_an_endless_entry_trips_the_time_budget_in_bounded_time() -> None:
    settings = parse_extensions(None)
    limits = PromptTemplateLimits(time_ms=150)
    loop = _entry(0, "[GENERATE:AFTER] loop", "<% for (;;) {} %>", constant=True)
    spec = GenerateSpec(generate_entries([loop], world="lore", settings=settings))
    started = time.monotonic()
    with pytest.raises(TemplateError) as caught:
        run_extensions([{"role": "user", "content": "Hi."}], settings=settings, variables=StVariables(),
                       limits=limits, generate=spec)
    assert caught.value.code == "TEMPLATE_TIME_LIMIT" and "loop" in caught.value.message
    pre = _entry(1, "spin", "@@preprocessing\n<% for (;;) {} %>", constant=True, disable=False)
    with pytest.raises(TemplateError) as caught:
        prepare_world([[pre]], settings=settings, variables=StVariables(), limits=limits)
    assert caught.value.code == "TEMPLATE_TIME_LIMIT" and "spin" in caught.value.message
    assert time.monotonic() - started < 0.15 * 2 + 2.0


def test_the_generate_entries_keep_the_decorator_argument_quirk() -> None:
    # as in the extension, an entry taken for one message answers the plain decorator afterwards
    settings = parse_extensions(None)
    entry = _entry(0, "deco", "@@generate_after 0\n [after 0]", constant=True)
    spec = GenerateSpec(generate_entries([entry], world="lore", settings=settings))
    result = run_extensions([{"role": "system", "content": "A."}, {"role": "user", "content": "B."}],
                            settings=settings, variables=StVariables(), generate=spec)
    assert result.contents == ["A. [after 0]", "B. [after 0]"]


def test_one_book_alone_is_prepared_as_in_the_request_path() -> None:
    from tavernbox.ejs.st_extensions import prepare_world_entries

    entries = [_entry(0, "gated", "@@if getvar('x') === 1\nGated.", disable=False),
               _entry(1, "pre", "@@preprocessing\n<%- 'Done' %>.", keys=("k",), disable=False),
               _entry(2, "[GENERATE:AFTER]", "Special.")]
    kept, warnings = prepare_world_entries(entries, settings=parse_extensions(None),
                                           variables=StVariables.build(chat={"x": 2}))
    assert [(e["comment"], e["content"], e["key"]) for e in kept] == [("pre", "Done.", ["Done."])]
    assert warnings == [] and entries[1]["content"].startswith("@@preprocessing")


def test_a_failing_condition_filters_nothing_and_an_empty_key_activates_nothing() -> None:
    # as the extension: a condition that throws is not "false"; the first matching key is tested for truth
    settings = parse_extensions({"prompt_template": {"invert_enabled": False}})
    entries = [_entry(0, "[GENERATE:AFTER] a", "@@if nope.x\n [cond threw]", constant=True, disable=False),
               _entry(1, "[GENERATE:AFTER] b", " [empty key]", keys=("",), disable=False)]
    spec = GenerateSpec(generate_entries(entries, world="lore", settings=settings))
    result = run_extensions([{"role": "user", "content": "Hi."}], settings=settings, variables=StVariables(),
                            generate=spec)
    assert result.contents == ["Hi. [cond threw]"]
    assert [w.code for w in result.warnings] == ["TEMPLATE_EXECUTION_FAILED"]


def test_a_book_file_with_special_entries_keeps_every_other_entrys_keys(tmp_path: Any) -> None:
    # a book read from a file is a cached, frozen asset: the entries the extension's step rebuilds are plain copies
    import json

    entries = {"0": _entry(0, "[GENERATE:AFTER]", " Tail.", constant=True),
               "1": _entry(1, "pre", "@@preprocessing\nPre <%- 1 %>.", keys=("ships",), constant=True, disable=False,
                      order=10),
               "2": _entry(2, "both keys", "Both keys.", keys=("ships",), disable=False, keysecondary=["lamp"],
                      order=20)}
    path = tmp_path / "lore.json"
    path.write_text(json.dumps({"entries": entries}), encoding="utf-8")
    req = _request()
    req["books"] = [{"book": str(path), "source": "global"}]
    for _ in range(2):  # the second request reads the cached asset
        result = assemble_request(req)
        assert result.messages[1]["content"] == "Pre 1.\nBoth keys."
        assert result.messages[-1]["content"] == "Any ships tonight? Tail."
        assert not [d for d in result.warnings if d.code == "ASSET_INVALID"]
