"""One real PostgreSQL server for the session; a fresh database per test."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from tests.postgres._server import PostgresServer, start_server

_names = itertools.count()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    """Started once; fails (never skips) when PostgreSQL is not installed."""
    server = start_server()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server: PostgresServer) -> str:
    """A URL to a new, empty database."""
    return pg_server.create_database(f"t{next(_names)}")
