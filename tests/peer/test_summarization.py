"""LangChain's ``SummarizationMiddleware`` tests, ported to ``CompactionMiddleware``.

Ported from langchain 1.5.2,
``libs/langchain_v1/tests/unit_tests/agents/middleware/implementations/
test_summarization.py``, wherever we claim the same behaviour; names follow the
originals so a LangChain upgrade can be re-ported. A deliberate difference is an
``xfail(strict=True)`` with its reason, listed in docs/langchain.md.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_context_guard import ConfigError
from langchain_context_guard.compaction import CompactionSettings
from langchain_context_guard.compaction._middleware import CompactionMiddleware
from tests.compaction._support import ScriptedSummarizer, make_guard


def _middleware(**kwargs: Any) -> CompactionMiddleware:
    return CompactionMiddleware(ScriptedSummarizer(), guard=make_guard(), **kwargs)


@pytest.mark.parametrize(
    "trigger",
    [
        {"tokens": 1000.5},
        {"messages": "10"},
        {"messages": True},
        {"tokens": False},
        {"fraction": "0.5"},
        [{"messages": 5}, {"tokens": 10.5}],
    ],
    ids=[
        "float-tokens",
        "str-messages",
        "bool-messages",
        "bool-tokens",
        "str-fraction",
        "bad-item-in-list",
    ],
)
def test_trigger_dict_rejects_coercible_values(trigger: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        _middleware(trigger=trigger)
    assert caught.value.field == "trigger"
    assert "write {" in str(caught.value)


@pytest.mark.parametrize(
    "trigger", [("messages", True), ("tokens", "100")], ids=["bool", "str"]
)
def test_trigger_tuple_rejects_coercible_values(trigger: Any) -> None:
    with pytest.raises(ConfigError, match=r"write \("):
        CompactionSettings(trigger=trigger)


@pytest.mark.parametrize(
    "trigger",
    [{"tokens": 1000, "messages": 10}, {"fraction": 1}, {"fraction": 0.5}],
    ids=["ints", "int-fraction", "float-fraction"],
)
def test_trigger_dict_accepts_numbers(trigger: Any) -> None:
    assert _middleware(trigger=trigger).compactor.settings.trigger == trigger


@pytest.mark.parametrize(
    "trigger",
    [{}, {"tokens": 0}, {"messages": -1}, {"fraction": 1.5}, {"fraction": 0}],
    ids=["empty", "zero-tokens", "negative-messages", "fraction-over", "fraction-0"],
)
def test_trigger_dict_rejects_out_of_range(trigger: Any) -> None:
    with pytest.raises(ConfigError):
        _middleware(trigger=trigger)


def test_trigger_dict_rejects_unknown_metric() -> None:
    with pytest.raises(ConfigError):
        _middleware(trigger={"turns": 3})
