"""Cost of the traced ``context_guard`` run that carries each report's events.

Times ``emit`` inside a run (as the middleware calls it on every model call),
with no callback handler and with one recording handler, against dispatching
the same custom events without the child run.

    CONTEXT_GUARD_OFFLINE=1 python benchmarks/trace_overhead.py
"""

from __future__ import annotations

import time
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler, dispatch_custom_event
from langchain_core.runnables import RunnableConfig, RunnableLambda

from langchain_context_guard import ContextGuard, GuardPolicy
from langchain_context_guard.adapters._callbacks import _payloads, emit

N = 2_000


class Recorder(BaseCallbackHandler):
    def __init__(self) -> None:
        self.n = 0

    def on_custom_event(self, *args: Any, **kwargs: Any) -> None:
        self.n += 1


def main() -> None:
    guard = ContextGuard(GuardPolicy(context_window=20_000))
    history = [("user", "hello " * 50)] + [("ai", "ok " * 50), ("user", "more")] * 20
    report = guard.prepare(history).report

    def traced(_: Any, config: RunnableConfig) -> None:
        for _ in range(N):
            emit(report, source="middleware", config=config)

    def bare(_: Any, config: RunnableConfig) -> None:
        for _ in range(N):
            for name, data in _payloads(report, "middleware"):
                dispatch_custom_event(name, data, config=config)

    for label, callbacks in (("no handler", []), ("one handler", [Recorder()])):
        times = {}
        for name, fn in (("events only", bare), ("traced run", traced)):
            start = time.perf_counter()
            RunnableLambda(fn).invoke(None, {"callbacks": callbacks})
            times[name] = (time.perf_counter() - start) / N * 1e6
        print(
            f"{label}: events only {times['events only']:.0f} us/call, "
            f"with the traced run {times['traced run']:.0f} us/call"
        )


if __name__ == "__main__":
    main()
