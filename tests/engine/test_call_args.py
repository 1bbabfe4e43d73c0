"""``compress_call_args``: an old call's long text arguments shrink with its result."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.store.memory import InMemoryStore

from langchain_context_guard import (
    ContextGuard,
    GuardPolicy,
    ResultArchive,
    compress_old_tool_results,
    reference_prepare,
)
from langchain_context_guard.adapters import read_result
from langchain_context_guard.engine._tool_calls import GEMINI_SIGNATURES
from tests.engine._support import snapshot
from tests.providers._support import (
    anthropic_payload,
    anthropic_violations,
    openai_payload,
    openai_violations,
)


def _file(handlers: int) -> str:
    return "\n".join(f"def handler_{i}(req):\n    return {i}" for i in range(handlers))


FILE = _file(200)


def _write(k: int, text: str = FILE) -> list[BaseMessage]:
    """A ``Write`` call (path and content) in all three forms, and its result."""
    call_id = f"toolu_{k:02d}"
    args = {"file_path": f"src/m{k}.py", "content": text}
    raw = {"name": "Write", "arguments": json.dumps(args)}
    blocks = [
        {"type": "text", "text": f"Writing m{k}."},
        {"type": "tool_use", "id": call_id, "name": "Write", "input": args},
    ]
    call = {"name": "Write", "args": args, "id": call_id}
    kw = {"tool_calls": [{"id": call_id, "type": "function", "function": raw}]}
    return [
        AIMessage(blocks, tool_calls=[call], additional_kwargs=kw),
        ToolMessage(f"wrote src/m{k}.py", tool_call_id=call_id, name="Write"),
    ]


def _history(steps: int = 10, text: str = FILE) -> list[BaseMessage]:
    out: list[BaseMessage] = [HumanMessage("Write the handlers.")]
    for k in range(steps):
        out += _write(k, text)
    return out


def _args(message: BaseMessage) -> tuple[dict[str, Any], ...]:
    """The first call's arguments as ``tool_calls``, the raw call and the block."""
    assert isinstance(message, AIMessage)
    raw = message.additional_kwargs["tool_calls"][0]["function"]["arguments"]
    block = next(b for b in message.content if b["type"] == "tool_use")
    return message.tool_calls[0]["args"], json.loads(raw), block["input"]


def test_an_old_write_keeps_its_path_and_the_ends_of_its_content_in_every_form():
    history = _history()
    kept = [m.model_copy(deep=True) for m in history]
    out = compress_old_tool_results(history, batch=1, assistant=True, call_args=True)
    for form in _args(out[1]):
        assert form["file_path"] == "src/m0.py"
        assert form["content"].startswith("def handler_0(req):\n    return 0\n")
        assert form["content"].endswith("def handler_199(req):\n    return 199")
        assert "395 lines omitted, original 7,179 characters" in form["content"]
        assert "older tool call argument content compressed" in form["content"]
    assert all(f["content"] == FILE for f in _args(out[-2]))  # the newest: whole
    assert history == kept  # the caller's messages are never changed
    off = compress_old_tool_results(history, batch=1, assistant=True)
    assert all(f["content"] == FILE for f in _args(off[1]))  # off by default


def test_a_call_whose_only_argument_is_long_stays_whole():
    command = "cat > a.py <<'EOF'\n" + FILE + "\nEOF"
    history: list[BaseMessage] = [HumanMessage("Go.")]
    for k in range(10):
        call = {"name": "bash", "args": {"command": command}, "id": f"c{k}"}
        history += [
            AIMessage("", tool_calls=[call]),
            ToolMessage("ok", tool_call_id=f"c{k}"),
        ]
    out = compress_old_tool_results(history, batch=1, assistant=True, call_args=True)
    assert out[1] is history[1]


@pytest.mark.parametrize(
    "signed",
    [
        {"additional_kwargs": {"reasoning_content": "I think."}},
        {"additional_kwargs": {GEMINI_SIGNATURES: {"toolu_00": "c2ln"}}},
    ],
)
def test_a_message_with_reasoning_or_signatures_keeps_its_calls(signed):
    first = _write(0)[0]
    kwargs = {**first.additional_kwargs, **signed["additional_kwargs"]}
    history = [
        HumanMessage("Go."),
        first.model_copy(update={"additional_kwargs": kwargs}),
    ]
    history += _history()[3:]
    out = compress_old_tool_results(history, batch=1, assistant=True, call_args=True)
    assert all(f["content"] == FILE for f in _args(out[1]))


@pytest.mark.parametrize("stable", [True, False])
def test_the_guard_sends_what_the_reference_does_and_the_providers_accept_it(stable):
    policy = GuardPolicy(
        context_window=16_000, compress_call_args=True, stable_prefix=stable
    )
    guard = ContextGuard(policy)
    text = _file(60)  # the newest six writes whole fit in what a pruning keeps
    history = _history(40, text)
    for n in range(3, len(history) + 1, 4):
        sent = guard.prepare(history[:n]).messages
        if not stable:
            reference = reference_prepare(ContextGuard(policy), history[:n])
            assert snapshot(sent) == snapshot(reference)
        assert openai_violations(openai_payload(sent)) == []
        assert anthropic_violations(anthropic_payload(sent)) == []
    body = anthropic_payload(sent)["messages"]
    blocks = [b for m in body if isinstance(m["content"], list) for b in m["content"]]
    inputs = [b["input"] for b in blocks if b.get("type") == "tool_use"]
    assert any("lines omitted" in i["content"] for i in inputs)
    assert inputs[-1]["content"] == text
    calls = [
        c for m in openai_payload(sent)["messages"] for c in m.get("tool_calls", [])
    ]
    args = [json.loads(c["function"]["arguments"]) for c in calls]
    assert any("lines omitted" in a["content"] for a in args)
    assert args[-1]["content"] == text


def test_with_an_archive_a_cut_argument_names_its_key_and_reads_back() -> None:
    policy = GuardPolicy(
        context_window=16_000, compress_call_args=True, stable_prefix=False
    ).with_archive()
    history = _history(40, _file(60))
    sent = ContextGuard(policy).prepare(history).messages
    cut = next(
        m
        for m in sent
        if isinstance(m, AIMessage) and "lines omitted" in str(m.tool_calls[0]["args"])
    )
    call_id = cut.tool_calls[0]["id"]
    pointer = f'full text: read_tool_result("{call_id}:content")'
    assert all(pointer in form["content"] for form in _args(cut))
    store = InMemoryStore()
    config: Any = {"configurable": {"thread_id": "t1"}}
    assert ResultArchive(store).save(history, sent, config) >= 1
    page = read_result(store, "t1", f"{call_id}:content", limit=10**6, unit="chars")
    assert page.split("\n", 1)[1] == _file(60)
    assert read_result(store, "t2", f"{call_id}:content").startswith("No archived")
