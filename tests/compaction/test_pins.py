"""Pinned messages stay verbatim, with their tool pairs, through a summary."""

from __future__ import annotations

from langchain_core.messages import BaseMessage

from langchain_context_guard import pin, unpin
from langchain_context_guard.compaction import Compactor
from langchain_context_guard.engine._messages import is_summary
from tests.compaction._support import (
    ScriptedSummarizer,
    chat_history,
    make_guard,
    settings,
)
from tests.fakes import pairing_errors
from tests.providers._support import violations

GUARD = make_guard()


def _history(pinned: set[str]) -> list[BaseMessage]:
    history = chat_history(turns=5, steps_per_turn=3)
    return [pin(m) if m.id in pinned else m for m in history]


def _compact(history: list[BaseMessage]) -> list[BaseMessage]:
    comp = Compactor(ScriptedSummarizer(), settings(), guard=GUARD)
    plan = comp.plan(history)
    assert plan is not None
    return comp.compact(history).messages


def test_a_pinned_result_survives_a_compaction_with_its_call() -> None:
    history = _history({"tool-1-0", "user-1"})
    out = _compact(history)
    by_id = {m.id: m for m in history}
    assert is_summary(out[1])
    ids = [m.id for m in out]
    assert "tool-0-0" not in ids  # its neighbours were summarised
    # Right after the summary, in order, as they were: the call with its result.
    assert ids[2:5] == ["ai-1", "tool-1-0", "user-1"]
    assert all(m is by_id[m.id] for m in out[2:5])
    assert pairing_errors(out) == []
    assert violations(out) == {}


def test_a_pinned_assistant_message_keeps_its_results_through_a_summary() -> None:
    out = _compact(_history({"ai-100"}))
    ids = [m.id for m in out]
    assert ids[2:4] == ["ai-100", "tool-100-0"]


def test_a_released_pin_is_summarised_like_the_rest() -> None:
    history = [unpin(m) for m in _history({"tool-1-0"})]
    assert "tool-1-0" not in {m.id for m in _compact(history)}
