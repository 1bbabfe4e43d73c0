"""Nothing lost: tool results the guard shortens are archived and read back."""

from __future__ import annotations

import re
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from langchain_context_guard import ConfigError
from langchain_context_guard.adapters._cut import cut_results
from langchain_context_guard.adapters._middleware import ContextGuardMiddleware
from langchain_context_guard.adapters._results import (
    ResultArchive,
    make_result_reader,
    read_result,
    result_namespace,
)
from langchain_context_guard.engine import ARCHIVE_DEFAULTS
from tests.adapters._support import (
    SYSTEM,
    WINDOW,
    big_output,
    long_history,
    make_guard,
    read_chunk,
)
from tests.fakes import ScriptedChatModel, pairing_errors

READS = 10
FIRST = 5  # chunk 5 is ~60 KB: truncated as soon as it is read
MIDDLE = 500  # a line of it that truncation cuts out


def _texts(messages: list[BaseMessage]) -> str:
    return "\n".join(str(m.content) for m in messages if isinstance(m, ToolMessage))


class ReadBackModel(ScriptedChatModel):
    """Reads ``READS`` chunks, then reads back lines of the first one, then answers."""

    n: int = 0
    named: str = ""  # the id named by the first marker the model saw

    def bind_tools(self, tools: Any, **kwargs: Any) -> ReadBackModel:
        return self

    def reply(self, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
        n, self.n = self.n, self.n + 1
        found = re.search(r'read_tool_result\("([^"]+)"\)', _texts(messages))
        self.named = self.named or (found.group(1) if found else "")
        if n < READS:
            call = {"name": "read_chunk", "args": {"k": FIRST + n}, "id": f"c{n}"}
        elif n == READS:  # the id the first cut result's marker named
            args = {"tool_call_id": self.named, "offset": MIDDLE, "limit": 5}
            call = {"name": "read_tool_result", "args": args, "id": "back"}
        else:
            return AIMessage("Done.", id="final")
        return AIMessage("", tool_calls=[call], id=f"ai{n}")


def run_agent(store: BaseStore, thread: str = "t") -> tuple[ReadBackModel, Any]:
    model = ReadBackModel(profile={"max_input_tokens": WINDOW})
    guard = make_guard()
    agent = create_agent(
        model,
        [read_chunk, make_result_reader()],
        system_prompt=SYSTEM,
        middleware=[ContextGuardMiddleware(guard, archive=ResultArchive())],
        checkpointer=InMemorySaver(),
        store=store,
    )
    config: Any = {"configurable": {"thread_id": thread}, "recursion_limit": 200}
    out = agent.invoke({"messages": [("user", "Read the chunks.")]}, config)
    return model, out


def check_read_back(model: ReadBackModel, out: Any, store: BaseStore) -> None:
    wanted = big_output(FIRST).split("\n")[MIDDLE]
    # the model never saw that line of the first result (truncated)...
    seen = [
        str(m.content)
        for prompt in model.received
        for m in prompt
        if isinstance(m, ToolMessage) and m.tool_call_id == "c0"
    ]
    assert seen and all(wanted not in text for text in seen)
    assert "characters truncated" in seen[0]
    assert 'full text: read_tool_result("#1")' in seen[0]  # c0's key
    last = model.received[-1]
    # ...and read it back from the archive
    back = next(m for m in out["messages"] if getattr(m, "tool_call_id", "") == "back")
    assert wanted in str(back.content)
    assert str(back.content).startswith(f"[lines {MIDDLE}-{MIDDLE + 5} of ")
    assert pairing_errors(last) == []
    item = store.get(result_namespace("t"), "c0")
    assert item is not None and item.value["text"] == big_output(FIRST)


def test_agent_reads_back_a_truncated_result_in_memory() -> None:
    store = InMemoryStore()
    model, out = run_agent(store)
    check_read_back(model, out, store)


def test_agent_reads_back_a_truncated_result_on_sqlite(
    sqlite_store: SqliteStore,
) -> None:
    model, out = run_agent(sqlite_store)
    check_read_back(model, out, sqlite_store)


def test_a_retry_writes_nothing_new() -> None:
    history = long_history(12)
    guard = make_guard()
    after = guard.prepare(history).messages
    cut = cut_results(history, after)
    results = {k: t for k, t in cut.items() if not k.endswith("@turn")}
    assert results and all(len(t) > 10_000 for t in results.values())
    assert {k.removesuffix("@turn") for k in cut} == set(results)  # trimmed turns
    store = InMemoryStore()
    config: Any = {"configurable": {"thread_id": "x"}}
    assert ResultArchive(store).save(history, after, config) == len(cut)
    assert ResultArchive(store).save(history, after, config) == 0  # another process
    archive = ResultArchive(store)
    assert archive.save(history, after, config) == 0
    assert archive.save(history, after, config) == 0  # remembered, no store read
    assert store.search(result_namespace("x"), limit=100)[0].value["sha256"]


def test_paging_by_characters_and_the_size_cap() -> None:
    history = long_history(12)
    after = make_guard().prepare(history).messages
    store = InMemoryStore()
    config: Any = {"configurable": {"thread_id": "y"}}
    ResultArchive(store, max_chars=1_000).save(history, after, config)
    call_id = next(iter(cut_results(history, after)))
    page = read_result(store, "y", call_id, offset=990, limit=50, unit="chars")
    assert page.startswith("[characters 990-1000 of 1000]")
    assert "No archived result" in read_result(store, "y", "nope")
    with pytest.raises(ConfigError, match="TTL"):
        ResultArchive(store, ttl_minutes=5).save(history, after, config)
    with pytest.raises(ConfigError):
        ResultArchive(max_chars=0)


def test_ttl_on_sqlite(sqlite_store: SqliteStore) -> None:
    history = long_history(12)
    after = make_guard().prepare(history).messages
    config: Any = {"configurable": {"thread_id": "z"}}
    written = ResultArchive(sqlite_store, ttl_minutes=30).save(history, after, config)
    assert written == len(cut_results(history, after)) > 0


def test_a_history_rewritten_keeps_each_marker_pointing_at_its_own_result() -> None:
    """Persist mode: a cut result sent again in a shorter history is named by its
    new place, the archive moves the key with it, and its original stays."""
    from langchain_core.messages import HumanMessage

    from langchain_context_guard import ContextGuard, GuardPolicy

    def turn(k: int, text: str) -> list[BaseMessage]:
        call = {"name": "read", "args": {}, "id": f"c{k}"}
        return [
            AIMessage("", tool_calls=[call], id=f"a{k}"),
            ToolMessage(text, tool_call_id=f"c{k}", id=f"r{k}"),
        ]

    store, config = InMemoryStore(), {"configurable": {"thread_id": "t"}}
    policy = GuardPolicy(
        archived_results=True,
        max_tool_result_chars=2_000,
        truncate_head_chars=500,
        truncate_tail_chars=500,
    )
    guard, archive = ContextGuard(policy), ResultArchive(store)
    history = [HumanMessage("task", id="u"), *turn(0, "small"), *turn(1, "B" * 9_000)]
    sent = guard.prepare(history).messages
    assert archive.save(history, sent, config) == 1
    assert 'read_tool_result("#2")' in str(sent[4].content)
    # the hook persists what it sent, then c0's turn goes (a rewrite)
    rewritten = [sent[0], *sent[3:], *turn(2, "C" * 9_000)]
    again = guard.prepare(rewritten).messages
    assert archive.save(rewritten, again, config) == 1  # only c2's original
    texts = [str(m.content) for m in again if isinstance(m, ToolMessage)]
    assert 'read_tool_result("#1")' in texts[0] and "#2" not in texts[0]
    assert 'read_tool_result("#2")' in texts[1]
    assert read_result(store, "t", "#1").endswith("B" * 50)  # c1's, whole
    assert read_result(store, "t", "c1") == f"[lines 0-1 of 1]\n{'B' * 9_000}"
    assert read_result(store, "t", "#2").endswith("C" * 50)
    assert 'read_tool_result("#2")' in str(sent[4].content)  # the caller's, as is


def test_an_archive_prunes_deeper_with_a_small_digest_unless_told_otherwise() -> None:
    plain = make_guard()
    guard = ContextGuardMiddleware(plain, archive=ResultArchive()).guard
    assert guard.policy == plain.policy.with_archive()
    for name, value in ARCHIVE_DEFAULTS.items():
        assert getattr(guard.policy, name) == value != getattr(plain.policy, name)
    assert guard.policy.archived_results and guard.counter is plain.counter
    # what the application sets wins over the archive's defaults
    own = make_guard(prune_to=0.8, digest=False).policy.with_archive()
    assert (own.prune_to, own.digest, own.digest_share) == (0.8, False, 0.01)
    assert own.with_archive() == own  # already archiving: as it is
    # a turns digest keeps its room: the small share is the note's
    turns = make_guard(digest=True, digest_form="turns").policy.with_archive()
    assert (turns.digest_share, turns.prune_to) == (0.15, ARCHIVE_DEFAULTS["prune_to"])
    assert turns.digest_form == "turns" and turns.archived_results


def test_keywords_on_an_archived_policy_leave_the_archive_s_settings_its_own() -> None:
    archived = make_guard().policy.with_archive()
    middleware = ContextGuardMiddleware(archived, keep_recent_tool_results=5)
    policy = middleware.guard.policy
    assert policy == archived.updated(keep_recent_tool_results=5)
    assert policy.chosen_fields == archived.chosen_fields | {"keep_recent_tool_results"}
