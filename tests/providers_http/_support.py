"""Real provider clients pointed at the stand-in server, tools and the loops.

``chat_model`` builds ``ChatOpenAI`` or ``ChatAnthropic`` against a
``ProviderServer`` (no retries, so a refusal fails the call at once); the tools
return a few KB of text each, so a run of 20 tool calls is about twice the
16,000-token window; ``lcel_loop`` drives a chain call by call.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import Runnable
from langchain_core.tools import tool

from langchain_context_guard import GuardPolicy

from . import _rules as rules
from ._server import ProviderServer

PROVIDERS = ("openai", "anthropic")
WINDOW = 16_000
SYSTEM = "You are a coding agent. Read the files you need, then answer."
TASK = "Find where the checksum of module 0 goes wrong."
RESULT_LINES = 48

# The anthropic SDK warns that claude-sonnet-4-5 is scheduled for retirement;
# the model name only routes the request to the stand-in server.
QUIET_RETIREMENT = pytest.mark.filterwarnings(
    "ignore:The model 'claude-sonnet-4-5' is deprecated:DeprecationWarning"
)


def policy(**settings: Any) -> GuardPolicy:
    """The guard's policy: the server's window, 2,000 tokens kept for the reply."""
    return GuardPolicy(
        **{"context_window": WINDOW, "reserve_tokens": 2_000, **settings}
    )


@tool
def read_file(path: str) -> str:
    """Read a source file of the repository."""
    return "\n".join(
        f"{path}:{i}: def check_{i}(value): return (value * {i * i + 7}) % 65521"
        f"  # branch {i % 7} of the checksum, see notes/{path}.md#{i}"
        for i in range(RESULT_LINES)
    )


@tool
def grep(pattern: str) -> str:
    """Search the repository for a pattern."""
    return f"src/module_0.py:3: {pattern}"


TOOLS = [read_file, grep]


def chat_model(provider: str, server: ProviderServer, **settings: Any) -> Any:
    """``ChatOpenAI`` / ``ChatAnthropic`` talking to ``server``, never retrying."""
    if provider == "openai":
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(
            model="gpt-4o-mini",
            base_url=server.url + "/v1",
            api_key="test",  # type: ignore[arg-type]
            max_retries=0,
            **settings,
        )
    from langchain_anthropic import ChatAnthropic

    return ChatAnthropic(  # type: ignore[call-arg]
        model="claude-sonnet-4-5",
        base_url=server.url,
        api_key="test",  # type: ignore[arg-type]
        max_retries=0,
        **settings,
    )


def run_tools(reply: AIMessage, *, ids: bool) -> list[ToolMessage]:
    """The tool results for ``reply``'s calls (with message ids or without)."""
    by_name = {t.name: t for t in TOOLS}
    return [
        ToolMessage(
            by_name[call["name"]].invoke(call["args"]),
            tool_call_id=call["id"],
            id=f"result-{call['id']}" if ids else None,
        )
        for call in reply.tool_calls
    ]


def opening(*, ids: bool) -> list[BaseMessage]:
    """The system prompt and the task."""
    return [
        SystemMessage(SYSTEM, id="system" if ids else None),
        HumanMessage(TASK, id="task" if ids else None),
    ]


def lcel_loop(
    chain: Runnable[Any, Any], *, ids: bool, max_calls: int = 45
) -> list[BaseMessage]:
    """Call ``chain`` on the growing history until it answers without tools."""
    history = opening(ids=ids)
    for _ in range(max_calls):
        reply = chain.invoke(history)
        history.append(reply)
        if not reply.tool_calls:
            return history
        history += run_tools(reply, ids=ids)
    raise AssertionError(f"no final answer in {max_calls} calls")


async def alcel_loop(
    chain: Runnable[Any, Any], *, ids: bool, max_calls: int = 45
) -> list[BaseMessage]:
    """``lcel_loop`` with ``ainvoke``."""
    history = opening(ids=ids)
    for _ in range(max_calls):
        reply = await chain.ainvoke(history)
        history.append(reply)
        if not reply.tool_calls:
            return history
        history += run_tools(reply, ids=ids)
    raise AssertionError(f"no final answer in {max_calls} calls")


def provider_tokens(
    provider: str, model: Any, messages: list[BaseMessage], multiplier: float = 1.0
) -> int:
    """What the server would count for ``messages``, as the client would send them."""
    body = model._get_request_payload(messages)
    count = rules.openai_tokens if provider == "openai" else rules.anthropic_tokens
    return count(body, multiplier)
