"""An invalid tool call inside a deep agent: the model reads what happened to it.

The model's write is cut off mid-arguments (an ``invalid_tool_calls`` entry);
the agent stops, and on the next turn deepagents answers the call with an error
result. Neither can be sent as they are; the model is told, in the assistant
turn, that the call was not run and why.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from langchain_context_guard import ContextGuardMiddleware
from tests.fakes import ScriptedChatModel, pairing_errors
from tests.providers._support import violations

pytest.importorskip("deepagents")


class Scripted(ScriptedChatModel):
    """Replies in order; binding tools keeps the script."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Scripted:
        return self


CUT = {
    "type": "invalid_tool_call",
    "id": "call_cut",
    "name": "write_file",
    "args": '{"file_path": "/src/app.py", "content": "def main(',
    "error": None,
}


def test_the_model_is_told_its_cut_off_call_was_not_run() -> None:
    from deepagents import create_deep_agent

    model = Scripted(
        profile={"max_input_tokens": 16_000},
        messages=iter([AIMessage("", invalid_tool_calls=[CUT]), "Rewritten."]),
    )
    agent = create_deep_agent(
        model, middleware=[ContextGuardMiddleware()], checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("Write src/app.py.")]}, config)
    agent.invoke({"messages": [HumanMessage("Go on.")]}, config)
    sent = model.received[-1]
    turns = [m for m in sent if isinstance(m, AIMessage)]
    assert len(turns) == 1
    assert "Tool call write_file was not run" in turns[0].text
    assert "malformed or truncated" in turns[0].text
    assert pairing_errors(sent[1:]) == []
    assert violations(sent) == {}
