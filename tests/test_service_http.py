"""``tavernbox serve`` over real HTTP: a uvicorn process on a free loopback port (issue 15).

Access (token, origin, Host), the body limit, request ids, the error envelope, the engine routes
(answers equal to the CLI's JSON forms), the library (round trip, revisions, conditional writes,
refs), restart persistence, and renders sharing the sandbox pool under concurrency.
"""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from service_support import TOKEN, RunningService

from tavernbox.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
CARD = ROOT / "corpora" / "sample-card.json"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    with RunningService(str(tmp_path_factory.mktemp("svc") / "service.db")) as svc:
        yield svc


@pytest.fixture
def client(service: RunningService) -> httpx.Client:
    assert service.client is not None
    return service.client


def cli_json(*args: str, stdin: str | None = None) -> tuple[int, Any]:
    result = CliRunner().invoke(main, list(args), input=stdin)
    return result.exit_code, json.loads(result.output)


# -- access ------------------------------------------------------------------------------------


def test_healthz_needs_no_token_and_everything_else_does(service: RunningService) -> None:
    assert httpx.get(service.base + "/healthz").json()["ok"] is True
    for method, path in (("GET", "/v1/library/cards"), ("POST", "/v1/render"), ("GET", "/openapi.json"),
                         ("GET", "/docs"), ("GET", "/nope")):
        answer = httpx.request(method, service.base + path)
        assert answer.status_code == 401, path
        assert answer.json()["error"]["code"] == "SERVICE_UNAUTHORIZED"
    wrong = httpx.get(service.base + "/v1/library/cards", headers={"Authorization": "Bearer not-the-token"})
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "SERVICE_UNAUTHORIZED"


