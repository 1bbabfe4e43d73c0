"""export_state / restore_state: another guard sends the prompt this one would."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_context_guard import ContextGuard, GuardPolicy
from tests.engine._support import agent_history

POLICY = GuardPolicy(
    context_window=20_000,
    reserve_tokens=3_000,
    warn_below_tokens=16_000,
    max_tool_result_share=0.5,  # big results prune, rather than being cut
)


def _history(steps: int) -> list[BaseMessage]:
    history: list[BaseMessage] = [
        SystemMessage("You are terse.", id="sys"),
        HumanMessage("Go.", id="u"),
    ]
    for k in range(steps):
        call = {"name": "read", "args": {"k": k}, "id": f"c{k}"}
        usage: Any = {
            "input_tokens": 500 * k + 40,
            "output_tokens": 5,
            "total_tokens": 0,
        }
        history.append(
            AIMessage("", tool_calls=[call], id=f"a{k}", usage_metadata=usage)
        )
        text = f"{k}: line\n" * (900 + 97 * k % 700)
        history.append(ToolMessage(text, tool_call_id=f"c{k}", id=f"t{k}"))
    return history


def _small_step(history: list[BaseMessage]) -> list[BaseMessage]:
    call = {"name": "read", "args": {}, "id": "x"}
    return [
        *history,
        AIMessage("", tool_calls=[call], id="ax"),
        ToolMessage("done", tool_call_id="x", id="tx"),
    ]


def _serve(guard: ContextGuard, history: list[BaseMessage]) -> dict[int, Any]:
    """Every step of ``history`` through ``guard``; the records by reply index."""
    records: dict[int, Any] = {}
    for n in range(4, len(history) + 1, 2):
        guard.prepare(history[:n])
        records[n] = guard.export_state(history[:n])
    return records


def test_a_fresh_guard_sends_the_same_prompt_after_restore() -> None:
    served = _history(15)
    history = _small_step(served)
    one = ContextGuard(POLICY)
    records = _serve(one, served)
    bases = {r["base"] for r in records.values()}
    assert len(bases) >= 3  # several prunings, so there is something to hand over
    other = ContextGuard(POLICY)
    other.restore_state(history, records)
    assert other.prepare(history).messages == one.prepare(history).messages
    # without the records a fresh guard prunes afresh: another prompt
    assert (
        ContextGuard(POLICY).prepare(history).messages != one.prepare(history).messages
    )


def test_a_stale_guard_follows_a_pruning_made_elsewhere() -> None:
    served = _history(15)
    history = _small_step(served)
    one = ContextGuard(POLICY)
    records = _serve(one, served)
    stale = ContextGuard(POLICY)  # served the first steps only
    _serve(stale, history[:8])
    stale.restore_state(history, records)
    assert stale.prepare(history).messages == one.prepare(history).messages


def test_records_are_small_and_json() -> None:
    import json

    records = _serve(ContextGuard(POLICY), _history(10))
    for record in records.values():
        assert set(record) <= {"v", "base", "sent", "ratio", "fp", "head"}
        assert len(json.dumps(record)) < 140
    assert ContextGuard(POLICY).export_state([]) == {}
    ContextGuard(POLICY).restore_state(_history(2), {})  # nothing to do


def _stamped(records: dict[int, Any], history: list[BaseMessage]) -> list[Any]:
    """The history with each reply's record beside it, as the middleware keeps it."""
    return [(m, records.get(i)) for i, m in enumerate(history)]


def test_the_needed_records_restore_what_all_records_do() -> None:
    from langchain_context_guard.engine.incremental._handover import needed_records

    served = _history(15)
    history = _small_step(served)
    one = ContextGuard(POLICY)
    records = _serve(one, served)
    pairs = _stamped(records, history)
    by_id = {id(m): r for m, r in pairs}
    read: list[int] = []

    def lookup(message: BaseMessage) -> Any:
        read.append(id(message))
        return by_id[id(message)]

    needed = needed_records(history, lookup)
    assert set(needed) < set(records)  # fewer records ...
    assert len(read) < len(history) // 2  # ... and not a scan of the history
    other = ContextGuard(POLICY)
    other.restore_state(history, needed)
    assert other.prepare(history).messages == one.prepare(history).messages


