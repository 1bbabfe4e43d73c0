"""The replay's clock: call times, expired caches billed uncached, seeded pauses."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from langchain_context_guard.replay import GapModel, replay, seconds
from langchain_context_guard.replay._timing import call_times, expired
from langchain_context_guard.replay._transcripts import trajectory_to_messages
from tests.replay._support import trajectory


def _timed(gaps: list[float]) -> dict[str, Any]:
    """A synthetic trajectory whose replies carry ``created`` stamps ``gaps`` apart."""
    data = trajectory(steps=len(gaps) + 1)
    at = 1_700_000_000
    replies = [m for m in data["messages"] if m["role"] == "assistant"]
    for n, reply in enumerate(replies):
        at += int(gaps[n - 1]) if n else 0
        reply["extra"]["response"]["created"] = at
    return data


def test_the_transcript_keeps_each_reply_s_timestamp() -> None:
    messages = trajectory_to_messages(_timed([5.0, 700.0]))
    calls = [k for k, m in enumerate(messages) if m.type == "ai"]
    times = call_times("t", messages, calls, GapModel())
    assert [b - a for a, b in itertools.pairwise(times)] == [5.0, 700.0]
    assert expired(times, 300) == [False, False, True]
    assert expired(times, None) == [False] * 3


def test_without_timestamps_calls_are_spaced_by_the_gap_model() -> None:
    messages = trajectory_to_messages(trajectory(steps=4))
    calls = [k for k, m in enumerate(messages) if m.type == "ai"]
    assert call_times("t", messages, calls, GapModel(gap=7)) == [0, 7, 14, 21]


def test_pauses_are_seeded_by_the_transcript_name() -> None:
    messages = trajectory_to_messages(trajectory(steps=200))
    calls = [k for k, m in enumerate(messages) if m.type == "ai"]
    gaps = GapModel(pause_share=0.25, pause=600)
    once = call_times("a", messages, calls, gaps)
    assert once == call_times("a", messages, calls, gaps)
    assert once != call_times("b", messages, calls, gaps)
    paused = sum(expired(once, 300))
    assert 30 < paused < 70  # about a quarter of 199 gaps
    assert gaps.name == "pauses:0.25:600"


def _billed(ttl: float | None) -> list[float]:
    transcripts = {"t": trajectory_to_messages(_timed([5.0, 5.0, 900.0, 5.0]))}
    result = replay(transcripts, windows=[32_000], strategies=["none"], cache_ttl=ttl)
    none = result.tallies[0]
    assert none.expired == (1 if ttl else 0)
    return [b / t for b, t in zip(none.billed, none.tokens, strict=True)]


def test_a_call_after_the_cache_expired_is_billed_uncached() -> None:
    warm, cold = _billed(None), _billed(300)
    assert warm[3] < 0.5  # the prefix sent before bills at the cache rate
    assert cold[3] == pytest.approx(1.0)
    assert cold[:3] == warm[:3] and cold[4] == warm[4]


def test_a_guard_timed_to_the_cache_prunes_afresh_after_the_pause() -> None:
    transcripts = {"t": trajectory_to_messages(_timed([5.0] * 8 + [900.0, 5.0]))}

    def sent(option: float | None) -> list[float]:
        variants = {"guard": {"cache_ttl_seconds": option}}
        result = replay(
            transcripts,
            windows=[16_000],
            strategies=["guard"],
            guard_variants=variants,
            cache_ttl=300,
        )
        return result.tallies[0].tokens

    default, timed = sent(None), sent(300)
    assert timed[:9] == default[:9]
    assert timed[9] < 0.7 * default[9]  # the call after the pause: pruned afresh


def test_the_results_say_how_the_calls_were_timed() -> None:
    transcripts = {"t": trajectory_to_messages(_timed([5.0, 900.0]))}
    out = replay(transcripts, windows=[32_000], strategies=["none"], cache_ttl=300)
    data = out.to_dict()
    assert (data["cache_ttl"], data["gaps"]) == (300, "real")
    assert data["results"][0]["expired_calls"] == 1


@pytest.mark.parametrize(
    ("text", "value"),
    [("300", 300.0), ("300s", 300.0), ("5m", 300.0), ("1h", 3600.0), ("0", 0.0)],
)
def test_durations(text: str, value: float) -> None:
    assert seconds(text) == value


@pytest.mark.parametrize("text", ["", "m", "five", "-5m", "inf", "nan"])
def test_a_bad_duration_names_the_form(text: str) -> None:
    with pytest.raises(ValueError, match="expected seconds like 300, 5m or 1h"):
        seconds(text)


def test_gap_models_parse() -> None:
    assert GapModel.parse("real") == GapModel()
    assert GapModel.parse("pauses:0.1:10m") == GapModel(pause_share=0.1, pause=600)
    for bad in ("pauses:0.1", "pauses:x:5m", "later", "real:1"):
        with pytest.raises(ValueError, match="pauses:SHARE:DURATION"):
            GapModel.parse(bad)
    with pytest.raises(ValueError, match="share from 0 to 1"):
        GapModel.parse("pauses:2:5m")
