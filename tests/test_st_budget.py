"""Context budget and generation types as SillyTavern builds them (``populateChatCompletion``).

Each test names the SillyTavern 1.18 function whose rule it pins.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from st_support import marker, order, prompt

from tavernbox import assemble_request
from tavernbox.errors import TemplateError
from tavernbox.tokenizers import MessageCounter, get_tokenizer


def preset(*prompts: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"prompts": list(prompts), "new_chat_prompt": "", "new_example_chat_prompt": "[Example Chat]", **fields,
            "prompt_order": [{"character_id": 100001, "order": order(prompts)}]}


EXAMPLES = "<START>\n{{user}}: Hi there.\n{{char}}: Hello.\n<START>\n{{user}}: Second?\n{{char}}: Yes, second."
CARD = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "Mira", "mes_example": EXAMPLES}}
BASE = preset(prompt("main", "MAIN"), marker("dialogueExamples"), marker("chatHistory"), prompt("jailbreak", "JB"))


def chat(n: int) -> dict[str, Any]:
    return {"messages": [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message number {i}"}
                         for i in range(n)]}


def run(n: int = 10, **fields: Any) -> Any:
    return assemble_request({"preset": BASE, "card": CARD, "chat": chat(n), **fields})


def texts(result: Any) -> list[str]:
    return [m["content"] for m in result.messages]


def cost(messages: list[dict[str, Any]]) -> int:
    counter = MessageCounter(get_tokenizer("o200k"))
    return 3 + sum(counter.message(m) for m in messages)


# -- the budget ------------------------------------------------------------------------------------


def test_everything_is_sent_while_it_fits() -> None:
    result = run(budget={"max_context": 100_000, "max_tokens": 100})
    assert [t for t in texts(result) if t.startswith("message")] == [f"message number {i}" for i in range(10)]
    assert result.budget is None or not result.budget.dropped_messages


def test_history_is_cut_oldest_first_and_reported() -> None:
    """``populateChatHistory``: newest first, stop at the first message that does not fit."""
    result = run(40, budget={"max_context": 200, "max_tokens": 50})
    kept = [t for t in texts(result) if t.startswith("message")]
    assert kept and kept == [f"message number {i}" for i in range(40 - len(kept), 40)]
    report = result.budget
    assert report.dropped_messages == list(range(40 - len(kept)))
    assert report.dropped_tokens > 0 and report.used <= report.budget


def test_examples_go_whole_dialogues_after_history_unless_pinned() -> None:
    """``populateDialogueExamples``: a dialogue and its separator fit together or not at all."""
    gradual = run(30, budget={"max_context": 260, "max_tokens": 50})
    assert "Hello." not in texts(gradual) and gradual.budget.dropped_dialogues == [0, 1]
    pinned = run(30, budget={"max_context": 260, "max_tokens": 50, "examples": "keep"})
    assert "Hello." in texts(pinned) and "Yes, second." in texts(pinned)
    assert len([t for t in texts(pinned) if t.startswith("message")]) < \
        len([t for t in texts(gradual) if t.startswith("message")])
    disabled = run(2, budget={"examples": "disabled"})
    assert "Hello." not in texts(disabled) and "[Example Chat]" not in texts(disabled)


def test_prompts_that_must_go_in_but_do_not_fit_are_an_error() -> None:
    with pytest.raises(TemplateError) as err:
        assemble_request({"preset": preset(prompt("main", "word " * 500), marker("chatHistory")), "chat": chat(2),
                          "budget": {"max_context": 300, "max_tokens": 100}})
    assert err.value.code == "ST_CONTEXT_TOO_SMALL"


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 30), context=st.integers(120, 600), pinned=st.booleans())
def test_budget_properties(n: int, context: int, pinned: bool) -> None:
    """Never over budget; the kept history is the newest contiguous suffix; nothing cut while all fits."""
    try:
        result = run(n, budget={"max_context": context, "max_tokens": 40, "examples": "keep" if pinned else "gradual"})
    except TemplateError as exc:
        assert exc.code == "ST_CONTEXT_TOO_SMALL"
        return
    assert cost(result.messages) <= context - 40
    kept = [int(t.rsplit(" ", 1)[1]) for t in texts(result) if t.startswith("message number")]
    assert kept == list(range(n - len(kept), n))
    full = run(n, budget={"max_context": 1_000_000, "max_tokens": 40})
    if cost(full.messages) <= context - 40:
        assert texts(result) == texts(full)


def test_a_long_chat_is_recounted_only_for_its_new_messages() -> None:
    from tavernbox.sillytavern import budget as st_budget

    run(200, budget={"max_context": 2000, "max_tokens": 100})
    counter = st_budget._counters["o200k"]
    before = counter.misses
    assemble_request({"preset": BASE, "card": CARD, "budget": {"max_context": 2000, "max_tokens": 100},
                      "chat": {"messages": chat(200)["messages"] + [{"role": "user", "content": "one more"}]}})
    assert counter.misses - before <= 3  # the new message (and what moved next to it), not the 200


# -- generation types ------------------------------------------------------------------------------


ENDS_ASSISTANT = {"messages": [{"role": "user", "content": "U1"}, {"role": "assistant", "content": "A1"}]}
FULL = preset(prompt("main", "MAIN"), marker("chatHistory"), prompt("jailbreak", "JB"),
              continue_nudge_prompt="[Continue: {{lastChatMessage}}]", impersonation_prompt="[Write as {{user}}]")


def gen(kind: str, chat_: dict[str, Any] = ENDS_ASSISTANT, **fields: Any) -> list[tuple[str, str]]:
    extra = fields.pop("preset_fields", {})
    result = assemble_request({"preset": {**FULL, **extra}, "card": CARD, "chat": chat_,
                               "generation": {"type": kind, **fields}, "user": {"name": "Ash"}})
    return [(m["role"], m["content"]) for m in result.messages]


def test_continue_moves_the_last_message_after_everything_with_the_nudge() -> None:
    """``populateChatHistory`` (continue, no prefill): the message and the nudge go last."""
    assert gen("continue") == [("system", "MAIN"), ("user", "U1"), ("system", "JB"), ("assistant", "A1"),
                               ("system", "[Continue: A1]")]


def test_continue_with_prefill_sends_the_message_last_without_a_nudge() -> None:
    """``populateChatCompletion``: ``continue_prefill`` makes the message itself the last control prompt."""
    assert gen("continue", preset_fields={"continue_prefill": True}) == [
        ("system", "MAIN"), ("user", "U1"), ("system", "JB"), ("assistant", "A1")]


def test_impersonate_adds_the_impersonation_prompt_last() -> None:
    assert gen("impersonate")[-1] == ("system", "[Write as Ash]")


def test_regenerate_and_swipe_leave_out_the_message_being_replaced() -> None:
    for kind in ("regenerate", "swipe"):
        assert gen(kind) == [("system", "MAIN"), ("user", "U1"), ("system", "JB")]


def test_quiet_prompt_is_the_last_message() -> None:
    assert gen("quiet", quiet_prompt="Summarize.")[-1] == ("system", "Summarize.")


def test_send_if_empty_after_a_trailing_assistant_message() -> None:
    assert gen("normal", preset_fields={"send_if_empty": "[Go on.]"})[-2:] == [("user", "[Go on.]"), ("system", "JB")]
    ends_user = {"messages": [{"role": "user", "content": "U1"}]}
    assert ("user", "[Go on.]") not in gen("normal", ends_user, preset_fields={"send_if_empty": "[Go on.]"})


def test_injection_triggers_pick_prompts_by_generation_type() -> None:
    triggered = preset(prompt("main", "MAIN"), prompt("only-imp", "IMP ONLY", injection_trigger=["impersonate"]),
                       marker("chatHistory"), impersonation_prompt="[imp]")
    normal = assemble_request({"preset": triggered, "chat": ENDS_ASSISTANT})
    imp = assemble_request({"preset": triggered, "chat": ENDS_ASSISTANT, "generation": {"type": "impersonate"}})
    assert "IMP ONLY" not in texts(normal) and "IMP ONLY" in texts(imp)


def test_claude_prefill_and_impersonation_are_request_fields() -> None:
    result = assemble_request({"preset": {**FULL, "assistant_prefill": "Sure,", "assistant_impersonation": "As Ash:"},
                               "chat": ENDS_ASSISTANT, "options": {"target": "claude"},
                               "generation": {"type": "impersonate"}})
    assert result.request_fields["assistant_prefill"] == "Sure,"
    assert result.request_fields["assistant_impersonation"] == "As Ash:"


def test_a_huge_chat_is_cut_before_placement_in_bounded_memory(tmp_path: Any) -> None:
    """Issue 14: a 100,000-message chat; only what a budget could reach is placed. Memory is
    asserted loosely (2x the target of 20x the file plus 100 MB) in a fresh process."""
    import json
    import subprocess
    import sys

    path = tmp_path / "chat.json"
    path.write_text(json.dumps({"messages": [
        {"role": "user" if i % 2 else "assistant", "content": f"Message {i}: the king walks to the gate."}
        for i in range(100_000)]}))
    script = (
        "import json, sys\n"
        "from tavernbox.testing.memory import peak_rss_kib\n"
        "from tavernbox import assemble_request\n"
        "p = {'prompts': [{'identifier': 'main', 'system_prompt': True, 'content': 'MAIN'},"
        " {'identifier': 'chatHistory', 'marker': True, 'system_prompt': True}], 'new_chat_prompt': ''}\n"
        "r = assemble_request({'preset': p, 'chat': sys.argv[1]})\n"
        "print(json.dumps({'sent': len(r.messages), 'dropped': len(r.budget.dropped_messages),"
        " 'last': r.messages[-1]['content'], 'rss': peak_rss_kib() * 1024}))\n")
    out = json.loads(subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True,
                                    check=True, timeout=300).stdout)
    assert out["last"] == "Message 99999: the king walks to the gate."
    assert out["sent"] + out["dropped"] == 100_000 + 1  # MAIN plus the kept chat; every dropped one reported
    assert out["rss"] <= 2 * (20 * path.stat().st_size + 100 * 2**20)
