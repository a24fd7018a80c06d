"""Golden tests: tavernbox sends exactly what SillyTavern 1.18.0 sent for the same inputs.

Each case of ``golden/st_oracle/requests.jsonl`` was recorded by driving SillyTavern itself (see
``golden/st_oracle/README.md``): the preset, card, world book, chat, persona and settings of the
scenario went in, and the ``messages`` its chat-completion request carried came out. Here the same
scenario becomes a request file (:mod:`st_oracle_support`) and ``assemble_request`` must return the
same messages: roles, names and contents, byte for byte.

Cases whose prompts draw random values (``{{random}}``, ``{{roll}}``, ``{{pick}}``) cannot repeat
SillyTavern's draws; for them each such macro is replaced, in the preset, by a marker, and every
marker in tavernbox's output matches any text in SillyTavern's (the rest must still be exact).
Time macros use the time the case was recorded (``options.now``).
"""

from __future__ import annotations

from typing import Any

import pytest
from st_oracle_support import assert_sends_the_recorded_messages, load_cases, scenarios_module, to_request


@pytest.fixture(scope="module")
def resolve(shared: Any) -> Any:
    shared("corpora")  # the scenarios name their preset, card and books in ../shared/corpora
    return scenarios_module().resolve


def test_the_golden_file_is_present() -> None:
    assert len(load_cases()) >= 10, "tests/golden/st_oracle/requests.jsonl holds the recorded SillyTavern requests"


@pytest.mark.cases("case", lambda shared: load_cases(), ids=lambda c: c["id"])
def test_sillytavern_sends_the_same_messages(case: dict[str, Any], resolve: Any) -> None:
    assert_sends_the_recorded_messages(case, to_request(case, resolve))
