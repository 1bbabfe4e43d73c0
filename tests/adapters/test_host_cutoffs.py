"""``clear_host_cutoffs``: a rewrite of the messages clears a host's summary cut."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from langchain_context_guard.adapters import clear_host_cutoffs

EVENT = {"cutoff_index": 9, "summary_message": HumanMessage("s"), "file_path": None}
REWRITE = {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage("t")]}


def test_a_rewrite_clears_the_host_s_cut_without_touching_the_update() -> None:
    update = dict(REWRITE)
    cleared = clear_host_cutoffs({"_summarization_event": EVENT}, update)
    assert cleared == {**REWRITE, "_summarization_event": None}
    assert update == REWRITE


@pytest.mark.parametrize(
    ("state", "update"),
    [
        ({"_summarization_event": EVENT}, None),
        ({"_summarization_event": EVENT}, {}),
        ({}, REWRITE),
        ({"_summarization_event": None}, REWRITE),
    ],
    ids=["no-update", "empty-update", "no-host-cut", "cut-already-clear"],
)
def test_otherwise_the_update_is_returned_as_it_is(
    state: dict[str, Any], update: dict[str, Any] | None
) -> None:
    assert clear_host_cutoffs(state, update) is update
