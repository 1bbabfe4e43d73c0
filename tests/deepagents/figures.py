"""The figures of docs/deepagents.md: ``python -m tests.deepagents.figures``.

The scripted deep agent of ``_support`` (55 main-agent requests, 13 sub-agent
requests, the summary calls) at 16k and 32k, bare and guarded as the page says;
each request counted by a fresh guard with the tools it bound. A summary call is
deepagents' own or ``CompactionMiddleware``'s (``SectionWriter``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_context_guard import (
    CompactionMiddleware,
    ContextGuardMiddleware,
    guarded_subagents,
    guarded_summarization,
)

from ._support import DeepScript, Run, SectionWriter, run

SUMMARIES = ("summary", "compaction")


def _main_only(model: DeepScript) -> dict[str, Any]:
    return {"middleware": [ContextGuardMiddleware()]}


def _every_agent(model: DeepScript) -> dict[str, Any]:
    return {
        "middleware": [ContextGuardMiddleware()],
        "subagents": guarded_subagents(),
    }


def _with_summaries(model: DeepScript) -> dict[str, Any]:
    summarize = guarded_summarization(model)
    return {
        "middleware": [ContextGuardMiddleware(), summarize],
        "subagents": guarded_subagents(middleware=[summarize]),
    }


def _with_compaction(model: DeepScript) -> dict[str, Any]:
    summarize = guarded_summarization(model)
    compaction = CompactionMiddleware(
        model, summarizer=SectionWriter.into(model.requests)
    )
    return {
        "middleware": [compaction, ContextGuardMiddleware(), summarize],
        "subagents": guarded_subagents(middleware=[summarize]),
    }


SETUPS: dict[str, Callable[[DeepScript], dict[str, Any]] | None] = {
    "no guard": None,
    "`middleware=[guard]` only": _main_only,
    "+ `guarded_subagents()`": _every_agent,
    "+ `guarded_summarization`": _with_summaries,
    "+ `CompactionMiddleware`": _with_compaction,
}


def _cell(result: Run, *parties: str) -> str:
    over = sum(result.over_budget(who) for who in parties)
    return f"{over} / {sum(len(result.of(who)) for who in parties)}"


def table() -> str:
    """The markdown table of requests over budget or lost and tokens sent."""
    rows = [
        "| window | setup | main over budget | sub-agent | summary calls "
        "| main without task or result | tokens sent (main + sub) |",
        "|---|---|---|---|---|---|---|",
    ]
    for window in (16_000, 32_000):
        bare = None
        for name, build in SETUPS.items():
            result = run(window, build)
            sent = sum(result.tokens("main")) + sum(result.tokens("sub"))
            bare = bare or sent
            cells = [_cell(result, "main"), _cell(result, "sub")]
            cells += [_cell(result, *SUMMARIES), str(len(result.lost()))]
            rows.append(
                f"| {window // 1000}k | {name} | {' | '.join(cells)} "
                f"| {sent:,} ({sent / bare:.2f}x) |"
            )
    return "\n".join(rows)


if __name__ == "__main__":
    print(table())
