"""``_promote``: a call that ran the passes on a long history settles the young GC
generations; warm calls, short histories and ``stable_prefix=False`` do not."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from langchain_context_guard import ContextGuard, GuardPolicy
from langchain_context_guard.engine.incremental import _promote as _settle
from tests.engine._support import agent_history


@pytest.fixture
def collections(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The generations ``settle`` collected (the collection itself still runs)."""
    seen: list[int] = []
    collect = gc.collect

    def spy(generation: int = 2) -> int:
        seen.append(generation)
        return collect(generation)

    monkeypatch.setattr(_settle.gc, "collect", spy)
    monkeypatch.setattr(_settle, "SETTLE_FROM", 40)
    return seen


def _calls(guard: ContextGuard, seen: list[int], sizes: Any) -> list[list[int]]:
    full = agent_history(60, result_chars=3_000)
    out = []
    for k in sizes:
        seen.clear()
        guard.prepare(full[:k])
        out.append(list(seen))
    return out


def test_the_first_call_and_prunings_on_a_long_history_settle_warm_calls_do_not(
    collections: list[int],
) -> None:
    guard = ContextGuard(GuardPolicy(context_window=32_000, reserve_tokens=4_000))
    per_call = _calls(guard, collections, range(30, 122, 2))
    assert per_call[0] == []  # 30 messages: short
    pruned = [i for i, c in enumerate(per_call) if c]
    assert all(c in ([], [1]) for c in per_call)
    assert pruned and len(pruned) < len(per_call) / 2  # most calls re-send


def test_the_mode_that_runs_the_passes_on_every_call_never_settles(
    collections: list[int],
) -> None:
    guard = ContextGuard(GuardPolicy(context_window=32_000, stable_prefix=False))
    assert _calls(guard, collections, range(40, 122, 8)) == [[]] * 11


def test_a_disabled_collector_stays_off(collections: list[int]) -> None:
    gc.disable()
    try:
        _settle.settle(10_000)
    finally:
        gc.enable()
    _settle.settle(10)
    assert collections == []
    _settle.settle(10_000)
    assert collections == [1]
