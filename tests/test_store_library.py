"""The asset-library contract (revisions, conditional writes, tombstones, history, listing),
run against SQLite and a real PostgreSQL server, plus the versioned schema migrations."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tavernbox import TemplateError
from tavernbox.store import AssetLibrary, SQLiteLibrary, SQLiteSnapshotStore, open_database
from tavernbox.store.migrations import MIGRATIONS, SCHEMA_VERSION


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "postgres":
        from postgres_support import fresh_database

        with fresh_database() as url:
            yield url
    else:
        yield str(tmp_path / "lib.db")


@pytest.fixture
def lib(target: str) -> Iterator[Any]:
    storage = open_database(target)
    yield storage.library
    storage.close()


def code_of(fn: Any) -> str:
    with pytest.raises(TemplateError) as err:
        fn()
    return err.value.code


def test_implements_the_protocol(lib: Any) -> None:
    assert isinstance(lib, AssetLibrary)


def test_put_get_round_trip_with_revisions_and_digests(lib: Any) -> None:
    doc = {"name": "宿屋", "prompts": [{"identifier": "main", "content": 'a "quoted" \\ line\n'}], "n": 2.5}
    first = lib.put("presets", "my-preset", doc)
    assert first.revision == 1 and first.digest.startswith("sha256:") and first.data == doc
    got = lib.get("presets", "my-preset")
    assert got.data == doc and got.revision == 1 and got.digest == first.digest
    second = lib.put("presets", "my-preset", {"name": "v2"})
    assert second.revision == 2 and lib.get("presets", "my-preset").data == {"name": "v2"}
    assert lib.get("presets", "my-preset", revision=1).data == doc  # history is kept


def test_if_match_is_a_compare_and_set(lib: Any) -> None:
    lib.put("cards", "c", {"v": 1})
    assert lib.put("cards", "c", {"v": 2}, if_match=1).revision == 2
    assert code_of(lambda: lib.put("cards", "c", {"v": 3}, if_match=1)) == "LIBRARY_CONFLICT"
    assert lib.get("cards", "c").data == {"v": 2}  # the losing write changed nothing
    assert code_of(lambda: lib.put("cards", "absent", {"v": 1}, if_match=1)) == "LIBRARY_CONFLICT"


def test_if_absent_creates_only_once(lib: Any) -> None:
    assert lib.put("books", "b", [1], if_absent=True).revision == 1
    assert code_of(lambda: lib.put("books", "b", [2], if_absent=True)) == "LIBRARY_CONFLICT"
    assert lib.get("books", "b").data == [1]


def test_delete_is_a_tombstone_revision(lib: Any) -> None:
    lib.put("chats", "x", {"messages": []})
    assert code_of(lambda: lib.delete("chats", "x", if_match=7)) == "LIBRARY_CONFLICT"
    gone = lib.delete("chats", "x", if_match=1)
    assert gone.deleted and gone.revision == 2
    assert code_of(lambda: lib.get("chats", "x")) == "LIBRARY_NOT_FOUND"
    assert code_of(lambda: lib.delete("chats", "x")) == "LIBRARY_NOT_FOUND"
    # a client holding the pre-delete revision cannot resurrect it by accident
    assert code_of(lambda: lib.put("chats", "x", {"messages": [1]}, if_match=1)) == "LIBRARY_CONFLICT"
    assert lib.put("chats", "x", {"messages": [2]}, if_absent=True).revision == 3
    assert lib.get("chats", "x", revision=1).data == {"messages": []}


def test_heads_answer_what_a_lease_is_checked_against(lib: Any) -> None:
    """heads(): the newest live (revision, digest), or a kept revision's; None for gone, absent or tombstones."""
    one = lib.put("presets", "p", {"v": 1})
    two = lib.put("presets", "p", {"v": 2})
    lib.put("cards", "gone", {"v": 1})
    tomb = lib.delete("cards", "gone")
    items = [("presets", "p", None), ("presets", "p", 1), ("presets", "p", 2), ("presets", "p", 3),
             ("cards", "gone", None), ("cards", "gone", 1), ("cards", "gone", tomb.revision), ("books", "never", None)]
    assert lib.heads(items) == [(2, two.digest), (1, one.digest), (2, two.digest), None, None,
                                (1, lib.get("cards", "gone", revision=1).digest), None, None]
    assert lib.heads([]) == []


def test_listing_is_sorted_paged_and_skips_deleted(lib: Any) -> None:
    for name in ("b", "a", "c", "A"):
        lib.put("personas", name, {"name": name})
    lib.put("cards", "other-kind", {})
    lib.delete("personas", "c")
    assert [e.id for e in lib.list("personas")] == ["A", "a", "b"]
    assert [e.id for e in lib.list("personas", after="A", limit=1)] == ["a"]
    entry = lib.list("personas")[0]
    assert entry.revision == 1 and entry.data is None and entry.digest


