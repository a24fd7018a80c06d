"""``tavernbox cache-report``: golden tests per breaker kind, the clean preset whose prefix ends at the
new user message, recorded-chat turns, and the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tavernbox.cli.cache_report import command
from tavernbox.errors import TemplateError
from tavernbox.lint.prefix_cache import MAX_TURNS, NEXT_REPLY, NEXT_USER, _Serialised, cache_report
from tavernbox.sillytavern.assemble import assemble_request
from tavernbox.tokenizers import MessageCounter, get_tokenizer

NOW = "2026-12-01T10:00:00Z"


def preset(main: str, *, extra: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    prompts = [
        {"identifier": "main", "name": "Main", "system_prompt": True, "role": "system", "content": main},
        {"identifier": "worldInfoBefore", "marker": True},
        {"identifier": "charDescription", "marker": True},
        {"identifier": "chatHistory", "marker": True},
        {"identifier": "jailbreak", "name": "PHI", "system_prompt": True, "role": "system", "content": "Stay in character."},
        *(extra or []),
    ]
    order = [{"identifier": p["identifier"], "enabled": True} for p in prompts]
    return {"prompts": prompts, "prompt_order": [{"character_id": 100001, "order": order}]}


CARD = {"spec": "chara_card_v2", "data": {"name": "Mira", "description": "Mira keeps the lighthouse."}}


def request(main: str = "You are {{char}}.", *, chat: list[dict[str, Any]] | None = None, **fields: Any) -> dict[str, Any]:
    messages = chat if chat is not None else [
        {"role": "assistant", "content": "Come in, quickly."},
        {"role": "user", "content": "Thank you. Is the storm bad?"},
    ]
    return {"preset": preset(main, extra=fields.pop("extra", None)), "card": CARD, "chat": {"messages": messages},
            "options": {"seed": 3, "now": NOW}, **fields}


def serialised(messages: list[dict[str, Any]]) -> bytes:
    return json.dumps(messages, ensure_ascii=False, separators=(",", ":")).encode()


def current_and_next(req: dict[str, Any]) -> tuple[bytes, bytes]:
    """The two requests as the report builds them, assembled here independently."""
    messages = req["chat"]["messages"]
    added = ([{"role": "assistant", "content": NEXT_REPLY}, {"role": "user", "content": NEXT_USER}]
             if messages[-1]["role"] == "user" else
             [{"role": "user", "content": NEXT_USER}, {"role": "assistant", "content": NEXT_REPLY}])
    nxt = dict(req, chat={"messages": [*messages, *added]}, options={"seed": 3, "now": "2026-12-02T11:01:00Z"})
    return serialised(assemble_request(req).messages), serialised(assemble_request(nxt).messages)


def ideal(nxt: bytes, first_added: str) -> int:
    """Where the first added message starts in the next request's bytes."""
    text = NEXT_REPLY if first_added == "assistant" else NEXT_USER
    return nxt.index(json.dumps({"role": first_added, "content": text}, separators=(",", ":")).encode())


def only(report: Any) -> Any:
    (turn,) = report.turns
    return turn


def test_time_in_the_main_prompt() -> None:
    req = request("You are {{char}}. It is {{time}}.")
    cur, nxt = current_and_next(req)
    turn = only(cache_report(req))
    at = cur.index(b"10:00 AM")
    assert turn.ideal_prefix_bytes == ideal(nxt, "assistant")
    # byte for byte: "10:00 AM" and "11:01 AM" still share their first digit
    assert turn.prefix_bytes == _common(cur, nxt) == at + 1
    assert [(b.kind, b.label, b.change, b.byte_offset, b.cost_bytes, b.text) for b in turn.breakers] == [
        ("clock", "{{time}} in main", "changed", at, turn.ideal_prefix_bytes - at, "10:00 AM")]
    assert "below the cache breakpoint" in turn.breakers[0].suggestion


def test_random_in_the_main_prompt_is_a_breaker_even_with_the_seed_pinned() -> None:
    req = request("You are {{char}}. Mood: {{random::calm::wry::stern}}.")
    cur, nxt = current_and_next(req)
    turn = only(cache_report(req))
    (b,) = turn.breakers
    at = cur.index(b"Mood: ") + len(b"Mood: ")
    assert (b.kind, b.label, b.change, b.byte_offset) == ("random", "{{random}} in main", "redrawn", at)
    # the seeded requests agree (so the measured prefix reaches the new messages) ...
    assert turn.seeded_prefix_bytes == turn.ideal_prefix_bytes == ideal(nxt, "assistant")
    # ... but SillyTavern draws again every generation: the reported prefix stops at the draw
    assert turn.prefix_bytes == at
    assert "pin the seed" in b.suggestion


