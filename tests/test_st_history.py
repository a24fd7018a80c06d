"""A long chat's shortcuts give what the whole chat gives (issue 12, "Speed").

A chat of thousands of messages is read in one C-speed pass (``parse_chat``), its history is built
newest first only as deep as the budget reaches (``st_history``), the chat macros see only the
few messages they read plus the count of the others (``chat_omitted``), and world info gets a
``ChatTail`` built as deep as its deepest scan. Each test here runs the shortcut against the plain
path (the whole chat built, expanded and scanned) and asserts the same request, or pins that the
shortcut really leaves the unreachable part alone.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from st_support import marker, order, prompt

import tavernbox.worldinfo as worldinfo
from tavernbox import assemble_request
from tavernbox.errors import TemplateError
from tavernbox.macros import MacroContext, expand_macros
from tavernbox.assets import chats as st_chat
from tavernbox.sillytavern import chat as st_chat_stage, history as st_history, lore as st_lore
from tavernbox.assets.chats import ChatMessage, parse_chat
from tavernbox.sillytavern.history import macro_messages
from tavernbox.worldinfo import ChatTail, activate_world_info

CHAT_MACROS = ("id={{lastMessageId}} range={{allChatRange}} first={{firstDisplayedMessageId}} last=[{{lastMessage}}] "
               "user=[{{lastUserMessage}}] char=[{{lastCharMessage}}] idle={{idleDuration}} "
               "swipe={{lastSwipeId}}/{{currentSwipeId}}")
CARD = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "Mira", "description": "A keeper."}}


def preset(history: bool = True, **fields: Any) -> dict[str, Any]:
    prompts = (prompt("main", "MAIN " + CHAT_MACROS), *((marker("chatHistory"),) if history else ()),
               prompt("jailbreak", "JB {{lastUserMessage}}"))
    return {"prompts": list(prompts), "new_chat_prompt": "[Start]", **fields,
            "prompt_order": [{"character_id": 100001, "order": order(prompts)}]}


def message(i: int, role: str, **extra: Any) -> dict[str, Any]:
    text = f"m{i} the lamp burns {'beside the tower ' * (i % 5)}"
    if i % 7 == 3:  # a message with macros of its own, chat macros among them
        text += " saw {{lastMessageId}} after [{{lastCharMessage}}] as {{user}}\r\n"
    return {"role": role, "content": text, **extra}


def alternating(n: int) -> list[dict[str, Any]]:
    out = [message(i, "user" if i % 2 == 0 else "assistant") for i in range(n)]
    out[-40]["role"] = "system"  # a narrator message inside the reachable part
    out[-30]["force_avatar"], out[-30]["name"] = True, "Guest Star"
    out[10]["content"] = out[-20]["content"] = ""  # empty messages, one cut before placement
    return out


def users_after_one_reply(n: int) -> list[dict[str, Any]]:
    """The last assistant message far older than anything the budget reaches."""
    return [message(i, "assistant" if i == 2 else "user") for i in range(n)]


def request(messages: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"preset": fields.pop("preset", preset()), "card": CARD, "chat": {"messages": messages},
                            "budget": {"max_context": 900, "max_tokens": 100}}
    return {**base, **fields}


BOOK = {"name": "Lore", "entries": {
    "0": {"uid": 0, "key": ["tower"], "content": "Towers are old.", "position": 0},
    "1": {"uid": 1, "key": ["m5 "], "content": "FAR BACK", "position": 0},  # only in an old message
    "2": {"uid": 2, "key": ["lamp"], "content": "DEEP LAMP", "position": 1, "scanDepth": 30},
    "3": {"uid": 3, "key": ["lamp"], "content": "DELAYED", "position": 1, "delay": 700},
    "4": {"uid": 4, "key": ["lamp"], "content": "DELAYED LESS", "position": 1, "delay": 300},
}}


def plain(monkeypatch: pytest.MonkeyPatch) -> None:
    """Turn every shortcut off: the whole history built and placed, the whole chat in the macro
    contexts, the whole chat scanned."""
    monkeypatch.setattr(st_history, "PRE_CUT_MIN", 10**9)
    monkeypatch.setattr(st_chat_stage, "macro_messages", lambda roles: list(range(len(roles))))
    monkeypatch.setattr(worldinfo, "ChatTail", lambda length, newest: list(newest(length)))


def outcome(result: Any) -> dict[str, Any]:
    return {"messages": result.messages, "body": result.body,
            "budget": result.budget.to_dict() if result.budget is not None else None,
            "warnings": [(d.code, d.message) for d in result.warnings],
            "world_info": sorted((a.book, a.uid) for a in result.world_info.activated) if result.world_info else None,
            "provenance": result.provenance}


CASES: dict[str, dict[str, Any]] = {
    "alternating": request(alternating(600)),
    "names in content, a group": request(alternating(600), options={"names_behavior": 2},
                                         group={"members": ["Mira", "Guest Star"]}),
    "names as fields": request(alternating(600), options={"names_behavior": 1}),
    "the last reply far back": request(users_after_one_reply(600)),
    "no reply at all": request([message(i, "user") for i in range(600)]),
    "dry run with typed input": request(alternating(600), generation={"type": "normal", "input": "Now {{lastMessageId}}"},
                                        options={"dry_run": True}),
    "dry run, the last reply far back": request(users_after_one_reply(600), options={"dry_run": True},
                                                generation={"type": "normal", "input": "go"}),
    "continue": request(alternating(601)),
    "continue with prefill": request(alternating(601), preset=preset(continue_prefill=True),
                                     generation={"type": "continue"}),
    "regenerate": request(alternating(600), generation={"type": "regenerate"}),
    "swipe": request(alternating(600), generation={"type": "swipe"}),
    "impersonate": request(alternating(600), generation={"type": "impersonate"}),
    "no chat history": request(alternating(600), preset=preset(history=False)),
    "world info": request(alternating(600), books=[BOOK]),
    "world info, minimum activations": request(alternating(600), books=[BOOK],
                                               world_info={"world_info_min_activations": 3}),
    "world info on a swipe": request(alternating(600), books=[BOOK], generation={"type": "swipe"}),
    "long chat within budget": request(alternating(300), budget={"max_context": 1_000_000, "max_tokens": 100}),
    "long chat, dry run within budget": request(users_after_one_reply(300), options={"dry_run": True},
                                                budget={"max_context": 1_000_000, "max_tokens": 100}),
}
CASES["continue"]["generation"] = {"type": "continue"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_long_chat_assembles_as_its_whole_history_would(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = assemble_request(CASES[case])
    with monkeypatch.context() as m:
        plain(m)
        slow = assemble_request(CASES[case])
    assert outcome(fast) == outcome(slow)
    if "within budget" not in case and case != "no chat history":
        assert fast.budget is not None and fast.budget.dropped_messages[:100] == list(range(100))


def test_the_chat_macros_count_messages_the_budget_cut() -> None:
    """``{{lastMessageId}}`` counts the whole history, ``{{lastCharMessage}}`` finds a reply far
    older than the sent part; a chat message's own macros see the whole chat too."""
    result = assemble_request(request(users_after_one_reply(600)))
    main = result.messages[0]["content"]
    assert "id=599 range=0-599 first=0" in main
    assert "char=[m2 the lamp burns beside the tower beside the tower ]" in main
    assert "user=[m599 the lamp burns" in main
    sent = [m["content"] for m in result.messages if m["content"].startswith("m")]
    assert 0 < len(sent) < 100
    own = [t for t in sent if " saw " in t]
    assert own and all(t.endswith("saw 599 after [m2 the lamp burns beside the tower beside the tower ] as User\n")
                       for t in own)


