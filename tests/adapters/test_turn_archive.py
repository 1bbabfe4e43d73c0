"""Nothing lost: an assistant turn whose words the guard cuts, or which it trims,
is archived under its calls' turn keys (``#12@turn``) and read back."""

from __future__ import annotations

import re
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from langchain_context_guard import ContextGuard, GuardPolicy
from langchain_context_guard.adapters._cut import cut_results, turn_text
from langchain_context_guard.adapters._middleware import ContextGuardMiddleware
from langchain_context_guard.adapters._result_search import search_archive
from langchain_context_guard.adapters._results import (
    ResultArchive,
    make_result_reader,
    read_result,
    result_namespace,
)
from langchain_context_guard.engine import marker, result_ordinals
from langchain_context_guard.engine.passes._truncate import truncate_tool_results
from tests.fakes import ScriptedChatModel

CONFIG: Any = {"configurable": {"thread_id": "t1"}}


def _words(k: int) -> str:
    """What the assistant wrote before step ``k``'s calls: a plan of many lines."""
    return "\n".join(
        f"Plan {k}.{i}: check module_{k}_{i} for the bug." for i in range(40)
    )


def _output(k: int) -> str:
    return "\n".join(f"line {i} of file {k}" for i in range(300))


def _turn(k: int, calls: int = 1) -> list[BaseMessage]:
    ids = [f"call_{k}_{j}" for j in range(calls)]
    made = [
        {"name": "read", "args": {"path": f"f{k}_{j}.py"}, "id": i}
        for j, i in enumerate(ids)
    ]
    return [
        AIMessage(_words(k), tool_calls=made, id=f"ai{k}"),
        *(
            ToolMessage(_output(k), tool_call_id=i, name="read", id=f"r{i}")
            for i in ids
        ),
    ]


def _history(steps: int, calls: int = 1) -> list[BaseMessage]:
    out: list[BaseMessage] = [HumanMessage("Find the bug.", id="task")]
    for k in range(steps):
        out += _turn(k, calls)
    return out


def _ai(message: BaseMessage) -> AIMessage:
    assert isinstance(message, AIMessage)
    return message


def _guard(**settings: Any) -> ContextGuard:
    policy = GuardPolicy(context_window=16_000, stable_prefix=False, **settings)
    return ContextGuard(policy.with_archive())


def test_a_turn_whose_words_are_cut_names_its_key_and_reads_back() -> None:
    history = _history(12)
    sent = _guard().prepare(history).messages
    cut = [m for m in sent if isinstance(m, AIMessage) and marker(m) is not None]
    assert cut, "the guard compressed no assistant text"
    first = cut[0]
    place = result_ordinals(history)[first.tool_calls[0]["id"]]
    assert f'full text: read_tool_result("#{place}@turn")' in str(first.content)
    store = InMemoryStore()
    assert ResultArchive(store).save(history, sent, CONFIG) >= len(cut)
    original = _ai(next(m for m in history if m.id == first.id))
    page = read_result(store, "t1", f"#{place}@turn", limit=1_000)
    assert page.split("\n", 1)[1] == turn_text(original)
    assert _words(place - 1) in page and '{"path": "f' in page
    assert read_result(store, "t2", f"#{place}@turn").startswith("No archived")
    assert read_result(store, "t2", f"call_{place - 1}_0@turn").startswith("No ")


def test_the_caller_s_messages_and_the_default_guard_are_unchanged() -> None:
    history = _history(12)
    before = [m.model_copy(deep=True) for m in history]
    policy = GuardPolicy(context_window=16_000, stable_prefix=False)
    sent = ContextGuard(policy).prepare(history).messages
    assert history == before
    cut = [m for m in sent if isinstance(m, AIMessage) and marker(m) is not None]
    assert cut and all("older assistant message" in str(m.content) for m in cut)
    assert not any("@turn" in str(m.content) for m in cut)  # no archive: no pointer


def test_a_trimmed_turn_is_archived_under_each_of_its_calls_keys() -> None:
    history = _history(30, calls=2)
    sent = _guard().prepare(history).messages
    kept = {c["id"] for m in sent if isinstance(m, AIMessage) for c in m.tool_calls}
    assert "call_0_0" not in kept  # the first turn was trimmed
    cut = cut_results(history, sent)
    assert cut["call_0_0@turn"] == cut["call_0_1@turn"] == turn_text(_ai(history[1]))
    store = InMemoryStore()
    ResultArchive(store).save(history, sent, CONFIG)
    for key in ("#1@turn", "#2@turn", "call_0_1@turn"):
        page = read_result(store, "t1", key, limit=1_000)
        assert page.split("\n", 1)[1] == turn_text(_ai(history[1]))
    note = next(str(m.content) for m in sent if "Context note" in str(m.content))
    assert 'read_tool_result("<key>@turn")' in note


def test_the_search_finds_a_trimmed_turn_s_words_by_pattern() -> None:
    history = _history(30)
    sent = _guard().prepare(history).messages
    store = InMemoryStore()
    ResultArchive(store).save(history, sent, CONFIG)
    found = search_archive(store, result_namespace("t1"), r"module_0_17\b")
    assert "--- call_0_0@turn (" in found and "Plan 0.17: check module_0_17" in found
    one = search_archive(
        store, result_namespace("t1"), "module_0_17", tool_call_id="#1@turn"
    )
    assert "Plan 0.17" in one
    assert "module_0_17" not in search_archive(
        store, result_namespace("t2"), "module_0_17"
    )


