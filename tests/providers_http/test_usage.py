"""Usage anchoring reads the providers' real usage fields, as the clients parse them.

The server reports usage in each provider's shape (OpenAI ``prompt_tokens`` with
``cached_tokens`` inside it; Anthropic ``input_tokens`` without the cache reads
and writes, which come as ``cache_read_input_tokens`` and
``cache_creation_input_tokens``). After a run the guard must count a prefix as
the provider did (the anchor), and count new text the way the provider does (the
calibration), whatever the cache split.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from langchain_context_guard import ContextGuard, ContextGuardMiddleware, as_runnable

from ._server import ProviderServer
from ._support import (
    PROVIDERS,
    QUIET_RETIREMENT,
    SYSTEM,
    TASK,
    TOOLS,
    chat_model,
    lcel_loop,
    policy,
    provider_tokens,
    read_file,
)

pytestmark = QUIET_RETIREMENT
MakeServer = Callable[..., ProviderServer]
WHOLE_RESULTS = policy(max_tool_result_share=0.5)
"""Tool results sent whole: a prompt the provider counted is this history's prefix
unchanged, so the provider's figure can stand for it."""


def _replies(history: list[BaseMessage]) -> list[AIMessage]:
    return [m for m in history if isinstance(m, AIMessage)]


def _usage(message: AIMessage) -> dict[str, Any]:
    assert message.usage_metadata is not None
    return dict(message.usage_metadata)


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("multiplier", [1.0, 1.25])
def test_the_guard_reads_usage_and_counts_like_the_provider(
    make_server: MakeServer, provider: str, multiplier: float
) -> None:
    server = make_server(tool_steps=20, multiplier=multiplier)
    model = chat_model(provider, server)
    guard = ContextGuard(policy(), model=model)
    chain = as_runnable(guard, tools=TOOLS, model=model) | model.bind_tools(TOOLS)
    history = lcel_loop(chain, ids=True)
    assert server.rejections == []
    replies = _replies(history)
    assert len(replies) == len(server.accepted) == 21
    reads = 0
    for reply, exchange in zip(replies, server.accepted, strict=True):
        assert exchange.usage is not None
        usage = _usage(reply)
        assert usage["input_tokens"] == exchange.tokens
        assert usage["output_tokens"] == exchange.usage.output
        assert usage["input_token_details"]["cache_read"] == exchange.usage.cache_read
        reads += exchange.usage.cache_read > 0
    if provider == "openai":  # it caches repeated prefixes without being asked
        assert reads >= 10
    probe = [HumanMessage(read_file.invoke({"path": "src/probe.py"}) * 4)]
    truth = provider_tokens(provider, model, probe, multiplier)
    fresh = ContextGuard(policy(), model=model).count_tokens(probe)
    calibrated = guard.count_tokens(probe)
    assert abs(calibrated - truth) <= 0.03 * truth
    if multiplier > 1:
        assert fresh < 0.9 * truth  # uncalibrated, the guard would undercount


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_prefix_counts_as_the_provider_reported_it(
    make_server: MakeServer, provider: str
) -> None:
    server = make_server(tool_steps=4, multiplier=1.25)
    model = chat_model(provider, server)
    guard = ContextGuard(WHOLE_RESULTS, model=model)
    chain = as_runnable(guard, tools=TOOLS, model=model) | model.bind_tools(TOOLS)
    history = lcel_loop(chain, ids=True)
    last = _usage(_replies(history)[-1])
    anchored = last["input_tokens"] + last["output_tokens"]
    assert guard.count_tokens(history, tools=TOOLS) == anchored
    without = ContextGuard(
        policy(max_tool_result_share=0.5, usage_anchoring=False), model=model
    )
    assert without.count_tokens(history, tools=TOOLS) < 0.9 * anchored


def test_anthropic_cache_reads_and_writes_count_as_input(
    make_server: MakeServer,
) -> None:
    server = make_server(tool_steps=20)
    guard = ContextGuard(WHOLE_RESULTS)
    agent = create_agent(
        chat_model("anthropic", server),
        tools=TOOLS,
        system_prompt=SYSTEM,
        middleware=[ContextGuardMiddleware(guard, cache_breakpoints=True)],
        checkpointer=InMemorySaver(),
    )
    config: dict[str, Any] = {
        "configurable": {"thread_id": "cache"},
        "recursion_limit": 100,
    }
    result = agent.invoke({"messages": [HumanMessage(TASK)]}, config)
    assert server.rejections == []
    usages = [e.usage for e in server.accepted if e.usage is not None]
    # The stable prefix is read back on most calls, prunings included.
    reads = [u.cache_read for u in usages]
    assert sum(r > 0 for r in reads) >= len(reads) - 3
    for reply, usage in zip(_replies(result["messages"]), usages, strict=True):
        details = _usage(reply)["input_token_details"]
        assert details["cache_read"] == usage.cache_read
        assert details["cache_creation"] == usage.cache_write
        assert _usage(reply)["input_tokens"] == usage.prompt  # the three parts
    # A prefix the server counted is anchored at its total, not its uncached part.
    messages = result["messages"]
    short = messages[:6]  # task, then two calls and results, then a reply
    reply = short[-1]
    assert isinstance(reply, AIMessage)
    usage = _usage(reply)
    uncached = usage["input_tokens"] - sum(usage["input_token_details"].values())
    assert uncached < usage["input_tokens"] // 2
    assert guard.count_tokens(short) == usage["input_tokens"] + usage["output_tokens"]