def _spy(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[int]]:
    seen: dict[str, list[int]] = {"history": [], "scan": [], "macro_chat": []}
    real_item, real_from_dict = st_history.history_item, MacroContext.from_dict.__func__

    def item(index: int, *args: Any, **kwargs: Any) -> dict[str, Any]:
        seen["history"].append(index)
        return real_item(index, *args, **kwargs)

    def from_dict(cls: Any, data: Any) -> MacroContext:
        seen["macro_chat"].append(len(data.get("chat") or ()) if isinstance(data, dict) else 0)
        return real_from_dict(cls, data)

    real_tail = worldinfo.ChatTail

    def tail(length: int, newest: Any) -> Any:
        def counted(n: int) -> Any:
            seen["scan"].append(n)
            return newest(n)
        return real_tail(length, counted)

    monkeypatch.setattr(st_history, "history_item", item)
    monkeypatch.setattr(MacroContext, "from_dict", classmethod(from_dict))
    monkeypatch.setattr(worldinfo, "ChatTail", tail)
    monkeypatch.setattr(st_lore, "ChatTail", tail)  # imported with the module (issue 11's first-request cost)
    return seen


def test_only_the_reachable_part_of_a_long_chat_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _spy(monkeypatch)
    result = assemble_request(request(alternating(5000), books=[BOOK]))
    assert result.budget.dropped_messages[:10] == list(range(10))
    assert 0 < len(seen["history"]) < 300 and min(seen["history"]) > 4700
    assert seen["scan"] and max(seen["scan"]) <= 31  # the deepest scan (30) and the one a swipe drops
    assert seen["macro_chat"] and max(seen["macro_chat"]) <= 4


