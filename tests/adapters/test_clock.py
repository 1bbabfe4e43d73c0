"""The adapters pass the call time to ``prepare`` when pruning is timed to the cache."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent

from langchain_context_guard import ContextGuard, GuardPolicy
from langchain_context_guard.adapters import (
    GuardedAgentState,
    _clock,
    as_runnable,
    guarded_model,
    pre_model_hook,
)
from tests.adapters._support import SYSTEM, make_guard, read_note
from tests.engine._support import agent_history, snapshot
from tests.fakes import ScriptedToolModel

FULL = agent_history(30, result_chars=1_500)
FIRST, LATER = FULL[:42], FULL[:46]


def _policy(ttl: float | None) -> GuardPolicy:
    return GuardPolicy(
        context_window=20_000, reserve_tokens=2_000, cache_ttl_seconds=ttl
    )


def _sent_by_runnable(
    monkeypatch: pytest.MonkeyPatch, ttl: float | None, gap: float
) -> list[str]:
    clock = [1_000.0]
    monkeypatch.setattr(_clock, "time", SimpleNamespace(time=lambda: clock[0]))
    runnable = as_runnable(ContextGuard(_policy(ttl)))
    out: list[Any] = [runnable.invoke(FIRST)]
    clock[0] += gap
    out.append(runnable.invoke(LATER))
    return [snapshot(m) for m in out]


def _sent_by_engine(ttl: float | None, gap: float) -> list[str]:
    guard = ContextGuard(_policy(ttl))
    first = guard.prepare(FIRST, now=1_000.0).messages
    later = guard.prepare(LATER, now=1_000.0 + gap).messages
    return [snapshot(first), snapshot(later)]


@pytest.mark.parametrize("gap", [60.0, 900.0], ids=["warm", "cold"])
def test_the_runnable_times_its_calls(
    monkeypatch: pytest.MonkeyPatch, gap: float
) -> None:
    assert _sent_by_runnable(monkeypatch, 300, gap) == _sent_by_engine(300, gap)


def test_the_cold_call_differs_from_the_warm_one() -> None:
    assert _sent_by_engine(300, 900.0)[1] != _sent_by_engine(300, 60.0)[1]


def test_no_clock_is_read_without_a_lifetime(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_clock() -> float:
        raise AssertionError("read the clock")

    monkeypatch.setattr(_clock, "time", SimpleNamespace(time=no_clock))
    assert as_runnable(ContextGuard(_policy(None))).invoke(FIRST)


def _agent(adapter: str, guard: ContextGuard, model: Any, saver: Any) -> Any:
    """A react agent guarded by ``guarded_model`` or by the ``pre_model_hook``."""
    if adapter == "model":
        bound = guarded_model(guard, model, tools=[read_note])
        return create_react_agent(bound, [read_note], prompt=SYSTEM, checkpointer=saver)
    hook = pre_model_hook(guard, tools=[read_note], system_prompt=SYSTEM)
    return create_react_agent(
        model,
        [read_note],
        prompt=SYSTEM,
        pre_model_hook=hook,
        checkpointer=saver,
        state_schema=GuardedAgentState,
    )


def _turns(
    monkeypatch: pytest.MonkeyPatch,
    plan: list[tuple[str, float]],
    adapter: str = "model",
) -> list[list[str]]:
    """Each turn of one thread, served by worker ``who`` after ``gap`` seconds.

    Workers are fresh guards sharing one checkpointer, as processes of a pool;
    the prompts each turn's first call sent, as text.
    """
    clock = [1_000.0]
    monkeypatch.setattr(_clock, "time", SimpleNamespace(time=lambda: clock[0]))
    saver, workers = InMemorySaver(), {}
    config: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 200}
    sent = []
    for n, (who, gap) in enumerate(plan):
        clock[0] += gap
        guard = workers.setdefault(who, make_guard(cache_ttl_seconds=300))
        model = ScriptedToolModel(steps=2, tool_name="read_note")
        agent = _agent(adapter, guard, model, saver)
        agent.invoke({"messages": [("user", f"Read the notes, part {n}.")]}, config)
        sent.append([m.text for m in model.received[0]])
    return sent


WARM = [("a", 0.0)] * 6 + [("a", 60.0)]
COLD = [("a", 0.0)] * 6 + [("a", 900.0)]


@pytest.mark.parametrize("adapter", ["model", "hook"])
@pytest.mark.parametrize(
    "plan",
    [
        [*WARM[:6], ("b", 60.0)],
        [*COLD[:6], ("b", 900.0)],
        [*COLD, ("b", 30.0)],
        [*COLD, ("a", 30.0)],
    ],
    ids=["warm-handover", "cold-handover", "after-a-cold-prune", "same-worker"],
)
def test_a_guard_rebuilt_from_the_checkpoint_times_the_cache_alike(
    monkeypatch: pytest.MonkeyPatch, plan: list[tuple[str, float]], adapter: str
) -> None:
    one_worker = [("a", gap) for _, gap in plan]
    sent = _turns(monkeypatch, plan, adapter)
    assert sent == _turns(monkeypatch, one_worker, adapter)


@pytest.mark.parametrize("adapter", ["model", "hook"])
def test_the_handover_cases_differ_warm_and_cold(
    monkeypatch: pytest.MonkeyPatch, adapter: str
) -> None:
    warm = _turns(monkeypatch, WARM, adapter)
    cold = _turns(monkeypatch, COLD, adapter)
    assert warm[:6] == cold[:6]
    assert sum(map(len, cold[6])) < 0.7 * sum(map(len, warm[6]))  # pruned afresh
