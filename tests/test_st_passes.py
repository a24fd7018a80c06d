"""Text passes (``tavernbox.sillytavern.passes``): each kind of text reaches a pass once, with its facts,
at the point SillyTavern's extensions rewrite it; with no pass the request is what it was.

The request is the bundled sample (``corpora/sample-request.json``: preset, card, book, export chat,
persona, Author's Note), so every kind of text is present.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tavernbox.errors import TemplateError
from tavernbox.sillytavern import Text, TextPass, assemble_request, build_front, chat_completion
from tavernbox.sillytavern.passes import TEXT_KINDS, run_passes

CORPORA = Path(__file__).resolve().parent.parent / "corpora"


def sample(**changes: Any) -> dict[str, Any]:
    request = json.loads((CORPORA / "sample-request.json").read_text(encoding="utf-8"))
    request.update(changes)
    return request


def run(request: dict[str, Any], passes: list[TextPass]) -> Any:
    return assemble_request(request, base_dir=CORPORA, passes=passes)


def recorder(kinds: tuple[str, ...] = TEXT_KINDS) -> tuple[TextPass, list[Text]]:
    seen: list[Text] = []

    def apply(text: Text) -> str:
        seen.append(text)
        return text.text

    return TextPass("record", frozenset(kinds), apply), seen  # type: ignore[arg-type]


def marker(kind: str, mark: str = "«P»") -> TextPass:
    return TextPass("mark", frozenset({kind}), lambda t: mark + t.text)  # type: ignore[arg-type]


def sent_text(result: Any) -> str:
    return "\n".join(str(m["content"]) for m in result.messages)


def test_no_pass_and_an_identity_pass_send_the_same_bytes() -> None:
    plain = run(sample(), [])
    identity, seen = recorder()
    passed = run(sample(), [identity])
    assert json.dumps(plain.to_dict(), sort_keys=True) == json.dumps(
        {**passed.to_dict(), "provenance_of": "messages"}, sort_keys=True)
    assert {t.kind for t in seen} == set(TEXT_KINDS)  # every kind of text was handed over


def test_chat_messages_carry_sillytaverns_depth() -> None:
    record, seen = recorder(("chat_message",))
    run(sample(), [record])
    chat = [t for t in seen if t.kind == "chat_message"]
    n = len(chat)
    assert [t.facts["depth"] for t in chat] == list(range(n - 1, -1, -1))  # 0 = the newest
    assert [t.facts["index"] for t in chat] == list(range(n))
    assert {t.facts["is_user"] for t in chat} == {True, False}
    assert all(t.facts["is_user"] == (t.facts["role"] == "user") for t in chat)


def test_continue_shifts_every_depth_down_by_one() -> None:
    record, seen = recorder(("chat_message",))
    run(sample(generation={"type": "continue"}), [record])
    depths = [t.facts["depth"] for t in seen]
    assert depths[-1] == -1 and depths[-2] == 0  # the continued message is at -1, as ``Generate`` counts it


@pytest.mark.parametrize("kind", ["chat_message", "world_info_entry", "preset_prompt", "card_field", "persona",
                                  "author_note", "final_message"])
def test_each_kind_rewrites_what_is_sent(kind: str) -> None:
    plain = run(sample(), [])
    marked = run(sample(), [marker(kind)])
    assert "«P»" not in sent_text(plain)
    assert "«P»" in sent_text(marked), kind


def test_world_info_entries_carry_book_and_uid() -> None:
    record, seen = recorder(("world_info_entry",))
    run(sample(), [record])
    entries = [t for t in seen if t.kind == "world_info_entry"]
    assert entries and all(t.facts["book"] and t.facts["uid"] is not None for t in entries)


def test_passes_run_in_order_each_reading_the_last_result() -> None:
    first = TextPass("first", frozenset({"persona"}), lambda t: t.text + "[1]")
    second = TextPass("second", frozenset({"persona"}), lambda t: t.text.replace("[1]", "[2]"))
    assert "[2]" in sent_text(run(sample(), [first, second]))
    assert "[1]" in sent_text(run(sample(), [second, first]))


def test_the_front_is_shared_and_the_back_end_places_it() -> None:
    front = build_front(sample(), base_dir=CORPORA)
    assert front.lore.activation is not None and front.history
    assert chat_completion(front).messages == run(sample(), []).messages


def test_a_pass_that_returns_no_string_is_refused() -> None:
    with pytest.raises(TypeError, match="'broken'"):
        run_passes([TextPass("broken", frozenset({"persona"}), lambda t: None)], "persona", "x")  # type: ignore
    with pytest.raises(TemplateError):  # the request itself is still checked first
        run({"preset": 5}, [])


def test_a_requests_own_passes_run_first_and_a_builder_may_decline(monkeypatch: pytest.MonkeyPatch) -> None:
    from tavernbox.sillytavern import passes

    assert passes._builders() == []  # no pass module ships yet: nothing is looked up per request
    seen: list[str] = []
    own = TextPass("regex", frozenset({"persona"}), lambda t: seen.append("regex") or t.text + "[regex]")
    monkeypatch.setattr(passes, "_builders", lambda: [("regex", lambda loaded: own), ("templates", lambda loaded: None)])
    caller = TextPass("caller", frozenset({"persona"}), lambda t: seen.append("caller") or t.text.replace("[regex]", "[both]"))
    front = build_front(sample(), base_dir=CORPORA, passes=[caller])
    assert [p.name for p in front.loaded.passes] == ["regex", "caller"]
    assert seen == ["regex", "caller"] and front.texts.persona_text.endswith("[both]")