def test_kept_records_stay_two_and_restore_what_all_records_do() -> None:
    from langchain_context_guard.engine.incremental._handover import keep_records

    served = _history(15)
    history = _small_step(served)
    one = ContextGuard(POLICY)
    kept: dict[int, Any] = {}
    for at, record in _serve(one, served).items():
        kept = keep_records(kept, at, record)
        assert len(kept) <= 2
    other = ContextGuard(POLICY)
    other.restore_state(history, kept)
    assert other.prepare(history).messages == one.prepare(history).messages


JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.lists(st.integers(min_value=-(10**20), max_value=10**20), max_size=3),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=3),
)
"""Values an edited, truncated or foreign record may hold."""
JUNK_RECORDS = st.one_of(
    JUNK,
    st.dictionaries(
        st.sampled_from(["v", "sent", "base", "ratio", "at", "cold", "x"]), JUNK
    ),
)
BAD_FIELDS = {
    "v": st.one_of(st.integers(min_value=4), st.just(0), st.text(max_size=3)),
    "fp": st.one_of(st.text(max_size=3), st.integers(), st.just("G" * 16)),
    "head": st.one_of(st.text(max_size=3), st.booleans(), st.just("0" * 17)),
    "sent": st.one_of(
        st.lists(st.integers(min_value=1, max_value=5), max_size=1),
        st.tuples(st.integers(max_value=0), st.booleans()),
        st.tuples(st.integers(min_value=10**8 + 1), st.booleans()),
        st.tuples(st.floats(), st.booleans()),
        st.tuples(st.integers(min_value=1, max_value=10**6), st.integers()),
        st.text(max_size=3),
    ),
    "base": st.one_of(
        st.integers(max_value=0),
        st.integers(min_value=10**3),
        st.floats(),
        st.booleans(),
        st.text(max_size=3),
    ),
    "ratio": st.one_of(
        st.floats().filter(lambda r: not 0.7 <= r <= 1.5),
        st.just(float("nan")),
        st.booleans(),
        st.text(max_size=3),
        st.lists(st.floats(), max_size=2),
    ),
    "at": st.one_of(
        st.just(float("nan")),
        st.just(float("inf")),
        st.booleans(),
        st.text(max_size=3),
    ),
    "cold": st.one_of(st.integers(), st.text(max_size=3)),  # None: not cold
}


@st.composite
def _malformed(draw: Any, good: dict[str, Any]) -> dict[str, Any]:
    """A good record with at least one field made bad."""
    record = dict(good)
    for key in draw(st.sets(st.sampled_from(sorted(BAD_FIELDS)), min_size=1)):
        record[key] = draw(BAD_FIELDS[key])
    return record


SERVED = _history(6)
STEP = _small_step(SERVED)
GOOD = _serve(ContextGuard(POLICY), SERVED)
FRESH = ContextGuard(POLICY).prepare(STEP)
JUNK_SETTINGS = settings(max_examples=60, deadline=None, database=None)


@JUNK_SETTINGS
@given(data=st.data())
def test_malformed_records_are_ignored_and_the_prompt_pruned_afresh(
    data: st.DataObject,
) -> None:
    at = data.draw(st.sampled_from(sorted(GOOD)))
    states = {at: data.draw(_malformed(GOOD[at]))}
    guard = ContextGuard(POLICY)
    guard.restore_state(STEP, states)
    result = guard.prepare(STEP)
    assert result.messages == FRESH.messages
    assert result.report.tokens_after == FRESH.report.tokens_after


@JUNK_SETTINGS
@given(
    states=st.one_of(
        JUNK,
        st.dictionaries(
            st.one_of(st.integers(-5, 30), st.text(max_size=2), st.floats()),
            JUNK_RECORDS,
            max_size=3,
        ),
    )
)
def test_junk_records_never_raise_nor_inflate_the_count(states: Any) -> None:
    guard = ContextGuard(POLICY)
    guard.restore_state(STEP, states)
    result = guard.prepare(STEP)
    # a well-formed record may carry a calibration, at most 1.5
    assert result.report.tokens_after <= FRESH.report.tokens_after * 1.5
    assert result.report.tokens_after <= result.report.budget


