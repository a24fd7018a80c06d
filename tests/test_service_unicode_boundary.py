"""Issue 14: Hypothesis-generated Unicode (lone surrogates included) through every JSON boundary of
``tavernbox serve``, as ``tests/test_cli_unicode_boundary.py`` does for the commands.

The attack is a raw JSON body spelling ``"\\ud800"``: valid JSON, but Python reads it as a string
UTF-8 cannot carry, so the answer used to fail to encode (``500 INTERNAL_ERROR``). Every route must
answer with a coded outcome: a success, or the error envelope with a documented code (never
``INTERNAL_ERROR``, never a traceback); a lone surrogate anywhere in the body (value or key) gets
``TEXT_SURROGATE`` with the JSON path of the first one, the CLI's rule. The property runs in process
(``TestClient``); one check goes through a real ``tavernbox serve`` process.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from service_support import RunningService

from tavernbox.errors import CODES
from tavernbox.service import ServiceConfig, create_app
from tavernbox.store import open_database
from tavernbox.strict_json import find_surrogate

HEADERS = {"Authorization": "Bearer t", "Content-Type": "application/json"}

#: Unicode as Hypothesis draws it, plus surrogates alone, in pairs, halves of pairs and mixed in
_SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
TEXT = st.one_of(
    st.text(max_size=12),
    st.text(alphabet=st.one_of(st.characters(), _SURROGATES), max_size=12),
    st.sampled_from(["\ud800", "\udfff", "a\udc00b", "\ud83d", "\ud83d\ude00", "\ude00\ud83d", "{{user}}\ud800"]),
)

#: route -> (method, path, body builder): each builder puts the drawn string at one of several places
#: (a value, a key, deep in a list) of a body the route otherwise accepts
Body = Callable[[str, int], Any]


def _macros(s: str, at: int) -> Any:
    return [{"template": s}, {"template": "{{user}}", "context": {"user": s}}, {"template": "a", "context": {s: 1}},
            {"template": "{{getvar::x}}", "context": {"variables": {"local": {"x": s}}}}][at % 4]


def _render(s: str, at: int) -> Any:
    return [{"template": s}, {"template": "<%= variables.a %>", "variables": {"a": s}},
            {"template": "<%= 1 %>", "variables": {s: [s]}}][at % 3]


def _activate(s: str, at: int) -> Any:
    entries = [{"uid": 1, "key": ["dragon"], "content": "Dragons."}]
    return [{"entries": entries, "chat": [{"role": "user", "content": s}]},
            {"entries": [{"uid": 1, "key": [s], "content": s}], "chat": [{"role": "user", "content": "dragon"}]}][at % 2]


def _assemble(s: str, at: int) -> Any:
    chat = {"messages": [{"role": "user", "content": "hi"}]}
    return [{"preset": {}, "card": {"name": s}, "chat": chat},
            {"preset": {}, "card": {"name": "C"}, "chat": {"messages": [{"role": "user", "content": s}]}},
            {"preset": {"prompts": [{"identifier": "main", "content": s}]}, "chat": chat}][at % 3]


def _card(s: str, at: int) -> Any:
    return [{"name": s, "description": "d"}, {"name": "n", "description": s, "extensions": {s: s}}][at % 2]


def _lint(s: str, at: int) -> Any:
    return [{"files": [{"name": "c.json", "content": _card(s, at)}]},
            {"files": [{"name": "t.txt", "text": s}]}][at % 2]


def _completions(s: str, at: int) -> Any:
    return {"model": "m", "messages": [{"role": "user", "content": s if at % 2 else "hi"}],
            "tavernbox": {"preset": {}, "card": {"name": "hi" if at % 2 else s}}}


ROUTES: dict[str, tuple[str, str, Body]] = {
    "macros": ("post", "/v1/macros", _macros),
    "render": ("post", "/v1/render", _render),
    "activate": ("post", "/v1/activate", _activate),
    "assemble": ("post", "/v1/assemble", _assemble),
    "import": ("post", "/v1/import", _card),
    "lint": ("post", "/v1/lint", _lint),
    "library": ("put", "/v1/library/cards/c", _card),
    "library-text": ("put", "/v1/library/templates/t", lambda s, at: s),
    "chat-completions": ("post", "/v1/chat/completions", _completions),
}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    storage = open_database(tmp_path_factory.mktemp("svc") / "a.db")
    # an upstream nobody listens on: a clean completion request ends as SERVICE_UPSTREAM_FAILED
    app = create_app(ServiceConfig(storage=storage, token="t", upstream="http://127.0.0.1:9/v1", upstream_timeout=2))
    with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as test_client:  # type: ignore[arg-type]
        yield test_client
    storage.close()


def _error_of(route: str, answer: Any) -> dict[str, Any] | None:
    """The refusal in an answer: the envelope, or (import) the one file's error."""
    if "error" in answer:
        return answer["error"]
    if route == "import" and answer.get("files") and not answer["files"][0].get("ok", True):
        return answer["files"][0]["error"]
    return None