def test_empty_messages_count_in_the_reach(monkeypatch: pytest.MonkeyPatch) -> None:
    """The budget pass prices an empty message (its role and overhead), so thousands of them are cut
    before placement like any other."""
    seen = _spy(monkeypatch)
    messages = [{"role": "user" if i % 2 else "assistant", "content": ""} for i in range(20_000)]
    messages[-1]["content"] = "the last word"
    result = assemble_request(request(messages))
    assert [m["content"] for m in result.messages[-2:]] == ["the last word", "JB the last word"]
    assert len(seen["history"]) < 1000 and result.budget.dropped_messages[:3] == [0, 1, 2]


def test_a_chat_with_no_reply_or_one_far_back_gives_the_macros_a_few_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _spy(monkeypatch)
    assemble_request(request([message(i, "user") for i in range(5000)]))
    assert seen["macro_chat"] and max(seen["macro_chat"]) <= 4
    seen["macro_chat"].clear()
    assemble_request(request(users_after_one_reply(5000)))  # the reply 4,997 messages back
    assert seen["macro_chat"] and max(seen["macro_chat"]) <= 4 and len(seen["history"]) < 600


# -- the pieces ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("roles", "picks"), [
    ([], []),
    (["user"], [0]),
    (["assistant", "user", "assistant", "user"], [1, 2, 3]),  # the reply at 2, the users at 3 and 1
    (["user", "user", "assistant", "user", "user"], [2, 3, 4]),
    (["user", "assistant", "system", "system"], [0, 1, 3]),
    (["assistant"] * 5, [4]),
    (["system", "assistant", "user", "system"], [1, 2, 3]),
    (["assistant", *["user"] * 5000], [0, 4999, 5000]),  # a reply far back costs one message
])
def test_macro_messages(roles: list[str], picks: list[int]) -> None:
    assert macro_messages(roles) == picks


MACROS = CHAT_MACROS + " {{firstIncludedMessageId}}"
ROLE = st.sampled_from(["user", "assistant", "system"])
DATE = st.sampled_from([None, "2024-05-01T10:00:00Z", "June 19, 2023 2:20pm", "bad date"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(ROLE, st.text(alphabet="ab ", max_size=3), DATE), max_size=12))
def test_the_picked_messages_read_as_the_whole_chat(rows: list[tuple[str, str, str | None]]) -> None:
    chat = [{"role": r, "content": f"{i}:{t}", "name": f"n{i}", **({"send_date": d} if d else {})}
            for i, (r, t, d) in enumerate(rows)]
    now = "2024-05-02T10:00:00Z"
    whole = expand_macros(MACROS, {"chat": chat, "now": now}).text
    picks = macro_messages([m["role"] for m in chat])
    cut = expand_macros(MACROS, {"chat": [chat[i] for i in picks], "chat_omitted": len(chat) - len(picks),
                                 "now": now}).text
    assert cut == whole


def test_chat_omitted_counts_in_the_id_macros_and_is_checked() -> None:
    ctx = {"chat": [{"role": "user", "content": "hi"}], "chat_omitted": 41}
    assert expand_macros("{{lastMessageId}} {{allChatRange}} {{firstDisplayedMessageId}} {{lastMessage}}",
                         ctx).text == "41 0-41 0 hi"
    for bad in (-1, "3", True, 1.5):
        with pytest.raises(TemplateError) as err:
            MacroContext.from_dict({"chat": [], "chat_omitted": bad})
        assert err.value.code == "INPUT_INVALID" and err.value.path == "$.chat_omitted"


# -- world info's chat tail ------------------------------------------------------------------------

WI_ENTRIES = [
    {"uid": 1, "key": ["old"], "content": "OLD"},
    {"uid": 2, "key": ["mid"], "content": "MID", "scanDepth": 6},
    {"uid": 3, "key": ["new"], "content": "NEW", "delay": 9},
    {"uid": 4, "key": ["new"], "content": "NEW STICKY", "sticky": 2},
    {"uid": 5, "key": ["mid"], "content": "MID CHAINED"},
]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from(["old", "mid", "new", "x"]), min_size=0, max_size=14),
       st.integers(0, 5), st.integers(0, 3), st.sampled_from(["normal", "swipe", "continue"]), st.booleans())
