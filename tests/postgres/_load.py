"""Load: worker processes serving the steps of many threads on one PostgreSQL.

The steps of each thread go, one at a time and in order, to whichever worker
process is free (as LangGraph Server does): a worker runs the thread's pending
tool call and the next model call of a ``create_agent`` +
``ContextGuardMiddleware`` agent on ``PostgresSaver``, checks the prompt the
model received (within the budget by the guard's count, every tool call
answered) and reports the time spent in the guard. The tool returns real tool
outputs of the shared SWE transcripts (synthetic ones when they are absent).
At the end every thread's stored history is checked: every call and result
there once, in order, nothing lost or duplicated.

``run_load`` is used by ``benchmarks/bench_load.py`` and, small, by the tests.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import time
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool

from langchain_context_guard import ContextGuard
from tests.adapters._support import RESERVE, SYSTEM, WINDOW, big_output

TASK = "Investigate the failing test and fix it."


def tool_outputs() -> list[str]:
    """Tool results of the shared SWE transcripts (synthetic when absent)."""
    from langchain_context_guard.replay._transcripts import (
        load_trajectories,
        shared_trajectory_dir,
    )

    directory = shared_trajectory_dir()
    if directory is None:
        return [big_output(k)[: 500 + (k * 3_571) % 30_000] for k in range(200)]
    outputs = [
        str(m.content)
        for messages in load_trajectories(directory).values()
        for m in messages
        if isinstance(m, ToolMessage) and m.content
    ]
    return outputs


@dataclass(frozen=True)
class Step:
    """What one worker saw on one step."""

    thread: str
    worker: int
    n: int
    guard_seconds: float
    step_seconds: float
    over_budget: bool
    bad_pairs: int
    rebuilt: bool = False
    """The worker rebuilt the thread's last prompt (it did not hold it)."""


class TimedGuard(ContextGuard):
    """Adds up the time in the guard (a rebuild's prepare counted once)."""

    seconds = 0.0
    rebuilds = 0
    depth = 0

    def _timed(self, call: Any, *args: Any, **kw: Any) -> Any:
        TimedGuard.depth += 1
        start = time.perf_counter()
        try:
            return call(*args, **kw)
        finally:
            TimedGuard.depth -= 1
            if TimedGuard.depth == 0:
                TimedGuard.seconds += time.perf_counter() - start

    def prepare(self, messages: Any, **kw: Any) -> Any:
        if TimedGuard.depth:
            TimedGuard.rebuilds += 1
        return self._timed(super().prepare, messages, **kw)

    def restore_state(self, messages: Any, states: Any, **kw: Any) -> None:
        self._timed(super().restore_state, messages, states, **kw)


def _call_number(messages: list[BaseMessage]) -> int:
    done = [m for m in messages if isinstance(m, ToolMessage)]
    return int(done[-1].tool_call_id.rsplit("_", 1)[1]) + 1 if done else 0


