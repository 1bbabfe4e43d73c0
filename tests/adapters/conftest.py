"""Fixtures the adapter tests share."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest
from langgraph.store.sqlite import SqliteStore


@pytest.fixture
def sqlite_store() -> Iterator[SqliteStore]:
    """A set-up SQLite store in memory, closed after the test."""
    conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    store = SqliteStore(conn)
    store.setup()
    yield store
    conn.close()
