"""Shared fixtures: offline tokenizer, message builders, the shared trajectories."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from langgraph.store.base import BaseStore

os.environ.setdefault("CONTEXT_GUARD_OFFLINE", "1")


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest) -> Iterator[BaseStore]:
    """A LangGraph store: in memory, then SQLite (the embedded default)."""
    from langgraph.store.memory import InMemoryStore
    from langgraph.store.sqlite import SqliteStore

    if request.param == "memory":
        yield InMemoryStore()
        return
    with SqliteStore.from_conn_string(":memory:") as sqlite:
        sqlite.setup()
        yield sqlite