def test_records_carry_their_version_and_other_versions_are_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    at = max(GOOD)
    assert GOOD[at]["v"] == 3  # a base: its fingerprint and head
    legacy = {k: v for k, v in GOOD[at].items() if k not in {"v", "fp", "head"}}
    restored = ContextGuard(POLICY)
    restored.restore_state(STEP, {at: legacy})  # written before the key existed
    kept = restored.prepare(STEP)
    assert kept.messages != FRESH.messages  # the record was used
    future = ContextGuard(POLICY)
    with caplog.at_level(logging.DEBUG, logger="langchain_context_guard"):
        future.restore_state(STEP, {at: {**GOOD[at], "v": 4}})
    assert "handover record ignored (version 4" in caplog.text
    assert future.prepare(STEP).messages == FRESH.messages


@pytest.mark.parametrize(
    "record",
    [
        {"ratio": float("inf")},
        {"ratio": 1e12},
        {"sent": []},
        {"sent": [float("inf"), True]},
        {"sent": "ab"},
        {"ratio": "x"},
    ],
    ids=["inf-ratio", "huge-ratio", "short-sent", "inf-sent", "str-sent", "str-ratio"],
)
def test_records_that_used_to_break_every_later_call(record: dict[str, Any]) -> None:
    guard = ContextGuard(POLICY)
    guard.restore_state(STEP, {max(GOOD): record})
    assert guard.prepare(STEP).messages == FRESH.messages


TIMED = GuardPolicy(
    context_window=20_000,
    reserve_tokens=2_000,
    compress_trigger=0.9,  # a fresh prune under the budget keeps all: only a
    cache_ttl_seconds=300,  # cold one, cut to the cost model's depth, cuts
)
LONG = agent_history(30, result_chars=3_000)


def _timed(guard: ContextGuard, upto: int, cold_at: int) -> dict[int, Any]:
    """``LONG``'s steps up to ``upto`` through ``guard``, the cache expiring before
    step ``cold_at``; the records by reply index."""
    records: dict[int, Any] = {}
    for n in range(4, upto + 1, 2):
        guard.prepare(LONG[:n], now=900.0 * (n >= cold_at) + n)
        records[n] = guard.export_state(LONG[:n])
    return records


def test_records_say_when_the_prompt_was_sent_and_if_the_cache_was_cold() -> None:
    records = _timed(ContextGuard(TIMED), 40, 38)
    assert records[36] == {**records[36], "v": 3, "at": 36.0}
    assert "cold" not in records[36]
    assert records[38]["cold"] is True and records[40]["cold"] is True
    assert records[40]["base"] == 38 and records[40]["at"] == 940.0
    plain = _serve(ContextGuard(POLICY), _history(4))
    assert all(r["v"] in (1, 3) and "at" not in r for r in plain.values())


def test_a_guard_taking_over_knows_when_the_cache_went_cold() -> None:
    one = ContextGuard(TIMED)
    records = _timed(one, 36, 38)
    other = ContextGuard(TIMED)
    other.restore_state(LONG[:38], records)
    cold = other.prepare(LONG[:38], now=938.0)
    assert cold.messages == one.prepare(LONG[:38], now=938.0).messages
    warm = ContextGuard(TIMED)
    warm.restore_state(LONG[:38], records)
    assert warm.prepare(LONG[:38], now=38.0).report.tokens_after > (
        cold.report.tokens_after * 2
    )


def test_a_guard_taking_over_rebuilds_a_cold_prune_as_deep() -> None:
    one = ContextGuard(TIMED)
    records = _timed(one, 40, 38)
    other = ContextGuard(TIMED)
    other.restore_state(LONG[:42], records)
    sent = other.prepare(LONG[:42], now=942.0)
    assert sent.messages == one.prepare(LONG[:42], now=942.0).messages
    assert sent.report.tokens_after < sent.report.tokens_before / 2  # the cold cut


@pytest.mark.parametrize(
    "extra",
    [{"at": 5.0}, {"cold": True}],
    ids=["at", "cold"],
)
def test_version_1_records_with_call_times_are_ignored(extra: dict[str, Any]) -> None:
    at = max(GOOD)
    guard = ContextGuard(POLICY)
    guard.restore_state(STEP, {at: {**GOOD[at], "v": 1, **extra}})
    assert guard.prepare(STEP).messages == FRESH.messages
