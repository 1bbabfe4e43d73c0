"""A LangGraph Server agent whose model calls stay inside a 16k window.

``langgraph dev`` (or a deployment) serves ``agent``: LangChain's
``create_agent`` with ``ContextGuardMiddleware``. The model is scripted so the
example runs offline: it reads chunk after chunk (each about 1,500 tokens) until
it has read ``CHUNKS`` of them, then answers. Swap in a real model with
``MODEL=anthropic:claude-sonnet-4-5`` (any ``init_chat_model`` string).

With ``CONTEXT_GUARD_RECORD=<path>`` every model input is appended to that file
as one JSON line (``messages_to_dict``), so a test can check what was sent.
"""

from __future__ import annotations

import json
import os
from typing import Any

from langchain.agents import create_agent
from langchain.chat_models import init_chat_model
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ToolMessage,
    messages_to_dict,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from langchain_context_guard import ContextGuard, ContextGuardMiddleware, GuardPolicy

WINDOW = 16_000
CHUNKS = int(os.environ.get("CHUNKS", "50"))


@tool
def read_chunk(k: int) -> str:
    """Read chunk ``k`` of the document."""
    return f"chunk {k}:\n" + "\n".join(f"{k}.{i} value_{k}_{i}" for i in range(300))


class ScriptedReader(BaseChatModel):
    """Reads chunks 0, 1, ... until ``CHUNKS`` results are in, then answers."""

    record: str | None = None

    @property
    def _llm_type(self) -> str:
        return "scripted-reader"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedReader:  # type: ignore[override]
        """The tools are known: the script calls ``read_chunk``."""
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.record:
            with open(self.record, "a", encoding="utf-8") as out:
                out.write(json.dumps(messages_to_dict(messages)) + "\n")
        done = [
            int(m.tool_call_id.split("_")[-1])
            for m in messages
            if isinstance(m, ToolMessage) and m.tool_call_id.startswith("read_")
        ]
        k = max(done, default=-1) + 1
        if k >= CHUNKS:
            reply = AIMessage(f"Read {k} chunks.")
        else:
            call = {"name": "read_chunk", "args": {"k": k}, "id": f"read_{k}"}
            reply = AIMessage("", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=reply)])


def _model() -> BaseChatModel:
    name = os.environ.get("MODEL")
    if name:
        return init_chat_model(name)
    return ScriptedReader(record=os.environ.get("CONTEXT_GUARD_RECORD"))


guard = ContextGuard(GuardPolicy(context_window=WINDOW, reserve_tokens=2_000))
agent = create_agent(
    _model(),
    [read_chunk],
    system_prompt="You read documents chunk by chunk.",
    middleware=[ContextGuardMiddleware(guard)],
)
