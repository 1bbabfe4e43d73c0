"""The demo agent: a long, tool-heavy LangGraph agent run under the guard.

A ``create_agent`` agent explores a generated repository with real ``ls``, ``cat``
and ``grep`` tools (outputs of many KB) and a ``SqliteSaver`` checkpointer on a
file. ``CompactionMiddleware`` summarises old history in the stored state when it
passes the trigger, and ``ContextGuardMiddleware`` fits every model call to the
budget. It uses a real chat model when one is given (which also writes the
summaries), and the offline :class:`ScriptedAgentModel` otherwise. For each model
call it records the tokens sent, what the whole history would have cost, and
whether the tool output holding an early fact (the billing docs' rounding rule,
read in the second call) was still sent; the result says whether the final call
had it, and whether the agent had to read it back.

```python
from langchain_context_guard import GuardPolicy
from langchain_context_guard.cli import run_demo

policy = GuardPolicy(context_window=32_000, reserve_tokens=4_000)
result = run_demo(policy, steps=30, db=":memory:")
assert result.over_budget == 0
```
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from ..engine import ContextGuard, GuardEvent, GuardPolicy, count_messages
from ..replay import CACHE_RATE, cached_prefix, message_key
from ._demo_model import ScriptedAgentModel, fact_in, scripted_summary
from ._demo_repo import (
    FACT,
    FACT_FILE,
    TASK,
    exploration_plan,
    make_tools,
    write_repository,
)

__all__ = [
    "FACT",
    "FACT_FILE",
    "SYSTEM_PROMPT",
    "TASK",
    "CallRecord",
    "DemoResult",
    "ScriptedAgentModel",
    "exploration_plan",
    "make_tools",
    "run_demo",
    "scripted_summary",
    "write_repository",
]

SYSTEM_PROMPT = (
    "You are a careful software engineer. Use the tools to look at the code and the "
    "logs before you answer. Keep tool calls focused."
)


@dataclass(frozen=True)
class CallRecord:
    """One model call: tokens sent with the guard, and the whole history's tokens."""

    index: int
    tokens_with: int
    tokens_without: int
    messages_sent: int
    messages_total: int
    events: tuple[str, ...] = ()
    billed_with: int = 0
    """Input billed with prefix caching (the prefix unchanged since the previous
    call at 10% of the price), with the guard."""
    billed_without: int = 0
    """The same for the whole history."""
    fact_in_input: bool = False
    """Whether a tool output this call was sent holds :data:`FACT`."""

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict."""
        return {**self.__dict__, "events": list(self.events)}


@dataclass(frozen=True)
class DemoResult:
    """What a demo run did, call by call."""

    calls: tuple[CallRecord, ...]
    budget: int
    context_window: int
    window_source: str
    reserve_tokens: int
    model: str
    db: str
    thread_id: str
    answer: str
    events: dict[str, int] = field(default_factory=dict)
    fact_read_at: int = 0
    """The call that first asked to read :data:`FACT_FILE` (0: never)."""
    read_back_at: int = 0
    """The call that asked to read it again (0: never)."""

    @property
    def fact_dropped_at(self) -> int:
        """The first call after the read whose input no longer held the fact."""
        after = (
            c for c in self.calls if self.fact_read_at and c.index > self.fact_read_at
        )
        return next((c.index for c in after if not c.fact_in_input), 0)

    @property
    def fact_status(self) -> str:
        """``kept``, ``read back``, ``lost`` or ``never read``: the final call."""
        if not self.fact_read_at or not self.calls:
            return "never read"
        if not self.calls[-1].fact_in_input:
            return "lost"
        return "read back" if self.read_back_at else "kept"

    @property
    def answer_quotes_fact(self) -> bool:
        """Whether the answer names the rule's method, only found in the docs."""
        return "ROUND_HALF_UP" in self.answer

    @property
    def peak_with(self) -> int:
        """Largest context sent with the guard."""
        return max((c.tokens_with for c in self.calls), default=0)

    @property
    def peak_without(self) -> int:
        """Largest context the whole history would have needed."""
        return max((c.tokens_without for c in self.calls), default=0)

    @property
    def total_with(self) -> int:
        """Input tokens of every call, with the guard."""
        return sum(c.tokens_with for c in self.calls)

    @property
    def total_without(self) -> int:
        """Input tokens of every call, without it."""
        return sum(c.tokens_without for c in self.calls)

    @property
    def billed_with(self) -> int:
        """Input billed over every call with prefix caching, with the guard."""
        return sum(c.billed_with for c in self.calls)

    @property
    def billed_without(self) -> int:
        """The same without the guard."""
        return sum(c.billed_without for c in self.calls)

    @property
    def savings(self) -> float:
        """Share of input tokens the guard saved."""
        return 1 - self.total_with / self.total_without if self.total_without else 0.0

    @property
    def over_budget(self) -> int:
        """Calls that sent more than the budget (the guard's promise: zero)."""
        return sum(c.tokens_with > self.budget for c in self.calls)

    @property
    def over_budget_without(self) -> int:
        """Calls whose whole history would not have fit the budget."""
        return sum(c.tokens_without > self.budget for c in self.calls)

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict with the totals."""
        totals = {
            name: getattr(self, name)
            for name in (
                "peak_with",
                "peak_without",
                "total_with",
                "total_without",
                "billed_with",
                "billed_without",
            )
        }
        return {
            **{k: v for k, v in self.__dict__.items() if k != "calls"},
            **totals,
            "savings": round(self.savings, 4),
            "fact_dropped_at": self.fact_dropped_at,
            "fact_status": self.fact_status,
            "answer_quotes_fact": self.answer_quotes_fact,
            "over_budget": self.over_budget,
            "over_budget_without": self.over_budget_without,
            "calls": [c.to_dict() for c in self.calls],
        }


class _GuardEvents(BaseCallbackHandler):
    """Collects the kinds of the guard's events from its custom callback events."""

    def __init__(self) -> None:
        self.pending: list[str] = []

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        """Keep the kind of each ``context_guard.event``."""
        if name == "context_guard.event" and isinstance(data, dict):
            self.pending.append(str(data.get("kind")))

    def add(self, event: GuardEvent) -> None:
        """Keep the kind of a compaction event."""
        self.pending.append(event.kind)


