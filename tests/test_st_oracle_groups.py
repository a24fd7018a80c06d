"""Golden tests: group chats as SillyTavern 1.18.0 sent them, byte for byte.

Each case of ``golden/st_oracle/group_requests.jsonl`` was recorded by ``group_scenarios.py``, which
drives SillyTavern itself: the members' cards imported, the group created through its
``/api/groups/create`` with the case's generation mode (swap, append, append_disabled), join prefix
and suffix and muted members, the chat put in place, and a reply asked of one member
(``generate('normal', {force_chid})``). Here the same case becomes a request file with a ``group``
and ``assemble_request`` must send the same messages. The rules these cases pin are SillyTavern's
``getGroupCharacterCardsLazy`` (joined fields), ``getGroupDepthPrompts`` (members' depth prompts),
``getCharacterLore`` (only the replying member's lorebook) and ``parseExampleIntoIndividual``
(example messages named in a group).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from st_oracle_support import GOLDEN, scenarios_module

from tavernbox import assemble_request

GROUP_REQUESTS = GOLDEN / "group_requests.jsonl"


def group_cases(shared: Any = None) -> list[dict[str, Any]]:
    """The recorded group requests (``golden/st_oracle/group_requests.jsonl``)."""
    lines = GROUP_REQUESTS.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]
MODES = ("swap", "append", "append_disabled")


def group_request(case: dict[str, Any], resolve: Any) -> dict[str, Any]:
    """The request file a user would write for a recorded group case."""
    sc = case["scenario"]
    cards = [resolve(c) for c in sc["members"]]
    names = [(c.get("data") or c)["name"] for c in cards]
    request: dict[str, Any] = {
        "preset": resolve(sc["preset"]),
        "card": cards[sc["speaker"]],
        "chat": {"messages": sc["chat"], "scenario": sc.get("chat_scenario") or "",
                 "mes_example": sc.get("chat_mes_example") or ""},
        "user": {"name": sc["user_name"], "persona": {"description": sc["persona_description"]}},
        # the driver presses generate with an empty send box; time macros read the recording time
        "generation": {"type": sc.get("generation_type") or "normal", "input": ""},
        "options": {"now": case["recorded_at"]},
        "group": {"members": names, "cards": cards, "generation_mode": MODES[sc["generation_mode"]],
                  "join_prefix": sc["join_prefix"], "join_suffix": sc["join_suffix"],
                  "disabled_members": [names[i] for i in sc["disabled"]]},
    }
    # every member's lorebook is given; which are read is the rule under test
    books = [{**book, "name": name} for name, book in (sc.get("worlds") or {}).items()]
    if any(((c.get("data") or c).get("extensions") or {}).get("world") == "Eldoria" for c in cards):
        # SillyTavern ships the world Eldoria (the corpus copy), so a card linking it finds it
        books.append({**resolve({"corpus": "worldbooks/st-default-eldoria.json"}), "name": "Eldoria"})
    if books:
        request["books"] = books
    return request


def test_the_group_goldens_are_present() -> None:
    assert len(group_cases()) >= 6, "tests/golden/st_oracle/group_requests.jsonl holds the recorded group requests"
    assert {c["scenario"]["generation_mode"] for c in group_cases()} == {0, 1, 2}


@pytest.mark.cases("case", group_cases, ids=lambda c: c["id"])
def test_sillytavern_sends_the_same_group_messages(case: dict[str, Any], shared: Any) -> None:
    shared("corpora")  # the scenarios name their cards and preset in ../shared/corpora
    request = group_request(case, scenarios_module().resolve)
    got = assemble_request(request).messages
    assert got == case["messages"]
