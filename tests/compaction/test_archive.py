"""The compaction archive: any thread id, one conversation each, bounded recall."""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from langchain_context_guard import ConfigError
from langchain_context_guard.compaction import (
    CompactionSettings,
    Compactor,
    archive_namespace,
    make_recall_tool,
    recall_messages,
)
from langchain_context_guard.compaction._archive import (
    MAX_QUERY_CHARS,
    MAX_QUERY_WORDS,
    Query,
    format_hits,
)
from tests.adapters.test_namespace import HOSTILE_IDS
from tests.compaction._support import (
    Agent,
    ScriptedSummarizer,
    agent_history,
    build_graph,
    make_guard,
    settings,
    start,
)

GUARD = make_guard()
SECRET = "the launch code is 7731-ALPHA"


def _config(thread: str | None = None, **more: Any) -> dict[str, Any]:
    values = {} if thread is None else {"thread_id": thread}
    return {"configurable": {**values, **more}, "recursion_limit": 500}


def _secret_history() -> list[Any]:
    history = agent_history(12)
    history[3] = history[3].model_copy(update={"content": f"{SECRET}\n" * 20})
    return history


@pytest.mark.parametrize("thread", HOSTILE_IDS, ids=range(len(HOSTILE_IDS)))
def test_any_thread_id_is_archived_and_recalled(store: BaseStore, thread: str) -> None:
    comp = Compactor(ScriptedSummarizer(), settings(), guard=GUARD, store=store)
    result = comp.compact(_secret_history(), thread_id=thread)
    assert "not archived" not in result.event.detail
    answer = make_recall_tool(store).invoke({"query": "7731-ALPHA"}, _config(thread))
    assert SECRET in answer
    assert recall_messages(store, "7731-ALPHA", thread_id=thread)


def test_the_compacting_graph_archives_a_dotted_thread(store: BaseStore) -> None:
    guard = make_guard()
    compactor = Compactor(ScriptedSummarizer(), settings(), guard=guard)
    graph = build_graph(compactor, Agent(guard, 30), chars=4_000).compile(
        checkpointer=InMemorySaver(), store=store
    )
    config = _config("user.42@example.com")
    chunks = list(graph.stream(start(SECRET), config, stream_mode="custom"))
    kinds = {c["context_guard"]["kind"] for c in chunks}
    assert kinds == {"compaction"}  # no archive_failed
    answer = make_recall_tool(store).invoke({"query": "7731-ALPHA"}, config)
    assert SECRET in answer


def test_one_conversation_never_reads_another_s_archive(store: BaseStore) -> None:
    """Without a checkpointer, and with the ids "" and "default"."""
    guard = make_guard()
    compactor = Compactor(ScriptedSummarizer(), settings(), guard=guard)
    recall = make_recall_tool(store)
    plain = build_graph(compactor, Agent(guard, 30), chars=4_000).compile(store=store)
    chunks = list(plain.stream(start(SECRET), _config(), stream_mode="custom"))
    details = [c["context_guard"]["detail"] for c in chunks]
    assert details and all("not archived: no thread_id" in d for d in details)
    answer = recall.invoke({"query": "7731-ALPHA"}, _config())
    assert "launch code" not in answer and "no thread_id" in answer

    saved = build_graph(compactor, Agent(guard, 30), chars=4_000).compile(
        checkpointer=InMemorySaver(), store=store
    )
    saved.invoke(start(SECRET), _config(""))
    saved.invoke(start("Say hello."), _config("default"))
    assert SECRET in recall.invoke({"query": "7731-ALPHA"}, _config(""))
    other = recall.invoke({"query": "7731-ALPHA"}, _config("default"))
    assert "launch code" not in other and "No archived message" in other


