"""The guard inside deepagents' ``create_deep_agent``: main agent and sub-agents.

The scripted run (``_support``) makes 55 main-agent requests and 13 sub-agent
requests whose history outgrows the window; deepagents' own summarization
(characters / 4) lets many of them over the guard's budget. Every request is
counted by a fresh guard with the tools it bound.
"""

from __future__ import annotations

import pytest

from langchain_context_guard import (
    ConfigError,
    ContextGuardMiddleware,
    guarded_subagents,
)
from tests.fakes import pairing_errors

from ._support import MAIN_STEPS, SUB_STEPS, TASK_AT, module, run

pytest.importorskip("deepagents")
WINDOWS = pytest.mark.parametrize("window", [16_000, 32_000], ids=["16k", "32k"])


def _guarded() -> dict[str, object]:
    return {
        "middleware": [ContextGuardMiddleware()],
        "subagents": guarded_subagents(),
    }


@WINDOWS
def test_without_the_guard_requests_go_over_budget(window: int) -> None:
    result = run(window)
    assert result.over_budget("main") > 0
    assert result.over_budget("sub") > 0


@WINDOWS
def test_the_main_agent_s_middleware_does_not_reach_the_sub_agent(window: int) -> None:
    result = run(window, middleware=[ContextGuardMiddleware()])
    assert result.over_budget("main") == 0
    assert result.over_budget("sub") > 0


@WINDOWS
def test_guarded_subagents_keeps_every_request_within_budget(window: int) -> None:
    bare = run(window)
    result = run(window, **_guarded())
    assert len(result.of("main")) == MAIN_STEPS + 1
    assert len(result.of("sub")) == SUB_STEPS + 1
    assert result.over_budget("main") == 0
    assert result.over_budget("sub") == 0
    assert sum(result.tokens("main")) < sum(bare.tokens("main"))
    assert sum(result.tokens("sub")) < sum(bare.tokens("sub"))


@WINDOWS
def test_no_request_breaks_a_tool_pair(window: int) -> None:
    result = run(window, **_guarded())
    broken = {
        i: pairing_errors(r.messages[1:])
        for i, r in enumerate(result.requests)
        if r.who != "summary"
    }
    assert {i: e for i, e in broken.items() if e} == {}


@WINDOWS
def test_files_todos_and_messages_are_kept(window: int) -> None:
    bare = run(window).state
    state = run(window, **_guarded()).state

    def shape(messages: list[object]) -> list[tuple[str, str]]:
        return [(type(m).__name__, m.text) for m in messages]  # type: ignore[attr-defined]

    assert shape(state["messages"]) == shape(bare["messages"])

    def sources(files: dict[str, dict[str, str]]) -> dict[str, str]:
        return {p: f["content"] for p, f in files.items() if p.startswith("/src/")}

    contents = sources(state["files"])
    assert contents == sources(bare["files"])
    written = {n for n in range(1, MAIN_STEPS) if n % 2 and n != TASK_AT}
    assert all(contents[f"/src/mod_{n}.py"] == module(n) for n in written)
    assert state["todos"] == bare["todos"] != []
    assert state["messages"][-1].text == "All modules fixed."


def test_each_sub_agent_gets_its_own_guard() -> None:
    researcher = {
        "name": "researcher",
        "description": "Reads.",
        "system_prompt": "Read.",
    }
    specs = guarded_subagents([researcher], reserve_tokens=3_000)
    assert [s["name"] for s in specs] == ["general-purpose", "researcher"]
    guards = [m for s in specs for m in s["middleware"]]
    assert all(isinstance(g, ContextGuardMiddleware) for g in guards)
    assert guards[0] is not guards[1]
    assert researcher.get("middleware") is None


def test_a_spec_already_guarded_or_remote_is_kept() -> None:
    guard = ContextGuardMiddleware()
    own = {"name": "general-purpose", "description": "d", "middleware": [guard]}
    remote = {"name": "far", "description": "d", "graph_id": "g"}
    specs = guarded_subagents([own, remote])
    assert specs == [own, remote]


def test_a_compiled_sub_agent_is_refused_with_the_fix() -> None:
    compiled = {"name": "c", "description": "d", "runnable": object()}
    with pytest.raises(ConfigError, match="compiled") as caught:
        guarded_subagents([compiled])
    assert "ContextGuardMiddleware()" in str(caught.value)
