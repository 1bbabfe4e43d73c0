"""LangChain's ``SummarizationMiddleware`` tests, ported to ``CompactionMiddleware``.

Ported from langchain 1.5.2,
``libs/langchain_v1/tests/unit_tests/agents/middleware/implementations/
test_summarization.py``, wherever we claim the same behaviour; names follow the
originals so a LangChain upgrade can be re-ported. A deliberate difference is an
``xfail(strict=True)`` with its reason, listed in docs/langchain.md.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.exceptions import ContextOverflowError
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.runnables import RunnableLambda
from langgraph.runtime import Runtime

from langchain_context_guard import (
    CompactionError,
    ConfigError,
    ContextGuard,
    GuardPolicy,
)
from langchain_context_guard.compaction import (
    CompactionSettings,
    Compactor,
    acompact_messages,
    compact_messages,
)
from langchain_context_guard.compaction._middleware import CompactionMiddleware
from langchain_context_guard.engine._messages import is_summary
from tests.compaction._support import (
    SUMMARY_TEXT,
    ScriptedSummarizer,
    agent_history,
    make_guard,
    settings,
)

GUARD = make_guard()


def _middleware(**kwargs: Any) -> CompactionMiddleware:
    return CompactionMiddleware(ScriptedSummarizer(), guard=make_guard(), **kwargs)


@pytest.mark.parametrize(
    "trigger",
    [
        {"tokens": 1000.5},
        {"messages": "10"},
        {"messages": True},
        {"tokens": False},
        {"fraction": "0.5"},
        [{"messages": 5}, {"tokens": 10.5}],
    ],
    ids=[
        "float-tokens",
        "str-messages",
        "bool-messages",
        "bool-tokens",
        "str-fraction",
        "bad-item-in-list",
    ],
)
def test_trigger_dict_rejects_coercible_values(trigger: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        _middleware(trigger=trigger)
    assert caught.value.field == "trigger"
    assert "write {" in str(caught.value)


@pytest.mark.parametrize(
    "trigger", [("messages", True), ("tokens", "100")], ids=["bool", "str"]
)
def test_trigger_tuple_rejects_coercible_values(trigger: Any) -> None:
    with pytest.raises(ConfigError, match=r"write \("):
        CompactionSettings(trigger=trigger)


@pytest.mark.parametrize(
    "trigger",
    [{"tokens": 1000, "messages": 10}, {"fraction": 1}, {"fraction": 0.5}],
    ids=["ints", "int-fraction", "float-fraction"],
)
def test_trigger_dict_accepts_numbers(trigger: Any) -> None:
    assert _middleware(trigger=trigger).compactor.settings.trigger == trigger


@pytest.mark.parametrize(
    "trigger",
    [{}, {"tokens": 0}, {"messages": -1}, {"fraction": 1.5}, {"fraction": 0}],
    ids=["empty", "zero-tokens", "negative-messages", "fraction-over", "fraction-0"],
)
def test_trigger_dict_rejects_out_of_range(trigger: Any) -> None:
    with pytest.raises(ConfigError):
        _middleware(trigger=trigger)


def test_trigger_dict_rejects_unknown_metric() -> None:
    with pytest.raises(ConfigError):
        _middleware(trigger={"turns": 3})


# --- summarizer= given a runnable or a function -----------------------------


def _summarised_ids(history: list[BaseMessage], out: list[BaseMessage]) -> list[Any]:
    kept = {m.id for m in out}
    return [m.id for m in history if m.id not in kept and m.type != "system"]


def test_summarizer_runnable_receives_messages_not_prompt() -> None:
    seen: list[list[BaseMessage]] = []

    def summarize(messages: list[BaseMessage]) -> str:
        seen.append(messages)
        return "The agent read the files."

    history = agent_history(12)
    out = compact_messages(history, RunnableLambda(summarize), settings(), guard=GUARD)
    assert len(seen) == 1
    assert [m.id for m in seen[0]] == _summarised_ids(history, out)
    assert not any(isinstance(m, SystemMessage) for m in seen[0])
    assert "The agent read the files." in str(out[1].content)


def test_summarizer_function_receives_messages_not_prompt() -> None:
    seen: list[list[BaseMessage]] = []

    def summarize(messages: list[BaseMessage]) -> str:
        seen.append(messages)
        return "done"

    history = agent_history(12)
    out = compact_messages(history, summarize, settings(), guard=GUARD)
    assert [m.id for m in seen[0]] == _summarised_ids(history, out)
    assert all(m in history for m in seen[0])  # the caller's own messages


async def test_summarizer_async_function_receives_messages() -> None:
    seen: list[list[BaseMessage]] = []

    async def summarize(messages: list[BaseMessage]) -> str:
        seen.append(messages)
        return "done"

    history = agent_history(12)
    out = await acompact_messages(history, summarize, settings(), guard=GUARD)
    assert [m.id for m in seen[0]] == _summarised_ids(history, out)


def test_summarizer_function_sees_previous_summary_first() -> None:
    seen: list[list[BaseMessage]] = []

    def summarize(messages: list[BaseMessage]) -> str:
        seen.append(messages)
        return f"summary {len(seen)}"

    comp = Compactor(summarize, settings(), guard=GUARD)
    first = comp.compact(agent_history(12)).messages
    comp.compact([*first, *agent_history(30)[-24:]])
    assert is_summary(seen[1][0])


def test_summarizer_function_through_the_middleware() -> None:
    seen: list[list[BaseMessage]] = []

    def summarize(messages: list[BaseMessage]) -> str:
        seen.append(messages)
        return "The user said hello " + "and more " * 5

    history: list[BaseMessage] = [
        HumanMessage("Hello " * 200, id="h1"),
        AIMessage("Hi " * 200, id="a1"),
        HumanMessage("More " * 200, id="h2"),
        AIMessage("Sure " * 200, id="a2"),
        HumanMessage("Last", id="h3"),
    ]
    mw = CompactionMiddleware(
        _profile_model(),
        guard=TINY,
        summarizer=summarize,
        trigger=("messages", 5),
        keep=("messages", 1),
        retry_delay=0,
    )
    result = mw.before_model({"messages": history}, Runtime())
    assert result is not None
    assert [m.id for m in seen[0]] == ["h1", "a1", "h2", "a2"]
    assert "The user said hello" in str(result["messages"][1].content)


def test_summarizer_chat_model_is_prompted() -> None:
    summarizer = ScriptedSummarizer()
    compact_messages(agent_history(12), summarizer, settings(), guard=GUARD)
    first = summarizer.received[0]
    assert isinstance(first[0], SystemMessage)
    assert "<conversation>" in str(first[-1].content)


@pytest.mark.xfail(
    strict=True,
    reason="a configured chat model (model.with_config(...)) still gets our "
    "sectioned prompt; LangChain treats it as a runnable given the messages",
)
def test_summarizer_wrapped_chat_model_is_treated_as_runnable() -> None:
    summarizer = ScriptedSummarizer()
    compact_messages(
        agent_history(12), summarizer.with_config(tags=["x"]), settings(), guard=GUARD
    )
    assert not isinstance(summarizer.received[0][0], SystemMessage)


# --- a summary call that overflows ------------------------------------------


class OverflowingSummarizer(ScriptedSummarizer):
    """Refuses a prompt over ``limit`` characters, as a provider at its window."""

    limit: int = 60_000

    def reply(self, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
        if sum(len(str(m.content)) for m in messages) > self.limit:
            raise ContextOverflowError("prompt is too long: maximum context length")
        return AIMessage(SUMMARY_TEXT)


def test_summary_overflow_retries_with_middle_cut_out() -> None:
    summarizer = OverflowingSummarizer()
    history = agent_history(30, chars=3_000)
    out = compact_messages(history, summarizer, settings(retries=2), guard=GUARD)
    assert is_summary(out[1])
    first, retry = summarizer.received
    assert len(str(retry[-1].content)) <= len(str(first[-1].content)) // 2 + 500
    assert "characters truncated" in str(retry[-1].content)
    head = str(first[-1].content)[:200]
    assert str(retry[-1].content).startswith(head)  # the start is kept


def test_summary_overflow_retried_only_once() -> None:
    summarizer = OverflowingSummarizer(limit=100)
    with pytest.raises(CompactionError, match="maximum context length"):
        compact_messages(
            agent_history(30, chars=3_000),
            summarizer,
            settings(retries=2),
            guard=GUARD,
        )
    assert len(summarizer.received) == 2


async def test_summary_overflow_retries_async() -> None:
    summarizer = OverflowingSummarizer()
    out = await acompact_messages(
        agent_history(30, chars=3_000), summarizer, settings(), guard=GUARD
    )
    assert is_summary(out[1]) and len(summarizer.received) == 2


def test_summarizer_runnable_overflow_is_not_retried() -> None:
    calls: list[int] = []

    def summarize(messages: list[BaseMessage]) -> str:
        calls.append(len(messages))
        raise ContextOverflowError("maximum context length exceeded")

    with pytest.raises(CompactionError):
        compact_messages(agent_history(12), summarize, settings(), guard=GUARD)
    assert len(calls) == 1


# --- token_counter ------------------------------------------------------------

POLICY = GuardPolicy(
    context_window=100_000, reserve_tokens=2_000, hard_min_tokens=0, warn_below_tokens=0
)


def _turns(n: int) -> list[BaseMessage]:
    return [
        (HumanMessage if k % 2 == 0 else AIMessage)(f"message {k}", id=f"m{k}")
        for k in range(n)
    ]


def test_custom_token_counter_gets_the_whole_list() -> None:
    calls: list[int] = []

    def counter(messages: list[BaseMessage]) -> int:
        calls.append(len(messages))
        return 10 * len(messages)

    mw = CompactionMiddleware(
        ScriptedSummarizer(),
        guard=POLICY,
        token_counter=counter,
        trigger=("tokens", 100),
    )
    assert not mw.compactor.triggered(_turns(9))
    assert calls == [9]
    assert mw.compactor.triggered(_turns(10))


def test_token_counter_approximate_as_langchain_default() -> None:
    mw = CompactionMiddleware(
        ScriptedSummarizer(),
        guard=POLICY,
        token_counter="approximate",
        trigger=("tokens", 60),
    )
    history = _turns(12)
    at = next(n for n in range(1, 13) if count_tokens_approximately(history[:n]) >= 60)
    assert not mw.compactor.triggered(history[: at - 1])
    assert mw.compactor.triggered(history[:at])


def test_token_counter_approximate_counts_every_guard_call() -> None:
    guard = ContextGuard(POLICY, token_counter="approximate")
    assert guard.counter.name == "approximate"
    one = HumanMessage("hello there, how are you today?")
    assert guard.counter.count_message(one) == count_tokens_approximately([one])


def test_token_counter_approximate_in_context_guard_middleware() -> None:
    from langchain_context_guard.adapters._middleware import ContextGuardMiddleware

    middleware = ContextGuardMiddleware(token_counter="approximate", model="gpt-4.1")
    assert middleware.guard.counter.name == "approximate"


def test_token_counter_unknown_name_is_refused() -> None:
    with pytest.raises(ConfigError, match="approximate"):
        ContextGuard(POLICY, token_counter="tiktoken-ish")


# --- trigger and keep, as SummarizationMiddleware resolves them -----------------

TINY = GuardPolicy(hard_min_tokens=0, warn_below_tokens=0)


def _profile_model() -> GenericFakeChatModel:
    """``ProfileChatModel``: a 1,000-token window that answers "Summary"."""
    return GenericFakeChatModel(
        messages=iter(["Summary"] * 5), profile={"max_input_tokens": 1000}
    )


def _four_messages() -> list[BaseMessage]:
    return [
        HumanMessage("Message 1"),
        AIMessage("Message 2"),
        HumanMessage("Message 3"),
        AIMessage("Message 4"),
    ]


def _before_model(messages: list[BaseMessage], **kwargs: Any) -> Any:
    def token_counter(messages: list[BaseMessage]) -> int:
        return len(messages) * 200

    mw = CompactionMiddleware(
        _profile_model(),
        guard=TINY,
        token_counter=token_counter,
        retry_delay=0,
        **kwargs,
    )
    return mw.before_model({"messages": messages}, Runtime())


def test_summarization_middleware_no_summarization_cases() -> None:
    state = [HumanMessage("Hello"), AIMessage("Hi")]
    assert _before_model(state, trigger=None) is None
    assert _before_model(state, trigger=("tokens", 1000)) is None


@pytest.mark.parametrize(
    "keep", [("fraction", 0.5), ("tokens", 400)], ids=["fraction", "tokens"]
)
def test_summarization_middleware_profile_inference_triggers_summary(
    keep: Any,
) -> None:
    # 4 messages * 200 = 800 tokens: under 0.81 of the 1,000 window, at 0.80.
    assert (
        _before_model(_four_messages(), trigger=("fraction", 0.81), keep=keep) is None
    )
    result = _before_model(_four_messages(), trigger=("fraction", 0.80), keep=keep)
    assert result is not None
    assert isinstance(result["messages"][0], RemoveMessage)
    assert is_summary(result["messages"][1])
    assert [m.content for m in result["messages"][2:]] == ["Message 3", "Message 4"]


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="keep is capped at half the token trigger, so one compaction always "
    "makes room: at a trigger of 800 tokens at most 400 are kept",
)
@pytest.mark.parametrize(
    "keep", [("fraction", 0.6), ("tokens", 600)], ids=["fraction", "tokens"]
)
def test_summarization_middleware_keep_above_half_the_trigger(keep: Any) -> None:
    result = _before_model(_four_messages(), trigger=("fraction", 0.80), keep=keep)
    assert [m.content for m in result["messages"][2:]] == [
        "Message 2",
        "Message 3",
        "Message 4",
    ]


def _pair_history() -> list[BaseMessage]:
    return [
        HumanMessage("H" * 300),
        AIMessage("A" * 200, tool_calls=[{"name": "test", "args": {}, "id": "call-1"}]),
        ToolMessage("T" * 50, tool_call_id="call-1"),
        HumanMessage("H" * 180),
        HumanMessage("H" * 160),
    ]


def _pair_middleware(keep: int) -> CompactionMiddleware:
    def token_counter(messages: list[BaseMessage]) -> int:
        return sum(len(str(m.content)) for m in messages)

    return CompactionMiddleware(
        _profile_model(),
        guard=TINY,
        token_counter=token_counter,
        trigger=("messages", 3),
        keep=("tokens", keep),
        retry_delay=0,
    )


def test_summarization_middleware_token_retention_preserves_ai_tool_pairs() -> None:
    messages = _pair_history()
    plan = _pair_middleware(400).compactor.plan(messages)
    assert plan is not None
    # The keep boundary falls inside the call and its result: they stay together.
    assert list(plan.history) == messages[:3]
    assert list(plan.kept) == messages[3:]


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="keep is a ceiling: a tool call and its results that cross it are "
    "summarised whole, where LangChain moves the cut back and keeps them",
)
def test_summarization_middleware_cut_moves_back_to_the_ai_message() -> None:
    messages = _pair_history()
    plan = _pair_middleware(400).compactor.plan(messages)
    assert plan is not None
    assert list(plan.kept) == messages[1:]


# -- reported usage (``_should_summarize_based_on_reported_tokens``) -------------


class ProviderModel(ScriptedSummarizer):
    """A summarizer that traces under the LangSmith provider ``ls_provider``."""

    ls_provider: str | None = "anthropic"

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        return {"ls_provider": self.ls_provider, "ls_model_type": "chat"}


def _reported_middleware(
    trigger: Any = ("tokens", 10_000), provider: str | None = "anthropic"
) -> CompactionMiddleware:
    # A counter that counts nothing: only the reported usage can reach the trigger
    # (LangChain's tests call ``_should_summarize(messages, 0)``).
    policy = GuardPolicy(
        context_window=20_000,
        reserve_tokens=2_000,
        hard_min_tokens=0,
        warn_below_tokens=0,
    )
    return CompactionMiddleware(
        ProviderModel(ls_provider=provider),
        guard=policy,
        trigger=trigger,
        keep=("messages", 4),
        token_counter=lambda messages: 0,
    )


def _reply(text: str, total: int, provider: str = "anthropic") -> AIMessage:
    return AIMessage(
        text,
        response_metadata={"model_provider": provider},
        usage_metadata={
            "input_tokens": total - 1_000,
            "output_tokens": 1_000,
            "total_tokens": total,
        },
    )


def _usage_history(last_total: int, provider: str = "anthropic") -> list[BaseMessage]:
    call = {"name": "tool", "args": {}, "id": "call1"}
    first = _reply("msg2", 6_000).model_copy(update={"tool_calls": [call]})
    return [
        HumanMessage("msg1"),
        first,
        ToolMessage("result", tool_call_id="call1"),
        _reply("msg3", 7_000),
        HumanMessage("msg4"),
        _reply("msg5", last_total, provider),
    ]


def test_usage_metadata_trigger() -> None:
    mw = _reported_middleware()
    messages = _usage_history(10_001)
    # reported token count should override count of zero
    assert mw.compactor.triggered(messages)
    # don't engage unless model provider matches
    messages += [HumanMessage("msg6"), _reply("msg7", 10_001, "not-anthropic")]
    assert not mw.compactor.triggered(messages)
    # don't engage if subsequent message stays under threshold
    messages += [HumanMessage("msg8"), _reply("msg9", 9_999)]
    assert not mw.compactor.triggered(messages)


@pytest.mark.parametrize(
    ("ls_provider", "model_provider", "expected"),
    [
        ("amazon_bedrock", "bedrock", True),
        ("amazon_bedrock", "bedrock_converse", True),
        ("openai-mantle", "openai", True),
        ("anthropic-mantle", "anthropic", True),
        ("amazon_bedrock", "anthropic", False),
        ("openai", "openai-mantle", False),
        (None, "anthropic", False),
    ],
    ids=[
        "bedrock",
        "bedrock-converse",
        "openai-mantle",
        "anthropic-mantle",
        "bedrock-not-anthropic",
        "no-reverse-alias",
        "no-ls-provider",
    ],
)
def test_usage_metadata_trigger_provider_aliases(
    ls_provider: str | None, model_provider: str, expected: bool
) -> None:
    mw = _reported_middleware(provider=ls_provider)
    messages = _usage_history(10_001, model_provider)
    assert mw.compactor.triggered(messages) is expected


@pytest.mark.parametrize(
    ("extra_turns", "expected"), [(0, False), (2, True)], ids=["5-short", "enough"]
)
def test_usage_metadata_trigger_inside_and_clause(
    extra_turns: int, expected: bool
) -> None:
    mw = _reported_middleware(trigger={"tokens": 10_000, "messages": 10})
    turns: list[BaseMessage] = []
    for k in range(extra_turns):
        turns += [HumanMessage(f"more {k}"), AIMessage(f"ok {k}")]
    messages = [*turns, *_usage_history(10_001)]
    assert len(messages) >= 10 or not expected
    assert mw.compactor.triggered(messages) is expected


@pytest.mark.parametrize(
    ("total", "expected"), [(10_000, True), (9_999, False)], ids=["at", "under"]
)
def test_usage_metadata_trigger_with_fraction(total: int, expected: bool) -> None:
    mw = _reported_middleware(trigger=("fraction", 0.5))  # half of 20,000
    assert mw.compactor.triggered(_usage_history(total)) is expected


# -- the summary's input and answer --------------------------------------------


@pytest.mark.parametrize(
    "answer", [123, None, {"summary": "text"}], ids=["int", "none", "dict"]
)
def test_summarizer_returning_non_text_raises_type_error(answer: Any) -> None:
    # LangChain's ``_check_summary``: a summarizer must return a str.
    history = agent_history(40)
    with pytest.raises(TypeError, match="must return a str"):
        compact_messages(history, lambda messages: answer, settings(), guard=GUARD)
    compactor = Compactor(lambda messages: answer, settings(), guard=GUARD)
    with pytest.raises(TypeError, match="must return a str"):
        compactor.update(history)  # a bug in the caller's code, not a failure


def test_image_urls_in_summarized_messages_reach_the_summary_prompt() -> None:
    image = [
        {"type": "text", "text": "What is wrong in this screenshot?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/bug.png"}},
        {"type": "image", "url": "https://example.com/log.png"},
    ]
    history = agent_history(40)
    history.insert(2, HumanMessage(image, id="shot"))
    summarizer = ScriptedSummarizer()
    compact_messages(history, summarizer, settings(), guard=GUARD)
    asked = "\n".join(prompt[-1].text for prompt in summarizer.received)
    assert '<image url="https://example.com/bug.png" />' in asked
    assert '<image url="https://example.com/log.png" />' in asked


class ProfiledSmallSummarizer(ScriptedSummarizer):
    """Overflows past its profile's window, counted by the test's guard."""

    def reply(self, messages: list[BaseMessage], **kwargs: Any) -> Any:
        size = GUARD.count_tokens(messages)
        window = (self.profile or {}).get("max_input_tokens", 0)
        if size > window:
            raise ContextOverflowError(f"prompt is too long: {size} > {window}")
        return super().reply(messages, **kwargs)


def test_summary_calls_fit_the_summarizer_profile() -> None:
    # LangChain retries an overflow within 40% of the summarizer's own window;
    # here the range is split into parts of that size first, so none overflows.
    summarizer = ProfiledSmallSummarizer(profile={"max_input_tokens": 3_000})
    history = agent_history(60)
    compact_messages(history, summarizer, settings(retries=0), guard=GUARD)
    plan = Compactor(summarizer, settings(), guard=GUARD).plan(history)
    assert plan is not None and GUARD.count_tokens(list(plan.history)) > 3_000
    for prompt in summarizer.received:
        asked = prompt[-1].text
        if "<conversation>" in asked:
            conversation = asked[asked.index("<conversation>") :]
            tokens = GUARD.count_tokens([HumanMessage(conversation)])
            assert tokens <= 3_000 * 2 // 5 + 100
