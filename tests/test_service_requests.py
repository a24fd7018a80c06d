"""``/v1/assemble`` and ``/v1/chat/completions`` over real HTTP (issue 15 on the request API of issue 11).

The assembled answer equals ``tavernbox assemble --request --json``; refs to stored assets resolve
and their revisions are recorded; stored records replay after a restart; the OpenAI-compatible
endpoint forwards the assembled messages to a stub upstream on loopback and streams its
server-sent events through unchanged; no upstream is 503.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from service_support import RunningService

from tavernbox.cli.main import main

CORPORA = Path(__file__).resolve().parents[1] / "corpora"
SSE_CHUNKS = [b'data: {"choices":[{"delta":{"content":"Hel"}}]}\n\n',
              b'data: {"choices":[{"delta":{"content":"lo"}}]}\n\n', b"data: [DONE]\n\n"]


def sample_request() -> dict[str, Any]:
    """The bundled sample request with every asset inline (the chat as the documented JSON form)."""
    from tavernbox.assets.chats import parse_chat_text

    request = json.loads((CORPORA / "sample-request.json").read_text())
    chat = parse_chat_text((CORPORA / "sample-chat.jsonl").read_text(), hint="sample-chat.jsonl")
    request["chat"] = {"messages": [{k: v for k, v in m.to_dict().items() if k in ("role", "content", "name")}
                                    for m in chat.messages]}
    request["preset"] = json.loads((CORPORA / "sample-preset.json").read_text())
    request["card"] = json.loads((CORPORA / "sample-card.json").read_text())
    request["books"] = [json.loads((CORPORA / "sample-book.json").read_text())]
    return request


class Upstream:
    """A stub OpenAI-compatible server on loopback that records what it was sent."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.gate = threading.Event()
        self.gate_opened_by_client: list[bool] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.received.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                if body.get("stream"):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for n, chunk in enumerate(SSE_CHUNKS):
                        self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                        self.wfile.flush()
                        if n == 0 and body.get("model") == "gated":  # the rest only once the client saw this
                            outer.gate_opened_by_client.append(outer.gate.wait(20))
                    self.wfile.write(b"0\r\n\r\n")
                    return
                if "prompt" in body:  # a text completion
                    answer = json.dumps({"id": "t1", "object": "text_completion", "choices": [
                        {"index": 0, "text": f"{len(body['prompt'])} characters", "finish_reason": "stop"}]}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(answer)))
                    self.end_headers()
                    self.wfile.write(answer)
                    return
                status = 200 if body.get("model") != "missing" else 404
                answer = json.dumps({"id": "c1", "object": "chat.completion", "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": f"{len(body['messages'])} messages"},
                     "finish_reason": "stop"}]} if status == 200 else {"error": {"message": "no such model"}}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Upstream:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    with Upstream() as stub:
        yield stub


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, upstream: Upstream) -> Iterator[RunningService]:
    with RunningService(str(tmp_path_factory.mktemp("req") / "service.db"), upstream=upstream.url,
                        extra_env={"TAVERNBOX_UPSTREAM_KEY": "upstream-secret"}) as svc:
        yield svc


@pytest.fixture
def client(service: RunningService) -> httpx.Client:
    assert service.client is not None
    return service.client


def test_assemble_answer_equals_the_cli_request_json(client: httpx.Client, tmp_path: Path) -> None:
    request = sample_request()
    (tmp_path / "req.json").write_text(json.dumps(request))
    result = CliRunner().invoke(main, ["assemble", "--request", str(tmp_path / "req.json"), "--json"])
    assert result.exit_code == 0, result.output
    expected = json.loads(result.output)
    answer = client.post("/v1/assemble", json=request)
    assert answer.status_code == 200, answer.text
    assert answer.json() == expected
    assert any("Mira" in m["content"] for m in answer.json()["messages"])


def test_preview_is_the_dry_run(client: httpx.Client) -> None:
    request = sample_request()
    preview = client.post("/v1/assemble", json={**request, "preview": True}).json()
    dry = client.post("/v1/assemble", json={**request, "options": {**request["options"], "dry_run": True}}).json()
    assert preview == dry


def test_refs_resolve_and_their_revisions_are_recorded(client: httpx.Client) -> None:
    request = sample_request()
    inline = client.post("/v1/assemble", json=request).json()
    for kind, key, value in (("presets", "preset", request["preset"]), ("cards", "card", request["card"]),
                             ("chats", "chat", request["chat"])):
        assert client.put(f"/v1/library/{kind}/sample", json=value).status_code in (200, 201)
    client.put("/v1/library/books/sample", json=request["books"][0])
    by_ref = {**request, "preset": {"ref": "presets/sample"}, "card": {"ref": "cards/sample"},
              "chat": {"ref": "chats/sample"}, "books": [{"ref": "books/sample"}], "store": True, "record_id": "r1"}
    answer = client.post("/v1/assemble", json=by_ref)
    assert answer.status_code == 200, answer.text
    got = answer.json()
    assert got["messages"] == inline["messages"]
    assert {(r["kind"], r["id"], r["path"]) for r in got["refs"]} == {
        ("presets", "sample", "$.preset"), ("cards", "sample", "$.card"), ("chats", "sample", "$.chat"),
        ("books", "sample", "$.books[0]")}
    stored = client.get("/v1/library/records/r1").json()["data"]
    assert stored["refs"] == got["refs"] and stored["messages"] == got["messages"]
    replayed = client.post("/v1/replay", json={"ref": "records/r1"})
    assert replayed.status_code == 200, replayed.text
    direct = client.post("/v1/replay", json=got).json()
    assert {k: v for k, v in replayed.json().items() if k != "refs"} == direct


