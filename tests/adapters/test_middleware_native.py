"""``ContextGuardMiddleware`` built as LangChain's own middlewares are."""

from __future__ import annotations

import logging
from typing import Any
from uuid import UUID

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from langchain_context_guard import ConfigError, ContextGuard, GuardPolicy
from langchain_context_guard.adapters._callbacks import REPORT_EVENT
from langchain_context_guard.adapters._middleware import ContextGuardMiddleware
from tests.adapters._support import SYSTEM, TOOLS, check_model_input, full_length
from tests.fakes import ScriptedToolModel

WINDOW = 40_000
USER = "Read every chunk, then summarise the repository."


class _Reports(BaseCallbackHandler):
    def __init__(self) -> None:
        self.reports: list[dict[str, Any]] = []

    def on_custom_event(
        self, name: str, data: Any, *, run_id: UUID, **kwargs: Any
    ) -> None:
        if name == REPORT_EVENT:
            self.reports.append(data)


def test_no_arguments_takes_the_window_from_the_agents_model() -> None:
    model = ScriptedToolModel(steps=60, profile={"max_input_tokens": WINDOW})
    middleware = ContextGuardMiddleware()
    agent = create_agent(
        model,
        TOOLS,
        system_prompt=SYSTEM,
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    recorder = _Reports()
    config: Any = {
        "configurable": {"thread_id": "t"},
        "recursion_limit": 1_000,
        "callbacks": [recorder],
    }
    final = agent.invoke({"messages": [("user", USER)]}, config)["messages"]
    assert len(final) == full_length(60)
    budget = GuardPolicy().budget(WINDOW)  # an unset reserve: window / 8, <= 8,192
    for received in model.received:
        check_model_input(
            middleware.guard, received, user_text=USER, tools=TOOLS, budget=budget
        )
    # The history outgrew the budget, and every prompt still fit it.
    assert max(r["tokens_before"] for r in recorder.reports) > budget
    assert any(r["tokens_after"] < r["tokens_before"] for r in recorder.reports)
    assert {r["window_source"] for r in recorder.reports} == {"model_profile"}
    assert {r["context_window"] for r in recorder.reports} == {WINDOW}
    assert {r["budget"] for r in recorder.reports} == {budget}


def test_flat_settings_build_the_policy() -> None:
    mw = ContextGuardMiddleware(context_window=50_000, reserve_tokens=2_000)
    assert mw.guard.window().tokens == 50_000
    assert mw.guard.policy.reserve_tokens == 2_000
    base = GuardPolicy(keep_recent_tool_results=5)
    mw = ContextGuardMiddleware(base, reserve_tokens=1_000)
    assert (mw.guard.policy.keep_recent_tool_results, mw.guard.budget()) == (
        5,
        128_000 - 1_000,
    )


def test_a_model_name_gives_window_and_tokenizer() -> None:
    mw = ContextGuardMiddleware(model="openai:gpt-4.1")
    assert mw.guard.window().tokens == 1_047_576
    assert "o200k_base" in mw.guard.counter.name


def test_the_reserve_follows_the_models_max_tokens() -> None:
    chat = ChatOpenAI(model="gpt-4.1-mini", max_tokens=4_000, api_key="sk-test")
    mw = ContextGuardMiddleware(model=chat)
    window = mw.guard.window()
    assert window.source == "model_profile"
    assert mw.guard.budget() == window.tokens - 4_000
    # An explicit reserve wins over the model's max_tokens.
    mw = ContextGuardMiddleware(model=chat, reserve_tokens=10_000)
    assert mw.guard.budget() == window.tokens - 10_000


def test_a_ready_guard_with_settings_is_refused() -> None:
    with pytest.raises(ConfigError, match="reserve_tokens"):
        ContextGuardMiddleware(ContextGuard(), reserve_tokens=1)
    with pytest.raises(ConfigError, match="unknown setting"):
        ContextGuardMiddleware(reserv_tokens=1)


@pytest.mark.parametrize(
    ("typo", "nearest"),
    [("persit", "persist"), ("reserve_token", "reserve_tokens")],
    ids=["own-keyword", "policy-field"],
)
def test_a_misspelt_keyword_names_the_nearest_one(typo: str, nearest: str) -> None:
    with pytest.raises(ConfigError) as info:
        ContextGuardMiddleware(**{typo: 1})
    assert str(info.value) == (
        f"ContextGuardMiddleware: unknown setting {typo!r}. "
        f"Fix: did you mean {nearest!r}?"
    )
    assert (
        ContextGuardMiddleware(reserveTokens=1_000).guard.policy.reserve_tokens == 1_000
    )


def test_a_silent_overflow_is_warned(caplog: pytest.LogCaptureFixture) -> None:
    usage = {"input_tokens": 90_000, "output_tokens": 3, "total_tokens": 90_003}
    reply = AIMessage("ok", usage_metadata=usage)  # type: ignore[arg-type]
    model = GenericFakeChatModel(
        messages=iter([reply]), profile={"max_input_tokens": WINDOW}
    )
    agent = create_agent(model, [], middleware=[ContextGuardMiddleware()])
    with caplog.at_level(logging.WARNING, logger="langchain_context_guard"):
        agent.invoke({"messages": [("user", "hi")]})
    assert "reports 90,000 input tokens" in caplog.text
    assert "40,000" in caplog.text
