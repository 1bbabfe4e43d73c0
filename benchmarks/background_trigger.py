"""Time the compaction trigger adds to a model call, with and without background_at.

An agent loop grows a history one tool step per model call (each call takes
``MODEL_S``); before every call ``Compactor.update`` (``aupdate`` on the async
host) runs, and its time at the calls where it compacts is the wait the
trigger adds. The summarizer sleeps ``SUMMARY_S`` per call. With
``background_at=0.6`` the summary starts when the history reaches 60% of the
trigger and is swapped in there.

    CONTEXT_GUARD_OFFLINE=1 python benchmarks/background_trigger.py
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_context_guard import ContextGuard, GuardPolicy
from langchain_context_guard.compaction import CompactionSettings, Compactor

COMMAND = "CONTEXT_GUARD_OFFLINE=1 python benchmarks/background_trigger.py"
OUT = Path(__file__).resolve().parent / "results" / "background_trigger.json"
SUMMARY_S = 0.5
MODEL_S = 0.1
STEPS = 80
TRIGGER = 12_000
ANSWER = "<completed>\n- read the files\n</completed>"


class SleepingSummarizer(GenericFakeChatModel):
    """Answers every call with the same summary after ``SUMMARY_S`` seconds."""

    def _generate(self, *args: Any, **kwargs: Any) -> Any:
        time.sleep(SUMMARY_S)
        self.messages = iter([ANSWER])
        return super()._generate(*args, **kwargs)

    async def _agenerate(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(SUMMARY_S)
        self.messages = iter([ANSWER])
        return super()._generate(*args, **kwargs)


def step(k: int) -> list[BaseMessage]:
    call = {"name": "read_file", "args": {"path": f"src/m{k}.py"}, "id": f"c{k}"}
    output = f"{k:04d}: def handler_{k}(request): return compute(request)\n" * 40
    return [
        AIMessage("", tool_calls=[call], id=f"ai-{k}"),
        ToolMessage(output, tool_call_id=f"c{k}", id=f"t-{k}"),
    ]


def compactor(background: bool) -> Compactor:
    settings = CompactionSettings(
        trigger=("tokens", TRIGGER),
        keep=("tokens", 3_000),
        background_at=0.6 if background else None,
        retry_delay=0.0,
    )
    guard = ContextGuard(GuardPolicy(context_window=20_000, reserve_tokens=2_000))
    return Compactor(SleepingSummarizer(messages=iter([])), settings, guard=guard)


def run_sync(background: bool) -> list[float]:
    comp = compactor(background)
    state: list[BaseMessage] = [HumanMessage("Read every module.", id="task")]
    waits = []
    for k in range(STEPS):
        started = time.perf_counter()
        update = comp.update(state, thread_id="bench")
        took = time.perf_counter() - started
        if update is not None:
            state = list(update["messages"][1:])
            waits.append(took)
        time.sleep(MODEL_S)  # the model call
        state = [*state, *step(k)]
    return waits


async def run_async(background: bool) -> list[float]:
    comp = compactor(background)
    state: list[BaseMessage] = [HumanMessage("Read every module.", id="task")]
    waits = []
    for k in range(STEPS):
        started = time.perf_counter()
        update = await comp.aupdate(state, thread_id="bench")
        took = time.perf_counter() - started
        if update is not None:
            state = list(update["messages"][1:])
            waits.append(took)
        await asyncio.sleep(MODEL_S)
        state = [*state, *step(k)]
    return waits


def row(host: str, background: bool, waits: list[float]) -> dict[str, Any]:
    ms = [w * 1000 for w in waits]
    return {
        "host": host,
        "background_at": 0.6 if background else None,
        "compactions": len(ms),
        "ms_at_trigger_median": round(statistics.median(ms)),
        "ms_at_trigger_max": round(max(ms)),
    }


def main() -> None:
    rows = []
    for background in (False, True):
        rows.append(row("sync (thread)", background, run_sync(background)))
        rows.append(row("async (task)", background, asyncio.run(run_async(background))))
    for r in rows:
        print(r)
    doc = {
        "command": COMMAND,
        "summary_s": SUMMARY_S,
        "model_s": MODEL_S,
        "steps": STEPS,
        "rows": rows,
    }
    OUT.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
