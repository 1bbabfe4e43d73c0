"""``cap_breakpoints`` and ``CapBreakpoints``: at most 4 marks in what is sent."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from langchain_context_guard.adapters._breakpoint_cap import (
    CapBreakpoints,
    cap_breakpoints,
    count_breakpoints,
)
from tests.fakes import ScriptedChatModel

MARK = {"type": "ephemeral"}


def _part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text, "cache_control": MARK}


def _payload(marked_messages: int, *, top_level: bool = True) -> dict[str, Any]:
    """Deepagents' marks (system twice, the last tool, top level) and ours."""
    payload: dict[str, Any] = {
        "system": [_part("rules"), _part("memory")],
        "tools": [{"name": "ls", "input_schema": {}, "cache_control": MARK}],
        "messages": [
            {"role": "user", "content": [_part(f"turn {i}")]}
            for i in range(marked_messages)
        ],
    }
    if top_level:
        payload["cache_control"] = MARK
    return payload


@pytest.mark.parametrize("marked", [1, 2, 4])
@pytest.mark.parametrize("top_level", [True, False], ids=["top-level", "blocks"])
def test_the_oldest_message_marks_go_first(marked: int, top_level: bool) -> None:
    payload = _payload(marked, top_level=top_level)
    before = copy.deepcopy(payload)
    capped = cap_breakpoints(payload)
    assert payload == before
    assert count_breakpoints(capped) == 4
    kept = ["cache_control" in m["content"][0] for m in capped["messages"]]
    assert kept == [False] * (marked - 1) + [not top_level]
    assert capped["system"] == payload["system"]
    assert capped["tools"] == payload["tools"]


def test_the_system_and_tools_give_way_once_no_message_is_marked() -> None:
    payload = {**_payload(0), "system": [_part(f"rule {i}") for i in range(5)]}
    capped = cap_breakpoints(payload)
    assert count_breakpoints(capped) == 4
    assert ["cache_control" in b for b in capped["system"]] == [False] * 3 + [True] * 2


def test_a_payload_within_the_limit_is_returned_as_it_is() -> None:
    payload = {"messages": [{"role": "user", "content": [_part("a")]}]}
    assert cap_breakpoints(payload) is payload


def test_an_anthropic_model_is_sent_as_a_capped_copy() -> None:
    model = ChatAnthropic(model="claude-sonnet-4-5", api_key="x")  # type: ignore[arg-type]
    option = CapBreakpoints()
    capped = option.model(model)
    assert isinstance(capped, ChatAnthropic) and capped is not model
    assert option.model(model) is capped
    messages = [
        SystemMessage([_part("rules"), _part("memory")]),
        HumanMessage([_part("task")]),
        AIMessage([_part("reading")]),
        HumanMessage([_part("more")]),
    ]
    sent = capped.bind_tools([])  # the agent binds before each call
    payload = sent.bound._get_request_payload(messages, cache_control=MARK)
    assert (
        count_breakpoints(model._get_request_payload(messages, cache_control=MARK)) == 6
    )
    assert count_breakpoints(payload) == 4
    assert messages[1].content[0]["cache_control"] == MARK


def test_another_model_is_sent_as_it_is() -> None:
    model = ScriptedChatModel()
    assert CapBreakpoints().model(model) is model
