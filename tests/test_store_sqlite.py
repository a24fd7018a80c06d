"""The SQLite snapshot store: atomic commits that survive a killed writer, integrity checks, and
the seed's inn/dock retention table persisted between three requests."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _assembler_support import chat, preset, registry, rule

from tavernbox import TemplateError
from tavernbox.assembler import Assembler
from tavernbox.store import MemorySnapshotStore, SQLiteSnapshotStore

# -- killed mid-write ---------------------------------------------------------------------------------

WRITER = r"""
import sys
from tavernbox.store import SQLiteSnapshotStore
from tavernbox.store.base import encode_records

def expected(n):
    # revision n holds (n % 5) + 1 records of ~40 KiB each, all derived from n
    return [{"n": n, "i": i, "text": f"{n}:{i}:" + "x" * 40000} for i in range(n % 5 + 1)]

store = SQLiteSnapshotStore(sys.argv[1], journal=sys.argv[2], keep=4)
n = store.load("s").revision
print("ready", flush=True)
while True:
    n += 1
    store.save("s", expected(n), expected_revision=n - 1)
    print(n, flush=True)
"""


def expected(n: int) -> list[dict[str, Any]]:
    return [{"n": n, "i": i, "text": f"{n}:{i}:" + "x" * 40000} for i in range(n % 5 + 1)]


@pytest.mark.parametrize("journal", ["wal", "rollback"])
def test_a_writer_killed_mid_write_loses_no_committed_record(tmp_path: Path, journal: str) -> None:
    db = tmp_path / "snapshots.db"
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    last_committed = 0
    for round_ in range(3):
        proc = subprocess.Popen([sys.executable, str(script), str(db), journal], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        printed = []
        deadline = time.monotonic() + 0.25 + 0.1 * round_
        while time.monotonic() < deadline:  # let it commit a few revisions, then kill it mid-loop
            line = proc.stdout.readline()
            if not line:
                break
            printed.append(int(line))
        os.kill(proc.pid, signal.SIGKILL)
        rest = proc.stdout.read()
        proc.wait()
        printed.extend(int(x) for x in rest.split())
        assert proc.returncode == -signal.SIGKILL
        assert printed, "the writer committed nothing before it was killed"
        store = SQLiteSnapshotStore(db, journal=journal, keep=4)  # type: ignore[arg-type]
        try:
            assert store.check() == []
            current = store.load("s")
            # every revision the writer reported as committed is there; at most one more (committed,
            # killed before it could print)
            assert printed[-1] <= current.revision <= printed[-1] + 1
            assert current.revision > last_committed
            assert list(current.records) == expected(current.revision)
            for kept in store.history("s"):
                assert list(kept.records) == expected(kept.revision)
            last_committed = current.revision
        finally:
            store.close()


# -- integrity ----------------------------------------------------------------------------------------


def test_a_record_changed_behind_the_stores_back_is_reported_corrupt(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SQLiteSnapshotStore(db) as store:
        store.save("s", [{"text": "inn"}])
    raw = sqlite3.connect(db)
    raw.execute("UPDATE records SET body = ? WHERE session_id = 's'", ('{"text":"dock"}',))
    raw.commit()
    raw.close()
    with SQLiteSnapshotStore(db) as store:
        with pytest.raises(TemplateError) as err:
            store.load("s")
        assert err.value.code == "SNAPSHOT_STORE_CORRUPT"
        assert store.check() and "digest" in store.check()[0]


def test_a_missing_record_row_is_reported_corrupt(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SQLiteSnapshotStore(db) as store:
        store.save("s", [{"a": 1}, {"b": 2}])
    raw = sqlite3.connect(db)
    raw.execute("DELETE FROM records WHERE position = 1")
    raw.commit()
    raw.close()
    with SQLiteSnapshotStore(db) as store, pytest.raises(TemplateError) as err:
        store.load("s")
    assert err.value.code == "SNAPSHOT_STORE_CORRUPT"


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    db.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(TemplateError) as err:
        SQLiteSnapshotStore(db)
    assert err.value.code == "SNAPSHOT_STORE_CORRUPT"


def test_a_newer_schema_is_refused_rather_than_misread(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    raw = sqlite3.connect(db)
    raw.execute("PRAGMA user_version = 99")
    raw.close()
    with pytest.raises(TemplateError) as err:
        SQLiteSnapshotStore(db)
    assert err.value.code == "SNAPSHOT_STORE_UNAVAILABLE"


def test_wal_is_the_default_journal_and_rollback_is_available(tmp_path: Path) -> None:
    for journal, mode in (("wal", "wal"), ("rollback", "delete")):
        with SQLiteSnapshotStore(tmp_path / f"{journal}.db", journal=journal) as store:  # type: ignore[arg-type]
            assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == mode
            assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_two_connections_see_each_others_commits_and_conflict_cleanly(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SQLiteSnapshotStore(db) as a, SQLiteSnapshotStore(db) as b:
        seen = a.load("s").revision
        b.save("s", [{"from": "b"}])
        with pytest.raises(TemplateError) as err:
            a.save("s", [{"from": "a"}], expected_revision=seen)
        assert err.value.code == "SNAPSHOT_STORE_CONFLICT"
        assert a.load("s").records == ({"from": "b"},)


# -- the seed's retention table through the store -------------------------------------------------------

#: seed 002: one memory entry moves from "Location: inn" to "Location: dock" (request, native chat,
#: memory text, the messages sent under "retain snapshots")
INN_DOCK = [
    (["s:system:S", "u1:user:U1"], "Location: inn", ["S", "U1", "Location: inn"]),
    (["s:system:S", "u1:user:U1", "a1:assistant:A1", "u2:user:U2"], "Location: dock",
     ["S", "U1", "Location: inn", "A1", "U2", "Location: dock"]),
    (["s:system:S", "u1:user:U1", "a1:assistant:A1", "u2:user:U2", "a2:assistant:A2", "u3:user:U3"], "Location: dock",
     ["S", "U1", "Location: inn", "A1", "U2", "Location: dock", "A2", "U3"]),
]


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_seed_inn_dock_table_persists_between_three_requests(tmp_path: Path, kind: str) -> None:
    reg = registry()
    reg.register({"id": "example.memory", "plugin_id": "example", "name": "memory",
                  "resolve": lambda c, r: {"blocks": [{"type": "text", "id": "where", "role": "user",
                                                       "text": c["assets"]["memory"]}]}})
    rules = [rule("native-system"), rule("history"), rule("input"), rule("example.memory", "m", lifetime="snapshot")]
    revisions = []
    memory_store = MemorySnapshotStore()
    for native, memory, sent in INN_DOCK:
        # a fresh store object per request: the records must come from the file, not from memory
        store: Any = SQLiteSnapshotStore(tmp_path / "chat.db") if kind == "sqlite" else memory_store
        messages = chat(*native)
        request = {"preset": preset(rules), "messages": messages, "input_ids": [messages[-1]["id"]],
                   "assets": {"memory": memory}, "session_id": "chat-1"}
        result = Assembler(reg, store=store).assemble(request)
        assert [m["content"] for m in result.messages] == sent
        loaded = store.load("chat-1")
        revisions.append((loaded.revision, len(loaded.records)))
        assert list(loaded.records) == result.snapshots
        if kind == "sqlite":
            store.close()
    assert revisions == [(1, 1), (2, 2), (3, 2)]  # request 3: unchanged, no new copy


def test_a_preview_reads_the_store_but_never_writes_it(tmp_path: Path) -> None:
    reg = registry()
    rules = [rule("native-system"), rule("history"), rule("input"),
             rule("custom", "c", text="NOTE", lifetime="snapshot")]
    with SQLiteSnapshotStore(tmp_path / "p.db") as store:
        messages = chat("s:system:S", "u1:user:U1")
        request = {"preset": preset(rules), "messages": messages, "input_ids": ["u1"], "session_id": "p"}
        Assembler(reg, store=store).assemble({**request, "preview": True})
        assert store.load("p").revision == 0
        Assembler(reg, store=store).assemble(request)
        assert store.load("p").revision == 1


def test_a_concurrent_save_between_load_and_save_fails_the_request(tmp_path: Path) -> None:
    reg = registry()
    rules = [rule("native-system"), rule("history"), rule("input"),
             rule("custom", "c", text="NOTE", lifetime="snapshot")]

    class Racing(MemorySnapshotStore):
        def load(self, session_id: str) -> Any:
            loaded = super().load(session_id)
            super().save(session_id, [])  # another process saves right after this request read
            return loaded

    store = Racing()
    messages = chat("s:system:S", "u1:user:U1")
    request = {"preset": preset(rules), "messages": messages, "input_ids": ["u1"], "session_id": "race"}
    with pytest.raises(TemplateError) as err:
        Assembler(reg, store=store).assemble(request)
    assert err.value.code == "SNAPSHOT_STORE_CONFLICT"
