"""What the lease tests share with the PostgreSQL ones: a request built from refs, the stale-lease check,
and the two-process scenario (process B's write makes process A's replay stale)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

CORPORA = Path(__file__).resolve().parents[1] / "corpora"


@cache
def _sample(name: str) -> str:
    return (CORPORA / name).read_text(encoding="utf-8")


def preset() -> dict[str, Any]:
    """The bundled sample preset (a fresh copy)."""
    return json.loads(_sample("sample-preset.json"))


def card() -> dict[str, Any]:
    """The bundled sample card (a fresh copy)."""
    return json.loads(_sample("sample-card.json"))


def assemble_body(**extra: Any) -> dict[str, Any]:
    return {"preset": {"ref": "presets/p"}, "card": {"ref": "cards/c"},
            "chat": {"messages": [{"role": "user", "content": "Hello!"}]}, **extra}


def stale(answer: Any, *fragments: str) -> None:
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "SOURCE_CONTENT_CHANGED", error
    for fragment in fragments:
        assert fragment in error["message"], error["message"]


def two_processes_make_a_replay_stale(a: Any, b: Any) -> None:
    """A stores a record built from refs; B edits one asset; A's replay is stale, against the recorded revisions not."""
    assert a.put("/v1/library/presets/p", json=preset()).status_code == 201
    assert a.put("/v1/library/cards/c", json=card()).status_code == 201
    made = a.post("/v1/assemble", json=assemble_body(store=True, record_id="r"))
    assert made.status_code == 200, made.text
    first = a.post("/v1/replay", json={"ref": "records/r"})
    assert first.status_code == 200
    assert b.put("/v1/library/cards/c", json={**card(), "name": "Renamed"}, headers={"If-Match": '"1"'}).status_code == 200
    stale(a.post("/v1/replay", json={"ref": "records/r"}), "cards/c was read at revision 1; the library now holds revision 2")
    again = a.post("/v1/replay", json={"record": {"ref": "records/r"}, "revisions": "recorded"})
    assert again.status_code == 200 and again.json()["messages"] == first.json()["messages"]
    fresh = a.post("/v1/assemble", json=assemble_body())
    assert fresh.status_code == 200 and {(r["id"], r["revision"]) for r in fresh.json()["refs"]} == {("p", 1), ("c", 2)}
