"""``provider_compaction``: the provider's own compaction option reaches the request."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents.middleware.types import ModelRequest, ModelResponse
from langchain_anthropic import ChatAnthropic
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_openai import ChatOpenAI

from langchain_context_guard import (
    ConfigError,
    ContextGuardMiddleware,
    ProviderCompactionWarning,
)
from langchain_context_guard.adapters._provider_compaction import (
    ANTHROPIC_BETA,
    anthropic_supports,
)
from tests.adapters._support import sent_models

WINDOW = 200_000
ASK = [HumanMessage("Fix the bug.")]


def _claude(name: str = "claude-sonnet-4-6", **settings: Any) -> Any:
    return ChatAnthropic(model=name, api_key="x", **settings)  # type: ignore[call-arg]


def test_anthropic_gets_the_compact_edit_and_its_beta():
    model = _claude(betas=["context-1m-2025-08-07"])
    middleware = ContextGuardMiddleware(
        context_window=WINDOW, provider_compaction=60_000
    )
    first, second = sent_models(middleware, model)
    assert first is second  # one copy, while the agent's model is the same
    payload = first._get_request_payload(ASK)
    assert payload["context_management"] == {
        "edits": [
            {
                "type": "compact_20260112",
                "trigger": {"type": "input_tokens", "value": 60_000},
            }
        ]
    }
    assert payload["betas"] == ["context-1m-2025-08-07", ANTHROPIC_BETA]
    assert model.context_management is None  # the agent's model is unchanged


def test_an_anthropic_edit_of_the_user_is_kept_beside_ours():
    clear = {"type": "clear_tool_uses_20250919"}
    model = _claude(context_management={"edits": [clear]})
    middleware = ContextGuardMiddleware(context_window=WINDOW, provider_compaction=True)
    sent = sent_models(middleware, model)[0]
    edits = sent._get_request_payload(ASK)["context_management"]["edits"]
    budget = middleware.guard.budget(model)
    assert edits[0] == clear
    assert edits[1]["trigger"]["value"] == int(0.8 * budget)  # True: 0.8 x budget


def test_openai_gets_responses_compaction():
    model = ChatOpenAI(model="gpt-5", api_key="x")  # type: ignore[arg-type]
    middleware = ContextGuardMiddleware(
        context_window=WINDOW, provider_compaction=100_000
    )
    sent = sent_models(middleware, model)[0]
    payload = sent._get_request_payload(ASK)
    assert payload["context_management"] == [
        {"type": "compaction", "compact_threshold": 100_000}
    ]
    assert "input" in payload and "messages" not in payload  # the Responses API


@pytest.mark.parametrize(
    ("model", "trigger", "why"),
    [
        pytest.param(
            GenericFakeChatModel(messages=iter([])),
            60_000,
            "no provider-side compaction",
            id="no-provider-option",
        ),
        pytest.param(
            _claude("claude-sonnet-4-5"), 60_000, "4.6 and later", id="older-claude"
        ),
        pytest.param(_claude(), 20_000, "under Anthropic's minimum", id="low"),
        pytest.param(_claude(), 190_000, "not under the guard's budget", id="high"),
    ],
)
def test_a_model_that_cannot_compact_is_sent_as_it_is_with_one_warning(
    model: Any, trigger: int, why: str
):
    middleware = ContextGuardMiddleware(
        context_window=WINDOW, provider_compaction=trigger
    )
    with pytest.warns(ProviderCompactionWarning, match=why) as caught:
        first = sent_models(middleware, model)  # a second call warns no more
    assert len(caught) == 1
    assert "provider_compaction" in str(caught[0].message)
    assert "Fix:" in str(caught[0].message)
    assert first == [model, model]


@pytest.mark.parametrize("value", [0, -5, "yes", 1.5])
def test_a_bad_trigger_is_refused_naming_the_option(value: Any):
    with pytest.raises(ConfigError, match="provider_compaction") as err:
        ContextGuardMiddleware(provider_compaction=value)
    assert err.value.field == "provider_compaction"


@pytest.mark.parametrize(
    ("name", "supported"),
    [
        ("claude-sonnet-4-6", True),
        ("claude-opus-4-6", True),
        ("claude-opus-4-7-20261001", True),
        ("claude-sonnet-5", True),
        ("claude-sonnet-4-5", False),
        ("claude-haiku-4-5", False),
        ("claude-3-5-sonnet-latest", False),
    ],
)
def test_which_claude_models_compact(name: str, supported: bool):
    assert anthropic_supports(name) is supported


def test_openai_is_sent_from_its_latest_compaction_item():
    model = ChatOpenAI(model="gpt-5", api_key="x")  # type: ignore[arg-type]
    middleware = ContextGuardMiddleware(
        context_window=WINDOW, provider_compaction=100_000
    )
    compaction = {"type": "compaction", "id": "cmp_1", "encrypted_content": "Z0FB"}
    history = [
        HumanMessage("Fix the bug.", id="task"),
        AIMessage("Reading the files first.", id="a1"),
        HumanMessage("Go on.", id="u1"),
        AIMessage([compaction, {"type": "text", "text": "Compacted."}], id="a2"),
        HumanMessage("Now fix it.", id="u2"),
    ]
    sent: list[Any] = []

    def handler(request: ModelRequest[Any]) -> ModelResponse[Any]:
        sent.append(request)
        return ModelResponse(result=[AIMessage("ok")])

    middleware.wrap_model_call(ModelRequest(model=model, messages=history), handler)
    request = sent[0]
    payload = request.model._get_request_payload(request.messages)
    items = payload["input"]
    assert [i.get("type") for i in items if i.get("type") == "compaction"] == [
        "compaction"
    ]
    first = next(k for k, i in enumerate(items) if i.get("type") == "compaction")
    assert all(i.get("role") != "assistant" for i in items[:first])
    assert "Reading the files first." not in str(items)  # what it replaced is gone
    assert payload["context_management"][0]["compact_threshold"] == 100_000
