"""Nothing lost: trimmed results are archived, searched by pattern, read back."""

from __future__ import annotations

import re
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from langchain_context_guard import make_result_search
from langchain_context_guard.adapters._middleware import ContextGuardMiddleware
from langchain_context_guard.adapters._result_search import search_archive
from langchain_context_guard.adapters._results import (
    PAGE_CHARS,
    ResultArchive,
    cut_results,
    keys_namespace,
    make_result_reader,
    read_result,
    result_namespace,
)
from tests.adapters._support import (
    SYSTEM,
    WINDOW,
    big_output,
    make_guard,
    read_note,
)
from tests.fakes import ScriptedChatModel, pairing_errors

NOTES = 80
WANTED = "0001:00007 "  # a line of the first note, long trimmed when asked about
QUESTION = "What does handler_7 of note 1 compute?"


def _archive(store: BaseStore, thread: str, texts: dict[str, str]) -> None:
    for key, text in texts.items():
        store.put(result_namespace(thread), key, {"text": text, "sha256": ""})


def test_a_search_finds_lines_with_context_in_one_result_or_all() -> None:
    store = InMemoryStore()
    body = "\n".join(f"line {i}" for i in range(100))
    _archive(store, "t", {"a": body, "b": "x\nERROR: disk full\ny"})
    _archive(store, "other", {"c": "ERROR: another conversation's secret"})
    namespace = result_namespace("t")
    one = search_archive(store, namespace, r"^line 5\d$", tool_call_id="a", context=1)
    assert one.startswith("[10 matching line(s) in 1 archived result(s)")
    assert "50: line 50" in one and "49- line 49" in one and "60- line 60" in one
    assert "48- line 48" not in one
    every = search_archive(store, namespace, "ERROR", context=0)
    assert "--- b (3 lines) ---\n1: ERROR: disk full" in every
    assert "secret" not in every  # never another conversation's archive
    assert "No line matches" in search_archive(store, namespace, "nowhere")
    missing = search_archive(store, namespace, "x", tool_call_id="zz")
    assert "No archived result for tool_call_id 'zz'" in missing


def test_a_search_is_bounded_and_says_what_it_left_out() -> None:
    store = InMemoryStore()
    _archive(store, "t", {"big": "\n".join("match " + "y" * 5_000 for _ in range(500))})
    out = search_archive(store, result_namespace("t"), "match", max_matches=1_000)
    assert len(out) < 10_000
    assert out.splitlines()[-1].startswith("[more matches left out")
    assert "...[4,706 chars]" in out
    bad = search_archive(store, result_namespace("t"), "(unclosed")
    assert bad.startswith("Invalid regular expression '(unclosed'")


def test_a_page_is_bounded_and_says_where_to_read_on() -> None:
    store = InMemoryStore()
    _archive(store, "t", {"k": "\n".join("z" * 1_000 for _ in range(100))})
    reader = make_result_reader(store)
    config: Any = {"configurable": {"thread_id": "t"}}
    page = reader.invoke({"tool_call_id": "k", "limit": 100}, config)
    head, body = page.split("\n", 1)
    assert head == "[lines 0-19 of 100; more from offset=19]"
    assert len(body) <= PAGE_CHARS
    chars = reader.invoke(
        {"tool_call_id": "k", "limit": 10**6, "unit": "chars"}, config
    )
    assert chars.startswith(f"[characters 0-{PAGE_CHARS} of ")
    whole = read_result(store, "t", "k", limit=10**6, unit="chars")  # the library's
    assert whole.startswith("[characters 0-100099 of 100099]")