def _recorder(
    guard: ContextGuard,
    events: _GuardEvents,
    on_call: Callable[[CallRecord], None] | None,
) -> Any:
    from langchain.agents.middleware import AgentMiddleware

    history: list[BaseMessage] = [SystemMessage(SYSTEM_PROMPT), HumanMessage(TASK)]
    calls: list[CallRecord] = []

    def tokens(messages: list[BaseMessage], tools: Sequence[Any]) -> int:
        body = count_messages(messages, guard.counter, anchoring=False)
        return body + guard.counter.count_tools(list(tools))

    previous: dict[str, list[tuple[str, ...]]] = {"with": [], "without": []}
    reads: list[int] = []

    def billed(which: str, messages: list[BaseMessage], total: int) -> int:
        """``total`` tokens, the prefix unchanged since the last call at 10%."""
        keys = [message_key(m) for m in messages]
        cached = cached_prefix(previous[which], keys)
        previous[which] = keys
        count = guard.counter.count_message
        prefix = sum(count(m) for m in messages[:cached])
        return round(total - (1 - CACHE_RATE) * prefix)

    class DemoRecorder(AgentMiddleware):
        """Innermost: sees exactly what the model is sent, and every result."""

        calls_made = calls
        fact_reads = reads

        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            system = [request.system_message] if request.system_message else []
            sent = [*system, *request.messages]
            with_guard = tokens(sent, request.tools)
            without = tokens(history, request.tools)
            record = CallRecord(
                index=len(calls) + 1,
                tokens_with=with_guard,
                tokens_without=without,
                messages_sent=len(sent),
                messages_total=len(history),
                events=tuple(events.pending),
                billed_with=billed("with", sent, with_guard),
                billed_without=billed("without", history, without),
                fact_in_input=fact_in(sent),
            )
            events.pending.clear()
            calls.append(record)
            if on_call is not None:
                on_call(record)
            response = handler(request)
            replies = [m for m in response.result if isinstance(m, AIMessage)]
            history.extend(replies)
            if any(FACT_FILE in str(c["args"]) for m in replies for c in m.tool_calls):
                reads.append(record.index)
            return response

        def wrap_tool_call(self, request: Any, handler: Any) -> Any:
            result = handler(request)
            if isinstance(result, ToolMessage):
                history.append(result)
            return result

    return DemoRecorder()


