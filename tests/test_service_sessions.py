"""``/v1/assemble/rules`` and ``/v1/sessions``: rule-file strategies whose sessions keep their snapshot
records in the service's database, across requests and restarts (seed 002/003 over HTTP)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from _assembler_support import preset, rule
from click.testing import CliRunner
from service_support import RunningService

from tavernbox.cli.main import main

RULES = [rule("native-system"), rule("history"), rule("input"), rule("custom", "c", text="NOTE", lifetime="snapshot")]


def chat(*items: str) -> list[dict[str, Any]]:
    out = []
    for item in items:
        mid, role, content = item.split(":", 2)
        out.append({"id": mid, "role": role, "content": content})
    return out


def test_preview_reads_actual_writes_and_the_session_survives_a_restart(tmp_path: Path) -> None:
    db = str(tmp_path / "sessions.db")
    first_messages = chat("s:system:S", "u1:user:U1")
    request = {"preset": preset(RULES), "messages": first_messages, "input_ids": ["u1"], "session_id": "chat-1"}
    with RunningService(db) as svc:
        assert svc.client is not None
        preview = svc.client.post("/v1/assemble/rules", json={**request, "preview": True})
        assert preview.status_code == 200, preview.text
        assert svc.client.get("/v1/sessions/chat-1/snapshots").json()["revision"] == 0  # a preview never writes
        actual = svc.client.post("/v1/assemble/rules", json=request)
        assert actual.status_code == 200
        stored = svc.client.get("/v1/sessions/chat-1/snapshots").json()
        assert stored["revision"] == 1 and stored["records"] == actual.json()["snapshots"]
    (tmp_path / "p.json").write_text(json.dumps(preset(RULES)))
    (tmp_path / "c.json").write_text(json.dumps({"messages": first_messages, "input_ids": ["u1"]}))
    cli = CliRunner().invoke(main, ["assemble", "--strategy", str(tmp_path / "p.json"), "--chat",
                                    str(tmp_path / "c.json"), "--json"])
    assert cli.exit_code == 0
    assert json.loads(cli.output)["messages"] == actual.json()["messages"]  # the CLI's answer for the same request
    later = chat("s:system:S", "u1:user:U1", "a1:assistant:A1", "u2:user:U2")
    with RunningService(db) as again:
        assert again.client is not None
        assert again.client.get("/v1/sessions/chat-1/snapshots").json()["revision"] == 1
        answer = again.client.post("/v1/assemble/rules", json={**request, "messages": later, "input_ids": ["u2"]})
        assert answer.status_code == 200
        assert [m["content"] for m in answer.json()["messages"]].count("NOTE") >= 1
        assert again.client.get("/v1/sessions/chat-1/snapshots").json()["revision"] == 2
        assert again.client.delete("/v1/sessions/chat-1").json()["deleted"] is True
        assert again.client.get("/v1/sessions/chat-1/snapshots").json() == {"session_id": "chat-1", "revision": 0,
                                                                              "records": []}


def test_builtin_ids_refs_and_bad_presets(tmp_path: Path) -> None:
    with RunningService(str(tmp_path / "b.db")) as svc:
        assert svc.client is not None
        svc.client.put("/v1/library/presets/rules", json=preset(RULES))
        by_ref = svc.client.post("/v1/assemble/rules", json={"preset": {"ref": "presets/rules"},
                                                              "messages": chat("u1:user:hi"), "input_ids": ["u1"]})
        assert by_ref.status_code == 200 and by_ref.json()["refs"][0]["id"] == "rules"
        builtin = svc.client.post("/v1/assemble/rules", json={"preset": "builtin-native-roles",
                                                               "messages": chat("u1:user:hi"), "input_ids": ["u1"]})
        assert builtin.status_code == 200, builtin.text
        for bad in ("builtin-st", "nonsense"):
            answer = svc.client.post("/v1/assemble/rules", json={"preset": bad, "messages": [], "input_ids": []})
            assert answer.status_code == 422 and answer.json()["error"]["code"] == "ASSEMBLY_STRATEGY_UNKNOWN"
            assert answer.json()["error"]["path"] == "$.preset"
        too_long = svc.client.get("/v1/sessions/" + "x" * 600 + "/snapshots")
        assert too_long.status_code == 400 and too_long.json()["error"]["code"] == "SNAPSHOT_STORE_INVALID"
