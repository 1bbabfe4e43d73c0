"""The two summary modes side by side: what each bills and what its summaries hold.

Replays the shared SWE trajectories at 16k and 32k with ``guard+compaction``
(``summary_mode="serialize"``) and ``guard+compaction_append`` (``"append"``),
and for every sectioned summary call records what the scripted summarizer was
shown (characters and identifiers of the conversation it reads) and which of the
five sections its parsed reply filled. A benchmark, not a test.

Run:  python benchmarks/summary_modes.py   (writes results/summary_modes.json;
      from a checkout, PYTHONPATH=. so the checkout's package is the one replayed)
"""

from __future__ import annotations

import json
import os
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

os.environ.setdefault("CONTEXT_GUARD_OFFLINE", "1")

from langchain_context_guard.compaction._summary import SECTIONS, parse_sections
from langchain_context_guard.replay import (
    _strategies,
    identifiers,
    load_paths,
    replay,
    shared_trajectory_dir,
)
from langchain_context_guard.replay._summarizer import shown

RESULTS = Path(__file__).resolve().parent / "results"
MODES = {"guard+compaction": "serialize", "guard+compaction_append": "append"}
WINDOWS = (16_000, 32_000)
COMMAND = "python benchmarks/summary_modes.py"


def _record(calls: dict[tuple[str, int], list[dict[str, Any]]]) -> None:
    """Note every sectioned summary call of the compaction strategies."""
    prompt = _strategies.GuardCompaction.prompt

    def recorded(self: Any, history: Any, now: float | None = None) -> Any:
        out = prompt(self, history, now)
        window = self.compactor.guard.policy.context_window
        for call in out.summaries:
            seen = shown(list(call.prompt))
            if seen.sections:  # not a split turn's own summary
                filled = parse_sections(call.reply)
                calls[(self.name, window)].append(
                    {
                        "chars": len(seen.text),
                        "identifiers": len(identifiers(seen.text)),
                        "filled": [k for k in SECTIONS if getattr(filled, k)],
                    }
                )
        return out

    _strategies.GuardCompaction.prompt = recorded  # type: ignore[method-assign]


def main() -> int:
    calls: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    _record(calls)
    transcripts = load_paths([shared_trajectory_dir()])
    result = replay(transcripts, windows=WINDOWS, strategies=["none", *MODES])
    rows = []
    for r in result.rows():
        if r["strategy"] not in MODES:
            continue
        mine = calls[(r["strategy"], r["window"])]
        rows.append(
            {
                **{k: r[k] for k in ("window", "strategy", "summary_calls")},
                "mode": MODES[r["strategy"]],
                **{k: v for k, v in r.items() if k.startswith("summary_")},
                **{k: r[k] for k in ("billed_input", "billed_vs_none")},
                **{k: r[k] for k in ("with_output_vs_none", "content_evidence_pct")},
                "needle_pct": r["needle_pct"],
                "sectioned_calls": len(mine),
                "shown_chars_median": statistics.median(c["chars"] for c in mine),
                "shown_identifiers_mean": round(
                    statistics.mean(c["identifiers"] for c in mine), 1
                ),
                "filled": {k: sum(k in c["filled"] for c in mine) for k in SECTIONS},
                "calls": mine,
            }
        )
    for window in WINDOWS:
        a, b = (calls[(name, window)] for name in MODES)
        same = sum(x["filled"] == y["filled"] for x, y in zip(a, b, strict=True))
        print(f"{window // 1000}k: same sections filled on {same} of {len(a)} calls")
    for row in rows:
        shown_row = {k: v for k, v in row.items() if k != "calls"}
        print(json.dumps(shown_row))
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "summary_modes.json"
    out.write_text(json.dumps({"command": COMMAND, "rows": rows}, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
