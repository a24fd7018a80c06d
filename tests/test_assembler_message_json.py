"""The remembered per-message serialisation gives exactly the pinned JSON form of a whole list.

The assembler measures and hashes messages from per-message texts remembered by content
(:func:`tavernbox.assembler.limits.message_json`); these tests pin that the shortcut never
changes a byte count or a hash, including the cases a content key could confuse."""

from __future__ import annotations

from typing import Any

import pytest

from tavernbox.assembler.identity import content_hash, messages_hash
from tavernbox.assembler.limits import dumps, json_size, message_json, messages_json

CASES: list[list[Any]] = [
    [],
    [{"id": "a", "role": "user", "content": "plain"}],
    [{"id": "a", "role": "user", "content": "lone \ud800 surrogate and é"}, {"id": "b", "role": "system", "content": None}],
    [{"id": "t", "role": "assistant", "content": None, "tool_calls": [{"id": "c", "name": "roll", "arguments": "{}"}]}],
    [{"id": "p", "role": "user", "content": [{"type": "text", "text": "part"}]}],
    # equal as Python keys (1 == True == 1.0) but not as JSON: never served from the table
    [{"id": "n", "v": 1}, {"id": "n", "v": True}, {"id": "n", "v": 1.0}],
]


@pytest.mark.parametrize("messages", CASES)
def test_messages_json_is_the_pinned_form_of_the_list(messages: list[Any]) -> None:
    assert messages_json(messages) == (dumps(messages), json_size(messages))
    assert messages_hash(messages) == content_hash(messages)


def test_a_remembered_message_is_served_by_content_not_identity() -> None:
    first = {"id": "m", "role": "user", "content": "same text"}
    text, size = message_json(first)
    again = message_json(dict(first))  # a new dict with the same content
    assert again == (text, size) == (dumps(first), json_size(first))
    changed = message_json({**first, "content": "other text"})
    assert changed[0] == dumps({**first, "content": "other text"})


def test_numbers_and_booleans_are_not_confused() -> None:
    assert message_json({"id": "n", "v": True})[0] == '{"id":"n","v":true}'
    assert message_json({"id": "n", "v": 1})[0] == '{"id":"n","v":1}'


def test_a_remembered_snapshot_id_is_the_derived_id() -> None:
    from tavernbox.assembler.identity import derived_id
    from tavernbox.assembler.projection import _carrier_id

    text = "a long system snapshot " * 2000
    expected = derived_id("system-projection", ["a", "b"], text)
    assert _carrier_id(("a", "b"), text) == expected
    assert _carrier_id(("a", "b"), "".join(["a long system snapshot "] * 2000)) == expected  # equal text, new object
    assert _carrier_id(("a",), text) != expected


def test_a_long_message_is_remembered_and_exact() -> None:
    message = {"id": "s", "role": "system", "content": "x\u00e9\n" * 40000}  # above the short-text limits
    assert message_json(message) == (dumps(message), json_size(message))
    assert message_json(dict(message)) == (dumps(message), json_size(message))