def test_results_of_trimmed_turns_are_archived_too() -> None:
    history: list[BaseMessage] = [HumanMessage("Read the notes.")]
    for k in range(200):
        call = {"name": "read_note", "args": {"k": k}, "id": f"n{k}"}
        history += [
            AIMessage("", tool_calls=[call]),
            ToolMessage(big_output(k)[:3_000], tool_call_id=f"n{k}"),
        ]
    after = make_guard().prepare(history).messages
    sent = {m.tool_call_id for m in after if isinstance(m, ToolMessage)}
    cut = cut_results(history, after)
    assert "n0" not in sent and cut["n0"] == big_output(0)[:3_000]


def _prompt_text(messages: list[BaseMessage]) -> str:
    return "\n".join(str(m.content) for m in messages)


class FollowsTheMarkers(ScriptedChatModel):
    """Reads ``NOTES`` notes, then answers a question about the first one.

    When the line asked about is no longer in its prompt, it finds the call
    that read it in the context note and searches that call's archived result.
    """

    n: int = 0
    asked: str = ""  # the prompt when the question came

    def bind_tools(self, tools: Any, **kwargs: Any) -> FollowsTheMarkers:
        return self

    def reply(self, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
        n, self.n = self.n, self.n + 1
        last = messages[-1]
        if n < NOTES:
            call = {"name": "read_note", "args": {"k": 1 + n}, "id": f"n{n}"}
            return AIMessage("", tool_calls=[call], id=f"ai{n}")
        if isinstance(last, ToolMessage) and last.tool_call_id == "find":
            found = re.search(
                r"def handler_7\(req\): return (compute\([^)]*\))", str(last.content)
            )
            return AIMessage(found.group(1) if found else "I cannot tell.", id="final")
        self.asked = _prompt_text(messages)
        if WANTED in self.asked:
            return AIMessage("It is in my prompt.", id="final")
        pointer = re.search(r"^- read_note \(([^)]+)\): 1$", self.asked, re.M)
        args: dict[str, Any] = {"pattern": f"^{WANTED}", "context": 1}
        if pointer:
            args["tool_call_id"] = pointer.group(1)
        call = {"name": "search_tool_results", "args": args, "id": "find"}
        return AIMessage("", tool_calls=[call], id="ask")


def run_agent(
    store: BaseStore, **settings: Any
) -> tuple[FollowsTheMarkers, list[BaseMessage]]:
    """The agent with the archive's defaults (a small digest) or ``settings``."""
    model = FollowsTheMarkers(profile={"max_input_tokens": WINDOW})
    agent = create_agent(
        model,
        [read_note, make_result_reader(), make_result_search()],
        system_prompt=SYSTEM,
        middleware=[
            ContextGuardMiddleware(make_guard(**settings), archive=ResultArchive())
        ],
        checkpointer=InMemorySaver(),
        store=store,
    )
    config: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 200}
    agent.invoke({"messages": [("user", QUESTION)]}, config)
    state = agent.get_state(config).values["messages"]
    return model, state


def check_answered_from_the_archive(
    model: FollowsTheMarkers,
    messages: list[BaseMessage],
    store: BaseStore,
    *,
    listed: bool = False,
) -> None:
    """The question answered by a search of the archive; ``listed``: by the key
    the digest lists the first call with, else across the conversation's results."""
    wanted = next(line for line in big_output(1).split("\n") if line.startswith(WANTED))
    assert WANTED not in model.asked  # the first note was trimmed...
    # ...its call named by its key, or (a small digest) its key in the line of ranges
    assert ("- read_note (#1): 1" in model.asked) == listed
    assert "Keys of all their archived outputs, oldest first: #1-#" in model.asked
    assert 'search_tool_results("<regex>")' in model.asked
    found = next(m for m in messages if getattr(m, "tool_call_id", "") == "find")
    head = str(found.content).split("\n", 1)[0]
    assert head.startswith("[1 matching line(s) in ")  # one result, or all of them
    assert ("in 1 archived result(s)" in head) == listed
    assert "--- n0 (" in found.content  # the search found the call's result
    assert wanted in found.content
    answer = messages[-1]
    assert isinstance(answer, AIMessage) and answer.content == "compute(req, 7)"
    assert pairing_errors(model.received[-1]) == []
    item = store.get(result_namespace("t"), "n0")
    assert (
        item is not None
        and item.value["text"] == big_output(1)[: len(item.value["text"])]
    )