def test_a_chat_tail_scans_as_the_whole_chat(words: list[str], depth: int, min_act: int, gen: str,
                                             names: bool) -> None:
    chat = [{"role": "user" if i % 2 else "assistant", "name": f"P{i}", "content": f"{w} {i}"}
            for i, w in enumerate(words)]
    conf = {"world_info_depth": depth, "world_info_min_activations": min_act, "world_info_budget": 100,
            "max_context": 1000, "world_info_include_names": names}
    books = {"entries": WI_ENTRIES}
    whole = activate_world_info(books, chat, conf, generation_type=gen)
    asked: list[int] = []

    def newest(n: int) -> list[dict[str, Any]]:
        asked.append(n)
        return chat[max(0, len(chat) - n):]

    tail = activate_world_info(books, ChatTail(len(chat), newest), conf, generation_type=gen)
    assert worldinfo.to_json(tail) == worldinfo.to_json(whole)
    if not min_act:
        assert asked and max(asked) <= max(depth, 6) + 1


def test_minimum_activations_on_a_long_chat_read_only_the_buffer() -> None:
    """Minimum activations walk back one message a pass until the chat's length; the scan buffer
    keeps the newest 1,000 messages, so a ``ChatTail`` is built that deep and no deeper."""
    chat = [{"role": "user", "name": "P", "content": f"m{i} {'far' if i == 300 else 'near' if i == 700 else 'x'}"}
            for i in range(1500)]
    books = {"entries": [{"uid": 1, "key": ["far"], "content": "FAR"}, {"uid": 2, "key": ["near"], "content": "NEAR"},
                         {"uid": 3, "key": ["m1499"], "content": "LAST"}]}
    for depth_max in (0, 400):
        conf = {"world_info_depth": 2, "world_info_min_activations": 3, "world_info_budget": 100,
                "max_context": 100_000, "world_info_min_activations_depth_max": depth_max}
        asked: list[int] = []

        def newest(n: int, asked: list[int] = asked) -> list[dict[str, Any]]:
            asked.append(n)
            return chat[len(chat) - n:]

        whole = activate_world_info(books, chat, conf)
        tail = activate_world_info(books, ChatTail(len(chat), newest), conf)
        assert worldinfo.to_json(tail) == worldinfo.to_json(whole)
        assert asked == [1001]
        contents = {a.content for a in whole.activated}
        assert "LAST" in contents and "FAR" not in contents and ("NEAR" in contents) == (depth_max == 0)


# -- reading the chat --------------------------------------------------------------------------------

FIELD = st.one_of(st.none(), st.booleans(), st.integers(-1, 2), st.sampled_from(["", "user", "assistant", "system",
                                                                                  "x", "Ann"]),
                  st.lists(st.integers(), max_size=1))
RAW = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system"]), "content": st.text(max_size=4)},
                          optional={"name": st.text(max_size=3), "force_avatar": st.booleans(),
                                    "id": st.text(min_size=1, max_size=3)}),
    st.dictionaries(st.sampled_from(["role", "content", "name", "force_avatar", "id", "txt"]), FIELD, max_size=5),
    FIELD,
)


def _one_by_one(messages: list[Any]) -> Any:
    try:
        return tuple(st_chat._message(m, f"$.chat.messages[{i}]") for i, m in enumerate(messages))
    except TemplateError as exc:
        return (exc.code, exc.path, exc.message)


@settings(max_examples=300, deadline=None)
@given(st.lists(RAW, max_size=6))
def test_reading_a_chat_in_bulk_gives_what_reading_it_message_by_message_gives(messages: list[Any]) -> None:
    try:
        got: Any = parse_chat({"messages": messages}, path="$.chat").messages
    except TemplateError as exc:
        got = (exc.code, exc.path, exc.message)
    assert got == _one_by_one(messages)
    if isinstance(got, tuple) and got and isinstance(got[0], ChatMessage):
        assert all(type(m) is ChatMessage for m in got)


def test_a_bad_message_deep_in_a_long_chat_is_named_by_its_path() -> None:
    messages = [{"role": "user", "content": f"m{i}"} for i in range(5000)]
    messages[4321] = {"role": "user", "content": 7}
    with pytest.raises(TemplateError) as err:
        assemble_request({"preset": preset(), "chat": {"messages": messages}})
    assert err.value.code == "REQUEST_INVALID" and err.value.path == "$.chat.messages[4321].content"


