"""A worker process that runs single agent steps of threads stored in PostgreSQL.

``python -m tests.postgres._worker URL [middleware|hook|model]`` reads one thread id
per line on stdin, runs that thread's next step (the tools of the previous
reply, then one model call) with a fresh ``create_agent`` +
``ContextGuardMiddleware`` (or ``create_react_agent`` with the ``llm_input``
``pre_model_hook`` and ``GuardedAgentState``, or with ``guarded_model``) on
``PostgresSaver``, and answers one JSON line: the SHA-256 of the exact prompt
the model received, its messages and its size in characters. Any number of
workers may serve the steps of one thread in any order: it is what LangGraph
Server does with its worker pool.
"""

from __future__ import annotations

import hashlib
import json
import sys
import warnings
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ToolMessage,
    convert_to_openai_messages,
)

from langchain_context_guard import ContextGuard, GuardPolicy
from langchain_context_guard.adapters._langgraph import (
    GuardedAgentState,
    pre_model_hook,
)
from langchain_context_guard.adapters._middleware import ContextGuardMiddleware
from langchain_context_guard.adapters._model import guarded_model
from tests.adapters._support import RESERVE, SYSTEM, WINDOW, read_chunk
from tests.fakes import ScriptedChatModel
from tests.postgres._support import postgres

TASK = "Read the chunks in order and report what each handler computes."


def prompt_digest(messages: list[BaseMessage]) -> tuple[str, list[str]]:
    """A digest of the prompt as a provider gets it, and one per message.

    The OpenAI chat format: what a provider sees and caches (no message ids,
    which each run assigns afresh).
    """
    each = [
        hashlib.sha256(json.dumps(m, sort_keys=True).encode()).hexdigest()[:16]
        for m in convert_to_openai_messages(messages)
    ]
    return hashlib.sha256("".join(each).encode()).hexdigest(), each


class HistoryToolModel(ScriptedChatModel):
    """Calls ``read_chunk`` ``steps`` times, then answers; stateless across processes.

    The call number comes from the prompt (the latest tool result's call id), and
    the usage it reports is a deterministic function of the prompt, so any worker
    gives the reply another would.
    """

    steps: int = 12
    thread: str = ""
    prompts: list[dict[str, Any]] = []  # noqa: RUF012 - set per instance

    def bind_tools(self, tools: Any, **kwargs: Any) -> HistoryToolModel:
        return self

    def reply(self, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
        digest, each = prompt_digest(messages)
        chars = sum(len(str(m.content)) for m in messages)
        self.prompts.append({"sha": digest, "messages": each, "chars": chars})
        done = [m for m in messages if isinstance(m, ToolMessage)]
        n = int(done[-1].tool_call_id.rsplit("_", 1)[1]) + 1 if done else 0
        usage = {
            "input_tokens": chars // 4 + 7 * len(messages),
            "output_tokens": 12,
            "total_tokens": chars // 4 + 7 * len(messages) + 12,
        }
        if n >= self.steps:
            return AIMessage(
                f"Done after {n} reads.",
                id=f"{self.thread}-final",
                usage_metadata=usage,
            )
        k = (n * 7 + len(self.thread)) % 97
        call = {"name": "read_chunk", "args": {"k": k}, "id": f"{self.thread}_call_{n}"}
        return AIMessage(
            "", tool_calls=[call], id=f"{self.thread}-ai-{n}", usage_metadata=usage
        )


def make_guard() -> ContextGuard:
    """The guard every worker builds (same policy, nothing shared)."""
    return ContextGuard(GuardPolicy(reserve_tokens=RESERVE, warn_below_tokens=16_000))


def step(agent: Any, model: HistoryToolModel, thread: str) -> dict[str, Any]:
    """Run ``thread``'s next step; the prompt the model received."""
    config: Any = {"configurable": {"thread_id": thread}, "recursion_limit": 100}
    model.thread = thread
    model.prompts = []
    state = agent.get_state(config)
    payload = None if state.values.get("messages") else {"messages": [("user", TASK)]}
    agent.invoke(payload, config)
    if len(model.prompts) != 1:
        raise AssertionError(f"{len(model.prompts)} model calls in one step")
    return model.prompts[0]


def build(adapter: str, model: HistoryToolModel, saver: Any, store: Any) -> Any:
    """The agent a worker runs: ``middleware``, ``hook`` or ``model``."""
    if adapter in {"hook", "model"}:
        with warnings.catch_warnings():  # create_react_agent is deprecated
            warnings.simplefilter("ignore", DeprecationWarning)
            from langgraph.prebuilt import create_react_agent

            if adapter == "model":
                return create_react_agent(
                    guarded_model(make_guard(), model, tools=[read_chunk]),
                    [read_chunk],
                    prompt=SYSTEM,
                    checkpointer=saver,
                    store=store,
                    interrupt_before=["tools"],
                )
            hook = pre_model_hook(
                make_guard(), tools=[read_chunk], system_prompt=SYSTEM, model=model
            )
            return create_react_agent(
                model,
                [read_chunk],
                prompt=SYSTEM,
                pre_model_hook=hook,
                state_schema=GuardedAgentState,
                checkpointer=saver,
                store=store,
                interrupt_before=["tools"],
            )
    return create_agent(
        model,
        [read_chunk],
        system_prompt=SYSTEM,
        middleware=[ContextGuardMiddleware(make_guard())],
        checkpointer=saver,
        store=store,
        interrupt_before=["tools"],
    )


def main(url: str, adapter: str = "middleware") -> None:
    """Serve steps read from stdin until it closes."""
    model = HistoryToolModel(profile={"max_input_tokens": WINDOW})
    with postgres(url) as (saver, store):
        agent = build(adapter, model, saver, store)
        print(json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            thread = line.strip()
            if thread:
                print(json.dumps(step(agent, model, thread)), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:3])
