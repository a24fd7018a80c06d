"""A fresh PostgreSQL database per test, on the server ``.ci/run`` starts.

``TAVERNBOX_TEST_POSTGRES_URL`` names a database on that server (the test creates and drops its
own databases beside it). Without the variable the PostgreSQL tests are skipped with the reason,
except under CI (``CI`` set), where a missing server is a failure, not a skip.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

ENV = "TAVERNBOX_TEST_POSTGRES_URL"


def admin_url() -> str:
    """The server's URL from the environment (skip, or fail under CI, without it)."""
    url = os.environ.get(ENV)
    if not url:
        if os.environ.get("CI"):
            pytest.fail(f"{ENV} is not set: .ci/run starts a PostgreSQL server and exports it")
        pytest.skip(f"{ENV} is not set (no PostgreSQL server to test against; .ci/run starts one)")
    return url


@contextmanager
def fresh_database() -> Iterator[str]:
    """Create an empty database, yield its URL, drop it afterwards."""
    import psycopg

    base = admin_url()
    name = f"tb_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    head, _, _ = base.rpartition("/")
    try:
        yield f"{head}/{name}"
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