def _worker(
    url: str, worker: int, steps: int, tasks: Any, results: Any
) -> None:  # pragma: no cover - runs in a child process
    from langchain.agents import create_agent

    from langchain_context_guard import GuardPolicy
    from langchain_context_guard.adapters._middleware import ContextGuardMiddleware
    from tests.fakes import ScriptedChatModel, pairing_errors
    from tests.postgres._support import postgres

    outputs = tool_outputs()

    @tool
    def run_command(i: int) -> str:
        """Run shell command number i of the task."""
        return outputs[i % len(outputs)]

    guard = TimedGuard(GuardPolicy(reserve_tokens=RESERVE, warn_below_tokens=16_000))
    checks: list[tuple[bool, int]] = []

    class Model(ScriptedChatModel):
        thread: str = ""

        def bind_tools(self, tools: Any, **kwargs: Any) -> Model:
            return self

        def reply(self, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
            over = guard.count_tokens(messages, tools=[run_command]) > (
                WINDOW - RESERVE
            )
            checks.append((over, len(pairing_errors(messages))))
            self._received.clear()
            n = _call_number(messages)
            chars = sum(len(str(m.content)) for m in messages)
            usage = {
                "input_tokens": chars // 4 + 7 * len(messages),
                "output_tokens": 10,
                "total_tokens": chars // 4 + 7 * len(messages) + 10,
            }
            if n >= steps - 1:
                return AIMessage(
                    "Fixed.", id=f"{self.thread}-final", usage_metadata=usage
                )
            seed = sum(map(ord, self.thread)) * 7_919 + n
            call = {
                "name": "run_command",
                "args": {"i": seed},
                "id": f"{self.thread}_c_{n}",
            }
            return AIMessage(
                "", tool_calls=[call], id=f"{self.thread}-ai-{n}", usage_metadata=usage
            )

    model = Model(profile={"max_input_tokens": WINDOW})
    with postgres(url, setup=False) as (saver, store):
        agent = create_agent(
            model,
            [run_command],
            system_prompt=SYSTEM,
            middleware=[ContextGuardMiddleware(guard)],
            checkpointer=saver,
            store=store,
            interrupt_before=["tools"],
        )
        results.put(("ready", worker))
        while True:
            item = tasks.get()
            if item is None:
                break
            thread, n = item
            model.thread = thread
            config: Any = {"configurable": {"thread_id": thread}, "recursion_limit": 50}
            start = time.perf_counter()
            TimedGuard.seconds = 0.0
            TimedGuard.rebuilds = 0
            checks.clear()
            agent.invoke({"messages": [("user", TASK)]} if n == 0 else None, config)
            took = time.perf_counter() - start
            over = any(c[0] for c in checks)
            bad = sum(c[1] for c in checks)
            if len(checks) != 1:
                bad += 1_000  # one model call per step, always
            rebuilt = TimedGuard.rebuilds > 0
            seconds = TimedGuard.seconds
            results.put(Step(thread, worker, n, seconds, took, over, bad, rebuilt))


def run_load(
    url: str, *, workers: int, threads: int, steps: int
) -> tuple[list[Step], float]:
    """Serve ``threads`` x ``steps`` steps with ``workers`` processes; wall time."""
    from tests.postgres._support import postgres

    with postgres(url):  # set up once, before the workers share the database
        pass
    ctx = mp.get_context("spawn")
    tasks: Any = ctx.Queue()
    results: Any = ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(url, w, steps, tasks, results), daemon=True)
        for w in range(workers)
    ]
    for p in procs:
        p.start()
    try:
        for _ in procs:
            assert results.get(timeout=300)[0] == "ready"
        names = [f"load{t:03d}" for t in range(threads)]
        start = time.perf_counter()
        for name in names:
            tasks.put((name, 0))
        done: list[Step] = []
        while len(done) < threads * steps:
            try:
                step = results.get(timeout=600)
            except queue.Empty as exc:
                raise RuntimeError("a worker stopped answering") from exc
            done.append(step)
            if step.n + 1 < steps:
                tasks.put((step.thread, step.n + 1))
        wall = time.perf_counter() - start
        for _ in procs:
            tasks.put(None)
        for p in procs:
            p.join(timeout=120)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
    return done, wall


def check_histories(url: str, threads: int, steps: int) -> list[str]:
    """Problems in the stored histories: lost, duplicated or out-of-order messages."""
    from langgraph.checkpoint.postgres import PostgresSaver

    problems: list[str] = []
    with PostgresSaver.from_conn_string(url) as saver:
        for t in range(threads):
            name = f"load{t:03d}"
            config: Any = {"configurable": {"thread_id": name}}
            tup = saver.get_tuple(config)
            if tup is None:
                problems.append(f"{name}: no checkpoint")
                continue
            messages = tup.checkpoint["channel_values"].get("messages", [])
            ids = [m.id for m in messages]
            if len(ids) != len(set(ids)):
                problems.append(f"{name}: duplicated message ids")
            expected = 1 + 2 * (steps - 1) + 1
            if len(messages) != expected:
                problems.append(f"{name}: {len(messages)} messages, not {expected}")
            calls = [
                c["id"]
                for m in messages
                if isinstance(m, AIMessage)
                for c in m.tool_calls
            ]
            answers = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
            wanted = [f"{name}_c_{n}" for n in range(steps - 1)]
            if calls != wanted or answers != wanted:
                problems.append(f"{name}: tool calls or results lost or out of order")
    return problems


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


os.environ.setdefault("CONTEXT_GUARD_OFFLINE", "1")