def test_world_info_at_depth() -> None:
    book = {"entries": {"0": {"uid": 0, "key": ["x"], "constant": True, "content": "Storms last until the tide turns.",
                              "position": 4, "depth": 2, "role": 0, "comment": "Storm lore"}}}
    chat = [{"role": "assistant", "content": f"Line {i}."} if i % 2 else {"role": "user", "content": f"Say {i}."}
            for i in range(5)]
    req = request(books=[book], chat=chat)
    cur, nxt = current_and_next(req)
    turn = only(cache_report(req))
    (b,) = turn.breakers
    at = cur.index(b'{"role":"system","content":"Storms')  # two messages above the end of the chat
    assert cur[at:].split(b"},{")[2].startswith(b'"role":"user","content":"Say 4."')
    assert (b.kind, b.label, b.change, b.byte_offset) == ("world_info_depth", "world info 'Storm lore' of book at depth 2",
                                                         "moves", at)
    assert b.cost_bytes == turn.ideal_prefix_bytes - at
    assert turn.prefix_bytes == _common(cur, nxt) == at + len('{"role":"')  # then "system" meets "user"
    assert "sticky" in b.suggestion


def test_authors_note_at_an_interval() -> None:
    req = request(author_note={"content": "Keep it cosy.", "interval": 2, "position": "before"})
    cur, nxt = current_and_next(req)
    assert b"Keep it cosy." not in cur and b"Keep it cosy." in nxt  # one user message now, two next turn
    turn = only(cache_report(req))
    (b,) = turn.breakers
    at = nxt.index(b'{"role":"system","content":"Keep it cosy.')  # the note is a message of its own
    assert (b.kind, b.change, b.byte_offset, b.text) == ("author_note", "appears", at, "Keep it cosy.")
    # the note is only in the next request: its part before the new messages is longer by that message
    assert turn.ideal_prefix_bytes - turn.current_cacheable_bytes == len(b'{"role":"system","content":"Keep it cosy."},')
    assert b.cost_bytes == turn.ideal_prefix_bytes - at
    assert b.label.startswith("Author's Note")
    assert turn.prefix_bytes == _common(cur, nxt) == len(b"[{\"role\":\"system\",\"content\":\"")
    assert "interval 1" in b.suggestion


def _common(a: bytes, b: bytes) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_variable_shown_in_the_system_prompt() -> None:
    req = request("You are {{char}}.{{setvar::turn::{{lastMessageId}}}} Turn {{getvar::turn}}.")
    cur, nxt = current_and_next(req)
    turn = only(cache_report(req))
    (b,) = turn.breakers
    at = cur.index(b"Turn ") + len(b"Turn ")
    assert (b.kind, b.label, b.change, b.byte_offset, b.text) == ("variable", "variable turn shown in main", "changed",
                                                                 at, "1")
    assert turn.prefix_bytes == at


@pytest.mark.parametrize("last", ["assistant", "user"])
def test_no_volatile_content_prefix_ends_at_the_new_messages(last: str) -> None:
    chat = [{"role": "assistant", "content": "Come in."}, {"role": "user", "content": "Thanks."}]
    if last == "assistant":
        chat.append({"role": "assistant", "content": "Sit by the fire."})
    req = request("You are {{char}}, with {{user}}.", chat=chat)
    cur, nxt = current_and_next(req)
    turn = only(cache_report(req))
    assert turn.breakers == []
    assert turn.prefix_bytes == turn.seeded_prefix_bytes == turn.ideal_prefix_bytes == turn.current_cacheable_bytes
    first_added = "user" if last == "assistant" else "assistant"
    assert turn.ideal_prefix_bytes == ideal(nxt, first_added)
    if last == "assistant":  # the chat ends with the reply: the prefix ends at the new user message
        assert nxt[turn.prefix_bytes:].startswith(b'{"role":"user","content":"' + NEXT_USER.encode())
    assert turn.total_bytes == len(nxt) and turn.total_tokens > turn.prefix_tokens > 0
    # tokens by SillyTavern's per-message rule with the request's tokenizer (o200k by default): the
    # prefix ends at a message boundary here, so it is exactly the messages before the new ones
    messages = json.loads(nxt)
    before = messages[: next(i for i, m in enumerate(messages) if m["content"] in (NEXT_USER, NEXT_REPLY))]
    counter = MessageCounter(get_tokenizer("o200k"))
    assert turn.tokenizer == "o200k"
    assert turn.prefix_tokens == counter.messages(before)
    assert turn.total_tokens == counter.messages(messages)
    assert only(cache_report(req, tokenizer="estimate")).prefix_tokens != turn.prefix_tokens


