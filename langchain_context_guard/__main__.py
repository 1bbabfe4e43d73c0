"""``context-guard`` command line (placeholder demo until the full CLI lands)."""

from __future__ import annotations

import sys

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from . import ContextGuard, GuardPolicy


def main(argv: list[str] | None = None) -> int:
    """Run a small engine demo on a synthetic tool-heavy history."""
    del argv
    history: list[object] = [
        SystemMessage("You are a coding agent."),
        HumanMessage("Fix it."),
    ]
    for k in range(60):
        history.append(
            AIMessage(
                "",
                tool_calls=[
                    {"name": "bash", "args": {"cmd": f"cat f{k}"}, "id": f"c{k}"}
                ],
            )
        )
        history.append(ToolMessage(f"line {k}\n" * 400, tool_call_id=f"c{k}"))
    guard = ContextGuard(GuardPolicy(context_window=32_000, reserve_tokens=4_000))
    result = guard.prepare(history)
    r = result.report
    print(
        f"{len(history)} messages, {r.tokens_before:,} tokens -> "
        f"{len(result.messages)} messages, {r.tokens_after:,} tokens "
        f"(budget {r.budget:,})"
    )
    for event in r.events:
        print(" ", event.describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
