"""The service's guard in-process: what cannot be provoked from outside a healthy service.

An unexpected exception inside a route becomes the ``INTERNAL_ERROR`` envelope with the request
id (the traceback goes to the log, never to the client); the access rules refuse what they must.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tavernbox import TemplateError
from tavernbox.service import ServiceConfig, create_app
from tavernbox.service.auth import Access
from tavernbox.store import open_database


@pytest.fixture
def app(tmp_path: Path) -> Iterator[object]:
    storage = open_database(tmp_path / "a.db")
    guard = create_app(ServiceConfig(storage=storage, token="t"))

    async def boom() -> None:
        raise ZeroDivisionError("secret detail /etc/somewhere")

    guard.app.add_api_route("/boom", boom)  # type: ignore[attr-defined]
    yield guard
    storage.close()


def test_an_unexpected_failure_is_the_envelope_and_a_logged_traceback(app: object,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="tavernbox.service"), \
            TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as client:  # type: ignore[arg-type]
        answer = client.get("/boom", headers={"Authorization": "Bearer t", "X-Request-Id": "r-1"})
    assert answer.status_code == 500
    error = answer.json()["error"]
    assert error["code"] == "INTERNAL_ERROR" and error["request_id"] == "r-1"
    assert "secret detail" not in answer.text and "Traceback" not in answer.text
    assert any("r-1" in r.getMessage() and r.exc_info for r in caplog.records)
    assert any("r-1 GET /boom 500" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("headers", [{"host": "127.0.0.1:1", "origin": "https://127.0.0.1:1"},
                                     {"host": "127.0.0.1:1", "sec-fetch-site": "same-site"},
                                     {"host": "localhost.evil.example"}, {"host": ""}])
def test_origin_rules_refuse(headers: dict[str, str]) -> None:
    with pytest.raises(TemplateError) as err:
        Access("t", loopback_only=True).check_origin(headers, "http")
    assert err.value.code == "SERVICE_ORIGIN_REFUSED"


def test_origin_rules_accept_loopback_names_and_same_origin() -> None:
    access = Access("t", loopback_only=True)
    for host in ("127.0.0.1:8787", "localhost:8787", "[::1]:8787", "LOCALHOST"):
        access.check_origin({"host": host, "origin": f"http://{host}", "sec-fetch-site": "same-origin"}, "http")
    Access("t", loopback_only=False).check_origin({"host": "box.lan:8787"}, "http")


@pytest.mark.parametrize("auth", ["Bearer", "Basic dA==", "Bearer t ", "bearer x", "Bearer tt"])
def test_token_rules(auth: str) -> None:
    access = Access("t", loopback_only=True)
    if auth == "Bearer t ":
        assert access.check_token({"authorization": auth}, "") is None  # surrounding space is not part of it
        return
    with pytest.raises(TemplateError) as err:
        access.check_token({"authorization": auth}, "token=t")  # a wrong header is not rescued by the query
    assert err.value.code == "SERVICE_UNAUTHORIZED"
    assert access.check_token({}, "token=t") == "t" and access.check_token({"cookie": "a=b; tavernbox_token=t"}, "") is None


WARM_RACE = """
import sys, threading
from tavernbox.service.app import warm_engines
warm_engines()
from tavernbox.macros.parser import validate_macro
errors = []
barrier = threading.Barrier(8)
def go():
    barrier.wait()
    try:
        for _ in range(20):
            assert validate_macro("{{setvar::a::{{char}}}}")
    except Exception as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=go) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print(len(errors), errors[:2])
"""


def test_warm_engines_lets_request_threads_share_a_fresh_process() -> None:
    # In a cold process, 8 threads parsing macros at once build the parser tables concurrently and
    # mismatch them (KeyError inside lalr_items); the service builds them once before serving.
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", WARM_RACE], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0 []"
