"""Invariants of ``ContextGuard.prepare`` over generated agent transcripts."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import HumanMessage, SystemMessage

from langchain_context_guard import BudgetExceededError, ContextGuard, GuardPolicy
from tests.engine._support import pairing_errors, snapshot, transcripts

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
POLICIES = st.builds(
    GuardPolicy,
    context_window=st.sampled_from([16_000, 20_000, 40_000]),
    reserve_tokens=st.sampled_from([1_000, 4_000]),
    compress_batch=st.sampled_from([1, 8]),
    keep_recent_tool_results=st.sampled_from([0, 6]),
    keep_recent_thinking=st.sampled_from([0, 1]),
    trim_step=st.sampled_from([0.0, 0.15]),
)


def _prepare(policy, history):
    try:
        return ContextGuard(policy).prepare(history)
    except BudgetExceededError as err:
        assert err.tokens > err.budget
        return None


@SETTINGS
@given(transcripts(usage=True), POLICIES)
def test_fits_pairs_keeps_and_never_mutates(history, policy):
    before = snapshot(history)
    result = _prepare(policy, history)
    assert snapshot(history) == before
    if result is None:
        return
    out = result.messages
    assert result.report.tokens_after <= result.report.budget
    assert pairing_errors(out) == []
    for m in history:
        if isinstance(m, SystemMessage):
            assert any(o is m for o in out)
    users = [m for m in history if isinstance(m, HumanMessage)]
    assert any(o is users[-1] for o in out)
    first = next(m for m in out if not isinstance(m, SystemMessage))
    assert isinstance(first, HumanMessage)


@SETTINGS
@given(transcripts(), POLICIES)
def test_idempotent_and_deterministic(history, policy):
    result = _prepare(policy, history)
    if result is None:
        return
    again = ContextGuard(policy).prepare(history)
    assert snapshot(again.messages) == snapshot(result.messages)
    assert again.report.to_dict() == result.report.to_dict()
    twice = ContextGuard(policy).prepare(result.messages)
    assert snapshot(twice.messages) == snapshot(result.messages)
    assert [e for e in twice.report.events if e.kind != "window_warning"] == []
