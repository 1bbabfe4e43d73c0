"""Tests for engine._prune: one pruning, and the cut nearest its target."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from langchain_context_guard import ContextGuard, GuardPolicy
from langchain_context_guard.engine import _prune
from langchain_context_guard.engine._tokens import TiktokenCounter
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
        AIMessage(lines(1_700, prefix="big"), id="big"),  # no command: one turn
        HumanMessage("Run one command.", id="u"),
        ai(call("z"), content="last", id="az"),
        result("z", "ok", id="rz"),
    ]


@pytest.mark.parametrize("near", [True, False])
def test_a_pruning_far_short_of_its_target_takes_the_cut_above(monkeypatch, near):
    # Reaching the target means dropping the large turn before the latest one,
    # which leaves far less than the target; the cut above keeps it and misses
    # the target by no more.
    if not near:  # as if every turn were huge: no miss is large enough
        monkeypatch.setattr(_prune, "growth", lambda body, history: 1e9)
    policy = GuardPolicy(context_window=24_000, reserve_tokens=4_000)
    history = _big_turn_history()
    out = ContextGuard(policy, token_counter=COUNTER).prepare(history)
    ids = [m.id for m in out.messages]
    assert out.report.tokens_before > out.report.budget >= out.report.tokens_after
    assert ids[:2] == ["s", "t"] and ids[-3:] == ["u", "az", "rz"]
    assert ("big" in ids) is near
    assert (out.report.tokens_after > 10_000) is near
