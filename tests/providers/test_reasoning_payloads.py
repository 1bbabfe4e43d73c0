"""Reasoning protocols in the request bodies the providers' own clients build.

- Anthropic, thinking on: the final assistant message of a running tool loop
  starts with its thinking block, on every Claude model (the API's 400: "a final
  `assistant` message must start with a thinking block").
- OpenAI Responses: a ``reasoning`` item is followed by the item produced with
  it, and a ``message`` or ``function_call`` item that keeps its id has its
  reasoning item before it ("provided without its required 'reasoning' item").
- Gemini: a call the guard removes leaves nothing langchain-google-genai turns
  back into a call, and names Gemini accepts (``mcp.read:file``) are kept.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_context_guard import ContextGuard, GuardPolicy
from langchain_context_guard.engine._tool_calls import GEMINI_SIGNATURES
from tests.engine._support import call, lines, result
from tests.providers._support import (
    anthropic_payload,
    gemini_payload,
    responses_payload,
    responses_violations,
)

Payload = dict[str, Any]


def _thinking_turn(k: int, size: int = 400) -> list[BaseMessage]:
    block = {"type": "thinking", "thinking": f"plan {k}", "signature": f"sig{k}"}
    reply = AIMessage(
        [block, {"type": "text", "text": f"step {k}"}],
        tool_calls=[call(f"c{k}", cmd=f"cat f{k}.py")],
        id=f"a{k}",
    )
    return [reply, result(f"c{k}", lines(size), id=f"t{k}")]


def _final_turn_starts_with_thinking(payload: Payload) -> bool:
    messages = payload["messages"]
    final = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    first = messages[final]["content"][0]
    return first["type"] in {"thinking", "redacted_thinking"}


@pytest.mark.parametrize("model", [None, "claude-opus-5", "claude-fable-5-1"])
@pytest.mark.parametrize("stable", [True, False])
def test_a_pruned_tool_loop_keeps_the_final_turns_thinking(model, stable):
    """Sixty steps of one task at 16k: every prompt is a running tool loop."""
    policy = GuardPolicy(context_window=16_000, stable_prefix=stable, model=model)
    guard = ContextGuard(policy)
    history: list[BaseMessage] = [HumanMessage("Fix the parser.", id="u")]
    pruned = 0
    for k in range(60):
        history += _thinking_turn(k)
        result_ = guard.prepare(history)
        report = result_.report
        pruned += report.tokens_after < report.tokens_before
        payload = anthropic_payload(result_.messages)
        assert _final_turn_starts_with_thinking(payload), k
    assert pruned > 10  # most prompts were pruned


def test_binding_follows_the_model_table_and_what_a_provider_said():
    guard = ContextGuard(GuardPolicy(context_window=16_000))
    assert guard.binds("claude-fable-5-1")
    assert guard.binds("anthropic.claude-fable-5-1-20261001-v1:0")
    assert not guard.binds("claude-fable-5-10")
    assert not guard.binds("claude-mythos-5-1")
    assert not guard.binds("claude-opus-5")
    guard.learn_binding("claude-opus-5")
    assert guard.binds("claude-opus-5")
    assert not ContextGuard(GuardPolicy(bound_thinking=False)).binds("claude-fable-5-1")
    assert ContextGuard(GuardPolicy(bound_thinking=True)).binds("gpt-4.1")


# -- OpenAI Responses ---------------------------------------------------------------


def _responses_turn(k: int, size: int = 400) -> list[BaseMessage]:
    reply = AIMessage(
        [
            {
                "type": "reasoning",
                "id": f"rs_{k}",
                "summary": [],
                "encrypted_content": "e",
            },
            {"type": "text", "text": f"step {k}", "id": f"msg_{k}"},
            {
                "type": "function_call",
                "id": f"fc_{k}",
                "call_id": f"c{k}",
                "name": "bash",
                "arguments": '{"cmd": "ls"}',
            },
        ],
        tool_calls=[call(f"c{k}", cmd="ls")],
        id=f"a{k}",
    )
    return [reply, result(f"c{k}", lines(size), id=f"t{k}")]


@pytest.mark.parametrize("stable", [True, False])
def test_stripped_reasoning_items_take_their_items_ids_with_them(stable):
    policy = GuardPolicy(context_window=16_000, stable_prefix=stable)
    guard = ContextGuard(policy)
    history: list[BaseMessage] = [HumanMessage("Fix the parser.", id="u")]
    stripped = 0
    for k in range(40):
        history += _responses_turn(k)
        if k % 4 == 3:  # the user speaks: earlier turns are over
            history.append(HumanMessage(f"Now part {k}.", id=f"u{k}"))
        sent = guard.prepare(history).messages
        payload = responses_payload(sent)
        assert responses_violations(payload) == [], k
        stripped += sum(
            item.get("type") == "function_call" and "id" not in item
            for item in payload["input"]
        )
    assert stripped  # old reasoning went, and with it the ids


def test_joining_assistant_messages_keeps_each_reasoning_item_before_its_item():
    note = AIMessage(
        [
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "text", "text": "I will look first.", "id": "msg_1"},
        ],
        id="a1",
    )
    history: list[BaseMessage] = [HumanMessage("Fix it.", id="u"), note]
    history += _responses_turn(2)[:1]
    history.append(ToolMessage("ok", tool_call_id="c2", id="t2"))
    sent = ContextGuard(GuardPolicy(context_window=16_000)).prepare(history).messages
    assert len(sent) == 3  # joined
    assert responses_violations(responses_payload(sent)) == []


# -- Gemini -----------------------------------------------------------------------


def test_a_renamed_call_keeps_its_signature_for_gemini():
    """A reused call id is sent renamed; Gemini's signature moves with it."""
    first = AIMessage("", tool_calls=[call("c1", cmd="ls")], id="a1")
    again = AIMessage(
        "Trying again.",
        tool_calls=[call("c1", cmd="ls")],
        additional_kwargs={
            "function_call": {"name": "bash", "arguments": '{"cmd": "ls"}'},
            "__gemini_function_call_thought_signatures__": {"c1": "c2lnCg=="},
        },
        id="a2",
    )
    history: list[BaseMessage] = [
        HumanMessage("List the files.", id="u"),
        first,
        ToolMessage("a.py", tool_call_id="c1", id="t1"),
        again,
    ]
    sent = ContextGuard(GuardPolicy(context_window=16_000)).prepare(history).messages
    renamed = next(m for m in sent if m.id == "a2")
    assert renamed.additional_kwargs[GEMINI_SIGNATURES] == {"c1-2": "c2lnCg=="}
    payload = gemini_payload(sent)
    calls = [
        part
        for content in payload["contents"]
        for part in content.parts
        if part.function_call is not None
    ]
    assert [part.thought_signature for part in calls] == [None, b"sig\n"]
    answered = [
        part.function_response
        for content in payload["contents"]
        for part in content.parts
        if part.function_response is not None
    ]
    assert len(answered) == 2
    assert history[-1].tool_calls[0]["id"] == "c1"  # the caller's, unchanged


@pytest.mark.parametrize("name", ["mcp.read:file", "github:list_issues", "a.b-c_d"])
def test_tool_names_gemini_accepts_are_kept(name):
    history: list[BaseMessage] = [
        HumanMessage("Go.", id="u"),
        AIMessage("", tool_calls=[{"name": name, "args": {}, "id": "c1"}], id="a"),
        ToolMessage("done", tool_call_id="c1", id="t"),
    ]
    sent = ContextGuard(GuardPolicy(context_window=16_000)).prepare(history).messages
    assert [m.id for m in sent] == ["u", "a", "t"]
    assert sent[1].tool_calls[0]["name"] == name


@pytest.mark.parametrize("name", ["", "has space", "a/b", "x" * 129])
def test_names_no_provider_accepts_are_dropped(name):
    history: list[BaseMessage] = [
        HumanMessage("Go.", id="u"),
        AIMessage("ok", tool_calls=[{"name": name, "args": {}, "id": "c1"}], id="a"),
        ToolMessage("done", tool_call_id="c1", id="t"),
    ]
    sent = ContextGuard(GuardPolicy(context_window=16_000)).prepare(history).messages
    assert [m.id for m in sent] == ["u", "a"]
    assert sent[1].tool_calls == []