def _check(client: TestClient, route: str, raw: bytes) -> None:
    method, path, _ = ROUTES[route]
    response = getattr(client, method)(path, content=raw, headers=HEADERS)
    assert response.status_code != 500, (route, raw, response.text)
    assert "Traceback" not in response.text
    answer = response.json()  # always JSON, always UTF-8
    error = _error_of(route, answer)
    if error is not None:
        assert error["code"] in CODES and error["code"] != "INTERNAL_ERROR", (route, raw, error)
        assert response.status_code >= 400
    else:
        assert response.status_code < 300
    lone = find_surrogate(json.loads(raw))
    if lone is not None:  # the body spells one: refused with its code and the path of the first
        assert error is not None and error["code"] == "TEXT_SURROGATE", (route, raw, answer)
        assert error["path"] == lone[0], (route, raw, error)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(route=st.sampled_from(sorted(ROUTES)), text=TEXT, at=st.integers(0, 11))
def test_every_route_answers_generated_unicode_with_a_coded_outcome(client: TestClient, route: str, text: str,
                                                                    at: int) -> None:
    body = ROUTES[route][2](text, at)
    _check(client, route, json.dumps(body, ensure_ascii=True).encode("ascii"))  # "\ud800" escapes: the attack


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_lone_surrogate_on_every_route_is_text_surrogate_with_its_path(client: TestClient, route: str) -> None:
    for at in range(4):
        raw = json.dumps(ROUTES[route][2]("x\ud800", at), ensure_ascii=True).encode("ascii")
        assert b"\\ud800" in raw
        _check(client, route, raw)


def test_an_answer_an_engine_cuts_inside_a_pair_is_refused_like_the_cli(client: TestClient) -> None:
    answer = client.post("/v1/render", json={"template": "<%= '\U0001F600'.slice(0, 1) %>"}, headers=HEADERS)
    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "TEXT_SURROGATE" and answer.json()["error"]["path"] == "$.text"


def test_an_error_message_quoting_a_surrogate_key_still_encodes(client: TestClient) -> None:
    # the unknown-field refusal quotes the key; with the body check first it is the surrogate's
    # refusal, whose path spells the key ASCII-escaped
    raw = b'{"x\\ud800": 1, "template": "a"}'
    error = client.post("/v1/macros", content=raw, headers=HEADERS).json()["error"]
    assert error["code"] == "TEXT_SURROGATE" and error["path"] == '$["x\\ud800"]'


def test_a_real_service_refuses_a_raw_surrogate_body(tmp_path: Path) -> None:
    with RunningService(str(tmp_path / "s.db")) as service:
        assert service.client is not None
        answer = service.client.post("/v1/macros", content=b'{"template": "{{user}} \\ud800"}',
                                     headers={"Content-Type": "application/json", "X-Request-Id": "sur-1"})
        assert answer.status_code == 422
        error = answer.json()["error"]
        assert error == {**error, "code": "TEXT_SURROGATE", "path": "$.template", "request_id": "sur-1"}
        deadline = time.monotonic() + 10  # the request's log line is written after the answer
        while "sur-1 POST" not in service.log() and time.monotonic() < deadline:
            time.sleep(0.05)
        log = service.log()
    assert "Traceback" not in log and "sur-1 POST /v1/macros 422" in log


def test_the_error_envelope_encodes_whatever_a_message_quotes() -> None:
    from tavernbox.errors import TemplateError
    from tavernbox.service.answers import error_response

    response = error_response(TemplateError("unknown field 'x\ud800'", code="SERVICE_REQUEST_INVALID", path="$.x\ud800"))
    error = json.loads(response.body)["error"]
    assert error["message"] == "unknown field 'x\\ud800'" and error["path"] == "$.x\\ud800"
