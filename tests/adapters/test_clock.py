"""The adapters pass the call time to ``prepare`` when pruning is timed to the cache."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from langchain_context_guard import ContextGuard, GuardPolicy
from langchain_context_guard.adapters import _clock, as_runnable
from tests.engine._support import agent_history, snapshot

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
