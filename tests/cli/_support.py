"""Test helpers for the CLI: transcripts on disk and a small checkpointed graph."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, MessagesState

from langchain_context_guard.cli._main import main
from tests.fakes import agent_loop


def run(capsys: Any, *argv: object) -> tuple[int, str, str]:
    """Run ``main`` with ``argv``; return (exit code, stdout, stderr)."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def openai_history(turns: int = 30, result_chars: int = 6_000) -> list[dict[str, Any]]:
    """An OpenAI-format tool-calling history with large tool results."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Find the bug in the parser."},
    ]
    for k in range(turns):
        call = {
            "id": f"call_{k}",
            "type": "function",
            "function": {"name": "cat", "arguments": json.dumps({"path": f"f{k}.py"})},
        }
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        body = "\n".join(f"line {i} of file {k}: x = {i}" for i in range(400))
        messages.append(
            {
                "role": "tool",
                "tool_call_id": f"call_{k}",
                "content": body[:result_chars],
            }
        )
    messages.append({"role": "assistant", "content": "The bug is in f3.py."})
    return messages


def write_json(path: Path, value: object) -> Path:
    """Write ``value`` as JSON to ``path``."""
    path.write_text(json.dumps(value, indent=1), encoding="utf-8")
    return path


def checkpoint_db(path: Path, thread_id: str = "t-1", turns: int = 12) -> Path:
    """A SQLite checkpointer file holding one thread of a small tool-using graph."""

    def agent(state: MessagesState) -> dict[str, list[Any]]:
        k = sum(isinstance(m, AIMessage) for m in state["messages"])
        call = {"name": "cat", "args": {"path": f"f{k}"}, "id": f"c{k}"}
        return {"messages": [AIMessage("", tool_calls=[call], id=f"a{k}")]}

    def tools(state: MessagesState) -> dict[str, list[Any]]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        call = last.tool_calls[0]
        text = f"contents of {call['args']['path']}\n" * 600
        return {
            "messages": [
                ToolMessage(text, tool_call_id=call["id"], id=f"t{call['id']}")
            ]
        }

    def more(state: MessagesState) -> str:
        return "tools" if len(state["messages"]) < 1 + 2 * turns else END

    graph = agent_loop(MessagesState, agent, tools, more)
    with closing(sqlite3.connect(path, check_same_thread=False)) as conn:
        app = graph.compile(checkpointer=SqliteSaver(conn))
        config: Any = {"configurable": {"thread_id": thread_id}, "recursion_limit": 200}
        app.invoke({"messages": [HumanMessage("Read the files.", id="h0")]}, config)
    return path
