"""``provider:model`` names, as ``init_chat_model`` spells them."""

from __future__ import annotations

import pytest

from langchain_context_guard import ContextGuard, GuardPolicy
from langchain_context_guard.engine._window import base_model_name, split_provider
from langchain_context_guard.engine.tokens._encodings import encoding_for_model


@pytest.mark.parametrize(
    ("name", "split"),
    [
        ("openai:gpt-4.1", ("openai", "gpt-4.1")),
        ("anthropic:claude-sonnet-4-5", ("anthropic", "claude-sonnet-4-5")),
        ("google_genai:gemini-2.5-pro", ("google_genai", "gemini-2.5-pro")),
        ("llama3:8b", (None, "llama3:8b")),  # an Ollama tag, not a provider
        (
            "anthropic.claude-3-5-sonnet-20240620-v1:0",  # a Bedrock id
            (None, "anthropic.claude-3-5-sonnet-20240620-v1:0"),
        ),
        ("gpt-4o", (None, "gpt-4o")),
    ],
    ids=["openai", "anthropic", "gemini", "ollama-tag", "bedrock-id", "bare"],
)
def test_split_provider(name: str, split: tuple[str | None, str]) -> None:
    assert split_provider(name) == split


def test_policy_model_with_a_provider_gets_its_window_and_encoding() -> None:
    guard = ContextGuard(GuardPolicy(model="openai:gpt-4.1"))
    assert (guard.window().tokens, guard.window().source) == (1_047_576, "table")
    assert encoding_for_model("openai:gpt-4.1") == "o200k_base"
    assert "o200k_base" in guard.counter.name
    assert ContextGuard(GuardPolicy(model="anthropic:claude-opus-4")).window().tokens
    assert base_model_name("openrouter:openai/gpt-4o") == "gpt-4o"
