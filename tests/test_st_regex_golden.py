"""Golden tests: SillyTavern's regex scripts and stored reasoning, applied as SillyTavern 1.18.0 applies them.

Each case of ``golden/st_oracle/regex_requests.jsonl`` was recorded by driving SillyTavern itself with
regex scripts (global ones, the preset's, the card's, allowed or not) and chats carrying reasoning
(``golden/st_oracle/regex_scenarios.py`` builds them). The same scenario as a request file must give the
same messages, byte for byte.
"""

from __future__ import annotations

from typing import Any

import pytest
from st_oracle_support import REGEX_REQUESTS, assert_sends_the_recorded_messages, load_cases, scenarios_module, to_request


@pytest.fixture(scope="module")
def resolve(shared: Any) -> Any:
    shared("corpora")  # the scenarios name their preset, card and books in ../shared/corpora
    return scenarios_module().resolve


def test_the_golden_file_is_present() -> None:
    assert len(load_cases(REGEX_REQUESTS)) >= 40, \
        "tests/golden/st_oracle/regex_requests.jsonl holds the recorded SillyTavern requests"


@pytest.mark.cases("case", lambda shared: load_cases(REGEX_REQUESTS), ids=lambda c: c["id"])
def test_sillytavern_sends_the_same_messages(case: dict[str, Any], resolve: Any) -> None:
    assert_sends_the_recorded_messages(case, to_request(case, resolve))