@pytest.mark.parametrize("kind, asset_id", [("nope", "x"), ("cards", ""), ("cards", "../etc"), ("cards", "a/b"),
                                            ("cards", "x" * 129), ("cards", None), ("cards", "-lead")])
def test_bad_kinds_and_ids_are_refused(lib: Any, kind: Any, asset_id: Any) -> None:
    assert code_of(lambda: lib.put(kind, asset_id, {})) == "LIBRARY_INVALID"


@pytest.mark.parametrize("bad", [float("nan"), {"x": object()}, "\ud800"])
def test_documents_that_are_not_json_data_are_refused(lib: Any, bad: Any) -> None:
    assert code_of(lambda: lib.put("templates", "t", bad)) == "LIBRARY_INVALID"
    assert code_of(lambda: lib.get("templates", "t")) == "LIBRARY_NOT_FOUND"


def test_concurrent_conditional_writes_have_exactly_one_winner(target: str) -> None:
    first = open_database(target)
    second = open_database(target)  # a second pool/connection: as another process would have
    try:
        first.library.put("presets", "shared", {"v": 0})
        outcomes: list[str] = []
        lock = threading.Lock()

        def writer(storage: Any, n: int) -> None:
            try:
                storage.library.put("presets", "shared", {"v": n}, if_match=1)
                result = "won"
            except TemplateError as exc:
                result = exc.code
            with lock:
                outcomes.append(result)

        threads = [threading.Thread(target=writer, args=(s, n)) for n, s in enumerate([first, second] * 4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(outcomes) == ["LIBRARY_CONFLICT"] * 7 + ["won"]
        assert second.library.get("presets", "shared").revision == 2
    finally:
        first.close()
        second.close()


def test_a_stored_document_that_does_not_match_its_digest_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "lib.db"
    with SQLiteLibrary(path) as lib:
        lib.put("cards", "c", {"name": "x"})
    raw = sqlite3.connect(path)
    raw.execute("UPDATE asset_revisions SET body = '{\"name\":\"y\"}'")
    raw.commit()
    raw.close()
    with SQLiteLibrary(path) as lib:
        assert code_of(lambda: lib.get("cards", "c")) == "LIBRARY_CORRUPT"


def test_a_version_1_snapshot_file_is_migrated_in_place(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    raw = sqlite3.connect(path)
    for statement in MIGRATIONS[0].sqlite:
        raw.execute(statement)
    raw.execute("INSERT INTO sessions VALUES ('s', 0)")
    raw.execute("PRAGMA user_version = 1")
    raw.commit()
    raw.close()
    storage = open_database(path)
    try:
        storage.library.put("cards", "c", {"name": "x"})
        assert storage.library.get("cards", "c").revision == 1
    finally:
        storage.close()
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == MIGRATIONS[-1].version
    assert raw.execute("SELECT session_id FROM sessions").fetchall() == [("s",)]  # kept
    raw.close()


def test_postgres_migrations_are_recorded_and_a_newer_schema_is_refused() -> None:
    import psycopg
    from postgres_support import fresh_database

    with fresh_database() as url:
        open_database(url).close()
        open_database(url).close()  # a second open applies nothing twice
        with psycopg.connect(url, autocommit=True) as conn:
            rows = conn.execute("SELECT version, name FROM schema_migrations ORDER BY version").fetchall()
            assert rows == [(m.version, m.name) for m in MIGRATIONS]
            conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, 'future')", (SCHEMA_VERSION + 1,))
        assert code_of(lambda: open_database(url)) == "SNAPSHOT_STORE_UNAVAILABLE"


def test_postgres_errors_never_show_the_password() -> None:
    from postgres_support import admin_url

    base = admin_url()
    scheme, _, rest = base.partition("://")
    host_part = rest.split("@", 1)[-1]
    url = f"{scheme}://nobody:s3cret-pw@{host_part.rsplit('/', 1)[0]}/no_such_database_here"
    with pytest.raises(TemplateError) as err:
        open_database(url)
    assert err.value.code == "SNAPSHOT_STORE_UNAVAILABLE" and "s3cret-pw" not in err.value.message


def test_snapshot_store_and_library_share_one_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "one.db"
    storage = open_database(f"sqlite:///{path}")
    try:
        storage.snapshots.save("s", [{"id": "r"}])
        storage.library.put("cards", "c", {})
    finally:
        storage.close()
    with SQLiteSnapshotStore(path) as snapshots, SQLiteLibrary(path) as lib:
        assert snapshots.load("s").revision == 1 and lib.get("cards", "c").revision == 1