def test_an_answer_that_made_no_call_is_named_by_its_own_id() -> None:
    answer = AIMessage(_words(99), id="answer-1")  # an interactive turn's reply
    history = [HumanMessage("Plan it.", id="ask"), answer, *_history(12)]
    # untuned, so the pruning keeps the answer, cut down (a reply would have
    # the interactive settings trim it into the turns digest)
    untuned = {"interactive_tuning": False}
    sent = _guard(**untuned).prepare(history).messages
    assert sent[1].id == "answer-1"  # compressed with the first result
    assert 'full text: read_tool_result("answer-1@turn")' in str(sent[1].content)
    store = InMemoryStore()
    ResultArchive(store).save(history, sent, CONFIG)
    page = read_result(store, "t1", "answer-1@turn", limit=1_000)
    assert page.split("\n", 1)[1] == _words(99)
    nameless = [history[0], answer.model_copy(update={"id": None}), *history[2:]]
    again = _guard(**untuned).prepare(nameless).messages
    assert "@turn" not in str(again[1].content)  # nothing to name it by
    assert not [k for k in cut_results(nameless, again) if not k.startswith("call_")]


def test_a_rewritten_history_repoints_a_turn_marker_in_every_content_form() -> None:
    """Persist mode: a cut turn sent again after its first turns went is named
    by its new place, and the archive moves the key with it."""
    history = _history(12)
    guard, store = _guard(), InMemoryStore()
    archive = ResultArchive(store)
    sent = guard.prepare(history).messages
    archive.save(history, sent, CONFIG)
    cut = [m for m in sent if isinstance(m, AIMessage) and marker(m) is not None][-1]
    call_id = cut.tool_calls[0]["id"]
    old = result_ordinals(history)[call_id]
    i = sent.index(cut)
    rewritten = [sent[0], *sent[i:]]  # the turns before it compacted away
    new = result_ordinals(rewritten)[call_id]
    assert new < old
    places = result_ordinals(rewritten)
    blocks = cut.model_copy(update={"content": [{"type": "text", "text": cut.content}]})
    for form in (cut, blocks):
        again = truncate_tool_results([form], name_source=places)[0]
        assert f'read_tool_result("#{new}@turn")' in str(again.content)
        assert f'"#{old}@turn"' not in str(again.content)
    again = guard.prepare(rewritten).messages
    archive.save(rewritten, again, CONFIG)
    page = read_result(store, "t1", f"#{new}@turn", limit=1_000)
    original = _ai(next(m for m in history if m.id == cut.id))
    assert page.split("\n", 1)[1] == turn_text(original)


class AskTheTurnModel(ScriptedChatModel):
    """Reads files until the first turn is trimmed, then reads that turn back."""

    n: int = 0

    def bind_tools(self, tools: Any, **kwargs: Any) -> AskTheTurnModel:
        return self

    def reply(self, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
        n, self.n = self.n, self.n + 1
        note = next(
            (str(m.content) for m in messages if "Context note" in str(m.content)), ""
        )
        keys = re.search(r"oldest first: #(\d+)", note)
        if keys and not any(
            isinstance(m, ToolMessage) and m.name == "read_tool_result"
            for m in messages
        ):
            args = {"tool_call_id": f"#{keys.group(1)}@turn", "limit": 100}
            return AIMessage(
                "",
                tool_calls=[{"name": "read_tool_result", "args": args, "id": "back"}],
            )
        if n > 40 or any(getattr(m, "tool_call_id", "") == "back" for m in messages):
            return AIMessage("Done.", id="final")
        call = {"name": "read", "args": {"path": f"f{n}.py"}, "id": f"call_{n}"}
        return AIMessage(_words(n), tool_calls=[call], id=f"ai{n}")


def run_turn_agent(store: BaseStore) -> Any:
    from langchain_core.tools import tool

    @tool
    def read(path: str) -> str:
        """Read a file."""
        return _output(int(path[1:].split(".")[0]))

    model = AskTheTurnModel(profile={"max_input_tokens": 16_000})
    agent = create_agent(
        model,
        [read, make_result_reader()],
        middleware=[ContextGuardMiddleware(_guard(), archive=ResultArchive())],
        checkpointer=InMemorySaver(),
        store=store,
    )
    config: Any = {"configurable": {"thread_id": "agent"}, "recursion_limit": 200}
    return agent.invoke({"messages": [("user", "Find the bug.")]}, config)


def check_turn_read_back(out: Any) -> None:
    back = next(m for m in out["messages"] if getattr(m, "tool_call_id", "") == "back")
    assert _words(0) in str(back.content)  # the first turn's plan, trimmed, read back
    assert '[tool call read (id call_0), arguments:] {"path": "f0.py"}' in str(
        back.content
    )


def test_an_agent_reads_back_a_trimmed_turn_in_memory() -> None:
    check_turn_read_back(run_turn_agent(InMemoryStore()))


def test_an_agent_reads_back_a_trimmed_turn_on_sqlite(
    sqlite_store: SqliteStore,
) -> None:
    check_turn_read_back(run_turn_agent(sqlite_store))
