"""PostgreSQL savers and stores, opened from a URL, for the PostgreSQL tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.store.postgres import AsyncPostgresStore, PostgresStore


@contextmanager
def postgres(
    url: str, *, setup: bool = True
) -> Iterator[tuple[PostgresSaver, PostgresStore]]:
    """A ``PostgresSaver`` and ``PostgresStore`` on ``url``, set up unless told.

    Set up once before starting processes that share the database: concurrent
    ``setup()`` calls race on the migration tables.
    """
    with (
        PostgresSaver.from_conn_string(url) as saver,
        PostgresStore.from_conn_string(url) as store,
    ):
        if setup:
            saver.setup()
            store.setup()
        yield saver, store


@asynccontextmanager
async def apostgres(url: str) -> AsyncIterator[tuple[Any, Any]]:
    """A set-up ``AsyncPostgresSaver`` and ``AsyncPostgresStore`` on ``url``."""
    async with (
        AsyncPostgresSaver.from_conn_string(url) as saver,
        AsyncPostgresStore.from_conn_string(url) as store,
    ):
        await saver.setup()
        await store.setup()
        yield saver, store
