"""Time ``ContextGuard.prepare`` against ``langchain_core`` ``trim_messages``.

A 1,000-message (~300k-token) history is built from the shared SWE trajectories
(one system and one user message, then whole assistant + tool-result pairs from the
42 transcripts, concatenated). Then, in the same process and side by side:

* ``prepare`` cold: a fresh guard (empty count cache) on the 1,000 messages;
* ``prepare`` warm: one guard, the history grown by one agent step (an AIMessage
  and its ToolMessage) per call, by exactly one message per call, and by one step
  with every message rebuilt (as after a checkpoint round trip);
* ``trim_messages`` with a per-call tiktoken counter (cl100k, no cache: how
  users write it), with ``count_tokens_approximately``, and with a cached counter;

at the same budget (window - reserve) for a 128k and a 32k window, interleaved
round by round, with wall-clock and CPU time. Warm calls also report how many
messages were encoded and how much of the previous prompt stayed a byte-identical
prefix. Prints tables and writes JSON to ``benchmarks/results/``; ``--profile``
adds a cProfile of warm calls. A benchmark, not a test.

Run:  python benchmarks/bench_prepare.py [--quick] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import logging
import math
import os
import platform
import pstats
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

os.environ.setdefault("CONTEXT_GUARD_OFFLINE", "1")

import itertools

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
    messages_to_dict,
    trim_messages,
)
from langchain_core.messages.utils import count_tokens_approximately

from langchain_context_guard import (
    MARKER_KEY,
    ContextGuard,
    GuardPolicy,
    GuardReport,
    PrepareResult,
    TiktokenCounter,
    count_messages,
)
from langchain_context_guard.replay import (
    load_trajectories,
    shared_trajectory_dir,
)

RESULTS = Path(__file__).resolve().parent / "results"
WINDOWS = ((128_000, 8_000), (32_000, 4_000))
"""(context_window, reserve_tokens) pairs; the budget is their difference."""


# --------------------------------------------------------------------------- data


def build_history(trajectories: dict[str, list[BaseMessage]]) -> list[BaseMessage]:
    """System + task, then every trajectory's assistant/tool pairs, concatenated.

    Ids and tool-call ids get a per-trajectory prefix so they stay unique. Usage
    metadata is dropped: a transcript's usage describes that transcript's own
    prefix, which would be a wrong anchor inside the concatenation.
    """
    first = next(iter(trajectories.values()))
    system = next(m for m in first if isinstance(m, SystemMessage))
    task = next(m for m in first if isinstance(m, HumanMessage))
    out: list[BaseMessage] = [
        SystemMessage(content=system.content, id="sys"),
        HumanMessage(content=task.content, id="task"),
    ]
    for t, messages in enumerate(trajectories.values()):
        for ai, tool in itertools.pairwise(messages):
            if not (
                isinstance(ai, AIMessage)
                and ai.tool_calls
                and isinstance(tool, ToolMessage)
                and tool.tool_call_id == ai.tool_calls[0]["id"]
            ):
                continue
            call_id = f"t{t}-{ai.tool_calls[0]['id']}"
            out.append(
                AIMessage(
                    content=ai.content,
                    id=f"t{t}-{ai.id}",
                    tool_calls=[{**ai.tool_calls[0], "id": call_id}],
                )
            )
            out.append(
                ToolMessage(
                    content=tool.content,
                    tool_call_id=call_id,
                    name=tool.name,
                    id=f"t{t}-{tool.id}",
                )
            )
    return out


# ------------------------------------------------------------------------ helpers


def pct(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def summary_ms(samples: Sequence[float], cpu: Sequence[float]) -> dict[str, float]:
    """Wall-clock median / p90 / min / max in ms, and the CPU-time median."""
    return {
        "median_ms": round(pct(samples, 50), 3),
        "p90_ms": round(pct(samples, 90), 3),
        "min_ms": round(min(samples), 3),
        "max_ms": round(max(samples), 3),
        "cpu_median_ms": round(pct(cpu, 50), 3),
        "n": len(samples),
    }


class Timer:
    """Wall-clock (``perf_counter``) and CPU-time (``thread_time``) samples.

    On a shared machine the CPU time of the calling thread shows the work done,
    unaffected by time spent descheduled while other processes ran.
    """

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def __call__(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` once, record its times, return its result."""
        cpu = time.thread_time()
        start = time.perf_counter()
        result = fn()
        self.wall.append((time.perf_counter() - start) * 1000)
        self.cpu.append((time.thread_time() - cpu) * 1000)
        return result

    def summary(self) -> dict[str, float]:
        """Figures for the JSON."""
        return summary_ms(self.wall, self.cpu)


