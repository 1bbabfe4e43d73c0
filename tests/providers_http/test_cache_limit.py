"""Anthropic's limit of 4 ``cache_control`` breakpoints: the stand-in, a deep agent.

The stand-in refuses a fifth breakpoint with Anthropic's own error. A deep agent
with a system prompt and ``memory=`` already sends 4 from deepagents' caching
and memory middlewares (the system message twice, the last tool, the top-level
``cache_control``); the guard's ``cache_breakpoints=True`` marks go on top of
them, in middleware that runs before deepagents' own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from langchain_core.messages import HumanMessage

from langchain_context_guard import ContextGuard, ContextGuardMiddleware

from ._server import ProviderServer
from ._support import QUIET_RETIREMENT, SYSTEM, TASK, chat_model, policy

pytestmark = QUIET_RETIREMENT
MakeServer = Callable[..., ProviderServer]
MARK = {"type": "ephemeral"}
LIMIT_ERROR = "A maximum of 4 blocks with cache_control may be provided. Found {}."


def _text(text: str, marked: bool) -> dict[str, Any]:
    return {"type": "text", "text": text, **({"cache_control": MARK} if marked else {})}


def _body(system: int, marked: int, top_level: bool) -> dict[str, Any]:
    """A body with ``system`` marked system blocks and ``marked`` marked parts."""
    body: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64,
        "system": [_text(f"rule {i}", True) for i in range(system)],
        "messages": [
            {
                "role": "user",
                "content": [_text(f"part {i}", True) for i in range(marked)],
            }
        ],
    }
    if top_level:
        body["cache_control"] = MARK
    return body


@pytest.mark.parametrize(
    ("system", "marked", "top_level", "found"),
    [(2, 2, True, 5), (1, 4, False, 5), (3, 3, False, 6)],
    ids=["top-level-counts", "in-one-message", "six"],
)
def test_more_than_4_breakpoints_get_anthropics_error(
    make_server: MakeServer, system: int, marked: int, top_level: bool, found: int
) -> None:
    server = make_server()
    body = _body(system, marked, top_level)
    answer = httpx.post(server.url + "/v1/messages", json=body, timeout=5)
    assert answer.status_code == 400
    assert answer.json() == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": LIMIT_ERROR.format(found),
        },
    }


def test_4_breakpoints_are_accepted(make_server: MakeServer) -> None:
    server = make_server()
    body = _body(2, 1, True)
    answer = httpx.post(server.url + "/v1/messages", json=body, timeout=5)
    assert answer.status_code == 200
    assert server.rejections == []


def test_a_deep_agent_with_memory_and_the_guard_s_breakpoints_is_never_refused(
    make_server: MakeServer,
) -> None:
    from deepagents import create_deep_agent
    from deepagents.backends.utils import create_file_data

    server = make_server(tool_steps=6)
    guard = ContextGuardMiddleware(ContextGuard(policy()), cache_breakpoints=True)
    agent = create_deep_agent(
        chat_model("anthropic", server),
        system_prompt=SYSTEM,
        memory=["/AGENTS.md"],
        middleware=[guard],
    )
    files = {"/AGENTS.md": create_file_data("Run the tests before answering.")}
    agent.invoke({"messages": [HumanMessage(TASK)], "files": files})
    assert server.rejections == []
    assert len(server.accepted) == 7
