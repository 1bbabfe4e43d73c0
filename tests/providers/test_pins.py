"""A prompt with pinned messages is valid for each provider; the pin is not sent."""

from __future__ import annotations

import json

import pytest

from langchain_context_guard import ContextGuard, GuardPolicy, is_pinned, pin
from tests.engine._support import agent_history
from tests.providers._support import (
    anthropic_payload,
    gemini_payload,
    openai_payload,
    responses_payload,
    violations,
)


@pytest.mark.parametrize(
    "payload",
    [openai_payload, anthropic_payload, gemini_payload, responses_payload],
    ids=["openai", "anthropic", "gemini", "responses"],
)
def test_pinned_messages_reach_the_request_without_their_mark(payload):
    history = [
        pin(m) if m.id in {"task", "a1", "t1"} else m
        for m in agent_history(30, result_chars=4_000)
    ]
    sent = ContextGuard(GuardPolicy(context_window=16_000)).prepare(history).messages
    assert len(sent) < len(history)
    assert {m.id for m in sent if is_pinned(m)} == {"task", "a1", "t1"}
    body = json.dumps(payload(sent), default=str)
    assert "context_guard" not in body and "pinned" not in body
    assert violations(sent) == {}
