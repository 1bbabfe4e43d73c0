"""``context-guard inspect`` names what the provider-native passes did."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from langchain_context_guard import ContextGuard, GuardPolicy
from langchain_context_guard.cli._inspect import analyse


def test_messages_before_a_compaction_block_are_shown_as_left_out():
    history = [
        SystemMessage("sys", id="sys"),
        HumanMessage("Fix the bug.", id="task"),
        AIMessage("Reading the parser.", id="old"),
        AIMessage([{"type": "compaction", "content": "Summary."}], id="cmp"),
        HumanMessage("Now the tests.", id="next"),
    ]
    guard = ContextGuard(GuardPolicy(context_window=16_000))
    fates = {row.index: row.fate for row in analyse(guard, history)["rows"]}
    left_out = "dropped (before a compaction block)"
    assert [fates[0], fates[1], fates[2], fates[3]] == [
        "kept",
        left_out,
        left_out,
        "kept",
    ]
