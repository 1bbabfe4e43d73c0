"""langchain-core's ``trim_messages`` tests, ported to ``trim_to_budget``.

Ported from langchain-core, ``tests/unit_tests/messages/test_utils.py``
(``test_trim_messages_*``), for what ``trim_to_budget`` claims to share with
``trim_messages(strategy="last", include_system=True, start_on="human")``: the
newest whole turns are kept, system messages stay, the input is not mutated.
Deliberate differences are strict xfails, listed in docs/langchain.md.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from langchain_context_guard import BudgetExceededError, trim_to_budget
from langchain_context_guard.engine.tokens._counters import REPLY_OVERHEAD


def dummy_token_counter(message: BaseMessage) -> int:
    """Ten tokens a message, as the original's fixed-size dummy counter."""
    return 10


def _messages_to_trim() -> list[BaseMessage]:
    return [
        SystemMessage("This is a 4 token text."),
        HumanMessage("This is a 4 token text.", id="first"),
        AIMessage("This is a 4 token text.", id="second"),
        HumanMessage("This is a 4 token text.", id="third"),
        AIMessage("This is a 4 token text.", id="fourth"),
    ]


def _trim(messages: list[BaseMessage], max_tokens: int) -> list[BaseMessage]:
    """``trim_messages(strategy="last", include_system=True, start_on="human")``."""
    return trim_to_budget(
        messages,
        budget=max_tokens + REPLY_OVERHEAD,  # the reply priming, see below
        token_counter=dummy_token_counter,
        keep_first_user=False,
    )


def test_trim_messages_last_30_include_system() -> None:
    messages = _messages_to_trim()
    out = _trim(messages, 30)
    assert [m.id for m in out] == [None, "third", "fourth"]
    assert isinstance(out[0], SystemMessage)


def test_trim_messages_last_40_include_system_start_on_human() -> None:
    out = _trim(_messages_to_trim(), 40)
    assert [m.id for m in out] == [None, "third", "fourth"]  # never starts on "second"


def test_trim_messages_everything_fits_is_unchanged() -> None:
    messages = _messages_to_trim()
    assert _trim(messages, 50) is messages


def test_trim_messages_does_not_mutate() -> None:
    messages = _messages_to_trim()
    before = [m.model_copy(deep=True) for m in messages]
    _trim(messages, 30)
    assert messages == before


def test_trim_to_budget_counts_reply_priming() -> None:
    """A budget equal to the messages' own sum is over by the reply priming."""
    messages: list[BaseMessage] = [SystemMessage("s"), HumanMessage("h", id="h")]
    with pytest.raises(BudgetExceededError):
        trim_to_budget(messages, budget=20, token_counter=dummy_token_counter)
    assert (
        trim_to_budget(
            messages, budget=20 + REPLY_OVERHEAD, token_counter=dummy_token_counter
        )
        is messages
    )


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="trim_to_budget counts 3 tokens of reply priming on top of the "
    "messages, so max_tokens equal to their sum drops the oldest turn",
)
def test_trim_messages_exact_token_count_keeps_everything() -> None:
    messages = _messages_to_trim()
    out = trim_to_budget(messages, budget=50, token_counter=dummy_token_counter)
    assert out == messages


@pytest.mark.xfail(
    strict=True,
    raises=BudgetExceededError,
    reason="a history that cannot fit raises BudgetExceededError instead of "
    "returning an empty list, so an empty prompt is never sent",
)
def test_trim_messages_too_small_returns_empty() -> None:
    out = trim_to_budget(
        [HumanMessage("This is a 4 token text.")],
        budget=5,
        token_counter=dummy_token_counter,
    )
    assert out == []
