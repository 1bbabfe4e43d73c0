"""Archive namespaces: any thread id, one namespace per conversation."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from langchain_context_guard import ConfigError
from langchain_context_guard.adapters._namespace import MAX_LABEL, encode_label
from langchain_context_guard.adapters._results import (
    ResultArchive,
    make_result_reader,
    read_result,
    result_namespace,
)

HOSTILE_IDS = [
    "user@example.com",
    "user.42",
    "..",
    "a.b.c",
    "a~2Eb",
    "~",
    "日本語.スレッド",
    "emoji 🧵 thread",
    "x" * 5_000,
    "x" * 5_000 + ".",
    "",
    "default",
    "%_*?[]\\",
    "langgraph",
]


def _history(text: str) -> tuple[list[BaseMessage], list[BaseMessage]]:
    """A tool result and the same result cut short, as an adapter would send it."""
    call = {"name": "cat", "args": {}, "id": "call_1"}
    full = [AIMessage("", tool_calls=[call]), ToolMessage(text, tool_call_id="call_1")]
    cut = [full[0], ToolMessage(text[:10], tool_call_id="call_1")]
    return full, cut


def _config(thread: str | None, **more: Any) -> dict[str, Any]:
    values = {} if thread is None else {"thread_id": thread}
    return {"configurable": {**values, **more}}


@pytest.mark.parametrize("readable", ["demo", "thread_1", "3f2a9c1e-77aa-4b1e-9d0c"])
def test_readable_ids_stay_as_they_are(readable: str) -> None:
    assert encode_label(readable) == readable


_IDS = st.text(st.characters(exclude_categories=()), max_size=300)  # surrogates too


@given(_IDS, _IDS)
def test_labels_are_valid_and_one_per_id(a: str, b: str) -> None:
    for label in (encode_label(a), encode_label(b)):
        assert label and "." not in label and len(label) <= MAX_LABEL
    assert (encode_label(a) == encode_label(b)) == (a == b)


@pytest.mark.parametrize("thread", HOSTILE_IDS, ids=range(len(HOSTILE_IDS)))
def test_any_thread_id_archives_and_reads_back(store: BaseStore, thread: str) -> None:
    full, cut = _history(f"the whole text of {thread}\n" * 50)
    assert ResultArchive(store).save(full, cut, _config(thread)) == 1
    reader = make_result_reader(store)
    page = reader.invoke({"tool_call_id": "call_1", "limit": 1}, _config(thread))
    assert page == f"[lines 0-1 of 51]\nthe whole text of {thread}"
    direct = read_result(store, thread, "call_1", limit=1)
    assert direct == page


def test_no_two_ids_share_a_namespace(store: BaseStore) -> None:
    for thread in HOSTILE_IDS:
        full, cut = _history(f"secret of {thread!r} " * 20)
        ResultArchive(store).save(full, cut, _config(thread))
    for thread in HOSTILE_IDS:
        text = read_result(store, thread, "call_1", unit="chars", limit=10**7)
        assert text.split("\n", 1)[1] == f"secret of {thread!r} " * 20


def test_without_a_thread_id_nothing_is_archived_or_read(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = InMemoryStore()
    full, cut = _history("secret " * 100)
    with caplog.at_level(logging.WARNING, "langchain_context_guard"):
        assert ResultArchive(store).save(full, cut, _config(None)) == 0
    assert "not archived: no thread_id" in caplog.text
    assert store.search(("context_guard",)) == []
    reader = make_result_reader(store)
    answer = reader.invoke({"tool_call_id": "call_1"}, _config(None))
    assert "no thread_id" in answer and "secret" not in answer


def test_a_user_prefix_keeps_users_apart(store: BaseStore) -> None:
    archive = ResultArchive(store, namespace_prefix=("tenants", "{user_id}"))
    full, cut = _history("alice's secret " * 30)
    assert archive.save(full, cut, _config("t1", user_id="alice@example.com")) == 1
    stored = store.search(("tenants",))
    assert sorted(i.namespace for i in stored) == [  # the result and its key
        ("tenants", "alice@example~2Ecom", "context_guard", "tool_result_keys", "t1"),
        ("tenants", "alice@example~2Ecom", "context_guard", "tool_results", "t1"),
    ]
    reader = make_result_reader(store, namespace_prefix=("tenants", "{user_id}"))
    ask = {"tool_call_id": "call_1"}
    assert "alice's secret" in reader.invoke(
        ask, _config("t1", user_id="alice@example.com")
    )
    bob = reader.invoke(ask, _config("t1", user_id="bob"))
    assert "No archived result" in bob and "secret" not in bob
    nobody = reader.invoke(ask, _config("t1"))
    assert "config['configurable']['user_id']" in nobody and "secret" not in nobody
    assert archive.save(full, cut, _config("t2")) == 0  # no user: not archived


@pytest.mark.parametrize(
    "prefix", ["tenant", ("langgraph", "x"), (1, 2)], ids=["str", "reserved", "ints"]
)
def test_a_bad_prefix_is_a_config_error(prefix: Any) -> None:
    with pytest.raises(ConfigError, match="namespace_prefix"):
        ResultArchive(namespace_prefix=prefix)


@pytest.mark.parametrize("thread", [None, 42], ids=["none", "int"])
def test_a_thread_id_that_is_not_a_string_is_refused(thread: Any) -> None:
    with pytest.raises(ConfigError, match="must be a string"):
        result_namespace(thread)


def test_result_namespace_layout() -> None:
    assert result_namespace("t1") == ("context_guard", "tool_results", "t1")
    assert result_namespace("a.b", prefix=("u",)) == (
        "u",
        "context_guard",
        "tool_results",
        "a~2Eb",
    )