def test_the_login_url_sets_a_strict_cookie_that_then_authorises(service: RunningService) -> None:
    first = httpx.get(service.base + f"/docs?token={TOKEN}")
    # the service's own docs page: its script and style come from the service, never a CDN (works offline)
    assert first.status_code == 200 and '<script type="module" src="/static/docs.js">' in first.text
    assert "http://" not in first.text and "https://" not in first.text and "cdn" not in first.text.lower()
    assert "script-src 'self'" in first.headers["content-security-policy"]
    script = httpx.get(service.base + "/static/docs.js")
    assert script.status_code == 200 and 'fetch("/openapi.json"' in script.text and "https://" not in script.text
    cookie = first.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    with httpx.Client(base_url=service.base, cookies=first.cookies) as browser:
        schema = browser.get("/openapi.json").json()
    assert {"/v1/render", "/v1/library/{kind}/{asset_id}", "/healthz"} <= set(schema["paths"])
    assert schema["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"


def test_a_generated_token_is_printed_with_the_url(tmp_path: Path) -> None:
    with RunningService(str(tmp_path / "t.db"), token=None) as svc:
        assert TOKEN not in svc.printed
        token = svc.printed.split("Bearer ")[1].split()[0]
        assert len(token) >= 40 and f"/docs?token={token}" in svc.printed
        assert svc.client is not None and svc.client.get("/v1/library/cards").status_code == 200
        assert httpx.get(svc.base + "/v1/library/cards", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 401


@pytest.mark.parametrize("headers", [{"Origin": "http://evil.example"}, {"Origin": "null"},
                                     {"Origin": "http://127.0.0.1:1"}, {"Sec-Fetch-Site": "cross-site"},
                                     {"Host": "evil.example"}])
def test_cross_origin_browser_requests_are_refused(client: httpx.Client, headers: dict[str, str]) -> None:
    answer = client.post("/v1/macros", json={"template": "x"}, headers=headers)
    assert answer.status_code == 403 and answer.json()["error"]["code"] == "SERVICE_ORIGIN_REFUSED"
    assert not any(h.lower().startswith("access-control-") for h in answer.headers)


def test_same_origin_requests_pass_and_preflights_get_no_cors(service: RunningService, client: httpx.Client) -> None:
    assert client.post("/v1/macros", json={"template": "x"}, headers={"Origin": service.base}).status_code == 200
    preflight = httpx.options(service.base + "/v1/macros", headers={"Origin": "http://evil.example",
                                                                    "Access-Control-Request-Method": "POST"})
    assert preflight.status_code == 403
    assert not any(h.lower().startswith("access-control-") for h in preflight.headers)


# -- body limit, request ids, error envelope ---------------------------------------------------


def test_a_declared_oversized_body_is_refused_before_it_is_sent(service: RunningService) -> None:
    host, port = service.base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall((f"POST /v1/render HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {TOKEN}\r\n"
                      "Content-Type: application/json\r\nContent-Length: 3000000\r\n\r\n").encode())
        received = b""  # no body byte was sent: the answer cannot have waited for it
        while b"SERVICE_BODY_TOO_LARGE" not in received:
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
    answer = received.decode()
    assert answer.startswith("HTTP/1.1 413") and "SERVICE_BODY_TOO_LARGE" in answer


def test_a_streamed_oversized_body_is_refused_at_the_limit(service: RunningService, client: httpx.Client) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(64):  # 4 MiB offered in 64 KiB chunks, no Content-Length
            yield b" " * 65536

    try:
        answer = client.post("/v1/render", content=chunks(), headers={"X-Request-Id": "streamed-big"})
    except httpx.HTTPError:  # the server may close the connection while the client is still sending
        time.sleep(0.2)
        assert "streamed-big POST /v1/render 413" in service.log()
        return
    assert answer.status_code == 413 and answer.json()["error"]["code"] == "SERVICE_BODY_TOO_LARGE"


def test_a_body_at_the_limit_is_read(client: httpx.Client) -> None:
    template = "a" * (2 * 1024 * 1024 - 40)
    answer = client.post("/v1/macros", content=json.dumps({"template": template}))
    assert len(answer.content) and answer.status_code in (200, 422)
    assert answer.json().get("error", {}).get("code") != "SERVICE_BODY_TOO_LARGE"


def test_a_costly_macro_text_stops_at_the_render_budget_with_its_code_and_position(client: httpx.Client) -> None:
    # distinct malformed macros (~50 us each to recover): ~9 s unbounded; the render's CPU budget stops it
    parts, size, i = [], 0, 0
    while size < 1_900_000:
        parts.append(f"{{{{a{i}:}}}}")
        size += len(parts[-1])
        i += 1
    started = time.monotonic()
    answer = client.post("/v1/macros", content=json.dumps({"template": "".join(parts)}))
    assert time.monotonic() - started < 10  # ~1 s
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["code"] == "MACRO_TIME_LIMIT" and error["line"] == 1 and error["column"] > 1
    # the service goes on as before
    assert client.post("/v1/macros", json={"template": "x{{newline}}y"}).json()["text"] == "x\ny"


def test_request_ids_are_in_answers_errors_and_the_log(service: RunningService, client: httpx.Client) -> None:
    mine = client.post("/v1/macros", json={"template": "x"}, headers={"X-Request-Id": "client-42"})
    assert mine.headers["x-request-id"] == "client-42"
    hostile = client.post("/v1/macros", json={"template": "x"}, headers={"X-Request-Id": "bad id/" * 30})
    generated = hostile.headers["x-request-id"]
    assert generated.startswith("req_") and generated != "client-42"
    failed = client.post("/v1/macros", content=b"{not json")
    rid = failed.headers["x-request-id"]
    assert failed.json()["error"]["request_id"] == rid
    time.sleep(0.2)
    log = service.log()
    assert "client-42 POST /v1/macros 200" in log and f"{rid} POST /v1/macros 400" in log


@pytest.mark.parametrize("body, code, where", [
    (b"{not json", "SERVICE_REQUEST_INVALID", {"line": 1, "column": 2}),
    (b"[1, 2]", "SERVICE_REQUEST_INVALID", {"path": "$"}),
    (b"\xff\xfe", "SERVICE_REQUEST_INVALID", {}),
    (b'{"template": 3}', "SERVICE_REQUEST_INVALID", {"path": "$.template"}),
    (b'{"template": "x", "bogus": 1}', "SERVICE_REQUEST_INVALID", {"path": "$.bogus"}),
    (b"[" * 100000 + b"]" * 100000, "SERVICE_REQUEST_INVALID", {}),
])
def test_bad_bodies_get_the_error_envelope_never_a_traceback(client: httpx.Client, body: bytes, code: str,
                                                             where: dict[str, Any]) -> None:
    answer = client.post("/v1/macros", content=body)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == code and error["message"] and "Traceback" not in answer.text
    for key, value in where.items():
        assert error[key] == value


def test_unknown_routes_and_methods_use_the_envelope(client: httpx.Client) -> None:
    assert client.get("/v1/nothing").json()["error"]["code"] == "SERVICE_ROUTE_UNKNOWN"
    wrong = client.get("/v1/render")
    assert wrong.status_code == 405 and wrong.json()["error"]["code"] == "SERVICE_ROUTE_UNKNOWN"


# -- engine routes: the CLI's JSON forms -------------------------------------------------------


def test_macros_answer_equals_the_cli_json(client: httpx.Client, tmp_path: Path) -> None:
    context = {"user": "Ann", "variables": {"local": {"n": 2}}}
    template = "{{char}} greets {{user}}: {{getvar::n}} {{roll:1d20}}{{setvar::n::3}}"
    (tmp_path / "ctx.json").write_text(json.dumps(context))
    (tmp_path / "t.txt").write_text(template)
    code, expected = cli_json("macros", "--json", "--seed", "7", "--context", str(tmp_path / "ctx.json"),
                              "--card", str(CARD), str(tmp_path / "t.txt"))
    assert code == 0
    card = json.loads(CARD.read_text())
    answer = client.post("/v1/macros", json={"template": template, "context": context, "card": card, "seed": 7})
    assert answer.status_code == 200 and answer.json() == expected


def test_render_answer_equals_the_cli_json_including_failures(client: httpx.Client, tmp_path: Path) -> None:
    (tmp_path / "vars.json").write_text(json.dumps({"name": "Bo"}))
    for template, status in (("Hi <%= variables.name %>!", 200), ("<% throw new Error('no') %>", 422)):
        (tmp_path / "t.ejs").write_text(template)
        _, expected = cli_json("render", str(tmp_path / "t.ejs"), "--vars", str(tmp_path / "vars.json"), "--json")
        answer = client.post("/v1/render", json={"template": template, "variables": {"name": "Bo"}})
        got = answer.json()
        assert answer.status_code == status
        for out in (got, expected):
            if out["usage"]:
                out["usage"] = sorted(out["usage"])  # timings differ; the fields do not
        assert got == expected


def test_activate_answer_equals_the_cli_jsonl_line(client: httpx.Client) -> None:
    scenario = {"entries": [{"uid": 1, "key": ["dragon"], "content": "Dragons breathe fire."},
                            {"uid": 2, "key": ["elf"], "content": "Elves."}],
                "chat": ["I saw a dragon"], "max_context": 4096}
    code, expected = cli_json("activate", "--jsonl", stdin=json.dumps(scenario) + "\n")
    assert code == 0
    answer = client.post("/v1/activate", json=scenario)
    assert answer.status_code == 200 and answer.json() == expected
    assert [a["uid"] for a in answer.json()["activated"]] == [1]
    bad = client.post("/v1/activate", json={"chat": []})
    assert bad.status_code in (400, 422) and bad.json()["error"]["code"] == "INPUT_INVALID"


def test_import_answer_equals_the_cli_json_and_store_keeps_it(client: httpx.Client) -> None:
    _, expected = cli_json("import", "--json", str(CARD))
    answer = client.post("/v1/import", params={"name": str(CARD)}, content=CARD.read_bytes())
    assert answer.status_code == 200
    got = answer.json()
    assert {**got, "files": [{**f, "name": None} for f in got["files"]]} == \
        {**expected, "files": [{**f, "name": None} for f in expected["files"]]}
    stored = client.post("/v1/import", params={"store": "true", "id": "sample"}, content=CARD.read_bytes()).json()
    assert stored["stored"]["kind"] == "cards" and stored["stored"]["id"] == "sample"
    assert client.get("/v1/library/cards/sample").json()["data"] == json.loads(CARD.read_text())
    rejected = client.post("/v1/import", content=b'{"what": 1}')
    assert rejected.status_code == 422 and rejected.json()["error"]["code"] == "ASSET_KIND_UNKNOWN"
    assert rejected.json()["files"][0]["ok"] is False


def test_replay_answer_equals_the_cli(client: httpx.Client, tmp_path: Path) -> None:
    from _assembler_support import preset, rule

    rules = [rule("native-system"), rule("custom", "m", text="MAIN", role="system"), rule("history"), rule("input")]
    (tmp_path / "s.json").write_text(json.dumps(preset(rules)))
    (tmp_path / "c.json").write_text(json.dumps({"messages": [{"id": "u1", "role": "user", "content": "hi"}],
                                                 "input_ids": ["u1"]}))
    code, assembled = cli_json("assemble", "--strategy", str(tmp_path / "s.json"), "--chat", str(tmp_path / "c.json"),
                               "--json")
    assert code == 0
    (tmp_path / "r.json").write_text(json.dumps(assembled))
    _, expected = cli_json("replay", "--json", str(tmp_path / "r.json"))
    answer = client.post("/v1/replay", json=assembled)
    assert answer.status_code == 200 and answer.json() == expected
    tampered = json.loads(json.dumps(assembled["record"]))
    tampered["messages_hash"] = "sha256:" + "0" * 64
    bad = client.post("/v1/replay", json=tampered)
    assert bad.status_code == 422 and bad.json()["error"]["code"].startswith("ASSEMBLY_REPLAY")


# -- the library -------------------------------------------------------------------------------


def test_library_round_trip_revisions_and_conditional_writes(client: httpx.Client) -> None:
    card = json.loads(CARD.read_text())
    created = client.put("/v1/library/cards/alice", json=card)
    assert created.status_code == 201 and created.headers["etag"] == '"1"' and created.json()["revision"] == 1
    got = client.get("/v1/library/cards/alice")
    assert got.json()["data"] == card and got.headers["etag"] == '"1"'
    card2 = {**card, "data": {**card["data"], "description": "changed"}}
    assert client.put("/v1/library/cards/alice", json=card2, headers={"If-Match": '"1"'}).status_code == 200
    stale = client.put("/v1/library/cards/alice", json=card, headers={"If-Match": '"1"'})
    assert stale.status_code == 412 and stale.json()["error"]["code"] == "LIBRARY_CONFLICT"
    # an entity-tag the service never issued matches no revision: 412 too (RFC 9110), not a malformed request
    never = client.put("/v1/library/cards/alice", json=card, headers={"If-Match": '"stale-revision"'})
    assert never.status_code == 412 and never.json()["error"]["code"] == "LIBRARY_CONFLICT"
    assert client.put("/v1/library/cards/alice", json=card, headers={"If-Match": "no-quotes"}).status_code == 400
    assert client.get("/v1/library/cards/alice").json()["data"] == card2
    assert client.get("/v1/library/cards/alice", params={"revision": 1}).json()["data"] == card
    assert client.put("/v1/library/cards/alice", json=card, headers={"If-None-Match": "*"}).status_code == 412
    listed = client.get("/v1/library/cards").json()
    assert "alice" in [i["id"] for i in listed["items"]] and listed["kind"] == "cards"
    assert client.delete("/v1/library/cards/alice", headers={"If-Match": '"1"'}).status_code == 412
    assert client.delete("/v1/library/cards/alice", headers={"If-Match": '"2"'}).json()["deleted"] is True
    gone = client.get("/v1/library/cards/alice")
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "LIBRARY_NOT_FOUND"


@pytest.mark.parametrize("path, body, headers, status, code", [
    ("/v1/library/widgets/x", {}, {}, 400, "LIBRARY_INVALID"),
    ("/v1/library/cards/-x", {}, {}, 400, "LIBRARY_INVALID"),
    ("/v1/library/cards/" + "x" * 129, {}, {}, 400, "LIBRARY_INVALID"),
    ("/v1/library/cards/x", {}, {"If-Match": "*"}, 400, "LIBRARY_INVALID"),
    ("/v1/library/cards/x", {"not": "a card"}, {}, 422, "ASSET_KIND_MISMATCH"),
    ("/v1/library/templates/x", {"no": 1}, {}, 400, "SERVICE_REQUEST_INVALID"),
])
def test_library_writes_that_cannot_be_used_are_refused(client: httpx.Client, path: str, body: Any,
                                                        headers: dict[str, str], status: int, code: str) -> None:
    answer = client.put(path, json=body, headers=headers)
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["code"] in (code, "ASSET_FIELD_MISSING", "ASSET_INVALID", "ASSET_KIND_UNKNOWN") \
        if status == 422 else answer.json()["error"]["code"] == code


def test_refs_resolve_into_requests_and_report_their_revisions(client: httpx.Client) -> None:
    client.put("/v1/library/templates/greet", json="Hello <%= variables.who %>")
    answer = client.post("/v1/render", json={"template": {"ref": "templates/greet"}, "variables": {"who": "you"}})
    assert answer.json()["text"] == "Hello you"
    ref = answer.json()["refs"][0]
    assert (ref["kind"], ref["id"], ref["path"]) == ("templates", "greet", "$.template") and ref["revision"] >= 1
    client.put("/v1/library/templates/greet", json="Bye")
    pinned = client.post("/v1/render", json={"template": {"ref": f"templates/greet@{ref['revision']}"},
                                             "variables": {"who": "again"}})
    assert pinned.json()["text"] == "Hello again"
    missing = client.post("/v1/render", json={"template": {"ref": "templates/nope"}})
    assert missing.status_code == 404 and missing.json()["error"] == {
        "code": "LIBRARY_NOT_FOUND", "message": "no asset templates/nope", "path": "$.template",
        "request_id": missing.headers["x-request-id"]}


# -- persistence and concurrency ---------------------------------------------------------------


def test_the_library_survives_a_restart_and_a_kill(tmp_path: Path) -> None:
    db = str(tmp_path / "persist.db")
    with RunningService(db) as first:
        assert first.client is not None
        first.client.put("/v1/library/presets/p", json={"prompts": [], "prompt_order": []})
        first.client.put("/v1/library/chats/c", json={"messages": [{"role": "user", "content": "hi"}]})
        first.stop(signal.SIGKILL)  # no clean shutdown: committed writes must still be there
    with RunningService(db) as second:
        assert second.client is not None
        assert second.client.get("/v1/library/chats/c").json()["data"]["messages"][0]["content"] == "hi"
        assert second.client.get("/v1/library/presets/p").json()["revision"] == 1


def test_a_hostile_template_does_not_block_other_requests(client: httpx.Client) -> None:
    results: dict[str, Any] = {}

    def hostile(n: int) -> None:
        results[f"h{n}"] = client.post("/v1/render", json={"template": "<% while (true) {} %>"})

    threads = [threading.Thread(target=hostile, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    ok = [client.post("/v1/render", json={"template": "<%= 6 * 7 %>"}) for _ in range(5)]
    for t in threads:
        t.join()
    assert all(a.status_code == 200 and a.json()["text"] == "42" for a in ok)
    assert all(r.status_code == 422 and r.json()["error"]["code"] == "TEMPLATE_TIME_LIMIT" for r in results.values())


def test_workers_share_the_port_and_the_database(tmp_path: Path) -> None:
    with RunningService(str(tmp_path / "w.db"), args=("--workers", "2")) as svc:
        assert svc.client is not None and svc.proc is not None
        children = []
        deadline = time.monotonic() + 60
        while len(children) < 2 and time.monotonic() < deadline:
            children = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _ppid(p) == svc.proc.pid
                        and b"spawn_main" in _cmdline(p)]
            time.sleep(0.1)
        assert len(children) == 2
        assert svc.client.put("/v1/library/templates/w", json="<%= 'w' %>").status_code == 201
        base, headers = svc.base, dict(svc.client.headers)

        def render(_: int) -> str:
            with httpx.Client(base_url=base, headers=headers, timeout=60) as c:
                return c.post("/v1/render", json={"template": {"ref": "templates/w"}}).json()["text"]

        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(8) as pool:
            assert list(pool.map(render, range(16))) == ["w"] * 16


def _cmdline(proc: Path) -> bytes:
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:
        return b""


def _ppid(proc: Path) -> int:
    try:
        return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def test_a_library_document_must_be_json_of_a_usable_type(client: httpx.Client) -> None:
    answer = client.put("/v1/library/chats/n", content=b"12")
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == "the request body must be an object or an array or a string (JSON)"


def test_lint_answer_equals_the_cli_json(client: httpx.Client, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    corpora = ROOT / "corpora"
    template = "Hello {{user}} <%= getvar('stat_data.never_set') %> {{unknownmacro}}\n"
    files = {name: (corpora / name).read_bytes() for name in ("sample-preset.json", "sample-card.json",
                                                             "sample-book.json")}
    files["greeting.ejs"] = template.encode()
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["lint", "--format", "json", *files])
    expected = json.loads(result.output)
    assert expected["findings"], "the sample set should give the linter something to say"
    body = {"files": [{"name": n, "content": json.loads(d)} if n.endswith(".json") else {"name": n, "text": d.decode()}
                      for n, d in files.items()]}
    answer = client.post("/v1/lint", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json() == expected
    png = client.post("/v1/lint", json={"files": [{"name": "c.png", "base64": "bm90IGEgcG5n"}], "format": "sarif"})
    assert png.status_code == 200 and png.json()["version"] == "2.1.0"


@pytest.mark.parametrize("body, path", [
    ({"files": []}, "$.files"),
    ({"files": [{"name": "../x.json", "content": {}}]}, "$.files[0].name"),
    ({"files": [{"name": "a.json", "content": {}, "text": ""}]}, "$.files[0]"),
    ({"files": [{"name": "a.json", "content": {}}, {"name": "a.json", "content": {}}]}, "$.files"),
    ({"files": [{"name": "a.png", "base64": "***"}]}, "$.files[0].base64"),
    ({"files": [{"name": "a.json", "content": {}}], "format": "xml"}, "$.format"),
])
def test_lint_requests_that_cannot_be_linted(client: httpx.Client, body: dict[str, Any], path: str) -> None:
    answer = client.post("/v1/lint", json=body)
    assert answer.status_code == 400 and answer.json()["error"]["path"] == path
