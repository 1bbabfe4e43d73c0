"""How close the guard's token counts come to the provider's own.

On the 42 shared SWE trajectories, every assistant call k that carries the
provider's ``prompt_tokens`` is compared with ``messages[:k]`` counted by:

* tiktoken cl100k alone: ``count_messages(..., anchoring=False)``;
* usage-anchored: ``count_messages(..., anchoring=True)`` (the prefix up to the
  last AIMessage with ``usage_metadata`` counts as the provider reported it);
* ``langchain_core``'s ``count_tokens_approximately`` (plain, and with its
  ``use_usage_metadata_scaling``).

It also finds the characters-per-token ratio for the engine's fallback estimate
(used when no tiktoken encoding loads) that minimises the median absolute error,
against the provider's counts and against cl100k's. Writes JSON to
``benchmarks/results/``. A benchmark, not a test.

Run:  python benchmarks/bench_counter.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

os.environ.setdefault("CONTEXT_GUARD_OFFLINE", "1")

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.utils import count_tokens_approximately

from langchain_context_guard import TiktokenCounter, count_messages
from langchain_context_guard.replay import (
    load_trajectories,
    provider_prompt_tokens,
    shared_trajectory_dir,
)

RESULTS = Path(__file__).resolve().parent / "results"
REPLY_OVERHEAD = 3  # as in langchain_context_guard.engine.tokens._counters
DEFAULT_RATIO = 3.6  # GuardPolicy.chars_per_token's default


def pct(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def errors(estimates: Sequence[float], truth: Sequence[float]) -> dict[str, float]:
    """Signed and absolute % error statistics of ``estimates`` against ``truth``."""
    signed = [100 * (e - t) / t for e, t in zip(estimates, truth, strict=True)]
    absolute = [abs(s) for s in signed]
    return {
        "n": len(signed),
        "signed_median_pct": round(pct(signed, 50), 3),
        "signed_p10_pct": round(pct(signed, 10), 3),
        "signed_p90_pct": round(pct(signed, 90), 3),
        "signed_min_pct": round(min(signed), 3),
        "signed_max_pct": round(max(signed), 3),
        "abs_median_pct": round(pct(absolute, 50), 3),
        "abs_p90_pct": round(pct(absolute, 90), 3),
        "abs_max_pct": round(max(absolute), 3),
        "undercounted_calls_pct": round(
            100 * sum(1 for x in signed if x < 0) / len(signed), 1
        ),
    }


def with_provider(messages: list[BaseMessage]) -> list[BaseMessage]:
    """Copies whose AIMessages name a model provider (needed by LangChain's scaling)."""
    return [
        m.model_copy(
            update={"response_metadata": {**m.response_metadata, "model_provider": "x"}}
        )
        if isinstance(m, AIMessage)
        else m
        for m in messages
    ]


def estimate_fn(ratio: float) -> Callable[[str], int]:
    """The engine's character estimate (``_counters.load_encoding``'s fallback)."""

    def estimate(text: str) -> int:
        return int(len(text) / ratio + 0.999) if text else 0

    return estimate


def char_counter(ratio: float) -> TiktokenCounter:
    """A TiktokenCounter whose text length is the character estimate.

    Same per-message overheads, tool-call and block handling as the real counter;
    only the text -> tokens function differs, as when no encoding can be loaded.
    """
    counter = TiktokenCounter()
    counter._length = estimate_fn(ratio)  # type: ignore[method-assign]
    counter.name = f"chars/{ratio}"
    return counter


def prefix_estimates(
    data: dict[str, list[BaseMessage]],
    calls: dict[str, list[tuple[int, int]]],
    counter: TiktokenCounter,
) -> list[int]:
    """Unanchored counts of every ``messages[:k]``, via per-message prefix sums."""
    out: list[int] = []
    for name, messages in data.items():
        sums = [0]
        for m in messages:
            sums.append(sums[-1] + counter.count_message(m))
        out += [sums[k] + REPLY_OVERHEAD for k, _ in calls[name]]
    return out


def calibrate(
    data: dict[str, list[BaseMessage]],
    calls: dict[str, list[tuple[int, int]]],
    truth: Sequence[int],
    step: float,
) -> dict[str, Any]:
    """The chars-per-token ratio minimising the median abs % error vs ``truth``."""
    best: tuple[float, float] | None = None
    curve: dict[str, float] = {}
    steps = round((6.0 - 2.0) / step)
    for i in range(steps + 1):
        ratio = round(2.0 + i * step, 4)
        est = prefix_estimates(data, calls, char_counter(ratio))
        err = errors(est, truth)["abs_median_pct"]
        if abs((ratio * 10) - round(ratio * 10)) < 1e-9:
            curve[f"{ratio:.1f}"] = err
        if best is None or err < best[1]:
            best = (ratio, err)
    assert best is not None
    ratio = best[0]
    return {
        "best_ratio": ratio,
        "at_best": errors(prefix_estimates(data, calls, char_counter(ratio)), truth),
        "at_default_3.6": errors(
            prefix_estimates(data, calls, char_counter(DEFAULT_RATIO)), truth
        ),
        "abs_median_pct_by_ratio": curve,
    }


def machine() -> dict[str, Any]:
    """Where and with what the benchmark ran."""
    return {
        "nproc": os.cpu_count(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "langchain_core": version("langchain-core"),
        "tiktoken": version("tiktoken"),
    }


def run(quick: bool) -> dict[str, Any]:
    """All measurements; returns the JSON-able results."""
    directory = shared_trajectory_dir()
    if directory is None:
        sys.exit("shared trajectories not found (set CONTEXT_GUARD_TRAJECTORIES)")
    data = load_trajectories(directory)
    if quick:
        data = dict(list(data.items())[:8])
    calls = {name: provider_prompt_tokens(msgs) for name, msgs in data.items()}
    counter = TiktokenCounter()
    truth: list[int] = []
    plain: list[int] = []
    anchored: list[int] = []
    approx: list[int] = []
    scaled: list[int] = []
    has_anchor: list[bool] = []
    start = time.perf_counter()
    text_only: list[int] = []
    for name, messages in data.items():
        tagged = with_provider(messages)
        sums = [0]
        for m in messages:
            sums.append(sums[-1] + counter.text_tokens(m.text))
        for k, prompt in calls[name]:
            prefix = messages[:k]
            truth.append(prompt)
            text_only.append(sums[k])
            plain.append(count_messages(prefix, counter, anchoring=False))
            anchored.append(count_messages(prefix, counter, anchoring=True))
            approx.append(count_tokens_approximately(prefix))
            scaled.append(
                count_tokens_approximately(tagged[:k], use_usage_metadata_scaling=True)
            )
            has_anchor.append(
                any(isinstance(m, AIMessage) and m.usage_metadata for m in prefix)
            )
    elapsed = time.perf_counter() - start

    def only(values: list[int], keep: list[bool]) -> list[int]:
        return [v for v, k in zip(values, keep, strict=True) if k]

    step = 0.05 if quick else 0.01
    return {
        "machine": machine(),
        "quick": quick,
        "trajectories": len(data),
        "calls": len(truth),
        "calls_with_an_anchor": sum(has_anchor),
        "provider_prompt_tokens_total": sum(truth),
        "cl100k_tokens_total": sum(plain),
        "seconds": round(elapsed, 2),
        "cl100k_text_only_tokens_total": sum(text_only),
        "vs_provider": {
            "tiktoken_cl100k_text_only": errors(text_only, truth),
            "tiktoken_cl100k": errors(plain, truth),
            "usage_anchored": errors(anchored, truth),
            "usage_anchored_calls_with_anchor": errors(
                only(anchored, has_anchor), only(truth, has_anchor)
            ),
            "count_tokens_approximately": errors(approx, truth),
            "count_tokens_approximately_usage_scaling": errors(scaled, truth),
        },
        "chars_per_token": {
            "grid": {"from": 2.0, "to": 6.0, "step": step},
            "vs_provider": calibrate(data, calls, truth, step),
            "vs_cl100k": calibrate(data, calls, plain, step),
        },
    }


def table(results: dict[str, Any]) -> str:
    """Markdown tables of the headline figures."""
    lines = [
        "| counter (vs provider prompt_tokens) | calls | signed median | "
        "signed p10 / p90 | abs median | abs p90 | abs max | calls under |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    names = {
        "tiktoken_cl100k_text_only": "cl100k of the message text alone",
        "tiktoken_cl100k": "tiktoken cl100k (`anchoring=False`)",
        "usage_anchored": "usage-anchored (`anchoring=True`), all calls",
        "usage_anchored_calls_with_anchor": "usage-anchored, calls after the first",
        "count_tokens_approximately": "`count_tokens_approximately`",
        "count_tokens_approximately_usage_scaling": "`count_tokens_approximately` "
        "(use_usage_metadata_scaling)",
    }
    for key, name in names.items():
        e = results["vs_provider"][key]
        lines.append(
            f"| {name} | {e['n']} | {e['signed_median_pct']:+.2f}% | "
            f"{e['signed_p10_pct']:+.2f}% / {e['signed_p90_pct']:+.2f}% | "
            f"{e['abs_median_pct']:.2f}% | {e['abs_p90_pct']:.2f}% | "
            f"{e['abs_max_pct']:.2f}% | {e['undercounted_calls_pct']}% |"
        )
    lines += [
        "",
        "| chars-per-token estimate | best ratio | abs median at best | "
        "signed median at best | calls under at best | abs median at 3.6 | "
        "signed median at 3.6 | calls under at 3.6 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key, name in (("vs_provider", "vs provider"), ("vs_cl100k", "vs cl100k")):
        c = results["chars_per_token"][key]
        best, default = c["at_best"], c["at_default_3.6"]
        lines.append(
            f"| {name} | {c['best_ratio']} | {best['abs_median_pct']:.2f}% | "
            f"{best['signed_median_pct']:+.2f}% | "
            f"{best['undercounted_calls_pct']}% | {default['abs_median_pct']:.2f}% | "
            f"{default['signed_median_pct']:+.2f}% | "
            f"{default['undercounted_calls_pct']}% |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="8 trajectories, coarse ratio grid"
    )
    args = parser.parse_args(argv)
    RESULTS.mkdir(parents=True, exist_ok=True)
    results = run(args.quick)
    suffix = "_quick" if args.quick else ""
    path = RESULTS / f"bench_counter{suffix}.json"
    command = " ".join(["python", "benchmarks/bench_counter.py", *sys.argv[1:]])
    path.write_text(json.dumps({"command": command, **results}, indent=2) + "\n")
    print(table(results))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