def test_recorded_chat_turns() -> None:
    chat = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"Message {i}."} for i in range(7)]
    req = request("It is {{time}}. You are {{char}}.", chat=chat)
    report = cache_report(req, turns=2)
    assert [t.turn for t in report.turns] == [1, 2]
    assert all([b.kind for b in t.breakers] == ["clock"] for t in report.turns)
    summary = report.summary()
    assert summary["turns"] == 2
    (row,) = summary["breakers"]
    assert row["turns"] == 2 and row["cost_bytes"] == sum(t.breakers[0].cost_bytes for t in report.turns)
    with pytest.raises(TemplateError) as err:
        cache_report(req, turns=4)
    assert err.value.code == "REQUEST_INVALID" and err.value.path == "$.chat"
    with pytest.raises(TemplateError) as err:
        cache_report(req, turns=MAX_TURNS + 1)  # the turn limit, checked before any assembly
    assert err.value.code == "INPUT_INVALID"


def test_byte_offsets_follow_json_escapes() -> None:
    content = 'a"b\\c\nd\u00e9\u4e2d\U0001F600x\x01y\ud800z'
    ser = _Serialised.of([{"role": "system", "content": "head"}, {"role": "user", "content": content}])
    for k in range(len(content) + 1):
        expected = ser.content_starts[1] + len(json.dumps(content[:k], ensure_ascii=False)[1:-1].encode("utf-8", "surrogatepass"))
        assert ser.offset(1, k) == expected
    assert ser.data.decode("utf-8", "surrogatepass") == json.dumps(ser.messages, ensure_ascii=False, separators=(",", ":"))


def test_cli_json_and_clean_errors(tmp_path: Path) -> None:
    path = tmp_path / "req.json"
    path.write_text(json.dumps(request("Now {{time}}.")), encoding="utf-8")
    result = CliRunner().invoke(command, ["--request", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["summary"]["breakers"][0]["label"] == "{{time}} in main"
    assert {"prefix_bytes", "prefix_tokens", "total_bytes", "ideal_prefix_bytes", "breakers"} <= set(out["turns"][0])
    rich = CliRunner().invoke(command, ["--request", str(path)])
    assert rich.exit_code == 0 and "{{time}} in main" in rich.output and "hint:" in rich.output
    path.write_text(json.dumps({"preset": {}, "bogus": 1}), encoding="utf-8")
    bad = CliRunner().invoke(command, ["--request", str(path)])
    assert bad.exit_code == 1 and "REQUEST_INVALID" in bad.output and "Traceback" not in bad.output


def test_a_macro_that_prints_nothing_this_turn_does_not_make_the_prompt_text_a_breaker() -> None:
    # with an empty chat, {{getvar::turn}} prints nothing now and "1" next turn: the block's own
    # text around it is split differently, but it did not change
    req = request("You are {{char}}.{{setvar::turn::{{lastMessageId}}}} Turn {{getvar::turn}}.", chat=[])
    turn = only(cache_report(req))
    assert [(b.kind, b.change) for b in turn.breakers] == [("variable", "appears")]


def test_world_info_activated_by_the_new_message_is_named_by_its_entry() -> None:
    book = {"entries": {"0": {"uid": 0, "key": ["lantern"], "content": "The lantern never goes out.",
                              "position": 0, "comment": "Lantern"}}}
    req = request(books=[book])
    turn = only(cache_report(req, next_user="Hand me the lantern."))
    (b,) = turn.breakers
    assert (b.kind, b.label, b.change) == ("world_info", "world info 'Lantern' of book (worldInfoBefore)", "appears")
    assert b.source["uid"] == 0 and b.text == "The lantern never goes out."
    assert "sticky" in b.suggestion
    assert only(cache_report(req)).breakers == []  # a next message without the key activates nothing
