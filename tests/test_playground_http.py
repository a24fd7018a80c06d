"""The playground over real HTTP, without a browser (issue 16): what ``tavernbox serve`` answers.

The page and its static files are public (they hold no data) but carry a strict CSP and no
referrer; every API route still needs the token; the login URL printed is ``/?token=``; the
files ship as package data; ``/v1/render`` gains an opt-in ``provenance`` field and answers
exactly as before without it.
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import httpx
import pytest
from service_support import TOKEN, RunningService

STATIC = ("index.html", "app.js", "api.js", "editor.js", "jsonpos.js", "provenance.js", "diff.js", "samples.js",
          "playground.css")


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    with RunningService(str(tmp_path_factory.mktemp("play") / "service.db")) as svc:
        yield svc


def test_the_page_and_its_files_need_no_token_but_the_api_does(service: RunningService) -> None:
    page = httpx.get(service.base + "/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'data-testid="mode"' in page.text and "/static/app.js" in page.text
    for name in STATIC[1:]:
        answer = httpx.get(service.base + "/static/" + name)
        assert answer.status_code == 200, name
        assert answer.headers["content-type"].startswith("text/javascript" if name.endswith(".js") else "text/css")
    assert httpx.head(service.base + "/static/app.js").status_code == 200
    for method, path in (("POST", "/v1/macros"), ("GET", "/v1/library/templates"), ("POST", "/"),
                         ("GET", "/openapi.json")):
        assert httpx.request(method, service.base + path).status_code == 401, (method, path)


def test_page_answers_carry_a_strict_policy_and_no_referrer(service: RunningService) -> None:
    for path in ("/", "/static/app.js"):
        headers = httpx.get(service.base + path).headers
        csp = headers["content-security-policy"]
        assert "script-src 'self'" in csp and "connect-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert headers["referrer-policy"] == "no-referrer" and headers["x-content-type-options"] == "nosniff"
    assert not any(h.lower().startswith("access-control-") for h in httpx.get(service.base + "/").headers)


def test_unknown_or_traversing_static_paths_are_404(service: RunningService) -> None:
    for path in ("/static/nope.js", "/static/..%2Fapp.py", "/static/%2e%2e/auth.py", "/static/../app.py",
                 "/static/__init__.py"):
        answer = httpx.get(service.base + path)
        assert answer.status_code in (401, 404), path
        assert "import" not in answer.text


def test_the_page_keeps_the_host_and_origin_checks(service: RunningService) -> None:
    assert httpx.get(service.base + "/", headers={"Host": "evil.example"}).status_code == 403
    assert httpx.get(service.base + "/", headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403
    # the page's own same-origin fetch passes
    same = httpx.post(service.base + "/v1/macros", json={"template": "{{char}}", "context": {"char": "C"}},
                      headers={"Authorization": f"Bearer {TOKEN}", "Origin": service.base,
                               "Sec-Fetch-Site": "same-origin"})
    assert same.status_code == 200 and same.json()["text"] == "C"


def test_the_login_url_opens_the_page_and_sets_the_cookie(service: RunningService) -> None:
    answer = httpx.get(service.base + f"/?token={TOKEN}")
    assert answer.status_code == 200 and "SameSite=Strict" in answer.headers["set-cookie"]
    assert "set-cookie" not in httpx.get(service.base + "/?token=wrong").headers


def test_serve_prints_the_playground_url(tmp_path: Path) -> None:
    with RunningService(str(tmp_path / "t.db"), token=None) as svc:
        token = svc.printed.split("Bearer ")[1].split()[0]
        assert f"playground: {svc.base}/?token={token}" in svc.printed


def test_the_static_files_ship_as_package_data() -> None:
    folder = resources.files("tavernbox.service").joinpath("static")
    assert {name for name in STATIC} <= {item.name for item in folder.iterdir()}
    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert '"tavernbox.service" = ["static/*.html", "static/*.js", "static/*.css"]' in pyproject


# -- /v1/render's opt-in provenance ---------------------------------------------------------------


def test_render_provenance_is_opt_in(service: RunningService) -> None:
    assert service.client is not None
    body = {"template": "Hi <%= variables.n %>!", "variables": {"n": "Ann"}}
    plain = service.client.post("/v1/render", json=body).json()
    assert "provenance" not in plain and plain["text"] == "Hi Ann!"
    marked = service.client.post("/v1/render", json={**body, "provenance": True}).json()
    assert marked["text"] == plain["text"]
    assert marked["provenance"]["spans"] == [
        {"start": 0, "end": 3, "kind": "text", "source_start": 0, "source_end": 3, "line": 1, "column": 1},
        {"start": 3, "end": 6, "kind": "escaped", "source_start": 3, "source_end": 21, "line": 1, "column": 4},
        {"start": 6, "end": 7, "kind": "text", "source_start": 21, "source_end": 22, "line": 1, "column": 22}]


def test_render_provenance_reasons_and_errors(service: RunningService) -> None:
    assert service.client is not None
    random = service.client.post("/v1/render", json={"template": "<%= Math.random() %>", "provenance": True}).json()
    assert random["provenance"]["spans"] is None and random["provenance"]["reason"]
    bridged = service.client.post("/v1/render", json={"template": "<%= getvar('a') %>", "mvu": {"a": 1},
                                                      "provenance": True}).json()
    assert bridged["provenance"]["spans"] is None and "bridge" in bridged["provenance"]["reason"]
    failed = service.client.post("/v1/render", json={"template": "<% if (x) { %>", "provenance": True})
    assert failed.status_code == 422 and failed.json()["provenance"] is None
    assert failed.json()["error"]["code"] == "TEMPLATE_SYNTAX" and failed.json()["error"]["line"] == 1
    bad = service.client.post("/v1/render", json={"template": "x", "provenance": "yes"})
    assert bad.status_code == 400 and bad.json()["error"]["path"] == "$.provenance"


def test_a_measured_request_reports_the_service_peak_memory(service: RunningService) -> None:
    """The playground's "memory used" for the modes that run in the service's process: asked for by
    a header, answered in headers, the body unchanged; without the token the header is no way in."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    small = {"template": "{{user}}", "context": {"user": "Ash"}}
    large = {"template": "{{char}} " * 20_000, "context": {"char": "Mira"}}
    plain = httpx.post(service.base + "/v1/macros", json=small, headers=auth)
    assert "x-tavernbox-peak-bytes" not in plain.headers
    measured = [httpx.post(service.base + "/v1/macros", json=body, headers={**auth, "X-Tavernbox-Measure": "memory"})
                for body in (small, large)]
    assert measured[0].json() == plain.json()
    peaks = [int(m.headers["x-tavernbox-peak-bytes"]) for m in measured]
    assert 0 < peaks[0] < peaks[1]  # a 180 KB template costs more than an 8-byte one
    assert peaks[1] > len(large["template"])  # at least its own text and output
    assert float(measured[1].headers["x-tavernbox-server-ms"]) > 0
    refused = httpx.post(service.base + "/v1/macros", json=small, headers={"X-Tavernbox-Measure": "memory"})
    assert refused.status_code == 401 and "x-tavernbox-peak-bytes" not in refused.headers
