"""The chat macros in preset prompts read the chat as SillyTavern stores it (issue 11).

SillyTavern 1.18's ``{{lastMessage}}``, ``{{lastUserMessage}}`` and ``{{lastCharMessage}}`` return
``chat[i].mes`` (``chat-macros.js``): the stored text, not the history message as sent (no
``names_behavior`` prefix, macros inside left as written), read from the whole ``chat`` array
whatever part of it is sent. The recorded requests ``chat-macros-preset-*`` in
``golden/st_oracle/requests.jsonl`` pin the short-chat cases against SillyTavern itself; these
tests pin what the oracle cannot drive (a dry run) and long chats, whose history is cut before
placement (the macros get, for any chat, only the messages they read plus the count of the others).
"""

from __future__ import annotations

from typing import Any

import pytest
from st_support import marker, order, prompt

from tavernbox import assemble_request
from tavernbox.macros import expand_macros

PROBE = "LM=[{{lastMessage}}] LU=[{{lastUserMessage}}] LC=[{{lastCharMessage}}] ID=[{{lastMessageId}}] " \
        "R=[{{allChatRange}}]"
CARD = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "Mira", "description": "A keeper."}}


def preset(**fields: Any) -> dict[str, Any]:
    prompts = (prompt("main", PROBE), marker("chatHistory"))
    return {"prompts": list(prompts), "new_chat_prompt": "[Start]", **fields,
            "prompt_order": [{"character_id": 100001, "order": order(prompts)}]}


def chat(n: int) -> list[dict[str, Any]]:
    """``n`` messages alternating user / assistant, ending with an assistant message, each holding
    a macro and its index."""
    return [{"role": "assistant" if (n - 1 - i) % 2 == 0 else "user", "content": f"m{i} {{{{char}}}}"}
            for i in range(n)]


def probe(request: dict[str, Any]) -> str:
    return assemble_request({"card": CARD, **request}).messages[0]["content"]


@pytest.mark.parametrize("n", [6, 600])  # the whole chat, and the few messages a long chat hands over
def test_a_dry_run_reads_the_chat_without_the_unsent_input(n: int) -> None:
    """SillyTavern's dry run (``Generate(..., dryRun)``) never sends what was typed, so its ``chat``
    ends with the stored messages; a real run has stored the input first (``sendMessageAsUser``)."""
    request = {"preset": preset(), "chat": {"messages": chat(n)}, "generation": {"type": "normal", "input": "typed"},
               "budget": {"max_context": 2000, "max_tokens": 100}}
    dry = probe({**request, "options": {"dry_run": True}})
    assert dry == (f"LM=[m{n - 1} {{{{char}}}}] LU=[m{n - 2} {{{{char}}}}] LC=[m{n - 1} {{{{char}}}}] "
                   f"ID=[{n - 1}] R=[0-{n - 1}]")
    sent = probe(request)
    assert sent == f"LM=[typed] LU=[typed] LC=[m{n - 1} {{{{char}}}}] ID=[{n}] R=[0-{n}]"


def test_a_dry_run_sends_the_stored_chat_whole() -> None:
    """A dry run leaves out only what was typed: a stored last user message is sent and read, and
    ``send_if_empty`` (which ``Generate`` would store first) is sent only where ``populateChatHistory``
    adds it, after an assistant message, and never read by the macros."""
    base = {"preset": preset(send_if_empty="[Go on.]"), "options": {"dry_run": True}}
    ends_user = {"messages": [{"role": "assistant", "content": "hi"}, {"role": "user", "content": "stored"}]}
    ends_reply = {"messages": [{"role": "assistant", "content": "hi"}]}
    start = "LM=[{}] LU=[{}] LC=[hi] ID=[{}] R=[0-{}]"

    def sent(chat: dict[str, Any], typed: str) -> list[str]:
        got = assemble_request({"card": CARD, **base, "chat": chat, "generation": {"type": "normal", "input": typed}})
        return [m["content"] for m in got.messages]

    for typed in ("", "typed"):
        assert sent(ends_user, typed) == [start.format("stored", "stored", 1, 1), "[Start]", "hi", "stored"]
    assert sent(ends_reply, "") == [start.format("hi", "", 0, 0), "[Start]", "hi", "[Go on.]"]
    assert sent(ends_reply, "typed") == [start.format("hi", "", 0, 0), "[Start]", "hi"]


@pytest.mark.parametrize("n", [6, 600])
def test_a_swipe_keeps_the_swiped_message_counted_but_unread(n: int) -> None:
    """The swiped message stays in ``chat`` with an unfinished swipe: ``getLastMessageId`` skips it,
    ``{{allChatRange}}`` (``chat.length``) counts it."""
    got = probe({"preset": preset(), "chat": {"messages": chat(n)}, "generation": {"type": "swipe"},
                 "budget": {"max_context": 2000, "max_tokens": 100}})
    assert got == (f"LM=[m{n - 2} {{{{char}}}}] LU=[m{n - 2} {{{{char}}}}] LC=[m{n - 3} {{{{char}}}}] "
                   f"ID=[{n - 2}] R=[0-{n - 1}]")


@pytest.mark.parametrize("n", [6, 600])
def test_continue_with_prefill_and_no_history_still_read_the_whole_chat(n: int) -> None:
    messages = {"messages": chat(n)}
    budget = {"max_context": 2000, "max_tokens": 100}
    whole = (f"LM=[m{n - 1} {{{{char}}}}] LU=[m{n - 2} {{{{char}}}}] LC=[m{n - 1} {{{{char}}}}] "
             f"ID=[{n - 1}] R=[0-{n - 1}]")
    prefill = assemble_request({"card": CARD, "preset": preset(continue_prefill=True), "chat": messages,
                                "generation": {"type": "continue"}, "options": {"names_behavior": 2},
                                "budget": budget}).messages
    assert prefill[0]["content"] == whole
    # the prefilled message is made before the history is prepared: its macros go out as written
    assert prefill[-1] == {"role": "assistant", "content": f"Mira: m{n - 1} {{{{char}}}}"}
    no_history = preset()
    no_history["prompt_order"][0]["order"] = [o for o in no_history["prompt_order"][0]["order"]
                                              if o["identifier"] != "chatHistory"]
    got = assemble_request({"card": CARD, "preset": no_history, "chat": messages, "budget": budget}).messages
    assert [m["content"] for m in got] == [whole]


def test_the_first_message_is_read_with_its_macros_substituted() -> None:
    """``Generate`` substitutes ``chat[0].mes`` in place before building the prompts (recorded:
    ``chat-macros-preset-first-message``); a long chat whose first message is one the macros read
    gets the same."""
    messages = [{"role": "assistant", "content": "hello from {{char}}"}] + \
        [{"role": "user", "content": f"u{i}"} for i in range(1, 400)]
    got = probe({"preset": preset(), "chat": {"messages": messages}, "budget": {"max_context": 2000, "max_tokens": 100}})
    assert got == "LM=[u399] LU=[u399] LC=[hello from Mira] ID=[399] R=[0-399]"


def test_last_message_id_skips_an_unfinished_swipe_also_after_omitted_messages() -> None:
    swiping = {"role": "assistant", "content": "old", "swipes": ["old"], "swipe_id": 1}
    assert expand_macros("{{lastMessageId}} {{allChatRange}}", {"chat": [{"role": "user", "content": "a"}, swiping],
                                                                 "chat_omitted": 10}).text == "10 0-11"
    assert expand_macros("{{lastMessageId}}", {"chat": [swiping], "chat_omitted": 3}).text == "2"
    assert expand_macros("[{{lastMessageId}}]", {"chat": [swiping]}).text == "[]"