def test_an_agent_answers_about_a_trimmed_result_from_the_archive_in_memory() -> None:
    store = InMemoryStore()
    model, messages = run_agent(store)
    check_answered_from_the_archive(model, messages, store)


def test_an_agent_follows_the_key_a_larger_digest_lists() -> None:
    store = InMemoryStore()
    model, messages = run_agent(store, digest_share=0.15)
    check_answered_from_the_archive(model, messages, store, listed=True)
    ask = messages[-3]
    assert isinstance(ask, AIMessage)
    assert ask.tool_calls[0]["args"]["tool_call_id"] == "#1"  # the key it listed


def test_an_agent_answers_about_a_trimmed_result_from_the_archive_on_sqlite(
    sqlite_store: SqliteStore,
) -> None:
    model, messages = run_agent(sqlite_store)
    check_answered_from_the_archive(model, messages, sqlite_store)


def test_an_agent_answers_from_the_archive_with_the_turns_digest_on_sqlite(
    sqlite_store: SqliteStore,
) -> None:
    turns = {"digest": True, "digest_form": "turns", "digest_share": 0.05}
    model, messages = run_agent(sqlite_store, **turns)
    check_answered_from_the_archive(model, messages, sqlite_store)
    assert "[output cleared by context guard" in model.asked  # newer turns, cut down
    assert 'read_tool_result("#' in model.asked


def _all_dropped(
    thread: str, history: list[BaseMessage], archive: ResultArchive
) -> None:
    archive.save(history, history[:1], {"configurable": {"thread_id": thread}})


def _notes(k: int, tag: str) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for n in range(k):
        call = {"name": "read_note", "args": {"k": n}, "id": f"{tag}{n}"}
        out += [
            AIMessage("", tool_calls=[call]),
            ToolMessage(
                f"note {n} of {tag}\nsecret {tag}-{n}", tool_call_id=f"{tag}{n}"
            ),
        ]
    return out


def check_keys(store: BaseStore) -> None:
    """Keys read and search their own conversation's results, and move with it."""
    archive = ResultArchive(store)
    mine = [HumanMessage("Read.", id="h"), *_notes(4, "a")]
    _all_dropped("t", mine, archive)
    _all_dropped("u", [HumanMessage("Read."), *_notes(4, "b")], archive)
    assert read_result(store, "t", "#2").endswith("note 1 of a\nsecret a-1")
    assert read_result(store, "u", "#2").endswith("note 1 of b\nsecret b-1")
    namespace = result_namespace("t")
    found = search_archive(store, namespace, "secret", tool_call_id="#3")
    assert "--- a2 (2 lines) ---" in found and "b-" not in found
    assert "No archived result" in read_result(store, "t", "#9")
    # a rewritten history numbers what is left; the key moves to its result
    _all_dropped("t", [mine[0], *mine[3:], *_notes(1, "c")], archive)
    assert read_result(store, "t", "#1").endswith("secret a-1")
    assert read_result(store, "t", "#3").endswith("secret a-3")
    assert read_result(store, "t", "#4").endswith("secret c-0")
    assert read_result(store, "t", "a0").endswith("secret a-0")  # ids still read
    # what the key namespace holds is checked before it is followed
    store.put(keys_namespace(namespace), "#2", {"tool_call_id": ["a0"]})
    assert "No archived result for tool_call_id '#2'" in read_result(store, "t", "#2")


def test_keys_read_their_own_conversations_results_in_memory() -> None:
    check_keys(InMemoryStore())


def test_keys_read_their_own_conversations_results_on_sqlite(
    sqlite_store: SqliteStore,
) -> None:
    check_keys(sqlite_store)