def serial(message: BaseMessage) -> str:
    """The message as the bytes a provider request would be built from."""
    return json.dumps(message_to_dict(message), sort_keys=True, default=str)


def same_prefix(prev: list[BaseMessage], cur: list[BaseMessage]) -> int:
    """How many leading messages of ``cur`` are byte-identical to ``prev``'s."""
    n = 0
    for a, b in zip(prev, cur, strict=False):
        if a is not b and serial(a) != serial(b):
            break
        n += 1
    return n


def machine() -> dict[str, Any]:
    """Where and with what the benchmark ran."""
    return {
        "nproc": os.cpu_count(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "langchain_core": version("langchain-core"),
        "tiktoken": version("tiktoken"),
        "bpe_openai": installed("bpe-openai"),
        "loadavg_start": os.getloadavg(),
    }


def installed(package: str) -> str | None:
    """``package``'s version (None: not installed)."""
    try:
        return version(package)
    except PackageNotFoundError:
        return None


# ------------------------------------------------------------------ measurements


def tiktoken_list_counter() -> Callable[[list[BaseMessage]], int]:
    """cl100k counter for ``trim_messages`` that recounts on every call (no cache)."""

    def count(messages: list[BaseMessage]) -> int:
        return count_messages(messages, TiktokenCounter(), anchoring=False)

    return count


def cached_list_counter(
    counter: TiktokenCounter,
) -> Callable[[list[BaseMessage]], int]:
    """The same cl100k count through a per-message cache kept across calls."""

    def count(messages: list[BaseMessage]) -> int:
        return count_messages(messages, counter, anchoring=False)

    return count


class ColdBench:
    """``prepare`` with a fresh guard (empty count cache) on every call."""

    def __init__(self, history: list[BaseMessage], window: int, reserve: int):
        self.history = history
        self.policy = GuardPolicy(context_window=window, reserve_tokens=reserve)
        self.timer = Timer()
        self.encoded = 0
        self.result: PrepareResult | None = None

    def step(self) -> None:
        """One timed call."""
        guard = ContextGuard(self.policy)
        self.result = self.timer(lambda: guard.prepare(self.history))
        self.encoded = getattr(guard.counter, "encoded", -1)

    def summary(self) -> dict[str, Any]:
        """Figures for the JSON."""
        assert self.result is not None
        report = self.result.report
        return {
            **self.timer.summary(),
            "encoded": self.encoded,
            "tokens_before": report.tokens_before,
            "tokens_after": report.tokens_after,
            "messages_after": len(self.result.messages),
            "events": [e.kind for e in report.events],
        }


def trailing_synthetic(messages: list[BaseMessage]) -> int:
    """How many messages at the end the guard made up (synthetic tool results)."""
    n = 0
    for m in reversed(messages):
        mark = m.additional_kwargs.get(MARKER_KEY)
        if not (isinstance(mark, dict) and mark.get("kind") == "synthetic_result"):
            break
        n += 1
    return n


def breach(prev: list[BaseMessage], cur: list[BaseMessage], same: int) -> str:
    """Why the previous prompt stopped being a prefix at message ``same``."""
    if same < len(cur) and cur[same].id != prev[same].id:
        if prev[same].id in {m.id for m in cur}:
            return "trim cut moved back (dropped messages returned)"
        return "trim cut moved forward"
    mark = cur[same].additional_kwargs.get(MARKER_KEY) if same < len(cur) else None
    kind = mark.get("kind") if isinstance(mark, dict) else None
    return f"message rewritten (marker kind: {kind})"


class WarmBench:
    """One guard; the history grows by ``grow`` messages before each call.

    With ``rebuilt``, every call gets equal but new message objects (as after a
    checkpoint round trip, done outside the timer), so only the counter's
    content-keyed cache can hit.
    """

    def __init__(
        self,
        pool: list[BaseMessage],
        start: int,
        window: int,
        reserve: int,
        grow: int,
        exact: TiktokenCounter,
        rebuilt: bool = False,
    ):
        self.pool, self.start, self.grow = pool, start, grow
        self.exact, self.rebuilt = exact, rebuilt
        self.guard = ContextGuard(
            GuardPolicy(context_window=window, reserve_tokens=reserve)
        )
        self.prev = self.guard.prepare(pool[:start]).messages
        self.size = start
        self.timer = Timer()
        self.encoded: list[int] = []
        self.prefix: list[int] = []
        self.kept = self.sent = self.uncached = 0
        self.events: Counter[str] = Counter()
        self.breaks: list[dict[str, Any]] = []
        self.report: GuardReport | None = None

    def step(self) -> None:
        """One timed call on a history one step longer, then the prefix check."""
        self.size += self.grow
        history = self.pool[: self.size]
        if self.rebuilt:
            history = messages_from_dict(messages_to_dict(history))
        counter = self.guard.counter
        before = getattr(counter, "encoded", 0)
        result = self.timer(lambda: self.guard.prepare(history))
        self.encoded.append(getattr(counter, "encoded", 0) - before)
        self.report = result.report
        self.events.update(e.kind for e in result.report.events)
        prev, cur = self.prev, result.messages
        same = same_prefix(prev, cur)
        self.prefix.append(same)
        self.sent += count_messages(cur, self.exact, anchoring=False)
        self.uncached += count_messages(cur[same:], self.exact, anchoring=False)
        # A synthetic result answering the previous call's last tool call is
        # replaced by the real one: that is not a cache break.
        if same >= len(prev) - trailing_synthetic(prev):
            self.kept += 1
        else:
            self.breaks.append(
                {
                    "history_messages": self.size,
                    "identical_prefix": same,
                    "previous_prompt_messages": len(prev),
                    "cause": breach(prev, cur, same),
                }
            )
        self.prev = cur

    def summary(self) -> dict[str, Any]:
        """Figures for the JSON."""
        assert self.report is not None
        return {
            **self.timer.summary(),
            "history_messages": [self.start + self.grow, self.size],
            "encoded_median": pct(self.encoded, 50),
            "encoded_max": max(self.encoded),
            "tokens_before_last": self.report.tokens_before,
            "tokens_after_last": self.report.tokens_after,
            "messages_after_last": len(self.prev),
            "prefix_identical_median": pct(self.prefix, 50),
            "prefix_identical_min": min(self.prefix),
            "calls": len(self.timer.wall),
            "calls_previous_prompt_kept_as_prefix": self.kept,
            "prompt_tokens_in_identical_prefix_pct": round(
                100 * (1 - self.uncached / self.sent), 2
            ),
            "prefix_breaks_by_cause": dict(
                Counter(str(b["cause"]) for b in self.breaks)
            ),
            "prefix_breaks": self.breaks,
            "event_counts": dict(self.events),
        }


class TrimBench:
    """``trim_messages`` as a typical agent loop calls it, on the same history."""

    def __init__(
        self,
        history: list[BaseMessage],
        budget: int,
        counter: Callable[[list[BaseMessage]], int],
        exact: TiktokenCounter,
    ):
        self.history, self.budget, self.counter = history, budget, counter
        self.exact = exact
        self.timer = Timer()
        self.out: list[BaseMessage] = []

    def step(self) -> None:
        """One timed call."""
        self.out = self.timer(
            lambda: trim_messages(
                self.history,
                max_tokens=self.budget,
                token_counter=self.counter,
                strategy="last",
                include_system=True,
                start_on=("human", "ai"),
            )
        )

    def summary(self) -> dict[str, Any]:
        """Figures for the JSON."""
        tokens = count_messages(self.out, self.exact, anchoring=False)
        return {
            **self.timer.summary(),
            "tokens_before": count_messages(self.history, self.exact, anchoring=False),
            "tokens_after_exact": tokens,
            "tokens_after_own_counter": self.counter(self.out),
            "over_budget_by": max(0, tokens - self.budget),
            "messages_after": len(self.out),
            "task_message_kept": any(m.id == "task" for m in self.out),
        }


def run(quick: bool) -> dict[str, Any]:
    """All measurements, interleaved round by round; returns JSON-able results.

    Every round runs each benchmark a fixed number of times, so load from other
    processes hits all of them alike.
    """
    pool = load_pool()
    n = 1_000
    rounds = 3 if quick else 20
    per_round = {
        "prepare_cold": 1,
        "prepare_warm_step": 5,
        "prepare_warm_message": 10,
        "prepare_warm_step_rebuilt": 1,
        "trim_tiktoken": 1,
        "trim_approx": 3,
        "trim_cached_tiktoken": 3,
    }
    history = pool[:n]
    exact = TiktokenCounter()
    ContextGuard(GuardPolicy(context_window=128_000)).prepare(history[:4])  # load
    results: dict[str, Any] = {
        "machine": machine(),
        "quick": quick,
        "history": {
            "messages": len(history),
            "tokens_cl100k": count_messages(history, exact, anchoring=False),
            "chars": sum(len(m.text) for m in history),
            "pool_messages": len(pool),
        },
        "rounds": rounds,
        "calls_per_round": per_round,
        "windows": {},
    }
    for window, reserve in WINDOWS:
        budget = window - reserve
        print(f"window {window:,} reserve {reserve:,} budget {budget:,}", flush=True)
        benches: dict[str, ColdBench | WarmBench | TrimBench] = {
            "prepare_cold": ColdBench(history, window, reserve),
            "prepare_warm_step": WarmBench(pool, n, window, reserve, 2, exact),
            "prepare_warm_message": WarmBench(pool, n, window, reserve, 1, exact),
            "prepare_warm_step_rebuilt": WarmBench(
                pool, n, window, reserve, 2, exact, rebuilt=True
            ),
            "trim_tiktoken": TrimBench(history, budget, tiktoken_list_counter(), exact),
            "trim_approx": TrimBench(
                history, budget, count_tokens_approximately, exact
            ),
            "trim_cached_tiktoken": TrimBench(
                history, budget, cached_list_counter(TiktokenCounter()), exact
            ),
        }
        for _ in range(rounds):
            gc.collect()
            for key, bench in benches.items():
                for _ in range(per_round[key]):
                    bench.step()
        row: dict[str, Any] = {"budget": budget}
        for key, bench in benches.items():
            row[key] = bench.summary()
            print(f"  {key:28s} median {row[key]['median_ms']:9.3f} ms", flush=True)
        results["windows"][str(window)] = row
    results["machine"]["loadavg_end"] = os.getloadavg()
    return results


def load_pool() -> list[BaseMessage]:
    """The concatenated trajectories (the first 1,000 messages are the history)."""
    directory = shared_trajectory_dir()
    if directory is None:
        sys.exit("shared trajectories not found (set CONTEXT_GUARD_TRAJECTORIES)")
    return build_history(load_trajectories(directory))


def profile_warm(quick: bool, window: int = 128_000, reserve: int = 8_000) -> str:
    """cProfile of warm ``prepare`` calls (+1 agent step each); returns the text."""
    pool = load_pool()
    guard = ContextGuard(GuardPolicy(context_window=window, reserve_tokens=reserve))
    size = 1_000
    guard.prepare(pool[:size])
    calls = 20 if quick else 200
    histories = [pool[: size + 2 * (i + 1)] for i in range(calls)]
    profiler = cProfile.Profile()
    profiler.enable()
    for h in histories:
        guard.prepare(h)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    out.write(f"warm prepare, {calls} calls, window {window:,}\n")
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(30)
    return out.getvalue()


def causes(warm: dict[str, Any]) -> str:
    """Prefix breaks as 'cut forward / cut back / rewrite' counts."""
    by = warm["prefix_breaks_by_cause"]
    forward = by.get("trim cut moved forward", 0)
    back = by.get("trim cut moved back (dropped messages returned)", 0)
    rewrite = sum(v for k, v in by.items() if k.startswith("message rewritten"))
    return f"{forward} / {back} / {rewrite}"


def table(results: dict[str, Any]) -> str:
    """Markdown tables of the headline figures."""
    lines = [
        "| window (budget) | method | median ms | p90 ms | min ms | CPU median ms | "
        "msgs encoded | "
        "tokens before -> after | msgs after |",
        "|---|---|---:|---:|---:|---:|---:|---|---:|",
    ]
    prefix = [
        "| window | warm variant | calls | previous prompt kept as prefix | "
        "prompt tokens in identical prefix | encoded/call median (max) | "
        "breaks: cut forward / cut back / rewrite |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    names = {
        "prepare_warm_step": "prepare warm, +1 step (AI + tool result)",
        "prepare_warm_message": "prepare warm, +1 message",
        "prepare_warm_step_rebuilt": "prepare warm, +1 step, rebuilt objects",
    }
    trims = {
        "trim_tiktoken": "trim_messages + tiktoken (recount per call)",
        "trim_approx": "trim_messages + count_tokens_approximately",
        "trim_cached_tiktoken": "trim_messages + tiktoken with a kept cache",
    }
    for window, row in results["windows"].items():
        label = f"{int(window) // 1000}k ({row['budget']:,})"
        cold = row["prepare_cold"]
        lines.append(
            f"| {label} | prepare cold (fresh guard) | {cold['median_ms']:.1f} | "
            f"{cold['p90_ms']:.1f} | {cold['min_ms']:.1f} | "
            f"{cold['cpu_median_ms']:.1f} | {cold['encoded']} | "
            f"{cold['tokens_before']:,} -> {cold['tokens_after']:,} | "
            f"{cold['messages_after']} |"
        )
        for key, name in names.items():
            w = row[key]
            lines.append(
                f"| {label} | {name} | {w['median_ms']:.1f} | {w['p90_ms']:.1f} | "
                f"{w['min_ms']:.1f} | {w['cpu_median_ms']:.1f} | "
                f"{w['encoded_median']} | "
                f"{w['tokens_before_last']:,} -> {w['tokens_after_last']:,} | "
                f"{w['messages_after_last']} |"
            )
            prefix.append(
                f"| {label} | {name} | {w['calls']} | "
                f"{w['calls_previous_prompt_kept_as_prefix']} | "
                f"{w['prompt_tokens_in_identical_prefix_pct']}% | "
                f"{w['encoded_median']} ({w['encoded_max']}) | {causes(w)} |"
            )
        for key, name in trims.items():
            t = row[key]
            lines.append(
                f"| {label} | {name} | {t['median_ms']:.1f} | {t['p90_ms']:.1f} | "
                f"{t['min_ms']:.1f} | {t['cpu_median_ms']:.1f} | all | "
                f"{t['tokens_before']:,} -> "
                f"{t['tokens_after_exact']:,} | {t['messages_after']} |"
            )
    return "\n".join(lines) + "\n\n" + "\n".join(prefix)


def main(argv: Sequence[str] | None = None) -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few repetitions")
    parser.add_argument(
        "--profile", action="store_true", help="also cProfile the warm path"
    )
    parser.add_argument(
        "--sizes",
        help="comma-separated history sizes: the speed table at every size "
        "(p50/p90/p99/max, ratio to trim_messages; see _speed.py)",
    )
    parser.add_argument("--calls", type=int, default=120, help="warm calls per size")
    parser.add_argument(
        "--rebuilt-max", type=int, default=1_000, help="largest rebuilt size"
    )
    parser.add_argument(
        "--conversations", type=int, default=200, help="for the memory bound"
    )
    args = parser.parse_args(argv)
    if args.sizes:
        speed_table(args)
        return
    # The guard logs every event; keep the console readable (the records are
    # still created, so their cost stays in the timings).
    logging.getLogger("langchain_context_guard").addHandler(logging.NullHandler())
    RESULTS.mkdir(parents=True, exist_ok=True)
    results = run(args.quick)
    suffix = "_quick" if args.quick else ""
    path = RESULTS / f"bench_prepare{suffix}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(table(results))
    print(f"wrote {path}")
    if args.profile:
        text = profile_warm(args.quick)
        prof = RESULTS / f"profile_warm_prepare{suffix}.txt"
        prof.write_text(text)
        print(text[:6000])
        print(f"wrote {prof}")


def speed_table(args: argparse.Namespace) -> None:
    """``--sizes``: the speed table at every size, printed and saved."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _speed

    logging.getLogger("langchain_context_guard").addHandler(logging.NullHandler())
    logging.getLogger("langchain_context_guard").propagate = False
    sizes = [int(s) for s in args.sizes.split(",")]
    results = _speed.run_sizes(
        load_pool(), sizes, args.calls, args.rebuilt_max, args.conversations
    )
    results["machine"] = machine()
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "bench_speed.json"
    command = " ".join(["python", "benchmarks/bench_prepare.py", *sys.argv[1:]])
    path.write_text(json.dumps({"command": command, **results}, indent=2) + "\n")
    print(_speed.table(results))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
