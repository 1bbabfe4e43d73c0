"""A history that repeats a step with its call ids (an export, a replayed
checkpoint, a server that numbers its calls per turn): Anthropic requires every
``tool_use`` id in a request to be unique (``_rules.anthropic_violation`` words
its refusal), so the guard sends a reused id renamed, with its own result.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_context_guard import ContextGuard, GuardPolicy

from ._server import ProviderServer
from ._support import QUIET_RETIREMENT, TASK, WINDOW, chat_model

pytestmark = QUIET_RETIREMENT

MakeServer = Callable[..., ProviderServer]

EDIT = {
    "name": "Edit",
    "args": {"file_path": "src/sum.py", "old_string": "a - b", "new_string": "a + b"},
    "id": "toolu_01Edit",
    "type": "tool_call",
}


def _history() -> list[BaseMessage]:
    return [
        HumanMessage(TASK, id="task"),
        AIMessage("I will fix the sign.", tool_calls=[EDIT], id="edit-1"),
        ToolMessage("src/sum.py updated (1)", tool_call_id="toolu_01Edit", id="r-1"),
        HumanMessage("The file was reset; apply it again.", id="again"),
        AIMessage("I will fix the sign.", tool_calls=[EDIT], id="edit-2"),
        ToolMessage("src/sum.py updated (2)", tool_call_id="toolu_01Edit", id="r-2"),
    ]


def test_the_provider_refuses_the_repeated_id_unguarded(
    make_server: MakeServer,
) -> None:
    server = make_server()
    with pytest.raises(Exception, match="`tool_use` ids must be unique"):
        chat_model("anthropic", server).invoke(_history())
    assert [e.verdict for e in server.exchanges] == ["invalid"]


@pytest.mark.parametrize("stable_prefix", [True, False])
def test_the_guarded_steps_are_accepted_and_end_with_the_newest_result(
    make_server: MakeServer, stable_prefix: bool
) -> None:
    server = make_server()
    model = chat_model("anthropic", server)
    guard = ContextGuard(
        GuardPolicy(context_window=WINDOW, stable_prefix=stable_prefix)
    )
    history = _history()
    for n in (3, 5, 6):  # each step of the agent, the prefix kept where it can be
        sent = guard.prepare(history[:n]).messages
        model.invoke(sent)
    assert [e.verdict for e in server.exchanges] == ["ok", "ok", "ok"]
    assert [m.id for m in sent] == [m.id for m in history]
    calls = [c["id"] for m in sent if isinstance(m, AIMessage) for c in m.tool_calls]
    answers = [m.tool_call_id for m in sent if isinstance(m, ToolMessage)]
    assert calls == answers == ["toolu_01Edit", "toolu_01Edit-2"]
    assert history[4].tool_calls[0]["id"] == "toolu_01Edit"  # the caller's, unchanged
