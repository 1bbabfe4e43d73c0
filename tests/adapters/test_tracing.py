"""What a trace shows: run names, tags and metadata of the guard and summarizer.

A callback handler records every run as LangSmith's tracer would receive it
(name, tags, metadata, parent), offline.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langgraph.checkpoint.memory import InMemorySaver

from langchain_context_guard.adapters._middleware import ContextGuardMiddleware
from langchain_context_guard.compaction._middleware import CompactionMiddleware
from tests.adapters._support import SYSTEM, TOOLS
from tests.compaction._support import ScriptedSummarizer
from tests.fakes import ScriptedToolModel


class Runs(BaseCallbackHandler):
    """Records each run's name, tags, metadata and parent, and custom events."""

    def __init__(self) -> None:
        self.runs: dict[UUID, dict[str, Any]] = {}
        self.events: list[tuple[str, UUID]] = []

    def _start(self, kind: str, run_id: UUID, kwargs: dict[str, Any]) -> None:
        self.runs[run_id] = {
            "kind": kind,
            "name": kwargs.get("name"),
            "tags": list(kwargs.get("tags") or []),
            "metadata": dict(kwargs.get("metadata") or {}),
            "parent": kwargs.get("parent_run_id"),
        }

    def on_chain_start(
        self, serialized: Any, inputs: Any, *, run_id: UUID, **kwargs: Any
    ) -> None:
        self._start("chain", run_id, kwargs)

    def on_chat_model_start(
        self, serialized: Any, messages: Any, *, run_id: UUID, **kwargs: Any
    ) -> None:
        self._start("llm", run_id, kwargs)

    def on_custom_event(
        self, name: str, data: Any, *, run_id: UUID, **kwargs: Any
    ) -> None:
        self.events.append((name, run_id))

    def named(self, name: str) -> list[dict[str, Any]]:
        return [r for r in self.runs.values() if r["name"] == name]


def test_guard_and_summarizer_runs_are_named_tagged_and_described() -> None:
    profile = {"max_input_tokens": 20_000}
    model = ScriptedToolModel(steps=30, profile=profile)
    summarizer = ScriptedSummarizer(profile=profile)
    agent = create_agent(
        model,
        TOOLS,
        system_prompt=SYSTEM,
        middleware=[
            CompactionMiddleware(summarizer, trigger=("fraction", 0.5), retry_delay=0),
            ContextGuardMiddleware(reserve_tokens=2_000, warn_below_tokens=16_000),
        ],
        checkpointer=InMemorySaver(),
    )
    runs = Runs()
    config: Any = {
        "configurable": {"thread_id": "t"},
        "recursion_limit": 500,
        "callbacks": [runs],
    }
    agent.invoke({"messages": [("user", "Read every chunk.")]}, config)

    guard_runs = runs.named("context_guard")
    assert len(guard_runs) == len(model.received)
    for run in guard_runs:
        assert {"context_guard", "context_guard:middleware"} <= set(run["tags"])
        meta = run["metadata"]
        assert meta["context_guard_source"] == "middleware"
        assert meta["window_source"] == "model_profile"
        assert meta["context_window"] == 20_000
        assert meta["tokens_after"] <= meta["budget"] == 18_000
    guard_ids = {rid for rid, r in runs.runs.items() if r["name"] == "context_guard"}
    assert runs.events and {rid for _, rid in runs.events} <= guard_ids

    summaries = runs.named("context_guard_summarizer")
    assert summaries
    for run in summaries:
        assert "context_guard:summarizer" in run["tags"]
        meta = run["metadata"]
        assert meta["context_guard"] == "summarizer"
        assert meta["context_guard_part"] in {"sections", "turn_prefix"}
        assert meta["messages_summarized"] > 0
    # The summarizer's own model call inherits the tags: it is findable too.
    calls = [
        r
        for r in runs.runs.values()
        if r["kind"] == "llm" and "context_guard:summarizer" in r["tags"]
    ]
    assert len(calls) == len(summarizer.received)