def test_a_stored_record_replays_after_a_restart(tmp_path: Path) -> None:
    db = str(tmp_path / "restart.db")
    with RunningService(db) as first:
        assert first.client is not None
        made = first.client.post("/v1/assemble", json={**sample_request(), "store": True, "record_id": "keep"})
        assert made.status_code == 200 and made.json()["stored"]["id"] == "keep"
        direct = first.client.post("/v1/replay", json=made.json()).json()
    with RunningService(db) as second:
        assert second.client is not None
        again = second.client.post("/v1/replay", json={"ref": "records/keep"})
        assert again.status_code == 200
        assert {k: v for k, v in again.json().items() if k != "refs"} == direct
        assert again.json()["refs"][0]["ref"] == "records/keep"


@pytest.mark.parametrize("field, value, path", [
    ("preset", "/etc/passwd", "$.preset"), ("card", "sample-card.json", "$.card"), ("chat", "chat.jsonl", "$.chat"),
    ("books", ["book.json"], "$.books[0]"), ("books", [{"book": "b.json", "source": "global"}], "$.books[0]"),
    ("group", {"members": ["Mira"], "cards": ["/etc/passwd"]}, "$.group.cards[0]"),
])
def test_paths_are_refused_the_service_reads_no_server_files(client: httpx.Client, field: str, value: Any,
                                                             path: str) -> None:
    answer = client.post("/v1/assemble", json={**sample_request(), field: value})
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "SERVICE_REQUEST_INVALID" and answer.json()["error"]["path"] == path


def test_invalid_requests_carry_the_request_api_code_and_path(client: httpx.Client) -> None:
    answer = client.post("/v1/assemble", json={**sample_request(), "bogus": 1})
    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "REQUEST_INVALID" and answer.json()["error"]["path"] == "$.bogus"
    missing = client.post("/v1/assemble", json={**sample_request(), "preset": {"ref": "presets/none"}})
    assert missing.status_code == 404 and missing.json()["error"]["path"] == "$.preset"


def test_chat_completions_forward_the_assembled_messages(client: httpx.Client, upstream: Upstream) -> None:
    request = sample_request()
    client.put("/v1/library/presets/sample", json=request["preset"])
    expected = client.post("/v1/assemble", json=request).json()["messages"]
    before = len(upstream.received)
    answer = client.post("/v1/chat/completions", json={
        "model": "m", "temperature": 0.5, "messages": request["chat"]["messages"],
        "tavernbox": {"preset": {"ref": "presets/sample"}, "card": request["card"], "books": request["books"],
                      "user": request["user"], "author_note": request["author_note"],
                      "world_info": request["world_info"], "options": request["options"]}})
    assert answer.status_code == 200, answer.text
    sent = upstream.received[before]
    assert sent["path"] == "/v1/chat/completions" and sent["auth"] == "Bearer upstream-secret"
    assert sent["body"]["messages"] == expected
    assert sent["body"]["model"] == "m" and sent["body"]["temperature"] == 0.5 and "tavernbox" not in sent["body"]
    assert answer.json()["choices"][0]["message"]["content"] == f"{len(expected)} messages"
    assert answer.headers["x-tavernbox-refs"].startswith("presets/sample@")


def test_streaming_is_passed_through_unchanged(client: httpx.Client) -> None:
    request = sample_request()
    body = {"model": "m", "stream": True, "messages": request["chat"]["messages"],
            "tavernbox": {"preset": request["preset"], "card": request["card"]}}
    with client.stream("POST", "/v1/chat/completions", json=body) as answer:
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
        received = b"".join(answer.iter_raw())
    assert received == b"".join(SSE_CHUNKS)


def test_streamed_chunks_reach_the_client_before_the_upstream_finishes(client: httpx.Client,
                                                                     upstream: Upstream) -> None:
    request = sample_request()
    body = {"model": "gated", "stream": True, "messages": request["chat"]["messages"],
            "tavernbox": {"preset": request["preset"]}}
    upstream.gate.clear()
    with client.stream("POST", "/v1/chat/completions", json=body) as answer:
        chunks = answer.iter_raw()
        first = b""
        while len(first) < len(SSE_CHUNKS[0]):
            first += next(chunks)
        upstream.gate.set()  # the upstream sends the rest only now: nothing was buffered on the way
        rest = b"".join(chunks)
    assert first + rest == b"".join(SSE_CHUNKS) and upstream.gate_opened_by_client[-1] is True


