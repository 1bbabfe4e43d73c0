"""Tests for engine._prune: one pruning, and the cut nearest its target."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from langchain_context_guard import ContextGuard, GuardPolicy
from langchain_context_guard.engine.incremental import _prune as _prune
from langchain_context_guard.engine.tokens._counters import TiktokenCounter
from tests.engine._support import ai, call, lines, result

COUNTER = TiktokenCounter()


def _big_turn_history():
    history = [SystemMessage("s", id="s"), HumanMessage("Fix the bug.", id="t")]
    for k in range(20):
        history += [
            ai(call(f"c{k}"), content=f"step {k}", id=f"a{k}"),
            result(f"c{k}", lines(40), id=f"r{k}"),
        ]
    return [
        *history,
        # A large step closing the turn; the next user message answers no
        # question (a reply's question is held: tests/engine/test_trim.py).
        ai(call("b"), content=lines(1_700, prefix="big"), id="big"),
        result("b", "ok", id="rb"),
        HumanMessage("Run one command.", id="u"),
        ai(call("z"), content="last", id="az"),
        result("z", "ok", id="rz"),
    ]


@pytest.mark.parametrize(
    ("g", "above"),
    [(50, True), (1_500, False)],
    ids=["slow-growth-keeps-the-large-turn", "fast-growth-drops-it"],
)
def test_a_pruning_far_short_of_its_target_weighs_the_cut_above(monkeypatch, g, above):
    # Reaching the target means dropping the large turn before the latest one,
    # which leaves little but the task; the cut above keeps it, nearly at the
    # budget. The cost model takes the cut above only while the history grows
    # slowly enough for that prompt to be reused for a while.
    monkeypatch.setattr(_prune, "growth", lambda body, history: g)
    policy = GuardPolicy(context_window=24_000, reserve_tokens=4_000)
    out = ContextGuard(policy, token_counter=COUNTER).prepare(_big_turn_history())
    ids = [m.id for m in out.messages]
    assert out.report.tokens_before > out.report.budget >= out.report.tokens_after
    assert ids[:2] == ["s", "t"] and ids[-3:] == ["u", "az", "rz"]
    assert ("big" in ids) is above
    assert (out.report.tokens_after > 10_000) is above


def test_the_history_growth_decides_without_a_patch():
    # About 1,000 tokens a call: kept, the large turn would be re-sent within
    # a call or two; the model drops it.
    policy = GuardPolicy(context_window=24_000, reserve_tokens=4_000)
    out = ContextGuard(policy, token_counter=COUNTER).prepare(_big_turn_history())
    assert "big" not in [m.id for m in out.messages]


def test_without_a_large_miss_the_cut_below_stands(monkeypatch):
    # As if every turn were huge: no miss is larger than an average turn.
    monkeypatch.setattr(_prune, "growth", lambda body, history: 1e9)
    policy = GuardPolicy(context_window=24_000, reserve_tokens=4_000)
    out = ContextGuard(policy, token_counter=COUNTER).prepare(_big_turn_history())
    assert "big" not in [m.id for m in out.messages]
