"""Result keys: a tool result's place in the history, named in ranges."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage

from langchain_context_guard import ContextGuard, GuardPolicy
from langchain_context_guard.engine import (
    keys_in_ranges,
    parse_result_key,
    result_key,
    result_ordinals,
)
from langchain_context_guard.engine._result_keys import key_ranges
from tests.engine._support import ai, call, result


def test_keys_number_results_by_place_the_first_of_an_id_counting() -> None:
    history = [
        ai(call("a"), call("b")),
        result("a", "1"),
        result("b", "2"),
        ai(call("c")),
        result("c", "3"),
        result("b", "again"),
    ]
    assert result_ordinals(history) == {"a": 1, "b": 2, "c": 3}
    assert result_ordinals(history[:3]) == {"a": 1, "b": 2}  # growing keeps them
    assert result_key(12) == "#12"


def test_ranges_name_every_key_and_read_back() -> None:
    assert key_ranges([7, 1, 2, 3, 5, 6, 9, 9]) == "#1-#3, #5-#7, #9"
    assert keys_in_ranges("#1-#3, #5-#7, #9") == [1, 2, 3, 5, 6, 7, 9]
    assert key_ranges([]) == ""
    assert parse_result_key(" #12 ") == 12
    assert parse_result_key("call_12") is None
    assert parse_result_key("#x") is None


def test_a_marker_names_its_results_key_in_each_history_it_is_sent_in() -> None:
    """A key is a place in one history, never one a memo kept from another.

    The same message, its history rewritten around it, is named by its place in
    the history sent.
    """
    big = result("c2", "line\n" * 20_000)
    grown = [
        HumanMessage("task", id="u"),
        ai(call("c1")),
        result("c1", "ok"),
        ai(call("c2")),
        big,
        AIMessage("done"),
    ]
    rewritten = [grown[0], *grown[3:]]  # c1's turn gone (a hook in persist mode)
    policy = GuardPolicy(archived_results=True, max_tool_result_chars=5_000)
    guard = ContextGuard(policy)
    for history, place in ((grown, 2), (rewritten, 1), (grown, 2), (grown[:5], 2)):
        sent = guard.prepare(history).messages
        cut = next(m for m in sent if getattr(m, "tool_call_id", "") == "c2")
        assert f'full text: read_tool_result("{result_key(place)}")' in cut.text
        assert result_ordinals(history)["c2"] == place
    assert big.content == "line\n" * 20_000  # the caller's message is untouched
    plain = ContextGuard(policy.model_copy(update={"archived_results": False}))
    sent = plain.prepare(grown).messages
    cut = next(m for m in sent if getattr(m, "tool_call_id", "") == "c2")
    assert "read_tool_result" not in cut.text  # no archive: no pointer
