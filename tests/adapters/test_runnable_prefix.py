"""``prompt | guard | model``: a history rebuilt on every call keeps its prefix.

A ``ChatPromptTemplate`` makes a new, id-less system message on every call; the
guard recognises the conversation by content, so the previous prompt is re-sent
unchanged on as many calls as when the caller passes the very same objects.
"""

from __future__ import annotations

import itertools

from langchain_core.messages import BaseMessage, messages_from_dict, messages_to_dict
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder

from langchain_context_guard import ContextGuard, GuardPolicy
from langchain_context_guard.adapters._runnable import as_runnable
from tests.engine._support import agent_history

POLICY = GuardPolicy(context_window=32_000, reserve_tokens=4_000)
FULL = agent_history(90, result_chars=4_000)
SYSTEM = FULL[0].text


def _kept_share(prompts: list[list[BaseMessage]]) -> float:
    """Share of calls whose prompt starts with the previous prompt (by value)."""
    kept = sum(1 for a, b in itertools.pairwise(prompts) if b[: len(a)] == a)
    return kept / (len(prompts) - 1)


def _direct() -> list[list[BaseMessage]]:
    guard = ContextGuard(POLICY)
    return [guard.prepare(FULL[:k]).messages for k in range(2, len(FULL) + 1, 2)]


def test_a_prompt_template_history_keeps_its_prefix_like_direct_calls() -> None:
    prompt = ChatPromptTemplate.from_messages(
        [("system", SYSTEM), MessagesPlaceholder("history")]
    )
    chain = prompt | as_runnable(ContextGuard(POLICY))
    via_prompt = [
        chain.invoke({"history": FULL[1:k]}) for k in range(2, len(FULL) + 1, 2)
    ]
    direct = _direct()
    assert _kept_share(direct) > 0.9
    assert _kept_share(via_prompt) == _kept_share(direct)
    assert via_prompt[-1][1:] == direct[-1][1:]  # the same prompts


def test_a_history_rebuilt_on_every_call_keeps_its_prefix() -> None:
    guard = ContextGuard(POLICY)
    rebuilt = []
    for k in range(2, len(FULL) + 1, 2):
        history = messages_from_dict(messages_to_dict(FULL[:k]))
        history[0] = history[0].model_copy(update={"id": None})
        rebuilt.append(guard.prepare(history).messages)
    assert _kept_share(rebuilt) == _kept_share(_direct())
