"""Result keys: a tool result's place in the history, named in ranges."""

from __future__ import annotations

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