def test_with_the_openai_client(service: RunningService) -> None:
    openai = pytest.importorskip("openai", reason="the openai client is optional (pip install openai)")
    request = sample_request()
    api = openai.OpenAI(base_url=service.base + "/v1", api_key="test-token-0123456789")
    reply = api.chat.completions.create(model="m", messages=request["chat"]["messages"],
                                        extra_body={"tavernbox": {"preset": request["preset"], "card": request["card"]}})
    assert reply.choices[0].message.content.endswith("messages")


def test_upstream_errors_pass_through_and_unreachable_is_502(client: httpx.Client, tmp_path: Path) -> None:
    request = sample_request()
    body = {"model": "missing", "messages": request["chat"]["messages"], "tavernbox": {"preset": request["preset"]}}
    passed = client.post("/v1/chat/completions", json=body)
    assert passed.status_code == 404 and passed.json() == {"error": {"message": "no such model"}}
    with RunningService(str(tmp_path / "x.db"), upstream="http://127.0.0.1:9/v1") as dead:
        assert dead.client is not None
        answer = dead.client.post("/v1/chat/completions", json={**body, "model": "m"})
        assert answer.status_code == 502 and answer.json()["error"]["code"] == "SERVICE_UPSTREAM_FAILED"


def test_no_upstream_is_503_with_a_code(tmp_path: Path) -> None:
    with RunningService(str(tmp_path / "n.db")) as svc:
        assert svc.client is not None
        answer = svc.client.post("/v1/chat/completions", json={"model": "m", "messages": []})
        assert answer.status_code == 503 and answer.json()["error"]["code"] == "SERVICE_UPSTREAM_UNCONFIGURED"


@pytest.mark.parametrize("body, path", [
    ({"model": "m", "messages": [{"role": "user", "content": "hi"}]}, "$.tavernbox"),
    ({"model": "m", "messages": [], "tavernbox": {}}, "$.messages"),
    ({"model": "m", "messages": [{"role": "tool", "content": "x"}], "tavernbox": {}}, "$.messages[0].role"),
    ({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url"}]}], "tavernbox": {}},
     "$.messages[0].content[0]"),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}], "tavernbox": {"chat": {}}}, "$.tavernbox.chat"),
])
def test_chat_completion_requests_that_cannot_be_assembled(client: httpx.Client, body: dict[str, Any],
                                                           path: str) -> None:
    answer = client.post("/v1/chat/completions", json=body)
    assert answer.status_code == 400 and answer.json()["error"]["path"] == path


def test_text_completions_forward_sillytaverns_prompt_and_stop_strings(client: httpx.Client,
                                                                      upstream: Upstream) -> None:
    from tavernbox.sillytavern.text_completion import assemble_text_completion

    request = {k: v for k, v in sample_request().items() if k != "preset"}
    request["text_completion"] = {
        "instruct": {"input_sequence": "<|user|>", "output_sequence": "<|bot|>", "stop_sequence": "</s>"},
        "context": {"story_string": "{{#if description}}{{description}}\n{{/if}}{{trim}}", "chat_start": ""},
        "sysprompt": None}
    expected = assemble_text_completion(request)
    before = len(upstream.received)
    answer = client.post("/v1/completions", json={"model": "m", "max_tokens": 64, "stop": ["###"],
                                                   "tavernbox": request})
    assert answer.status_code == 200, answer.text
    sent = upstream.received[before]
    assert sent["path"] == "/v1/completions" and "tavernbox" not in sent["body"]
    assert sent["body"]["prompt"] == expected.prompt and sent["body"]["max_tokens"] == 64
    assert sent["body"]["stop"] == [*expected.stop, "###"]
    assert answer.json()["choices"][0]["text"] == f"{len(expected.prompt)} characters"
    refused = client.post("/v1/completions", json={"model": "m", "tavernbox": {"card": request["card"]}})
    assert refused.status_code == 400 and refused.json()["error"]["path"] == "$.tavernbox.text_completion"
    with client.stream("POST", "/v1/completions", json={"model": "m", "stream": True, "tavernbox": request}) as streamed:
        assert streamed.status_code == 200 and streamed.headers["content-type"].startswith("text/event-stream")
        assert b"".join(streamed.iter_raw()) == b"".join(SSE_CHUNKS)


def test_assemble_answers_a_text_completion_prompt_with_its_sources(client: httpx.Client) -> None:
    from tavernbox.sillytavern.text_completion import assemble_text_completion

    request = {k: v for k, v in sample_request().items() if k != "preset"}
    request["text_completion"] = {
        "instruct": {"input_sequence": "<|user|>", "output_sequence": "<|bot|>", "stop_sequence": "</s>"},
        "context": {"story_string": "{{#if description}}{{description}}\n{{/if}}{{trim}}", "chat_start": ""},
        "sysprompt": None}
    expected = assemble_text_completion(request).to_dict()
    answer = client.post("/v1/assemble", json=request)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["prompt"], body["stop"]) == (expected["prompt"], expected["stop"])
    assert body["provenance"] == expected["provenance"] and body["provenance"][0]["source"] == "story_string"
    assert "messages" not in body
    refused = client.post("/v1/assemble", json={**request, "store": True})
    assert refused.status_code == 400 and refused.json()["error"]["path"] == "$.store"