def test_a_user_prefix_keeps_users_apart(store: BaseStore) -> None:
    prefix = ("users", "{user_id}")
    comp = Compactor(
        ScriptedSummarizer(),
        settings(namespace_prefix=prefix),
        guard=GUARD,
        store=store,
    )
    alice = _config("t1", user_id="alice")
    comp.compact(_secret_history(), config=alice)
    assert store.search(archive_namespace("t1", prefix=("users", "alice")))
    recall = make_recall_tool(store, namespace_prefix=prefix)
    assert SECRET in recall.invoke({"query": "7731-ALPHA"}, alice)
    bob = recall.invoke({"query": "7731-ALPHA"}, _config("t1", user_id="bob"))
    assert "launch code" not in bob
    nobody = comp.compact(_secret_history(), config=_config("t1"))
    assert "config['configurable']['user_id']" in nobody.event.detail
    assert "launch code" not in recall.invoke({"query": "7731-ALPHA"}, _config("t1"))


def test_a_prefix_that_is_not_a_tuple_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="namespace_prefix"):
        CompactionSettings(namespace_prefix="users")


# -- recall cost ---------------------------------------------------------------------


def _calls(job: Any) -> tuple[Any, int]:
    """``job()``'s result and how many Python and C calls it made."""
    count = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal count
        count += event in {"call", "c_call"}

    sys.setprofile(profile)
    try:
        out = job()
    finally:
        sys.setprofile(None)
    return out, count


def test_a_huge_query_is_bounded_and_not_echoed() -> None:
    store = InMemoryStore()
    history = agent_history(150, chars=400)
    comp = Compactor(ScriptedSummarizer(), settings(), guard=GUARD, store=store)
    comp.compact(history, thread_id="t")
    archived = len(store.search(archive_namespace("t"), limit=1_000))
    assert archived >= 250

    def recall(query: str) -> str:
        return format_hits(query, recall_messages(store, query, thread_id="t"))

    small, base = _calls(lambda: recall("handler_7 compute"))
    words = " ".join(f"word{i}" for i in range(100_000))
    huge, cost = _calls(lambda: recall(f"handler_7 {words}"))
    assert "0007: def handler_7" in small and "0007: def handler_7" in huge
    assert cost < 2 * base  # the 100,000 words add next to nothing
    assert "Query cut" in huge and "word99999" not in huge
    assert len(huge) < 5 * 2_500

    q = Query.of(words)
    assert q.cut and len(q.words) == MAX_QUERY_WORDS
    assert len(q.text) == MAX_QUERY_CHARS
    missing = format_hits(words, [])
    assert "No archived message" in missing and len(missing) < 500


def test_recall_reads_only_the_conversation_s_own_namespace() -> None:
    store = InMemoryStore()
    store.put((*archive_namespace("t"), "deeper"), "x", {"text": SECRET})
    assert recall_messages(store, "7731-ALPHA", thread_id="t") == []


def test_the_agent_middleware_scopes_archives_per_user() -> None:
    from langchain.agents import create_agent

    from langchain_context_guard.compaction import CompactionMiddleware
    from tests.compaction._support import read_file, tool_calling_model

    store = InMemoryStore()
    middleware = CompactionMiddleware(
        ScriptedSummarizer(),
        settings(namespace_prefix=("users", "{user_id}")),
        guard=make_guard(),
        store=store,
        recall=True,
    )
    agent = create_agent(
        tool_calling_model(30),
        tools=[read_file],
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    alice = _config("t1", user_id="alice@example.com")
    agent.invoke({"messages": [("user", SECRET)]}, alice)
    assert store.search(("users", "alice@example~2Ecom", "context_guard", "archive"))
    recall = middleware.tools[0]
    assert SECRET in recall.invoke({"query": "7731-ALPHA"}, alice)
    bob = recall.invoke({"query": "7731-ALPHA"}, _config("t1", user_id="bob"))
    assert "launch code" not in bob


@pytest.mark.parametrize(
    "query", ["KeyError", "error", "parse", "PARSE_TOKENS", "tokens 42"]
)
def test_recall_matches_words_and_their_parts(query: str) -> None:
    store = InMemoryStore()
    history = agent_history(12)
    text = "Traceback: raise KeyError in parse_tokens at line 42\n"
    history[3] = history[3].model_copy(update={"content": text * 5})
    Compactor(ScriptedSummarizer(), settings(), guard=GUARD, store=store).compact(
        history, thread_id="t"
    )
    hits = recall_messages(store, query, thread_id="t", limit=1)
    assert hits and "raise KeyError" in hits[0].value["text"]