def next_thread_id(db: Path) -> str:
    """``demo-<n>``: one past the demo threads already in ``db``."""
    if str(db) == ":memory:" or not db.exists() or db.stat().st_size == 0:
        return "demo-1"
    with closing(sqlite3.connect(db)) as conn:
        try:
            rows = conn.execute("SELECT DISTINCT thread_id FROM checkpoints").fetchall()
        except sqlite3.OperationalError:
            rows = []
    return f"demo-{len([r for r in rows if str(r[0]).startswith('demo-')]) + 1}"


def run_demo(
    policy: GuardPolicy,
    *,
    steps: int = 60,
    db: str | Path = "context-guard-demo.sqlite",
    model: BaseChatModel | None = None,
    on_call: Callable[[CallRecord], None] | None = None,
) -> DemoResult:
    """Run the demo agent for up to ``steps`` tool calls; checkpoints go to ``db``.

    Args:
        policy: The guard's policy (window, reserve, passes).
        steps: Tool calls to make (a real model may stop earlier).
        db: The SQLite checkpoint file; ``":memory:"`` keeps nothing.
        model: A real chat model; ``None`` uses the offline scripted one.
        on_call: Called with each model call's record, before the call.

    Returns:
        The per-call records and totals.
    """
    from langchain.agents import create_agent
    from langchain.agents.middleware import ModelCallLimitMiddleware
    from langgraph.checkpoint.sqlite import SqliteSaver

    from ..adapters import ContextGuardMiddleware
    from ..compaction import CompactionMiddleware

    guard = ContextGuard(policy, model=model)
    info = guard.window(model)
    thread_id = next_thread_id(Path(db))
    events = _GuardEvents()
    recorder = _recorder(guard, events, on_call)
    chat = model or ScriptedAgentModel(
        plan=exploration_plan(steps), token_counter=guard.counter
    )
    compaction = CompactionMiddleware(model or scripted_summary, guard=guard)
    compaction.compactor.on_event = events.add
    middleware: list[Any] = [compaction, ContextGuardMiddleware(guard)]
    if model is not None:  # a real model decides when to stop; cap it at ``steps``
        middleware.append(
            ModelCallLimitMiddleware(run_limit=steps + 1, exit_behavior="end")
        )
    middleware.append(recorder)
    with tempfile.TemporaryDirectory(prefix="context-guard-demo-") as tmp:
        root = write_repository(Path(tmp))
        with closing(sqlite3.connect(db, check_same_thread=False)) as conn:
            agent = create_agent(
                chat,
                make_tools(root),
                system_prompt=SYSTEM_PROMPT,
                middleware=middleware,
                checkpointer=SqliteSaver(conn),
            )
            config: Any = {
                "configurable": {"thread_id": thread_id},
                "callbacks": [events],
                "recursion_limit": 10 * steps + 50,
            }
            state = agent.invoke({"messages": [HumanMessage(TASK)]}, config)
    last = state["messages"][-1]
    kinds: dict[str, int] = {}
    for call in recorder.calls_made:
        for kind in call.events:
            kinds[kind] = kinds.get(kind, 0) + 1
    return DemoResult(
        calls=tuple(recorder.calls_made),
        budget=guard.budget(model, window=info.tokens),
        context_window=info.tokens,
        window_source=info.source,
        reserve_tokens=info.tokens - guard.budget(model, window=info.tokens),
        model=getattr(chat, "model_name", None) or chat._llm_type,
        db=str(db),
        thread_id=thread_id,
        answer=str(last.content) if isinstance(last, AIMessage) else "",
        events=dict(sorted(kinds.items())),
        fact_read_at=recorder.fact_reads[0] if recorder.fact_reads else 0,
        read_back_at=recorder.fact_reads[1] if len(recorder.fact_reads) > 1 else 0,
    )
