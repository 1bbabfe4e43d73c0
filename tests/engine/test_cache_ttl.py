"""Pruning timed to the cache: a call after the cache expired prunes afresh."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from langchain_context_guard import (
    ConfigError,
    ContextGuard,
    GuardPolicy,
    InvalidInputError,
)
from langchain_context_guard.engine._cache_clock import CacheClock
from tests.engine._support import agent_history, snapshot

FULL = agent_history(30, result_chars=1_500)
FIRST, LATER = FULL[:42], FULL[:46]


def _calls(ttl: float | None, times: tuple[float | None, float | None]) -> list[Any]:
    policy = GuardPolicy(
        context_window=20_000, reserve_tokens=2_000, cache_ttl_seconds=ttl
    )
    guard = ContextGuard(policy)
    return [
        guard.prepare(history, now=at)
        for history, at in zip((FIRST, LATER), times, strict=True)
    ]


def _sent(results: list[Any]) -> list[str]:
    return [snapshot(r.messages) for r in results]


def test_a_warm_cache_re_sends_the_previous_prompt() -> None:
    _, warm = _calls(300, (0.0, 60.0))
    assert warm.report.reused == len(FIRST)


def test_a_cold_cache_prunes_afresh_and_deeper() -> None:
    _, warm = _calls(300, (0.0, 60.0))
    _, cold = _calls(300, (0.0, 301.0))
    assert cold.report.reused < len(FIRST)
    assert cold.report.tokens_after < warm.report.tokens_after
    assert cold.report.tokens_after <= GuardPolicy().prune_to * cold.report.budget


@pytest.mark.parametrize(
    ("ttl", "times"),
    [
        (None, (0.0, 10_000.0)),  # no lifetime: time is ignored
        (300, (None, 10_000.0)),  # the first call had no time
        (300, (0.0, None)),  # this call has none
        (300, (0.0, 300.0)),  # exactly the lifetime: still warm
    ],
    ids=["no-ttl", "first-untimed", "untimed", "at-ttl"],
)
def test_without_an_expiry_the_calls_are_todays(
    ttl: float | None, times: tuple[float | None, float | None]
) -> None:
    assert _sent(_calls(ttl, times)) == _sent(_calls(None, (None, None)))


def test_the_same_times_give_the_same_prompts() -> None:
    assert _sent(_calls(300, (0.0, 900.0))) == _sent(_calls(300, (0.0, 900.0)))


def test_the_clock_keeps_each_conversation_apart() -> None:
    clock = CacheClock(60)
    assert clock.tick("a", 0.0) is False
    assert clock.tick("b", 100.0) is False
    assert clock.tick("a", 61.0) is True
    assert clock.tick("a", 100.0) is False
    assert CacheClock(None).tick("a", 1e9) is False


def test_a_non_positive_lifetime_is_refused() -> None:
    with pytest.raises(ConfigError, match="cache_ttl_seconds"):
        GuardPolicy(cache_ttl_seconds=0)


def test_a_datetime_is_read_as_its_timestamp() -> None:
    start = datetime(2025, 1, 1, tzinfo=UTC)
    as_dates = _calls(300, (start, start + timedelta(seconds=301)))  # type: ignore[arg-type]
    as_seconds = _calls(300, (start.timestamp(), start.timestamp() + 301))
    assert _sent(as_dates) == _sent(as_seconds)
    assert as_dates[1].report.reused < len(FIRST)  # cold: the dates were read


@pytest.mark.parametrize(
    "now",
    [math.nan, math.inf, -math.inf, "12:00", True],
    ids=["nan", "inf", "-inf", "text", "bool"],
)
def test_a_bad_time_is_refused_before_anything_is_recorded(now: object) -> None:
    guard = ContextGuard(GuardPolicy(context_window=20_000, cache_ttl_seconds=300))
    with pytest.raises(InvalidInputError, match=r"prepare\(now=\.\.\.\)") as raised:
        guard.prepare(FIRST, now=now)  # type: ignore[arg-type]
    assert "time.time()" in raised.value.hint
    guard.prepare(FIRST, now=0.0)
    assert guard.export_state(FIRST).get("at") == 0.0
