"""Library revisions are the leases the bridge checks (issue 15).

A request that names stored assets (``{"ref": "presets/p"}``) holds one lease per ref, ``(kind,
id, revision)``. The bridge checks them at its own check points while a prompt template renders
(``getpreset``/``getchar``/``getwi`` over stored assets hold the asset's lease), the assembler
after every source and before the session's snapshots are saved, the service before a record is
stored, an answer sent or a completion forwarded, and a replay checks the revisions its record
names. An asset that changed meanwhile fails the request with ``SOURCE_CONTENT_CHANGED`` naming
the asset and both revisions; nothing is stored and nothing is read again.

The mid-request change is a real write to the real library (SQLite, and PostgreSQL when
``TAVERNBOX_TEST_POSTGRES_URL`` names a server), made by a wrapper the moment the first lease check
reads the library (after resolution, before the check). Two service processes on one SQLite file
show the same across processes (on PostgreSQL: test_service_postgres.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _assembler_support import rule
from fastapi.testclient import TestClient
from lease_support import assemble_body, card, preset, stale, two_processes_make_a_replay_stale
from service_support import RunningService

from tavernbox import TemplateError
from tavernbox.assembler import Assembler
from tavernbox.bridge import (
    AssetLease,
    InputLeases,
    LeaseError,
    LeaseSet,
    StaleLease,
    render_with_dependencies,
    render_with_sources,
    sources_from_inputs,
)
from tavernbox.service import ServiceConfig, create_app
from tavernbox.service.leases import MAX_AGE_S, LibraryLeases
from tavernbox.store import MemorySnapshotStore, SQLiteLibrary, Storage, open_database
from tavernbox.strategies import st_registry



def main_prompt() -> str:
    return next(p["content"] for p in preset()["prompts"] if p["identifier"] == "main")

TEMPLATE_KIND = "pmp-dsh-tavern/prompt-template"


def edited(preset: dict[str, Any], text: str) -> dict[str, Any]:
    """``preset`` with its main prompt replaced (a new revision's content)."""
    return {**preset, "prompts": [{**p, "content": text} if p["identifier"] == "main" else p for p in preset["prompts"]]}


class Head:
    """What a fake library holds for one asset: a probe that answers ``now``."""

    def __init__(self) -> None:
        self.now: tuple[int, str | None] | None = (1, "sha256:one")
        self.calls = 0

    def probe(self) -> tuple[int, str | None] | None:
        self.calls += 1
        return self.now


# -- the lease itself ------------------------------------------------------------------------------------------------

def test_an_asset_lease_names_the_asset_and_both_revisions() -> None:
    head = Head()
    lease = AssetLease("presets", "p", 1, "sha256:one", probe=head.probe)
    assert lease.check_current() == "current" and lease.name == "presets/p@1"
    head.now = (2, "sha256:two")
    stale = lease.check_current()
    assert isinstance(stale, StaleLease) and stale.state == "content_changed"
    assert stale.detail == "presets/p was read at revision 1; the library now holds revision 2"
    head.now = None
    assert "now holds no live revision" in lease.check_current().detail  # type: ignore[union-attr]
    head.now = (1, "sha256:other")  # same number, other content (a restored database): stale too
    assert "no longer has the digest" in lease.check_current().detail  # type: ignore[union-attr]
    pinned = AssetLease("presets", "p", 1, "sha256:one", probe=lambda: None, pinned=True)
    assert "pinned revision 1, which the library no longer holds" in pinned.check_current().detail  # type: ignore[union-attr]

    def broken() -> None:
        raise OSError("database unreachable")

    held = LeaseSet()
    held.add("presets/p@1", AssetLease("presets", "p", 1, None, probe=broken).check_current)  # type: ignore[arg-type]
    with pytest.raises(LeaseError) as err:
        held.check("now")
    assert err.value.code == "SOURCE_POLICY_CHANGED"  # an unanswerable lease never passes


def test_input_leases_cover_the_input_they_were_read_into() -> None:
    leases = InputLeases()
    for path in ("$.assets.st_preset", "$.assets.world_books[1]", "$.assets", "$.assets.prompt_templates[0].content"):
        leases.add(path, path, lambda: "current")
    assert [label for label, _ in leases.covering("$.assets.st_preset")] == ["$.assets.st_preset", "$.assets"]
    assert [label for label, _ in leases.covering("$.assets.world_books[1]")] == ["$.assets.world_books[1]", "$.assets"]
    assert [label for label, _ in leases.covering("$.assets.world_books[10]")] == ["$.assets"]
    assert [label for label, _ in leases.covering("$.assets.prompt_templates[0]")] == [
        "$.assets", "$.assets.prompt_templates[0].content"]
    assert leases.covering("$.assetsX") == []


# -- the bridge holds a stored asset's lease for the lookups that read it ---------------------------------------------

class FlipOnLookup:
    """The standard sources, and a write to the library when the template makes a lookup of ``kind``."""

    def __init__(self, sources: Any, kind: str, action: Any) -> None:
        self.sources, self.kind, self.action = sources, kind, action

    def resolve(self, request: Any) -> Any:
        if request.kind == self.kind:
            self.action()
        return self.sources.resolve(request)


def bridged_sources(head: Head) -> Any:
    sources = sources_from_inputs(preset=preset(), card=card())
    sources.input_leases = {"preset": (AssetLease("presets", "p", 1, "sha256:one", probe=head.probe).check_current,)}
    return sources


def test_the_bridge_fails_a_render_whose_stored_preset_changed_mid_render() -> None:
    head = Head()
    template = "<%- getpreset('main') %>|<%- getchar() %>"
    calm = render_with_dependencies(template, FlipOnLookup(bridged_sources(head), "character", lambda: None))
    assert calm.text.startswith(main_prompt()[:20]) and head.calls > 0
    head = Head()

    def write() -> None:
        head.now = (2, "sha256:two")

    with pytest.raises(LeaseError) as err:
        render_with_dependencies(template, FlipOnLookup(bridged_sources(head), "character", write))
    assert err.value.code == "SOURCE_CONTENT_CHANGED"
    assert "(after a lookup was resolved)" in err.value.message  # the bridge's own check point, mid-render
    assert "presets/p was read at revision 1; the library now holds revision 2" in err.value.message


def test_a_lookup_holds_only_the_lease_of_the_asset_it_read() -> None:
    head = Head()
    head.now = (2, "sha256:two")  # the preset moved on, but this template never reads it
    result = render_with_dependencies("<%- getchar() %>", bridged_sources(head))
    assert result.text == card().get("data", card())["description"]
    assert head.calls == 0


def test_mid_render_checks_read_the_library_at_most_once_per_interval(tmp_path: Path) -> None:
    """A template awaiting in a loop makes the bridge check its leases after every job step: bounded reads."""
    library = SQLiteLibrary(tmp_path / "lib.db")
    entry = library.put("presets", "p", preset())
    ref = {"ref": "presets/p", "kind": "presets", "id": "p", "revision": entry.revision, "digest": entry.digest,
           "path": "$.preset"}
    leased = LibraryLeases(library, [ref])
    sources = sources_from_inputs(preset=preset())
    template = "<% for (let i = 0; i < 900; i++) { await Promise.resolve(i); } %><%= getpreset('main').length %>"
    started = time.monotonic()
    result = render_with_sources(template, sources, leases=leased.leases.lease_set())
    elapsed = time.monotonic() - started
    assert result.text == str(len(main_prompt())) and result.usage.job_steps >= 1800  # two passes of 900 awaits
    assert 1 <= leased.reads <= 2 + elapsed / MAX_AGE_S
    assert leased.reads < result.usage.job_steps / 10
    library.put("presets", "p", edited(preset(), "new"))
    with pytest.raises(TemplateError) as err:  # a commit check always reads anew
        leased.check("before the answer was sent")
    assert err.value.code == "SOURCE_CONTENT_CHANGED" and "now holds revision 2" in err.value.message
    library.close()


# -- the assembler: leases checked by the bridge, after every source, and before the snapshots are saved -------------

def rules_request(templates: list[dict[str, Any]]) -> dict[str, Any]:
    rules = [rule("native-system"), rule(TEMPLATE_KIND), rule("history"), rule("input")]
    return {"preset": {"format": "dsh-tavern-request-assembly", "version": 1, "name": "t", "rules": rules},
            "messages": [{"id": "s", "role": "system", "content": "S"}, {"id": "u", "role": "user", "content": "hi"}],
            "input_ids": ["u"], "session_id": "chat-1",
            "assets": {"st_preset": preset(), "prompt_templates": templates}}


def reads_preset() -> dict[str, Any]:
    return {"id": "prompt-template:scene", "name": "Scene", "content": "MAIN=<%= getpreset('main').length %>",
            "enabled": True, "session_ids": ["*"]}


def preset_leases(head: Head, **kw: Any) -> InputLeases:
    leases = InputLeases(**kw)
    leases.add("$.assets.st_preset", "presets/p@1", AssetLease("presets", "p", 1, "sha256:one", probe=head.probe).check_current)
    return leases


def test_an_assembly_whose_stored_preset_changes_mid_render_fails_and_saves_nothing() -> None:
    store = MemorySnapshotStore()
    head = Head()
    ok = Assembler(st_registry(), store=store).assemble(rules_request([reads_preset()]), leases=preset_leases(head))
    assert f"MAIN={len(main_prompt())}" in ok.messages[0]["content"] and store.load("chat-1").revision == 1
    first_check = Head()
    original = first_check.probe

    def bump_on_first_read() -> tuple[int, str | None] | None:  # another client writes right after resolution
        first_check.now = (2, "sha256:two")
        return original()

    first_check.probe = bump_on_first_read  # type: ignore[method-assign]
    other = MemorySnapshotStore()
    with pytest.raises(LeaseError) as err:
        Assembler(st_registry(), store=other).assemble(rules_request([reads_preset()]),
                                                       leases=preset_leases(first_check))
    assert err.value.code == "SOURCE_CONTENT_CHANGED" and "after a lookup was resolved" in err.value.message
    assert "presets/p was read at revision 1; the library now holds revision 2" in err.value.message
    assert other.load("chat-1").revision == 0


KEEPER = {"spec": "chara_card_v2", "spec_version": "2.0",
          "data": {"name": "Mira", "description": "Mira keeps the lighthouse on the northern cliff."}}
BOOK = {"name": "Lore", "entries": {"0": {"uid": 0, "key": ["gull"], "comment": "Gull", "content": "GULL ROCK"}}}


@pytest.mark.parametrize("path, content, extra, fields, expected", [
    ("$.assets.world_books[0]", "<%- getwi('Lore', 'Gull') %>",
     {"world_books": [BOOK], "world_info": [{"book": "Lore", "uid": 0, "content": "GULL ROCK"}]}, {}, "GULL ROCK"),
    ("$.assets.mvu", "HP <%= getvar('stat_data.hp') %>", {"mvu": {"name": "hero", "stat_data": {"hp": 7}}},
     {"variable_resource_id": "mvu:hero"}, "HP 7"),
    ("$.assets.character", "<%- getchar() %>", {"character": KEEPER}, {}, KEEPER["data"]["description"]),
])
def test_getwi_getvar_and_getchar_hold_the_lease_of_the_stored_asset_they_read(path: str, content: str,
                                                                               extra: dict[str, Any],
                                                                               fields: dict[str, Any],
                                                                               expected: str) -> None:
    def run(head: Head, store: MemorySnapshotStore) -> Any:
        body = rules_request([{**reads_preset(), "content": content, **fields}])
        body["assets"].update(extra)
        leases = InputLeases()
        leases.add(path, "asset@1", AssetLease("books", "x", 1, "sha256:one", probe=head.probe).check_current)
        return Assembler(st_registry(), store=store).assemble(body, leases=leases)

    calm = run(Head(), MemorySnapshotStore())
    assert calm.messages[0]["content"] == f"S\n\n{expected}"
    bumped = Head()
    original = bumped.probe

    def bump_on_first_read() -> tuple[int, str | None] | None:
        bumped.now = (2, "sha256:two")
        return original()

    bumped.probe = bump_on_first_read  # type: ignore[method-assign]
    store = MemorySnapshotStore()
    with pytest.raises(LeaseError) as err:
        run(bumped, store)
    assert err.value.code == "SOURCE_CONTENT_CHANGED" and "after a lookup was resolved" in err.value.message
    assert "books/x was read at revision 1; the library now holds revision 2" in err.value.message
    assert store.load("chat-1").revision == 0


def test_a_change_seen_only_at_the_commit_check_still_fails_and_saves_nothing() -> None:
    head = Head()

    def refreshed() -> None:  # the commit check reads anew: the change lands just before it
        head.now = (2, "sha256:two")

    store = MemorySnapshotStore()
    with pytest.raises(LeaseError) as err:
        Assembler(st_registry(), store=store).assemble(rules_request([reads_preset()]),
                                                       leases=preset_leases(head, refresh=refreshed))
    assert "before the result was committed" in err.value.message and store.load("chat-1").revision == 0


# -- the service, in process, over the real SQLite library -----------------------------------------------------------

class BumpingLibrary:
    """The real library; ``bump`` = (kind, id, data) is written by "another client" when the first lease check reads."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.bump: tuple[str, str, Any] | None = None
        self.down = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def heads(self, items: Any) -> Any:
        if self.down:
            raise TemplateError("the database cannot be read", code="SNAPSHOT_STORE_UNAVAILABLE")
        if self.bump is not None:
            kind, asset_id, data = self.bump
            self.bump = None
            self.inner.put(kind, asset_id, data)
        return self.inner.heads(items)


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "postgres":
        from postgres_support import fresh_database

        with fresh_database() as url:
            yield url
    else:
        yield str(tmp_path / "s.db")


@pytest.fixture
def served(database: str) -> Iterator[tuple[TestClient, BumpingLibrary]]:
    storage = open_database(database)
    library = BumpingLibrary(storage.library)
    wrapped = Storage(storage.backend, storage.where, storage.snapshots, library)  # type: ignore[arg-type]
    app = create_app(ServiceConfig(storage=wrapped, token="t", upstream="http://127.0.0.1:9/v1"))
    with TestClient(app, base_url="http://127.0.0.1", headers={"Authorization": "Bearer t"}) as client:  # type: ignore[arg-type]
        yield client, library
    storage.close()


def test_assemble_fails_when_a_ref_changes_mid_request_and_stores_nothing(served: Any) -> None:
    client, library = served
    client.put("/v1/library/presets/p", json=preset())
    client.put("/v1/library/cards/c", json=card())
    library.bump = ("presets", "p", edited(preset(), "edited meanwhile"))
    answer = client.post("/v1/assemble", json=assemble_body(store=True, record_id="r"))
    stale(answer, "presets/p was read at revision 1; the library now holds revision 2")
    assert client.get("/v1/library/records/r").status_code == 404  # no record of the failed request
    calm = client.post("/v1/assemble", json=assemble_body(store=True, record_id="r"))
    assert calm.status_code == 200, calm.text
    assert {(r["id"], r["revision"]) for r in calm.json()["refs"]} == {("p", 2), ("c", 1)}
    assert any("edited meanwhile" in m["content"] for m in calm.json()["messages"])  # the new revision, read anew
    assert client.get("/v1/library/records/r").json()["data"]["refs"] == calm.json()["refs"]


def test_a_library_that_cannot_be_read_at_the_commit_check_is_its_own_error_not_a_stale_lease(served: Any) -> None:
    client, library = served
    client.put("/v1/library/presets/p", json=preset())
    client.put("/v1/library/cards/c", json=card())
    library.down = True
    answer = client.post("/v1/assemble", json=assemble_body(store=True, record_id="r"))
    assert answer.status_code == 503 and answer.json()["error"]["code"] == "SNAPSHOT_STORE_UNAVAILABLE"
    library.down = False
    assert client.get("/v1/library/records/r").status_code == 404


def test_a_pinned_ref_reads_its_revision_and_stays_current_after_newer_writes(served: Any) -> None:
    client, library = served
    client.put("/v1/library/presets/p", json=preset())
    client.put("/v1/library/cards/c", json=card())
    first = client.post("/v1/assemble", json=assemble_body()).json()
    library.bump = ("presets", "p", edited(preset(), "revision two"))
    pinned = client.post("/v1/assemble", json=assemble_body(preset={"ref": "presets/p@1"}))
    assert pinned.status_code == 200, pinned.text
    assert pinned.json()["messages"] == first["messages"] and pinned.json()["refs"][0]["revision"] == 1
    assert client.get("/v1/library/presets/p").json()["revision"] == 2


def test_chat_completions_never_forward_a_request_built_from_a_changed_asset(served: Any) -> None:
    client, library = served
    client.put("/v1/library/presets/p", json=preset())
    library.bump = ("presets", "p", edited(preset(), "x"))
    answer = client.post("/v1/chat/completions", json={
        "model": "m", "messages": [{"role": "user", "content": "Hello!"}],
        "tavernbox": {"preset": {"ref": "presets/p"}, "card": card()}})
    stale(answer, "before the request was forwarded upstream", "presets/p")  # 422, not the dead upstream's 502


def test_a_render_of_a_stored_template_that_changes_fails(served: Any) -> None:
    client, library = served
    client.put("/v1/library/templates/t", json="<%= 1 + 1 %>")
    client.put("/v1/library/presets/p", json=preset())
    library.bump = ("templates", "t", "<%= 2 + 2 %>")
    answer = client.post("/v1/render", json={"template": {"ref": "templates/t"}, "preset": {"ref": "presets/p"}})
    assert answer.status_code == 422 and answer.json()["error"]["code"] == "SOURCE_CONTENT_CHANGED"
    assert "templates/t was read at revision 1; the library now holds revision 2" in answer.json()["error"]["message"]
    assert client.post("/v1/render", json={"template": {"ref": "templates/t"}}).json()["text"] == "4"


def session_body(**assets: Any) -> dict[str, Any]:
    body = rules_request([{**reads_preset(), "content": {"ref": "templates/scene"}}])
    body["assets"]["st_preset"] = {"ref": "presets/st"}
    body["assets"].update(assets)
    return body


def test_a_rule_file_session_fails_when_a_stored_asset_changes_mid_render(served: Any) -> None:
    client, library = served
    client.put("/v1/library/presets/st", json=preset())
    client.put("/v1/library/templates/scene", json="MAIN=<%= getpreset('main').length %>")
    library.bump = ("presets", "st", edited(preset(), "short"))  # read by getpreset
    answer = client.post("/v1/assemble/rules", json=session_body())
    stale(answer, "after a lookup was resolved", "presets/st was read at revision 1; the library now holds revision 2")
    assert client.get("/v1/sessions/chat-1/snapshots").json()["revision"] == 0
    library.bump = ("templates", "scene", "MAIN=<%= getpreset('main').length %>!")  # the template's own source
    answer = client.post("/v1/assemble/rules", json=session_body())
    stale(answer, "before the render", "template prompt-template:scene", "templates/scene was read at revision 1")
    assert client.get("/v1/sessions/chat-1/snapshots").json()["revision"] == 0
    calm = client.post("/v1/assemble/rules", json=session_body())
    assert calm.status_code == 200, calm.text
    assert "MAIN=5!" in calm.json()["messages"][0]["content"]  # both new revisions, read anew
    assert {(r["id"], r["revision"]) for r in calm.json()["refs"]} == {("scene", 2), ("st", 2)}
    assert client.get("/v1/sessions/chat-1/snapshots").json()["revision"] == 1


def test_replaying_a_record_whose_assets_changed(served: Any) -> None:
    client, _ = served
    client.put("/v1/library/presets/p", json=preset())
    client.put("/v1/library/cards/c", json=card())
    made = client.post("/v1/assemble", json=assemble_body(store=True, record_id="r")).json()
    client.post("/v1/assemble", json=assemble_body(preset={"ref": "presets/p@1"}, store=True, record_id="pinned"))
    before = client.post("/v1/replay", json={"ref": "records/r"})
    assert before.status_code == 200, before.text
    direct = client.post("/v1/replay", json=made)
    assert direct.status_code == 200
    assert client.put("/v1/library/presets/p", json=edited(preset(), "later")).json()["revision"] == 2
    stale(client.post("/v1/replay", json={"ref": "records/r"}), "when the record was replayed",
          "presets/p was read at revision 1; the library now holds revision 2")
    stale(client.post("/v1/replay", json=made), "presets/p")  # an answer posted back names the same leases
    recorded = client.post("/v1/replay", json={"record": {"ref": "records/r"}, "revisions": "recorded"})
    assert recorded.status_code == 200, recorded.text
    assert {k: v for k, v in recorded.json().items() if k != "refs"} == \
        {k: v for k, v in before.json().items() if k != "refs"}
    assert client.post("/v1/replay", json={"ref": "records/pinned"}).status_code == 200  # it asked for @1
    bad = client.post("/v1/replay", json={"record": {"ref": "records/r"}, "revisions": "newest"})
    assert bad.status_code == 400 and bad.json()["error"]["path"] == "$.revisions"
    forged = client.post("/v1/replay", json={**made, "refs": [{"kind": "presets", "id": "p", "revision": "1"}]})
    assert forged.status_code == 400 and forged.json()["error"]["path"] == "$.refs[0]"


# -- two service processes: B's write makes A's replay stale ---------------------------------------------------------

def test_another_process_write_makes_a_replay_stale_on_sqlite(tmp_path: Path) -> None:
    database = str(tmp_path / "shared.db")
    with RunningService(database) as a, RunningService(database) as b:
        assert a.client is not None and b.client is not None
        two_processes_make_a_replay_stale(a.client, b.client)


def test_bench_leases_runs_and_reports_every_figure() -> None:
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_leases.py"
    done = subprocess.run([sys.executable, str(script), "--rounds", "3", "--json"], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    assert figures["database"] == "sqlite" and figures["job_steps"] >= 1800
    assert 1 <= figures["mid_render_library_reads"] < figures["job_steps"] / 10  # the probe cache bounds the reads
    assert figures["commit_check_vs_resolve"] > 0 and figures["render_library_vs_in_memory_leases"] > 0
    refused = subprocess.run([sys.executable, str(script), "--refs", "65"], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "--refs is 1 to 64" in refused.stderr