def test_a_plain_chat_takes_the_bulk_path_with_every_field() -> None:
    messages = [{"role": "user", "content": "a"}, {"role": "assistant", "content": None, "name": "Mira"},
                {"role": "system", "id": "n1", "force_avatar": True}, {"role": "user", "content": "b", "name": None}]
    read = st_chat._checked_in_bulk(messages)
    assert read == (ChatMessage("user", "a"), ChatMessage("assistant", "", "Mira"),
                    ChatMessage("system", "", None, True, "n1"), ChatMessage("user", "b"))
    assert read == _one_by_one(messages)
    for bad in ({"role": "user", "content": 1}, {"role": "user", "id": ""}, {"role": "bot"}, {"content": "x"},
                {"role": "user", "extra": 1}, {"role": ["user"]}, {"role": "user", "force_avatar": 1}):
        assert st_chat._checked_in_bulk([*messages, bad]) is None


LINES = st.sampled_from([
    '{"user_name": "Ann", "character_name": "Mira", "chat_metadata": {"world_info": "Lore"}}',
    '{"name": "Ann", "is_user": true, "mes": "hi", "extra": {}, "swipes": ["hi"], "swipe_id": 0}',
    '{"name": "Mira", "is_user": false, "mes": "hello \\u00e9", "extra": {"api": "x", "temp": 0.7}}',
    '{"name": "Mira", "is_user": false, "mes": "\\ud83d\\ude00 a pair"}',
    '{"name": "X", "mes": "lone \\ud800"}',
    '{"name": "N", "mes": "narrates", "extra": {"type": "narrator"}}',
    '{"name": "H", "mes": "hidden", "is_system": true}',
    '{"mes": "big", "extra": {"n": 1e999}}',
    '{"mes": "nan", "extra": {"n": NaN}}',
    '{"mes": "broken"', '{"mes": 5}', '[1, 2]', '"text"', '{"mes": "a"} {"mes": "b"}', '   ', '',
    '{"mes": "trailing"}   ', '\t{"mes": "leading tab"}', '[' * 3000 + ']' * 3000,
])


def _strictly(text: str) -> Any:
    try:
        return st_chat.parse_chat_jsonl(text)
    except TemplateError as exc:
        return (exc.code, exc.path, exc.line, exc.column, exc.message)


@settings(max_examples=300, deadline=None)
@given(st.lists(LINES, min_size=1, max_size=6))
def test_an_export_read_through_one_decoder_reads_as_line_by_line(lines: list[str]) -> None:
    text = "\n".join(lines)
    fast = _strictly(text)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(st_chat, "_lines_in_bulk", lambda text, lines: None)
        slow = _strictly(text)
    assert fast == slow


def test_a_plain_export_takes_the_one_decoder_path() -> None:
    text = '{"user_name": "Ann"}\n{"name": "Ann", "is_user": true, "mes": "hi", "extra": {"t": 0.5}}\n'
    lines = [(1, '{"user_name": "Ann"}'), (2, text.splitlines()[1])]
    assert st_chat._lines_in_bulk(text, lines) == [(1, {"user_name": "Ann"}),
                                                   (2, {"name": "Ann", "is_user": True, "mes": "hi",
                                                        "extra": {"t": 0.5}})]
    for bad in ('{"n": NaN}', '{"n": 1e999}', '{"s": "\\udc00"}', '{"a": 1} 2'):
        assert st_chat._lines_in_bulk(bad, [(1, bad)]) is None


def test_the_budget_benchmark_runs_and_reports_the_ratio() -> None:
    """``benchmarks/bench_budget.py`` (issue 12's figure), at small sizes: both shapes, the ratio, and
    one new message costing the two counts its text needs."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_budget.py"
    out = subprocess.run([sys.executable, str(script), "1", "--sizes=20,400", "--json"], capture_output=True,
                         text=True, check=True, timeout=600).stdout
    if out.startswith("skipped"):
        pytest.skip(out)
    report = json.loads(out)
    for shape in ("short", "long"):
        row = report[shape]
        assert row["20_cpu_ms"] > 0 and row["400_cpu_ms"] > 0 and row["ratio"] > 0
        assert row["dropped"][1] > 0 or shape == "short"
    assert report["long"]["sent"][1] < 400 and report["counting"]["new_counts_for_one_new_message"] == 2
