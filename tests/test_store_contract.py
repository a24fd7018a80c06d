"""The snapshot-store contract: every implementation (memory, SQLite, a future server database)
must pass these. Parametrised over the implementations shipped here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tavernbox import TemplateError
from tavernbox.store import MemorySnapshotStore, SnapshotSet, SnapshotStore, SQLiteSnapshotStore, open_store


@pytest.fixture(params=["memory", "sqlite-wal", "sqlite-rollback", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "postgres":
        from postgres_support import fresh_database

        from tavernbox.store import PostgresSnapshotStore

        with fresh_database() as url:
            s: Any = PostgresSnapshotStore(url, keep=3)
            yield s
            s.close()
        return
    if request.param == "memory":
        s = MemorySnapshotStore(keep=3)
    else:
        s = SQLiteSnapshotStore(tmp_path / "s.db", journal=request.param.split("-")[1], keep=3)  # type: ignore[arg-type]
    yield s
    s.close()


def rec(n: int, text: str = "x") -> dict[str, Any]:
    return {"id": f"r:{n}", "messages": [{"id": f"m{n}", "role": "system", "content": text}], "depth": None}


def test_implements_the_protocol(store: Any) -> None:
    assert isinstance(store, SnapshotStore)


def test_an_unknown_session_is_revision_zero_with_no_records(store: Any) -> None:
    assert store.load("nobody") == SnapshotSet("nobody", 0, ())


def test_save_replaces_the_set_and_bumps_the_revision(store: Any) -> None:
    assert store.save("s", [rec(1), rec(2)]).revision == 1
    assert store.save("s", [rec(3)]).revision == 2
    loaded = store.load("s")
    assert loaded.revision == 2 and loaded.records == (rec(3),)


def test_records_round_trip_exactly_including_unicode_and_order(store: Any) -> None:
    records = [rec(2, "宿屋 → 港 🚢"), rec(1, 'quote " and \\ and \n'), {"nested": {"b": [1, 2.5, None, True]}}]
    store.save("s", records)
    assert list(store.load("s").records) == records


def test_stored_records_are_detached_from_the_callers_dicts(store: Any) -> None:
    records = [rec(1)]
    store.save("s", records)
    records[0]["id"] = "changed"
    loaded = store.load("s")
    loaded.records[0]["id"] = "changed again"
    assert store.load("s").records == (rec(1),)


def test_expected_revision_is_a_compare_and_set(store: Any) -> None:
    store.save("s", [rec(1)], expected_revision=0)
    with pytest.raises(TemplateError) as err:
        store.save("s", [rec(2)], expected_revision=0)
    assert err.value.code == "SNAPSHOT_STORE_CONFLICT"
    assert store.load("s").records == (rec(1),)  # the losing write changed nothing
    assert store.save("s", [rec(2)], expected_revision=1).revision == 2


def test_history_keeps_the_newest_revisions_oldest_first(store: Any) -> None:
    for n in range(1, 6):
        store.save("s", [rec(n)])
    assert [(h.revision, h.records) for h in store.history("s")] == [(3, (rec(3),)), (4, (rec(4),)), (5, (rec(5),))]


def test_sessions_are_independent_and_deletable(store: Any) -> None:
    store.save("b", [rec(1)])
    store.save("a", [rec(2)])
    assert store.sessions() == ["a", "b"]
    store.delete("b")
    assert store.sessions() == ["a"] and store.load("b").revision == 0 and store.load("a").records == (rec(2),)


def test_an_empty_set_is_a_revision_too(store: Any) -> None:
    store.save("s", [rec(1)])
    assert store.save("s", []).revision == 2 and store.load("s").records == ()


@pytest.mark.parametrize("bad", [[{"x": float("nan")}], [{"x": object()}], ["not an object"], "nope", [{"x": "\ud800"}]])
def test_records_that_are_not_json_data_are_refused(store: Any, bad: Any) -> None:
    with pytest.raises(TemplateError) as err:
        store.save("s", bad)
    assert err.value.code == "SNAPSHOT_STORE_INVALID"
    assert store.load("s").revision == 0


@pytest.mark.parametrize("session", ["", None, 3, "x" * 513])
def test_bad_session_ids_are_refused(store: Any, session: Any) -> None:
    with pytest.raises(TemplateError) as err:
        store.load(session)
    assert err.value.code == "SNAPSHOT_STORE_INVALID"


def test_open_store_picks_sqlite_for_a_path_and_memory_otherwise(tmp_path: Path) -> None:
    assert isinstance(open_store(None), MemorySnapshotStore) and isinstance(open_store(":memory:"), MemorySnapshotStore)
    s = open_store(tmp_path / "x.db")
    assert isinstance(s, SQLiteSnapshotStore)
    s.close()
