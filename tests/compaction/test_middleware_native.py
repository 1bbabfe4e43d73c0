"""``CompactionMiddleware`` built as LangChain's ``SummarizationMiddleware`` is."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.exceptions import ModelRateLimitError
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from langchain_context_guard import (
    CompactionError,
    CompactionSettings,
    ConfigError,
    GuardPolicy,
)
from langchain_context_guard.compaction import Compactor
from langchain_context_guard.compaction._middleware import CompactionMiddleware
from langchain_context_guard.engine._messages import marker
from tests.compaction._support import (
    SUMMARY_TEXT,
    TASK,
    ScriptedSummarizer,
    agent_history,
    make_guard,
    read_file,
    settings,
    tool_calling_model,
)
from tests.fakes import FakeAPIStatusError, pairing_errors

WINDOW = 30_000


@pytest.fixture
def openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")


def test_constructs_from_a_model_string_like_summarization_middleware(
    openai_key: None,
) -> None:
    mw = CompactionMiddleware(
        model="openai:gpt-4.1-mini", trigger=("fraction", 0.8), keep=("messages", 20)
    )
    assert isinstance(mw.model, ChatOpenAI)
    assert mw.model.model_name == "gpt-4.1-mini"
    s = mw.compactor.settings
    assert (s.trigger, s.keep) == (("fraction", 0.8), ("messages", 20))
    window = mw.compactor.guard.window()
    assert window.source == "model_profile"
    assert mw.model.profile is not None
    assert window.tokens == mw.model.profile["max_input_tokens"]
    assert "o200k_base" in mw.compactor.guard.counter.name


def _scripted_openai(
    monkeypatch: pytest.MonkeyPatch, calls: list[list[BaseMessage]]
) -> None:
    """ChatOpenAI answers with the scripted summary instead of calling the API."""

    def generate(
        self: ChatOpenAI, messages: list[BaseMessage], *a: Any, **kw: Any
    ) -> ChatResult:
        calls.append(list(messages))
        if kw.get("response_format") or kw.get("tools"):
            raise ValueError("no structured output in this test")
        return ChatResult(generations=[ChatGeneration(message=AIMessage(SUMMARY_TEXT))])

    monkeypatch.setattr(ChatOpenAI, "_generate", generate)


def test_documented_run_fraction_trigger_keeps_twenty_messages(
    openai_key: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[BaseMessage]] = []
    _scripted_openai(monkeypatch, calls)
    mw = CompactionMiddleware(
        model="openai:gpt-4.1-mini",
        trigger=("fraction", 0.8),
        keep=("messages", 20),
        retry_delay=0.0,
    )
    # A 30k-token window keeps the run short; everything else is as built.
    assert isinstance(mw.model, ChatOpenAI)
    mw.model.profile = {"max_input_tokens": WINDOW}
    agent_model = tool_calling_model(steps=40)
    agent_model.profile = {"max_input_tokens": WINDOW}
    agent = create_agent(
        agent_model, [read_file], middleware=[mw], checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 500}
    states = [
        s["messages"]
        for s in agent.stream(
            {"messages": [("user", TASK)]}, config, stream_mode="values"
        )
    ]
    assert states[-1][-1].content == "All done."
    assert calls, "the summarizer was never asked"
    compacted = [
        msgs
        for msgs in states
        if msgs and (marker(msgs[0]) or {}).get("kind") == "summary"
    ]
    assert compacted
    first = compacted[0]
    # The summary, then exactly the newest 20 messages (a tool pair is whole).
    assert 20 <= len(first) - 1 <= 21
    guard = mw.compactor.guard
    sizes = [guard.count_tokens(received) for received in agent_model.received]
    assert max(sizes) <= guard.budget(agent_model)
    assert not any(pairing_errors(received) for received in agent_model.received)


def test_trigger_none_never_compacts_as_in_langchain() -> None:
    history = agent_history(30, chars=3_000)
    off = Compactor(ScriptedSummarizer(), settings(trigger=None), guard=make_guard())
    auto = Compactor(ScriptedSummarizer(), settings(), guard=make_guard())
    assert auto.triggered(history)
    assert not off.triggered(history)


def test_dict_trigger_clause_needs_every_size() -> None:
    history = agent_history(30, chars=3_000)
    guard = make_guard()
    tokens = guard.count_tokens(history)

    def compactor(trigger: Any) -> Compactor:
        return Compactor(ScriptedSummarizer(), settings(trigger=trigger), guard=guard)

    assert compactor({"tokens": tokens - 10, "messages": len(history)}).triggered(
        history
    )
    assert not compactor(
        {"tokens": tokens - 10, "messages": len(history) + 1}
    ).triggered(history)
    either = [{"tokens": tokens + 10}, ("messages", len(history))]
    assert compactor(either).triggered(history)


def test_langchain_names_with_another_meaning_are_refused() -> None:
    with pytest.raises(ConfigError, match="instructions=") as info:
        CompactionMiddleware(ScriptedSummarizer(), summary_prompt="{messages}")
    assert str(info.value) == (
        "CompactionMiddleware does not take 'summary_prompt': it writes a "
        "sectioned summary with its own prompt. Fix: pass instructions='...' to "
        "add what the summary must focus on."
    )
    with pytest.raises(ConfigError, match="max_prompt_chars") as info:
        CompactionMiddleware(ScriptedSummarizer(), trim_tokens_to_summarize=4_000)
    assert str(info.value).count("characters") == 1


def test_an_unknown_setting_names_the_nearest_one() -> None:
    with pytest.raises(ConfigError) as info:
        CompactionSettings(keepp=("tokens", 4_000))
    assert str(info.value) == (
        "CompactionSettings: unknown setting 'keepp'. Fix: did you mean 'keep'?"
    )


def test_policy_and_flat_settings_are_accepted() -> None:
    mw = CompactionMiddleware(
        ScriptedSummarizer(),
        guard=GuardPolicy(context_window=40_000, reserve_tokens=2_000),
        keep=("tokens", 2_000),
        timeout=5.0,
    )
    assert mw.compactor.guard.window().tokens == 40_000
    assert mw.compactor.settings.timeout == 5.0
    with pytest.raises(ConfigError, match="model"):
        CompactionMiddleware()


class _Flaky(ScriptedSummarizer):
    """Raises ``errors`` in turn, then answers."""

    errors: list[Exception]

    def reply(self, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
        n = len(self.received)
        if n <= len(self.errors):
            raise self.errors[n - 1]
        return super().reply(messages)


@pytest.mark.parametrize(
    "error",
    [
        FakeAPIStatusError("Error code: 401 - invalid x-api-key", status_code=401),
        FakeAPIStatusError("Error code: 403 - permission denied", status_code=403),
        FakeAPIStatusError("Error code: 400 - bad request", status_code=400),
    ],
    ids=["auth", "permission", "bad-request"],
)
def test_auth_permission_and_bad_request_are_not_retried(error: Exception) -> None:
    model = _Flaky(errors=[error, error, error])
    compactor = Compactor(model, settings(retries=2), guard=make_guard())
    with pytest.raises(CompactionError, match="not retried"):
        compactor.compact(agent_history(30, chars=3_000))
    assert len(model.received) == 1


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "error",
    [RuntimeError("503 upstream"), ModelRateLimitError("429 slow down")],
    ids=["server", "rate-limit"],
)
async def test_transient_errors_are_retried(error: Exception) -> None:
    model = _Flaky(errors=[error])
    compactor = Compactor(model, settings(retries=2), guard=make_guard())
    result = compactor.compact(agent_history(30, chars=3_000))
    assert len(model.received) == 2
    assert (marker(result.messages[1]) or {}).get("kind") == "summary"
    model2 = _Flaky(errors=[error])
    compactor2 = Compactor(model2, settings(retries=2), guard=make_guard())
    await compactor2.acompact(agent_history(30, chars=3_000))
    assert len(model2.received) == 2
