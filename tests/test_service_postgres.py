"""``tavernbox serve --database postgresql://...``: the service on a real PostgreSQL server.

Two service processes on one database are how the service scales past one machine: each sees
the other's writes at once, and conditional writes stay exclusive across them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import pytest
from lease_support import card, two_processes_make_a_replay_stale
from postgres_support import fresh_database
from service_support import RunningService



@pytest.fixture
def database() -> Iterator[str]:
    with fresh_database() as url:
        yield url


def test_two_processes_see_each_others_writes(database: str) -> None:
    with RunningService(database) as a, RunningService(database) as b:
        assert a.client is not None and b.client is not None
        assert a.client.put("/v1/library/cards/alice", json=card()).status_code == 201
        seen = b.client.get("/v1/library/cards/alice")
        assert seen.status_code == 200 and seen.json()["data"] == card() and seen.headers["etag"] == '"1"'
        assert b.client.put("/v1/library/cards/alice", json={**card(), "name": "B"}, headers={"If-Match": '"1"'}).status_code == 200
        assert a.client.get("/v1/library/cards/alice").json()["revision"] == 2
        assert a.client.put("/v1/library/cards/alice", json=card(), headers={"If-Match": '"1"'}).status_code == 412
        assert [i["id"] for i in b.client.get("/v1/library/cards").json()["items"]] == ["alice"]
        assert b.log().count("PUT /v1/library/cards/alice") == 1 and a.log().count("PUT /v1/library/cards/alice") == 2


def test_conditional_writes_stay_exclusive_across_processes(database: str) -> None:
    with RunningService(database) as a, RunningService(database) as b:
        assert a.client is not None and b.client is not None
        a.client.put("/v1/library/presets/shared", json={"prompts": [], "prompt_order": []})
        statuses: list[int] = []
        lock = threading.Lock()
        bases = [a.base, b.base] * 6

        def write(n: int, base: str) -> None:
            with httpx.Client(base_url=base, headers=a.client.headers, timeout=60) as c:  # type: ignore[union-attr]
                answer = c.put("/v1/library/presets/shared", json={"prompts": [], "prompt_order": [], "n": n},
                               headers={"If-Match": '"1"'})
            with lock:
                statuses.append(answer.status_code)

        threads = [threading.Thread(target=write, args=(n, base)) for n, base in enumerate(bases)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(statuses) == [200] + [412] * (len(bases) - 1)
        assert b.client.get("/v1/library/presets/shared").json()["revision"] == 2


def test_the_library_and_records_survive_a_restart_on_postgres(database: str) -> None:
    with RunningService(database) as first:
        assert first.client is not None
        first.client.put("/v1/library/templates/t", json="<%= 1 + 1 %>")
    with RunningService(database) as second:
        assert second.client is not None
        answer = second.client.post("/v1/render", json={"template": {"ref": "templates/t"}})
        assert answer.json()["text"] == "2" and answer.json()["refs"][0]["revision"] == 1


def test_another_process_write_makes_a_replay_stale_on_postgres(database: str) -> None:
    """Library revisions are leases across processes: B's write makes A's replay of its record stale."""
    with RunningService(database) as a, RunningService(database) as b:
        assert a.client is not None and b.client is not None
        two_processes_make_a_replay_stale(a.client, b.client)
